"""Cheap checks run before anything expensive: a reward the task cannot serve stops tsrl-train with one sentence
before a policy is built (the model cache stays empty)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TRAIN = str(Path(sys.executable).parent / "tsrl-train")


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["reward.k=50", "ladder.build=off"], "reward.k=50 needs 50 anchors per training prompt"),
        (["task=stories", "reward=verifier"], "reward=verifier needs a task with a verifier"),
    ],
)
def test_a_reward_the_task_cannot_serve_stops_before_the_policy_is_built(tmp_path, overrides, message):
    models = tmp_path / "models"
    done = subprocess.run(
        [TRAIN, f"model.cache_dir={models}", f"run_dir={tmp_path / 'run'}", *overrides],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, env={**os.environ, "WANDB_MODE": "disabled"},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert not models.exists() or not any(models.iterdir())  # no tiny policy was built first
