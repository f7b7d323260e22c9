"""Bradley–Terry strengths from soft pairwise outcomes.

Model: P(i beats j) = σ(β_i − β_j). Matches are rows (i, j, y) with y ∈ [0, 1] the (soft) outcome of
i against j (1 = i won, ½ = tie). The fit minimises the L2-regularised soft cross-entropy

    L(β) = −Σ_m [ y_m·log σ(β_i − β_j) + (1 − y_m)·log σ(β_j − β_i) ] + (λ/2)·‖β‖²

with its analytic gradient ∂L/∂β_i = Σ_{m: i first} (σ(d_m) − y_m) − Σ_{m: i second} (σ(d_m) − y_m) + λβ_i,
d_m = β_i − β_j, by L-BFGS-B. With mirror=True every match is also added as (j, i, 1 − y), which makes the
fit independent of which response was shown first (Reasoning Arena's mirror augmentation). λ > 0 keeps
strengths finite for one-sided or disconnected match graphs (an anchor that won every match).

Batched path (fit_bradley_terry_batch): Gr independent groups of n players (n = G for a group, K for a
ladder) fitted at once by damped Newton on the block-diagonal objective (one batched n×n solve per
iteration); it reaches the same minimiser as the per-group L-BFGS-B fit and is ~two orders of magnitude
faster for thousands of small groups (benchmarks/bt_bench.py).

Mirror augmentation, honestly: the soft cross-entropy of (j, i, 1 − y) equals that of (i, j, y), so
mirroring doubles the data weight — the same fit as mirror=False with λ/2. The fit is order-independent
either way; mirror=True keeps the Reasoning Arena objective literally (both rows present).

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


def pad_matches(groups: list[np.ndarray | list]) -> tuple[np.ndarray, np.ndarray]:
    """Stack per-group (i, j, y) rows into matches [Gr, M, 3] and weights [Gr, M] (0 marks padding)."""
    rows = [_as_matches(g) for g in groups]
    width = max([len(r) for r in rows] + [1])
    matches = np.zeros((len(rows), width, 3))  # [Gr, M, 3]; padding rows (0, 0, ½) carry weight 0
    matches[:, :, 2] = 0.5
    weights = np.zeros((len(rows), width))  # [Gr, M]
    for g, r in enumerate(rows):
        matches[g, : len(r)] = r
        weights[g, : len(r)] = 1.0
    return matches, weights


def _batch_loss(
    beta: np.ndarray, i: np.ndarray, j: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per-group loss [Gr] and margins d [Gr, M] = β_i − β_j."""
    d = np.take_along_axis(beta, i, 1) - np.take_along_axis(beta, j, 1)  # [Gr, M]
    data = w * (y * np.logaddexp(0.0, -d) + (1.0 - y) * np.logaddexp(0.0, d))  # [Gr, M]
    return data.sum(axis=1) + 0.5 * l2 * np.einsum("gn,gn->g", beta, beta), d


def _batch_matches(
    n: int, matches: np.ndarray, weights: np.ndarray | None, mirror: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Players i, j, outcomes y and weights w [Gr, M] each of the padded `matches` [Gr, M, 3], checked."""
    matches = np.asarray(matches, dtype=np.float64)  # [Gr, M, 3]
    w = np.ones(matches.shape[:2]) if weights is None else np.asarray(weights, dtype=np.float64)  # [Gr, M]
    y = matches[..., 2]  # [Gr, M]
    if ((w > 0) & ((y < 0) | (y > 1))).any():
        raise ValueError("Bradley-Terry outcomes y must lie in [0, 1].")
    idx = matches[..., :2].astype(np.int64)  # [Gr, M, 2]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ValueError(f"Bradley-Terry match indices must lie in [0, {n}).")
    # The mirrored row (j, i, 1 − y) has exactly the loss of (i, j, y): mirroring doubles the data weight.
    return idx[..., 0], idx[..., 1], y, w * (2.0 if mirror else 1.0)


def fit_bradley_terry_batch(
    n: int,
    matches: np.ndarray,
    weights: np.ndarray | None = None,
    *,
    l2: float = 0.1,
    mirror: bool = True,
    tol: float = 1e-8,
    max_iter: int = 100,
) -> np.ndarray:
    """Strengths β [Gr, n] (mean zero per group) for Gr independent groups of n players at once.

    matches [Gr, M, 3] holds (i, j, y) rows per group, weights [Gr, M] their weights (0 = padding; see
    pad_matches). Damped Newton on the block-diagonal objective: per group the Hessian is the n×n weighted
    graph Laplacian Σ w·σ(d)(1−σ(d))·(e_i − e_j)(e_i − e_j)ᵀ + λI, solved for every group with one batched
    np.linalg.solve; a step is halved (per group) until the loss decreases. Same objective and minimiser as
    fit_bradley_terry (the loss is strictly convex for λ > 0), converged to max |∇L| < tol per group
    (or until no step lowers the loss in floating point).
    """
    if l2 <= 0:
        raise ValueError(f"Bradley-Terry l2 must be > 0 to keep strengths finite, got {l2}.")
    i, j, y, w = _batch_matches(n, matches, weights, mirror)  # [Gr, M] each
    groups = len(i)
    base = np.arange(groups)[:, None]  # [Gr, 1]
    flat_i, flat_j = base * n + i, base * n + j  # [Gr, M] indices into [Gr·n]
    cells = [base * n * n + a * n + b for a, b in ((i, i), (j, j), (i, j), (j, i))]  # into [Gr·n·n]
    beta = np.zeros((groups, n))  # [Gr, n]
    stalled = np.zeros(groups, dtype=bool)  # [Gr] no descent possible any more (float precision reached)
    loss, d = _batch_loss(beta, i, j, y, w, l2)  # [Gr], [Gr, M]
    for _ in range(max_iter):
        s = 1.0 / (1.0 + np.exp(-d))  # [Gr, M] σ(d)
        r = (w * (s - y)).ravel()
        grad = (np.bincount(flat_i.ravel(), r, groups * n) - np.bincount(flat_j.ravel(), r, groups * n)).reshape(
            groups, n
        ) + l2 * beta  # [Gr, n]
        active = (np.abs(grad).max(axis=1) > tol) & ~stalled  # [Gr]
        if not active.any():
            break
        c = (w * s * (1.0 - s)).ravel()
        hess = sum(sign * np.bincount(cell.ravel(), c, groups * n * n) for sign, cell in zip((1, 1, -1, -1), cells))
        hess = hess.reshape(groups, n, n) + l2 * np.eye(n)  # [Gr, n, n] weighted Laplacian + λI
        step = np.linalg.solve(hess, grad[..., None])[..., 0]  # [Gr, n]
        t = np.where(active, 1.0, 0.0)[:, None]  # [Gr, 1] step length; converged groups stay put
        for _ in range(30):
            trial = beta - t * step
            trial_loss, trial_d = _batch_loss(trial, i, j, y, w, l2)
            worse = trial_loss > loss + 1e-12
            if not worse.any():
                break
            t[worse] *= 0.5
        keep = (trial_loss > loss)[:, None]  # [Gr, 1] no decrease even after halving: at the optimum already
        stalled |= keep[:, 0] & active
        beta, d, loss = np.where(keep, beta, trial), np.where(keep, d, trial_d), np.minimum(trial_loss, loss)
    return beta - beta.mean(axis=1, keepdims=True)
