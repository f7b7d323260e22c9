"""Each policy-reading regime trains end to end through the real `tsrl-train` CLI on the simulated judge."""

from __future__ import annotations

import json
import subprocess

import pytest

from tsrl.testing.cli import TINY, read_metrics

pytestmark = pytest.mark.slow

SMALL = [*TINY, "trainer.max_steps=2", "trainer.eval.max_prompts=2"]


def train(cli, cache_dir, run_dir, *overrides: str) -> subprocess.CompletedProcess:
    """tsrl-train (through the `cli` fixture) with the shared tiny overrides, minus reward.ladder_dir (these regimes
    keep their ladders under reward.ladder.* or none at all)."""
    return cli([f"model.cache_dir={cache_dir / 'models'}", *SMALL, f"run_dir={run_dir}", *overrides], run_dir.parent)


@pytest.mark.parametrize(
    "regime, overrides, keys",
    [
        ("intuitor", ["algo.adv_scale=group"], {"intuitor/self_certainty_mean"}),
        (
            "reward_model",
            ["reward.ladder.ladder_dir={cache}/ladders", "reward.rm_dir={cache}/rm"],
            {"rm/heldout_pair_accuracy", "rm/score_std"},
        ),
        (
            "self_bootstrap",
            ["reward.ladder.k=3", "reward.period=1", "task.max_prompts=4"],
            {"bootstrap/ladder_diversity", "bootstrap/refreshes", "ladder/bt_spread"},
        ),
    ],
)
def test_policy_regime_trains_through_the_cli(cli, cache_dir, tmp_path, regime, overrides, keys):
    run = tmp_path / "run"
    result = train(cli, cache_dir, run, f"reward={regime}", *[o.format(cache=cache_dir) for o in overrides])
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_metrics(run)
    assert [r["step"] for r in rows] == [1, 2]
    assert keys <= set(rows[0])
    assert all(r["reward/std"] > 0 for r in rows)  # a real signal reached the advantages
    if regime != "self_bootstrap":
        assert all(r["judge/calls"] == 0 for r in rows)  # no judge during training
    else:  # k anchors per sample, plus a full re-ranking of 4 prompts x C(4,2) each step (period 1), one call each
        assert [r["bootstrap/refreshes"] for r in rows] == [1.0, 2.0]
        assert all(r["judge/calls"] == 2 * 4 * 3 + 4 * 6 for r in rows)
        assert 0.0 < rows[0]["bootstrap/ladder_diversity"] <= 1.0
        assert (run / "ladder.jsonl").is_file()
    if regime == "reward_model":
        report = json.loads((run / "reward_model.json").read_text())
        assert report["heldout_pairs"] > 0 and 0.0 <= report["heldout_pair_accuracy"] <= 1.0


def test_self_bootstrap_resume_continues_the_same_trajectory(cli, cache_dir, tmp_path):
    """4 steps with a refresh every 2 vs 3 steps, stop, resume=auto: the resumed run scores against the
    checkpointed ladder and refreshes on the same step, so every metric matches."""
    common = [
        "reward=self_bootstrap",
        "reward.ladder.k=3",
        "reward.period=2",
        "task.max_prompts=4",
        "trainer.checkpoint.every=1",
    ]
    whole, split = tmp_path / "whole", tmp_path / "split"
    whole.mkdir(), split.mkdir()
    assert train(cli, cache_dir, whole, *common, "trainer.max_steps=4").returncode == 0
    assert train(cli, cache_dir, split, *common, "trainer.max_steps=3").returncode == 0
    resumed = train(cli, cache_dir, split, *common, "trainer.max_steps=4", "trainer.checkpoint.resume=auto")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    a, b = read_metrics(whole), read_metrics(split)
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for key in ("reward/mean", "train/loss", "bootstrap/refreshes", "bootstrap/ladder_diversity", "judge/calls"):
        assert [r[key] for r in a] == pytest.approx([r[key] for r in b], rel=1e-6), key
