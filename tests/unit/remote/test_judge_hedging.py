"""Tail tolerance and start-up checks of the openai judge, without a server: the hedging rule and its budget
against scripted posts, the running p95, the URL form check and the range checks of the settings."""

from __future__ import annotations

import asyncio
import re

import pytest

from tsrl.errors import ConfigError
from tsrl.judging.base import JudgeCounters
from tsrl.remote.hedging import REFRESH, WINDOW, HedgeConfig, Hedger, LatencyWindow
from tsrl.remote.openai_config import OpenAIJudgeConfig, RetryConfig, url_problem
from tsrl.remote.preflight import served_models
from tsrl.remote.transport import AttemptError, Endpoints

NEVER = 3600.0


class ScriptedPosts:
    """post(index) answers after the delay scripted for its turn (NEVER = taken and never answered), or raises
    an AttemptError for a delay given as an exception; records what was sent where and what was cancelled.
    With `on_cancel` set, a cancelled post does not re-raise the cancellation but does what some HTTP clients
    do: raises its own timeout error ("timeout") or answers anyway ("answer")."""

    def __init__(self, delays: list, on_cancel: str = "") -> None:
        self.delays, self.sent, self.cancelled, self.on_cancel = list(delays), [], 0, on_cancel

    async def post(self, index: int) -> dict:
        turn = len(self.sent)
        self.sent.append(index)
        delay = self.delays[turn] if turn < len(self.delays) else 0.0
        if isinstance(delay, Exception):
            raise delay
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            self.cancelled += 1
            if self.on_cancel == "timeout":
                raise AttemptError("timeout", "converted", True) from None
            if self.on_cancel != "answer":
                raise
        return {"turn": turn, "index": index}


def warmed(cfg: HedgeConfig, latency: float = 0.01) -> tuple[Hedger, JudgeCounters]:
    counters = JudgeCounters()
    hedger = Hedger(cfg, counters)
    for _ in range(REFRESH):
        hedger.latency.add(latency)
    return hedger, counters


def send(hedger: Hedger, posts: ScriptedPosts, timeout_s: float = 5.0, endpoints: int = 1) -> tuple[dict, int, list]:
    """One hedged attempt; a callback that raises (asyncio reports it to the loop, not to the caller) fails it."""
    failures: list = []
    loop_errors: list = []

    async def attempt() -> tuple[dict, int]:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: loop_errors.append(context))
        other = Endpoints(endpoints, 1.0, 1.0).other
        return await hedger.send(posts.post, 0, other, timeout_s, lambda err, at: failures.append((err.kind, at)))

    try:
        answer, index = asyncio.run(attempt())
    finally:
        assert loop_errors == []
    return answer, index, failures


async def until(condition, limit_s: float = 2.0) -> None:
    """Wait for `condition()` to hold, checking every 10 ms (a hang fails after `limit_s`)."""
    give_up = asyncio.get_running_loop().time() + limit_s
    while not condition():
        assert asyncio.get_running_loop().time() < give_up, "the awaited event never came"
        await asyncio.sleep(0.01)


def test_a_silent_attempt_is_answered_by_its_hedge_and_the_silent_copy_is_cancelled():
    hedger, counters = warmed(HedgeConfig(floor_s=0.05))
    posts = ScriptedPosts([NEVER, 0.0])
    answer, index, failures = send(hedger, posts, endpoints=2)
    assert answer == {"turn": 1, "index": 1} and index == 1  # the hedge went to the other endpoint and won
    assert posts.sent == [0, 1] and posts.cancelled == 1 and failures == []
    assert counters.counts["hedges"] == counters.counts["hedge_wins"] == 1


@pytest.mark.parametrize("on_cancel", ["timeout", "answer"])
def test_a_client_that_turns_the_interruption_into_its_own_outcome_still_gets_the_hedge(on_cancel):
    """aiohttp turns a cancellation that meets its own timer into a timeout; a client may also answer anyway.
    Either way the attempt takes the hedge's answer, at once, and the task is left with no cancellation."""
    hedger, counters = warmed(HedgeConfig(floor_s=0.05))
    posts = ScriptedPosts([NEVER, 0.0], on_cancel=on_cancel)

    async def attempt() -> tuple[tuple[dict, int], int]:
        answer = await hedger.send(posts.post, 0, lambda i: i, 5.0, lambda *_: None)
        return answer, getattr(asyncio.current_task(), "cancelling", lambda: 0)()  # Python >= 3.11 counts them

    async def bounded() -> tuple[tuple[dict, int], int]:
        return await asyncio.wait_for(attempt(), 2.0)  # waiting on for the primary would be a hang

    (answer, index), cancelling = asyncio.run(bounded())
    assert answer == {"turn": 1, "index": 0} and cancelling == 0 and counters.counts["hedge_wins"] == 1


