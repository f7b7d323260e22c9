"""bf16 full fine-tuning without DeepSpeed under DDP on 2 CPU processes: the float32 masters keep every process's
weights identical and moving by Adam's update at lr 1e-5 (tests/unit/training/test_precision.py has the
one-process case and plain AdamW's failure)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tsrl.testing.cli import cli_env

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(Path(__file__).with_name("ddp_bf16_masters.py"))

pytestmark = pytest.mark.slow


def test_ddp_bf16_weights_move_by_the_adam_update(tmp_path):
    env = {**cli_env(), "ACCELERATE_USE_CPU": "true"}  # without it accelerate would start one process per GPU
    accelerate = str(Path(sys.executable).parent / "accelerate")
    command = [accelerate, "launch", "--multi_gpu", "--main_process_port", "0", "--num_processes", "2", SCRIPT]
    command.append(str(tmp_path))  # port 0: a free port, so a parallel launch cannot collide on 29500
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    runs = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert all(r["processes"] == 2 and r["dtype"] == "torch.bfloat16" for r in runs)
    assert all(r["optimizer"] == "MasterWeightAdamW" for r in runs)
    assert runs[0]["weight"] == runs[1]["weight"]
    start, weight = torch.tensor(runs[0]["start"]), torch.tensor(runs[0]["weight"])
    expected = start - 200 * 1e-5
    half_spacing = 0.5 * torch.pow(2.0, torch.floor(torch.log2(expected.abs())) - 7)  # bf16: 7 mantissa bits
    assert ((weight - expected).abs() <= half_spacing + 1e-6).all()
    assert (weight != start).float().mean() > 0.95
