"""`tsrl-reproduce`: run a paper recipe's grid through Hydra multirun, then write its tables and plots.

A paper recipe (recipes/paper/<name>.yaml) is a tsrl-train recipe whose `hydra.sweeper.params` hold the grid:
methods (configs/method/), tasks, settings and seeds. This command only assembles one `tsrl-train -m` call:

    tsrl-train -m recipes=paper/<name> hydra.sweep.dir=<out> hydra.sweep.subdir=<the run's grid values>
               trainer.checkpoint.resume=auto [--smoke overrides] [your overrides]

so Hydra's launcher schedules the runs: one after another by default, a few at once with
`hydra/launcher=joblib hydra.launcher.n_jobs=2`, as SLURM jobs with `hydra/launcher=slurm` (configs/hydra/launcher).
`--accelerate CONFIG` starts the whole sweep under `accelerate launch` (every process walks the same grid, so each
run is a multi-process run). A grid that was interrupted is resumed by running the same command: a finished run
(done.json under the same limits) is skipped without building anything, an unfinished one continues from its
newest checkpoint.

Aggregation (also alone, `--aggregate-only`) reads every run's .hydra/overrides.yaml and eval.json under <out>:
table.md and table.csv with one row per method and one column per setting (mean (std) over seeds of the held-out
headline number at the run's last evaluation of each finished run; a Base row from the step-0 evaluations),
judge calls per run, the two noise-robustness metrics under judge noise (performance retained = noisy ÷ clean
held-out score, TSRL's headline; gain kept = (noisy − base) ÷ (clean − base), ours), adaptive routing's shares,
and plots: held-out curves, the metric against each setting (k scaling, noise, anchor selection; a method without
the setting, as the rubric in the k sweep, is a horizontal line), both noise metrics against p, zero-variance
groups over training, and the self-bootstrapped ladder's rebuilds on its held-out curve.

A method that has no key of an axis (the rubric has no reward.k) runs once, without that axis: the grid is run as
one multirun per set of axes its methods share.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

SEED = "seed"
METHOD = "method"
# --cpu: the CPU stand-ins for a GPU recipe (the tiny policy, the simulated judge, HF generation) at the sizes of
# `make train` (recipes/cpu_demo); --smoke: the same stand-ins for a few steps.
CPU = ["model=tiny", "judge=rubric_sim", "judge@eval_judge=rubric_sim", "generator=hf", "trainer.max_steps=100",
       "trainer.prompts_per_step=8", "trainer.group_size=8", "trainer.lr=5e-4", "trainer.micro_batch_size=32",
       "trainer.eval.every=20", "trainer.eval.samples=4", "trainer.checkpoint.every=0", "generator.max_new_tokens=48",
       "algo.mask_truncated=true"]
SMOKE = list({o.split("=")[0]: o for o in [
    *CPU, "trainer.max_steps=2", "trainer.prompts_per_step=2", "trainer.group_size=4", "trainer.micro_batch_size=8",
    "trainer.eval.every=0", "trainer.eval.samples=1", "trainer.eval.max_prompts=2", "generator.max_new_tokens=12",
    "task.max_prompts=4"]}.values())  # each key once, the smoke value
SMOKE_DROPS = ("model", "judge.model", "eval_judge.", "task.anchors_file")  # axes the CPU stand-ins replace
NOISE_AXIS = "judge.flip_prob"


def grid_of(recipe: str, overrides: list[str]) -> dict[str, list[str]]:
    """The recipe's sweep: axis → values, as the composed config's hydra.sweeper.params state them."""
    from hydra import compose, initialize_config_module

    from tsrl.cli import CONFIG_PACKAGE

    with initialize_config_module(CONFIG_PACKAGE, version_base="1.3"):
        cfg = compose("config", overrides=[f"recipes={recipe}", *overrides], return_hydra_config=True)
    params = cfg.hydra.sweeper.params or {}
    if not params:
        raise SystemExit(f"tsrl-reproduce: error: recipes/{recipe}.yaml has no hydra.sweeper.params grid; "
                         "a paper recipe lists its methods, settings and seeds there (see recipes/paper/).")
    return {str(axis): [v.strip() for v in str(values).split(",")] for axis, values in params.items()}


def cpu_grid(grid: dict[str, list[str]]) -> dict[str, list[str]]:
    """The grid without the axes the CPU stand-ins replace (policies, judges, anchor files)."""
    return {axis: values for axis, values in grid.items() if not axis.startswith(SMOKE_DROPS)}


def smoke_grid(grid: dict[str, list[str]]) -> dict[str, list[str]]:
    """A CI-sized grid: the first seed, at most two values of every other axis, no axis the CPU stand-ins replace."""
    return {axis: values[:1] if axis == SEED else values[:2] for axis, values in cpu_grid(grid).items()}


def not_sweeps(overrides: list[str]) -> list[str]:
    """The overrides that set one value (`a=1,2` is a sweep; `a=[1,2]` is one list value)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    return [text for text, o in zip(overrides, parsed) if not o.is_sweep_override()]


