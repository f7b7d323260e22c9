"""Elo ratings from soft pairwise outcomes, for anchor ladders.

Expected score of i against j: E = 1 / (1 + 10^((R_j − R_i)/s)), s = 400 (the chess scale). After a match
(i, j, y), y ∈ [0, 1] the soft outcome of i: R_i += K·(y − E), R_j −= K·(y − E). Elo depends on the order
of the matches, so the rows are replayed in `permutations` random orders (seeded) and the ratings averaged
— a cheap way to remove the order artefact that a single pass over a round-robin has.

Dimension: K anchors of one prompt (the ladder); the Elo K-factor is called `k_factor` to keep K for
anchors. Differences from the papers: TSRL names Elo as an alternative to Bradley–Terry but publishes no
K-factor, scale or ordering; K = 16, s = 400, 16 permutations and initial rating 0 are project choices.
"""

from __future__ import annotations

import numpy as np


def elo_ratings(
    n: int,
    matches: np.ndarray | list,
    *,
    k_factor: float = 16.0,
    scale: float = 400.0,
    permutations: int = 16,
    seed: int = 0,
) -> np.ndarray:
    """Ratings [n] (mean zero), averaged over `permutations` seeded random match orders."""
    if n < 1 or k_factor <= 0 or scale <= 0 or permutations < 1:
        raise ValueError("Elo needs n ≥ 1, k_factor > 0, scale > 0 and permutations ≥ 1.")
    rows = np.asarray(matches, dtype=np.float64).reshape(-1, 3)  # [M, 3]
    if rows.size and not ((rows[:, 2] >= 0) & (rows[:, 2] <= 1)).all():
        raise ValueError("Elo outcomes y must lie in [0, 1].")
    rng = np.random.default_rng(seed)
    total = np.zeros(n)
    for _ in range(permutations):
        rating = np.zeros(n)
        for i, j, y in rows[rng.permutation(len(rows))]:
            i, j = int(i), int(j)
            expected = 1.0 / (1.0 + 10.0 ** ((rating[j] - rating[i]) / scale))
            rating[i] += k_factor * (y - expected)
            rating[j] -= k_factor * (y - expected)
        total += rating
    ratings = total / permutations
    return ratings - ratings.mean()
