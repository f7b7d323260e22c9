"""Web pages rendered for the judge (tsrl/rendering/).

The pure tests (page extraction, the network check, failures before launch, the process-group kill, how
RenderingJudge routes pairs) run anywhere: they use a stand-in browser (a shell script) or a fake renderer.
Tests marked `chromium` render real pages in headless Chromium, on both paths (a long-lived browser over the
DevTools pipe, and a fresh browser per page: the `real_cfg` fixture is parametrized); they are skipped where it is
missing, unless TSRL_REQUIRE_CHROMIUM=1, which turns a missing Chromium into a failure. The stand-in browser
speaks no DevTools, so the tests that use it run the per-page path (reuse_browser=false).
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import subprocess
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tsrl import rendering
from tsrl.errors import ConfigError
from tsrl.judging.base import close_judge, error_kind
from tsrl.judging.rendering_judge import RenderingJudge
from tsrl.rendering import (
    PageRenderer,
    RenderConfig,
    Rendering,
    devtools,
    extract_page,
    find_chromium,
    network_reference,
)
from tsrl.types import Count, PairRequest, Prompt, Score, ScoreRequest, Verdict

chromium = pytest.mark.chromium
PROMPT = Prompt("p0", "Write a landing page for a bakery.")
PAGE_A = (
    "<!doctype html><html><head><title>A</title>"
    "<style>body{margin:0;background:#2a7}h1{color:#fff}</style>"
    "</head><body><h1>Bakery A</h1><p>Fresh bread every morning.</p></body></html>"
)
PAGE_B = (
    "<!doctype html><html><head><title>B</title>"
    "<style>body{margin:0;background:#a27}h1{color:#ff0}</style>"
    "</head><body><h1>Bakery B</h1><ul><li>Croissants</li><li>Rye</li></ul></body></html>"
)


def png(width: int, height: int) -> bytes:
    """A valid grey PNG of the given size (no PIL needed)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    body = chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


