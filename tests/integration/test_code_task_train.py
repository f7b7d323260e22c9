"""task=code end to end: tsrl-train trains 2 steps with the tiny policy and the sandbox verifier as the reward and
evaluates pass ratio@n and pass@k (pass@5 from 5 samples); Reasoning Arena's Table 1 recipe composes with
task=code for every method, on GPU settings and with the CPU stand-ins of --smoke."""

from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_module

from tsrl.config import register_configs
from tsrl.reproduce import SMOKE, grid_of
from tsrl.testing.cli import TINY, read_metrics

METHODS = ("rlvr", "rlaif", "arenarl", "adaptive_pointwise", "reasoning_arena", "reasoning_arena_live")


@pytest.mark.slow
def test_code_trains_two_steps_with_the_verifier_and_reports_pass_at_k(cli, cache_dir, tmp_path):
    """The tiny policy writes 12 tokens, never a whole code block, so its rewards are 0 without a process being
    started (the sandbox itself is covered by tests/unit/tasks/test_sandbox.py); what this pins is the wiring: the task
    builds, warm-starts the tiny policy on the reference solutions, rewards with the verifier, and evaluates."""
    result = cli(
        [
            f"model.cache_dir={cache_dir / 'models'}",
            *TINY,
            f"run_dir={tmp_path / 'run'}",
            "task=code",
            "reward=verifier",
            "trainer.max_steps=2",
            "task.max_prompts=4",
            "trainer.eval.max_prompts=2",
            "trainer.eval.samples=5",
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == [1, 2] and all(r["judge/calls"] == 0 for r in rows)
    latest = json.loads((tmp_path / "run" / "eval.json").read_text())["latest"]
    assert "held-out pass ratio@n (mean accuracy over n samples)" in result.stdout
    assert 0.0 <= latest["pass_ratio"] <= 100.0 and {"pass@1", "pass@4", "pass@5", "answered"} <= set(latest)


def composed(overrides: list[str]):
    register_configs()
    with initialize_config_module("tsrl.configs", version_base="1.3"):
        return compose("config", overrides=overrides)


def test_reasoning_arena_table1_composes_with_code_for_every_method():
    """The recipe's values (policy, steps, N, 16 evaluation samples; one STEM training mix, no task axis) on GPU
    settings, and with task=code (LiveCodeBench's own task, for a code-trained run of one's own) and the --smoke CPU
    stand-ins every method's config validates and the code task loads."""
    from tsrl.commands.base import to_run_config
    from tsrl.tasks import build_task

    gpu = composed(["recipes=paper/reasoning_arena_table1", "task=code"])
    assert gpu.model.path == "mistralai/Ministral-3-8B-Instruct-2512" and gpu.model.lora.r == 0
    assert (gpu.trainer.max_steps, gpu.trainer.group_size, gpu.trainer.eval.samples) == (1400, 8, 16)
    assert gpu.task.report_k == [5] and gpu.task.release == "release_v6"
    assert "task" not in grid_of("paper/reasoning_arena_table1", SMOKE)  # one policy per method and seed
    assert "code" not in composed(["recipes=paper/reasoning_arena_table1"]).task.mix  # coding filtered out
    for method in METHODS:
        cfg = composed(
            ["recipes=paper/reasoning_arena_table1", *SMOKE, "task=code", f"method={method}", "run_dir=unused"]
        )
        task = build_task(to_run_config(cfg).task)
        assert task.name == "code" and len(task.prompts("train")) == 4  # task.max_prompts=4 of --smoke