def split_overrides(grid: dict[str, list[str]], overrides: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """An override of a grid axis (`reward.k=1,2,3` or `seed=0`) replaces that axis; the rest apply to every run."""
    grid, rest = dict(grid), []
    for override in overrides:
        key, _, value = override.partition("=")
        if key in grid and value:
            grid[key] = value.split(",")
        else:
            rest.append(override)
    return grid, rest


def method_grids(recipe: str, grid: dict[str, list[str]], overrides: list[str]) -> list[dict[str, list[str]]]:
    """The grid split so that each method only gets the axes its composed config has (the rubric has no reward.k:
    its runs have no k): one grid per distinct set of axes, methods in the recipe's order."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from tsrl.cli import CONFIG_PACKAGE

    if METHOD not in grid:
        return [grid]
    missing = object()
    grids: dict[tuple[str, ...], dict[str, list[str]]] = {}
    with initialize_config_module(CONFIG_PACKAGE, version_base="1.3"):
        for method in grid[METHOD]:
            cfg = compose("config", overrides=[f"recipes={recipe}", *overrides, f"method={method}"])
            axes = tuple(a for a in grid if a == METHOD or OmegaConf.select(cfg, a, default=missing) is not missing)
            grids.setdefault(axes, {a: ([] if a == METHOD else grid[a]) for a in axes})[METHOD].append(method)
    return list(grids.values())


def command(recipe: str, out: Path, grid: dict[str, list[str]], fixed: list[str], accelerate: str | None) -> list[str]:
    """The one tsrl-train multirun call: the grid given explicitly in place of the recipe's (so --smoke and
    overrides can narrow it), run directories named by the grid values alone, resume=auto."""
    exclude = sorted({o.split("=", 1)[0].lstrip("+~") for o in fixed} | {"trainer.checkpoint.resume", "recipes"})
    bin_dir = Path(sys.executable).parent
    head = ([str(bin_dir / "accelerate"), "launch", "--config_file", accelerate, "-m", "tsrl.cli"] if accelerate
            else [str(bin_dir / "tsrl-train")])
    return [*head, "-m", f"recipes={recipe}", f"hydra.sweep.dir={out}", "hydra.sweep.subdir=${hydra.job.override_dirname}",
            f"hydra.job.config.override_dirname.exclude_keys=[{','.join(exclude)}]",
            "hydra.sweeper.params=null",  # the grid is given below, axis by axis (--smoke and overrides narrow it)
            "trainer.checkpoint.resume=auto", *fixed, *(f"{axis}={','.join(values)}" for axis, values in grid.items())]


def collect(out: Path) -> list[dict[str, Any]]:
    """One record per run under `out` that has an eval.json: its grid values, evaluations and judge calls."""
    import yaml

    runs = []
    for overrides_file in sorted(out.rglob(".hydra/overrides.yaml")):
        run_dir = overrides_file.parent.parent
        if not (run_dir / "eval.json").is_file():
            continue
        values = dict(o.split("=", 1) for o in yaml.safe_load(overrides_file.read_text()) if "=" in o)
        evals = json.loads((run_dir / "eval.json").read_text())
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()] \
            if (run_dir / "metrics.jsonl").is_file() else []
        config = json.loads((run_dir / "config.json").read_text()) if (run_dir / "config.json").is_file() else {}
        runs.append({"dir": str(run_dir), "values": values, "evals": evals, "done": (run_dir / "done.json").is_file(),
                     "judge_calls": sum(r.get("judge/calls", 0.0) for r in rows), "steps": len(rows),
                     "group_size": config.get("trainer", {}).get("group_size"),
                     "zero_var": [(r["step"], r["reward/zero_var_frac"]) for r in rows if "reward/zero_var_frac" in r],
                     "refresh_steps": [b["step"] for a, b in zip([{}] + rows, rows)  # self_bootstrap's ladder rebuilds
                                       if b.get("bootstrap/refreshes", 0) > a.get("bootstrap/refreshes", 0)],
                     "zero_var_frac": mean_metric(rows, "reward/zero_var_frac"),
                     "route_verifier_frac": mean_metric(rows, "route/verifier_frac"),
                     "tournament_groups": mean_metric(rows, "route/tournament")})
    return runs


def mean_metric(rows: list[dict], name: str) -> float | None:
    """A metric's mean over the steps that log it (None when none does)."""
    values = [r[name] for r in rows if r.get(name) is not None]
    return float(np.mean(values)) if values else None


