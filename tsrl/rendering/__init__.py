"""Rendered judging (task=web): pages become screenshots in headless Chromium and the judge compares those.

Why screenshots: WebSight-style tasks ask for a page that *looks* right. Two sources that differ in one CSS
rule can look nothing alike, and a judge reading markup rewards markup. The judge sees what a user would see
(judge=openai sends first_image/second_image as image parts: judge.vision null, the default, does so wherever
pages are rendered, as TSRL's web judge sees rendered pages; judge.vision=false gives a text judge the HTML).

Why the network is blocked: a page that pulls a stylesheet, font or image from a CDN renders differently from
day to day (and offline not at all), so its reward would not be a property of the completion. The task asks
for self-contained pages: `network_reference` refuses a page that would fetch before any browser starts, and
Chromium's only proxy is the page server (tsrl/rendering/page_server.py), which answers nothing but the page
itself, with every host unresolvable, in case the static check misses a fetch.

Why nothing local can be shown: the screenshot goes to the judge, often a hosted one, and a page opened as a
file: URL could draw any file the process can read into it (an <iframe>, <img>, <object>, <embed>, stylesheet or
script naming file:///…, or a path resolved against the page's file: URL). So a page is never opened from a
file: it is served at an http URL of its own by the page server, and Chromium refuses every file: load to a page
of an http origin, whatever its markup or script asks; a path resolves against that http URL and is refused by
the server. `local_reference` fails a page that names a file: URL before any browser starts (kind `local`), so
the reason shows instead of a page rendered without its file.

Failures lose: a page that is empty, over `max_bytes`, fetches from the network, names a local file, or does
not finish within `timeout_s` (an endless script, a refresh loop) loses its match (p_first = 0 or 1) without a
judge call; both failed → a tie. The reason stays in the verdict's raw text and is counted
(render/failures/<kind>), so a broken renderer shows in the logs instead of looking like a bad policy.

Pointwise grades (reward=rubric, rlaif, adaptive pointwise) are given on the screenshot too, so that a grade
and a verdict of the same page see the same thing: each graded page is rendered (with the pairs' cache), a
page that fails to render gets the lowest grade, 0, without a judge call (the reason in the grade's raw text,
counted alike), and the others are asked with the extracted page and its screenshot. Lists (reward=listwise)
alike: a page that fails gets 0 and the others are asked as a shorter list. The judge that does this,
RenderingJudge, lives in tsrl/judging/rendering_judge.py.

Each worker drives one long-lived Chromium over the DevTools pipe (tsrl/rendering/devtools.py), a fresh tab per
page; a page that hangs past timeout_s or kills the browser costs a browser restart, so it cannot poison the
next page. reuse_browser=false starts a fresh Chromium per page (own process group, throwaway profile, the
group killed on timeout) as before: ~1 s a page on 2 cores (benchmarks/render_pages.py), mostly browser
start-up.
Screenshots are cached as PNG by sha256(RENDER_VERSION, width, height, html), so the frozen anchor pages render
once, and a renderer whose pixels can differ (RENDER_VERSION bumped) never serves an older one's screenshots.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

from tsrl.errors import ConfigError
from tsrl.progress import PROGRESS_EVERY_S, duration
from tsrl.rendering.devtools import BrowserPool, check_temp_dir, chromium_temp, kill_group, log_tail
from tsrl.rendering.page_server import PageServer

log = logging.getLogger("tsrl")
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
VIRTUAL_TIME_MS = 3000  # simulated time for timers and animations before the shot (fast-forwarded)
RENDER_VERSION = "http-origin"  # in every screenshot's cache key: bumped whenever the pixels of a page can change
NOCASE = re.IGNORECASE
FENCE = re.compile(r"```[ \t]*(\w*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
DOCUMENT = re.compile(r"(?:<!doctype\s+html|<html\b).*?(?:</html\s*>|\Z)", NOCASE | re.DOTALL)
REMOTE = r"""\s*["']?\s*(?:https?:)?//"""  # an optionally quoted http(s) or protocol-relative URL
TAG = re.compile(r"<([a-zA-Z][\w:-]*)(\s[^>]*)?>")
URL_ATTRIBUTE = re.compile(rf"(?:^|\s)(?:src|href|xlink:href|poster|data|background)\s*={REMOTE}", NOCASE)
SRCSET = re.compile(r"""(?:^|\s)(?:src|imagesrc)set\s*=\s*["'][^"']*?(?:https?:)?//""", NOCASE)
REL = re.compile(r"""(?:^|\s)rel\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]*))""", NOCASE)
REFRESH_URL = re.compile(rf"http-equiv\s*=\s*[\"']?refresh.*url\s*={REMOTE}", NOCASE)
CSS_URL = re.compile(rf"(?:url\(|@import){REMOTE}", NOCASE)
SCRIPT = re.compile(r"<script\b[^>]*>(.*?)</script\s*>", NOCASE | re.DOTALL)
SCRIPT_URL = re.compile(r"""["'`]\s*https?://""", NOCASE)  # not bare `//`: in a script that is a comment
FILE = r"""\s*["']?\s*file:"""  # an optionally quoted file: URL
LOCAL_ATTRIBUTE = re.compile(rf"(?:=|,|url\(){FILE}", NOCASE)  # a value, a srcset entry, a style's url()
CSS_LOCAL = re.compile(rf"(?:url\(|@import){FILE}", NOCASE)
SCRIPT_LOCAL = re.compile(r"""["'`]\s*file:""", NOCASE)
LINKS = ("a", "area")  # followed on click, never fetched on render
UNFETCHED_RELS = {"canonical", "alternate", "author", "license", "help", "next", "prev", "bookmark", "me"}


@dataclass
class RenderConfig:
    """`judge.render`: screenshots of web pages for the judge (tasks with page(text), i.e. task=web)."""

    OPERATIONAL: ClassVar[tuple[str, ...]] = ("chromium", "timeout_s", "workers", "cache_dir", "reuse_browser")
    """Settings that do not change what the judge sees (left out of the judge's fingerprint)."""

    enabled: bool = True
    """Render pages of Rendered tasks (false: the judge compares the HTML source alone)."""
    chromium: str = ""
    """Chromium binary, a path or a name on PATH; empty = chromium, chromium-browser or google-chrome."""
    width: int = 1024
    """Viewport width in CSS pixels = screenshot width."""
    height: int = 768
    """Viewport height = screenshot height (what lies below the fold is not shown)."""
    timeout_s: float = 20.0
    """Wall-clock limit per page; a page still busy then (endless script, refresh loop) fails as timeout."""
    max_bytes: int = 200_000
    """Pages larger than this (UTF-8 bytes) fail as too_large without rendering."""
    workers: int = 2
    """Pages rendered at once (one Chromium each)."""
    reuse_browser: bool = True
    """One long-lived Chromium per worker driven over the DevTools pipe; false: a fresh Chromium per page, as
    before."""
    cache_dir: str = ""
    """Screenshot cache (one PNG per page hash); empty = tsrl-render under the system temp folder."""
    assets: dict[str, str] = field(default_factory=dict)
    """URL → local file: a stylesheet or script a page links from the network is inlined from the file before
    rendering (a dataset's pages that link a CSS framework from a CDN: download it once and name it here; set
    it in a YAML file, URL keys do not fit Hydra's command-line grammar)."""

    def __post_init__(self) -> None:
        for name in ("width", "height", "max_bytes", "workers"):
            if getattr(self, name) < 1:
                raise ConfigError(f"judge.render.{name} must be at least 1, got {getattr(self, name)}.")
        if self.timeout_s <= 0:
            raise ConfigError(f"judge.render.timeout_s must be > 0, got {self.timeout_s}.")


@dataclass(frozen=True)
class Rendering:
    """One page's screenshot: a PNG path, or an error "<kind>: <message>" (kinds empty, too_large, network, local,
    timeout, crash). seconds = wall time spent; cached = served from the screenshot cache."""

    path: str | None
    error: str | None
    seconds: float
    cached: bool = False


class Renderer(Protocol):
    def render_many(self, pages: Sequence[str]) -> list[Rendering]: ...

    def close(self) -> None: ...


def extract_page(text: str) -> str:
    """The HTML document in a completion: the first ```html (or bare ```) block, else the <!doctype…/<html>…
    </html> span (to the end when cut off), else the whole text; stripped."""
    for fence in FENCE.finditer(text):
        if fence.group(1).lower() in ("", "html", "htm"):
            return fence.group(2).strip()
    document = DOCUMENT.search(text)
    return (document.group(0) if document else text).strip()


def network_reference(html: str) -> str | None:
    """The first markup that would fetch from the network on render, or None. Links (<a href>, <area href>),
    data: URLs and <link rel=canonical/alternate/…> fetch nothing."""
    found: list[re.Match[str]] = []
    for tag in TAG.finditer(html):
        name, attributes = tag.group(1).lower(), tag.group(2) or ""
        rel = REL.search(attributes)
        rels = set("".join(rel.groups(default="")).lower().split()) if rel else set()
        if name in LINKS or (name == "link" and rels and rels <= UNFETCHED_RELS):
            continue
        refresh = name == "meta" and REFRESH_URL.search(attributes)
        if URL_ATTRIBUTE.search(attributes) or SRCSET.search(attributes) or refresh:
            found.append(tag)
    found += CSS_URL.finditer(html)
    for script in SCRIPT.finditer(html):
        found += SCRIPT_URL.finditer(html, script.start(1), script.end(1))
    if not found:
        return None
    start = min(match.start() for match in found)
    return html[start : start + 120].split("\n")[0]


def local_reference(html: str) -> str | None:
    """The first markup that names a local file (a file: URL in an attribute, a stylesheet or a script string),
    or None. Links (<a href>, <area href>) are followed on click, never on render. The page's http origin would
    refuse the load anyway; this check says why the page fails instead of rendering it without the file."""
    found: list[re.Match[str]] = []
    for tag in TAG.finditer(html):
        if tag.group(1).lower() not in LINKS and LOCAL_ATTRIBUTE.search(tag.group(2) or ""):
            found.append(tag)
    found += CSS_LOCAL.finditer(html)
    for script in SCRIPT.finditer(html):
        found += SCRIPT_LOCAL.finditer(html, script.start(1), script.end(1))
    if not found:
        return None
    start = min(match.start() for match in found)
    return html[start : start + 120].split("\n")[0]


def find_chromium(setting: str) -> str:
    """The Chromium binary to run, or a ConfigError saying how to get one."""
    for name in (setting,) if setting else CHROMIUM_NAMES:
        if path := shutil.which(name):
            return path
    missing = (
        f"judge.render.chromium={setting!r} is not an executable"
        if setting
        else f"no Chromium on PATH (looked for {', '.join(CHROMIUM_NAMES)})"
    )
    raise ConfigError(
        f"Rendering web pages needs headless Chromium, but {missing}: install it (Debian/Ubuntu"
        ": apt-get install chromium; Fedora: dnf install chromium), set judge.render.chromium"
        " to its path, or set judge.render.enabled=false to judge the HTML source."
    )


class PageRenderer:
    """Screenshots of HTML pages, cached by content hash: in one long-lived headless Chromium per worker (a
    browser per worker rather than a tab per worker, so a stuck or crashing page restarts only its own worker's
    browser), or in a fresh Chromium per page (reuse_browser=false)."""

    def __init__(self, cfg: RenderConfig) -> None:
        self.cfg = cfg
        self.chromium = find_chromium(cfg.chromium)
        check_temp_dir()
        self.cache_dir = Path(cfg.cache_dir or Path(tempfile.gettempdir()) / "tsrl-render").expanduser()
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.pool = ThreadPoolExecutor(cfg.workers, thread_name_prefix="tsrl-render")
        self.assets = {url: read_asset(url, path) for url, path in cfg.assets.items()}
        self.server = PageServer()  # the browsers' only source and proxy: pages never open as file: URLs
        self.warm = False  # the first batch that starts browsers says so
        self.browsers = (
            BrowserPool(self._live_flags, cfg.workers, self.cache_dir) if cfg.reuse_browser else None
        )  # started on first use

    def render_many(self, pages: Sequence[str]) -> list[Rendering]:
        """Every page's rendering, in order; a batch that takes long says what it does and how far it got."""
        targets = [self._target(html) for html in pages]  # inlined and hashed once per page
        fresh = sum(not target.is_file() for _, target in targets)
        if fresh and not self.warm:
            self.warm = True
            how = (
                f"one long-lived headless Chromium ({self.chromium}) per worker over the DevTools pipe, a fresh tab "
                "per page (restarted after a timeout or crash)"
                if self.browsers
                else f"a headless Chromium ({self.chromium}) per page"
            )
            log.info(
                "rendering %d web pages for the judge: %s, %d at a time (judge.render.workers), at most %g s a "
                "page; screenshots are cached by content in %s, so each page renders once; a cold browser's first "
                "pages take longest (progress every %.0f s)",
                fresh,
                how,
                self.cfg.workers,
                self.cfg.timeout_s,
                self.cache_dir,
                PROGRESS_EVERY_S,
            )
        futures = [self.pool.submit(self._render_at, html, target) for html, target in targets]
        start = time.monotonic()
        while pending := wait(futures, timeout=PROGRESS_EVERY_S).not_done:
            done = len(futures) - len(pending)
            browsers = (
                f"{self.browsers.started} long-lived Chromium started" if self.browsers else "a Chromium per page"
            )
            log.info(
                "rendering: %d of %d pages after %s (%s)",
                done,
                len(futures),
                duration(time.monotonic() - start),
                browsers,
            )
        return [future.result() for future in futures]

    def _target(self, html: str) -> tuple[str, Path]:
        """The page with its assets inlined, and where its screenshot is cached."""
        html = inline_assets(html, self.assets)
        key = hashlib.sha256(f"{RENDER_VERSION}\n{self.cfg.width}x{self.cfg.height}\n{html}".encode()).hexdigest()
        return html, self.cache_dir / f"{key}.png"

    def render(self, html: str) -> Rendering:
        return self._render_at(*self._target(html))

    def _render_at(self, html: str, target: Path) -> Rendering:
        """The screenshot of an inlined page at its cache path (taken unless it is there)."""
        start = time.monotonic()
        if target.is_file():
            return Rendering(str(target), None, time.monotonic() - start, cached=True)
        error = self._refusal(html) or self._shoot(html, target)
        return Rendering(None if error else str(target), error, time.monotonic() - start)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        if self.browsers:
            self.browsers.close()
        self.server.close()

    def _refusal(self, html: str) -> str | None:
        """Why a page fails before any browser starts (None: render it)."""
        size = len(html.encode())
        if not html.strip():
            return "empty: the page has no content"
        if size > self.cfg.max_bytes:
            return f"too_large: {size} bytes, over judge.render.max_bytes={self.cfg.max_bytes}"
        if reference := network_reference(html):
            return f"network: the page fetches from the network ({reference})"
        if reference := local_reference(html):
            return f"local: the page reads a local file ({reference})"
        return None

    def _shoot(self, html: str, target: Path) -> str | None:
        """Screenshot the page, served at an http URL of its own (never a file: URL), and move it to `target`; the
        error string when it fails."""
        with (
            tempfile.TemporaryDirectory(prefix="work-", dir=self.cache_dir, ignore_cleanup_errors=True) as d,
            self.server.serving(html) as url,
        ):
            work = Path(d)
            shot = work / "shot.png"
            if self.browsers:
                viewport = (self.cfg.width, self.cfg.height)
                error = self.browsers.shoot(url, shot, viewport, VIRTUAL_TIME_MS, self.cfg.timeout_s)
            else:
                error = self._shoot_fresh(url, work, shot)
            if error:
                return error
            os.replace(shot, target)  # atomic: a concurrent reader sees the whole PNG or none
        return None

    def _shoot_fresh(self, url: str, work: Path, shot: Path) -> str | None:
        """Run a fresh Chromium (profile and log under `work`) on the page at `url`, its screenshot to `shot`."""
        log = work / "chromium.log"
        flags = [
            *self._flags(work / "profile"),
            f"--screenshot={shot}",
            f"--virtual-time-budget={VIRTUAL_TIME_MS}",
        ]
        scratch = chromium_temp()
        with log.open("wb") as stderr:  # a file, not a pipe: a chatty browser must never block on it
            process = subprocess.Popen(
                [self.chromium, *flags, url],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,  # its own process group
                env={**os.environ, "TMPDIR": scratch},
            )
            try:
                code = process.wait(timeout=self.cfg.timeout_s)
            except subprocess.TimeoutExpired:
                return f"timeout: no screenshot after {self.cfg.timeout_s:g} s (judge.render.timeout_s)"
            finally:
                kill_group(process)
                shutil.rmtree(scratch, ignore_errors=True)
        if code != 0 or not shot.is_file() or shot.stat().st_size == 0:
            return f"crash: chromium exited with code {code} and no screenshot: {log_tail(log)}"
        return None

    def _live_flags(self, profile: Path) -> list[str]:
        return [self.chromium, *self._flags(profile), "--remote-debugging-pipe"]

    def _flags(self, profile: Path) -> list[str]:
        """The browser-wide flags of both paths: headless, no GPU, a throwaway profile, and every request sent to
        the page server, which answers the page alone (the loopback too; no host name resolves, and the proxy's
        own address is left out of that rule so the browser can reach it)."""
        return [
            "--headless=new",
            "--disable-gpu",
            "--no-sandbox",  # containers: no user namespaces, root
            "--hide-scrollbars",
            "--mute-audio",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            f"--window-size={self.cfg.width},{self.cfg.height}",
            f"--proxy-server={self.server.address}",
            "--proxy-bypass-list=<-loopback>",  # the loopback through the proxy too
            f"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE {self.server.address.split(':')[0]}",
        ]


def read_asset(url: str, path: str) -> str:
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"judge.render.assets maps {url} to {file}, which does not exist; download it once there.")
    return file.read_text(encoding="utf-8")


def inline_assets(html: str, assets: dict[str, str]) -> str:
    """The page with each <link href=URL> / <script src=URL></script> of a known URL replaced by the local
    file's text in a <style> / <script> element (the page then needs no network for it)."""
    for url, text in assets.items():
        quoted = rf"""["']{re.escape(url)}["']"""
        style, script = f"<style>{text}</style>", f"<script>{text}</script>"
        html = re.sub(rf"<link\b[^>]*href\s*=\s*{quoted}[^>]*>", lambda _, s=style: s, html, flags=NOCASE)
        html = re.sub(
            rf"<script\b[^>]*src\s*=\s*{quoted}[^>]*>\s*</script\s*>", lambda _, s=script: s, html, flags=NOCASE
        )
    return html
