"""benchmarks/judge_cost.py in its smallest run: 2 humor groups, 2 seeds, three regimes, a noiseless and the ideal
simulated judge, tokens from the loopback server at characters/4. The calls per group are the regimes' formulas, a
noiseless judge orders a round-robin's group perfectly and a noisy one does not; plus the accuracy, the Pareto front
and the calls check by hand, and the row bench.py makes of it."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = sys.modules[name] = importlib.util.module_from_spec(spec)  # registered: its dataclasses look it up
    spec.loader.exec_module(module)
    return module


judge_cost = load("judge_cost")


@pytest.fixture(scope="module")
def smallest(tmp_path_factory):
    out = tmp_path_factory.mktemp("judge_cost")
    argv = ["--prompts", "2", "--seeds", "2", "--regimes", "ladder_k2", "round_robin", "circular"]
    results = judge_cost.main([*argv, "--profiles", "noiseless", "ideal", "--tokenizer", "", "--out", str(out)])
    return results, out


def test_calls_per_group_follow_each_regimes_formula(smallest):
    """G = 8: ladder k = 2 asks 2 verdicts per sample (16 a group), a round-robin G(G−1)/2 = 28, circular G = 8;
    the ladder also ranks each prompt's 10 anchors once, 10·9/2 = 45 calls. The files are written."""
    results, out = smallest
    rows = {r["regime"]: r for r in results["rows"]}
    g = results["group_size"]
    assert (rows["ladder_k2"]["calls"], rows["round_robin"]["calls"], rows["circular"]["calls"]) == (
        2 * g,
        g * (g - 1) / 2,
        g,
    )
    assert rows["ladder_k2"]["setup_calls_per_prompt"] == 45 and rows["circular"]["setup_calls_per_prompt"] == 0
    assert all(r["prompt_tokens"] > 0 and r["completion_tokens"] > 0 for r in rows.values())
    assert rows["round_robin"]["tokens"] > rows["circular"]["tokens"]  # 28 calls against 8, of about the same size
    assert json.loads((out / "results.json").read_text())["rows"][0]["regime"] == "ladder_k2"
    assert "| round_robin | 28 |" in (out / "table.md").read_text() and (out / "frontier.png").stat().st_size > 0


def test_a_noiseless_judge_orders_a_round_robin_perfectly_and_the_ideal_one_does_not(smallest):
    """With τ = 0.001 and no taste every verdict follows the latent quality, so a round-robin's win-rates order every
    pair of different quality; the ideal profile (τ = 1) misorders some."""
    rows = {r["regime"]: r for r in smallest[0]["rows"]}
    accuracy = rows["round_robin"]["accuracy"]
    assert accuracy["noiseless"]["seeds"] == [1.0, 1.0] and accuracy["noiseless"]["ci95"] == 0.0
    assert accuracy["ideal"]["mean"] < 0.97


def test_pairwise_accuracy_by_hand():
    """Qualities 3, 2, 1, 1: five pairs differ (the two 1s are left out). Rewards 3, 1, 1, 0 order four of them
    right and tie (1, 2): (4 + ½)/5 = 0.9; reversed rewards get the four wrong and the tie ½: 0.1."""
    quality = np.array([3.0, 2.0, 1.0, 1.0])
    assert judge_cost.pairwise_accuracy(np.array([3.0, 1.0, 1.0, 0.0]), quality) == pytest.approx(0.9)
    assert judge_cost.pairwise_accuracy(-np.array([3.0, 1.0, 1.0, 0.0]), quality) == pytest.approx(0.1)
    assert np.isnan(judge_cost.pairwise_accuracy(np.array([1.0, 2.0]), np.array([1.0, 1.0])))


def test_pareto_front_keeps_the_points_nothing_cheaper_beats():
    points = [(100.0, 0.8, "a"), (50.0, 0.7, "b"), (200.0, 0.75, "c"), (300.0, 0.9, "d"), (50.0, 0.6, "e")]
    assert [p[2] for p in judge_cost.pareto(points)] == ["b", "a", "d"]


def test_a_token_pass_with_other_calls_fails_loudly():
    accuracy = {"circular": {"calls": 8.0, "setup_calls": 0.0, "accuracy": {"ideal": [0.7]}}}
    tokens = {"circular": {"calls": 9.0, "prompt_tokens": 10.0, "completion_tokens": 1.0}}
    with pytest.raises(RuntimeError, match="circular: 8.0 judge calls per group with the simulated judge but 9.0"):
        judge_cost.rows_of(accuracy, tokens, (0.15, 0.6))


def test_bench_makes_one_row_per_regime_of_the_first_profile(smallest):
    bench = load("bench")
    rows = bench.judge_cost_rows(smallest[0], "cmd")
    assert [r.benchmark for r in rows] == [
        "judge cost ladder_k2 (noiseless judge)",
        "judge cost round_robin (noiseless judge)",
        "judge cost circular (noiseless judge)",
    ]
    assert rows[1].measured == "accuracy 1.000" and rows[1].peer.startswith("28 calls, ")