def headline_key(evals: dict) -> str:
    """The task's headline number in an eval.json (tsrl.evaluation.HEADLINE: win-rate or pass ratio)."""
    from tsrl.evaluation import HEADLINE

    return next(key for key, _ in HEADLINE.values() if key in evals["latest"])


def mean_std(values: list[float]) -> str:
    if not values:
        return "—"
    std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    return f"{np.mean(values):.1f} ({std:.1f})" + ("" if len(values) > 1 else " n=1")


def aggregate(out: Path, grid: dict[str, list[str]]) -> str:
    """table.md, table.csv, results.json and plots in `out`; returns the markdown."""
    every = [r for r in collect(out) if all(r["values"].get(a) in v for a, v in grid.items() if a in r["values"])]
    runs = [r for r in every if r["done"]]  # a run still going (or stopped) has a partial eval.json: left out
    if not runs:
        raise SystemExit(f"tsrl-reproduce: error: no finished run under {out} (no done.json beside an eval.json "
                         "and a .hydra/overrides.yaml); run the grid first.")
    key = headline_key(runs[0]["evals"])
    row_axis = METHOD if METHOD in grid else next(a for a in grid if a != SEED)
    col_axes = [a for a in grid if a not in (row_axis, SEED) and len(grid[a]) > 1]
    fixed_axes = {a: grid[a][0] for a in grid if a not in (row_axis, SEED) and len(grid[a]) == 1}

    def column(run: dict) -> tuple:
        return tuple(run["values"].get(a, "") for a in col_axes)

    columns = sorted({column(r) for r in runs}, key=lambda c: [_sortable(v) for v in c])
    rows_order = [m for m in grid[row_axis] if any(r["values"].get(row_axis) == m for r in runs)]
    cell: dict[tuple, list[dict]] = defaultdict(list)
    for r in runs:
        cell[(r["values"].get(row_axis), column(r))].append(r)

    def label(col: tuple) -> str:
        return ", ".join(f"{a}={v or '—'}" for a, v in zip(col_axes, col)) or key  # —: a method without the axis

    header = f"| {row_axis} | " + " | ".join(label(c) for c in columns) + " | judge calls per run | runs |"
    lines = [header, "|---" * (len(columns) + 3) + "|"]
    base = [np.mean([r["evals"]["start"][key] for r in runs if column(r) == c] or [np.nan]) for c in columns]
    lines.append("| Base (step 0) | " + " | ".join(f"{b:.1f}" for b in base) + " | 0 | — |")
    records = []
    for m in rows_order:
        finals, calls, count = [], [], 0
        for c in columns:
            group = cell.get((m, c), [])
            count += len(group)
            finals.append(mean_std([r["evals"]["latest"][key] for r in group]))
            calls += [r["judge_calls"] for r in group]
            records += [{row_axis: m, **fixed_axes, **dict(zip(col_axes, c)), SEED: r["values"].get(SEED, ""),
                         "start": r["evals"]["start"][key], "final": r["evals"]["latest"][key],
                         "final_step": r["evals"]["latest"]["step"], "judge_calls": r["judge_calls"],
                         "zero_var_frac": r["zero_var_frac"], "route_verifier_frac": r["route_verifier_frac"],
                         "signal_samples_per_step": None if r["tournament_groups"] is None or not r["group_size"]
                         else r["tournament_groups"] * r["group_size"], "run_dir": r["dir"]} for r in group]
        lines.append(f"| {m} | " + " | ".join(finals) + f" | {np.mean(calls):.0f} | {count} |")
    judge = runs[0]["evals"].get("judge", {})
    setting = "".join(f"; {a}={v}" for a, v in fixed_axes.items())
    text = (f"Held-out {key} at each run's last evaluation, mean (std) over seeds{setting}; evaluation judge: "
            f"{judge.get('kind', '?')} ({judge.get('model', '?')}), clean.\n\n" + "\n".join(lines) + "\n")
    unfinished = [r["dir"] for r in every if not r["done"]]
    if unfinished:
        text += (f"\n{len(unfinished)} unfinished run(s) left out (still running, or stopped: run the same command "
                 f"to resume): {', '.join(Path(d).name for d in unfinished)}\n")
    text += side_tables(runs, rows_order, columns, cell, key, label) + noise_table(records, row_axis)
    text += routing_table(records, row_axis)
    noise = noise_fractions(records, row_axis) if NOISE_AXIS in grid else {}
    for r in records:  # each run's row carries its cell's two noise metrics
        for name, by_method in noise.items():
            r[name] = by_method.get(r[row_axis], {}).get(float(r[NOISE_AXIS]))
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(text)
    with (out / "table.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    (out / "results.json").write_text(json.dumps({"metric": key, "grid": grid, "runs": records, "noise": {
        name: {m: {str(p): v for p, v in by_flip.items()} for m, by_flip in by_method.items()}
        for name, by_method in noise.items()}}, indent=1))
    plot(out, runs, records, key, row_axis, col_axes)
    return text


