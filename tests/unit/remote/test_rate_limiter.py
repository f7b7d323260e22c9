"""judge.rate's limiter on a fake clock: never more than R requests (or T tokens) in any window, usage replacing
the estimate, the 1/W split over processes, the config checks, and the settings arriving through Hydra."""

from __future__ import annotations

import asyncio
import random
import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tsrl.config import register_configs
from tsrl.errors import ConfigError
from tsrl.judging import judge_fingerprint
from tsrl.judging.base import JudgeCounters
from tsrl.remote.openai_config import OpenAIJudgeConfig
from tsrl.remote.rate import (
    IMAGE_TOKENS,
    SLACK_S,
    WINDOW_S,
    Grant,
    Limiter,
    Pacer,
    RateConfig,
    RateWindow,
    estimate_tokens,
    limiter_for,
)
from tsrl.testing.judge_client import most_in_any_window

CONFIGS = Path(__file__).resolve().parents[3] / "configs"


class FakeClock:
    """Time that moves only when a waiter sleeps (the pacer serialises its waiters, so one sleeps at a time)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


def greedy(window: RateWindow, tokens: list[int], arrivals: list[float]) -> list[float]:
    """Admit each request (in order, arriving at arrivals[i]) as soon as the window lets it; the admission times."""
    now, times = 0.0, []
    for cost, arrival in zip(tokens, arrivals):
        now = max(now, arrival)
        now += window.delay(now, cost)
        assert window.delay(now, cost) == 0.0
        window.admit(now, cost)
        times.append(now)
    return times


def test_no_window_ever_holds_more_than_r_requests():
    """A burst of 100 requests at t = 0 and stragglers later: every 60 s interval (any start, half-open) holds at
    most R = 7 admissions, and the limiter is not idle when it may send (the 8th goes exactly at 60 s)."""
    window = RateWindow(requests=7, tokens=0, window_s=60.0)
    arrivals = [0.0] * 100 + [500.0 + 13.0 * i for i in range(20)]
    times = greedy(window, [1] * 120, arrivals)
    assert most_in_any_window(times, 60.0) == 7
    assert times[6] == 0.0 and times[7] == 60.0 and times[14] == 120.0


def most_tokens_in_any_window(times: list[float], tokens: list[int], window_s: float) -> int:
    """The most tokens that one interval [t, t + window_s) holds, over every start t (times need not be sorted)."""
    ordered = sorted(zip(times, tokens))
    most = inside = first = 0
    for at, cost in ordered:
        inside += cost
        while ordered[first][0] <= at - window_s:
            inside -= ordered[first][1]
            first += 1
        most = max(most, inside)
    return most


def paced_run(limiter: Limiter, seed: int, n: int) -> tuple[list[float], list[Grant]]:
    """n requests through `limiter` as the pacer sends them (in arrival order, each waiting until admitted) on a
    fake clock: bursts of 1 to 3R requests after idle gaps of 0 to 2 windows, estimates of 50 to 600 tokens, each
    answered 0.1 to 5 s after its admission with a usage of 30–100 % of its estimate, which settles its grant. The
    admission times and the grants as finally counted."""
    rng, window = random.Random(seed), limiter.window
    arrivals, now = [], 0.0
    while len(arrivals) < n:
        now += rng.uniform(0.0, 2 * window.window_s) * (rng.random() < 0.5)
        arrivals += [now] * rng.randint(1, 3 * window.requests)
    now, times, grants, answers = 0.0, [], [], []  # answers: (due, grant, usage)
    for arrival in arrivals[:n]:
        now, estimate = max(now, arrival), rng.randint(50, 600)
        while True:
            for answer in [a for a in answers if a[0] <= now]:
                limiter.settle(answer[1], answer[2])
                answers.remove(answer)
            grant = limiter.try_admit(now, estimate)
            if isinstance(grant, Grant):
                break
            now += min([grant, *(due - now for due, _, _ in answers)])  # an answer's usage may free room sooner
        times.append(now)
        grants.append(grant)
        answers.append((now + rng.uniform(0.1, 5.0), grant, int(estimate * rng.uniform(0.3, 1.0))))
    for _, grant, usage in answers:
        limiter.settle(grant, usage)
    return times, grants


@pytest.mark.parametrize("seed", [0, 1])
def test_over_a_long_bursty_run_no_provider_window_holds_more_than_r_requests_or_t_tokens(seed):
    """The guarantee itself: 3,000 requests in bursts after idle gaps (a gap lets old grants age: a window that
    forgot them early would admit the next burst too soon), on a fake clock, through a limiter of the window
    limiter_for gives (the provider's minute plus the slack). Every interval of the provider's length, any start,
    holds at most R admissions and T tokens as finally counted; and the run reaches R, so the check is not idle."""
    r, t = 20, 4000
    times, grants = paced_run(Limiter(r, t, WINDOW_S + SLACK_S), seed, 3000)
    assert most_in_any_window(times, WINDOW_S) == r
    assert most_tokens_in_any_window(times, [g.tokens for g in grants], WINDOW_S) <= t


def test_a_token_bucket_of_the_same_burst_would_break_the_window():
    """Why a sliding log: a bucket of burst R refilled at R/60 per second admits R at t = 0 and R more within the
    next minute, 2R in one window; the check the tests apply catches that."""
    r, refill, tokens, now, times = 7, 7 / 60.0, 7.0, 0.0, []
    while len(times) < 14:
        if tokens >= 1.0:
            tokens -= 1.0
            times.append(now)
        else:
            now += (1.0 - tokens) / refill
            tokens = 1.0
    assert most_in_any_window(times, 60.0) > r


def test_tokens_per_window_stay_under_the_limit_and_a_huge_request_goes_alone():
    window = RateWindow(requests=0, tokens=1000, window_s=60.0)
    costs = [300, 300, 300, 300, 950, 100, 2500, 10, 10]
    times = greedy(window, costs, [0.0] * len(costs))
    for start in times:
        inside = sum(c for c, t in zip(costs, times) if start <= t < start + 60.0)
        assert inside <= 1000 or inside == 2500, (start, inside)
    assert times[:4] == [0.0, 0.0, 0.0, 60.0]  # the 4th waits for the 1st to leave
    assert times[6] == times[5] + 60.0  # 2500 > T: it waits until the window is empty of tokens


def test_usage_replaces_the_estimate():
    """A request reserved at 800 tokens that used 100 frees 700 at once; one that used more than reserved counts
    its usage."""
    window = RateWindow(requests=0, tokens=1000, window_s=60.0)
    grant = window.admit(0.0, 800)
    assert window.delay(1.0, 500) == pytest.approx(59.0)
    window.settle(grant, 100)
    assert window.delay(1.0, 500) == 0.0 and window.used == 100
    second = window.admit(1.0, 500)
    window.settle(second, 950)
    assert window.used == 1050 and window.delay(2.0, 1) == pytest.approx(58.0)
    window.settle(grant, 5)  # after the window moved on nothing is counted twice
    assert window.delay(61.0, 1) == 0.0 and window.used == 0


def test_the_estimate_counts_text_images_and_the_completion_allowance():
    body = {
        "messages": [
            {"role": "system", "content": "x" * 400},
            {"role": "user", "content": [{"type": "text", "text": "y" * 41}, {"type": "image_url", "image_url": {}}]},
        ],
        "max_tokens": 256,
    }
    assert estimate_tokens(body, 99) == 100 + 11 + IMAGE_TOKENS + 256
    assert estimate_tokens({"messages": [], "max_completion_tokens": 40}, 99) == 40
    assert estimate_tokens({"messages": []}, 99) == 99


def test_each_of_w_processes_takes_a_share_and_too_small_a_limit_is_refused():
    base = ["http://127.0.0.1:1/v1"]
    limiter = limiter_for(RateConfig(requests_per_minute=10, tokens_per_minute=9000), base, "m", world=3)
    assert (limiter.window.requests, limiter.window.tokens) == (3, 3000)
    assert limiter_for(RateConfig(10, 9000), base, "m", world=3) is limiter  # one per provider and limits
    assert limiter_for(RateConfig(10, 9000), base, "other", world=3) is not limiter
    with pytest.raises(ConfigError, match=re.escape("judge.rate.requests_per_minute=2 is less than one per process")):
        limiter_for(RateConfig(requests_per_minute=2), base, "m", world=4)


def test_the_world_size_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    limiter = limiter_for(RateConfig(requests_per_minute=40), ["http://127.0.0.1:2/v1"], "m")
    assert limiter.window.requests == 10


def test_the_pacer_holds_concurrent_requests_to_the_window_and_counts_its_waits():
    """20 workers at once through R = 5 per 60 s: admissions at 0, 60, 120, 180 (five each); rate_wait_s is the
    sum of every request's wait."""
    clock, counters = FakeClock(), JudgeCounters()
    pacer = Pacer(Limiter(5, 0, 60.0), 16, counters, clock=clock, sleep=clock.sleep)
    times: list[float] = []
    waits: list[float] = []

    async def one() -> None:
        asked = clock()
        await pacer.acquire({"messages": []})
        times.append(clock())
        waits.append(clock() - asked)

    async def run() -> None:
        await asyncio.gather(*(one() for _ in range(20)))

    asyncio.run(run())
    assert sorted(times) == [0.0] * 5 + [60.0] * 5 + [120.0] * 5 + [180.0] * 5
    assert counters.drain()["rate_wait_s"] == pytest.approx(sum(waits)) and sum(waits) >= 5 * (60 + 120)


def test_a_hedge_goes_only_where_the_window_has_room_and_nobody_waits():
    """admit_now (a hedge's way in) never waits: None while the window is full or while a request queues."""
    clock, counters = FakeClock(), JudgeCounters()
    pacer = Pacer(Limiter(2, 0, 60.0), 16, counters, clock=clock, sleep=clock.sleep)

    async def run() -> list[object]:
        seen = [pacer.admit_now({"messages": []})]  # room: admitted at once
        await pacer.acquire({"messages": []})
        seen.append(pacer.admit_now({"messages": []}))  # full: refused, no wait
        pacer.queue = asyncio.Lock()
        clock.now = 61.0  # room again, but a request is queued
        await pacer.queue.acquire()
        seen.append(pacer.admit_now({"messages": []}))
        pacer.queue.release()
        seen.append(pacer.admit_now({"messages": []}))
        return seen

    first, full, queued, after = asyncio.run(run())
    assert first is not None and full is None and queued is None and after is not None
    assert clock.now == 61.0


def test_negative_limits_fail_naming_the_setting_and_the_limits_leave_the_cache_identity_alone():
    with pytest.raises(ConfigError, match=re.escape("judge.rate.requests_per_minute must be >= 0")):
        RateConfig(requests_per_minute=-1)
    with pytest.raises(ConfigError, match=re.escape("judge.rate.tokens_per_minute must be >= 0")):
        RateConfig(tokens_per_minute=-5)
    limited = OpenAIJudgeConfig(rate=RateConfig(60, 100_000))
    assert judge_fingerprint(limited) == judge_fingerprint(OpenAIJudgeConfig())


def test_the_settings_arrive_through_the_command_line():
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        overrides = ["judge=openai", "judge.rate.requests_per_minute=500", "judge.rate.tokens_per_minute=90000"]
        cfg = OmegaConf.to_object(compose("config", overrides=overrides))
    assert cfg.judge.rate == RateConfig(500, 90000)
