"""Long-lived headless Chromium driven over the Chrome DevTools Protocol on a pipe (judge.render.reuse_browser).

`--remote-debugging-pipe` makes the browser read commands from its fd 3 and write replies and events to its fd 4,
each message one JSON object ended by a NUL byte. A small shell shim puts our two pipe ends there (`3<&0 4>&1`,
then /dev/null on stdin and stdout), so the launch needs no preexec_fn, which is unsafe in a threaded process.

Per page, in a browser that lives across pages: a new target (tab) attached with flatten=true (its commands
carry a sessionId), the viewport set to width × height at device scale 1, scrollbars hidden, a virtual-time
budget (timers and animations fast-forwarded, paused while the page is still loading), navigate, wait
for Emulation.virtualTimeBudgetExpired, Page.captureScreenshot, close the target. That is what the per-page
browser's --window-size / --hide-scrollbars / --virtual-time-budget / --screenshot flags do.

One browser per worker, not one browser with a tab per worker: a page that hangs its renderer (while(true){})
or kills the browser then costs only its own worker a restart, never another worker's page in flight, and each
browser is driven by one thread at a time, so the client needs no reader thread or locks.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tsrl.errors import ConfigError

SHIM = 'exec "$@" 3<&0 4>&1 0</dev/null 1>/dev/null'  # our pipe ends become the browser's fds 3 and 4
CLOSE_GRACE_S = 2.0  # a stuck target that the browser does not close within this is ended with the browser
START_LIMIT_S = 10.0  # at least this long for a browser's first answer (cold start on a busy machine)
SCRATCH_PREFIX = "tsrl-chromium-"  # each browser's private TMPDIR: this, then mkdtemp's 8 random characters
SOCKET_PATH_MAX = 107  # a Unix socket's path, in bytes: sun_path holds 108 with the closing NUL


class BrowserGone(Exception):
    """The browser exited or closed its end of the pipe."""


class Stale(BrowserGone):
    """The browser was gone before the page reached it (it died after its last page, or was killed meanwhile)."""


class NoAnswer(Exception):
    """The awaited reply or event did not come before the deadline."""


class Browser:
    """One Chromium process and its DevTools pipe; used by one thread at a time."""

    def __init__(self, command: list[str], log: Path, start_limit_s: float) -> None:
        command_read, self.command_fd = os.pipe()  # both non-inheritable: no other browser holds our ends
        self.reply_fd, reply_write = os.pipe()
        self.scratch = chromium_temp()
        with log.open("ab") as stderr:  # a file, not a pipe: a chatty browser must never block on it
            self.process = subprocess.Popen(
                ["/bin/sh", "-c", SHIM, "sh", *command],
                stdin=command_read,
                stdout=reply_write,
                stderr=stderr,
                start_new_session=True,  # its own process group
                env={**os.environ, "TMPDIR": self.scratch},
            )
        os.close(command_read)
        os.close(reply_write)
        self.log, self.buffer, self.events, self.last_id = log, bytearray(), [], 0
        try:
            self.call("Browser.getVersion", deadline=time.monotonic() + start_limit_s)
        except (BrowserGone, NoAnswer):
            self.close()  # a browser that does not speak over the pipe must not linger
            raise

    def call(self, method: str, params: dict | None = None, session: str = "", *, deadline: float) -> dict:
        """Send one command and wait for its reply (events that arrive meanwhile are kept for wait_event)."""
        self.last_id += 1
        message: dict[str, Any] = {"id": self.last_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        payload = json.dumps(message).encode() + b"\0"
        try:
            while payload:
                payload = payload[os.write(self.command_fd, payload) :]
        except (BrokenPipeError, OSError) as gone:
            raise BrowserGone(f"the browser's command pipe is closed ({gone})") from gone
        while True:
            reply = self._next(deadline, method)
            if reply.get("id") == self.last_id:
                if "error" in reply:
                    raise BrowserGone(f"{method} failed: {reply['error'].get('message', reply['error'])}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)  # replies to abandoned commands of an earlier page are dropped

    def wait_event(self, method: str, session: str, *, deadline: float) -> dict:
        while True:
            for event in self.events:
                if event["method"] == method and event.get("sessionId") == session:
                    self.events.remove(event)
                    return event
            message = self._next(deadline, method)
            if "method" in message:
                self.events.append(message)

    def _next(self, deadline: float, awaited: str) -> dict:
        """The next message from the browser: NoAnswer at the deadline, BrowserGone at end of file."""
        while (end := self.buffer.find(b"\0")) < 0:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.reply_fd], [], [], left)[0]:
                raise NoAnswer(f"no {awaited} from the browser in time")
            chunk = os.read(self.reply_fd, 1 << 20)
            if not chunk:
                raise BrowserGone(
                    f"the browser closed its pipe (exit code {self.process.poll()}): {log_tail(self.log)}"
                )
            self.buffer += chunk
        message = json.loads(self.buffer[:end])
        del self.buffer[: end + 1]
        return message

    def capture(self, url: str, viewport: tuple[int, int], virtual_ms: int, deadline: float) -> bytes:
        """The PNG of `url` in a fresh tab, closed afterwards; NoAnswer at the deadline (the tab closed, or
        BrowserGone when the browser does not close it within CLOSE_GRACE_S), BrowserGone when it dies."""
        self.events.clear()
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"}, deadline=deadline)["targetId"]
        except BrowserGone as gone:  # before the page: a death that poll() had not seen yet (exit still under way)
            raise Stale(str(gone)) from gone
        try:
            png = self._shoot_target(target, url, viewport, virtual_ms, deadline)
        except NoAnswer:
            self._close_target(target)
            raise
        self._close_target(target)
        return png

    def _shoot_target(
        self, target: str, url: str, viewport: tuple[int, int], virtual_ms: int, deadline: float
    ) -> bytes:
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True}, deadline=deadline)
        session = attached["sessionId"]
        metrics = {"width": viewport[0], "height": viewport[1], "deviceScaleFactor": 1, "mobile": False}
        self.call("Emulation.setDeviceMetricsOverride", metrics, session, deadline=deadline)
        self.call("Emulation.setScrollbarsHidden", {"hidden": True}, session, deadline=deadline)
        self.call("Page.navigate", {"url": url}, session, deadline=deadline)  # answered once the page commits
        policy = {"policy": "pauseIfNetworkFetchesPending", "budget": virtual_ms}  # before: about:blank's budget
        self.call("Emulation.setVirtualTimePolicy", policy, session, deadline=deadline)
        self.wait_event("Emulation.virtualTimeBudgetExpired", session, deadline=deadline)
        shot = self.call("Page.captureScreenshot", {"format": "png"}, session, deadline=deadline)
        return base64.b64decode(shot["data"])

    def _close_target(self, target: str) -> None:
        try:
            self.call("Target.closeTarget", {"targetId": target}, deadline=time.monotonic() + CLOSE_GRACE_S)
        except NoAnswer as stuck:
            raise BrowserGone(f"it did not close a stuck tab within {CLOSE_GRACE_S:g} s") from stuck

    def close(self) -> None:
        kill_group(self.process)
        for fd in (self.command_fd, self.reply_fd):
            os.close(fd)
        shutil.rmtree(self.scratch, ignore_errors=True)


class BrowserPool:
    """`slots` long-lived browsers, started on first use and restarted after a crash or a stuck page; each
    render takes one browser for the whole page, so at most `slots` pages are in flight."""

    def __init__(self, command: Callable[[Path], list[str]], slots: int, home: Path) -> None:
        self.command, self.home = command, home
        self.idle: queue.SimpleQueue[tuple[Browser, Path] | None] = queue.SimpleQueue()
        for _ in range(slots):
            self.idle.put(None)
        self.slots, self.started = slots, 0

    def shoot(self, url: str, shot: Path, viewport: tuple[int, int], virtual_ms: int, timeout_s: float) -> str | None:
        """Write the screenshot of `url` to `shot`; the error string ("timeout: …", "crash: …") when it fails."""
        browser = self.idle.get()
        try:
            try:
                browser = self._live(browser, timeout_s)
                png = browser[0].capture(url, viewport, virtual_ms, time.monotonic() + timeout_s)
            except Stale:  # it died between pages: this page gets a fresh browser, once
                browser = self._live(self._stop(browser), timeout_s)
                png = browser[0].capture(url, viewport, virtual_ms, time.monotonic() + timeout_s)
        except NoAnswer:
            return f"timeout: no screenshot after {timeout_s:g} s (judge.render.timeout_s)"
        except BrowserGone as gone:
            browser = self._stop(browser)
            return f"crash: the long-lived chromium failed on this page: {gone}"
        finally:
            self.idle.put(browser)
        shot.write_bytes(png)
        return None

    def _live(self, browser: tuple[Browser, Path] | None, timeout_s: float) -> tuple[Browser, Path]:
        """`browser` if its process still runs, else a fresh one (started on first use, or after a crash)."""
        if browser is not None and browser[0].process.poll() is not None:  # killed or crashed between pages
            browser = self._stop(browser)
        return browser or self._start(timeout_s)

    def _start(self, timeout_s: float) -> tuple[Browser, Path]:
        """A fresh browser in a throwaway folder (profile, stderr log); ConfigError if the first one fails."""
        home = Path(tempfile.mkdtemp(prefix="browser-", dir=self.home))
        try:
            browser = Browser(self.command(home / "profile"), home / "chromium.log", max(timeout_s, START_LIMIT_S))
        except (BrowserGone, NoAnswer) as failed:
            shutil.rmtree(home, ignore_errors=True)
            if self.started:  # it worked before: this page fails, the next one tries again
                raise BrowserGone(f"could not restart: {failed}") from failed
            raise ConfigError(
                f"The long-lived Chromium did not answer over --remote-debugging-pipe ({failed}); set "
                "judge.render.reuse_browser=false to start a fresh Chromium per page instead."
            ) from failed
        self.started += 1
        return browser, home

    def _stop(self, browser: tuple[Browser, Path] | None) -> None:
        if browser is not None:
            browser[0].close()
            shutil.rmtree(browser[1], ignore_errors=True)

    def close(self) -> None:
        """Kill and reap every browser (the render pool is shut down first, so all are idle)."""
        for _ in range(self.slots):
            self._stop(self.idle.get())
            self.idle.put(None)


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the browser's process group (its renderer, GPU and zygote children too), then reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the browser and all its children already exited
    process.wait()


def chromium_temp() -> str:
    """A private temp folder for one browser (its TMPDIR), removed with it: a killed Chromium leaves its files in
    the temp dir for good (the profile's singleton socket folder, shared-memory files caught mid-creation). Made
    in the system temp dir, not under the cache: the socket's whole path must fit (check_temp_dir)."""
    return tempfile.mkdtemp(prefix=SCRATCH_PREFIX)


def check_temp_dir() -> None:
    """A ConfigError when the system temp dir is too long for Chromium to start in it: every browser's singleton
    socket is <temp>/tsrl-chromium-XXXXXXXX/org.chromium.Chromium.XXXXXX/SingletonSocket, and Chromium aborts at
    start when that path passes SOCKET_PATH_MAX bytes."""
    temp = tempfile.gettempdir()
    socket = os.path.join(temp, SCRATCH_PREFIX + "X" * 8, "org.chromium.Chromium.XXXXXX", "SingletonSocket")
    length = len(os.fsencode(socket))
    if length > SOCKET_PATH_MAX:
        room = SOCKET_PATH_MAX - (length - len(os.fsencode(temp)))
        raise ConfigError(
            f"Chromium cannot start under the temp dir {temp}: its socket path there would be {length} bytes, over "
            f"the {SOCKET_PATH_MAX} a Unix socket allows; set TMPDIR to a folder of at most {room} bytes (e.g. "
            "TMPDIR=/tmp), or judge.render.enabled=false to judge the HTML source."
        )


def log_tail(log: Path) -> str:
    """Chromium's last FATAL line (why it aborted), else its last stderr line that is not D-Bus noise
    (containers have no system bus)."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip() and "dbus" not in line]
    fatal = [line for line in lines if ":FATAL:" in line]
    return (fatal or lines)[-1][-300:] if lines else "(no output)"
