"""What k anchors buy when the judge's errors are shared per text: TSRL §3's ladder by Monte Carlo, with the
simulated judge's per-text error σ_t (`judge.text_error`, docs/judge_simulator.md).

TSRL §2.1 assumes verdicts conditionally independent across anchors; then a completion's win-rate R over k anchors
has variance mean p(1 − p)/k and the ladder misorders two completions less and less as k grows. A judge that
misjudges a text misjudges it against every anchor: the completion is perceived at q + e, e ~ N(0, σ_t²) drawn
once per text, and so is each anchor (a + e_a). Given the errors the k verdicts are still independent, so

    Var R_i = E_e[mean_j p_ij(1 − p_ij)] / k   +   Var_e(mean_j p_ij)           (within the text + shared)
              falls as 1/k                          tends to Var_e F(q_i + e_i)   (the completion's own error)

with F(x) = E_{a, e_a} σ((x − a − e_a)/τ), the win-rate against infinitely many anchors, and the misordering
P(R1 > R2) + ½ P(R1 = R2) tends to P(q1 + e1 > q2 + e2) = Φ(−Δq/(√2·σ_t)): no number of anchors orders two
completions better than a pointwise grade whose noise is σ_t. Dimension letters: T trials (draws of the errors),
K anchors; the axis of size 2 is the pair (worse, better). Anchors at the quantiles (j + ½)/K of N(0, 1), two
completions at ∓Δq/2, as in scripts/simulate_regimes.py (whose σ_t = 0 cells these reproduce exactly); no flip
noise; τ = 1, the default perception.

Each cell is computed two ways: Rao–Blackwellised (per draw of the errors, the exact Poisson-binomial orderings
and variances, averaged over the draws) and raw (the verdicts drawn too); the raw frequencies are checked against
the Rao–Blackwellised ones in standard errors, and the k → ∞ limits are closed forms (Φ) or Gauss–Hermite
quadrature.

    python scripts/simulate_text_error.py [--trials 20000] [--seed 0] [--tau 1] [--out runs/simulate_text_error]

Sweeps σ_t ∈ {0, .25, .5, 1, 2} × K ∈ {1, 2, 4, 8, 16} × Δq ∈ {.5, 1} (a few seconds on one core); writes
results.json, results.md and plot.png into --out and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import expit
from scipy.stats import norm

KS = (1, 2, 4, 8, 16)
TEXT_ERRORS = (0.0, 0.25, 0.5, 1.0, 2.0)
GAPS = (0.5, 1.0)
NODES, WEIGHTS = hermegauss(80)
WEIGHTS = WEIGHTS / WEIGHTS.sum()  # E f(Z), Z ~ N(0, 1) ≈ Σ w f(z)
Row = dict[str, float]


def qualities(gap: float) -> np.ndarray:
    return np.array([-gap / 2, gap / 2])  # [2]


def anchor_qualities(k: int) -> np.ndarray:
    """K anchors spread evenly over N(0, 1): its quantiles (j + ½)/K."""
    return norm.ppf((np.arange(k) + 0.5) / k)  # [K]


def win_probs(gap: float, k: int, text_error: float, tau: float, trials: int, rng: np.random.Generator) -> np.ndarray:
    """P(completion i beats anchor j) given each text's error, for `trials` draws of the errors."""
    own = qualities(gap) + text_error * rng.standard_normal((trials, 2))  # [T, 2]
    anchors = anchor_qualities(k) + text_error * rng.standard_normal((trials, k))  # [T, K]
    return expit((own[:, :, None] - anchors[:, None, :]) / tau)  # [T, 2, K]


def count_pmfs(p: np.ndarray) -> np.ndarray:
    """Poisson-binomial pmf of the anchor wins S = Σ_j X_j for each row of p [T, K]: entry s is P(S = s)."""
    pmf = np.zeros((p.shape[0], p.shape[1] + 1))
    pmf[:, 0] = 1.0
    for j in range(p.shape[1]):
        win = p[:, j : j + 1]  # [T, 1]
        pmf = np.concatenate([pmf[:, :1] * (1 - win), pmf[:, 1:] * (1 - win) + pmf[:, :-1] * win], axis=1)
    return pmf  # [T, K+1]


