"""Where the browser gets a page from (judge.render): an HTTP proxy on the loopback that answers the pages in
flight and nothing else.

Why not a file: URL: a page opened from file:// shares its origin with the whole disk, so an <iframe>, <img>,
<object>, <embed>, stylesheet or script pointing at file:///… (or a path, resolved against the page's own
file: URL) draws any file the training process can read into the screenshot, and the screenshot goes to the
judge, often a hosted one. A page served over http has a network origin, and Chromium's browser process refuses
every file: load to a renderer of a network origin, whatever the page's markup or script asks; a path then
resolves against the page's http URL, which comes back here.

Why a proxy: Chromium is started with this server as its only proxy (the loopback included), so every request of
every page, relative ones included, comes here, and only a GET for a page in flight, at its own unguessable
URL, is answered; anything else (another path, another host, HTTPS's CONNECT, other methods) is refused. The
network stays as blocked as with the dead proxy before: only the page itself can be fetched.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

PAGE_HOST = "page.tsrl.invalid"  # the pages' origin: .invalid never resolves, and this proxy is the only way out


class QuietServer(ThreadingHTTPServer):
    """A threaded HTTP server that drops a connection the browser broke (killed at a timeout, or mid-request)
    without printing a traceback."""

    daemon_threads = True  # a kept-alive connection of a killed browser never holds up close()

    def handle_error(self, request: object, client_address: object) -> None:
        pass


class PageServer:
    """A loopback HTTP proxy that serves each page registered with `serving` at http://PAGE_HOST/<token>, and
    refuses every other request (403, or 501 for methods other than GET and HEAD)."""

    def __init__(self) -> None:
        self.pages: dict[str, bytes] = {}  # "/<token>" -> the page's UTF-8 bytes
        self.lock = threading.Lock()
        self.refused = 0  # requests answered with 403
        self.server = QuietServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(
            target=self.server.serve_forever, args=(0.05,), name="tsrl-page-server", daemon=True
        )
        self.thread.start()

    @property
    def address(self) -> str:
        """host:port of the proxy, for Chromium's --proxy-server."""
        host, port = self.server.server_address[:2]
        return f"{host}:{port}"

    @contextmanager
    def serving(self, html: str) -> Iterator[str]:
        """The page's URL, answered while the block runs (a refresh reloads it), refused afterwards."""
        path = f"/{secrets.token_hex(16)}"
        with self.lock:
            self.pages[path] = html.encode()
        try:
            yield f"http://{PAGE_HOST}{path}"
        finally:
            with self.lock:
                del self.pages[path]

    def page(self, target: str) -> bytes | None:
        """The page a proxied request line's target names, or None (refuse it)."""
        url = urlsplit(target)
        if url.scheme != "http" or url.netloc != PAGE_HOST or url.query:
            return None
        with self.lock:
            return self.pages.get(url.path)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the browser reuses its connections to the proxy

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                self._answer(body=True)

            def do_HEAD(self) -> None:  # noqa: N802
                self._answer(body=False)

            def _answer(self, body: bool) -> None:
                page = server.page(self.path)
                if page is None:
                    with server.lock:
                        server.refused += 1
                    self.send_response(403)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                if body:
                    self.wfile.write(page)

            def log_message(self, *args: object) -> None:
                pass  # refused requests are counted, not printed

        return Handler
