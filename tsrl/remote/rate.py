"""A hosted judge's rate limits, kept on our side: the openai judge paces its requests so that no rolling
minute holds more than `judge.rate.requests_per_minute` requests or `tokens_per_minute` estimated tokens.

Why: a provider that is over its limit answers 429 and tsrl backs off, but by then the requests are spent
(retried, re-asked, hedged again) and the whole pool stalls; pacing below the limit costs only the wait.

How (a sliding-window log, not a token bucket): every admitted request leaves a `Grant` (when, how many tokens)
in the window. A request is admitted only when fewer than R grants lie in the last `window_s` and its tokens fit
under T beside theirs; else it waits until the oldest grants in its way leave the window. So any R + 1
consecutive grants span at least `window_s`, and no interval of that length ever holds more than R of them. A
token bucket of burst R refilled at R per minute lets nearly 2R through in one minute (R at once, then R − 1 more
as it refills), which is why it is not used.

- Window: `WINDOW_S` (the providers' minute) plus `SLACK_S`, because a request admitted here reaches the provider
  a little later, and later by a varying amount: the slack keeps R in every one of the provider's windows as long
  as that delay varies by less than `SLACK_S` (1 s of a 61 s window: 1.6 % of the throughput).
- Tokens of a request: its prompt, estimated from the rendered request (the characters of its text parts / 4,
  each image part `IMAGE_TOKENS`), plus its `max_tokens` (the most it may generate); when the answer comes back
  the reservation is replaced by its `usage` (prompt + completion tokens). A failed or cancelled attempt keeps
  its reservation (a provider may have counted it). A request larger than T on its own goes out alone, into a
  window empty of tokens.
- Who shares a window: every endpoint of one provider — judges with the same base URLs, model and limits in one
  process share one window (the training and the evaluation judge). Each of the W processes of a run
  (WORLD_SIZE) takes ⌊R/W⌋ requests and ⌊T/W⌋ tokens of it, so the run as a whole stays within the limits.
- What passes through it: every attempt that reaches a chat-completions endpoint — first attempts, retries,
  re-asks, hedged duplicates, the constraint probe at start (GET /models is not counted). A first attempt waits
  here before the hedger's clock for it starts; a hedge goes only when admitted at once (`Pacer.admit_now`), never
  queueing before the requests that wait.
- What it costs: `judge/rate_wait_s`, the seconds requests spent waiting here since the last drain, summed over
  requests (32 workers held 1 s each log 32). A 429's Retry-After is still honoured on top (transport.Endpoints).
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tsrl.errors import ConfigError
from tsrl.judging.base import JudgeCounters

WINDOW_S = 60.0  # the providers' window: limits are per minute
SLACK_S = 1.0  # added to the window (see the module docstring); tests shrink both to keep a run short
CHARS_PER_TOKEN = 4  # the usual rule of thumb for English text under BPE tokenizers
IMAGE_TOKENS = 765  # one image part: OpenAI's count for a 1024 x 1024 image at high detail (85 + 4 tiles x 170)


@dataclass
class RateConfig:
    """The provider's limits, kept on our side (tsrl/remote/rate.py); 0 = no limit."""

    requests_per_minute: int = 0
    """Most requests sent in any 60 s, over all endpoints and processes (each of W processes takes 1/W)."""
    tokens_per_minute: int = 0
    """Most estimated tokens (prompt + max_tokens until the answer's usage is known) in any 60 s, likewise split."""

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute"):
            if getattr(self, name) < 0:
                raise ConfigError(f"judge.rate.{name} must be >= 0 (0 = no limit), got {getattr(self, name)}.")

    @property
    def enabled(self) -> bool:
        return bool(self.requests_per_minute or self.tokens_per_minute)


@dataclass(eq=False)
class Grant:
    """One admitted request: when it was admitted and the tokens it counts for (its estimate, then its usage)."""

    at: float
    tokens: int
    live: bool = True  # still inside the window


class RateWindow:
    """The sliding-window log of the module docstring: pure (time is passed in), not thread-safe."""

    def __init__(self, requests: int, tokens: int, window_s: float) -> None:
        self.requests, self.tokens, self.window_s = requests, tokens, window_s
        self.grants: deque[Grant] = deque()
        self.used = 0  # tokens of the grants in the window

    def delay(self, now: float, tokens: int) -> float:
        """Seconds until a request of `tokens` may be admitted (0: now)."""
        self._expire(now)
        wait = 0.0
        if self.requests and len(self.grants) >= self.requests:
            wait = self.grants[len(self.grants) - self.requests].at + self.window_s - now
        excess = self.used + tokens - self.tokens
        if self.tokens and excess > 0 and self.grants:
            wait = max(wait, self._freed_at(excess) - now)
        return max(0.0, wait)

    def admit(self, now: float, tokens: int) -> Grant:
        """Record a request admitted at `now` (call it when `delay` is 0)."""
        grant = Grant(now, tokens)
        self.grants.append(grant)
        self.used += tokens
        return grant

    def settle(self, grant: Grant, tokens: int) -> None:
        """Replace a grant's estimate by what the request really counted (its usage)."""
        if grant.live:
            self.used += tokens - grant.tokens
        grant.tokens = tokens

    def _freed_at(self, excess: int) -> float:
        """When enough of the oldest grants have left the window to free `excess` tokens (all of them: when the
        last leaves, so that a request larger than the limit goes out alone)."""
        freed = 0
        for grant in self.grants:
            freed += grant.tokens
            if freed >= excess:
                return grant.at + self.window_s
        return self.grants[-1].at + self.window_s

    def _expire(self, now: float) -> None:
        while self.grants and self.grants[0].at + self.window_s <= now:
            grant = self.grants.popleft()
            grant.live = False
            self.used -= grant.tokens


