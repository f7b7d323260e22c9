"""How the openai judge's requests reach the server: one POST of a chat-completions body, answered by its
JSON body or by an AttemptError that says what went wrong and whether another attempt may help; and one
GET of the served model list (`models`, for the start-up check in preflight.py). `read_completion` takes what
the judge needs out of a chat-completion body (a body of another shape is one more retried AttemptError), and
`backoff_s` is how long to wait before the next attempt.

Two transports behind that one call (`judge.transport`):

- `aiohttp` (default): a lean HTTP/1.1 client on aiohttp — one session, a keep-alive pool of `concurrency`
  connections (plus room for hedges), the body serialised once, the answer decoded with `json.loads`. It
  costs about a fifth of the SDK's client CPU per call (benchmarks/judge_bench.py), which matters because the
  judge loop shares the training process (and its GIL).
- `openai`: `openai.AsyncOpenAI.post`, for endpoints that need the SDK's behaviour (its default headers,
  Azure-style clients, proxies configured through the SDK). Same classification of failures.

Both hedge alike: the judge races copies of `post` above the transport and cancels the losers, which closes
their connections (aiohttp and httpx both drop a connection whose request was cancelled mid-flight).

Both send `Authorization: Bearer <key>`; the key lives only in the headers, never in an error message.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple
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


class Completion(NamedTuple):
    """What the judge reads from a chat-completion body."""

    text: str  # the answer
    prompt_tokens: int
    completion_tokens: int
    top: list[dict[str, float]]  # per generated token: {alternative token: its log-prob}
    finished: str  # the finish reason ("stop", "length", …; "" if none)


def read_completion(response: Any) -> Completion:
    """The answer in a chat-completion JSON body; a body of any other shape raises AttemptError
    malformed_response (retried)."""
    try:
        choice = response["choices"][0]
        content = choice["message"].get("content") or ""
        finished = str(choice.get("finish_reason") or "")
        usage = response.get("usage") or {}
        prompt_tokens, completion_tokens = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
        items = (choice.get("logprobs") or {}).get("content") or []
        top = [{alt["token"]: alt["logprob"] for alt in (item.get("top_logprobs") or [])} for item in items]
    except (KeyError, IndexError, TypeError, AttributeError) as err:
        raise AttemptError("malformed_response", f"not a chat completion ({type(err).__name__}: {err})", True) from None
    if not isinstance(content, str):
        raise AttemptError("malformed_response", "the message content is not text", True)
    return Completion(content, prompt_tokens, completion_tokens, top, finished)


def backoff_s(attempt: int, server_wait: float | None, base_s: float, max_s: float, jitter: random.Random) -> float:
    """The wait after failed attempt `attempt` (0, 1, …): base_s · 2^attempt times a jitter factor in [0.5, 1],
    at least what the server asked (Retry-After), never more than max_s."""
    wait = min(max_s, base_s * 2**attempt) * jitter.uniform(0.5, 1.0)
    return min(max_s, max(wait, server_wait or 0.0))


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
        self.model_urls = [url.rstrip("/") + "/models" for url in base_urls]
        self.headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "tsrl-judge",
        }
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency, ttl_dns_cache=300)
        self.proxies = [env_proxy(url) for url in base_urls]  # looked up once, not per request (trust_env)
        self.session = aiohttp.ClientSession(connector=connector, timeout=self.timeout)

    async def post(self, index: int, body: dict) -> dict:
        data = json.dumps(body).encode()
        return await self._send("POST", self.urls[index], index, data, self.timeout)

    async def models(self, index: int, timeout_s: float) -> dict:
        return await self._send("GET", self.model_urls[index], index, None, self.aiohttp.ClientTimeout(total=timeout_s))

    async def _send(self, method: str, url: str, index: int, data: bytes | None, timeout: Any) -> dict:
        try:
            async with self.session.request(
                method, url, data=data, headers=self.headers, proxy=self.proxies[index], timeout=timeout
            ) as response:
                raw = await response.read()
                if response.status >= 400:
                    raise status_error(response.status, response.headers, raw.decode("utf-8", "replace"))
        except asyncio.TimeoutError:  # before ClientError: aiohttp's read timeouts are both
            raise AttemptError("timeout", f"no answer within {timeout.total} s", True) from None
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
        self.clients = [
            openai.AsyncOpenAI(base_url=url, api_key=api_key, timeout=timeout_s, max_retries=0) for url in base_urls
        ]

    async def post(self, index: int, body: dict) -> dict:
        client = self.clients[index]
        return await self._send(lambda: client.post("/chat/completions", body=body, cast_to=dict))

    async def models(self, index: int, timeout_s: float) -> dict:
        client = self.clients[index]
        return await self._send(lambda: client.get("/models", cast_to=dict, options={"timeout": timeout_s}))

    async def _send(self, call: Callable[[], Awaitable[Any]]) -> dict:
        openai = self.openai
        try:
            answer = await call()
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


class Endpoints:
    """Round-robin over the base URLs, skipping those at rest. An endpoint rests after a failed attempt that
    points at it (see RetryConfig.endpoint_cooldown_s), or as long as its Retry-After asks if that is longer;
    a success ends its rest. When every endpoint rests, the one back first is used (so one URL = plain retries).
    A Retry-After also holds every new request to that endpoint until it has passed (`hold`): one 429 pauses
    the whole pool instead of each worker finding out with a 429 of its own."""

    def __init__(self, count: int, cooldown_s: float, max_s: float) -> None:
        self.count, self.cooldown_s, self.max_s = count, cooldown_s, max_s
        self.turn = 0
        self.failures = [0] * count
        self.rest_until = [0.0] * count
        self.hold_until = [0.0] * count

    def pick(self) -> int:
        now = time.monotonic()
        for _ in range(self.count):
            index, self.turn = self.turn % self.count, self.turn + 1
            if self.rest_until[index] <= now:
                return index
        return min(range(self.count), key=self.rest_until.__getitem__)

    def failed(self, index: int, wait: float | None) -> None:
        self.failures[index] += 1
        rest = min(max(self.max_s, self.cooldown_s), self.cooldown_s * 2 ** (self.failures[index] - 1))
        now = time.monotonic()
        self.rest_until[index] = now + max(rest, wait or 0.0)
        if wait:
            self.hold_until[index] = max(self.hold_until[index], now + min(wait, self.max_s))

    async def hold(self, index: int) -> None:
        """Wait until the endpoint's server-requested pause (Retry-After) is over."""
        while (delay := self.hold_until[index] - time.monotonic()) > 0:
            await asyncio.sleep(delay)

    def other(self, index: int) -> int | None:
        """Where a hedge of an attempt at `index` goes: the next endpoint not at rest other than `index` (itself if
        it is the only one); None while that endpoint's Retry-After pause lasts (a hedge must not break it)."""
        choice = index
        if self.count > 1:
            choice = self.pick()
            choice = choice if choice != index else self.pick()
        return choice if self.hold_until[choice] <= time.monotonic() else None

    def succeeded(self, index: int) -> None:
        self.failures[index], self.rest_until[index] = 0, 0.0

    def resting(self) -> int:
        now = time.monotonic()
        return sum(until > now for until in self.rest_until)


def build_transport(name: str, base_urls: list[str], api_key: str, timeout_s: float, concurrency: int) -> Any:
    kind = {"aiohttp": AiohttpTransport, "openai": OpenAISDKTransport}[name]
    return kind(base_urls, api_key, timeout_s, concurrency)
