"""Exact pins of the rating code: Elo worked out by hand, the batched Bradley–Terry fit against an independent
optimiser (L-BFGS), standardising, and the bracket formats' defaults.

Each test checks a behaviour the module docstring promises on a case small enough to work out by hand, written
against the mutants `make mutate` found alive (this file pins what the broader tests leave loose).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from scipy.optimize import minimize

from tsrl.ranking import (
    ConstitutionalBracket,
    DoubleElimination,
    SingleElimination,
    Swiss,
    bradley_terry_loss,
    elo_ratings,
    fit_bradley_terry,
    fit_bradley_terry_batch,
    pad_matches,
    run_schedules,
    standardise,
)


def replay(n: int, rows: Sequence[tuple[int, int, float]], k: float = 16.0, scale: float = 400.0) -> np.ndarray:
    """One pass of the module docstring's update rule over `rows` in the given order (the oracle)."""
    rating = np.zeros(n)
    for i, j, y in rows:
        expected = 1.0 / (1.0 + 10.0 ** ((rating[j] - rating[i]) / scale))
        rating[i] += k * (y - expected)
        rating[j] -= k * (y - expected)
    return rating - rating.mean()


def test_elo_one_and_two_wins_by_hand():
    """One win from equal ratings: E = 1/(1 + 10⁰) = ½, so R₀ = 0 + 16·(1 − ½) = 8 and R₁ = −8 (mean already
    zero). A second win: E = 1/(1 + 10^((−8 − 8)/400)) = 1/(1 + 10^−0.04) = 1/1.9120108 = 0.5230096, so each
    rating moves by 16·(1 − 0.5230096) = 7.6318466: ±15.6318466. Two identical rows replay the same in every
    order, so the default 16 permutations give the same numbers (averaging equal runs changes nothing)."""
    assert elo_ratings(2, [(0, 1, 1.0)], k_factor=16, scale=400, permutations=1).tolist() == [8.0, -8.0]
    second = 16.0 * (1.0 - 1.0 / (1.0 + 10.0 ** (-16.0 / 400.0)))
    assert second == pytest.approx(7.6318466, abs=1e-7)
    twice = elo_ratings(2, [(0, 1, 1.0), (0, 1, 1.0)], k_factor=16, scale=400, permutations=1)
    assert twice == pytest.approx([8.0 + second, -8.0 - second], abs=1e-12)
    assert elo_ratings(2, [(0, 1, 1.0), (0, 1, 1.0)]) == pytest.approx(twice, abs=1e-12)  # defaults: 16, 400
    assert elo_ratings(2, [(0, 1, 1.0), (0, 1, 1.0)], k_factor=32) == pytest.approx(replay(2, [(0, 1, 1.0)] * 2, 32))
    assert elo_ratings(2, [(0, 1, 1.0), (0, 1, 1.0)], scale=100) == pytest.approx(replay(2, [(0, 1, 1.0)] * 2, 16, 100))
    # a loss (y = 0) and a tie (y = ½) are valid outcomes
    assert elo_ratings(2, [(0, 1, 0.0)], permutations=1).tolist() == [-8.0, 8.0]
    assert elo_ratings(2, [(0, 1, 0.5)], permutations=1).tolist() == [0.0, 0.0]
    assert elo_ratings(1, []).tolist() == [0.0]  # one player, no match: valid