SIDE_METRICS = {"winrate_all": "against every tier of the reference anchors",
                "winrate_top": "against the top tier of the reference anchors"}


def side_tables(runs: list[dict], rows: list[str], columns: list[tuple], cell: dict, key: str, label) -> str:
    """The all-tier and top-tier held-out win-rates beside the headline (TSRL's reference set is a task's choice:
    tsrl.evaluation.REFERENCE_SETS), in the headline table's layout; a metric the headline already is is skipped."""
    text = ""
    for name, what in SIDE_METRICS.items():
        if not all(name in r["evals"]["latest"] for r in runs) or all(
                r["evals"]["latest"][name] == r["evals"]["latest"][key] for r in runs):
            continue
        lines = [f"| | {' | '.join(label(c) for c in columns)} |", "|---" * (len(columns) + 1) + "|",
                 "| Base (step 0) | " + " | ".join(f"{np.mean([r['evals']['start'][name] for r in runs]):.1f}"
                                                  for _ in columns) + " |"]
        for m in rows:
            lines.append(f"| {m} | " + " | ".join(
                mean_std([r["evals"]["latest"][name] for r in cell.get((m, c), [])]) for c in columns) + " |")
        text += f"\nHeld-out {name} ({what}):\n\n" + "\n".join(lines) + "\n"
    return text


def _sortable(value: str) -> tuple:
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


NOISE_METRICS = {
    "performance_retained": "Performance retained (TSRL's headline, §4.4/§4.5): mean held-out score at p ÷ mean "
                            "held-out score at p = {clean}",
    "gain_kept": "Gain kept (ours; the baselines' \"lose over 40 % of their gains\"): (mean score at p − mean base) ÷ "
                 "(mean score at p = {clean} − mean base), base = the step-0 score",
}
"""The two noise-robustness metrics, by key (table.csv, results.json) and label (table.md, plots)."""


def noise_fractions(records: list[dict], row_axis: str) -> dict[str, dict[str, dict[float, float]]]:
    """Per metric (NOISE_METRICS), method and flip probability p, against the method's runs at the smallest p:
    performance retained = mean final at p ÷ mean final clean; gain kept = mean (final − start) at p ÷ the same
    clean. Pure: records in, fractions out."""
    finals: dict[tuple, list[float]] = defaultdict(list)
    gains: dict[tuple, list[float]] = defaultdict(list)
    for r in records:
        cell = (r[row_axis], float(r[NOISE_AXIS]))
        finals[cell].append(r["final"])
        gains[cell].append(r["final"] - r["start"])
    flips = sorted({p for _, p in finals})
    out: dict[str, dict[str, dict[float, float]]] = {name: {} for name in NOISE_METRICS}
    for name, values in (("performance_retained", finals), ("gain_kept", gains)):
        for m in dict.fromkeys(r[row_axis] for r in records):
            clean = float(np.mean(values.get((m, flips[0]), [np.nan])))
            out[name][m] = {p: float(np.mean(values[(m, p)])) / clean for p in flips if (m, p) in values and clean}
    return out


