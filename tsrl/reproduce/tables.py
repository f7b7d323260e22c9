"""`tsrl-reproduce`'s tables and plots of finished runs: the all-tier and top-tier win-rates beside a headline,
the two noise-robustness metrics (performance retained = noisy ÷ clean held-out score, TSRL §4.4–4.5's measure
for TSRL; gain kept = (noisy − base) ÷ (clean − base), §4.5's measure for the baselines), adaptive routing's
shares, and the plots (held-out curves, the metric against each setting, both noise metrics against p,
zero-variance groups, self-bootstrap rebuilds).
Records in, markdown or PNG files out; tsrl/reproduce/__init__.py collects the runs and writes table.md."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

SEED = "seed"
NOISE_AXIS = "judge.flip_prob"


def mean_std(values: list[float]) -> str:
    if not values:
        return "—"
    std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    return f"{np.mean(values):.1f} ({std:.1f})" + ("" if len(values) > 1 else " n=1")


def interval(values: list[float]) -> str:
    """mean [lo, hi]: a 95 % t-interval over the values, seeds as a rule (one value: the value alone)."""
    mean = float(np.mean(values))
    if len(values) < 2:
        return f"{mean:.1f} (n=1)"
    half = float(stats.t.ppf(0.975, len(values) - 1)) * float(np.std(values, ddof=1)) / math.sqrt(len(values))
    return f"{mean:.1f} [{mean - half:.1f}, {mean + half:.1f}]"


SIDE_METRICS = {
    "winrate_all": "against every tier of the reference anchors",
    "winrate_top": "against the top tier of the reference anchors",
}


def side_tables(runs: list[dict], rows: list[str], columns: list[tuple], cell: dict, key: str, label) -> str:
    """The all-tier and top-tier held-out win-rates beside the headline (TSRL's reference set is a task's choice:
    tsrl.evaluation.REFERENCE_SETS), in the headline table's layout; a metric the headline already is is skipped."""
    text = ""
    for name, what in SIDE_METRICS.items():
        if not all(name in r["evals"]["latest"] for r in runs) or all(
            r["evals"]["latest"][name] == r["evals"]["latest"][key] for r in runs
        ):
            continue
        lines = [
            f"| | {' | '.join(label(c) for c in columns)} |",
            "|---" * (len(columns) + 1) + "|",
            "| Base (step 0) | "
            + " | ".join(f"{np.mean([r['evals']['start'][name] for r in runs]):.1f}" for _ in columns)
            + " |",
        ]
        for m in rows:
            lines.append(
                f"| {m} | "
                + " | ".join(mean_std([r["evals"]["latest"][name] for r in cell.get((m, c), [])]) for c in columns)
                + " |"
            )
        text += f"\nHeld-out {name} ({what}):\n\n" + "\n".join(lines) + "\n"
    return text


def _sortable(value: str) -> tuple:
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


NOISE_METRICS = {
    "performance_retained": "Performance retained (TSRL's measure for TSRL, §4.4/§4.5): mean held-out score at p ÷ "
    "mean held-out score at p = {clean}, over the seeds both cells have",
    "gain_kept": "Gain kept (TSRL's measure for the baselines, §4.5): (mean score at p − mean base) ÷ "
    "(mean score at p = {clean} − mean base) over the seeds both cells have, base = the step-0 score",
}
"""The two noise-robustness metrics, by key (table.csv, results.json) and label (table.md, plots)."""


MIN_GAIN = 1.0
"""Points of held-out gain over the start below which a clean cell's gain kept is undefined (noise_fractions)."""


SAME_BASE = 1e-9
"""Step-0 scores closer than this are one starting policy (mixed_bases)."""


