"""A rendered page gets nothing of a local file into its screenshot (tsrl/rendering/: page_server.py, __init__.py).

The secret files are all black (a large black PNG, a black HTML page, a stylesheet and a script that paint the
page black, a text file whose content a script paints as a black block), and the pages that embed them are
otherwise white, with no black pixel: any black in a screenshot is a byte of a local file. Each way of embedding
is tried with the static check (`local_reference`) switched off, so the browser alone has to refuse them; the
check itself is tested on the markup. Tests marked `chromium` skip without it unless TSRL_REQUIRE_CHROMIUM=1.
"""

from __future__ import annotations

import hashlib
import http.client
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tsrl import rendering
from tsrl.errors import ConfigError
from tsrl.judging.base import error_kind
from tsrl.rendering import PageRenderer, RenderConfig, find_chromium, local_reference
from tsrl.rendering.page_server import PAGE_HOST, PageServer

TOKEN = "SECRET-9f41c2d7e8b3a650" * 4
FULL = "display:block;width:100vw;height:100vh;border:0;margin:0"
FILL = "document.body.innerHTML = '<div style=\"background:#000;height:100vh\">' + t + '</div>'"


@pytest.fixture
def secret_files(tmp_path: Path) -> Path:
    """The secret files, in tmp_path/secret (the renderer's cache and work folders are under tmp_path too)."""
    folder = tmp_path / "secret"
    folder.mkdir()
    Image.new("RGB", (1600, 1600), (0, 0, 0)).save(folder / "black.png")
    (folder / "black.html").write_text(
        f"<html><body style='margin:0;background:#000;color:#000;font-size:120px'>{TOKEN}"
        "<div style='height:3000px'></div></body></html>"
    )
    (folder / "black.css").write_text("html, body { background: #000 !important }")
    (folder / "black.js").write_text("document.documentElement.style.background = '#000';")
    (folder / "token.txt").write_text(TOKEN)
    return folder


def embeddings(folder: Path) -> dict[str, str]:
    """Each way a page can embed a local file, by name: file: URLs (as markup, and built at run time where the
    static check cannot see them), a file: base for relative URLs, and bare absolute and relative paths."""
    png, html, css, js, txt = (
        folder / name for name in ("black.png", "black.html", "black.css", "black.js", "token.txt")
    )
    built = f'fi" + "le://{html}'  # a file: URL the markup never spells out
    fetched = f"fetch('fi' + 'le://{txt}').then(r => r.text()).then(t => {{ {FILL} }})"
    xhr = (
        f"var x = new XMLHttpRequest(); x.onload = function () {{ var t = x.responseText; {FILL} }};"
        f"x.open('GET', 'fi' + 'le://{txt}'); x.send();"
    )
    return {
        "iframe": f"<iframe src='{html.as_uri()}' style='{FULL}'></iframe>",
        "img": f"<img src='{png.as_uri()}' style='{FULL}'>",
        "object": f"<object data='{html.as_uri()}' style='{FULL}'></object>",
        "embed": f"<embed src='{png.as_uri()}' style='{FULL}'>",
        "css-url-attribute": f"<div style=\"{FULL};background:url('{png.as_uri()}')\"></div>",
        "css-url-stylesheet": f"<style>div {{ background: url({png.as_uri()}) }}</style><div style='{FULL}'></div>",
        "css-import": f"<style>@import url('{css.as_uri()}');</style><p>x</p>",
        "link-stylesheet": f"<link rel='stylesheet' href='{css.as_uri()}'><p>x</p>",
        "script-src": f"<script src='{js.as_uri()}'></script><p>x</p>",
        "script-fetch": f"<script>{fetched}</script><p>x</p>",
        "script-xhr": f"<script>{xhr}</script><p>x</p>",
        "script-built-iframe": f"<script>document.write(\"<iframe src='{built}' style='{FULL}'>\")</script>",
        "refresh": f"<meta http-equiv='refresh' content='0; url={html.as_uri()}'><p>x</p>",
        "script-navigation": f"<script>location.href = 'fi' + 'le://{html}';</script><p>x</p>",
        "file-base": f"<base href='{folder.as_uri()}/'><img src='black.png' style='{FULL}'>",
        "absolute-path": f"<img src='{png}' style='{FULL}'>",
        "relative-path": f"<img src='../../secret/black.png' style='{FULL}'>",  # from <cache>/work-*/page.html
    }


