"""TSRL §4.5's judge-noise sweep on the CPU demo: how much of the clean-judge gain survives a noisy judge?

Trains `recipes/cpu_demo` (what `make train` runs) once per (flip probability p, seed) with
judge.flip_prob=p — each comparison's verdict flipped with probability p (judge.noise_scope=comparison, the
paper's injection) — and measures every run with the same *clean* evaluation judge (the training judge with
noise, position bias and budget off; eval.json names it). For each p:

    gain(p, seed)  = held-out win-rate at the end − at the start (points)
    kept(p)        = mean over seeds of gain(p, seed) / mean over seeds of gain(0, seed)

The paper reports that TSRL "retains over 80 % of its clean-judge performance" under injected noise.

    python scripts/noise_sweep.py [--flips 0 0.1 0.2 0.3] [--seeds 0 1 2] [--out runs/noise_sweep] [-- extra overrides]
Each run goes to <out>/p<p>_s<seed>; a finished run (eval.json at the last step) is reused, so the sweep can
be stopped and started again. Writes results.json and results.md into --out and prints the table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

TRAIN = str(Path(sys.executable).parent / "tsrl-train")


def finished(run_dir: Path, steps: int) -> dict | None:
    path = run_dir / "eval.json"
    if not path.is_file():
        return None
    summary = json.loads(path.read_text())
    return summary if summary["latest"]["step"] == steps else None


def train(run_dir: Path, flip: float, seed: int, steps: int, extra: list[str]) -> dict:
    """One training run (reused when already finished); returns its eval.json."""
    done = finished(run_dir, steps)
    if done is None:
        args = [
            TRAIN,
            "recipes=cpu_demo",
            f"judge.flip_prob={flip}",
            f"seed={seed}",
            f"trainer.max_steps={steps}",
            f"run_dir={run_dir}",
            *extra,
        ]
        start = time.perf_counter()
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        print(f"  p={flip} seed={seed}: {time.perf_counter() - start:.0f} s", flush=True)
        done = finished(run_dir, steps)
    return done


def table(flips: list[float], seeds: list[int], results: dict) -> tuple[str, dict]:
    gains = {
        p: [results[(p, s)]["latest"]["winrate"] - results[(p, s)]["start"]["winrate"] for s in seeds] for p in flips
    }
    clean = float(np.mean(gains[flips[0]]))
    rows = [
        "| judge flip p | " + " | ".join(f"gain, seed {s}" for s in seeds) + " | mean gain | kept of clean |",
        "|---" * (len(seeds) + 3) + "|",
    ]
    summary = {}
    for p in flips:
        mean = float(np.mean(gains[p]))
        summary[str(p)] = {"gains": gains[p], "mean_gain": mean, "kept": mean / clean if clean else float("nan")}
        rows.append(
            f"| {p} | "
            + " | ".join(f"{g:+.1f}" for g in gains[p])
            + f" | {mean:+.1f} | {100 * summary[str(p)]['kept']:.0f} % |"
        )
    return "\n".join(rows), summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--flips", type=float, nargs="+", default=[0.0, 0.1, 0.2, 0.3])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("runs/noise_sweep"))
    parser.add_argument("extra", nargs="*", help="further tsrl-train overrides (after --)")
    args = parser.parse_args()
    if args.flips[0] != 0.0:
        parser.error("the first --flips value must be 0: it is the clean-judge reference")
    results = {
        (p, s): train(args.out / f"p{p}_s{s}", p, s, args.steps, args.extra) for p in args.flips for s in args.seeds
    }
    judges = {json.dumps(r["judge"], sort_keys=True) for r in results.values()}
    if len(judges) != 1:
        raise SystemExit(f"runs were measured by different evaluation judges: {sorted(judges)}")
    markdown, summary = table(args.flips, args.seeds, results)
    start = sorted({round(r["start"]["winrate"], 3) for r in results.values()})
    text = (
        f"{markdown}\n\nEvaluation judge (every run): {next(iter(results.values()))['judge']['kind']}, "
        f"clean; held-out win-rate at the start: {', '.join(f'{w:.1f} %' for w in start)}.\n"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text(text)
    (args.out / "results.json").write_text(
        json.dumps({"eval_judge": next(iter(results.values()))["judge"], "per_flip": summary}, indent=1)
    )
    print(text)


if __name__ == "__main__":
    main()
