"""Tail tolerance for the openai judge: a request outstanding much longer than the judge's observed latency is
hedged — a duplicate goes out (to another endpoint when there are several), the first answer wins and the
other is cancelled.

Why: a judge batch (a ladder round, a step's comparisons) waits for its slowest request, and one request that
a loaded server or load balancer accepts and never answers would hold the whole batch for the full
`retry.timeout_s`. Hedging after a multiple of the running p95 latency bounds that wait by about
`after_p95 × p95` instead, at the price of a few duplicate calls (The Tail at Scale, Dean & Barroso 2013).

The rule, per attempt: hedge once it has been outstanding max(floor_s, after_p95 × p95) seconds, where p95 is
taken over the last WINDOW answered attempts (nothing answered yet: no hedge), checked every floor_s / 5; if
the hedge is slow too, another follows after the same delay. Every copy ends at the
attempt's hard deadline, `retry.timeout_s` after it started. The budget: every attempt sent earns
`max_extra` of a hedge and a hedge spends one, so hedges never exceed 1 + max_extra × attempts, and at most
`burst` = max(1, max_extra × WINDOW) credits are banked (26 at the defaults), so a long quiet stretch does not
save up for a flood of duplicates when the server slows down as a whole. If a copy fails, the others are still
waited for; a failure that is not the attempt's outcome is reported through `failed`, so it is still counted.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from tsrl.errors import ConfigError
from tsrl.judging.base import JudgeCounters
from tsrl.remote.transport import AttemptError

WINDOW = 512  # answered attempts the p95 is taken over
REFRESH = 16  # the p95 is recomputed after this many new answers (sorting on every answer would cost CPU)


@dataclass
class HedgeConfig:
    """When a slow judge request gets a duplicate (see tsrl/remote/hedging.py)."""

    enabled: bool = True
    """Hedge slow requests (false: every attempt waits for its own answer up to retry.timeout_s)."""
    after_p95: float = 3.0
    """Hedge an attempt outstanding longer than this multiple of the running p95 latency of answered attempts..."""
    floor_s: float = 0.5
    """... and never sooner than this many seconds after it was sent."""
    max_extra: float = 0.05
    """Most hedges as a share of attempts sent (0.05: at most one duplicate per 20 attempts, plus one)."""

    def __post_init__(self) -> None:
        if self.after_p95 < 1.0:
            raise ConfigError(
                f"judge.hedge.after_p95 must be >= 1 (a multiple of the p95 latency), got {self.after_p95}."
            )
        if self.floor_s <= 0.0:
            raise ConfigError(f"judge.hedge.floor_s must be > 0, got {self.floor_s}.")
        if not 0.0 <= self.max_extra <= 1.0:
            raise ConfigError(f"judge.hedge.max_extra must lie in [0, 1], got {self.max_extra}.")


class LatencyWindow:
    """The latencies of the last WINDOW answered attempts and their 95th percentile (nearest rank)."""

    def __init__(self) -> None:
        self.samples: deque[float] = deque(maxlen=WINDOW)
        self.fresh = 0
        self.p95: float | None = None

    def add(self, seconds: float) -> None:
        self.samples.append(seconds)
        self.fresh += 1
        if self.fresh >= REFRESH or len(self.samples) <= REFRESH:
            ordered = sorted(self.samples)
            self.p95, self.fresh = ordered[math.ceil(0.95 * len(ordered)) - 1], 0


@dataclass(eq=False)
class Attempt:
    """One hedged attempt in flight: the task awaiting its primary copy, its hedges (task → (endpoint, time
    sent)), the copy sent last, its deadline, the hedges' failures, and the first hedge answer if one won."""

    post: Callable[[int], Awaitable[Any]]
    other: Callable[[int], int | None]
    task: asyncio.Task
    deadline: float
    last: tuple[int, float]
    hedges: dict[asyncio.Task, tuple[int, float]] = field(default_factory=dict)
    errors: list[tuple[AttemptError, int]] = field(default_factory=list)
    won: tuple[Any, int] | None = None
    waiter: asyncio.Future | None = None  # set while the primary has failed and hedges are still out
    timed_out: bool = False
    interrupted: bool = False  # the hedger cancelled the task awaiting the primary


