"""The baselines train through the real CLI on a shipped task: SFT and DPO on the ranked ladder (no judge call
after the ladder), RLAIF and Adaptive Pointwise on aime; each writes eval.json."""

from __future__ import annotations

import json

import pytest

from tsrl.testing.cli import TINY, read_metrics

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "recipe, extra, metric",
    [
        ("baseline_sft", ["task=stories"], "train/entropy"),
        ("baseline_dpo", ["task=stories", "algo.max_pairs=4"], "train/dpo/accuracy"),
        ("baseline_rlaif", ["task=aime"], "rubric/mean_grade"),
        ("baseline_adaptive_pointwise", ["task=aime"], "route/tournament_frac"),
    ],
)
def test_baseline_trains_and_evaluates(cli, cache_dir, tmp_path, recipe, extra, metric):
    ladder = [f"reward.ladder_dir={cache_dir / 'ladders'}"] if recipe in ("baseline_sft", "baseline_dpo") else []
    result = cli(
        [
            f"model.cache_dir={cache_dir / 'models'}",
            *TINY,
            f"run_dir={tmp_path / 'run'}",
            f"recipes={recipe}",
            "trainer.max_steps=2",
            "trainer.eval.max_prompts=2",
            "task.max_prompts=4",
            *ladder,
            *extra,
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == [1, 2] and all(metric in r for r in rows)
    evals = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert [e["step"] for e in evals["history"]] == [0, 2]
    if recipe in ("baseline_sft", "baseline_dpo"):
        assert all(r["judge/calls"] == 0 for r in rows)  # only the ladder, at setup
        # SFT: the top half of the ladder reward's k = 4 anchors (algo.anchors=ladder, TSRL), 2 per prompt
        assert rows[0]["train/samples_in_update"] == (2 * 2 if recipe == "baseline_sft" else 2 * 4 * 2)


def test_dpo_starts_at_log_2_and_separates_its_pairs(cli, cache_dir, tmp_path):
    """At step 1 the policy is its reference: loss log 2, no pair ordered. Later steps order pairs."""
    result = cli(
        [
            f"model.cache_dir={cache_dir / 'models'}",
            *TINY,
            f"run_dir={tmp_path / 'run'}",
            "recipes=baseline_dpo",
            "task=stories",
            "task.max_prompts=2",
            "trainer.max_steps=4",
            "trainer.eval.every=0",
            "trainer.eval.max_prompts=1",
            "algo.max_pairs=0",
            f"reward.ladder_dir={cache_dir / 'ladders'}",
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_metrics(tmp_path / "run")
    assert rows[0]["train/loss"] == pytest.approx(0.6931, abs=1e-3) and rows[0]["train/dpo/accuracy"] == 0.0
    assert rows[-1]["train/loss"] < rows[0]["train/loss"] and rows[-1]["train/dpo/accuracy"] > 0.5


def test_dpo_under_lora_uses_the_base_as_its_reference(cli, cache_dir, tmp_path):
    """Under LoRA the reference is the base with the adapter off; the adapter starts at zero (B = 0), so the
    first step's loss is exactly log 2 there too, and the adapter learns to order the pairs."""
    result = cli(
        [
            f"model.cache_dir={cache_dir / 'models'}",
            *TINY,
            f"run_dir={tmp_path / 'run'}",
            "recipes=baseline_dpo",
            "task=stories",
            "task.max_prompts=2",
            "trainer.max_steps=3",
            "trainer.eval.every=0",
            "trainer.eval.max_prompts=1",
            "model.lora.r=4",
            "model.lora.alpha=8",
            "trainer.lr=5e-3",
            f"reward.ladder_dir={cache_dir / 'ladders'}",
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_metrics(tmp_path / "run")
    assert rows[0]["train/loss"] == pytest.approx(0.6931, abs=1e-3)
    assert rows[-1]["train/loss"] < rows[0]["train/loss"]
    assert (tmp_path / "run" / "checkpoints" / "step_000003" / "policy" / "adapter").is_dir()