def mixed_bases(cells: dict[str, list[dict]]) -> str:
    """'' when every run of the cells a ratio pairs started from one policy (step-0 scores, `start`, equal to
    SAME_BASE, and every other step-0 score, `start_scores`, equal); else a line naming each cell's Bases and
    machines (`machine`, tsrl.reproduce.runs.machine_of), the step-0 scores that differ, and saying the ratio is
    withheld. The tiny policy's build is deterministic on one machine but follows the CPU's kernels, so runs of one
    recipe from two machines may start from two policies, and a ratio of their scores would compare those policies
    rather than the noise."""
    runs = [r for group in cells.values() for r in group]
    if one_policy(runs):
        return ""
    said = "; ".join(
        f"{name}: Base {', '.join(sorted({format(r['start'], '.6g') for r in group}))} on "
        + ", ".join(sorted({r.get("machine") or "an unrecorded machine" for r in group}))
        for name, group in cells.items()
    )
    return (
        f"Not compared: {' and '.join(cells)} did not start from the same policy ({said}; {score_differences(runs)}); "
        "re-run the cells on one machine (or from the same policy) to compare them."
    )


def one_policy(runs: list[dict]) -> bool:
    """Whether the runs started from one policy: equal headline Bases and equal step-0 scores (records written
    without `start_scores` are compared by their Bases alone)."""
    starts = [r["start"] for r in runs]
    scores = {r.get("start_scores") for r in runs} - {None}
    return not starts or (max(starts) - min(starts) <= SAME_BASE and len(scores) <= 1)


def score_differences(runs: list[dict]) -> str:
    """The step-0 scores on which the runs disagree, each with its distinct values, highest first ("step-0
    winrate_top 11.5 against 6.2")."""
    values: dict[str, set[float]] = defaultdict(set)
    for r in runs:
        for metric, value in json.loads(r.get("start_scores") or "{}").items():
            values[metric].add(value)
    differ = [
        f"{metric} {' against '.join(format(v, '.3g') for v in sorted(seen, reverse=True))}"
        for metric, seen in sorted(values.items())
        if len(seen) > 1
    ]
    return "step-0 " + ", ".join(differ) if differ else "step-0 scores differ"


def noise_pairs(records: list[dict], row_axis: str) -> list[tuple[str, float, list[dict], list[dict], dict]]:
    """Per method and flip probability p: the records at p and at the method's smallest p, over the seeds both
    cells have (a cell run on seed 0 alone is paired with seed 0's clean run), as (method, p, noisy, clean,
    {cell name: its records}, for mixed_bases). Records without a seed are one seed."""
    runs: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for r in records:
        runs[(r[row_axis], float(r[NOISE_AXIS]))][str(r.get("seed", ""))] = r
    flips = sorted({p for _, p in runs})
    pairs = []
    for m in dict.fromkeys(r[row_axis] for r in records):
        clean = runs.get((m, flips[0]), {})
        for p in flips:
            seeds = [s for s in runs.get((m, p), {}) if s in clean]
            noisy, paired = [runs[(m, p)][s] for s in seeds], [clean[s] for s in seeds]
            cells = {f"{row_axis}={m}, {NOISE_AXIS}={p}": noisy, f"{row_axis}={m}, {NOISE_AXIS}={flips[0]}": paired}
            pairs.append((m, p, noisy, paired, cells))
    return pairs


def noise_fractions(records: list[dict], row_axis: str) -> dict[str, dict[str, dict[float, float]]]:
    """Per metric (NOISE_METRICS), method and flip probability p, against the method's runs at the smallest p of
    the same seeds (noise_pairs): performance retained = mean final at p ÷ mean final clean; gain kept = mean
    (final − start) at p ÷ the same clean, left out (undefined) where the clean runs gained less than MIN_GAIN
    points over their start, whose ratio would only say how near zero that gain is. Both are left out where the
    paired runs did not start from one policy (mixed_bases; noise_table says which). Pure: records in, fractions
    out."""
    out: dict[str, dict[str, dict[float, float]]] = {name: {} for name in NOISE_METRICS}
    for m, p, noisy, clean, cells in noise_pairs(records, row_axis):
        by_metric = [out[name].setdefault(m, {}) for name in ("performance_retained", "gain_kept")]
        if not noisy or mixed_bases(cells):
            continue
        for index, by_flip in enumerate(by_metric):
            denominator = float(np.mean([r["final"] - index * r["start"] for r in clean]))
            if denominator and (index == 0 or denominator >= MIN_GAIN):
                by_flip[p] = float(np.mean([r["final"] - index * r["start"] for r in noisy])) / denominator
    return out


