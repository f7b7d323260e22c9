"""The openai judge under the faults of loaded servers, against the real loopback server, through both
transports: requests that are taken and never answered (hedged), unreadable answers (re-asked), endpoints
that are wrong at start (preflight, in the API and in both commands), and every exit closing the judge."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tsrl.errors import INTERRUPTED, ConfigError
from tsrl.judging import JudgeUnavailable
from tsrl.remote.hedging import HedgeConfig
from tsrl.remote.transport import TRANSPORTS
from tsrl.testing.cli import TRAIN, cli_env, run_cli, tiny_overrides
from tsrl.testing.judge_client import FAST, expected, judge_for, timed_compare, word_pairs
from tsrl.testing.judge_server import FENCE, JudgeServer

pytestmark = pytest.mark.usefixtures("api_key")  # the key in KEY_ENV; judges closed after each test

CHECK = str(Path(sys.executable).parent / "tsrl-judge-check")
UNCLOSED = ("Unclosed client session", "Unclosed connector", "Task was destroyed", "never retrieved")
QUICK_HEDGE = HedgeConfig(floor_s=0.1)


def assert_closed_cleanly(stderr: str) -> None:
    leaks = [line for line in stderr.splitlines() if any(mark in line for mark in UNCLOSED)]
    assert not leaks, leaks


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_blackholed_request_is_answered_through_its_hedge(transport):
    """The 11th request is taken and never answered. Its hedge answers after about 0.1 s, far inside the 5 s
    timeout; no attempt fails, and the silent copy is cancelled."""
    with JudgeServer(latency_s=0.01) as server:
        settings = {
            "transport": transport,
            "concurrency": 8,
            "hedge": QUICK_HEDGE,
            "retry": replace(FAST, timeout_s=5.0),
        }
        baseline = timed_compare(judge_for(server, **settings), word_pairs(40))  # no blackhole: this machine, now
        before = server.stats["requests"]
        server.queue = [None] * 10 + ["blackhole"]
        judge = judge_for(server, **settings)
        start = time.perf_counter()
        verdicts = judge.compare(word_pairs(40))
        elapsed = time.perf_counter() - start
        metrics = judge.drain_metrics()
        requests = server.stats["requests"] - before
    # the hedge costs about 0.1 s over the plain batch; waiting for the 5 s timeout instead would fail the bound
    assert [v.p_first is not None for v in verdicts] == [True] * 40 and elapsed < baseline + 1.5, (elapsed, baseline)
    assert metrics["hedges"] == metrics["hedge_wins"] == 1 and requests == 41
    assert "attempt_errors/timeout" not in metrics and "retries" not in metrics
    assert 0.1 <= metrics["hedge_after_s"] < 1.0


def test_without_hedging_a_blackholed_request_holds_the_batch_for_the_whole_timeout():
    """The same fault with hedging off: the batch waits out retry.timeout_s, then the retry answers."""
    with JudgeServer(latency_s=0.01) as server:
        server.queue = [None] * 10 + ["blackhole"]
        judge = judge_for(
            server, concurrency=8, hedge=replace(QUICK_HEDGE, enabled=False), retry=replace(FAST, timeout_s=1.5)
        )
        start = time.perf_counter()
        verdicts = judge.compare(word_pairs(40))
        elapsed = time.perf_counter() - start
        metrics = judge.drain_metrics()
    assert all(v.p_first is not None for v in verdicts) and elapsed >= 1.5
    assert metrics["attempt_errors/timeout"] == metrics["retries"] == 1 and "hedges" not in metrics


def test_hedges_go_to_the_other_endpoint():
    with JudgeServer(latency_s=0.01, keep_bodies=True) as a, JudgeServer(latency_s=0.01, keep_bodies=True) as b:
        a.queue = [None] * 5 + ["blackhole"]
        judge = judge_for(
            a, base_urls=[a.url, b.url], concurrency=4, hedge=QUICK_HEDGE, retry=replace(FAST, timeout_s=5.0)
        )
        verdicts = judge.compare(word_pairs(30))
        metrics = judge.drain_metrics()
        silent, answered = a.bodies[5], list(b.bodies)
    assert all(v.p_first is not None for v in verdicts) and metrics["hedges"] == metrics["hedge_wins"] == 1
    assert silent in answered and len(a.bodies) + len(answered) == 31


def test_the_hedge_budget_holds_when_many_requests_are_never_answered():
    """A third of all requests (hedges included) are blackholed: hedges are capped at 1 + 5 % of the attempts
    and the rest wait out the 0.4 s timeout and are retried; every verdict still arrives. A primary that timed
    out just as its hedge answered is counted as a timeout but not retried, so timeouts exceed retries by at
    most the hedges that won."""
    with JudgeServer(latency_s=0.01, fault_rate=0.3, fault_kinds=("blackhole",), seed=5) as server:
        judge = judge_for(
            server,
            concurrency=16,
            hedge=replace(QUICK_HEDGE, floor_s=0.05),
            retry=replace(FAST, timeout_s=0.4, max_retries=10),
        )
        verdicts = judge.compare(word_pairs(200))
        metrics = judge.drain_metrics()
        sent = server.stats["requests"]
    attempts = 200 + metrics["retries"]  # each reached the server; a hedge cancelled as it left may not have
    assert attempts <= sent <= attempts + metrics["hedges"]
    assert 5 <= metrics["hedges"] <= 1 + 0.05 * attempts
    assert 0 < metrics["retries"] <= metrics["attempt_errors/timeout"] <= metrics["retries"] + metrics["hedge_wins"]
    assert all(v.p_first is not None for v in verdicts)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_unreadable_answer_is_asked_again_with_a_fresh_fence(transport):
    """The server's first answer to each pair has no verdict line, the second is proper: one re-ask each (not a
    transport retry), every verdict right; with retry.reask=0 every one fails as unparseable."""
    requests = word_pairs(30)
    with JudgeServer(first_unreadable=True, keep_bodies=True) as server:
        judge = judge_for(server, transport=transport, logprobs=False, retry=replace(FAST, first_answers=0))
        verdicts = judge.compare(requests)
        metrics = judge.drain_metrics()
        bodies = list(server.bodies)
    assert [v.p_first for v in verdicts] == [expected(r) for r in requests]
    assert metrics["reasks"] == metrics["attempt_errors/unparseable_verdict"] == 30 and len(bodies) == 60
    assert "retries" not in metrics and metrics["errors"] == 0 and all(v.tokens > 0 for v in verdicts)
    fences: dict[tuple, set] = {}
    for body in bodies:
        found = FENCE.findall(body["messages"][-1]["content"])
        fences.setdefault(tuple(text for _, _, text in found), set()).add(found[0][1])
    assert len(fences) == 30 and all(len(tokens) == 2 for tokens in fences.values())  # a new fence per ask

    with JudgeServer(first_unreadable=True) as server:
        judge = judge_for(
            server,
            transport=transport,
            logprobs=False,
            retry=replace(FAST, reask=0, max_consecutive_failures=100, first_answers=0),
        )
        verdicts = judge.compare(requests)
        metrics = judge.drain_metrics()
    assert all(v.p_first is None and v.error.startswith("unparseable_verdict") for v in verdicts)
    assert metrics["reasks"] == 0 and metrics["errors/unparseable_verdict"] == 30


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_preflight_names_the_url_and_the_fix(transport):
    with JudgeServer() as server:
        url = server.url
        with pytest.raises(
            ConfigError,
            match=re.escape(
                f"The judge endpoint {url} does not serve model 'other' (it serves 'judge'); set judge.model"
            ),
        ):
            judge_for(server, transport=transport, model="other")
        assert server.stats["requests"] == 0 and server.stats["models_requests"] == 1
        judge_for(server, transport=transport)  # the served name passes
    with pytest.raises(JudgeUnavailable, match=re.escape(f"The judge endpoint {url} is unreachable (")) as err:
        judge_for(server, transport=transport, base_urls=[server.url])
    assert "\n" not in str(err.value) and str(err.value).endswith("start the server or correct judge.base_urls.")
    with JudgeServer(serve_models=False) as bare:
        with pytest.raises(JudgeUnavailable, match=r"has no GET /models \(http 404\).*judge.preflight=false"):
            judge_for(bare, transport=transport)
        assert judge_for(bare, transport=transport, preflight=False).compare(word_pairs(1))[0].p_first is not None


def test_a_judge_dropped_without_close_leaves_nothing_open():
    """The plain API: a judge used once and dropped, then the interpreter exits."""
    driver = (
        "import gc, sys\nfrom tsrl.judging import build_judge\n"
        "from tsrl.remote.openai_config import OpenAIJudgeConfig\n"
        "from tsrl.testing.fakes import NumberTask\nfrom tsrl.testing.judge_client import word_pairs\n"
        "cfg = OpenAIJudgeConfig(base_urls=[sys.argv[1]], api_key_env='', order='fixed')\n"
        "print(build_judge(cfg, NumberTask()).compare(word_pairs(5))[0].p_first is not None)\ngc.collect()\n"
        "kept = build_judge(cfg, NumberTask())\nkept.compare(word_pairs(5))\n"
    )  # `kept` closes at exit
    with JudgeServer() as server:
        done = subprocess.run(
            [sys.executable, "-c", driver, server.url],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
            timeout=120,
        )
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr[-2000:]
    assert_closed_cleanly(done.stderr)


def check_run(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHECK, f"run_dir={tmp_path / 'check'}", "check.prompts=6", "judge=openai", "judge.api_key_env=", *overrides],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=tmp_path,
        timeout=300,
    )


def test_judge_check_with_one_request_in_a_hundred_never_answered_ends_in_seconds_not_a_timeout(tmp_path):
    """The issue's case: 120 questions at 50 ms, 1 % taken and never answered, the default 60 s timeout. Hedged,
    the check ends in seconds with every question answered and exits cleanly."""
    with JudgeServer(latency_s=0.05) as server:
        server.queue = [None] * 40 + ["blackhole"] + [None] * 40 + ["blackhole"]
        start = time.perf_counter()
        done = check_run(tmp_path, f"judge.base_urls=[{server.url}]", "judge.concurrency=16")
        elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-2000:]
    assert "120/120 questions answered" in done.stdout and elapsed < 30.0
    assert_closed_cleanly(done.stderr)


@pytest.mark.parametrize("case", ["bad_port", "unreachable", "wrong_model"])
def test_preflight_failures_stop_both_commands_before_anything_is_built(case, cache_dir, tmp_path):
    """Each one sentence, exit status 2, no traceback, no open session, and for tsrl-train no model built."""
    with JudgeServer() as dead:
        dead_url = dead.url  # closed from here on
    with JudgeServer() as server:
        live = server.url
        url, extra, message = {
            "bad_port": (
                "http://127.0.0.1:99999/v1",
                [],
                "judge.base_urls entry 'http://127.0.0.1:99999/v1' has port "
                "'99999', which is not a number in 1–65535; fix the port.",
            ),
            "unreachable": (dead_url, [], f"The judge endpoint {dead_url} is unreachable ("),
            "wrong_model": (
                live,
                ["judge.model=Qwen/Qwen3-8B"],
                f"The judge endpoint {live} does not serve model "
                "'Qwen/Qwen3-8B' (it serves 'judge'); set judge.model to the served name.",
            ),
        }[case]
        overrides = ["judge=openai", f"judge.base_urls=[{url}]", "judge.api_key_env=", *extra]
        models = tmp_path / "models"
        train = run_cli(
            [*tiny_overrides(cache_dir), f"model.cache_dir={models}", f"run_dir={tmp_path / 'run'}", *overrides],
            tmp_path,
        )
        check = check_run(tmp_path, f"judge.base_urls=[{url}]", *extra)
        assert server.stats["requests"] == 0
    for done in (train, check):
        assert done.returncode == 2, done.stderr[-2000:]
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"tsrl: error: {message}"), lines
        assert_closed_cleanly(done.stderr)
    assert not models.exists() and not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_judge_dead_during_the_ladder_build_stops_the_run_with_its_session_closed(cache_dir, tmp_path):
    """The endpoint lists its model, then answers every question with a 500: the ladder build stops after
    max_consecutive_failures with one sentence naming the URL, and nothing else is printed after it."""
    with JudgeServer(fault_rate=1.0, fault_kinds=("server_error",)) as server:
        done = run_cli(
            [
                *tiny_overrides(cache_dir),
                f"reward.ladder_dir={tmp_path / 'ladders'}",
                f"run_dir={tmp_path / 'run'}",
                "judge=openai",
                f"judge.base_urls=[{server.url}]",
                "judge.api_key_env=",
                "judge.retry.backoff_s=0.001",
                "judge.retry.max_retries=1",
                "judge.constrain=off",
            ],
            tmp_path,
        )  # dead after the start: no probe answers 500 first
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"tsrl: error: The judge at {server.url} failed 20 requests in a row")
    assert_closed_cleanly(done.stderr)


@pytest.mark.slow
def test_ctrl_c_during_the_ladder_build_leaves_no_session_open(cache_dir, tmp_path):
    with JudgeServer(latency_s=0.05) as server:
        proc = subprocess.Popen(
            [
                TRAIN,
                *tiny_overrides(cache_dir),
                f"reward.ladder_dir={tmp_path / 'ladders'}",
                f"run_dir={tmp_path / 'run'}",
                "judge=openai",
                f"judge.base_urls=[{server.url}]",
                "judge.api_key_env=",
            ],
            env=cli_env(),
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        while server.stats["requests"] < 200:
            assert proc.poll() is None, proc.stderr.read()[-2000:]
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == INTERRUPTED and "Traceback" not in stderr, stderr[-2000:]
    assert stderr.strip().splitlines()[-1].startswith("tsrl-train: stopped by Ctrl-C; no checkpoint in "), stderr
    assert_closed_cleanly(stderr)