def png_size(path: str | Path) -> tuple[int, int]:
    """(width, height) from a PNG's signature and IHDR chunk; fails on anything that is not a PNG."""
    head = Path(path).read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def group_alive(pgid: int) -> bool:
    """Whether any process (zombies aside) is still in process group `pgid`."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, IndexError):
            continue  # exited while we looked
        if int(group) == pgid and state != "Z":
            return True
    return False


def wait_group_gone(pgid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while group_alive(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def launches(monkeypatch) -> list[int]:
    """The pids (= process groups) of every browser process the renderer starts during the test."""
    pids: list[int] = []

    class RecordingPopen(subprocess.Popen):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            pids.append(self.pid)

    monkeypatch.setattr(rendering.subprocess, "Popen", RecordingPopen)
    return pids


def fake_browser(tmp_path: Path, body: str) -> str:
    """An executable shell script standing in for Chromium; `$SHOT` is the --screenshot path it was given."""
    script = tmp_path / "fake-chromium"
    script.write_text(
        f'#!/bin/sh\nfor a in "$@"; do case "$a" in --screenshot=*) SHOT="${{a#--screenshot=}}";; esac; done\n{body}\n'
    )
    script.chmod(0o755)
    return str(script)


LONGEST_TEMP = 39  # bytes: Chromium 150 starts with TMPDIR=<a 39-byte folder>/tsrl-chromium-XXXXXXXX, aborts at 40


@pytest.fixture
def temp_dir_of(monkeypatch) -> Iterator[Callable[[int], Path]]:
    """Makes the system temp dir a fresh folder whose path is exactly `length` bytes (removed after the test)."""
    bases: list[Path] = []
    system = tempfile.gettempdir()

    def make(length: int) -> Path:
        bases.append(Path(tempfile.mkdtemp(prefix="t", dir=system)))
        folder = bases[-1] / ("x" * (length - len(str(bases[-1])) - 1))
        folder.mkdir()
        assert len(os.fsencode(folder)) == length
        monkeypatch.setenv("TMPDIR", str(folder))
        monkeypatch.setattr(tempfile, "tempdir", str(folder))
        return folder

    yield make
    for base in bases:
        shutil.rmtree(base, ignore_errors=True)


def shooting_browser(tmp_path: Path) -> str:
    """A stand-in browser that 'renders' every page as the same 8×6 PNG."""
    (tmp_path / "grey.png").write_bytes(png(8, 6))
    return fake_browser(tmp_path, f'cp {tmp_path / "grey.png"} "$SHOT"')


# --- extract_page and network_reference ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, page",
    [
        ("Here you go:\n```css\nh1{}\n```\n```html\n<p>x</p>\n```\nEnjoy", "<p>x</p>"),
        ("```HTML\n<html><body>y</body></html>\n```", "<html><body>y</body></html>"),
        ("```\n<div>bare fence</div>\n```", "<div>bare fence</div>"),
        ("```html\n<html><body>cut off mid-", "<html><body>cut off mid-"),
        (
            "Sure! <!DOCTYPE html><html><body>z</body></html> Hope it helps.",
            "<!DOCTYPE html><html><body>z</body></html>",
        ),
        ("Page: <html lang='en'><body>w</body></html>\n</html> trailing", "<html lang='en'><body>w</body></html>"),
        ("Sure: <html><body>truncated", "<html><body>truncated"),
        ("  <p>just a fragment</p> \n", "<p>just a fragment</p>"),
        ("no html at all", "no html at all"),
    ],
)
def test_extract_page(text: str, page: str) -> None:
    assert extract_page(text) == page


@pytest.mark.parametrize(
    "html, snippet",
    [
        ('<img alt="x" src="https://example.com/a.png">', "<img"),
        ("<script src=//cdn.example.com/x.js></script>", "<script"),
        ('<link rel="stylesheet" href="http://example.com/a.css">', "<link"),
        ('<link href="https://fonts.example.com/css2" rel="preconnect">', "<link"),
        ("<link rel=icon href=//example.com/favicon.ico>", "<link"),
        ("<div style=\"background: url('https://example.com/b.png')\">", "url("),
        ('<style>@import "https://example.com/c.css"; body{}</style>', "@import"),
        ("<style>@import url(//example.com/c.css);</style>", "url("),
        ('<img srcset="small.png 1x, https://example.com/big.png 2x">', "<img"),
        ('<iframe src="https://example.com"></iframe>', "<iframe"),
        ('<meta http-equiv="refresh" content="0; url=https://example.com/">', "<meta"),
        ("<script>fetch('https://api.example.com/data')</script>", "'https"),
    ],
)
def test_network_reference_finds_fetches(html: str, snippet: str) -> None:
    found = network_reference(f"<html><body><p>hi</p>{html}</body></html>")
    assert found is not None and found.startswith(snippet)


@pytest.mark.parametrize(
    "html",
    [
        '<a href="https://example.com">a link is not fetched on render</a>',
        '<area shape="rect" coords="0,0,1,1" href="https://example.com">',
        '<img src="data:image/png;base64,iVBORw0KGgo=">',
        '<div style="background:url(data:image/png;base64,AAAA)">',
        '<link rel="canonical" href="https://example.com/page">',
        "<link rel=alternate href=https://example.com/feed.xml type=application/rss+xml>",
        '<img data-src="https://example.com/lazy.png" src="local.png">',
        "<p>Visit https://example.com or //example.org for more.</p>",
        "<script>// a comment\nconst x = 1; /* http://not.a.string */</script>",
        '<a href="#top">top</a><img src="/img/logo.png"><form action="https://example.com/post"></form>',
    ],
)
def test_network_reference_allows_self_contained(html: str) -> None:
    assert network_reference(f"<html><body>{html}</body></html>") is None


def test_network_reference_reports_the_first() -> None:
    html = '<style>body{background:url(https://x.example/bg.png)}</style><img src="https://y.example/i.png">'
    assert network_reference(html).startswith("url(https://x.example/bg.png)")


# --- PageRenderer with a stand-in browser -------------------------------------------------------------------


@pytest.mark.parametrize("field, value", [("width", 0), ("workers", 0), ("max_bytes", 0), ("timeout_s", 0.0)])
def test_config_rejects_bad_values(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=f"judge.render.{field}"):
        RenderConfig(**{field: value})


def test_missing_chromium_fails_at_construction(tmp_path, monkeypatch) -> None:
    with pytest.raises(ConfigError, match=r"judge\.render\.chromium='/nonexistent/chromium'.*apt-get"):
        PageRenderer(RenderConfig(chromium="/nonexistent/chromium", cache_dir=str(tmp_path)))
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    with pytest.raises(ConfigError, match="no Chromium on PATH.*dnf install chromium"):
        PageRenderer(RenderConfig(cache_dir=str(tmp_path)))


def test_a_temp_dir_too_long_for_chromium_fails_at_construction(tmp_path, temp_dir_of) -> None:
    cfg = RenderConfig(chromium=shooting_browser(tmp_path), cache_dir=str(tmp_path / "shots"))
    temp_dir_of(LONGEST_TEMP)
    PageRenderer(cfg).close()
    long = temp_dir_of(LONGEST_TEMP + 1)
    refusal = rf"temp dir {long}: .* 108 bytes, over the 107 .*at most {LONGEST_TEMP} bytes .*TMPDIR=/tmp"
    with pytest.raises(ConfigError, match=refusal):
        PageRenderer(cfg)


def test_a_browser_log_is_read_for_its_fatal_line(tmp_path) -> None:
    log = tmp_path / "chromium.log"
    log.write_text(
        "[1:1:FATAL:process_singleton_posix.cc:313] Socket path too long: /tmp/x/SingletonSocket.\n"
        "[ERROR:file_io_posix.cc:145] open /sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq: No such file\n"
        "[ERROR:bus.cc:408] Failed to connect to the bus: dbus\n"
    )
    assert devtools.log_tail(log).startswith("[1:1:FATAL:process_singleton_posix.cc:313] Socket path too long")
    log.write_text("first\nlast\n[ERROR:bus.cc:408] no dbus\n\n")
    assert devtools.log_tail(log) == "last"
    log.write_text("")
    assert devtools.log_tail(log) == "(no output)"


@pytest.mark.parametrize(
    "page, kind",
    [
        ("   \n ", "empty"),
        ("<p>" + "x" * 500 + "</p>", "too_large"),
        ('<html><body><img src="https://example.com/a.png"></body></html>', "network"),
    ],
)
@pytest.mark.parametrize("reuse", [True, False], ids=["long-lived", "per-page"])
def test_refused_pages_fail_before_launching(tmp_path, launches, page: str, kind: str, reuse: bool) -> None:
    cfg = RenderConfig(chromium=shooting_browser(tmp_path), max_bytes=300, cache_dir=str(tmp_path), reuse_browser=reuse)
    renderer = PageRenderer(cfg)
    result = renderer.render(page)
    renderer.close()
    assert result.path is None and error_kind(result.error) == kind and not result.cached
    assert launches == []


def test_screenshots_are_cached_by_content(tmp_path, launches) -> None:
    cfg = RenderConfig(chromium=shooting_browser(tmp_path), cache_dir=str(tmp_path / "shots"), reuse_browser=False)
    renderer = PageRenderer(cfg)
    first, again = renderer.render(PAGE_A), renderer.render(PAGE_A)
    wider = PageRenderer(RenderConfig(chromium=cfg.chromium, width=800, cache_dir=cfg.cache_dir, reuse_browser=False))
    other_size = wider.render(PAGE_A)
    renderer.close()
    assert first.error is None and not first.cached and png_size(first.path) == (8, 6)
    assert again == Rendering(first.path, None, again.seconds, cached=True) and again.seconds < 0.05
    assert not other_size.cached and other_size.path != first.path  # the viewport is part of the key
    assert len(launches) == 2


def test_a_first_batch_of_fresh_pages_says_what_and_where_then_reports_progress(tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.setattr(rendering, "PROGRESS_EVERY_S", 0.05)
    browser = fake_browser(tmp_path, f'sleep 0.3; cp {tmp_path / "grey.png"} "$SHOT"')
    (tmp_path / "grey.png").write_bytes(png(8, 6))
    renderer = PageRenderer(
        RenderConfig(chromium=browser, workers=1, cache_dir=str(tmp_path / "shots"), reuse_browser=False)
    )
    with caplog.at_level(logging.INFO, logger="tsrl"):
        first = renderer.render_many([PAGE_A, PAGE_B])
        again = renderer.render_many([PAGE_A, PAGE_B])  # cached: nothing to say
    renderer.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "tsrl"]
    assert lines[0].startswith(f"rendering 2 web pages for the judge: a headless Chromium ({browser}) per page")
    assert str(tmp_path / "shots") in lines[0]
    assert any(line.startswith("rendering: 1 of 2 pages after") and "(a Chromium per page)" in line for line in lines)
    assert not [line for line in lines if line.startswith("rendering 2 web pages")][1:]
    assert [r.error for r in first] == [None, None] and all(r.cached for r in again)


def test_browser_without_screenshot_is_a_crash(tmp_path) -> None:
    browser = fake_browser(tmp_path, "echo segfault in renderer >&2; exit 3")
    renderer = PageRenderer(RenderConfig(chromium=browser, cache_dir=str(tmp_path), reuse_browser=False))
    result = renderer.render(PAGE_A)
    assert result.path is None and result.error.startswith("crash: chromium exited with code 3")
    assert "segfault in renderer" in result.error
    assert not list(tmp_path.glob("*.png"))  # nothing cached


def test_timeout_kills_the_whole_process_group(tmp_path, launches) -> None:
    """The stand-in browser leaves a child behind (as Chromium's renderer would): both must die."""
    browser = fake_browser(tmp_path, "sleep 300 &\nsleep 300")
    renderer = PageRenderer(RenderConfig(chromium=browser, timeout_s=1.0, cache_dir=str(tmp_path), reuse_browser=False))
    result = renderer.render(PAGE_A)
    assert error_kind(result.error) == "timeout" and 1.0 <= result.seconds < 5.0
    assert len(launches) == 1 and wait_group_gone(launches[0])


# --- RenderingJudge with a fake renderer and a fake inner judge ---------------------------------------------


class TableRenderer:
    """Renders from a table page → Rendering; unknown pages fail as crash. Records each batch and close()."""

    def __init__(self, table: dict[str, Rendering]) -> None:
        self.table, self.batches, self.closed = table, [], 0

    def render_many(self, pages: Sequence[str]) -> list[Rendering]:
        self.batches.append(list(pages))
        return [self.table.get(p, Rendering(None, "crash: unknown page", 0.5)) for p in pages]

    def close(self) -> None:
        self.closed += 1


class RecordingJudge:
    """Says the first response is better (p = 0.75) and records every request and close()."""

    def __init__(self) -> None:
        self.requests: list[PairRequest] = []
        self.score_requests: list[ScoreRequest] = []
        self.closed = 0

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        self.requests += requests
        return [Verdict(0.75, raw=f"judged {r.first_image} vs {r.second_image}") for r in requests]

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        self.score_requests += requests
        return [Score(7.0) for _ in requests]

    def drain_metrics(self) -> dict[str, float]:
        return {"calls": Count(len(self.requests))}

    def close(self) -> None:
        self.closed += 1


def fenced(page: str) -> str:
    return f"Here is the page:\n```html\n{page}\n```\nI hope you like it."


SHOTS = {
    "<p>a</p>": Rendering("/shots/a.png", None, 1.0),
    "<p>b</p>": Rendering("/shots/b.png", None, 2.0),
    "<p>c</p>": Rendering("/shots/c.png", None, 0.0, cached=True),
    "<p>slow</p>": Rendering(None, "timeout: no screenshot after 20 s", 20.0),
    "": Rendering(None, "empty: the page has no content", 0.0),
}


def test_rendering_judge_sends_screenshots_and_extracted_pages() -> None:
    inner, renderer = RecordingJudge(), TableRenderer(SHOTS)
    judge = RenderingJudge(inner, extract_page, renderer)
    pairs = [("<p>a</p>", "<p>b</p>"), ("<p>b</p>", "<p>c</p>"), ("<p>a</p>", "<p>c</p>")]
    verdicts = judge.compare([PairRequest(PROMPT, fenced(a), fenced(b)) for a, b in pairs])
    assert renderer.batches == [["<p>a</p>", "<p>b</p>", "<p>c</p>"]]  # each distinct page rendered once
    assert [(r.first, r.second) for r in inner.requests] == pairs
    assert [(r.first_image, r.second_image) for r in inner.requests] == [
        ("/shots/a.png", "/shots/b.png"),
        ("/shots/b.png", "/shots/c.png"),
        ("/shots/a.png", "/shots/c.png"),
    ]
    assert [v.p_first for v in verdicts] == [0.75] * 3
    assert verdicts[1].raw == "judged /shots/b.png vs /shots/c.png"


def test_a_page_that_fails_to_render_loses_without_the_judge() -> None:
    inner = RecordingJudge()
    judge = RenderingJudge(inner, extract_page, TableRenderer(SHOTS))
    pairs = [("<p>a</p>", "<p>slow</p>"), ("<p>slow</p>", "<p>b</p>"), ("<p>b</p>", "<p>a</p>"), ("", "<p>slow</p>")]
    verdicts = judge.compare([PairRequest(PROMPT, fenced(a), fenced(b)) for a, b in pairs])
    assert [v.p_first for v in verdicts] == [1.0, 0.0, 0.75, 0.5]
    assert verdicts[0].raw == "render failed: second: timeout: no screenshot after 20 s"
    assert verdicts[1].raw.startswith("render failed: first: timeout")
    assert verdicts[3].raw == (
        "render failed: both: first: empty: the page has no content; second: timeout: no screenshot after 20 s"
    )
    assert [(r.first, r.second) for r in inner.requests] == [("<p>b</p>", "<p>a</p>")]
    assert all(v.error is None for v in verdicts)  # a broken page is an outcome, not a judge failure


def test_no_judge_call_when_every_pair_failed() -> None:
    inner = RecordingJudge()
    verdicts = RenderingJudge(inner, extract_page, TableRenderer(SHOTS)).compare(
        [PairRequest(PROMPT, fenced("<p>slow</p>"), fenced("<p>a</p>"))]
    )
    assert [v.p_first for v in verdicts] == [0.0] and inner.requests == []


def test_metrics_count_pages_failures_and_cache_hits() -> None:
    judge = RenderingJudge(RecordingJudge(), extract_page, TableRenderer(SHOTS))
    judge.compare(
        [
            PairRequest(PROMPT, fenced(a), fenced(b))
            for a, b in [("<p>a</p>", "<p>slow</p>"), ("<p>c</p>", "<p>b</p>"), ("", "<p>a</p>")]
        ]
    )
    metrics = judge.drain_metrics()
    assert metrics["render/pages"] == 5 and metrics["render/failures"] == 2
    assert metrics["render/failures/timeout"] == 1 and metrics["render/failures/empty"] == 1
    assert metrics["render/cache_hits"] == 1 and metrics["calls"] == 1  # only (c, b) reached the judge
    assert metrics["render/seconds_mean"] == pytest.approx((1.0 + 20.0 + 2.0 + 0.0) / 4)  # hits excluded
    assert all(
        isinstance(metrics[k], Count)
        for k in ("render/pages", "render/failures", "render/cache_hits", "render/failures/timeout")
    )
    assert judge.drain_metrics()["render/pages"] == 0  # drained


def test_score_grades_the_extracted_page_and_close_reaches_both() -> None:
    inner, renderer = RecordingJudge(), TableRenderer(SHOTS)
    judge = RenderingJudge(inner, extract_page, renderer)
    assert judge.score([ScoreRequest(PROMPT, fenced("<p>a</p>"))])[0].value == 7.0
    assert inner.score_requests[0].response == "<p>a</p>" and renderer.batches == [["<p>a</p>"]]  # on its screenshot
    close_judge(judge)
    assert (renderer.closed, inner.closed) == (1, 1)


# --- real Chromium ------------------------------------------------------------------------------------------


@pytest.fixture(params=[True, False], ids=["long-lived", "per-page"])
def real_cfg(request, tmp_path) -> RenderConfig:
    """A small viewport, screenshots under tmp_path, on either path (reuse_browser); skips (or, with
    TSRL_REQUIRE_CHROMIUM=1, fails) without Chromium."""
    return small_real_cfg(tmp_path, reuse_browser=request.param)


def small_real_cfg(tmp_path: Path, reuse_browser: bool) -> RenderConfig:
    try:
        find_chromium("")
    except ConfigError as missing:
        if os.environ.get("TSRL_REQUIRE_CHROMIUM") == "1":
            pytest.fail(f"TSRL_REQUIRE_CHROMIUM=1 but {missing}", pytrace=False)
        pytest.skip("needs headless Chromium: apt-get install chromium (TSRL_REQUIRE_CHROMIUM=1 fails instead)")
    return RenderConfig(
        width=640, height=400, timeout_s=30.0, cache_dir=str(tmp_path / "shots"), reuse_browser=reuse_browser
    )


@chromium
def test_real_page_renders_at_the_configured_size_and_is_cached(real_cfg) -> None:
    renderer = PageRenderer(real_cfg)
    a, b = renderer.render_many([PAGE_A, PAGE_B])
    again = renderer.render(PAGE_A)
    renderer.close()
    assert a.error is None and b.error is None and not a.cached
    assert png_size(a.path) == png_size(b.path) == (640, 400)
    assert Path(a.path).read_bytes() != Path(b.path).read_bytes()
    assert again.cached and again.path == a.path and again.seconds < 0.05


@chromium
@pytest.mark.parametrize(
    "endless",
    [
        "<html><body><h1>spin</h1><script>while (true) {}</script></body></html>",
        '<html><head><meta http-equiv="refresh" content="0"></head><body>again</body></html>',
    ],
    ids=["script-loop", "refresh-loop"],
)
def test_endless_page_times_out_and_leaves_no_process(real_cfg, launches, endless: str, monkeypatch) -> None:
    """Killed on both paths, the browser leaves no process and none of its temporary files (Chromium's
    org.chromium.Chromium.* singleton folder and .org.chromium.Chromium.* shared memory, which a killed browser
    leaves in the temp dir for good)."""
    system_temp = Path(tempfile.mkdtemp(prefix="t"))  # short: the socket's path must fit in 108 bytes
    monkeypatch.setenv("TMPDIR", str(system_temp))
    monkeypatch.setattr(tempfile, "tempdir", str(system_temp))
    try:
        real_cfg.timeout_s = 4.0
        renderer = PageRenderer(real_cfg)
        result = renderer.render(endless)
        renderer.close()
        left = [path.name for path in system_temp.iterdir()]
    finally:
        shutil.rmtree(system_temp)
    assert error_kind(result.error) == "timeout" and result.path is None
    assert 4.0 <= result.seconds < 15.0
    assert len(launches) == 1 and wait_group_gone(launches[0])
    assert left == []


@chromium
def test_chromium_starts_in_the_longest_temp_dir_allowed_and_aborts_past_it(real_cfg, temp_dir_of, monkeypatch) -> None:
    """LONGEST_TEMP is Chromium's own limit: a page renders under it; one byte more is refused at construction,
    and a renderer that skipped the check would see Chromium abort with the cause in its error."""
    temp_dir_of(LONGEST_TEMP)
    renderer = PageRenderer(real_cfg)
    fits = renderer.render(PAGE_A)
    renderer.close()
    assert fits.error is None
    temp_dir_of(LONGEST_TEMP + 1)
    with pytest.raises(ConfigError, match="TMPDIR"):
        PageRenderer(real_cfg)
    monkeypatch.setattr(rendering, "check_temp_dir", lambda: None)
    renderer = PageRenderer(real_cfg)
    try:
        if real_cfg.reuse_browser:
            with pytest.raises(ConfigError, match="Socket path too long"):
                renderer.render(PAGE_B)
        else:
            assert "Socket path too long" in renderer.render(PAGE_B).error
    finally:
        renderer.close()


@chromium
def test_network_page_fails_without_launching(real_cfg, launches) -> None:
    result = PageRenderer(real_cfg).render(
        '<html><head><link rel="stylesheet" href="https://cdn.example.com/'
        'tailwind.min.css"></head><body>x</body></html>'
    )
    assert error_kind(result.error) == "network" and launches == []


class Counting(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        Counting.hits.append(self.path)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@chromium
def test_the_browser_cannot_reach_the_network_either(real_cfg) -> None:
    """A fetch the static check cannot see (a URL built at run time) still goes nowhere: a local server that
    the page asks for gets no request. Without the proxy flags it would get two."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host = f"127.0.0.1:{server.server_address[1]}"
    page = (
        f"<html><body><p>x</p><script>var u = 'http:' + '//{host}/';"
        "new Image().src = u + 'pixel.png'; fetch(u + 'api').catch(() => 0);</script></body></html>"
    )
    assert network_reference(page) is None
    renderer = PageRenderer(real_cfg)
    result = renderer.render(page)
    renderer.close()
    server.shutdown()
    assert result.error is None and Counting.hits == []


@chromium
def test_rendering_judge_over_real_chromium(real_cfg) -> None:
    inner = RecordingJudge()
    judge = RenderingJudge(inner, extract_page, PageRenderer(real_cfg))
    verdicts = judge.compare(
        [PairRequest(PROMPT, fenced(PAGE_A), fenced(PAGE_B)), PairRequest(PROMPT, fenced(PAGE_B), "```html\n\n```")]
    )
    metrics = judge.drain_metrics()
    close_judge(judge)
    assert verdicts[0].p_first == 0.75 and verdicts[1].p_first == 1.0  # the empty page loses
    (request,) = inner.requests
    assert png_size(request.first_image) == png_size(request.second_image) == (640, 400)
    assert request.first == PAGE_A and request.second == PAGE_B
    assert metrics["render/pages"] == 3 and metrics["render/failures/empty"] == 1


def test_mapped_assets_are_inlined_so_the_page_needs_no_network(tmp_path: Path) -> None:
    """A stylesheet or script linked from a CDN and mapped to a local copy (judge.render.assets) is inlined
    before the network check; an unmapped one still fails as network; a missing local copy is a ConfigError."""
    css, url = tmp_path / "framework.css", "https://cdn.example/framework.min.css"
    css.write_text("h1{color:red}")
    page = f'<html><head><link rel="stylesheet" href="{url}"><script src="{url}"></script></head><h1>x</h1></html>'
    inlined = rendering.inline_assets(page, {url: "h1{color:red}"})
    assert "<style>h1{color:red}</style>" in inlined and network_reference(inlined) is None
    assert network_reference(rendering.inline_assets(page, {"https://other.example/a.css": ""})) is not None
    with pytest.raises(ConfigError, match="judge.render.assets maps .* does not exist"):
        rendering.read_asset(url, str(tmp_path / "missing.css"))


@chromium
def test_every_kind_of_broken_page_loses_its_match_within_the_time_limit(real_cfg) -> None:
    """A page that never finishes loading, one that fetches from the network, an empty one and a 5 MB one, each
    against a good page through the judge wrapper over real Chromium: each loses (p_first = 0) without a judge
    call, the reason is in the verdict and counted, and the batch ends within the timeout plus launch time."""
    real_cfg.timeout_s, real_cfg.workers = 4.0, 2
    broken = {
        "timeout": "<html><body><script>while (true) {}</script></body></html>",
        "network": '<html><head><link rel="stylesheet" href="https://cdn.example/x.css"></head><body>x</body></html>',
        "empty": "```html\n\n```",
        "too_large": "<html><body><p>" + "x" * 5_000_000 + "</p></body></html>",
    }
    inner = RecordingJudge()
    judge = RenderingJudge(inner, extract_page, PageRenderer(real_cfg))
    start = time.monotonic()
    verdicts = judge.compare([PairRequest(PROMPT, page, fenced(PAGE_A)) for page in broken.values()])
    elapsed = time.monotonic() - start
    metrics = judge.drain_metrics()
    close_judge(judge)
    assert [v.p_first for v in verdicts] == [0.0] * 4 and inner.requests == []
    assert [v.raw.split(": ")[2] for v in verdicts] == list(broken)  # "render failed: first: <kind>: …"
    assert all(metrics[f"render/failures/{kind}"] == 1 for kind in broken)
    assert elapsed < real_cfg.timeout_s + 20.0


# --- the long-lived browser (judge.render.reuse_browser=true) -----------------------------------------------

ENDLESS = "<html><body><h1>spin</h1><script>while (true) {}</script></body></html>"


@pytest.fixture
def live_cfg(tmp_path) -> RenderConfig:
    """real_cfg on the long-lived path with one worker: the pages of a test go through the same browser."""
    return replace(small_real_cfg(tmp_path, reuse_browser=True), workers=1)


def test_a_browser_that_does_not_speak_devtools_names_the_switch(tmp_path) -> None:
    renderer = PageRenderer(RenderConfig(chromium=fake_browser(tmp_path, "exit 1"), cache_dir=str(tmp_path)))
    with pytest.raises(ConfigError, match=r"--remote-debugging-pipe .*judge\.render\.reuse_browser=false"):
        renderer.render(PAGE_A)
    renderer.close()


@chromium
def test_after_a_timeout_the_next_page_renders(live_cfg, launches, caplog, monkeypatch) -> None:
    monkeypatch.setattr(rendering, "PROGRESS_EVERY_S", 1.0)
    live_cfg.timeout_s = 3.0
    renderer = PageRenderer(live_cfg)
    with caplog.at_level(logging.INFO, logger="tsrl"):
        stuck, good = renderer.render_many([ENDLESS, PAGE_A])
    renderer.close()
    assert error_kind(stuck.error) == "timeout" and 3.0 <= stuck.seconds < 3.0 + 5.0
    assert good.error is None and png_size(good.path) == (640, 400)
    lines = [r.getMessage() for r in caplog.records if r.name == "tsrl"]
    assert "per worker over the DevTools pipe" in lines[0]
    assert any(line.endswith("(1 long-lived Chromium started)") for line in lines[1:])
    assert all(wait_group_gone(pid) for pid in launches)  # the stuck tab's browser (closed or restarted) too


@chromium
@pytest.mark.parametrize("settled", [True, False], ids=["after-exit", "at-once"])
def test_a_browser_killed_between_pages_is_restarted(live_cfg, launches, settled: bool) -> None:
    """Killed between pages, the browser is replaced for the next page, whether its exit is over by then or still
    under way (its pipe closed, poll() not yet reporting it: the next page's first command finds it gone)."""
    renderer = PageRenderer(live_cfg)
    first = renderer.render(PAGE_A)
    os.killpg(launches[0], 9)
    if settled:
        assert wait_group_gone(launches[0])
    second = renderer.render(PAGE_B)
    renderer.close()
    assert first.error is None and second.error is None and len(launches) == 2
    assert all(wait_group_gone(pid) for pid in launches)


@chromium
def test_a_browser_that_dies_mid_page_fails_it_as_a_crash_and_the_next_page_renders(live_cfg, launches) -> None:
    renderer = PageRenderer(live_cfg)
    assert renderer.render("<p>warm</p>").error is None  # the browser is up
    killer = threading.Timer(1.0, os.killpg, (launches[0], 9))
    killer.start()
    crashed = renderer.render(ENDLESS)  # would time out after 30 s
    killer.join()
    after = renderer.render(PAGE_A)
    renderer.close()
    assert error_kind(crashed.error) == "crash" and crashed.seconds < 5.0
    assert after.error is None and len(launches) == 2


@chromium
def test_close_leaves_no_browser_process(live_cfg, launches) -> None:
    live_cfg.workers = 2
    renderer = PageRenderer(live_cfg)
    assert [r.error for r in renderer.render_many([PAGE_A, PAGE_B, "<p>c</p>", "<p>d</p>"])] == [None] * 4
    assert 1 <= len(launches) <= 2 and all(group_alive(pid) for pid in launches)  # alive between pages
    renderer.close()
    assert all(wait_group_gone(pid) for pid in launches)


@chromium
def test_both_paths_give_the_same_pixels(live_cfg, tmp_path) -> None:
    """Checked: pixel-identical for a plain page taller than the viewport (scrollbars hidden on both paths, same
    viewport, device scale 1, same fonts). The PNG bytes may still differ (encoder settings), so pixels are
    compared."""
    image = pytest.importorskip("PIL.Image")
    page = PAGE_A.replace("</body>", "<p>line</p>" * 40 + "</body>")  # taller than the viewport: a scrollbar
    shots = {}
    for reuse in (True, False):
        cache = str(tmp_path / f"shots-{reuse}")
        renderer = PageRenderer(replace(live_cfg, reuse_browser=reuse, cache_dir=cache))
        shots[reuse] = renderer.render(page)
        renderer.close()
    live, fresh = (image.open(shots[reuse].path).convert("RGB") for reuse in (True, False))
    assert live.size == fresh.size == (640, 400)
    assert live.tobytes() == fresh.tobytes()


def test_the_rendered_judges_cache_keys_name_the_judge_that_answers(tmp_path) -> None:
    """Two judge models behind RenderingJudge keep apart in a shared cache (the keys named "RenderingJudge"
    before, so a second model was served the first one's verdicts)."""
    from tsrl.judging import wrap
    from tsrl.judging.wrappers import JudgePolicyConfig

    answers = []
    for model, p in (("judge-one", 0.75), ("judge-two", 0.25)):
        inner = RecordingJudge()
        inner.identity = inner.score_identity = inner.list_identity = model
        inner.compare = lambda requests, p=p: [Verdict(p) for _ in requests]
        rendered = RenderingJudge(inner, extract_page, TableRenderer(SHOTS))
        assert rendered.identity == f"{model}|rendered"
        cfg = JudgePolicyConfig(order="fixed", cache_path=str(tmp_path / "cache.sqlite"))
        judge = wrap(rendered, cfg)
        answers.append(judge.compare([PairRequest(PROMPT, fenced("<p>a</p>"), fenced("<p>b</p>"))])[0].p_first)
    assert answers == [0.75, 0.25]
