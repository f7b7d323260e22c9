"""How the openai judge's requests reach the server: one POST of a chat-completions body, answered by its
JSON body or by an AttemptError that says what went wrong and whether another attempt may help.

Two transports behind that one call (`judge.transport`):

- `aiohttp` (default): a lean HTTP/1.1 client on aiohttp — one session, a keep-alive pool of `concurrency`
  connections, the body serialised once, the answer decoded with `json.loads`. It costs about a fifth of
  the SDK's client CPU per call (scripts/judge_bench.py), which matters because the judge loop shares the
  training process (and its GIL).
- `openai`: `openai.AsyncOpenAI.post`, for endpoints that need the SDK's behaviour (its default headers,
  Azure-style clients, proxies configured through the SDK). Same classification of failures.

Both send `Authorization: Bearer <key>`; the key lives only in the headers, never in an error message.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

TRANSPORTS = ("aiohttp", "openai")


class AttemptError(Exception):
    """One failed attempt: `kind` (timeout | connection | rate_limited | server_error | http_<status> |
    malformed_response), whether to retry, and how long the server asked us to wait (seconds) if it did."""

    def __init__(self, kind: str, message: str, retryable: bool, wait: float | None = None) -> None:
        super().__init__(message)
        self.kind, self.retryable, self.wait = kind, retryable, wait


def retry_after(headers: Any) -> float | None:
    """Seconds the server asked us to wait (retry-after-ms, else retry-after in seconds), if any."""
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        try:
            return float(headers[name]) * scale
        except (KeyError, TypeError, ValueError):
            continue
    return None


def status_error(status: int, headers: Any, body: str) -> AttemptError:
    kind = "rate_limited" if status == 429 else "server_error" if status >= 500 else f"http_{status}"
    retryable = status in (408, 409, 429) or status >= 500
    return AttemptError(kind, f"HTTP {status}: {body[:200]}", retryable, retry_after(headers))


def decode(raw: bytes) -> dict:
    try:
        body = json.loads(raw)
    except ValueError as err:
        raise AttemptError("malformed_response", f"body is not JSON ({err})", True) from None
    if not isinstance(body, dict):
        raise AttemptError("malformed_response", f"body is a JSON {type(body).__name__}, not an object", True)
    return body


def env_proxy(url: str) -> str | None:
    """The proxy HTTP(S)_PROXY / NO_PROXY give for `url` (None = direct), as the SDK's httpx client reads them."""
    parts = urlsplit(url)
    if not parts.hostname or proxy_bypass(parts.hostname):
        return None
    return getproxies().get(parts.scheme)


class AiohttpTransport:
    """See the module docstring. Create and use it on the event loop that will run the requests."""

    def __init__(self, base_urls: list[str], api_key: str, timeout_s: float, concurrency: int) -> None:
        import aiohttp

        self.aiohttp = aiohttp
        self.urls = [url.rstrip("/") + "/chat/completions" for url in base_urls]
        self.headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json",
                        "Accept": "application/json", "User-Agent": "tsrl-judge"}
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency, ttl_dns_cache=300)
        self.proxies = [env_proxy(url) for url in base_urls]  # looked up once, not per request (trust_env)
        self.session = aiohttp.ClientSession(connector=connector, timeout=self.timeout)

    async def post(self, index: int, body: dict) -> dict:
        try:
            async with self.session.post(self.urls[index], data=json.dumps(body).encode(), headers=self.headers,
                                         proxy=self.proxies[index]) as response:
                raw = await response.read()
                if response.status >= 400:
                    raise status_error(response.status, response.headers, raw.decode("utf-8", "replace"))
        except asyncio.TimeoutError:  # before ClientError: aiohttp's read timeouts are both
            raise AttemptError("timeout", f"no answer within {self.timeout.total} s", True) from None
        except self.aiohttp.ClientPayloadError as err:
            raise AttemptError("connection", f"body cut short ({err})", True) from None
        except self.aiohttp.ClientError as err:
            raise AttemptError("connection", f"{type(err).__name__}: {err}", True) from None
        return decode(raw)

    async def aclose(self) -> None:
        await self.session.close()


class OpenAISDKTransport:
    """See the module docstring: `AsyncOpenAI.post` with a plain dict body (the typed `create` path spends
    about half of its CPU transforming parameters), one client per base URL, SDK retries off."""

    def __init__(self, base_urls: list[str], api_key: str, timeout_s: float, concurrency: int) -> None:
        import openai

        self.openai = openai
        self.clients = [openai.AsyncOpenAI(base_url=url, api_key=api_key, timeout=timeout_s, max_retries=0)
                        for url in base_urls]

    async def post(self, index: int, body: dict) -> dict:
        openai = self.openai
        try:
            answer = await self.clients[index].post("/chat/completions", body=body, cast_to=dict)
        except openai.APITimeoutError as err:  # before APIConnectionError: it is one
            raise AttemptError("timeout", str(err), True) from None
        except openai.APIConnectionError as err:
            raise AttemptError("connection", str(err), True) from None
        except openai.APIStatusError as err:
            raise status_error(err.status_code, err.response.headers, str(err)) from None
        except ValueError as err:  # the SDK's JSON decoding of a malformed body
            raise AttemptError("malformed_response", f"body is not JSON ({err})", True) from None
        if not isinstance(answer, dict):
            raise AttemptError("malformed_response", f"body is a JSON {type(answer).__name__}, not an object", True)
        return answer

    async def aclose(self) -> None:
        for client in self.clients:
            await client.close()


def build_transport(name: str, base_urls: list[str], api_key: str, timeout_s: float, concurrency: int) -> Any:
    kind = {"aiohttp": AiohttpTransport, "openai": OpenAISDKTransport}[name]
    return kind(base_urls, api_key, timeout_s, concurrency)