def page(body: str) -> str:
    return f"<!doctype html><html><body style='margin:0;background:#fff;color:#2a7'>{body}</body></html>"


def black_share(path: str) -> float:
    """The share of pure black pixels in a screenshot."""
    pixels = np.asarray(Image.open(path).convert("RGB"), dtype=np.int32)  # [H, W, 3]
    return float((pixels.sum(axis=2) == 0).mean())


def real_cfg(tmp_path: Path, reuse_browser: bool) -> RenderConfig:
    try:
        find_chromium("")
    except ConfigError as missing:
        if os.environ.get("TSRL_REQUIRE_CHROMIUM") == "1":
            pytest.fail(f"TSRL_REQUIRE_CHROMIUM=1 but {missing}", pytrace=False)
        pytest.skip("needs headless Chromium: apt-get install chromium (TSRL_REQUIRE_CHROMIUM=1 fails instead)")
    return RenderConfig(width=480, height=300, cache_dir=str(tmp_path / "shots"), reuse_browser=reuse_browser)


# --- the static check ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "html",
    [
        "<iframe src='file:///etc/hostname'></iframe>",
        '<img alt="x" src = " FILE:///home/user/photo.png">',
        "<object data=file:///etc/hostname></object>",
        '<img srcset="a.png 1x, file:///tmp/b.png 2x">',
        "<div style=\"background: url('file:///tmp/a.png')\"></div>",
        "<style>@import 'file:///tmp/a.css';</style>",
        "<style>body { background: url(file:///tmp/a.png) }</style>",
        "<base href='file:///'>",
        '<meta http-equiv="refresh" content="0; url=file:///etc/hostname">',
        "<script>fetch(`file:///etc/passwd`)</script>",
    ],
)
def test_local_reference_finds_file_urls(html: str) -> None:
    assert local_reference(f"<html><body><p>hi</p>{html}</body></html>") is not None


@pytest.mark.parametrize(
    "html",
    [
        "<p>Choose a file: any file will do. Saved to file:///tmp in the demo.</p>",
        '<a href="file:///home/user/readme.txt">a link is not followed on render</a>',
        "<img src='images/logo.png'><img src='/img/logo.png'>",
        "<script>const profile = {name: 'x'}; // file: notes</script>",
        '<input type="file" name="upload">',
    ],
)
def test_local_reference_lets_other_markup_through(html: str) -> None:
    assert local_reference(f"<html><body>{html}</body></html>") is None


def test_a_page_naming_a_local_file_fails_as_local_before_any_browser_starts(
    tmp_path: Path, secret_files: Path
) -> None:
    """`false` as the browser: had it been started, the page would fail as a crash."""
    renderer = PageRenderer(RenderConfig(chromium="false", cache_dir=str(tmp_path / "shots"), reuse_browser=False))
    markup = ("iframe", "img", "object", "embed", "css-url-attribute", "css-import", "script-src", "file-base")
    pages = [page(embeddings(secret_files)[name]) for name in markup]
    results = renderer.render_many(pages)
    renderer.close()
    assert [error_kind(r.error) for r in results] == ["local"] * len(markup)
    assert all("reads a local file" in r.error and r.path is None for r in results)


# --- the page server ----------------------------------------------------------------------------------------