class Limiter:
    """One provider's RateWindow, shared by the judges (and their event-loop threads) that send to it."""

    def __init__(self, requests: int, tokens: int, window_s: float) -> None:
        self.window = RateWindow(requests, tokens, window_s)
        self.lock = threading.Lock()

    def try_admit(self, now: float, tokens: int) -> Grant | float:
        """A Grant if the request may go now, else the seconds to wait before asking again."""
        with self.lock:
            wait = self.window.delay(now, tokens)
            return self.window.admit(now, tokens) if wait <= 0.0 else wait

    def settle(self, grant: Grant, tokens: int) -> None:
        with self.lock:
            self.window.settle(grant, tokens)


LIMITERS: weakref.WeakValueDictionary[tuple, Limiter] = weakref.WeakValueDictionary()
LIMITERS_LOCK = threading.Lock()


def share(limit: int, world: int, name: str) -> int:
    """This process's part of a limit split over `world` processes (0 stays 0 = no limit)."""
    part = limit // world
    if limit and part < 1:
        raise ConfigError(
            f"judge.rate.{name}={limit} is less than one per process over the run's {world} processes "
            f"(each takes 1/{world}); raise it to at least {world} or run fewer processes."
        )
    return part


def limiter_for(cfg: RateConfig, base_urls: list[str], model: str, world: int | None = None) -> Limiter:
    """The Limiter of a provider (base URLs + model) at these limits, shared within the process; this process's
    share of the limits (world = WORLD_SIZE processes unless given)."""
    world = world or int(os.environ.get("WORLD_SIZE", "1") or 1)
    requests = share(cfg.requests_per_minute, world, "requests_per_minute")
    tokens = share(cfg.tokens_per_minute, world, "tokens_per_minute")
    window_s = WINDOW_S + SLACK_S
    key = (tuple(sorted(base_urls)), model, requests, tokens, window_s)
    with LIMITERS_LOCK:
        limiter = LIMITERS.get(key)
        if limiter is None:
            limiter = LIMITERS[key] = Limiter(requests, tokens, window_s)
    return limiter


def estimate_tokens(body: dict[str, Any], max_tokens: int) -> int:
    """A request's tokens before it is sent: its messages' text / CHARS_PER_TOKEN (IMAGE_TOKENS per image part)
    plus the most it may generate (the body's max_completion_tokens or max_tokens, else `max_tokens`)."""
    chars, images = 0, 0
    for message in body.get("messages") or ():
        content = message.get("content")
        parts = [content] if isinstance(content, str) else content or ()
        for part in parts:
            if isinstance(part, str):
                chars += len(part)
            elif part.get("type") == "text":
                chars += len(part.get("text") or "")
            else:
                images += 1
    completion = body.get("max_completion_tokens") or body.get("max_tokens") or max_tokens
    return math.ceil(chars / CHARS_PER_TOKEN) + images * IMAGE_TOKENS + int(completion)


def used_tokens(answer: Any) -> int | None:
    """The tokens an answer body says it used (prompt + completion), None if it does not say."""
    usage = answer.get("usage") if isinstance(answer, dict) else None
    if not isinstance(usage, dict):
        return None
    total = (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0)
    return int(total) if total else None


class Pacer:
    """One judge's way through its provider's Limiter: its requests queue in order (an asyncio lock, so a large
    request is not overtaken forever by small ones); each admitted request's wait is counted as rate_wait_s."""

    def __init__(
        self,
        limiter: Limiter,
        max_tokens: int,
        counters: JudgeCounters,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.limiter, self.max_tokens, self.counters = limiter, max_tokens, counters
        self.clock, self.sleep = clock, sleep
        self.queue: asyncio.Lock | None = None  # made on first use, on the loop that uses it

    async def acquire(self, body: dict[str, Any]) -> Grant:
        """Wait until the request `body` may be sent; its Grant."""
        tokens = estimate_tokens(body, self.max_tokens)
        start = self.clock()
        if self.queue is None:
            self.queue = asyncio.Lock()
        async with self.queue:
            while not isinstance(grant := self.limiter.try_admit(self.clock(), tokens), Grant):
                await self.sleep(grant)
        self.counters.add("rate_wait_s", self.clock() - start)
        return grant

    def admit_now(self, body: dict[str, Any]) -> Grant | None:
        """A Grant if `body` may go at once without overtaking a waiting request, else None (a hedge's way in)."""
        if self.queue is not None and self.queue.locked():
            return None
        grant = self.limiter.try_admit(self.clock(), estimate_tokens(body, self.max_tokens))
        return grant if isinstance(grant, Grant) else None

    def settle(self, grant: Grant, answer: Any) -> None:
        """Count the request for what its answer's usage says, where it says."""
        tokens = used_tokens(answer)
        if tokens is not None:
            self.limiter.settle(grant, tokens)

    async def post(self, transport: Any, index: int, body: dict[str, Any], grant: Grant | None = None) -> dict:
        """`transport.post(index, body)` once admitted (`grant`: admitted already); its usage settles the grant."""
        grant = grant or await self.acquire(body)
        answer = await transport.post(index, body)
        self.settle(grant, answer)
        return answer


class PacedTransport:
    """A transport whose every POST goes through a Pacer (for callers that hold no grant: the start-up probe)."""

    def __init__(self, inner: Any, pacer: Pacer) -> None:
        self.inner, self.pacer = inner, pacer

    async def post(self, index: int, body: dict) -> dict:
        return await self.pacer.post(self.inner, index, body)

    async def models(self, index: int, timeout_s: float) -> dict:
        return await self.inner.models(index, timeout_s)

    async def aclose(self) -> None:
        await self.inner.aclose()
