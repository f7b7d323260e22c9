"""scripts/simulate_regimes.py: the closed forms of TSRL §3 against Monte Carlo and against each other.

Monte Carlo checks allow 4 standard errors of the exact value (a false alarm has probability ≈ 6e-5 per check;
the generators are seeded, so a pass is reproducible).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "simulate_regimes.py"
spec = importlib.util.spec_from_file_location("simulate_regimes", SCRIPT)
sim = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sim)

TRIALS = 20_000


def within(mc: float, exact: float, trials: int = TRIALS) -> bool:
    return abs(mc - exact) <= 4 * np.sqrt(exact * (1 - exact) / trials) + 1e-12


def binomial_difference(k: int, p1: float, p2: float) -> tuple[float, float]:
    """P(S1 > S2), P(S1 = S2) for S_i ~ Binomial(k, p_i), summed term by term."""
    s = np.arange(k + 1)
    pmf1, pmf2 = binom.pmf(s, k, p1), binom.pmf(s, k, p2)
    return (sum(pmf1[a] * pmf2[b] for a in s for b in s if a > b), sum(pmf1[a] * pmf2[a] for a in s))


@pytest.mark.parametrize("k, p1, p2", [(1, 0.3, 0.6), (4, 0.4, 0.6), (16, 0.45, 0.55), (32, 0.2, 0.3)])
def test_ladder_misorder_and_tie_match_the_binomial_difference(k, p1, p2):
    p = np.array([[p1] * k, [p2] * k])
    assert np.allclose(sim.count_pmf(p[0]), binom.pmf(np.arange(k + 1), k, p1))
    misorder, tie = sim.exact_ladder(p)
    assert np.allclose((misorder, tie), binomial_difference(k, p1, p2))
    mc = sim.orderings(sim.ladder_trial(p, TRIALS, np.random.default_rng(k)))
    assert within(mc["mc_misorder"], misorder) and within(mc["mc_tie"], tie)


def test_poisson_binomial_ladder_matches_monte_carlo():
    """Unequal p's across anchors (the sweep's case) have no binomial shortcut: checks the convolution."""
    p = sim.win_prob(sim.qualities(0.5), sim.anchor_qualities(8), 1.0, 0.1)  # [2, 8]
    misorder, tie = sim.exact_ladder(p)
    mc = sim.orderings(sim.ladder_trial(p, TRIALS, np.random.default_rng(1)))
    assert within(mc["mc_misorder"], misorder) and within(mc["mc_tie"], tie)


@pytest.mark.parametrize("k", sim.KS)
def test_hoeffding_bounds_the_exact_probability_of_not_ranking_correctly(k):
    grid = np.linspace(0.02, 0.98, 13)
    for p1 in grid:
        for p2 in grid[grid > p1]:
            misorder, tie = sim.exact_ladder(np.array([[p1] * k, [p2] * k]))
            tight, paired = sim.hoeffding_bound(p2 - p1, k, paired=False), sim.hoeffding_bound(p2 - p1, k)
            assert misorder + tie <= tight + 1e-12 and tight <= paired
    for gap in sim.GAPS:
        p = sim.win_prob(sim.qualities(gap), sim.anchor_qualities(k), 1.0, 0.0)
        assert sum(sim.exact_ladder(p)) <= sim.hoeffding_bound(p[1].mean() - p[0].mean(), k, paired=False)


@pytest.mark.parametrize("k, flip", [(1, 0.0), (4, 0.2), (32, 0.0)])
def test_ladder_variance_is_at_most_a_quarter_over_k_and_matches_monte_carlo(k, flip):
    """Sample variance s² of n draws has standard error √((μ4 − σ⁴)/n), μ4 estimated from the draws."""
    p = sim.win_prob(sim.qualities(1.0), sim.anchor_qualities(k), 1.0, flip)
    rewards = sim.ladder_trial(p, TRIALS, np.random.default_rng(k)) / k  # [T, 2]
    var = sim.ladder_variance(p)
    assert np.all(var <= 1 / (4 * k))
    assert np.isclose(sim.ladder_variance(np.full((1, k), 0.5))[0], 1 / (4 * k))
    mu4 = ((rewards - rewards.mean(0)) ** 4).mean(0)
    assert np.all(np.abs(rewards.var(0) - var) <= 4 * np.sqrt((mu4 - var**2) / TRIALS))


@pytest.mark.parametrize("gap, sigma", [(0.25, 0.5), (0.5, 1.0), (1.0, 2.0), (1.0, 0.5)])
def test_rubric_misorder_is_phi_of_minus_gap_over_root_two_sigma(gap, sigma):
    scores = sim.rubric_trial(sim.qualities(gap), sigma, TRIALS, np.random.default_rng(2))
    mc = sim.orderings(scores)
    assert within(mc["mc_misorder"], sim.rubric_misorder(gap, sigma)) and mc["mc_tie"] == 0
    assert np.allclose(scores.var(0), sigma**2, rtol=4 * np.sqrt(2 / TRIALS))


@pytest.mark.parametrize("p1, p2", [(0.5, 0.5), (0.3, 0.7), (0.1, 0.2)])
def test_single_pair_probabilities_sum_to_one_and_match_monte_carlo(p1, p2):
    exact = sim.single_pair(p1, p2)
    assert np.isclose(sum(exact.values()), 1.0)
    mc = sim.orderings(sim.ladder_trial(np.array([[p1], [p2]]), TRIALS, np.random.default_rng(3)))
    assert within(mc["mc_correct"], exact["correct"]) and within(mc["mc_misorder"], exact["wrong"])
    assert within(mc["mc_tie"], exact["tie"])


def test_flip_half_leaves_no_information():
    """f = 0.5 makes every verdict a coin: misorder equals correct order, whatever Δq and K."""
    p = sim.win_prob(sim.qualities(1.0), sim.anchor_qualities(8), 1.0, 0.5)
    assert np.allclose(p, 0.5)
    misorder, tie = sim.exact_ladder(p)
    assert np.isclose(misorder, 1 - misorder - tie) and sim.hoeffding_bound(0.0, 8) == 1.0
    pair = sim.single_pair(0.5, 0.5)
    assert np.isclose(pair["wrong"], pair["correct"]) and sim.head_to_head(1.0, 1.0, 0.5) == 0.5
    mc = sim.orderings(sim.ladder_trial(p, TRIALS, np.random.default_rng(4)))
    assert within(mc["mc_misorder"], misorder) and within(mc["mc_correct"], misorder)


def test_script_writes_results_and_plot(tmp_path):
    subprocess.run(
        [sys.executable, str(SCRIPT), "--trials", "200", "--out", str(tmp_path)], check=True, capture_output=True
    )
    results = json.loads((tmp_path / "results.json").read_text())
    assert len(results["ladder"]) == len(sim.KS) * len(sim.FLIPS) * len(sim.GAPS)
    assert (tmp_path / "plot.png").stat().st_size > 0
    assert "Rubric scalar" in (tmp_path / "results.md").read_text()
