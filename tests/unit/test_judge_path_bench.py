"""benchmarks/judge_path_bench.py's pieces, against the real loopback judge server (no trainer, no TRL import):
TRL's reward function is async and sends a batch's requests together, and it gives tsrl's rewards."""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tsrl.integrations.scoring import compose_run_config
from tsrl.judging import build_judge, close_judge, judge_fingerprint
from tsrl.rewards import RegimeContext, build_regime
from tsrl.tasks import TaskView, build_task
from tsrl.testing.judge_server import JudgeServer
from tsrl.types import Group, Rollout

_path = Path(__file__).resolve().parents[2] / "benchmarks" / "judge_path_bench.py"
_spec = importlib.util.spec_from_file_location("judge_path_bench", _path)
bench = sys.modules["judge_path_bench"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

LATENCY = 0.3


@pytest.fixture(scope="module")
def server():
    with JudgeServer(latency_s=0.0) as running:  # answers at once while the ladders are built
        yield running


@pytest.fixture(scope="module")
def prompt():
    from tsrl.tasks import HumorConfig, HumorTask

    return HumorTask(HumorConfig()).prompts("train")[0]


def trl_batch(prompt, texts: list[str]) -> dict:
    """What GRPOTrainer hands a reward function for one group (conversational prompts, as the benchmark's)."""
    return {
        "prompts": [[{"role": "user", "content": prompt.text}]] * len(texts),
        "completions": [[{"role": "assistant", "content": t}] for t in texts],
        "completion_ids": [list(range(len(t.split()))) for t in texts],
    }


def test_trl_reward_is_async_and_sends_a_batch_at_once(server, prompt, tmp_path):
    """2 completions × k = 4 anchors = 8 requests, each answered 0.3 s after it arrives: sent together they take
    one latency (< 2 × 0.3 s), one by one 8 × 0.3 s. TRL 1.16 awaits a reward function whose __call__ is a
    coroutine function (trl/trainer/utils.py, is_async_callable)."""
    reward = bench.AsyncJudgeReward(server.url, tmp_path / "ladders", tmp_path / "run", [prompt.text], group=2)
    assert inspect.iscoroutinefunction(reward.__call__)
    before = server.stats["requests"]
    server.latency_s = LATENCY
    try:
        start = time.perf_counter()
        rewards = asyncio.run(reward(**trl_batch(prompt, ["ha", "a much longer joke about a cat and a dog"])))
        elapsed = time.perf_counter() - start
    finally:
        server.latency_s = 0.0
    assert server.stats["requests"] - before == 8 and reward.calls[-1]["judge_calls"] == 8
    assert LATENCY <= elapsed < 2 * LATENCY, f"8 requests took {elapsed:.2f} s"
    assert len(rewards) == 2 and reward.calls[-1]["completions"] == 2 and reward.calls[-1]["tokens"] == 1 + 10


def test_both_sides_give_the_same_rewards(server, prompt, tmp_path):
    """The same completions through TRL's reward function and through the regime tsrl's side composes (its judge
    and reward overrides): equal rewards, and not all equal (the loopback judge prefers the longer response, so
    completions of 1 to 60 words sit at different rungs of the ladder)."""
    texts = [" ".join(["word"] * n) for n in (1, 3, 6, 10, 15, 25, 40, 60)]
    trl_side = bench.AsyncJudgeReward(server.url, tmp_path / "ladders", tmp_path / "trl", [prompt.text])
    trl_rewards = asyncio.run(trl_side(**trl_batch(prompt, texts)))
    cfg = compose_run_config(
        "ladder",
        "openai",
        "humor",
        str(tmp_path / "tsrl"),
        bench.judge_overrides(server.url),
        bench.reward_options(tmp_path / "ladders"),
    )
    task = build_task(cfg.task)
    judge = build_judge(cfg.judge, task)
    try:
        context = RegimeContext(TaskView(task, [prompt]), judge, judge_fingerprint(cfg.judge), tmp_path / "tsrl")
        regime = build_regime(cfg.reward, context)
        batch = regime.score([Group(prompt, [], [Rollout(t, [], [], False) for t in texts])])  # rewards [1, G]
    finally:
        close_judge(judge)
    assert np.allclose(batch.rewards[0], trl_rewards) and len(set(trl_rewards)) > 2


def test_the_summary_and_bench_rows_pair_each_step_with_trl(tmp_path):
    """Hand-made rounds (the first is warm-up): each side's ratio is the median of its step over the same round's
    TRL step, and bench.py's rows put the target on stream (≤ 0.6×) and overlap (< stream) at L = 1 s, 27m only."""
    spec = importlib.util.spec_from_file_location("bench", _path.parent / "bench.py")
    report = sys.modules["bench"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)

    def step(step_s: float) -> dict:
        parts = {"cpu_s": 1.5, "generate_s": 1.0, "wait_s": 0.5, "update_s": 1.0}
        return {"step_s": step_s, **parts, "judge_calls": 256, "tokens": 9}

    times = {"trl": (99.0, 10.0, 20.0, 10.0), "sync": (1.0, 9.0, 18.0, 9.0), "stream": (1.0, 5.0, 14.0, 7.0)}
    times["overlap"] = (1.0, 4.0, 8.0, 5.0)
    rounds = [{side: step(t[i]) for side, t in times.items()} for i in range(4)]
    summary = bench.summarise(rounds, warmup=1)
    assert summary["trl"]["step_s"] == 10.0 and summary["stream"]["ratio"] == 0.7  # 0.5, 0.7, 0.7
    assert summary["overlap"]["ratio"] == 0.4 and summary["sync"]["ratio"] == 0.9
    results = {"size": "27m", "latencies": {"1.0": {"summary": summary}, "0.3": {"summary": summary}}}
    rows = report.judge_path_rows(results, "cmd")
    assert [r.benchmark.split(": ")[1] for r in rows] == ["tsrl sync", "tsrl stream", "tsrl overlap"] * 2
    assert [r.met for r in rows] == [None, None, None, None, False, True]  # L = 0.3 first: no target there
    table = bench.markdown({"latencies": {"1.0": {"summary": summary}}}).splitlines()
    assert len(table) == 2 + 4 and "| 1 | " in table[2] and "| **0.70** |" in table[4]  # TRL, sync, stream, …
    assert "MISSED" in bench.verdict(results) and bench.verdict({**results, "size": "tiny"}).endswith("this run")


def test_the_vllm_report_shows_the_weight_sync_and_streams_arrivals(tmp_path):
    """--generator vllm (hand-made rounds, no vLLM needed): the summary keeps the weight sync of every side and
    when stream's first and last group reached the judge; the table adds both columns (— where a side has no
    arrivals); the verdict holds overlap to ≤ 0.5× TRL, not merely below stream; the vLLM child's overrides pick
    generator=vllm and leave the batch whole (no prompts_per_call)."""

    def step(step_s: float, side: str) -> dict:
        parts = {"cpu_s": 1.5, "generate_s": 1.0, "wait_s": 0.5, "update_s": 1.0, "sync_s": 0.25}
        arrivals = {"first_arrival_s": 0.75, "last_arrival_s": 1.0} if side == "stream" else {}
        return {"step_s": step_s, **parts, **arrivals, "judge_calls": 256, "tokens": 9}

    times = {"trl": (10.0,) * 3, "sync": (9.0,) * 3, "stream": (5.5,) * 3, "overlap": (5.2,) * 3}
    rounds = [{side: step(t[i], side) for side, t in times.items()} for i in range(3)]
    summary = bench.summarise(rounds, warmup=1)
    assert summary["stream"]["last_arrival_s"] == 1.0 and summary["trl"]["sync_s"] == 0.25
    assert "last_arrival_s" not in summary["sync"]
    results = {"size": "27m", "generator": "vllm", "latencies": {"1.0": {"summary": summary}}}
    table = bench.markdown(results).splitlines()
    header = [cell.strip() for cell in table[0].split("|")]
    assert header.index("weight sync") == header.index("update") + 1 and "first–last arrival" in header
    assert len(table[1].split("|")) == len(table[0].split("|")) == len(table[4].split("|"))
    assert "| 0.25 | 0.75–1.00 |" in table[4] and "| 0.25 | — |" in table[3]  # stream; sync
    assert "| 0.25 |" not in bench.markdown({**results, "generator": "hf"})  # the hf table is as before
    assert bench.verdict(results).endswith("overlap 0.52× (≤ 0.5): MISSED")  # stream 0.55 met, overlap not
    assert bench.verdict({**results, "generator": "hf"}).endswith(": met")  # with hf: overlap < stream is enough
    spec = bench.RunSpec(tmp_path, 3, 0, 1)
    overrides = bench.tsrl_overrides(spec, "stream", "http://x", "vllm")
    assert "generator=vllm" in overrides and "generator.dtype=bfloat16" in overrides  # TRL's engine: bfloat16
    assert not any("prompts_per_call" in o for o in overrides)
    assert "generator.prompts_per_call=2" in bench.tsrl_overrides(spec, "stream", "http://x")