def noise_table(records: list[dict], row_axis: str) -> str:
    """With a judge-noise axis: both noise metrics for each method at each p, each under its label, and a line for
    each pair of cells that started from different policies (their ratios withheld)."""
    if not records or NOISE_AXIS not in records[0]:
        return ""
    flips = sorted({float(r[NOISE_AXIS]) for r in records})
    lines = []
    for name, by_method in noise_fractions(records, row_axis).items():
        lines += [
            "",
            NOISE_METRICS[name].format(clean=flips[0]) + ":",
            "",
            f"| {row_axis} | " + " | ".join(f"p = {p}" for p in flips) + " |",
            "|---" * (len(flips) + 1) + "|",
        ]
        for m, by_flip in by_method.items():
            lines.append(
                f"| {m} | " + " | ".join(f"{100 * by_flip[p]:.0f} %" if p in by_flip else "—" for p in flips) + " |"
            )
    withheld = [line for *_, cells in noise_pairs(records, row_axis) if (line := mixed_bases(cells))]
    return "\n".join(lines + ([""] + withheld if withheld else [])) + "\n"


def benchmark_cells(evals: dict, benchmarks: list[dict]) -> dict[str, float | None]:
    """One evaluation's Table 1 cells (Reasoning Arena: a run evaluated on several held-out benchmarks, task=stem):
    each benchmark's reported number under its label — its metric (pass ratio@n, pass@5), or its pass ratio@n where
    n samples cannot estimate that metric (pass@5 from 4), None where the evaluation did not reach it
    (trainer.eval.max_prompts) — and their average (None unless every benchmark has a number)."""
    cells = {
        b["label"]: evals.get(f"{b['key']}/{b['metric']}", evals.get(f"{b['key']}/pass_ratio")) for b in benchmarks
    }
    values = list(cells.values())
    return {**cells, "average": None if None in values else float(np.mean(values))}


def mean_of(values: list[float | None]) -> str:
    """The mean of the values there are, to one decimal; — when there are none."""
    present = [v for v in values if v is not None]
    return f"{np.mean(present):.1f}" if present else "—"


def estimable(metric: str, samples: int) -> bool:
    """Whether `samples` completions per problem estimate a benchmark's metric (pass@k needs k of them)."""
    return metric == "pass_ratio" or int(metric.removeprefix("pass@")) <= samples


def benchmark_table(records: list[dict], row_axis: str, benchmarks: list[dict], samples: int) -> str:
    """Reasoning Arena's Table 1 layout: one row per method, a column per benchmark and their average (each run's
    last evaluation, mean (std) over seeds; records carry benchmark_cells under `<label>` and `<label> (step 0)`),
    then the generations a step drew (fill/generations_per_step, mean over steps and seeds)."""
    if not benchmarks or not records:
        return ""
    labels = [b["label"] for b in benchmarks] + ["average"]
    lines = [
        "",
        f"Table 1 layout (held-out, n = {samples} samples per problem; mean (std) over seeds):",
        "",
        f"| {row_axis} | " + " | ".join(labels) + " | generations per step |",
        "|---" * (len(labels) + 2) + "|",
        "| Base (step 0) | "
        + " | ".join(mean_of([r[f"{label} (step 0)"] for r in records]) for label in labels)
        + " | — |",
    ]
    for m in dict.fromkeys(r[row_axis] for r in records):
        mine = [r for r in records if r[row_axis] == m]
        drawn = [r["generations_per_step"] for r in mine if r["generations_per_step"] is not None]
        lines.append(
            f"| {m} | "
            + " | ".join(mean_std([r[label] for r in mine if r[label] is not None]) for label in labels)
            + f" | {f'{np.mean(drawn):.0f}' if drawn else '—'} |"
        )
    said = "; ".join(
        f"{b['label']}: {b['metric'].replace('pass_ratio', f'pass ratio@{samples}')}"
        + ("" if estimable(b["metric"], samples) else f" needs {b['metric'][5:]} samples, pass ratio@{samples} shown")
        for b in benchmarks
    )
    return (
        "\n".join(lines) + f"\n\nNumbers: {said}. Generations per step: completions drawn per step, refills included.\n"
    )


