"""Bradley–Terry strengths from soft pairwise outcomes.

Model: P(i beats j) = σ(β_i − β_j). Matches are rows (i, j, y) with y ∈ [0, 1] the (soft) outcome of
i against j (1 = i won, ½ = tie). The fit minimises the L2-regularised soft cross-entropy

    L(β) = −Σ_m [ y_m·log σ(β_i − β_j) + (1 − y_m)·log σ(β_j − β_i) ] + (λ/2)·‖β‖²

with its analytic gradient ∂L/∂β_i = Σ_{m: i first} (σ(d_m) − y_m) − Σ_{m: i second} (σ(d_m) − y_m) + λβ_i,
d_m = β_i − β_j, by L-BFGS-B. With mirror=True every match is also added as (j, i, 1 − y), which makes the
fit independent of which response was shown first (Reasoning Arena's mirror augmentation). λ > 0 keeps
strengths finite for one-sided or disconnected match graphs (an anchor that won every match).

Differences from the papers: λ is not published; tsrl's default (0.1) is a project choice.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize


def _as_matches(matches: np.ndarray | list) -> np.ndarray:
    rows = np.asarray(matches, dtype=np.float64).reshape(-1, 3)  # [M, 3]
    if rows.size and not ((rows[:, 2] >= 0) & (rows[:, 2] <= 1)).all():
        raise ValueError("Bradley-Terry outcomes y must lie in [0, 1].")
    return rows


def bradley_terry_loss(beta: np.ndarray, matches: np.ndarray, l2: float) -> tuple[float, np.ndarray]:
    """Loss and gradient of the soft Bradley–Terry objective (no mirroring; the caller adds it)."""
    i = matches[:, 0].astype(np.int64)  # [M]
    j = matches[:, 1].astype(np.int64)  # [M]
    y = matches[:, 2]  # [M]
    d = beta[i] - beta[j]  # [M]
    # log σ(d) = −softplus(−d), log σ(−d) = −softplus(d): stable for large |d|.
    loss = np.sum(y * np.logaddexp(0.0, -d) + (1.0 - y) * np.logaddexp(0.0, d)) + 0.5 * l2 * beta @ beta
    residual = 1.0 / (1.0 + np.exp(-d)) - y  # [M] σ(d) − y
    grad = l2 * beta + np.bincount(i, residual, len(beta)) - np.bincount(j, residual, len(beta))
    return float(loss), grad


def fit_bradley_terry(n: int, matches: np.ndarray | list, *, l2: float = 0.1, mirror: bool = True) -> np.ndarray:
    """Strengths β [n] (mean zero) for n players from (i, j, y) match rows."""
    if n < 1:
        raise ValueError(f"Bradley-Terry needs at least one player, got n={n}.")
    if l2 <= 0:
        raise ValueError(f"Bradley-Terry l2 must be > 0 to keep strengths finite, got {l2}.")
    rows = _as_matches(matches)
    if rows.size and (rows[:, :2].min() < 0 or rows[:, :2].max() >= n):
        raise ValueError(f"Bradley-Terry match indices must lie in [0, {n}).")
    if mirror and rows.size:
        rows = np.concatenate([rows, rows[:, [1, 0, 2]] * [1, 1, -1] + [0, 0, 1]])
    if not rows.size:
        return np.zeros(n)
    result = minimize(bradley_terry_loss, np.zeros(n), args=(rows, l2), jac=True, method="L-BFGS-B")
    beta = result.x
    return beta - beta.mean()
