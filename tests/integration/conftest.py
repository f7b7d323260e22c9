"""Run the real `tsrl-train` entry point as a subprocess on a very small configuration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TRAIN = str(Path(sys.executable).parent / "tsrl-train")


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def tsrl(cache_dir, tmp_path):
    """Call tsrl-train with a tiny model and a few steps; extra overrides win. Returns CompletedProcess."""

    def call(*overrides: str, run_dir: Path | None = None, multirun: bool = False) -> subprocess.CompletedProcess:
        small = [
            f"model.cache_dir={cache_dir / 'models'}", "model.warmstart_steps=30", "model.hidden_size=32",
            "model.num_layers=2", "model.num_heads=2", "model.vocab_size=600",
            f"reward.ladder_dir={cache_dir / 'ladders'}", "trainer.max_steps=3", "trainer.prompts_per_step=2",
            "trainer.group_size=4", "trainer.eval.samples=1", "trainer.eval.max_prompts=4",
            "generator.max_new_tokens=12",
        ]
        if not multirun:
            small.append(f"run_dir={run_dir or tmp_path / 'run'}")
        env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "HYDRA_FULL_ERROR": "0"}
        cmd = [TRAIN, *(["-m"] if multirun else []), *small, *overrides]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)

    return call


def read_metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