def routing_table(records: list[dict], row_axis: str) -> str:
    """With adaptive routing in the grid, per method (mean over steps and seeds): the share of groups whose final
    rewards are all equal (no gradient; with batch filling, among the groups drawn and among those the update kept,
    which filling leaves with none), the share the verifier settled alone (no judge call), the samples per
    step that the tournament gave a signal although the verifier could not separate them (generations plain
    RLVR would have spent for nothing), and judge calls per run."""
    if not any(r["route_verifier_frac"] is not None for r in records):
        return ""

    def pct(values: list) -> str:
        values = [v for v in values if v is not None]
        return f"{100 * np.mean(values):.0f} %" if values else "—"

    filled = any(r.get("zero_var_drawn") is not None for r in records)
    zero_var = "zero-variance groups, drawn / after filling" if filled else "zero-variance groups"

    def zero_var_cell(mine: list[dict]) -> str:
        after = pct([r["zero_var_frac"] for r in mine])
        return f"{pct([r.get('zero_var_drawn') for r in mine])} / {after}" if filled else after

    lines = [
        "",
        "Routing (mean over steps and seeds):",
        "",
        f"| {row_axis} | {zero_var} | settled by the verifier | samples given a signal by the "
        "tournament, per step | judge calls per run |",
        "|---|---|---|---|---|",
    ]
    for m in dict.fromkeys(r[row_axis] for r in records):
        mine = [r for r in records if r[row_axis] == m]
        rescued = [r["signal_samples_per_step"] for r in mine if r["signal_samples_per_step"] is not None]
        lines.append(
            f"| {m} | {zero_var_cell(mine)} | "
            f"{pct([r['route_verifier_frac'] for r in mine])} | "
            f"{f'{np.mean(rescued):.1f}' if rescued else '—'} | {np.mean([r['judge_calls'] for r in mine]):.0f} |"
        )
    return "\n".join(lines) + "\n"


def plot(out: Path, runs: list[dict], records: list[dict], key: str, row_axis: str, col_axes: list[str]) -> None:
    """curves.png (held-out metric over steps, mean over seeds, one line per method and setting) and
    axis_<name>.png for every numeric axis (final metric against the axis value, one line per method); where the
    grid has them, self_bootstrap.png, zero_variance.png and noise_kept.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out / name, dpi=120)
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    draw_curves(ax, runs, key, row_axis, col_axes)
    save(fig, "curves.png")
    if any(r["refresh_steps"] for r in runs):  # TSRL §4.10: held-out curves with the ladder's rebuilds
        fig, ax = plt.subplots(figsize=(7, 4.5))
        draw_self_bootstrap(ax, runs, key, row_axis, col_axes)
        save(fig, "self_bootstrap.png")
    if any(r["route_verifier_frac"] is not None for r in runs):  # adaptive routing in the grid
        fig, ax = plt.subplots(figsize=(7, 4.5))
        draw_zero_variance(ax, runs, row_axis)
        save(fig, "zero_variance.png")
    for axis in col_axes:  # the final metric against each setting
        fig, ax = plt.subplots(figsize=(6, 4))
        draw_against_axis(ax, records, key, row_axis, axis)
        save(fig, f"axis_{axis.replace('.', '_')}.png")
    if records and NOISE_AXIS in records[0]:  # TSRL §4.4/§4.5: both noise metrics, per method
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        draw_noise_kept(axes, records, row_axis)
        save(fig, "noise_kept.png")


def draw_curves(ax: Any, runs: list[dict], key: str, row_axis: str, col_axes: list[str]) -> None:
    """The held-out metric over steps, mean over seeds, one line per method and setting."""
    curves: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        name = ", ".join([r["values"].get(row_axis, "?")] + [f"{a}={r['values'].get(a, '')}" for a in col_axes])
        for e in r["evals"]["history"]:
            curves[name][e["step"]].append(e[key])
    for name, by_step in curves.items():
        steps = sorted(by_step)
        ax.plot(steps, [np.mean(by_step[s]) for s in steps], marker="o", ms=3, label=name)
    ax.set(xlabel="step", ylabel=f"held-out {key}", title="training curves (mean over seeds)")
    ax.legend(fontsize=6)


def draw_self_bootstrap(ax: Any, runs: list[dict], key: str, row_axis: str, col_axes: list[str]) -> None:
    """Each run's held-out curve, dotted where its self-bootstrapped ladder was rebuilt."""
    for r in runs:
        history = r["evals"]["history"]
        (line,) = ax.plot(
            [e["step"] for e in history],
            [e[key] for e in history],
            marker="o",
            ms=3,
            label=", ".join(f"{a}={r['values'][a]}" for a in (row_axis, *col_axes, SEED) if a in r["values"]),
        )
        for step in r["refresh_steps"]:
            ax.axvline(step, color=line.get_color(), ls=":", lw=1)
    ax.set(xlabel="step (dotted: ladder rebuilt)", ylabel=f"held-out {key}", title="self-bootstrap iterations")
    ax.legend(fontsize=6)


