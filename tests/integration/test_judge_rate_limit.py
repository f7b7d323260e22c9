"""judge.rate against the real loopback server: with a limit of R requests per window, the requests the server
receives (its arrival log) never exceed R in any window — with retries and re-asks, with hedges, and for two
judges sharing one provider — and the waits are logged as rate_wait_s. The window is shrunk from a minute to
1 s (plus 0.5 s of slack) so that a test takes seconds; the server's log is checked over every 1 s interval."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from tsrl.remote import rate as rate_module
from tsrl.remote.hedging import HedgeConfig
from tsrl.remote.rate import RateConfig
from tsrl.testing.cli import read_metrics
from tsrl.testing.judge_client import FAST, KEY_ENV, judge_for, most_in_any_window, word_pairs
from tsrl.testing.judge_server import JudgeServer

pytestmark = pytest.mark.usefixtures("api_key")  # the key in KEY_ENV; judges closed after each test

R = 6  # requests per window
WINDOW_S = 1.0


@pytest.fixture(autouse=True)
def one_second_window(monkeypatch):
    monkeypatch.setattr(rate_module, "WINDOW_S", WINDOW_S)
    monkeypatch.setattr(rate_module, "SLACK_S", 0.5)  # arrivals may lag admission by that much under load


def test_retries_and_reasks_stay_within_r_requests_per_window():
    """A fifth of the requests fail (HTTP 500: retried) or come back without a verdict (re-asked); every attempt
    goes through the limiter, so the server never sees more than R in a window, and the waits are logged."""
    faults = ("server_error", "wrong_format")
    with JudgeServer(keep_bodies=True, fault_rate=0.2, fault_kinds=faults, seed=4) as server:
        judge = judge_for(server, concurrency=8, rate=RateConfig(requests_per_minute=R))
        pairs = word_pairs(16)
        verdicts = judge.compare(pairs)
        metrics = judge.drain_metrics()
        arrivals = list(server.arrivals)
    assert all(v.error is None for v in verdicts)
    assert metrics["retries"] >= 1 and metrics["reasks"] >= 1 and len(arrivals) > len(pairs)
    assert most_in_any_window(arrivals, WINDOW_S) <= R, sorted(arrivals)
    assert metrics["rate_wait_s"] > 1.0


def test_hedged_duplicates_stay_within_r_requests_per_window():
    """Some requests are taken and never answered; their hedges (one credit per attempt) count against the limit
    like any attempt. A hedge goes only when the limiter admits it at once, so it never queues before (or holds up)
    the requests waiting there."""
    with JudgeServer(keep_bodies=True, latency_s=0.01, fault_rate=0.25, fault_kinds=("blackhole",), seed=2) as server:
        judge = judge_for(
            server,
            concurrency=8,
            hedge=HedgeConfig(floor_s=0.1, max_extra=1.0),
            retry=replace(FAST, timeout_s=5.0),
            rate=RateConfig(requests_per_minute=R),
        )
        pairs = word_pairs(16)
        verdicts = judge.compare(pairs)
        metrics = judge.drain_metrics()
        arrivals = list(server.arrivals)
    assert all(v.error is None for v in verdicts)
    assert metrics["hedges"] >= 1 and metrics["hedge_wins"] >= 1 and len(arrivals) > len(pairs)
    assert most_in_any_window(arrivals, WINDOW_S) <= R, sorted(arrivals)


def test_two_judges_on_one_provider_share_its_limit():
    """A training and an evaluation judge on the same endpoint, asking at the same time from two threads, share
    one limiter: together they stay within R."""
    with JudgeServer(keep_bodies=True) as server:
        judges = [judge_for(server, concurrency=4, rate=RateConfig(requests_per_minute=R)) for _ in range(2)]
        threads = [threading.Thread(target=judge.compare, args=(word_pairs(9),)) for judge in judges]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        arrivals = list(server.arrivals)
    assert len(arrivals) == 18 and most_in_any_window(arrivals, WINDOW_S) <= R, sorted(arrivals)


def test_without_a_limit_nothing_waits_and_the_server_sees_the_whole_burst():
    """The check has teeth: unpaced, the same batch reaches the server far faster than R per window."""
    with JudgeServer(keep_bodies=True) as server:
        judge = judge_for(server, concurrency=8)
        judge.compare(word_pairs(16))
        metrics = judge.drain_metrics()
        arrivals = list(server.arrivals)
    assert "rate_wait_s" not in metrics and most_in_any_window(arrivals, WINDOW_S) > R


@pytest.mark.slow
def test_a_training_run_takes_the_settings_and_logs_the_wait(tsrl, tmp_path):
    """tsrl-train with judge.rate set (a limit this short run never reaches): every step logs judge/rate_wait_s."""
    with JudgeServer() as server:
        result = tsrl(
            "judge=openai",
            f"judge.base_urls=[{server.url}]",
            f"judge.api_key_env={KEY_ENV}",
            "judge.constrain=off",
            "judge.rate.requests_per_minute=100000",
            "judge.rate.tokens_per_minute=100000000",
            "trainer.max_steps=1",
        )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_metrics(tmp_path / "run")
    assert rows and all(row["judge/rate_wait_s"] >= 0.0 and row["judge/calls"] > 0 for row in rows)