class Hedger:
    """Sends attempts hedged by the rule of the module docstring; counts judge/hedges and judge/hedge_wins.

    An attempt awaits its primary copy in place, as an unhedged one would: no task, future or timer of its own
    (this runs in the training process, under its GIL). One watchdog task, alive while attempts are in flight
    and waking every floor_s / 5, sends the hedges and enforces the deadlines; a hedge that answers first, or
    the deadline, interrupts the primary's await by cancelling the attempt's task, the way asyncio.timeout
    does, and the attempt takes the hedge's answer (or raises its timeout) instead."""

    def __init__(self, cfg: HedgeConfig, counters: JudgeCounters) -> None:
        self.cfg, self.counters = cfg, counters
        self.latency = LatencyWindow()
        self.burst = max(1, math.ceil(cfg.max_extra * WINDOW))  # most credits banked
        self.credit = 1.0
        self.in_flight: set[Attempt] = set()
        self.watchdog: asyncio.Task | None = None

    def delay(self) -> float | None:
        """Seconds after which an outstanding attempt is hedged (None: no latency observed yet)."""
        p95 = self.latency.p95
        return None if p95 is None else max(self.cfg.floor_s, self.cfg.after_p95 * p95)

    async def send(
        self,
        post: Callable[[int], Awaitable[Any]],
        index: int,
        other: Callable[[int], int | None],
        timeout_s: float,
        failed: Callable[[AttemptError, int], None],
    ) -> tuple[Any, int]:
        """(answer, index of the endpoint that gave it) of the attempt `post(index)`, hedged with `post(other(…))`
        while it is slow (`other` says where a hedge goes, None: not now); raises the attempt's AttemptError (or a
        timeout) when no copy answered. A hedge's failure goes to `failed` (the attempt's own is raised)."""
        if not self.cfg.enabled:
            return await post(index), index
        loop = asyncio.get_running_loop()
        start = loop.time()
        self.credit = min(float(self.burst), self.credit + self.cfg.max_extra)
        task = asyncio.current_task()
        assert task is not None  # send() runs in a task: the judge's workers
        attempt = Attempt(post, other, task, start + timeout_s, (index, start))
        self.in_flight.add(attempt)
        if self.watchdog is None or self.watchdog.done():
            self.watchdog = loop.create_task(self._watch())
        try:
            answer = await post(index)
        except asyncio.CancelledError:
            if not (attempt.interrupted and consume_interruption(attempt.task)):
                raise  # a cancellation from outside (Ctrl-C, the judge closing) goes on
            return self._outcome(attempt, timeout_s)
        except AttemptError as error:
            interrupted = attempt.interrupted
            if interrupted:  # the transport turned the interruption into an error of its own
                consume_interruption(attempt.task)
            elif attempt.hedges:
                attempt.waiter = loop.create_future()  # the hedges may still answer
                await attempt.waiter
            if attempt.won is None:
                raise
            if not interrupted:  # its own failure, not the outcome (a hedge answered): counted like a hedge's
                attempt.errors.append((error, index))
            return attempt.won
        finally:
            self.in_flight.discard(attempt)
            for task in attempt.hedges:
                discard(task)
            for error, at in attempt.errors:
                failed(error, at)
        if attempt.interrupted:  # the transport answered instead of raising the interruption
            consume_interruption(attempt.task)
            if attempt.won is not None:
                return attempt.won
        self.latency.add(loop.time() - start)
        if attempt.hedges:
            self.counters.add("hedge_wins", 0)
        return answer, index

    def _outcome(self, attempt: Attempt, timeout_s: float) -> tuple[Any, int]:
        """What an interrupted attempt gives: the answer of the hedge that won, else the deadline's timeout."""
        if attempt.won is None:
            raise AttemptError("timeout", f"no answer within {timeout_s} s", True)
        return attempt.won

    def _hedge_done(self, attempt: Attempt, task: asyncio.Task) -> None:
        """A hedge finished: if it answered first, it interrupts the primary; a failure is kept for counting."""
        if task.cancelled():
            return
        error = task.exception()
        if attempt not in self.in_flight:
            return  # a loser that ended before its cancellation: the attempt is over
        index, sent = attempt.hedges[task]
        if error is not None:
            if isinstance(error, AttemptError):  # anything else is a bug that the primary's own await will show
                attempt.errors.append((error, index))
            if attempt.waiter is not None and all(hedge.done() for hedge in attempt.hedges):
                attempt.waiter.set_result(None)  # the primary failed and so did every hedge
            return
        if attempt.won is None and not attempt.timed_out:
            attempt.won = (task.result(), index)
            self.latency.add(asyncio.get_running_loop().time() - sent)
            self.counters.add("hedge_wins")
            self._interrupt(attempt)

    def _interrupt(self, attempt: Attempt) -> None:
        if attempt.waiter is not None:
            if not attempt.waiter.done():
                attempt.waiter.set_result(None)
        else:
            attempt.interrupted = True
            attempt.task.cancel()  # lands in the primary's await: send() takes `won` instead (or times out)

    async def _watch(self) -> None:
        """Send due hedges and end attempts past their deadline, while attempts are in flight."""
        loop = asyncio.get_running_loop()
        while self.in_flight:
            now, delay = loop.time(), self.delay()
            for attempt in list(self.in_flight):
                if attempt.won is not None or attempt.timed_out:
                    continue
                if now >= attempt.deadline:  # no hedge after it; an unhedged attempt ends with the transport's timeout
                    if attempt.hedges:
                        attempt.timed_out = True
                        self._interrupt(attempt)
                elif delay is not None and now >= attempt.last[1] + delay and self.credit >= 1.0:
                    target = attempt.other(attempt.last[0])
                    if target is not None:  # None: the endpoint asked for a pause (Retry-After)
                        self._hedge(attempt, target)
            await asyncio.sleep(self.cfg.floor_s / 5)

    def _hedge(self, attempt: Attempt, index: int) -> None:
        loop = asyncio.get_running_loop()
        self.credit -= 1.0
        self.counters.add("hedges")
        task = loop.create_task(attempt.post(index))
        attempt.hedges[task] = attempt.last = (index, loop.time())
        task.add_done_callback(lambda done: self._hedge_done(attempt, done))


def consume_interruption(task: asyncio.Task) -> bool:
    """Withdraw the hedger's cancellation of `task`; False when a cancellation from outside is pending too."""
    uncancel = getattr(task, "uncancel", None)  # Python >= 3.11 counts cancellation requests
    return uncancel is None or uncancel() == 0


def discard(task: asyncio.Task) -> None:
    """Cancel a copy nobody waits for any more; an error it ends with anyway is read, so asyncio stays quiet."""
    if task.done():
        return
    task.cancel()
    task.add_done_callback(lambda done: done.cancelled() or done.exception())