def test_elo_averages_seeded_orders():
    """Rows A = (0 ≻ 1), B = (1 ≻ 2) give different ratings in the orders AB and BA. With P permutations each
    order is replayed some c times, so the result is (c·r_AB + (P − c)·r_BA)/P for an integer c ∈ [0, P]; P = 1
    gives one of the two. The seed picks the orders: over seeds 0…19 with P = 1 both orders appear (one order
    for all 20 has probability 2·2⁻²⁰), and the default seed is 0."""
    rows = [(0, 1, 1.0), (1, 2, 1.0)]
    r_ab, r_ba = replay(3, rows), replay(3, rows[::-1])
    assert not np.allclose(r_ab, r_ba)
    singles = [elo_ratings(3, rows, permutations=1, seed=s) for s in range(20)]
    assert all(np.allclose(r, r_ab) or np.allclose(r, r_ba) for r in singles)
    assert any(np.allclose(r, r_ab) for r in singles) and any(np.allclose(r, r_ba) for r in singles)
    for perms in (2, 5, 16):
        mixed = elo_ratings(3, rows, permutations=perms, seed=7)
        c = perms * (mixed[0] - r_ba[0]) / (r_ab[0] - r_ba[0])
        assert c == pytest.approx(round(c), abs=1e-9) and 0 <= round(c) <= perms
        assert mixed == pytest.approx((round(c) * r_ab + (perms - round(c)) * r_ba) / perms, abs=1e-12)
    assert np.array_equal(elo_ratings(3, rows), elo_ratings(3, rows, permutations=16, seed=0))
    assert any(not np.array_equal(elo_ratings(3, rows), elo_ratings(3, rows, permutations=p)) for p in (15, 17))


@pytest.mark.parametrize(
    "bad", [{"n": 0}, {"k_factor": 0.0}, {"k_factor": -1.0}, {"scale": 0.0}, {"scale": -400.0}, {"permutations": 0}]
)
def test_elo_rejects_each_invalid_argument_on_its_own(bad):
    args = {"n": 2, "k_factor": 16.0, "scale": 400.0, "permutations": 1} | bad
    n = args.pop("n")
    with pytest.raises(ValueError, match="Elo needs"):
        elo_ratings(n, [(0, 1, 1.0)] if n > 1 else [], **args)


def test_elo_accepts_any_positive_k_factor_and_scale():
    assert elo_ratings(2, [(0, 1, 1.0)], k_factor=0.5, permutations=1).tolist() == [0.25, -0.25]
    assert elo_ratings(2, [(0, 1, 1.0)] * 2, scale=0.5, permutations=1) == pytest.approx(
        replay(2, [(0, 1, 1.0)] * 2, 16, 0.5)
    )


@pytest.mark.parametrize("y", [-0.01, 1.01])
def test_elo_rejects_outcomes_outside_the_unit_interval(y):
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        elo_ratings(2, [(0, 1, 1.0), (0, 1, y)])


# --- batched Bradley–Terry -----------------------------------------------------------------------------------


def tight_lbfgs(n: int, rows: list, l2: float, mirror: bool = True) -> np.ndarray:
    """The per-group fit by scipy's L-BFGS-B on the module's loss, with tolerances far below the test's 1e-6."""
    rows = np.asarray(rows, dtype=np.float64)
    if mirror:
        rows = np.concatenate([rows, rows[:, [1, 0, 2]] * [1, 1, -1] + [0, 0, 1]])
    result = minimize(
        bradley_terry_loss,
        np.zeros(n),
        args=(rows, l2),
        jac=True,
        method="L-BFGS-B",
        options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10_000},
    )
    return result.x - result.x.mean()


GROUPS = [
    [(0, 1, 1.0), (1, 2, 1.0), (0, 2, 1.0), (2, 3, 0.9), (3, 0, 0.0)],  # near-separable: a clean order
    [(0, 1, 0.5), (1, 2, 0.8), (2, 3, 0.2), (3, 0, 0.6), (0, 2, 1.0)],  # soft, with a tie
    [(0, 1, 1.0)] * 6,  # one-sided: only λ keeps it finite
]


@pytest.mark.parametrize("l2", [0.1, 0.01])
def test_batched_newton_reaches_the_lbfgs_optimum_in_twelve_iterations(l2):
    """Damped Newton converges quadratically: 12 iterations already agree with a tight L-BFGS-B fit to 1e-6,
    also for near-separable and one-sided groups at small λ (strengths up to ±5), where a full Newton step from
    zero overshoots and the step halving has to act. A wrong Hessian or step rule needs far more iterations."""
    reference = np.stack([tight_lbfgs(4, g, l2) for g in GROUPS])
    batched = fit_bradley_terry_batch(4, *pad_matches(GROUPS), l2=l2, max_iter=12)
    assert np.abs(batched - reference).max() < 1e-6
    unmirrored = fit_bradley_terry_batch(4, *pad_matches(GROUPS), l2=l2, mirror=False, max_iter=12)
    reference = np.stack([tight_lbfgs(4, g, l2, mirror=False) for g in GROUPS])
    assert np.abs(unmirrored - reference).max() < 1e-6