def draw_zero_variance(ax: Any, runs: list[dict], row_axis: str) -> None:
    """The share of groups without a learning signal over steps, mean over a method's runs."""
    for m in dict.fromkeys(r["values"].get(row_axis, "?") for r in runs):
        by_step: dict[int, list[float]] = defaultdict(list)
        for r in runs:
            if r["values"].get(row_axis) == m:
                for step, frac in r["zero_var"]:
                    by_step[step].append(frac)
        steps = sorted(by_step)
        ax.plot(steps, [np.mean(by_step[s]) for s in steps], label=m)
    ax.set(xlabel="step", ylabel="zero-variance groups (share)", title="groups without a learning signal")
    ax.legend(fontsize=7)


def draw_against_axis(ax: Any, records: list[dict], key: str, row_axis: str, axis: str) -> None:
    """The final metric against one setting, a numeric axis to scale and any other in order, one line per method;
    a method without the setting (the rubric in the k sweep) as a horizontal line at its level."""
    values = sorted({r[axis] for r in records} - {""}, key=_sortable)
    numeric = all(_sortable(v)[0] == 0 for v in values)
    position = {v: float(v) if numeric else i for i, v in enumerate(values)}
    for m in dict.fromkeys(r[row_axis] for r in records):
        finals = {v: [r["final"] for r in records if r[row_axis] == m and r[axis] == v] for v in values}
        shown = [v for v in values if finals[v]]
        if not shown:
            line = [r["final"] for r in records if r[row_axis] == m and r[axis] == ""]
            ax.axhline(float(np.mean(line)), ls="--", lw=1, color="grey", label=f"{m} (no {axis})")
            continue
        ax.errorbar(
            [position[v] for v in shown],
            [np.mean(finals[v]) for v in shown],
            yerr=[np.std(finals[v]) for v in shown],
            marker="o",
            capsize=3,
            label=m,
        )
    if not numeric:
        ax.set_xticks(range(len(values)), values)
    ax.set(xlabel=axis, ylabel=f"held-out {key} (final)", title=f"{key} against {axis}")
    ax.legend(fontsize=7)


def draw_noise_kept(axes: Any, records: list[dict], row_axis: str) -> None:
    """Performance retained (TSRL's measure) and gain kept (the baselines') against the judge flip probability p,
    one line per method, on two panels."""
    for ax, (name, by_method) in zip(axes, noise_fractions(records, row_axis).items()):
        for m, frac in by_method.items():
            ax.plot(list(frac), [100 * f for f in frac.values()], marker="o", label=m)
        ax.axhline(80, color="grey", ls=":", lw=1)
        ax.set(
            xlabel="judge flip probability p",
            ylabel=f"{name.replace('_', ' ')} (%)",
            title="performance retained (TSRL's measure)"
            if name == "performance_retained"
            else "gain kept (the baselines' measure)",
        )
        ax.legend(fontsize=7)
