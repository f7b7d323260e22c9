"""The progress bar shows what a step has: an offline algo (sft, dpo) scores nothing, so it shows no reward (it read
nan); DPO shows its pair accuracy and margin instead."""

from __future__ import annotations

from tsrl.progress import bar_fields

STEP = {"train/loss": 0.5, "time/step_s": 1.25}


def test_dpo_shows_its_accuracy_and_margin_not_a_nan_reward():
    metrics = {**STEP, "reward/mean": float("nan"), "train/dpo/accuracy": 0.75, "train/dpo/margin": 0.125}
    fields = bar_fields(metrics, 40.0, offline=True)
    assert fields == {
        "accuracy": "0.750", "margin": "0.125", "heldout": "40.0%", "loss": "+0.500", "s_per_step": "1.25"
    }  # fmt: skip


def test_an_online_step_shows_its_mean_reward():
    fields = bar_fields({**STEP, "reward/mean": 0.25}, 40.0, offline=False)
    assert fields["reward"] == "0.250" and "accuracy" not in fields
