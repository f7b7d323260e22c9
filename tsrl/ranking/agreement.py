"""Agreement between rankings: Kendall's W (raters), Kendall's τ_b (two orderings), bootstrap intervals of means.

Pure functions on arrays, no I/O; the blinded human study (tsrl.evaluation.human_study) reports with them.
Dimension letters: M raters (annotators), N items ranked (one prompt's generations and anchors), P prompts,
L labels (methods and anchor tiers). A rank of 1 is the best item.

Kendall's coefficient of concordance. M raters rank N items; R_i = Σ_j r_ij is item i's rank sum,
S = Σ_i (R_i − R̄)² with R̄ = M(N+1)/2, and

    W = 12 S / (M²(N³ − N) − M Σ_j T_j),    T_j = Σ_g (t_g³ − t_g)

over the groups g of t_g items that rater j tied (tied items hold their average rank). Without ties T_j = 0
and this is Kendall's original W; with ties it is the tie-corrected W (Kendall & Gibbons, Rank Correlation
Methods, ch. 6). W = 1: every rater gives the same ranking; W = 0: no agreement beyond chance.

Kendall's τ_b between two orderings x, y of the same N items: over all pairs, C concordant, D discordant,
T_x pairs tied in x only, T_y pairs tied in y only (pairs tied in both count in neither):

    τ_b = (C − D) / sqrt((C + D + T_x)(C + D + T_y)),

the variant scipy.stats.kendalltau computes by default.

Pairwise win-rate of an item from M raters' rankings of N items: each ranking implies N − 1 comparisons of the
item with the other items of its prompt (a win when it is ranked above, ½ for a tie), so over the M(N − 1)
comparisons

    win(i) = 1/(M(N−1)) Σ_j Σ_{i' ≠ i} ([r_ji < r_ji'] + ½[r_ji = r_ji']),

which without ties is (N − r̄_i)/(N − 1) for the item's mean rank r̄_i. Our reading of TSRL §4.12's "average
win-rates" (the text does not define them).

Spearman's ρ between two orderings x, y of N items: the Pearson correlation of their average ranks; its two-sided
p-value is scipy.stats.spearmanr's (Student's t with N − 2 degrees of freedom, approximate for small N).

Bootstrap interval of a mean over units (scipy.stats.bootstrap's percentile method): resample the P units
(prompts) with replacement B times, take the mean each time, report the (1−level)/2 and (1+level)/2 quantiles.
Resampling prompts keeps every rating of a prompt together (the annotators' ranks of one prompt are not
independent). A label absent from some prompts is resampled over the prompts that carry it.
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..N of `values` [N] in ascending order; tied values share their average rank."""
    return stats.rankdata(np.asarray(values, dtype=float), method="average")  # [N]


def tie_term(ranks: np.ndarray) -> float:
    """Σ_g (t_g³ − t_g) over the groups of equal values in one rater's ranks [N]."""
    _, counts = np.unique(np.asarray(ranks, dtype=float), return_counts=True)
    return float(np.sum(counts**3 - counts))


def kendalls_w(rankings: np.ndarray) -> float:
    """Kendall's W (tie-corrected) of `rankings` [M, N]: row j = rater j's ranks of the N items (1 = best;
    ties as average ranks). NaN when it is undefined (fewer than 2 raters or items, or every rater ties all)."""
    rankings = np.asarray(rankings, dtype=float)  # [M, N]
    if rankings.ndim != 2:
        raise ValueError(f"kendalls_w needs a [raters, items] array, got shape {rankings.shape}.")
    m, n = rankings.shape
    if m < 2 or n < 2:
        return float("nan")
    rank_sums = rankings.sum(axis=0)  # [N]
    s = float(np.sum((rank_sums - m * (n + 1) / 2) ** 2))
    denominator = m**2 * (n**3 - n) - m * sum(tie_term(row) for row in rankings)
    return 12 * s / denominator if denominator > 0 else float("nan")


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's τ_b between x [N] and y [N] (scipy.stats.kendalltau's default). NaN when either is constant."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"kendall_tau_b needs two 1-D arrays of one length, got {x.shape} and {y.shape}.")
    if len(x) < 2:  # scipy warns on fewer than two items; the answer is NaN either way
        return float("nan")
    return float(stats.kendalltau(x, y).statistic)


def bootstrap_mean_ci(
    per_unit: np.ndarray, samples: int = 10_000, level: float = 0.95, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over units of `per_unit` [P, L] (NaN = the label is absent from that unit, skipped) and its
    percentile-bootstrap interval over units: (mean [L], low [L], high [L])."""
    per_unit = np.asarray(per_unit, dtype=float)  # [P, L]
    if per_unit.ndim != 2 or per_unit.shape[0] < 1:
        raise ValueError(f"bootstrap_mean_ci needs a [units, labels] array with a unit, got {per_unit.shape}.")
    if not 0 < level < 1 or samples < 1:
        raise ValueError(f"bootstrap_mean_ci needs 0 < level < 1 and samples >= 1, got {level}, {samples}.")
    mean = np.nanmean(per_unit, axis=0)  # [L]
    low, high = mean.copy(), mean.copy()  # [L] each: one unit (or none) gives the interval [mean, mean]
    for label, column in enumerate(per_unit.T):
        present = column[~np.isnan(column)]  # [P'] the units that carry the label
        if len(present) > 1:
            interval = stats.bootstrap(
                (present,), np.mean, n_resamples=samples, confidence_level=level, method="percentile", rng=seed
            ).confidence_interval
            low[label], high[label] = interval.low, interval.high
    return mean, low, high


def pairwise_win_rate(rankings: np.ndarray) -> np.ndarray:
    """Each item's share [N] of the pairwise comparisons implied by `rankings` [M, N] (rank 1 = best, ties as
    average ranks) that it wins against the other items, a tie counting ½ (module docstring). NaN for N < 2."""
    rankings = np.asarray(rankings, dtype=float)  # [M, N]
    if rankings.ndim != 2:
        raise ValueError(f"pairwise_win_rate needs a [raters, items] array, got shape {rankings.shape}.")
    m, n = rankings.shape
    if m < 1 or n < 2:
        return np.full(n, np.nan)
    above = rankings[:, :, None] < rankings[:, None, :]  # [M, N, N]: item i ranked above item i'
    tied = rankings[:, :, None] == rankings[:, None, :]  # [M, N, N], the diagonal included
    wins = above.sum(axis=(0, 2)) + 0.5 * (tied.sum(axis=(0, 2)) - m)  # [N]: the diagonal's M self-ties out
    return wins / (m * (n - 1))


def spearman_rho(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Spearman's ρ between x [N] and y [N] and its two-sided p-value (scipy.stats.spearmanr). NaNs when either is
    constant or N < 3."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"spearman_rho needs two 1-D arrays of one length, got {x.shape} and {y.shape}.")
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan")
    result = stats.spearmanr(x, y)
    return float(result.statistic), float(result.pvalue)
