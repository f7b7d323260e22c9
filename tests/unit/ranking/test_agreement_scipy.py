"""tsrl.ranking.agreement's average ranks, Kendall's τ_b and percentile bootstrap now come from scipy.stats; each
is checked against the hand-written implementation it replaced (kept below, verbatim, as the reference) on 200
random samples with ties.

What "same" means for the bootstrap: scipy.stats.bootstrap(rng=seed) draws its [B, P] index matrix with
np.random.default_rng(seed).integers(0, P, (B, P)), the very call the old code made, so with one seed both take
the same resamples. Only the order of the floating-point sums inside each resample's mean differs, an error of
at most about P·ε·max|x| ≈ 1e-14 here; the percentile (linear interpolation between order statistics) moves no
more than its inputs, so the intervals must agree to 1e-12 — a real change of draws or quantile rule would miss
by orders of magnitude more (one resample's mean moves by ≥ 1/P ≥ 0.04 on these integer ratings).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tsrl.ranking.agreement import average_ranks, bootstrap_mean_ci, kendall_tau_b


def reference_average_ranks(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=float)  # [N]
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))  # [N]
    sorted_values = values[order]
    start = 0
    while start < len(values):
        stop = start
        while stop + 1 < len(values) and sorted_values[stop + 1] == sorted_values[start]:
            stop += 1
        ranks[order[start : stop + 1]] = (start + stop) / 2 + 1
        start = stop + 1
    return ranks


def reference_kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    i, j = np.triu_indices(len(x), k=1)
    dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])  # [N(N-1)/2]
    denominator = np.sqrt(float(np.sum(dx != 0)) * float(np.sum(dy != 0)))
    return float(np.sum(dx * dy)) / denominator if denominator > 0 else float("nan")


def reference_bootstrap_mean_ci(
    per_unit: np.ndarray, samples: int, level: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    per_unit = np.asarray(per_unit, dtype=float)  # [P, L]
    rng = np.random.default_rng(seed)
    mean = np.nanmean(per_unit, axis=0)  # [L]
    picks = rng.integers(0, per_unit.shape[0], size=(samples, per_unit.shape[0]))  # [B, P]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        means = np.nanmean(per_unit[picks], axis=1)  # [B, L]
        low, high = np.nanquantile(means, [(1 - level) / 2, (1 + level) / 2], axis=0)  # [L] each
    return mean, low, high


def test_average_ranks_equal_the_hand_written_ranks_on_200_samples_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(200):
        values = rng.integers(0, 4, size=rng.integers(1, 13)).astype(float)  # [N], ties likely
        assert average_ranks(values).tolist() == reference_average_ranks(values).tolist()


def test_kendall_tau_b_equals_the_pair_count_on_200_samples_with_ties():
    """Constant x or y (NaN in both) and one item (NaN, no warning) are among the samples."""
    rng = np.random.default_rng(1)
    for _ in range(200):
        n = rng.integers(1, 13)
        x, y = rng.integers(0, 3, size=n), rng.integers(0, 4, size=n)  # ties in both
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tau = kendall_tau_b(x, y)
        expected = reference_kendall_tau_b(x, y)
        assert (np.isnan(tau) and np.isnan(expected)) or tau == pytest.approx(expected, abs=1e-12)


def test_bootstrap_intervals_equal_the_hand_written_bootstrap_with_one_seed_on_200_samples():
    """Integer ratings 1–5 (ties), 2–25 prompts, 1–3 labels, 50–300 resamples, three levels; 1e-12 (docstring)."""
    rng = np.random.default_rng(2)
    for seed in range(200):
        per_unit = rng.integers(1, 6, size=(rng.integers(2, 26), rng.integers(1, 4))).astype(float)  # [P, L]
        samples, level = int(rng.integers(50, 301)), float(rng.choice([0.8, 0.9, 0.95]))
        got = bootstrap_mean_ci(per_unit, samples, level, seed)
        expected = reference_bootstrap_mean_ci(per_unit, samples, level, seed)
        for new, old in zip(got, expected):
            np.testing.assert_allclose(new, old, rtol=0, atol=1e-12)


def test_a_label_absent_from_some_prompts_is_resampled_over_the_prompts_that_carry_it():
    """The old code resampled every prompt and skipped resamples that missed the label; now the label's interval
    is the old bootstrap of the prompts that carry it (same seed), one carrying prompt gives [mean, mean] and
    none gives NaN — without a warning about empty resamples."""
    rng = np.random.default_rng(3)
    per_unit = rng.integers(1, 6, size=(12, 3)).astype(float)  # [P, L]
    per_unit[[0, 4, 5], 1] = np.nan
    per_unit[1:, 2] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mean, low, high = bootstrap_mean_ci(per_unit, samples=500, level=0.9, seed=7)
    carried = per_unit[~np.isnan(per_unit[:, 1]), 1:2]  # [9, 1]
    _, old_low, old_high = reference_bootstrap_mean_ci(carried, 500, 0.9, 7)
    assert low[1] == pytest.approx(old_low[0], abs=1e-12) and high[1] == pytest.approx(old_high[0], abs=1e-12)
    assert mean[2] == low[2] == high[2] == per_unit[0, 2]
    with pytest.warns(RuntimeWarning):  # numpy's mean of an empty slice, as before
        absent = bootstrap_mean_ci(np.full((4, 1), np.nan), samples=50)
    assert all(np.isnan(part[0]) for part in absent)