def ask(server: PageServer, method: str, target: str) -> tuple[int, bytes]:
    """A proxied request, as Chromium sends it: the whole URL in the request line."""
    connection = http.client.HTTPConnection(*server.address.split(":"), timeout=5)
    try:
        connection.request(method, target)
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def test_the_page_server_answers_the_page_in_flight_and_nothing_else() -> None:
    server = PageServer()
    try:
        with server.serving("<p>café</p>") as url:
            assert url.startswith(f"http://{PAGE_HOST}/") and len(url) > len(f"http://{PAGE_HOST}/") + 20
            assert ask(server, "GET", url) == (200, "<p>café</p>".encode())
            assert ask(server, "GET", url + "?x")[0] == 403
            assert ask(server, "GET", f"http://{PAGE_HOST}/etc/hostname")[0] == 403
            assert ask(server, "GET", url.replace(PAGE_HOST, "127.0.0.1"))[0] == 403
            assert ask(server, "GET", "file:///etc/hostname")[0] == 403
            assert ask(server, "CONNECT", f"{PAGE_HOST}:443")[0] == 501
        assert ask(server, "GET", url)[0] == 403  # the page is gone once its render ends
        assert server.refused == 5
    finally:
        server.close()


# --- real Chromium ------------------------------------------------------------------------------------------


@pytest.fixture
def without_static_check(monkeypatch) -> None:
    """The browser alone has to keep the files out."""
    monkeypatch.setattr(rendering, "local_reference", lambda html: None)


@pytest.mark.chromium
def test_no_way_of_embedding_a_local_file_reaches_the_screenshot(tmp_path, secret_files, without_static_check) -> None:
    """On the long-lived path, every way at once; each page is also compared with its twin that embeds a file
    that does not exist, which must render the same pixels (the browser cannot tell the two apart)."""
    ways = embeddings(secret_files)
    missing = {name: body.replace("black.", "missing.").replace("token.", "missing.") for name, body in ways.items()}
    renderer = PageRenderer(real_cfg(tmp_path, reuse_browser=True))
    shots = renderer.render_many([page(body) for body in [*ways.values(), *missing.values()]])
    renderer.close()
    assert [s.error for s in shots] == [None] * len(shots)
    leaked = {name: black_share(shot.path) for name, shot in zip(ways, shots) if black_share(shot.path) > 0}
    assert leaked == {}, f"black pixels (share) from a local file: {leaked}"
    twins = zip(ways, shots[: len(ways)], shots[len(ways) :])
    differ = [name for name, shot, twin in twins if not same_pixels(shot.path, twin.path)]
    assert differ == [], f"these render differently from their twin without the file: {differ}"


@pytest.mark.chromium
def test_a_fresh_browser_per_page_cannot_reach_local_files_either(tmp_path, secret_files, without_static_check) -> None:
    ways = embeddings(secret_files)
    chosen = ("iframe", "img", "css-import", "script-built-iframe", "relative-path")
    renderer = PageRenderer(real_cfg(tmp_path, reuse_browser=False))
    shots = renderer.render_many([page(ways[name]) for name in chosen])
    renderer.close()
    assert [s.error for s in shots] == [None] * len(chosen)
    assert {name: black_share(shot.path) for name, shot in zip(chosen, shots)} == dict.fromkeys(chosen, 0.0)


def same_pixels(first: str, second: str) -> bool:
    return bool(np.array_equal(np.asarray(Image.open(first)), np.asarray(Image.open(second))))


@pytest.mark.chromium
def test_a_page_renders_from_an_http_origin_and_old_screenshots_are_not_reused(tmp_path: Path) -> None:
    """A page sees http:, never file:, as its own scheme; a screenshot cached under the key of the renderer
    that opened pages as files is not served (its pixels could hold a local file)."""
    cfg = real_cfg(tmp_path, reuse_browser=True)
    html = page("<p id=p></p><script>p.textContent = location.protocol === 'http:' ? '' : 'wrong';</script>")
    old_key = hashlib.sha256(f"{cfg.width}x{cfg.height}\n{html}".encode()).hexdigest()
    stale = Path(cfg.cache_dir) / f"{old_key}.png"
    stale.parent.mkdir(parents=True)
    Image.new("RGB", (cfg.width, cfg.height), (0, 0, 0)).save(stale)
    renderer = PageRenderer(cfg)
    shot = renderer.render(html)
    renderer.close()
    assert shot.error is None and not shot.cached and shot.path != str(stale)
    blank = np.asarray(Image.open(shot.path).convert("RGB"))  # [H, W, 3]
    assert (blank == 255).all(), "the page saw a scheme other than http:"
