"""TSRL Table 1's rows at CPU scale: Base, SFT, DPO, rubric, one-anchor and the TSRL ladder on the same task,
judge and evaluation, over seeds.

Every method trains what `recipes/cpu_demo` trains — the bare defaults (the tiny policy, humor, the simulated
judge `rubric_sim`, 100 steps of 8 prompts × 8 samples) with algo.mask_truncated=true — with one change: the algorithm (sft, dpo on the ranked ladder) or the reward (rubric, one_anchor,
ladder k = 4). Every run is measured by the same clean evaluation judge on the same 24 held-out prompts ×
4 samples against their five reference anchors. Base is the untrained policy: each run's step-0 number (the
evaluation has its own fixed seed, so it is the same in every run). Judge calls are those of the training steps;
the ladder's one-time round-robin (64 prompts × 45 pairs × 2 orders = 5,760 calls), which SFT, DPO, one-anchor
and the ladder all rank from, is stored and reused across runs.

    python scripts/baselines_table.py [--seeds 0 1 2] [--steps 100] [--out runs/baselines] [-- extra overrides]
A finished run (eval.json at the last step) is reused. Writes results.json and results.md into --out.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import numpy as np
from noise_sweep import TRAIN, finished  # the sibling script (this folder is on sys.path when run as a script)

METHODS = {  # TSRL Table 1's order
    "SFT": ["algo=sft"],
    "DPO": ["algo=dpo", "algo.max_pairs=8"],
    "rubric": ["reward=rubric"],
    "one-anchor": ["reward=one_anchor"],  # k = 1
    "TSRL ladder (k = 4)": [],
}


def train(run_dir: Path, overrides: list[str], seed: int, steps: int, extra: list[str]) -> dict:
    done = finished(run_dir, steps)
    if done is None:
        start = time.perf_counter()
        subprocess.run([TRAIN, "algo.mask_truncated=true", *overrides, f"seed={seed}", f"trainer.max_steps={steps}",
                        f"run_dir={run_dir}", *extra], check=True, stdout=subprocess.DEVNULL)
        print(f"  {run_dir.name}: {time.perf_counter() - start:.0f} s", flush=True)
        done = finished(run_dir, steps)
    steps = [json.loads(line)["judge/calls"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {**done, "judge_calls": sum(steps)}  # training steps only: the ladder's round-robin is stored and reused


def mean_std(values: list[float]) -> str:
    return f"{np.mean(values):.1f} ({np.std(values, ddof=1) if len(values) > 1 else 0.0:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("runs/baselines"))
    parser.add_argument("extra", nargs="*", help="overrides for every run (after --)")
    args = parser.parse_args()
    results: dict[str, list[dict]] = {}
    for name, overrides in METHODS.items():
        slug = name.split(" ")[0].lower().replace("-", "_")
        results[name] = [train(args.out / f"{slug}_s{seed}", overrides, seed, args.steps, args.extra)
                         for seed in args.seeds]
    first = next(iter(results.values()))[0]
    rows = ["| method | held-out win-rate, mean (std) | vs top anchors | judge calls in training |", "|---|---|---|---|",
            f"| Base (untrained) | {first['start']['winrate']:.1f} | {first['start'].get('winrate/top', float('nan')):.1f}"
            " | 0 |"]
    for name, runs in results.items():
        rows.append(f"| {name} | {mean_std([r['latest']['winrate'] for r in runs])} | "
                    f"{mean_std([r['latest'].get('winrate/top', float('nan')) for r in runs])} | "
                    f"{np.mean([r['judge_calls'] for r in runs]):.0f} |")
    judge = first["judge"]
    text = "\n".join(rows) + (f"\n\n{len(args.seeds)} seeds, {args.steps} steps; evaluation judge: {judge['kind']} "
                              f"({judge['model']}), clean\n")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    (args.out / "results.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