def test_the_hedge_waits_for_the_running_p95_times_the_multiplier():
    """p95 = 100 ms, after_p95 = 3: an attempt answering after 200 ms is not hedged, one after 400 ms is."""
    cfg = HedgeConfig(after_p95=3.0, floor_s=0.01)
    hedger, counters = warmed(cfg, latency=0.1)
    assert hedger.delay() == pytest.approx(0.3)
    send(hedger, ScriptedPosts([0.2]))
    assert counters.counts["hedges"] == 0
    hedger, counters = warmed(cfg, latency=0.1)
    send(hedger, ScriptedPosts([0.4, NEVER]))  # the hedge is slower: the primary still wins
    assert counters.counts["hedges"] == 1 and counters.counts["hedge_wins"] == 0


def test_nothing_is_hedged_before_a_latency_was_observed_and_the_floor_holds():
    hedger = Hedger(HedgeConfig(floor_s=0.05), JudgeCounters())
    assert hedger.delay() is None
    hedger.latency.add(0.001)
    assert hedger.delay() == 0.05  # 3 × 1 ms is below the floor


def test_the_timeout_stays_the_hard_cap_and_every_copy_is_cancelled_at_it():
    hedger, counters = warmed(HedgeConfig(floor_s=0.05, max_extra=1.0))  # credit for two hedges
    posts = ScriptedPosts([NEVER] * 10)
    with pytest.raises(AttemptError) as err:
        send(hedger, posts, timeout_s=0.3)
    assert err.value.kind == "timeout" and err.value.retryable
    assert len(posts.sent) == 3 and posts.cancelled == 3  # a silent hedge gets a hedge of its own
    assert counters.counts["hedge_wins"] == 0


def test_no_hedge_goes_out_at_or_after_the_deadline():
    """A hedge due exactly at the deadline is never sent, even when the transport's own timeout fires late
    (here: not at all); the attempt then ends as an unhedged one would."""
    hedger, counters = warmed(HedgeConfig(floor_s=0.2))
    posts = ScriptedPosts([0.4, 0.0])
    assert send(hedger, posts, timeout_s=0.2)[0] == {"turn": 0, "index": 0}
    assert posts.sent == [0] and not counters.counts


def test_a_failed_copy_is_counted_while_the_other_answers():
    hedger, _ = warmed(HedgeConfig(floor_s=0.05))
    posts = ScriptedPosts([0.2, AttemptError("server_error", "HTTP 500", True)])
    answer, index, failures = send(hedger, posts, endpoints=2)
    assert answer["turn"] == 0 and index == 0 and failures == [("server_error", 1)]


def test_the_hedge_budget_holds_when_every_attempt_is_slow():
    """Every attempt answers after 100 ms against a p95 of 10 ms, so each would want a hedge: at max_extra = 0.1
    the hedges stay within 1 + 0.1 × attempts, and the budget is used, not left idle."""
    cfg = HedgeConfig(floor_s=0.02, max_extra=0.1)
    hedger, counters = warmed(cfg)
    hedger.latency.add = lambda seconds: None  # keep the p95 at 10 ms whatever is answered

    async def attempts() -> None:
        posts = ScriptedPosts([0.1] * 1000)
        await asyncio.gather(*(hedger.send(posts.post, 0, lambda i: i, 5.0, lambda *_: None) for _ in range(100)))

    asyncio.run(attempts())
    assert 5 <= counters.counts["hedges"] <= 1 + 0.1 * 100


def test_no_hedge_goes_out_while_the_endpoint_asked_for_a_pause():
    hedger, counters = warmed(HedgeConfig(floor_s=0.05))
    posts = ScriptedPosts([0.3, 0.0])

    async def attempt() -> tuple[dict, int]:
        return await hedger.send(posts.post, 0, lambda index: None, 5.0, lambda *_: None)

    assert asyncio.run(attempt())[0] == {"turn": 0, "index": 0} and posts.sent == [0] and not counters.counts


def test_hedging_off_sends_one_copy_and_waits():
    hedger, counters = warmed(HedgeConfig(enabled=False, floor_s=0.01))
    posts = ScriptedPosts([0.2])
    assert send(hedger, posts)[0] == {"turn": 0, "index": 0} and posts.sent == [0] and not counters.counts


