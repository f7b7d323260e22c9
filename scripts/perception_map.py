"""Where do comparisons win and where do grades? The reward-level map of docs/results.md §9 (pre-registered).

Each cell is a simulated judge (docs/judge_simulator.md) with item noise σ_ε shared by both protocols — verdicts at
temperature τ = σ_ε·√6/π, the Gumbel item noise whose differences are logistic(τ) — a per-call frame σ_η that
only grades see (one item per grade call: rubric_noise = √(σ_ε² + σ_η²)), and grades rounded to `levels` values
on 0–10; everything else at the ideal profile. The named judge profiles are extra points.

For every group of a pool of real policy groups (the `samples.jsonl` of training runs: 8 completions of one
prompt), each method's reward is computed by tsrl's own regime (tsrl.build_scorer), and

    P_g = share of the group's pairs with different latent quality q (the task's, no taste) that the reward
          orders correctly, equal rewards counting ½;
    S   = (2·mean P_g − 1)·√(4/c),  c = judge calls per sample (TSRL k = 4: 4; rubric, one-anchor: 1):

at the papers' equal budget a method of c calls per sample takes 4/c times TSRL's steps, so its summed ordering
signal grows 4/c-fold and its noise √(4/c)-fold. S is our proxy for signal per judge call, not a paper's measure.
A cell's verdict: comparisons win where S_tsrl − S_rubric has a 95 % bootstrap interval (groups resampled,
judge seeds averaged) above 0, grades win where it is below 0, even otherwise.

    python scripts/perception_map.py --runs DIR [DIR ...] [--seeds 3] [--out runs/perception_map]

writes cells.jsonl, map.md and map.png into --out.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

ITEM_TAU = (0.0, 0.5, 1.0, 2.0)  # verdict temperature τ; item noise σ_ε = τπ/√6
FRAMES = (0.0, math.sqrt(2.25 - math.pi**2 / 6), 1.5, 3.0)  # σ_η; the second makes (τ = 1, 11 levels) the ideal
LEVELS = (11, 5, 3)
PROFILES = ("ideal", "gpt4-mtbench", "gpt35-mtbench", "smollm2-135m-vllm")
METHODS = {"tsrl": ("ladder", 4), "rubric": ("rubric", 1), "one_anchor": ("one_anchor", 1)}  # regime, calls/sample
TAU_FLOOR = 1e-3  # τ = 0 (no item noise) as a judge that is decisive to a thousandth of a latent unit
BOOTSTRAP = 1000


def cell_overrides(tau: float, frame: float, levels: int) -> list[str]:
    item = tau * math.pi / math.sqrt(6.0)
    return [
        f"judge.tau={max(tau, TAU_FLOOR)}",
        f"judge.rubric_noise={math.hypot(item, frame)}",
        f"judge.grade_levels={levels}",
    ]


def load_groups(runs: list[Path]) -> list[tuple[str, list[str]]]:
    """(prompt text, 8 completions) for every (run, step, prompt) group logged in the runs' samples.jsonl."""
    groups: dict[tuple, list[str]] = defaultdict(list)
    prompts: dict[tuple, str] = {}
    for run in runs:
        for line in (run / "samples.jsonl").read_text().splitlines():
            row = json.loads(line)
            key = (str(run), row["step"], row["prompt_id"])
            groups[key].append(row["completion"])
            prompts[key] = row["prompt"]
    size = max(len(g) for g in groups.values())
    return [(prompts[k], g) for k, g in groups.items() if len(g) == size]


def pair_scores(rewards: np.ndarray, quality: np.ndarray) -> float:
    """P_g: the share of pairs of different quality the rewards order correctly (equal rewards ½)."""
    i, j = np.triu_indices(len(quality), 1)
    keep = quality[i] != quality[j]
    if not keep.any():
        return math.nan
    sign = np.sign(quality[i] - quality[j])[keep] * np.sign(rewards[i] - rewards[j])[keep]
    return float(np.mean((sign + 1) / 2))


def score_cell(
    groups, quality, overrides: list[str], seeds: int, run_root: Path, known: dict | None = None
) -> dict[str, np.ndarray]:
    """Per method, P_g of every group averaged over the judge seeds ([n_groups]). `known`: methods already
    scored for this cell's verdicts (σ_η and L change only grades, so the verdict methods are shared by τ)."""
    from tsrl import build_scorer

    prompts = [p for p, _ in groups]
    completions = [c for _, c in groups]
    out = dict(known or {})
    for method, (regime, _) in METHODS.items():
        if method in out:
            continue
        per_seed = []
        for seed in range(seeds):
            scorer = build_scorer(
                regime,
                "rubric_sim",
                "humor",
                prompts=sorted(set(prompts)),
                overrides=[*overrides, f"judge.seed={seed}", "judge.cache_path="],
                run_dir=run_root / f"{method}-{seed}",
            )
            rewards = scorer.score(prompts, completions).rewards
            per_seed.append([pair_scores(r, q) for r, q in zip(rewards, quality)])
        out[method] = np.nanmean(np.array(per_seed, float), axis=0)
    return out


