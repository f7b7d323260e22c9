"""Every ranking-core regime trains end to end: the real `tsrl-train` CLI, tiny model, simulated judge."""

import shutil

import pytest

from tsrl.testing.cli import TINY, printed_spend, read_metrics

pytestmark = pytest.mark.slow

SMALL = [*TINY, "trainer.max_steps=2", "trainer.eval.max_prompts=2"]

# (overrides, metric the regime must log, expected judge comparisons per sample or None)
REGIMES = {
    "ladder_elo": (["reward=ladder", "reward.ranking=elo", "reward.k=2"], "ladder/distinct_2", 2.0),
    "one_anchor": (["reward=one_anchor"], "ladder/jaccard_distance", 1.0),
    "rubric": (["reward=rubric"], "rubric/mean_grade", 1.0),
    "in_batch": (["reward=in_batch"], "tournament/top_winrate", 1.5),  # (G−1)/2 = 1.5 matches per sample
    "arena_swiss": (["reward=arena", "reward.topology=swiss"], "tournament/bt_spread", 1.0),  # 2·2/4
    "arena_double": (["reward=arena", "reward.topology=double_elimination"], "tournament/tie_rate", 2.25),
    "adaptive": (["reward=adaptive", "algo=cispo"], "route/tournament_frac", None),
    "verifier": (["reward=verifier"], "verifier/pass_rate", 0.0),
    "constitutional": (
        ["reward=constitutional", "reward.coherence_min_distinct=0.3"],
        "constitutional/vetoed_frac",
        None,
    ),
}


@pytest.mark.parametrize("name", list(REGIMES))
def test_regime_trains_two_steps(cli, name, cache_dir, tmp_path):
    overrides, metric, per_sample = REGIMES[name]
    ladder = [f"reward.ladder_dir={cache_dir / 'ladders'}"] if name in ("ladder_elo", "one_anchor") else []
    result = cli(
        [f"model.cache_dir={cache_dir / 'models'}", *SMALL, f"run_dir={tmp_path / 'run'}", *overrides, *ladder],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert metric in row, sorted(row)
        if per_sample is not None:
            assert row["reward/comparisons_per_sample"] == pytest.approx(per_sample)
        # what a comparison costs: one call (order=random, the default: TSRL's accounting), as a pointwise grade
        cost = 1.0
        assert row["judge/calls"] == pytest.approx(row["reward/comparisons_per_sample"] * 8 * cost)  # 2 prompts x 4
        assert row["judge/calls_per_comparison"] == (cost if row["judge/calls"] else 0.0)
    if name == "adaptive":
        assert all(r["route/verifier"] + r["route/tournament"] == 2 for r in rows)
    low, high = printed_spend(result.stdout)["step"]  # what the run said before its first call
    assert all(low <= r["judge/calls"] <= high for r in rows), (low, high, [r["judge/calls"] for r in rows])
    assert low == high or name == "adaptive"  # only the routed reward's calls depend on the answers


@pytest.mark.parametrize("overrides", [["reward=arena", "reward.topology=swiss"], ["reward=adaptive"]])
def test_seeded_tournament_regimes_resume_on_the_same_trajectory(cli, overrides, cache_dir, tmp_path):
    """Per-step randomness (Swiss draws, coin flips, arrival order) is seeded by the count of scored steps;
    that count travels in checkpoints, so 2 + 2 resumed steps equal 4 uninterrupted ones: a run directory holding
    only the uninterrupted run's step-2 checkpoint resumes onto its steps 3 and 4."""

    def run(run_dir, *extra):
        result = cli(
            [f"model.cache_dir={cache_dir / 'models'}", *SMALL, f"run_dir={run_dir}", *overrides, *extra], tmp_path
        )
        assert result.returncode == 0, result.stderr[-3000:]

    whole, split = tmp_path / "whole", tmp_path / "split"
    run(whole, "trainer.max_steps=4", "trainer.prompts_per_step=4", "trainer.checkpoint.every=2")
    shutil.copytree(whole / "checkpoints" / "step_000002", split / "checkpoints" / "step_000002")
    run(split, "trainer.max_steps=4", "trainer.prompts_per_step=4", "trainer.checkpoint.resume=auto")
    a, b = read_metrics(whole), read_metrics(split)
    assert [r["step"] for r in a] == [1, 2, 3, 4] and [r["step"] for r in b] == [3, 4]
    for key in ("reward/mean", "reward/std", "train/loss", "judge/calls"):
        assert [r[key] for r in a[2:]] == pytest.approx([r[key] for r in b], rel=1e-6), key