def test_the_running_p95_is_a_nearest_rank_refreshed_every_few_answers():
    window = LatencyWindow()
    window.add(0.5)
    assert window.p95 == 0.5  # from the first answer on
    window.samples.clear()
    for ms in range(1, 97):
        window.add(ms / 1000)
    assert window.p95 == 0.092  # rank ⌈0.95 × 96⌉ = 92
    for ms in range(97, 97 + REFRESH - 1):
        window.add(ms / 1000)
    assert window.p95 == 0.092  # not recomputed yet
    window.add(0.112)
    assert window.p95 == 0.107  # rank ⌈0.95 × 112⌉ = 107


def test_a_hedge_goes_to_another_endpoint_when_there_is_one():
    assert Endpoints(1, 1.0, 1.0).other(0) == 0
    endpoints = Endpoints(3, 1.0, 1.0)
    assert all(endpoints.other(i % 3) != i % 3 for i in range(12))
    endpoints.failed(2, None)  # at rest: skipped
    assert {endpoints.other(0) for _ in range(6)} == {1} and {endpoints.other(1) for _ in range(6)} == {0}
    single = Endpoints(1, 1.0, 60.0)
    single.failed(0, wait=30.0)  # a Retry-After pause: no hedge goes out until it is over
    assert single.other(0) is None


def test_a_hedged_attempt_the_primary_wins_reports_zero_hedge_wins_and_drops_the_hedge_quietly():
    """The hedge_wins count exists (as 0) once a hedge went out, so the metric is logged; the losing hedge is
    cancelled without any error reaching the event loop."""
    hedger, counters = warmed(HedgeConfig(floor_s=0.05))
    posts = ScriptedPosts([0.3, NEVER])
    assert send(hedger, posts)[0] == {"turn": 0, "index": 0} and posts.cancelled == 1
    assert counters.drain() == {
        "calls": 0,
        "errors": 0,
        "tokens": 0,
        "cache_hits": 0,
        "ties": 0,
        "tie_rate": 0.0,
        "hedges": 1,
        "hedge_wins": 0,
    }


def test_answered_attempts_feed_the_running_p95_with_their_latency():
    hedger = Hedger(HedgeConfig(floor_s=0.05), JudgeCounters())
    send(hedger, ScriptedPosts([0.1]))
    assert 0.05 < hedger.latency.p95 < 30.0


def test_a_hedge_that_wins_feeds_the_running_p95_with_its_own_latency():
    hedger = Hedger(HedgeConfig(floor_s=0.05), JudgeCounters())
    hedger.latency.add(0.01)
    answer, index, _ = send(hedger, ScriptedPosts([1.0, 0.1]), endpoints=2)
    assert answer == {"turn": 1, "index": 1} and index == 1
    assert 0.05 < hedger.latency.p95 < 30.0  # the hedge's ~100 ms, counted from when it was sent


def test_the_deadline_timeout_names_the_time_limit():
    hedger, _ = warmed(HedgeConfig(floor_s=0.05))
    with pytest.raises(AttemptError, match=re.escape("no answer within 0.3 s")):
        send(hedger, ScriptedPosts([NEVER] * 10), timeout_s=0.3)


def test_a_hedge_win_leaves_the_attempts_task_with_no_cancellation():
    hedger, _ = warmed(HedgeConfig(floor_s=0.05))
    posts = ScriptedPosts([NEVER, 0.0])

    async def attempt() -> tuple[tuple[dict, int], int]:
        answer = await hedger.send(posts.post, 0, lambda i: i, 5.0, lambda *_: None)
        return answer, getattr(asyncio.current_task(), "cancelling", lambda: 0)()  # Python >= 3.11 counts them

    (answer, _), cancelling = asyncio.run(asyncio.wait_for(attempt(), 2.0))
    assert answer == {"turn": 1, "index": 0} and cancelling == 0


@pytest.mark.parametrize("when", ["while the primary is out", "as the hedge wins"])
def test_a_cancellation_from_outside_goes_on(when):
    """Ctrl-C or the judge closing cancels the attempt's task: that cancellation is raised, never turned into
    a timeout or the hedge's answer, even when it comes at the moment the hedge interrupts the primary."""
    if when == "as the hedge wins":
        hedger, _ = warmed(HedgeConfig(floor_s=0.05))
    else:
        hedger = Hedger(HedgeConfig(floor_s=0.05), JudgeCounters())  # no latency observed: no hedge goes out
    sent: list = []

    async def post(index: int) -> dict:
        sent.append(index)
        if len(sent) == 1:
            await asyncio.sleep(NEVER)
        asyncio.get_running_loop().call_soon(outer.cancel)  # lands before the hedger's interruption
        return {"hedge": index}

    async def attempt() -> tuple[dict, int]:
        return await hedger.send(post, 0, lambda i: i, 5.0, lambda *_: None)

    async def main() -> None:
        nonlocal outer
        outer = asyncio.create_task(attempt())
        if when == "while the primary is out":
            await until(lambda: len(sent) == 1)
            outer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(outer, 2.0)

    outer = None
    asyncio.run(main())
    assert sent == ([0] if when == "while the primary is out" else [0, 0])


