"""reward=listwise end to end: the real `tsrl-train` CLI, tiny model, 4 training prompts, against the simulated
judge and the loopback OpenAI-compatible server. Each step judges B = 2 groups of G = 4: judge/calls is groups ×
orders; with anchors the ladder's round-robin is judged once at setup (4 prompts × 10·9/2 = 180 pairs)."""

from __future__ import annotations

import json
import platform
import shutil
from pathlib import Path

import pytest
import torch

from tsrl.integrations.scoring import compose_run_config
from tsrl.judging import build_judge
from tsrl.rewards import RegimeContext, build_regime
from tsrl.tasks import build_task
from tsrl.testing.cli import TINY, read_metrics, run_cli
from tsrl.testing.judge_client import KEY_ENV
from tsrl.testing.judge_server import JudgeServer
from tsrl.training.checkpoint import DONE_FILE
from tsrl.types import Group, Rollout

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("api_key")]

GROUPS = 2  # trainer.prompts_per_step in TINY
SETUP = 180  # the anchor round-robin of 4 prompts with 10 anchors each


def train(cache_dir: Path, run_dir: Path, *overrides: str):
    small = [f"model.cache_dir={cache_dir / 'models'}", *TINY, "trainer.eval.max_prompts=2", "task.max_prompts=4"]
    ladders = f"reward.ladder.ladder_dir={run_dir.parent / 'ladders'}"
    return run_cli([*small, "reward=listwise", ladders, f"run_dir={run_dir}", *overrides], run_dir.parent)


def served(server: JudgeServer, tmp_path: Path) -> list[str]:
    return [
        "judge=openai",
        f"judge.base_urls=[{server.url}]",
        f"judge.api_key_env={KEY_ENV}",
        "judge.constrain=off",
        f"judge.cache_path={tmp_path / 'judge_cache.sqlite'}",
    ]


def check_calls(run_dir: Path, orders: int, setup: int) -> list[dict]:
    rows = read_metrics(run_dir)
    for row in rows:
        assert row["judge/calls"] == row["listwise/calls"] == GROUPS * orders
        assert row["reward/comparisons_per_sample"] == orders / 4 and row["reward/dropped_groups"] == 0
    assert json.loads((run_dir / "setup.json").read_text())["judge_calls_setup"] == setup
    return rows


def test_listwise_trains_against_the_simulated_judge(cache_dir, tmp_path):
    result = train(cache_dir, tmp_path / "run", "reward.orders=2", "trainer.max_steps=2")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = check_calls(tmp_path / "run", orders=2, setup=0)
    assert [r["step"] for r in rows] == [1, 2]
    machine = json.loads((tmp_path / "run" / "setup.json").read_text())["machine"]  # where it ran: the CPU builds
    assert machine["cpu_capability"] == torch.backends.cpu.get_cpu_capability()  # the policy (tsrl-reproduce)
    assert machine["torch"] == torch.__version__ and machine["platform"] == platform.machine() and machine["threads"]


def test_listwise_ladder_resumes_on_the_streamed_trajectory(cache_dir, tmp_path):
    """reward.anchors=2, two orders, 2 streamed steps with a checkpoint after each; a copy of the run as it stood
    after step 1 (its step-2 checkpoint and end mark removed) resumes synchronously and repeats step 2 exactly
    (the shuffles are seeded by the scored-step count, which travels in the checkpoint)."""
    ladder = ["reward.anchors=2", "reward.orders=2", "trainer.max_steps=2"]
    whole = train(cache_dir, tmp_path / "whole", *ladder, "trainer.pipeline=stream", "trainer.checkpoint.every=1")
    assert whole.returncode == 0, whole.stderr[-3000:]
    shutil.copytree(tmp_path / "whole", tmp_path / "split")
    shutil.rmtree(tmp_path / "split" / "checkpoints" / "step_000002")
    (tmp_path / "split" / DONE_FILE).unlink()  # the run had not finished after step 1
    resumed = train(cache_dir, tmp_path / "split", *ladder, "trainer.checkpoint.resume=auto")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    a, b = check_calls(tmp_path / "whole", orders=2, setup=SETUP), check_calls(tmp_path / "split", orders=2, setup=0)
    assert [r["step"] for r in b] == [1, 2]
    for key in ("reward/mean", "reward/std", "listwise/mean_score", "listwise/anchor_tie_rate", "train/loss"):
        assert [r[key] for r in a] == pytest.approx([r[key] for r in b], rel=1e-6), key


def test_listwise_ladder_trains_against_the_loopback_server(cache_dir, tmp_path):
    with JudgeServer() as server:
        result = train(
            cache_dir, tmp_path / "run", *served(server, tmp_path), "reward.anchors=2", "trainer.max_steps=2"
        )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = check_calls(tmp_path / "run", orders=1, setup=SETUP)
    assert all(0 <= r["listwise/mean_score"] <= 10 for r in rows)


def test_lists_scored_over_http_are_mapped_back_to_their_completions(tmp_path):
    """The loopback server scores each fenced response of a list by its word count (at most 10): the regime built
    on the openai judge rewards longer completions more, one call per group and order."""
    with JudgeServer() as server:
        overrides = [o for o in served(server, tmp_path) if not o.startswith("judge=")]
        cfg = compose_run_config("listwise", "openai", "humor", str(tmp_path / "run"), overrides)
        task = build_task(cfg.task)
        judge = build_judge(cfg.judge, task)
        regime = build_regime(cfg.reward, RegimeContext(task, judge, "loopback", tmp_path / "run"))
        texts = ["one", "one two three", "one two three four five six", "one two"]
        prompts = task.prompts("train")[:3]
        batch = regime.score([Group(p, [1], [Rollout(t, [1], [0.0], False) for t in texts]) for p in prompts])
        calls = judge.drain_metrics()["calls"]
    assert calls == len(prompts) == server.stats["requests"]
    assert batch.rewards.argsort(axis=1).tolist() == [[0, 3, 1, 2]] * len(prompts)


def test_a_malformed_list_stops_the_run_naming_the_missing_label(cache_dir, tmp_path):
    """Every list answer lacks its last score line (judge.retry.first_answers=0: no fail-fast on the first answers,
    so the lists reach the failure policy): each list is asked again, then fails, and the run stops in one sentence
    once 2 lists in a row have failed (step 1's two groups; the drop itself is unit-tested)."""
    with JudgeServer(list_missing=1) as server:
        retry = ["judge.retry.first_answers=0", "judge.retry.max_consecutive_failures=2"]
        result = train(cache_dir, tmp_path / "run", *served(server, tmp_path), *retry, "trainer.max_steps=2")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert (
        "answered 2 requests in a row without a readable answer (last: unparseable_list: the answer scores R1, "
        "R2, R3 but not R4)" in result.stderr
    ), result.stderr[-3000:]
    assert server.stats["requests"] >= 4  # both lists of step 1, each asked again
