"""ArenaRL's topology comparison, in simulation: how well does each tournament recover the latent order of a
group, and how close are its advantages to the oracle's, per judge call?

Setup (all seeded): a group of N completions has latent qualities q ~ N(0, 1); the simulated judge answers
a match (i, j) with a Bradley–Terry draw, i wins with probability σ((q_i − q_j)/τ) — τ is the noise level
(0.25 nearly noiseless, 1 moderate, 2 very noisy). Every topology of tsrl.ranking plays `--groups` groups
per cell. Reported per (topology, N, τ):
  calls/sample  = matches per completion (× 2 with a both-orders judge, as in training by default);
  kendall, spearman = rank correlation of the topology's scores with q (0 when the scores are constant);
  adv_rmse      = RMSE between the topology's standardised reward and the oracle's, where the oracle reward
                  is ArenaRL's 1 − rank/(N−1) of the true order, standardised (the advantage the policy
                  would get with a perfect judge and full information).
Rewards: ArenaRL topologies → standardised 1 − rank/(N−1); live and trace_round_robin (Reasoning Arena's
live and non-live trace tournaments) → min–max soft-margin BT β (standardised for the error);
constitutional → wins/rounds.

    python benchmarks/topology_fidelity.py [--groups 200] [--out runs/topology_fidelity]
Writes results.json, results.md and fidelity.png into --out and prints the table.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau, spearmanr

from tsrl.ranking import (
    TOPOLOGIES,
    ConstitutionalBracket,
    LiveTrace,
    Match,
    Schedule,
    TraceRoundRobin,
    rank_rewards,
    run_schedules,
    standardise,
)

MAKERS: dict[str, Callable[[int, int], Schedule]] = {
    **TOPOLOGIES,
    "live_bwm": lambda n, seed: LiveTrace(n, arrival=np.random.default_rng(seed).permutation(n).tolist()),
    "trace_round_robin": lambda n, seed: TraceRoundRobin(n),
    "constitutional": lambda n, seed: ConstitutionalBracket(n, 1, seed=seed),
}
REWARD: dict[str, Callable[[np.ndarray], np.ndarray]] = {name: rank_rewards for name in TOPOLOGIES} | {
    "live_bwm": standardise,
    "trace_round_robin": standardise,
    "constitutional": standardise,
}


def correlation(fn, scores: np.ndarray, q: np.ndarray) -> float:
    # Bradley–Terry strengths of players with the same record differ by optimiser round-off (~1e-10); rounded,
    # they count as the tie they are (Kendall's τ-b treats ties apart), as equal win counts do
    scores = np.round(scores, 6)
    if np.ptp(scores) == 0:
        return 0.0
    return float(fn(scores, q)[0])


def cell(name: str, n: int, tau: float, groups: int, seed: int) -> dict[str, float]:
    """Play `groups` groups of one topology at one (N, τ); average the fidelity measures."""
    rng = np.random.default_rng([seed, n, int(tau * 100)])
    q = rng.normal(size=(groups, n))  # [R, N]
    schedules = [MAKERS[name](n, int(s)) for s in rng.integers(2**31, size=groups)]
    matches = 0

    def ask(batch: list[tuple[int, Match]]) -> list[float]:
        nonlocal matches
        matches += len(batch)
        g = np.array([s for s, _ in batch])
        d = q[g, [m.first for _, m in batch]] - q[g, [m.second for _, m in batch]]
        return (rng.random(len(batch)) < 1 / (1 + np.exp(-d / tau))).astype(float).tolist()

    run_schedules(schedules, ask)
    oracle = np.stack([rank_rewards(row) for row in q])  # [R, N]
    scores = [s.scores() for s in schedules]
    rewards = np.stack([REWARD[name](sc) for sc in scores])  # [R, N]
    return {
        "topology": name,
        "n": n,
        "tau": tau,
        "calls_per_sample": matches / (groups * n),
        "kendall": float(np.mean([correlation(kendalltau, sc, row) for sc, row in zip(scores, q)])),
        "spearman": float(np.mean([correlation(spearmanr, sc, row) for sc, row in zip(scores, q)])),
        "adv_rmse": float(np.sqrt(np.mean((rewards - oracle) ** 2))),
    }


def markdown(rows: list[dict]) -> str:
    lines = [
        "| topology | N | τ | calls/sample | Kendall τ | Spearman ρ | adv. RMSE |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['topology']} | {r['n']} | {r['tau']} | {r['calls_per_sample']:.2f} | {r['kendall']:.3f} "
            f"| {r['spearman']:.3f} | {r['adv_rmse']:.3f} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes, taus = sorted({r["n"] for r in rows}), sorted({r["tau"] for r in rows})
    fig, axes = plt.subplots(2, len(sizes), figsize=(5 * len(sizes), 8), squeeze=False)
    colours = dict(zip(MAKERS, plt.cm.tab10.colors))
    markers = dict(zip(taus, "o^sD"))
    for col, n in enumerate(sizes):
        for row, key in enumerate(("kendall", "adv_rmse")):
            ax = axes[row][col]
            for name in MAKERS:
                pts = sorted(
                    (r["tau"], r["calls_per_sample"], r[key]) for r in rows if r["n"] == n and r["topology"] == name
                )
                ax.plot([p[1] for p in pts], [p[2] for p in pts], color=colours[name], alpha=0.4)
                for tau, x, y in pts:
                    ax.scatter(x, y, color=colours[name], marker=markers[tau], label=name if tau == taus[0] else None)
            ax.set_xscale("log")
            ax.set_xlabel("judge matches per sample (×2 with both orders)")
            ax.set_ylabel({"kendall": "Kendall τ with latent order", "adv_rmse": "advantage RMSE vs oracle"}[key])
            ax.set_title(f"N = {n}; markers: τ = {', '.join(f'{t}:{markers[t]}' for t in taus)}")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description="ArenaRL topology comparison in simulation.")
    parser.add_argument("--groups", type=int, default=200, help="simulated groups per (topology, N, τ) cell")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--taus", type=float, nargs="+", default=[0.25, 1.0, 2.0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/topology_fidelity")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows = [cell(name, n, tau, args.groups, args.seed) for n in args.sizes for tau in args.taus for name in MAKERS]
    table = markdown(rows)
    (out / "results.json").write_text(json.dumps({"groups_per_cell": args.groups, "rows": rows}, indent=1))
    (out / "results.md").write_text(table + "\n")
    plot(rows, out / "fidelity.png")
    print(table)
    print(f"\n{len(rows)} cells × {args.groups} groups in {time.perf_counter() - t0:.1f} s → {out}/")


if __name__ == "__main__":
    main()
