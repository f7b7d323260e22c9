"""generator=hf under DeepSpeed ZeRO-3 on 2 CPU processes: gathering the whole policy once per generate call
(generator.gather_zero3, the default) draws exactly the samples the per-layer path draws, fetches no layer while it
decodes, leaves the weights partitioned and the hooks working for the update that follows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tsrl.testing.cli import cli_env

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(Path(__file__).with_name("zero3_generate.py"))

pytestmark = pytest.mark.slow


def test_gathered_generation_draws_the_per_layer_samples(cache_dir, tmp_path):
    env = {**cli_env(), "TSRL_TEST_CACHE": str(cache_dir / "models")}
    env.pop("ACCELERATE_USE_CPU", None)  # with it accelerate would drop DeepSpeed
    accelerate = str(Path(sys.executable).parent / "accelerate")
    config = str(ROOT / "configs" / "accelerate" / "cpu_zero3.yaml")
    result = subprocess.run(
        [accelerate, "launch", "--config_file", config, SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    for rank in (0, 1):
        run = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert (run["processes"], run["zero_stage"]) == (2, 3)
        samples, calls = run["samples"], run["calls"]
        for label in ("before", "after"):  # after: one update later, hooks and partitions back in place
            assert samples[f"{label}/gather"] == samples[f"{label}/layers"], (rank, label)
            assert all(n == 0 for n in calls[f"{label}/layer_fetches/gather"])  # one gather, no per-layer fetch
            assert all(n > 100 for n in calls[f"{label}/layer_fetches/layers"])  # every layer, every token
        assert samples["before/gather"] != samples["after/gather"]  # the update changed the policy
        assert run["partitioned_after"]