def test_a_row_of_weight_two_is_the_row_twice():
    rows = [(0, 1, 1.0), (1, 2, 0.7), (2, 0, 0.4)]
    doubled = fit_bradley_terry_batch(3, np.array([rows + [rows[1]]]), l2=0.1)
    weighted = fit_bradley_terry_batch(3, np.array([rows]), np.array([[1.0, 2.0, 1.0]]), l2=0.1)
    assert np.abs(doubled - weighted).max() < 1e-9
    unweighted = fit_bradley_terry_batch(3, np.array([rows]), l2=0.1)
    assert np.abs(unweighted - weighted).max() > 1e-3  # the weight does change the fit
    # weight 0 is padding: an out-of-range outcome on a zero-weight row is not an error and changes nothing
    padded = fit_bradley_terry_batch(3, np.array([rows + [(0, 1, 7.0)]]), np.array([[1.0, 1.0, 1.0, 0.0]]), l2=0.1)
    assert np.abs(padded - unweighted).max() < 1e-9


def test_batched_fit_rejects_a_non_positive_l2_and_negative_indices():
    rows = np.array([[[0, 1, 1.0]]])
    for l2 in (0.0, -0.1):
        with pytest.raises(ValueError, match="l2 must be > 0"):
            fit_bradley_terry_batch(2, rows, l2=l2)
    with pytest.raises(ValueError, match="indices"):
        fit_bradley_terry_batch(2, np.array([[[-1, 1, 1.0]]]))
    with pytest.raises(ValueError, match="must lie in"):
        fit_bradley_terry_batch(2, np.array([[[0, 1, -0.5]]]))
    assert fit_bradley_terry_batch(2, np.array([[[0, 1, 0.0], [1, 0, 1.0]]]))[0, 0] < 0  # y = 0 and 1 are valid


def test_pad_matches_marks_padding_with_weight_zero():
    matches, weights = pad_matches([[(0, 1, 1.0)], [(1, 2, 0.0), (2, 0, 0.25)], []])
    assert matches.shape == (3, 2, 3) and weights.tolist() == [[1, 0], [1, 1], [0, 0]]
    assert matches[0, 1].tolist() == [0, 0, 0.5] and matches[1].tolist() == [[1, 2, 0.0], [2, 0, 0.25]]
    assert pad_matches([])[0].shape == (0, 1, 3)


def test_newton_step_halving_reaches_the_optimum_of_ill_conditioned_groups():
    """Row weights spread over six orders of magnitude and λ = 10⁻⁴ (strengths up to ±24): here a full Newton
    step from zero overshoots and must be halved until the loss decreases; the result still agrees with a tight
    L-BFGS-B fit (to ~1e-6; the test allows 1e-4). Without the halving, or with a wrong loss in the line search,
    it lands 1.5 to 14 away."""
    rows_a = [
        (1, 2, 0.0),
        (3, 5, 0.0),
        (2, 4, 0.0),
        (2, 5, 1.0),
        (0, 6, 1.0),
        (5, 2, 0.0),
        (6, 0, 1.0),
        (2, 0, 1.0),
        (3, 2, 0.0),
        (3, 6, 1.0),
    ]
    weights_a = [0.15, 0.003, 3.4, 0.25, 0.015, 110, 1800, 450, 0.009, 2500]
    rows_b = [
        (0, 3, 0.0),
        (3, 2, 1.0),
        (6, 0, 0.0),
        (1, 5, 1.0),
        (6, 2, 0.0),
        (0, 6, 1.0),
        (3, 2, 1.0),
        (3, 2, 0.0),
        (0, 1, 1.0),
        (5, 3, 1.0),
    ]
    weights_b = [0.005, 0.004, 0.43, 690, 380, 0.001, 390, 1400, 0.012, 3000]
    l2 = 1e-4
    batched = fit_bradley_terry_batch(
        7, np.array([rows_a, rows_b], dtype=float), np.array([weights_a, weights_b]), l2=l2
    )
    for beta, rows, weights in ((batched[0], rows_a, weights_a), (batched[1], rows_b, weights_b)):
        # a weight-w row is the row repeated w times: the L-BFGS-B reference takes weights as a scaled loss
        weighted = np.array(rows, dtype=float)
        reference = minimize(
            weighted_loss,
            np.zeros(7),
            args=(weighted, np.array(weights), l2),
            jac=True,
            method="L-BFGS-B",
            options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 100_000},
        ).x
        assert np.abs(beta - (reference - reference.mean())).max() < 1e-4
        assert np.abs(beta).max() > 15