def noise_table(records: list[dict], row_axis: str) -> str:
    """With a judge-noise axis: both noise metrics for each method at each p, each under its label."""
    if not records or NOISE_AXIS not in records[0]:
        return ""
    flips = sorted({float(r[NOISE_AXIS]) for r in records})
    lines = []
    for name, by_method in noise_fractions(records, row_axis).items():
        lines += ["", NOISE_METRICS[name].format(clean=flips[0]) + ":", "",
                  f"| {row_axis} | " + " | ".join(f"p = {p}" for p in flips) + " |", "|---" * (len(flips) + 1) + "|"]
        for m, by_flip in by_method.items():
            lines.append(f"| {m} | " + " | ".join(f"{100 * by_flip[p]:.0f} %" if p in by_flip else "—"
                                                  for p in flips) + " |")
    return "\n".join(lines) + "\n"


def routing_table(records: list[dict], row_axis: str) -> str:
    """With adaptive routing in the grid, per method (mean over steps and seeds): the share of groups whose final
    rewards are all equal (no gradient), the share the verifier settled alone (no judge call), the samples per
    step that the tournament gave a signal although the verifier could not separate them (generations plain
    RLVR would have spent for nothing), and judge calls per run."""
    if not any(r["route_verifier_frac"] is not None for r in records):
        return ""

    def pct(values: list) -> str:
        values = [v for v in values if v is not None]
        return f"{100 * np.mean(values):.0f} %" if values else "—"

    lines = ["", "Routing (mean over steps and seeds):", "",
             f"| {row_axis} | zero-variance groups | settled by the verifier | samples given a signal by the "
             "tournament, per step | judge calls per run |", "|---|---|---|---|---|"]
    for m in dict.fromkeys(r[row_axis] for r in records):
        mine = [r for r in records if r[row_axis] == m]
        rescued = [r["signal_samples_per_step"] for r in mine if r["signal_samples_per_step"] is not None]
        lines.append(f"| {m} | {pct([r['zero_var_frac'] for r in mine])} | "
                     f"{pct([r['route_verifier_frac'] for r in mine])} | "
                     f"{f'{np.mean(rescued):.1f}' if rescued else '—'} | {np.mean([r['judge_calls'] for r in mine]):.0f} |")
    return "\n".join(lines) + "\n"