def failing_after_the_hedge(sent: list, hedge) -> object:
    """A post whose primary fails once its hedge is out (server_error on endpoint 0); the hedge does `hedge`."""

    async def post(index: int) -> dict:
        sent.append(index)
        if len(sent) == 1:
            await until(lambda: len(sent) == 2)
            await asyncio.sleep(0.01)
            raise AttemptError("server_error", "HTTP 500", True)
        return await hedge(index)

    return post


def test_a_primary_that_fails_while_its_hedge_is_out_takes_the_hedges_answer_and_reports_its_own_failure():
    """The hedge's answer is the outcome; the primary's server_error is not, so it goes to `failed` (the judge
    then rests endpoint 0 and counts the error) instead of being dropped."""
    hedger, counters = warmed(HedgeConfig(floor_s=0.05))
    sent: list = []
    failures: list = []

    async def hedge(index: int) -> dict:
        await asyncio.sleep(0.1)
        return {"hedge": index}

    async def attempt() -> tuple[dict, int]:
        other = Endpoints(2, 1.0, 1.0).other
        post = failing_after_the_hedge(sent, hedge)
        return await hedger.send(post, 0, other, 5.0, lambda err, at: failures.append((err.kind, at)))

    assert asyncio.run(asyncio.wait_for(attempt(), 2.0)) == ({"hedge": 1}, 1)
    assert sent == [0, 1] and counters.counts["hedge_wins"] == 1
    assert failures == [("server_error", 0)]


def test_when_the_primary_and_its_hedge_both_fail_the_primarys_error_is_raised_and_the_hedges_reported():
    hedger, _ = warmed(HedgeConfig(floor_s=0.05))
    sent: list = []
    failures: list = []

    async def hedge(index: int) -> dict:
        await asyncio.sleep(0.1)
        raise AttemptError("bad_request", "HTTP 400", False)

    async def attempt() -> tuple[dict, int]:
        other = Endpoints(2, 1.0, 1.0).other
        post = failing_after_the_hedge(sent, hedge)
        return await hedger.send(post, 0, other, 5.0, lambda err, at: failures.append((err.kind, at)))

    with pytest.raises(AttemptError) as err:
        asyncio.run(asyncio.wait_for(attempt(), 2.0))
    assert err.value.kind == "server_error" and failures == [("bad_request", 1)]


def test_of_two_hedges_answering_together_only_the_first_wins():
    hedger, counters = warmed(HedgeConfig(floor_s=0.05, max_extra=1.0))  # credit for two hedges
    sent: list = []
    gate = asyncio.Event()

    async def post(index: int) -> dict:
        turn = len(sent)
        sent.append(index)
        if turn == 0:
            await asyncio.sleep(NEVER)
        await gate.wait()
        return {"turn": turn}

    async def main() -> tuple[dict, int]:
        outer = asyncio.create_task(hedger.send(post, 0, lambda i: i, 5.0, lambda *_: None))
        await until(lambda: len(sent) == 3)  # the primary and both hedges are out
        gate.set()  # both hedges answer in the same turn of the loop
        return await asyncio.wait_for(outer, 2.0)

    assert asyncio.run(main()) == ({"turn": 1}, 0)
    assert counters.counts["hedges"] == 2 and counters.counts["hedge_wins"] == 1


def test_a_client_slow_to_abort_at_the_deadline_still_ends_with_the_timeout():
    """The deadline interrupts the primary once: a client that takes a while to abort (closing its connection)
    is not interrupted again, and the attempt raises its timeout."""
    hedger, _ = warmed(HedgeConfig(floor_s=0.05, max_extra=0.0))  # credit for one hedge
    sent: list = []

    async def post(index: int) -> dict:
        sent.append(index)
        try:
            await asyncio.sleep(NEVER)
        except asyncio.CancelledError:
            await asyncio.sleep(0.2)  # cleanup before the cancellation goes on
            raise
        return {}

    async def attempt() -> tuple[dict, int]:
        return await hedger.send(post, 0, lambda i: i, 0.3, lambda *_: None)

    with pytest.raises(AttemptError) as err:
        asyncio.run(asyncio.wait_for(attempt(), 3.0))
    assert err.value.kind == "timeout" and sent == [0, 0]