def weighted_loss(beta: np.ndarray, rows: np.ndarray, weights: np.ndarray, l2: float) -> tuple[float, np.ndarray]:
    """The mirrored (weight 2·w) soft Bradley–Terry loss and its gradient, from the module docstring's formula."""
    i, j, y = rows[:, 0].astype(int), rows[:, 1].astype(int), rows[:, 2]
    d = beta[i] - beta[j]
    loss = np.sum(2 * weights * (y * np.logaddexp(0, -d) + (1 - y) * np.logaddexp(0, d))) + 0.5 * l2 * beta @ beta
    residual = 2 * weights * (1 / (1 + np.exp(-d)) - y)
    return loss, l2 * beta + np.bincount(i, residual, len(beta)) - np.bincount(j, residual, len(beta))


def test_fit_defaults_and_edge_cases():
    """λ defaults to 0.1 in both fits; mirroring doubles the data weight, so mirror=False at λ equals mirror=True
    at 2λ; one player (even matched with itself) and no matches give zeros of the right length; an index equal to
    n is out of range."""
    rows = [(0, 1, 1.0), (1, 2, 0.7), (2, 0, 0.4), (0, 2, 0.9)]
    assert np.array_equal(fit_bradley_terry(3, rows), fit_bradley_terry(3, rows, l2=0.1))
    assert np.array_equal(
        fit_bradley_terry_batch(3, np.array([rows])), fit_bradley_terry_batch(3, np.array([rows]), l2=0.1)
    )
    unmirrored = fit_bradley_terry(3, rows, mirror=False, l2=0.1)
    assert np.abs(unmirrored - fit_bradley_terry(3, rows, l2=0.2)).max() < 1e-4
    assert np.abs(unmirrored - fit_bradley_terry(3, rows, l2=0.1)).max() > 1e-2
    assert fit_bradley_terry(1, [(0, 0, 1.0)]).tolist() == [0.0] and fit_bradley_terry(1, []).tolist() == [0.0]
    assert fit_bradley_terry(3, []).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="indices"):
        fit_bradley_terry_batch(2, np.array([[[0, 2, 1.0]]]))


def test_standardise_works_row_by_row():
    """(v − mean)/std over the last axis of a batch [B, G]: each row on its own, a constant row zeros."""
    out = standardise(np.array([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]]))
    assert out == pytest.approx(np.array([[-1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]) * [[math.sqrt(1.5)], [1.0]])


@pytest.mark.parametrize(
    "make",
    [
        lambda **k: SingleElimination(4, seeded=False, **k),
        lambda **k: DoubleElimination(4, seeded=False, **k),
        lambda **k: ConstitutionalBracket(4, 2, **k),
    ],
    ids=["single_elimination", "double_elimination", "constitutional"],
)
def test_elimination_formats_default_to_seed_zero(make):
    """Four players, every match a tie: the coin decides every match, and seeds 0 and 1 crown different
    players here, so the default seed must be 0 to reproduce seed=0."""

    def scores(**kw) -> list[float]:
        schedule = make(**kw)
        run_schedules([schedule], lambda batch: [0.5] * len(batch))
        return schedule.scores().tolist()

    assert scores() == scores(seed=0) and scores(seed=0) != scores(seed=1)


def test_swiss_allows_no_round_for_a_lone_player():
    assert Swiss(1).rounds == 0 and Swiss(2, rounds=1).rounds == 1
    with pytest.raises(ValueError, match="at most 0 rounds"):
        Swiss(1, rounds=1)
