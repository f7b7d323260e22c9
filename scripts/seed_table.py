"""Every seed of a CPU-study grid beside its mean and an interval (docs/results.md states its verdicts from this).

For each method and judge-noise level p of a `tsrl-reproduce` grid folder: each seed's held-out win-rate at the
last evaluation, their mean and a 95 % t-interval over the seeds; each seed's performance retained (its score at p
÷ the same seed's at the grid's clean p; the headline, as TSRL §4.5 and `tsrl-reproduce`'s table compute it, is the
ratio of the means) and gain kept ((score − its Base) ÷ the same seed's clean gain); and the token entropy of the
last 10 steps. With a second folder (a weak-judge grid), its cells are set beside the first folder's clean cells
of the same method and seeds. Cells whose runs did not start from one policy (different step-0 scores: runs from
machines whose CPU kernels built different policies) get no ratios; a line below the table names them.

    python scripts/seed_table.py runs/reproduce/noise_cpu [runs/reproduce/weak_judge_cpu]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from tsrl.reproduce.runs import collect, headline_key, start_scores
from tsrl.reproduce.tables import MIN_GAIN, interval, mixed_bases, one_policy, score_differences

NOISE = "judge.flip_prob"


def entropy_tail(run_dir: str, last: int = 10) -> float:
    """Mean token entropy of the run's last `last` training steps."""
    rows = [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
    values = [r["train/entropy"] for r in rows if "train/entropy" in r][-last:]
    return float(np.mean(values)) if values else float("nan")


def cells(folder: Path) -> dict[tuple[str, float], dict[int, dict]]:
    """(method, p) → seed → {final, start, entropy, machine} for every finished run of the folder."""
    out: dict[tuple[str, float], dict[int, dict]] = defaultdict(dict)
    for run in collect(folder):
        if not run["done"]:
            continue
        values, evals = run["values"], run["evals"]
        key = headline_key(evals)
        cell = (values.get("method", ""), float(values.get(NOISE, 0.0)))
        out[cell][int(values.get("seed", 0))] = {
            "final": evals["latest"][key],
            "start": evals["start"][key],
            "start_scores": start_scores(evals["start"]),
            "entropy": entropy_tail(run["dir"]),
            "machine": run["machine"],
        }
    return out


def ratios(noisy: dict[int, dict], clean: dict[int, dict]) -> tuple[list[int], list[float], list[float | None]]:
    """The seeds both cells ran, each seed's performance retained and gain kept (%; None where that seed's clean
    run gained nothing over Base, so no share of its gain is defined)."""
    seeds = sorted(set(noisy) & set(clean))
    kept = [100 * noisy[s]["final"] / clean[s]["final"] for s in seeds]
    gains = [clean[s]["final"] - clean[s]["start"] for s in seeds]
    gain = [100 * (noisy[s]["final"] - noisy[s]["start"]) / g if g > 0 else None for s, g in zip(seeds, gains)]
    return seeds, kept, gain


def gain_kept(noisy: dict[int, dict], clean: dict[int, dict], seeds: list[int]) -> str:
    """The paper's gain kept over the shared seeds, (mean noisy − Base) ÷ (mean clean − Base), where the clean
    cell gained at least MIN_GAIN points over Base (tsrl-reproduce's rule); else undefined."""
    clean_gain = float(np.mean([clean[s]["final"] - clean[s]["start"] for s in seeds]))
    if clean_gain < MIN_GAIN:
        return f"undefined (clean gain {clean_gain:+.1f})"
    return f"{100 * float(np.mean([noisy[s]['final'] - noisy[s]['start'] for s in seeds])) / clean_gain:.0f} %"


def row(name: str, runs: dict[int, dict], clean: dict[int, dict] | None, clean_name: str = "") -> tuple[str, str]:
    """A cell's table row and, where it and its clean cell (`clean`, named `clean_name`) did not start from one
    policy, the line saying so (mixed_bases; the row then has no ratios)."""
    seeds = sorted(runs)
    finals = [runs[s]["final"] for s in seeds]
    each = ", ".join(f"{runs[s]['final']:.1f}" for s in seeds)
    text = f"| {name} | {interval(finals)} | {each} | {np.mean([runs[s]['entropy'] for s in seeds]):.2f} |"
    if clean is None:
        return text + " — | — |", ""
    shared = sorted(set(runs) & set(clean))
    mixed = mixed_bases({name: [runs[s] for s in shared], clean_name: [clean[s] for s in shared]})
    if mixed:
        return text + " not compared (different Bases) | not compared |", mixed
    shared, kept, gain = ratios(runs, clean)
    headline = 100 * np.mean([runs[s]["final"] for s in shared]) / np.mean([clean[s]["final"] for s in shared])
    defined = [g for g in gain if g is not None]
    each = ", ".join("—" if g is None else f"{g:.0f}" for g in gain)
    return text + (
        f" {headline:.0f} % ({', '.join(f'{k:.0f}' for k in kept)}; per-seed {interval(kept)}) | "
        f"{gain_kept(runs, clean, shared)} ({each}{'; ' + interval(defined) if len(defined) > 1 else ''}) |"
    ), ""


def table(noise: dict, weak: dict | None) -> str:
    lines = [
        "| cell | win-rate, mean [95 % t-interval] | per seed | token entropy, last 10 steps | performance "
        "retained (per seed) | gain kept (per seed) |",
        "|---|---|---|---|---|---|",
    ]
    notes = []
    for method in dict.fromkeys(m for m, _ in sorted(noise, key=lambda c: (c[0], c[1]))):
        flips = sorted(p for m, p in noise if m == method)
        clean, clean_name = noise.get((method, flips[0])), f"{method}, p = {flips[0]:g}"
        shown = [(f"{method}, p = {p:g}", noise[(method, p)], None if p == flips[0] else clean) for p in flips]
        if weak is not None and (method, 0.0) in weak:
            shown.append((f"{method}, weak judge", weak[(method, 0.0)], clean))
        for name, runs, paired in shown:
            text, note = row(name, runs, paired, clean_name)
            lines.append(text)
            notes += [note] if note else []
    return "\n".join(lines + ([""] + notes if notes else []))


def base_line(noise: dict) -> str:
    """The Base line: the step-0 score of the grid's runs, or, where the runs started from different policies
    (tsrl.reproduce.tables.one_policy), each Base with its runs and machines, and the step-0 scores that differ,
    instead of their mean."""
    runs = [run for seeds in noise.values() for run in seeds.values()]
    starts = [run["start"] for run in runs]
    if one_policy(runs):
        return f"Base (step 0, the untrained policy): {np.mean(starts):.1f} over {len(starts)} runs"
    policies: dict[str, list[dict]] = defaultdict(list)
    for run in runs:
        policies[run["start_scores"]].append(run)
    said = "; ".join(
        f"{group[0]['start']:.6g} ({len(group)} runs, on "
        + ", ".join(sorted({r["machine"] or "an unrecorded machine" for r in group}))
        + ")"
        for group in sorted(policies.values(), key=lambda g: g[0]["start"])
    )
    return (
        f"Base (step 0, the untrained policy): the runs did not start from one policy, Bases {said}, "
        f"{score_differences(runs)}; no mean. Re-run the cells on one machine (or from the same policy) to compare "
        "them."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("noise", type=Path, help="a noise grid folder (tsrl-reproduce paper/tsrl_noise --out …)")
    parser.add_argument("weak", type=Path, nargs="?", help="a weak-judge grid folder, compared with the clean cells")
    args = parser.parse_args()
    noise = cells(args.noise)
    print(table(noise, cells(args.weak) if args.weak else None))
    print("\n" + base_line(noise))


if __name__ == "__main__":
    main()
