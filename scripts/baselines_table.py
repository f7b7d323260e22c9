"""TSRL Table 1's rows at CPU scale: Base, SFT, DPO, rubric, one-anchor and the TSRL ladder on the same task,
judge and evaluation, over seeds.

Every method trains what `recipes/cpu_demo` trains — the bare defaults (the tiny policy, humor, the simulated
judge `rubric_sim`, 100 steps of 8 prompts × 8 samples) with algo.mask_truncated=true — with one change: the
algorithm (sft, dpo on the ranked ladder) or the reward (rubric, one_anchor,
ladder k = 4). Every run is measured by the same clean evaluation judge on the same 24 held-out prompts ×
4 samples against their five reference anchors. Base is the untrained policy: each run's step-0 number (the
evaluation has its own fixed seed, so it is the same in every run). Judge calls are those of the training steps;
the ladder's one-time round-robin (64 prompts × 45 pairs × 2 orders = 5,760 calls), which SFT, DPO, one-anchor
and the ladder all rank from, is stored and reused across runs.

    python scripts/baselines_table.py [--seeds 0 1 2] [--steps 100] [--budget N] [--jobs 2] [--out runs/baselines]
                                      [-- extra overrides]

--budget N compares the methods at an equal judge budget (TSRL §4.11): each judge-rewarded method trains
⌊N / (its judge calls per step)⌋ steps instead of --steps — the rubric grades each sample once (64 calls a
step), one-anchor compares it with one anchor in both orders (128), the ladder with k = 4 anchors in both
orders (512) — so every method spends N calls in training. SFT and DPO call no judge in training; they keep
--steps. The table reports each method's steps and the calls it actually spent.
A finished run (eval.json at the last step) is reused. Writes results.json and results.md into --out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from noise_sweep import TRAIN, finished  # the sibling script (this folder is on sys.path when run as a script)

METHODS = {  # TSRL Table 1's order: (overrides, judge calls per sampled completion in training)
    "SFT": (["algo=sft"], 0),
    "DPO": (["algo=dpo", "algo.max_pairs=8"], 0),
    "rubric": (["reward=rubric"], 1),  # one grade
    "one-anchor": (["reward=one_anchor"], 2),  # one anchor, both orders
    "TSRL ladder (k = 4)": ([], 8),  # four anchors, both orders
}
SAMPLES_PER_STEP = 8 * 8  # the defaults' prompts_per_step × group_size


def train(run_dir: Path, overrides: list[str], seed: int, steps: int, extra: list[str]) -> dict:
    done = finished(run_dir, steps)
    if done is None:
        start = time.perf_counter()
        subprocess.run(
            [
                TRAIN,
                "algo.mask_truncated=true",
                *overrides,
                f"seed={seed}",
                f"trainer.max_steps={steps}",
                f"run_dir={run_dir}",
                *extra,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")},
        )
        print(f"  {run_dir.name}: {time.perf_counter() - start:.0f} s", flush=True)
        done = finished(run_dir, steps)
    steps = [json.loads(line)["judge/calls"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {**done, "judge_calls": sum(steps)}  # training steps only: the ladder's round-robin is stored and reused


def mean_std(values: list[float]) -> str:
    return f"{np.mean(values):.1f} ({np.std(values, ddof=1) if len(values) > 1 else 0.0:.1f})"


def steps_of(calls_per_sample: int, steps: int, budget: int | None) -> int:
    """Training steps of a method: --steps, or as many as --budget judge calls pay for."""
    if budget is None or calls_per_sample == 0:
        return steps
    return budget // (calls_per_sample * SAMPLES_PER_STEP)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--budget", type=int, default=None, help="judge calls in training, the same for every method")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (each with one torch thread)")
    parser.add_argument("--out", type=Path, default=Path("runs/baselines"))
    parser.add_argument("extra", nargs="*", help="overrides for every run (after --)")
    args = parser.parse_args()
    if args.budget is not None and args.budget < 8 * SAMPLES_PER_STEP:
        parser.error(f"--budget {args.budget} does not pay for one ladder step ({8 * SAMPLES_PER_STEP} calls)")
    plan = {}
    for name, (overrides, per_sample) in METHODS.items():
        steps = steps_of(per_sample, args.steps, args.budget)
        slug = name.split(" ")[0].lower().replace("-", "_")
        for seed in args.seeds:
            plan[(name, seed)] = (args.out / f"{slug}_{steps}steps_s{seed}", overrides, seed, steps, args.extra)
    first_key = next(iter(plan))  # alone: it builds the tiny policy and the ranked ladder the others reuse
    done = {first_key: train(*plan.pop(first_key))}
    with ThreadPoolExecutor(args.jobs) as pool:  # each run is its own process
        futures = {key: pool.submit(train, *job) for key, job in plan.items()}
        done.update({key: future.result() for key, future in futures.items()})
    results = {name: [done[(name, seed)] for seed in args.seeds] for name in METHODS}
    first = next(iter(results.values()))[0]
    rows = [
        "| method | training steps | held-out win-rate, mean (std) | vs top anchors | judge calls in training |",
        "|---|---|---|---|---|",
        f"| Base (untrained) | 0 | {first['start']['winrate']:.1f} | "
        f"{first['start'].get('winrate/top', float('nan')):.1f} | 0 |",
    ]
    for name, runs in results.items():
        rows.append(
            f"| {name} | {runs[0]['latest']['step']} | {mean_std([r['latest']['winrate'] for r in runs])} | "
            f"{mean_std([r['latest'].get('winrate/top', float('nan')) for r in runs])} | "
            f"{np.mean([r['judge_calls'] for r in runs]):.0f} |"
        )
    judge = first["judge"]
    budget = f"equal judge budget of {args.budget} calls in training" if args.budget else f"{args.steps} steps"
    text = "\n".join(rows) + (
        f"\n\n{len(args.seeds)} seeds, {budget}; evaluation judge: {judge['kind']} ({judge['model']}), clean\n"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    (args.out / "results.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
