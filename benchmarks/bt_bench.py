"""Benchmark: batched Bradley–Terry for 1,024 groups of N = 16 with 3N soft matches each, against a
per-group scipy L-BFGS-B loop (tsrl.ranking.fit_bradley_terry). Target: batched ≤ 0.5 s on a 2-core CPU.

    python benchmarks/bt_bench.py [--groups 1024] [--n 16] [--repeats 3] [--out results.json]

Prints the results as JSON, and writes them to --out when given (benchmarks/bench.py reads them there).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from tsrl.ranking import bradley_terry_loss, fit_bradley_terry, fit_bradley_terry_batch


def simulated_matches(groups: int, n: int, per_group: int, seed: int) -> np.ndarray:
    """[groups, per_group, 3] (i, j, y) rows drawn from a BT model with strengths ~ N(0, 1)."""
    rng = np.random.default_rng(seed)
    strength = rng.normal(size=(groups, n))  # [Gr, N]
    i = rng.integers(0, n, (groups, per_group))  # [Gr, M]
    j = (i + rng.integers(1, n, (groups, per_group))) % n  # [Gr, M], never i
    d = np.take_along_axis(strength, i, 1) - np.take_along_axis(strength, j, 1)
    y = (rng.random((groups, per_group)) < 1 / (1 + np.exp(-d))).astype(float)  # [Gr, M]
    return np.stack([i, j, y], axis=-1)


def max_gradient(betas: np.ndarray, matches: np.ndarray) -> float:
    """Largest |∂L/∂β| over all groups at the given strengths (mirrored rows, λ = 0.1): which fit is closer
    to the optimum."""
    worst = 0.0
    for beta, rows in zip(betas, matches):
        mirrored = np.concatenate([rows, np.column_stack([rows[:, 1], rows[:, 0], 1 - rows[:, 2]])])
        worst = max(worst, float(np.abs(bradley_terry_loss(beta, mirrored, 0.1)[1]).max()))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1024)
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="also write the results to this JSON file")
    args = parser.parse_args()
    matches = simulated_matches(args.groups, args.n, 3 * args.n, seed=0)
    fit_bradley_terry_batch(args.n, matches[:8], l2=0.1)  # warm-up
    batched_s = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        batched = fit_bradley_terry_batch(args.n, matches, l2=0.1)
        batched_s.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    loop = np.stack([fit_bradley_terry(args.n, m, l2=0.1) for m in matches])
    loop_s = time.perf_counter() - t0
    result = {
        "groups": args.groups,
        "n": args.n,
        "matches_per_group": 3 * args.n,
        "batched_s_best": min(batched_s),
        "batched_s_median": float(np.median(batched_s)),
        "scipy_loop_s": loop_s,
        "speedup": loop_s / min(batched_s),
        "max_abs_diff": float(np.abs(batched - loop).max()),
        "target_s": 0.5,
        "max_grad_batched": max_gradient(batched, matches),
        "max_grad_scipy": max_gradient(loop, matches),
    }
    print(json.dumps(result, indent=1))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    print(
        f"batched {min(batched_s):.3f} s vs scipy loop {loop_s:.2f} s: {loop_s / min(batched_s):.0f}x faster; "
        f"max |Δβ| = {result['max_abs_diff']:.1e}; target ≤ 0.5 s: "
        f"{'met' if min(batched_s) <= 0.5 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