def summarise(p: dict[str, np.ndarray], rng: np.random.Generator) -> dict:
    """S per method and the bootstrap intervals of the differences that decide the cell."""

    def signal(values: np.ndarray, calls: int) -> float:
        return (2.0 * float(np.nanmean(values)) - 1.0) * math.sqrt(4 / calls)

    n = len(p["tsrl"])
    boots = rng.integers(0, n, size=(BOOTSTRAP, n))
    row = {f"P_{m}": float(np.nanmean(v)) for m, v in p.items()}
    row |= {f"S_{m}": signal(v, METHODS[m][1]) for m, v in p.items()}
    for a, b in (("tsrl", "rubric"), ("one_anchor", "rubric"), ("tsrl", "one_anchor")):
        diffs = [signal(p[a][idx], METHODS[a][1]) - signal(p[b][idx], METHODS[b][1]) for idx in boots]
        low, high = np.quantile(diffs, [0.025, 0.975])
        row[f"{a}-{b}"] = [row[f"S_{a}"] - row[f"S_{b}"], float(low), float(high)]
    low, high = row["tsrl-rubric"][1:]
    row["verdict"] = "comparisons" if low > 0 else "grades" if high < 0 else "even"
    return row


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(LEVELS), figsize=(4.2 * len(LEVELS), 3.8), sharey=True)
    limit = max(abs(r["tsrl-rubric"][0]) for r in rows if "tau" in r) or 1.0
    for ax, levels in zip(axes, LEVELS):
        grid = np.full((len(ITEM_TAU), len(FRAMES)), np.nan)
        marks = {}
        for r in rows:
            if r.get("levels") == levels:
                i, j = ITEM_TAU.index(r["tau"]), FRAMES.index(r["frame"])
                grid[i, j] = r["tsrl-rubric"][0]
                marks[i, j] = {"comparisons": "C", "grades": "G", "even": "="}[r["verdict"]]
        image = ax.imshow(grid, cmap="RdBu", vmin=-limit, vmax=limit, origin="lower")
        for (i, j), mark in marks.items():
            ax.text(j, i, f"{mark}\n{grid[i, j]:+.2f}", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(FRAMES)), [f"{f:.2f}" for f in FRAMES])
        ax.set_yticks(range(len(ITEM_TAU)), [f"{t:g}" for t in ITEM_TAU])
        ax.set_xlabel("frame σ_η (grades only)")
        ax.set_title(f"{levels} grade levels")
    axes[0].set_ylabel("verdict temperature τ (item noise τπ/√6)")
    fig.colorbar(image, ax=axes, label="S_tsrl − S_rubric (blue: comparisons)")
    fig.savefig(path, dpi=120, bbox_inches="tight")


def table(rows: list[dict]) -> str:
    lines = [
        "| cell | P tsrl | P rubric | P one-anchor | S tsrl | S rubric | S one-anchor | S tsrl − S rubric [95 %] | "
        "verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        d = r["tsrl-rubric"]
        lines.append(
            f"| {r['cell']} | {r['P_tsrl']:.3f} | {r['P_rubric']:.3f} | {r['P_one_anchor']:.3f} | "
            f"{r['S_tsrl']:.3f} | {r['S_rubric']:.3f} | {r['S_one_anchor']:.3f} | "
            f"{d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}] | {r['verdict']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, nargs="+", required=True, help="run directories with samples.jsonl")
    parser.add_argument("--seeds", type=int, default=3, help="judge seeds per cell (default 3)")
    parser.add_argument("--out", type=Path, default=Path("runs/perception_map"))
    parser.add_argument("--only", choices=("grid", "profiles"), default=None, help="compute only one part")
    args = parser.parse_args()
    from tsrl.tasks import build_task
    from tsrl.tasks.humor import HumorConfig

    args.out.mkdir(parents=True, exist_ok=True)
    groups = load_groups(args.runs)
    task = build_task(HumorConfig())
    known = {p.text: p for p in task.prompts("train")}
    quality = [np.array([task.quality(known[p], c) for c in texts]) for p, texts in groups]
    print(f"{len(groups)} groups of {len(groups[0][1])} from {len(args.runs)} runs")
    cells = []
    if args.only != "profiles":
        cells += [
            (f"τ={t:g} σ_η={f:.2f} L={n}", cell_overrides(t, f, n), {"tau": t, "frame": f, "levels": n})
            for t, f, n in itertools.product(ITEM_TAU, FRAMES, LEVELS)
        ]
    if args.only != "grid":
        cells += [(f"profile {name}", [f"judge.profile={name}"], {"profile": name}) for name in PROFILES]
    rng = np.random.default_rng(0)
    rows, verdicts = [], {}
    with (args.out / "cells.jsonl").open("w") as sink:
        for name, overrides, meta in cells:
            shared = verdicts.get(meta.get("tau"), {})
            p = score_cell(groups, quality, overrides, args.seeds, args.out / "scratch", known=shared)
            if "tau" in meta:
                verdicts[meta["tau"]] = {m: p[m] for m in ("tsrl", "one_anchor")}
            row = {"cell": name, **meta, "overrides": overrides, **summarise(p, rng)}
            rows.append(row)
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            print(
                f"{name:28s} S tsrl {row['S_tsrl']:.3f} rubric {row['S_rubric']:.3f} "
                f"one-anchor {row['S_one_anchor']:.3f} -> {row['verdict']}",
                flush=True,
            )
    (args.out / "map.md").write_text(table(rows) + "\n")
    if any("tau" in r for r in rows):
        plot(rows, args.out / "map.png")
    print(f"wrote {args.out / 'map.md'}")


if __name__ == "__main__":
    main()