def exact_orderings(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per draw of the errors, the exact misorder P(S1 > S2) and tie P(S1 = S2) of win probabilities p [T, 2, K]."""
    worse, better = count_pmfs(p[:, 0]), count_pmfs(p[:, 1])  # [T, K+1] each
    above = 1.0 - np.cumsum(worse, axis=1)  # [T, K+1]: P(S1 > s)
    return (better * above).sum(1), (worse * better).sum(1)  # [T], [T]


def limit_variance(q: float, text_error: float, tau: float) -> float:
    """Var_e F(q + e): the reward variance no number of anchors removes (Gauss–Hermite in e and in the anchors)."""
    if text_error == 0:
        return 0.0
    spread = np.sqrt(1.0 + text_error**2)  # a + e_a ~ N(0, 1 + σ_t²)
    perceived = q + text_error * NODES  # [N]
    f = expit((perceived[:, None] - spread * NODES[None, :]) / tau) @ WEIGHTS  # [N]: F(q + e) at each node
    return float(WEIGHTS @ f**2 - (WEIGHTS @ f) ** 2)


def limit_misorder(gap: float, text_error: float) -> float:
    """P(q1 + e1 > q2 + e2) = Φ(−Δq/(√2σ_t)): the misordering of infinitely many anchors (0 without errors)."""
    return float(norm.cdf(-gap / (np.sqrt(2) * text_error))) if text_error > 0 else 0.0


def z_score(mc: float, estimate: float, trials: int) -> float:
    """Raw Monte Carlo against the Rao–Blackwellised estimate, in standard errors of the raw frequency."""
    return 0.0 if estimate in (0.0, 1.0) else (mc - estimate) / np.sqrt(estimate * (1 - estimate) / trials)


def cell(gap: float, k: int, text_error: float, tau: float, trials: int, rng: np.random.Generator) -> Row:
    p = win_probs(gap, k, text_error, tau, trials, rng)  # [T, 2, K]
    misorder, tie = exact_orderings(p)  # [T], [T]
    counts = (rng.random(p.shape) < p).sum(-1)  # [T, 2]: the verdicts drawn too
    mc_misorder, mc_tie = float((counts[:, 0] > counts[:, 1]).mean()), float((counts[:, 0] == counts[:, 1]).mean())
    within = float((p * (1 - p)).mean(-1).mean() / k)  # E_e[mean_j p(1 − p)] / K, over both completions
    shared = float(p.mean(-1).var(0).mean())  # Var_e(mean_j p), over both completions
    coin = float(misorder.mean() + tie.mean() / 2)
    return {
        "misorder": float(misorder.mean()),
        "tie": float(tie.mean()),
        "coin": coin,
        "mc_misorder": mc_misorder,
        "mc_tie": mc_tie,
        "limit_coin": limit_misorder(gap, text_error),
        "var": within + shared,
        "var_within": within,
        "var_shared": shared,
        "mc_var": float((counts / k).var(0).mean()),
        "limit_var": float(np.mean([limit_variance(q, text_error, tau) for q in qualities(gap)])),
        "z_misorder": z_score(mc_misorder, float(misorder.mean()), trials),
        "z_tie": z_score(mc_tie, float(tie.mean()), trials),
    }


def sweep(trials: int, seed: int, tau: float) -> list[Row]:
    rng = np.random.default_rng(seed)
    return [
        {"gap": g, "text_error": s, "k": k, **cell(g, k, s, tau, trials, rng)}
        for g in GAPS
        for s in TEXT_ERRORS
        for k in KS
    ]


COLUMNS = [
    ("Δq", "gap", ".2f"),
    ("σ_t", "text_error", ".2f"),
    ("K", "k", "d"),
    ("misorder + ½ tie", "coin", ".4f"),
    ("misorder", "misorder", ".4f"),
    ("MC", "mc_misorder", ".4f"),
    ("tie", "tie", ".4f"),
    ("MC", "mc_tie", ".4f"),
    ("K → ∞: Φ(−Δq/(√2σ_t))", "limit_coin", ".4f"),
    ("Var R", "var", ".4f"),
    ("MC", "mc_var", ".4f"),
    ("within (∝ 1/K)", "var_within", ".4f"),
    ("shared", "var_shared", ".4f"),
    ("K → ∞", "limit_var", ".4f"),
]


def markdown(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(c[0] for c in COLUMNS) + " |", "|---" * len(COLUMNS) + "|"]
    lines += ["| " + " | ".join(format(r[key], fmt) for _, key, fmt in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def summary(rows: list[Row], gap: float) -> str:
    """The headline table: misorder + ½ tie and Var R against K for each σ_t at one Δq, with the K → ∞ limits."""
    head = "| σ_t | " + " | ".join(f"K = {k}" for k in KS) + " | K → ∞ | Var R, K = 1 → 16 | K → ∞ |"
    lines = [head, "|---" * (len(KS) + 4) + "|"]
    for s in TEXT_ERRORS:
        cells = [r for r in rows if r["gap"] == gap and r["text_error"] == s]
        coins = " | ".join(f"{r['coin']:.3f}" for r in cells)
        var = f"{cells[0]['var']:.4f} → {cells[-1]['var']:.4f}"
        lines.append(f"| {s:g} | {coins} | {cells[0]['limit_coin']:.3f} | {var} | {cells[0]['limit_var']:.4f} |")
    return "\n".join(lines)


def plot(rows: list[Row], tau: float, path: Path) -> None:
    """Top: misorder + ½ tie against K; bottom: Var R. Dotted: each σ_t's K → ∞ limit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(GAPS), figsize=(5.5 * len(GAPS), 8), sharex=True)
    colours = plt.cm.viridis(np.linspace(0, 0.85, len(TEXT_ERRORS)))
    for col, g in enumerate(GAPS):
        for s, colour in zip(TEXT_ERRORS, colours):
            cells = [r for r in rows if r["gap"] == g and r["text_error"] == s]
            for row, (key, limit) in enumerate((("coin", "limit_coin"), ("var", "limit_var"))):
                ax = axes[row][col]
                ax.plot(KS, [r[key] for r in cells], color=colour, marker="o", ms=3, label=f"σ_t = {s:g}")
                if cells[0][limit] > 0:
                    ax.axhline(cells[0][limit], color=colour, ls=":", lw=1)
        axes[0][col].set(title=f"Δq = {g}, τ = {tau}", ylabel="P(R1 > R2) + ½ P(R1 = R2)", ylim=(0, 0.55))
        axes[1][col].set(
            yscale="log", ylim=(1e-3, 0.3), xlabel="anchors K (dotted: K → ∞)", ylabel="Var R (per completion)"
        )
        for ax in axes[:, col]:
            ax.set_xscale("log")
            ax.set_xticks(KS, [str(k) for k in KS])
            ax.grid(alpha=0.3, which="both")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=20_000, help="draws of the per-text errors per cell")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tau", type=float, default=1.0, help="judge temperature τ")
    parser.add_argument("--out", type=Path, default=Path("runs/simulate_text_error"))
    args = parser.parse_args()
    start = time.perf_counter()
    rows = sweep(args.trials, args.seed, args.tau)
    zs = np.abs([r[z] for r in rows for z in ("z_misorder", "z_tie")])
    text = "\n\n".join(f"### Δq = {g}, τ = {args.tau}\n\n{summary(rows, g)}" for g in GAPS)
    text += f"\n\n### Every cell\n\n{markdown(rows)}\n\n{args.trials} draws per cell, seed {args.seed}; largest "
    text += f"|raw MC − Rao–Blackwellised| over all cells: {zs.max():.1f} standard errors ({zs.size} frequencies).\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text(text)
    header = {"trials": args.trials, "seed": args.seed, "tau": args.tau}
    (args.out / "results.json").write_text(json.dumps({**header, "cells": rows}, indent=1))
    plot(rows, args.tau, args.out / "plot.png")
    print(text)
    print(f"{time.perf_counter() - start:.1f} s → {args.out}/")


if __name__ == "__main__":
    main()
