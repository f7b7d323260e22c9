"""TSRL §3 by Monte Carlo: how often does each reward estimator rank the worse of two completions above the
better one, and how noisy is the reward? Every number is checked against its closed form.

Two completions with latent qualities q1 = −Δq/2 < q2 = +Δq/2. The judge says a completion of quality q beats
an anchor of quality a with probability σ((q − a)/τ) (Bradley–Terry, temperature τ); each verdict is then
flipped with probability f, so p = f + (1 − 2f)·σ((q − a)/τ). The K anchors sit at the quantiles (j + ½)/K of
N(0, 1). Dimension letters: T trials, K anchors; the axis of size 2 is the pair (worse, better).

ladder (TSRL)  R_i = (1/K) Σ_j X_ij with X_ij ~ Bernoulli(p_ij), all independent.
    Var R_i = mean_j p_ij(1 − p_ij) / K ≤ 1/(4K).
    Exact: S_i = K·R_i is Poisson-binomial (binomial when the p's are equal across anchors), so the
    misorder P(R1 > R2) and the tie P(R1 = R2) are sums over the outer product of the two count pmfs.
    Hoeffding: D = R2 − R1 = (1/K) Σ_j (X2j − X1j), δ = E[D] = p̄2 − p̄1 > 0. Each paired term lies in
    [−1, 1] (range 2), so P(D ≤ 0) ≤ exp(−2K²δ² / (K·2²)) = exp(−Kδ²/2), the paper's form. Counting the 2K
    verdicts as separate independent terms of range 1/K gives exp(−2δ² / (2K/K²)) = exp(−Kδ²), also valid and
    tighter. Both bound P(R1 ≥ R2) = misorder + tie.
single pair    One anchor at a = 0 (the K = 1 ladder), R_i ∈ {0, 1}: the better one strictly above with
    probability p2(1 − p1) (the paper's quantity), strictly below p1(1 − p2), tie p1p2 + (1 − p1)(1 − p2);
    Var R_i = p_i(1 − p_i) ≤ 1/4. Also shown, head-to-head: the judge compares the two completions directly
    and prefers the worse with probability 1 − f − (1 − 2f)·σ(Δq/τ); no ties.
rubric         R_i = q_i + N(0, σ²): misorder Φ(−Δq/(√2σ)), Var R_i = σ², no ties. The plot's matched rubric
    has σ = πτ/√6, the sd of the Gumbel score noise that a Bradley–Terry judge of temperature τ amounts to.

    python scripts/simulate_regimes.py [--trials 20000] [--seed 0] [--tau 1] [--out runs/simulate_regimes]
Sweeps K ∈ {1, 2, 4, 8, 16, 32}, f ∈ {0, .1, .2, .3, .4}, σ ∈ {.5, 1, 2}, Δq ∈ {.25, .5, 1} (≈ 5 s on two
cores); writes results.json, results.md and plot.png into --out and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy.special import expit
from scipy.stats import norm

KS = (1, 2, 4, 8, 16, 32)
FLIPS = (0.0, 0.1, 0.2, 0.3, 0.4)
SIGMAS = (0.5, 1.0, 2.0)
GAPS = (0.25, 0.5, 1.0)
Row = dict[str, float]


def qualities(gap: float) -> np.ndarray:
    return np.array([-gap / 2, gap / 2])  # [2]


def anchor_qualities(k: int) -> np.ndarray:
    """K anchors spread evenly over N(0, 1): its quantiles (j + ½)/K."""
    return norm.ppf((np.arange(k) + 0.5) / k)  # [K]


def win_prob(q: np.ndarray, anchors: np.ndarray, tau: float, flip: float) -> np.ndarray:
    """P(completion i beats anchor j): Bradley–Terry judge, each verdict flipped with probability `flip`."""
    return flip + (1 - 2 * flip) * expit((q[:, None] - anchors[None, :]) / tau)  # [2, K]


def ladder_trial(p: np.ndarray, trials: int, rng: np.random.Generator) -> np.ndarray:
    """Anchor wins S_i = Σ_j X_ij of both completions in `trials` independent ladders (R_i = S_i / K)."""
    return (rng.random((trials, *p.shape)) < p).sum(-1)  # [T, 2]


def count_pmf(p: np.ndarray) -> np.ndarray:
    """Poisson-binomial pmf of Σ_j X_j, X_j ~ Bernoulli(p_j): entry s is P(S = s), s = 0..K."""
    pmf = np.ones(1)
    for pj in p:
        pmf = np.convolve(pmf, [1 - pj, pj])
    return pmf  # [K+1]


def exact_ladder(p: np.ndarray) -> tuple[float, float]:
    """Exact (misorder P(R1 > R2), tie P(R1 = R2)) of the ladder with win probabilities p [2, K]."""
    joint = np.outer(count_pmf(p[0]), count_pmf(p[1]))  # [K+1, K+1]: P(S1 = a, S2 = b)
    return float(np.tril(joint, -1).sum()), float(np.trace(joint))


def hoeffding_bound(delta: np.ndarray | float, k: int, paired: bool = True) -> np.ndarray:
    """Hoeffding bound on P(R1 ≥ R2): exp(−Kδ²/2) over K paired terms (the paper), exp(−Kδ²) over the 2K
    verdicts; 1 when δ ≤ 0."""
    delta = np.asarray(delta, dtype=float)
    return np.where(delta > 0, np.exp(-(0.5 if paired else 1.0) * k * delta**2), 1.0)


def ladder_variance(p: np.ndarray) -> np.ndarray:
    """Var R_i = mean_j p_ij(1 − p_ij) / K for each completion."""
    return (p * (1 - p)).mean(-1) / p.shape[-1]  # [2]


def single_pair(p1: float, p2: float) -> Row:
    """One shared anchor: P(better strictly above), P(worse strictly above), P(tie)."""
    return {"correct": p2 * (1 - p1), "wrong": p1 * (1 - p2), "tie": p1 * p2 + (1 - p1) * (1 - p2)}


def head_to_head(gap: float, tau: float, flip: float) -> float:
    """P(the judge prefers the worse completion when it compares the two directly)."""
    return float(1 - flip - (1 - 2 * flip) * expit(gap / tau))


def rubric_trial(q: np.ndarray, sigma: float, trials: int, rng: np.random.Generator) -> np.ndarray:
    """Pointwise scores q_i + N(0, σ²) in `trials` independent draws."""
    return q + sigma * rng.standard_normal((trials, q.size))  # [T, 2]


def rubric_misorder(gap: float, sigma: float) -> float:
    return float(norm.cdf(-gap / (np.sqrt(2) * sigma)))


def orderings(rewards: np.ndarray) -> Row:
    """Monte Carlo misorder (R1 > R2), tie and correct (R1 < R2) frequencies of rewards [T, 2]."""
    wrong, tie = rewards[:, 0] > rewards[:, 1], rewards[:, 0] == rewards[:, 1]
    return {
        "mc_misorder": float(wrong.mean()),
        "mc_tie": float(tie.mean()),
        "mc_correct": float(1 - wrong.mean() - tie.mean()),
    }


def z_score(mc: float, exact: float, trials: int) -> float:
    """Monte Carlo error in standard errors of a frequency whose exact value is `exact`."""
    return (mc - exact) / np.sqrt(exact * (1 - exact) / trials)


def ladder_cell(p: np.ndarray, trials: int, rng: np.random.Generator) -> Row:
    k = p.shape[1]
    counts = ladder_trial(p, trials, rng)  # [T, 2]
    mc = orderings(counts)
    misorder, tie = exact_ladder(p)
    delta = p[1].mean() - p[0].mean()
    return {
        **mc,
        "exact_misorder": misorder,
        "exact_tie": tie,
        "exact_misorder_or_tie": misorder + tie,
        "exact_coin": misorder + tie / 2,
        "delta": float(delta),
        "hoeffding": float(hoeffding_bound(delta, k)),
        "hoeffding_2k": float(hoeffding_bound(delta, k, paired=False)),
        "mc_var": float((counts / k).var(0).mean()),
        "var": float(ladder_variance(p).mean()),
        "var_bound": 1 / (4 * k),
        "z_misorder": z_score(mc["mc_misorder"], misorder, trials),
        "z_tie": z_score(mc["mc_tie"], tie, trials),
    }


def pair_cell(p: np.ndarray, h2h: float, trials: int, rng: np.random.Generator) -> Row:
    """Single shared anchor (p [2, 1]) and head-to-head (exact misorder `h2h`) Monte Carlo vs closed forms."""
    wins = ladder_trial(p, trials, rng)  # [T, 2]
    exact, mc = single_pair(float(p[0, 0]), float(p[1, 0])), orderings(wins)
    return {
        **mc,
        **exact,
        "coin": exact["wrong"] + exact["tie"] / 2,
        "mc_var": float(wins.var(0).mean()),
        "var": float(ladder_variance(p).mean()),
        "h2h": h2h,
        "mc_h2h": float((rng.random(trials) < h2h).mean()),
        "z_misorder": z_score(mc["mc_misorder"], exact["wrong"], trials),
        "z_tie": z_score(mc["mc_tie"], exact["tie"], trials),
    }


def rubric_cell(gap: float, sigma: float, trials: int, rng: np.random.Generator) -> Row:
    scores = rubric_trial(qualities(gap), sigma, trials, rng)  # [T, 2]
    exact = rubric_misorder(gap, sigma)
    mc = orderings(scores)
    return {
        **mc,
        "exact_misorder": exact,
        "mc_var": float(scores.var(0).mean()),
        "var": sigma**2,
        "z_misorder": z_score(mc["mc_misorder"], exact, trials),
    }


def sweep(trials: int, seed: int, tau: float) -> dict[str, list[Row]]:
    """Every (K, f, Δq) ladder cell, (f, Δq) single-pair cell and (σ, Δq) rubric cell."""
    rng = np.random.default_rng(seed)
    ladder = [
        {"k": k, "flip": f, "gap": g, **ladder_cell(win_prob(qualities(g), anchor_qualities(k), tau, f), trials, rng)}
        for g in GAPS
        for f in FLIPS
        for k in KS
    ]
    pair = [
        {
            "flip": f,
            "gap": g,
            **pair_cell(win_prob(qualities(g), np.zeros(1), tau, f), head_to_head(g, tau, f), trials, rng),
        }
        for g in GAPS
        for f in FLIPS
    ]
    matched = float(np.pi * tau / np.sqrt(6))
    rubric = [{"sigma": s, "gap": g, **rubric_cell(g, s, trials, rng)} for g in GAPS for s in (*SIGMAS, matched)]
    return {"ladder": ladder, "pair": pair, "rubric": rubric}


COLUMNS = {
    "ladder": [
        ("K", "k", "d"),
        ("f", "flip", ".1f"),
        ("Δq", "gap", ".2f"),
        ("MC misorder", "mc_misorder", ".4f"),
        ("exact misorder", "exact_misorder", ".4f"),
        ("z", "z_misorder", "+.1f"),
        ("MC tie", "mc_tie", ".4f"),
        ("exact tie", "exact_tie", ".4f"),
        ("exact misorder + ½ tie", "exact_coin", ".4f"),
        ("exact P(R1 ≥ R2)", "exact_misorder_or_tie", ".4f"),
        ("Hoeffding e^(−Kδ²/2)", "hoeffding", ".3f"),
        ("e^(−Kδ²)", "hoeffding_2k", ".3f"),
        ("MC var", "mc_var", ".4f"),
        ("var", "var", ".4f"),
        ("1/(4K)", "var_bound", ".4f"),
    ],
    "pair": [
        ("f", "flip", ".1f"),
        ("Δq", "gap", ".2f"),
        ("MC correct", "mc_correct", ".4f"),
        ("p2(1−p1)", "correct", ".4f"),
        ("MC misorder", "mc_misorder", ".4f"),
        ("p1(1−p2)", "wrong", ".4f"),
        ("MC tie", "mc_tie", ".4f"),
        ("exact tie", "tie", ".4f"),
        ("misorder + ½ tie", "coin", ".4f"),
        ("MC var", "mc_var", ".4f"),
        ("p(1−p)", "var", ".4f"),
        ("MC head-to-head misorder", "mc_h2h", ".4f"),
        ("exact", "h2h", ".4f"),
    ],
    "rubric": [
        ("σ", "sigma", ".2f"),
        ("Δq", "gap", ".2f"),
        ("MC misorder", "mc_misorder", ".4f"),
        ("Φ(−Δq/(√2σ))", "exact_misorder", ".4f"),
        ("z", "z_misorder", "+.1f"),
        ("MC tie", "mc_tie", ".4f"),
        ("MC var", "mc_var", ".4f"),
        ("σ²", "var", ".4f"),
    ],
}
TITLES = {
    "ladder": "Anchor ladder (misorder: R1 > R2 strictly; misorder + ½ tie: ties broken by a coin; "
    "the Hoeffding bounds are on P(R1 ≥ R2))",
    "pair": "Single pair: one shared anchor at a = 0, and head-to-head (no ties)",
    "rubric": "Rubric scalar (the last σ of each Δq is πτ/√6, the rubric matched to the judge's noise)",
}


def markdown(name: str, rows: list[Row]) -> str:
    columns = COLUMNS[name]
    lines = [f"### {TITLES[name]}", "", "| " + " | ".join(c[0] for c in columns) + " |", "|---" * len(columns) + "|"]
    lines += ["| " + " | ".join(format(r[key], fmt) for _, key, fmt in columns) + " |" for r in rows]
    return "\n".join(lines)


def plot(results: dict[str, list[Row]], tau: float, path: Path) -> None:
    """Top: strict misorder vs K. Bottom: ties broken by a coin, comparable with the tie-free references."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    flips = (0.0, 0.2, 0.4)
    fig, axes = plt.subplots(2, len(GAPS), figsize=(5.5 * len(GAPS), 9), sharex=True, sharey=True)
    for col, g in enumerate(GAPS):
        pair = next(r for r in results["pair"] if r["gap"] == g and r["flip"] == 0)
        rubric = next(r for r in results["rubric"] if r["gap"] == g and r["sigma"] not in SIGMAS)
        for row, exact in enumerate(("exact_misorder", "exact_coin")):
            ax = axes[row][col]
            for f, colour in zip(flips, plt.cm.viridis(np.linspace(0, 0.85, len(flips)))):
                cells = [r for r in results["ladder"] if r["gap"] == g and r["flip"] == f]
                ks = [r["k"] for r in cells]
                ax.plot(ks, [r[exact] for r in cells], color=colour, label=f"ladder, f = {f}")
                ax.scatter(ks, [r["mc_misorder"] + row * r["mc_tie"] / 2 for r in cells], color=colour, s=18)
                ax.plot(ks, [r["hoeffding"] for r in cells], color=colour, ls="--", lw=1)
            ax.axhline(pair["wrong"] + row * pair["tie"] / 2, color="grey", ls=":", label="single pair, f = 0")
            if row:
                ax.axhline(pair["h2h"], color="grey", ls="-.", label="head-to-head, f = 0")
                ax.axhline(
                    rubric["exact_misorder"], color="black", ls=":", label=f"rubric, σ = πτ/√6 = {rubric['sigma']:.2f}"
                )
            ax.set(xscale="log", yscale="log", ylim=(5e-3, 1.05), title=f"Δq = {g}, τ = {tau}")
            ax.set_xticks(KS, [str(k) for k in KS])
            ax.grid(alpha=0.3, which="both")
        axes[1][col].set_xlabel("anchors K (dots MC, lines exact, dashed Hoeffding e^(−Kδ²/2))")
    axes[0][0].set_ylabel("P(R1 > R2): worse strictly above better")
    axes[1][0].set_ylabel("P(R1 > R2) + ½ P(R1 = R2): ties broken by a coin")
    for ax in axes[:, 0]:
        ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=20_000, help="Monte Carlo trials per cell")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tau", type=float, default=1.0, help="judge temperature τ")
    parser.add_argument("--out", type=Path, default=Path("runs/simulate_regimes"))
    args = parser.parse_args()
    start = time.perf_counter()
    results = sweep(args.trials, args.seed, args.tau)
    zs = np.abs([r[z] for name in results for r in results[name] for z in ("z_misorder", "z_tie") if z in r])
    text = "\n\n".join(markdown(name, rows) for name, rows in results.items())
    text += (
        f"\n\n{args.trials} trials per cell, seed {args.seed}, τ = {args.tau}; largest |MC − exact| "
        f"over all cells: {zs.max():.1f} standard errors ({zs.size} frequencies).\n"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text(text)
    header = {"trials": args.trials, "seed": args.seed, "tau": args.tau}
    (args.out / "results.json").write_text(json.dumps({**header, **results}, indent=1))
    plot(results, args.tau, args.out / "plot.png")
    print(text)
    print(f"{time.perf_counter() - start:.1f} s → {args.out}/")


if __name__ == "__main__":
    main()
