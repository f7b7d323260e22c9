"""scripts/gpu_smoke.sh's CPU dry run (SMOKE_CPU=1): every job through the code the GPU runs — tsrl-train on one
process, ZeRO-3 on 2 processes (gloo) under the GPU's own gpu1_zero3.yaml, with LoRA, the weight-sync drains and
the 128k-vocabulary log-prob step — and a report with a row per job, in three small files; a job that times out is
reported in its row while the script goes on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JOBS = ("train-bf16", "train-zero3", "train-lora", "sync-zero3", "sync-lora", "logits-128k")

pytestmark = pytest.mark.slow


def smoke(tmp_path: Path, timeout: int, **settings: str) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """The dry run with `settings` in its environment; its exit and each job's result as report.md gives it."""
    env = {**os.environ, "SMOKE_CPU": "1", "PYTHON": sys.executable, "SCRATCH": str(tmp_path / "scratch"), **settings}
    env.pop("ACCELERATE_USE_CPU", None)
    env["OUT"] = str(tmp_path / "out")
    command = [str(ROOT / "scripts" / "gpu_smoke.sh"), "run"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=timeout)
    report = tmp_path / "out" / "report.md"
    assert report.is_file(), result.stdout[-3000:] + result.stderr[-3000:]
    rows = [line.split(" | ") for line in report.read_text().splitlines() if line.startswith("| ")]
    return result, {row[0].removeprefix("| "): row[1] for row in rows if row[0].removeprefix("| ") in JOBS}


def test_dry_run_reports_every_job_with_its_numbers(tmp_path):
    result, rows = smoke(tmp_path, timeout=1800, SMOKE_PEAK_TFLOPS="1")
    tails = (tmp_path / "out" / "tails.log").read_text()
    assert rows == dict.fromkeys(JOBS, "ok"), tails[-6000:]
    assert result.returncode == 0
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["numbers.json", "report.md", "tails.log"]
    assert sum(p.stat().st_size for p in out.iterdir()) < 1_000_000  # what comes back from the device stays small
    jobs = json.loads((out / "numbers.json").read_text())["jobs"]
    for job in ("train-bf16", "train-zero3", "train-lora"):
        assert jobs[job]["generation_tokens_per_s"] > 0 and jobs[job]["update_tokens"] > 0 and jobs[job]["mfu"] > 0
    assert jobs["train-zero3"]["processes"] == 2
    for job in ("sync-zero3", "sync-lora"):  # every engine parameter written once per drain, under its name
        assert jobs[job]["tensors"] > 0 and len(jobs[job]["drain_s"]) == 2 and jobs[job]["processes"] == 2
    assert jobs["sync-lora"]["lora_rank"] > 0
    assert jobs["logits-128k"]["vocab"] == 128_256 and jobs["logits-128k"]["tsrl_gib"] > 0


def test_jobs_past_their_timeout_are_reported_and_the_script_goes_on(tmp_path):
    """The model build times out (so train-bf16 cannot run), the log-prob job still runs, and times out too."""
    result, rows = smoke(tmp_path, timeout=300, SMOKE_JOBS="train-bf16 logits-128k", SMOKE_TIMEOUT_S="1")
    assert result.returncode == 1
    assert rows == {**dict.fromkeys(JOBS, "not run"), "logits-128k": "timed out (1 s)"}
    assert "Model of the train and sync jobs: timed out (1 s)." in (tmp_path / "out" / "report.md").read_text()
