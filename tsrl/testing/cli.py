"""Test and benchmark support: the real `tsrl-train` entry point run as a subprocess on a very small configuration.

`TINY` is a 2-layer, 32-wide policy with a 30-step warm start and tiny batches; `tiny_overrides` adds a cache
folder (so the policy is built once per test session), 3 steps and a 4-prompt evaluation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TRAIN = str(Path(sys.executable).parent / "tsrl-train")

# A 2-layer, 32-wide policy with a 30-step warm start and tiny batches: every CLI test builds it once per session.
TINY = [
    "model.warmstart_steps=30",
    "model.hidden_size=32",
    "model.num_layers=2",
    "model.num_heads=2",
    "model.vocab_size=600",
    "trainer.prompts_per_step=2",
    "trainer.group_size=4",
    "trainer.eval.samples=1",
    "generator.max_new_tokens=12",
]


def cli_env() -> dict[str, str]:
    """The current environment (tests may set variables), wandb offline and quiet."""
    return {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "HYDRA_FULL_ERROR": "0"}


def tiny_overrides(cache_dir: Path) -> list[str]:
    """The tiny policy (built once per session under cache_dir), 3 steps, a 4-prompt evaluation."""
    return [
        f"model.cache_dir={cache_dir / 'models'}",
        *TINY,
        f"reward.ladder_dir={cache_dir / 'ladders'}",
        "trainer.max_steps=3",
        "trainer.eval.max_prompts=4",
    ]


def run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """`tsrl-train *args` as a subprocess, output captured."""
    return subprocess.run([TRAIN, *args], capture_output=True, text=True, env=cli_env(), cwd=cwd, timeout=600)


def read_metrics(run_dir: Path) -> list[dict]:
    """The run's metrics.jsonl, one dict per line."""
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def printed_spend(stdout: str) -> dict[str, tuple[int, int]]:
    """The judge calls a run printed before its first call (tsrl/spend.py): setup (summed over its lines),
    per step, per evaluation, the number of evaluations and the whole run, each as (low, high)."""
    import re

    def calls(text: str) -> tuple[int, int]:
        low, _, high = text.replace(",", "").partition("–")
        return int(low), int(high or low)

    def one(pattern: str) -> tuple[int, int]:
        found = re.search(pattern, stdout, re.M)
        if found is None:
            raise AssertionError(f"no line matching {pattern!r} in the run's output:\n{stdout[:2000]}")
        return calls(found.group(1))

    setup = [calls(n) for n in re.findall(r"^  setup: ([\d,–]+) calls", stdout, re.M)]
    return {
        "setup": (sum(s[0] for s in setup), sum(s[1] for s in setup)),
        "step": one(r"^  per step: ([\d,–]+) calls"),
        "eval": one(r"^  evaluation: ([\d,–]+) calls"),
        "evaluations": one(r"calls × ([\d,]+) evaluations?\b"),
        "run": one(r"^  (?:whole run|rest of the run from step \d+): ([\d,–]+) calls"),
    }


LAUNCHERS = {"ddp": "cpu_ddp.yaml", "zero3": "cpu_zero3.yaml"}
ROOT = Path(__file__).resolve().parents[2]


def launch(kind: str | None, args: list[str], cache_dir: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    """`args` (a script, or `-m tsrl.commands.train` with overrides) on one process (kind None) or on two under
    `accelerate launch` with the shipped CPU file of `kind` (ddp | zero3); output captured, not checked."""
    env = {**cli_env(), "TSRL_TEST_CACHE": str(cache_dir / "models")}
    if kind is None:
        command = [sys.executable, *args]
    else:
        if kind == "ddp":  # without it accelerate would start one process per (absent) GPU
            env["ACCELERATE_USE_CPU"] = "true"
        else:  # with it accelerate would drop DeepSpeed
            env.pop("ACCELERATE_USE_CPU", None)
        accelerate = str(Path(sys.executable).parent / "accelerate")
        config = str(ROOT / "configs" / "accelerate" / LAUNCHERS[kind])
        command = [accelerate, "launch", "--config_file", config, *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)