def test_a_finished_attempt_is_never_hedged_afterwards():
    hedger, counters = warmed(HedgeConfig(floor_s=0.05))
    posts = ScriptedPosts([0.0])

    async def worker() -> None:
        await hedger.send(posts.post, 0, lambda i: i, 5.0, lambda *_: None)
        await asyncio.sleep(0.3)  # the worker goes on with other things, long past the hedge delay

    asyncio.run(worker())
    assert posts.sent == [0] and not counters.counts


def test_the_banked_hedge_credit_is_capped_at_the_burst():
    """At max_extra = 1/512 the burst is one credit: however many quick attempts came before, two slow
    attempts at once get one hedge between them."""
    hedger, counters = warmed(HedgeConfig(floor_s=0.05, max_extra=1 / WINDOW))
    hedger.latency.add = lambda seconds: None  # keep the p95 at 10 ms whatever is answered
    sent: list = []
    gate = asyncio.Event()
    quick = WINDOW + 8

    async def post(index: int) -> dict:
        sent.append(index)
        if len(sent) > quick:
            await gate.wait()
        return {}

    async def main() -> None:
        for _ in range(quick):
            await hedger.send(post, 0, lambda i: i, 5.0, lambda *_: None)
        slow = [asyncio.create_task(hedger.send(post, 0, lambda i: i, 5.0, lambda *_: None)) for _ in range(2)]
        await until(lambda: counters.counts["hedges"] >= 1)
        await asyncio.sleep(0.1)  # several checks of the watchdog
        gate.set()
        await asyncio.wait_for(asyncio.gather(*slow), 2.0)

    asyncio.run(main())
    assert counters.counts["hedges"] == 1


def test_settings_at_the_edges_of_their_ranges_are_accepted():
    for after_p95 in (1.0, 1.5):
        assert HedgeConfig(after_p95=after_p95).after_p95 == after_p95
    for max_extra in (0.0, 1.0):
        assert HedgeConfig(max_extra=max_extra).max_extra == max_extra


def test_the_running_p95_covers_only_the_last_window_of_answers():
    window = LatencyWindow()
    for seconds in [1.0] * WINDOW + [0.001] * WINDOW:
        window.add(seconds)
    assert len(window.samples) == WINDOW and window.p95 == 0.001


@pytest.mark.parametrize(
    "url, problem",
    [
        ("http://127.0.0.1:99999/v1", "has port '99999', which is not a number in 1–65535"),
        ("http://127.0.0.1:0/v1", "has port '0'"),
        ("http://127.0.0.1:80a/v1", "has port '80a'"),
        ("127.0.0.1:8000/v1", "has no http:// or https:// scheme"),
        ("ftp://gpu-a:8000/v1", "has no http:// or https:// scheme"),
        ("http:///v1", "names no host"),
    ],
)
def test_malformed_base_urls_are_refused_in_one_sentence(url, problem):
    assert problem in url_problem(url)
    with pytest.raises(ConfigError, match=re.escape(f"judge.base_urls entry {url!r} {problem}")) as err:
        OpenAIJudgeConfig(base_urls=["http://gpu-b:8000/v1", url])
    assert "\n" not in str(err.value) and str(err.value).endswith(".")


def test_well_formed_base_urls_pass():
    for url in ("http://127.0.0.1:8000/v1", "https://api.example.com/v1", "http://[::1]:8000/v1", "http://gpu-a/v1"):
        assert url_problem(url) is None


def test_the_served_model_list_is_read_from_the_openai_shape():
    assert served_models({"object": "list", "data": [{"id": "judge"}, {"id": "other", "object": "model"}]}) == [
        "judge",
        "other",
    ]
    assert served_models({"models": ["judge"]}) is None


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: HedgeConfig(after_p95=0.5), "judge.hedge.after_p95 must be >= 1"),
        (lambda: HedgeConfig(floor_s=0.0), "judge.hedge.floor_s must be > 0"),
        (lambda: HedgeConfig(max_extra=1.5), "judge.hedge.max_extra must lie in [0, 1]"),
        (lambda: RetryConfig(reask=-1), "judge.retry.reask must be >= 0"),
        (lambda: RetryConfig(timeout_s=0), "judge.retry.timeout_s must be > 0"),
        (lambda: RetryConfig(max_consecutive_failures=0), "judge.retry.max_consecutive_failures must be >= 1"),
    ],
)
def test_hedge_and_retry_settings_out_of_range_fail_in_one_sentence(make, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        make()