def plot(out: Path, runs: list[dict], records: list[dict], key: str, row_axis: str, col_axes: list[str]) -> None:
    """curves.png (held-out metric over steps, mean over seeds, one line per method and setting) and
    axis_<name>.png for every numeric axis (final metric against the axis value, one line per method)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        name = ", ".join([r["values"].get(row_axis, "?")] + [f"{a}={r['values'].get(a, '')}" for a in col_axes])
        for e in r["evals"]["history"]:
            curves[name][e["step"]].append(e[key])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, by_step in curves.items():
        steps = sorted(by_step)
        ax.plot(steps, [np.mean(by_step[s]) for s in steps], marker="o", ms=3, label=name)
    ax.set(xlabel="step", ylabel=f"held-out {key}", title="training curves (mean over seeds)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=120)
    plt.close(fig)
    bootstrapped = [r for r in runs if r["refresh_steps"]]
    if bootstrapped:  # TSRL §4.10: held-out curves with the steps where the self-bootstrapped ladder was rebuilt
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for r in runs:
            history = r["evals"]["history"]
            line, = ax.plot([e["step"] for e in history], [e[key] for e in history], marker="o", ms=3,
                            label=", ".join(f"{a}={r['values'][a]}" for a in (row_axis, *col_axes, SEED)
                                            if a in r["values"]))
            for step in r["refresh_steps"]:
                ax.axvline(step, color=line.get_color(), ls=":", lw=1)
        ax.set(xlabel="step (dotted: ladder rebuilt)", ylabel=f"held-out {key}", title="self-bootstrap iterations")
        ax.legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(out / "self_bootstrap.png", dpi=120)
        plt.close(fig)
    if any(r["route_verifier_frac"] is not None for r in runs):  # adaptive routing in the grid
        fig, ax = plt.subplots(figsize=(7, 4.5))
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
        fig.tight_layout()
        fig.savefig(out / "zero_variance.png", dpi=120)
        plt.close(fig)
    for axis in col_axes:  # the final metric against each setting; a numeric axis to scale, any other in order
        values = sorted({r[axis] for r in records} - {""}, key=_sortable)
        numeric = all(_sortable(v)[0] == 0 for v in values)
        position = {v: float(v) if numeric else i for i, v in enumerate(values)}
        fig, ax = plt.subplots(figsize=(6, 4))
        for m in dict.fromkeys(r[row_axis] for r in records):
            finals = {v: [r["final"] for r in records if r[row_axis] == m and r[axis] == v] for v in values}
            shown = [v for v in values if finals[v]]
            if not shown:  # a method without this setting (the rubric in the k sweep): its level as a line
                line = [r["final"] for r in records if r[row_axis] == m and r[axis] == ""]
                ax.axhline(float(np.mean(line)), ls="--", lw=1, color="grey", label=f"{m} (no {axis})")
                continue
            ax.errorbar([position[v] for v in shown], [np.mean(finals[v]) for v in shown],
                        yerr=[np.std(finals[v]) for v in shown], marker="o", capsize=3, label=m)
        if not numeric:
            ax.set_xticks(range(len(values)), values)
        ax.set(xlabel=axis, ylabel=f"held-out {key} (final)", title=f"{key} against {axis}")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / f"axis_{axis.replace('.', '_')}.png", dpi=120)
        plt.close(fig)
    if records and NOISE_AXIS in records[0]:  # TSRL §4.4/§4.5: both noise metrics, per method
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ax, (name, by_method) in zip(axes, noise_fractions(records, row_axis).items()):
            for m, frac in by_method.items():
                ax.plot(list(frac), [100 * f for f in frac.values()], marker="o", label=m)
            ax.axhline(80, color="grey", ls=":", lw=1)
            ax.set(xlabel="judge flip probability p", ylabel=f"{name.replace('_', ' ')} (%)",
                   title="performance retained (TSRL's headline)" if name == "performance_retained"
                   else "gain kept (ours)")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "noise_kept.png", dpi=120)
        plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tsrl-reproduce", description=__doc__.splitlines()[0])
    parser.add_argument("recipe", help="a paper recipe: paper/tsrl_table1 (or tsrl_table1), see recipes/paper/")
    parser.add_argument("overrides", nargs="*", help="tsrl-train overrides for every run (e.g. judge.model=…)")
    parser.add_argument("--out", type=Path, default=None, help="grid folder (default runs/reproduce/<recipe>)")
    parser.add_argument("--cpu", action="store_true", help="CPU stand-ins at `make train`'s sizes, the whole grid")
    parser.add_argument("--smoke", action="store_true", help="CPU stand-ins, 2 steps, 1 seed, ≤ 2 values per axis")
    parser.add_argument("--accelerate", default=None, help="an accelerate config file: every run on its processes")
    parser.add_argument("--aggregate-only", action="store_true", help="only (re)write the tables and plots")
    args = parser.parse_intermixed_args(argv)  # overrides before or after the options
    from tsrl.cli import setup_or_exit

    setup_or_exit()
    recipe = args.recipe if "/" in args.recipe else f"paper/{args.recipe}"
    folder = Path(os.environ["TSRL_RECIPES_ROOT"]) / "recipes"
    if not (folder / f"{recipe}.yaml").is_file():
        known = ", ".join(sorted(p.stem for p in (folder / "paper").glob("*.yaml")))
        raise SystemExit(f"tsrl-reproduce: error: {recipe} is not a recipe under {folder}; the paper recipes are: "
                         f"{known}.")
    stand_ins = SMOKE if args.smoke else CPU if args.cpu else []
    grid = grid_of(recipe, [*stand_ins, *not_sweeps(args.overrides)])
    grid = smoke_grid(grid) if args.smoke else cpu_grid(grid) if args.cpu else grid
    grid, fixed = split_overrides(grid, args.overrides)
    fixed = [*stand_ins, *fixed]
    suffix = "_smoke" if args.smoke else "_cpu" if args.cpu else ""
    out = (args.out or Path("runs/reproduce") / (recipe.split("/")[-1] + suffix)).resolve()
    failed = None
    if not args.aggregate_only:
        grids = method_grids(recipe, grid, [*stand_ins, *not_sweeps(args.overrides)])
        size = sum(int(np.prod([len(v) for v in g.values()])) for g in grids)
        print(f"tsrl-reproduce: {recipe}: {size} runs into {out}", flush=True)
        for sub in grids:  # one multirun per set of axes (a method without an axis runs once, without it)
            failed = failed or subprocess.run(command(recipe, out, sub, fixed, args.accelerate)).returncode or None
    print(aggregate(out, grid))
    print(f"tables and plots: {out}/table.md, table.csv, curves.png")
    if failed:
        print(f"tsrl-reproduce: error: the sweep stopped with exit status {failed}; the table holds the runs that "
              "finished. Run the same command again to resume.", file=sys.stderr)
        sys.exit(failed)


if __name__ == "__main__":
    main()
