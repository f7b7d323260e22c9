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
held-out score, TSRL's measure for TSRL; gain kept = (noisy − base) ÷ (clean − base), its measure for the
baselines), adaptive routing's shares, and plots: held-out curves, the metric against each setting (k scaling,
noise, anchor selection; a method without the setting, as the rubric in the k sweep, is a horizontal line), both
noise metrics against p, zero-variance groups over training, and the self-bootstrapped ladder's rebuilds on its
held-out curve.

A method that has no key of an axis (the rubric has no reward.k) runs once, without that axis: the grid is run as
one multirun per set of axes its methods share. Before the first run, the grid's judge calls are estimated and
printed (tsrl.reproduce.spend); a judge that is not simulated needs --yes above CONFIRM_ABOVE calls.

The command line (options, the recipe's name, what is printed): tsrl.commands.reproduce.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from tsrl.config import CONFIG_PACKAGE
from tsrl.errors import QUIET_STOP_ENV, UserError
from tsrl.reproduce.ablations import compute_table, gap_table, pool_table, row_label
from tsrl.reproduce.runs import collect, headline_key, run_folders, start_scores
from tsrl.reproduce.tables import (
    NOISE_AXIS,
    SEED,
    _sortable,
    benchmark_cells,
    benchmark_table,
    mean_std,
    noise_fractions,
    noise_table,
    plot,
    routing_table,
    side_tables,
)

METHOD = "method"
RECORDED = ("judge_calls", "judge_tokens", "wall_s", "steps", "pool", "zero_var_frac", "zero_var_drawn")
RECORDED += ("route_verifier_frac",)  # a run's collected values its record carries as they are
# --cpu: the CPU stand-ins for a GPU recipe (the tiny policy, the simulated judge, HF generation) at the sizes of
# `make train` (recipes/cpu_demo) but its earlier lr, 5e-4, at which the CPU study (docs/results.md) was measured;
# --smoke: the same stand-ins for a few steps.
CPU = [
    "model=tiny",
    "judge=rubric_sim",
    "judge@eval_judge=rubric_sim",
    "generator=hf",
    "trainer.max_steps=100",
    "trainer.prompts_per_step=8",
    "trainer.group_size=8",
    "trainer.lr=5e-4",
    "trainer.micro_batch_size=32",
    "trainer.eval.every=20",
    "trainer.eval.samples=4",
    "trainer.checkpoint.every=0",
    "generator.max_new_tokens=48",
    "algo.mask_truncated=true",
]
SMOKE = list(
    {
        o.split("=")[0]: o
        for o in [
            *CPU,
            "trainer.max_steps=2",
            "trainer.prompts_per_step=2",
            "trainer.group_size=4",
            "trainer.micro_batch_size=8",
            "trainer.eval.every=0",
            "trainer.eval.samples=1",
            "trainer.eval.max_prompts=2",
            "generator.max_new_tokens=12",
            "task.max_prompts=4",
        ]
    }.values()
)  # each key once, the smoke value
SMOKE_DROPS = ("model", "judge.model", "eval_judge.", "task.anchors_file")  # axes the CPU stand-ins replace
STAND_INS = {"full": [], "cpu": CPU, "smoke": SMOKE}  # scale → the overrides that put every run at it


def grid_of(recipe: str, overrides: list[str]) -> dict[str, list[str]]:
    """The recipe's sweep: axis → values, as the composed config's hydra.sweeper.params state them."""
    from hydra import compose, initialize_config_module

    with initialize_config_module(CONFIG_PACKAGE, version_base="1.3"):
        cfg = compose("config", overrides=[f"recipes={recipe}", *overrides], return_hydra_config=True)
    params = cfg.hydra.sweeper.params or {}
    if not params:
        raise SystemExit(
            f"tsrl-reproduce: error: recipes/{recipe}.yaml has no hydra.sweeper.params grid; "
            "a paper recipe lists its methods, settings and seeds there (see recipes/paper/)."
        )
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
    head = (
        [str(bin_dir / "accelerate"), "launch", "--config_file", accelerate, "-m", "tsrl.commands.train"]
        if accelerate
        else [str(bin_dir / "tsrl-train")]
    )
    return [
        *head,
        "-m",
        f"recipes={recipe}",
        f"hydra.sweep.dir={out}",
        "hydra.sweep.subdir=${hydra.job.override_dirname}",
        f"hydra.job.config.override_dirname.exclude_keys=[{','.join(exclude)}]",
        "hydra.sweeper.params=null",  # the grid is given below, axis by axis (--smoke and overrides narrow it)
        "trainer.checkpoint.resume=auto",
        *fixed,
        *(f"{axis}={','.join(values)}" for axis, values in grid.items()),
    ]


def plan(recipe: str, overrides: list[str], scale: str) -> tuple[dict[str, list[str]], list[str]]:
    """The grid to run and the overrides every run gets. The grid is the recipe's at `scale` (full | cpu | smoke:
    cpu and smoke drop the axes their stand-ins replace, smoke also narrows it), an axis set on the command line
    replacing the recipe's; the overrides are the scale's stand-ins, then the rest of the command line."""
    grid = grid_of(recipe, [*STAND_INS[scale], *not_sweeps(overrides)])
    grid = smoke_grid(grid) if scale == "smoke" else cpu_grid(grid) if scale == "cpu" else grid
    grid, fixed = split_overrides(grid, overrides)
    return grid, [*STAND_INS[scale], *fixed]


def run_grids(
    recipe: str, out: Path, grids: list[dict[str, list[str]]], fixed: list[str], accelerate: str | None
) -> int:
    """Each grid as one tsrl-train multirun (`command`), in order, up to the first that fails; that multirun's
    exit status, or 0 when all finished."""
    failed = 0
    for grid in grids:
        failed = failed or run_multirun(command(recipe, out, grid, fixed, accelerate))
    return failed


def run_multirun(cmd: list[str]) -> int:
    """cmd's exit status. It runs in a process group of its own, so that Ctrl-C reaches it once, from here: each
    SIGINT this process gets is passed on to that group and the multirun waited for (its runs end as they do on
    Ctrl-C, their checkpoints whole), then raised here as KeyboardInterrupt. The multirun leaves the Ctrl-C line
    to tsrl-reproduce (QUIET_STOP_ENV), which knows what the grid kept."""
    child = subprocess.Popen(cmd, process_group=0, env={**os.environ, QUIET_STOP_ENV: "1"})
    interrupted = False
    while True:
        try:
            status = child.wait()
            break
        except KeyboardInterrupt:
            interrupted = True
            os.killpg(child.pid, signal.SIGINT)
    if interrupted:
        raise KeyboardInterrupt
    return status


def table1_cells(run: dict) -> dict[str, float]:
    """A run's Table 1 cells at its last evaluation and at step 0 (`<label> (step 0)`); none without benchmarks."""
    if not run["benchmarks"]:
        return {}
    start = benchmark_cells(run["evals"]["start"], run["benchmarks"])
    return {
        **benchmark_cells(run["evals"]["latest"], run["benchmarks"]),
        **{f"{k} (step 0)": v for k, v in start.items()},
    }


def aggregate(out: Path, grid: dict[str, list[str]]) -> str:
    """table.md, table.csv, results.json and plots in `out`; returns the markdown."""
    runs, unfinished = finished_runs(out, grid)
    key = headline_key(runs[0]["evals"])
    row_axis = row_axis_of(grid)
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
            records += [run_record(r, {row_axis: m, **fixed_axes, **dict(zip(col_axes, c))}, key) for r in group]
        lines.append(f"| {row_label(m)} | " + " | ".join(finals) + f" | {np.mean(calls):.0f} | {count} |")
    judge = runs[0]["evals"].get("judge", {})
    setting = "".join(f"; {a}={v}" for a, v in fixed_axes.items())
    text = (
        f"Held-out {key} at each run's last evaluation, mean (std) over seeds{setting}; evaluation judge: "
        f"{judge.get('kind', '?')} ({judge.get('model', '?')}), clean.\n\n" + "\n".join(lines) + "\n"
    )
    if unfinished:
        text += (
            f"\n{len(unfinished)} unfinished run(s) left out (still running, or stopped: run the same command "
            f"to resume): {', '.join(Path(d).name for d in unfinished)}\n"
        )
    text += side_tables(runs, rows_order, columns, cell, key, label) + record_tables(records, runs, row_axis, col_axes)
    noise = noise_of_cells(records, row_axis, grid)
    write_results(out, text, records, {"metric": key, "grid": grid, "runs": records, "noise": noise})
    plot(out, runs, records, key, row_axis, col_axes)
    return text


def finished_runs(out: Path, grid: dict[str, list[str]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The runs under `out` in the grid's cells that finished, and the folders of those that did not (a run still
    going, or stopped, has a partial eval.json: left out); a UserError when none finished, or when no run there
    belongs to the grid (a run of it sets its row axis, as a folder of another grid or a tsrl-train multirun
    does not)."""
    row_axis = row_axis_of(grid)

    def belongs(values: dict[str, str]) -> bool:
        return row_axis in values and all(values.get(a) in v for a, v in grid.items() if a in values)

    folders = run_folders(out)
    if folders and not any(belongs(values) for values in folders.values()):
        raise UserError(
            f"{out} holds no run of this grid (no run folder's .hydra/overrides.yaml sets {row_axis} to one of "
            f"{', '.join(grid[row_axis])}); --aggregate-only reads the folder the recipe's grid ran into, and "
            f"`tsrl-sweep {out}` compares the runs of any tsrl-train multirun."
        )
    every = [r for r in collect(out) if belongs(r["values"])]
    runs = [r for r in every if r["done"]]
    if not runs:
        raise UserError(
            f"no finished run under {out} (no done.json beside an eval.json and a .hydra/overrides.yaml); "
            "run the grid first."
        )
    return runs, [r["dir"] for r in every if not r["done"]]


def row_axis_of(grid: dict[str, list[str]]) -> str:
    """The grid's table rows: its methods, or else its first axis that is not the seed."""
    return METHOD if METHOD in grid else next(a for a in grid if a != SEED)


def run_record(run: dict[str, Any], setting: dict[str, str], key: str) -> dict[str, Any]:
    """A finished run's row of table.csv and results.json: its `setting` (method, fixed and column axes) and seed,
    the headline `key` at step 0 and at its last evaluation, its spend and its learning signal."""
    groups, size = run["tournament_groups"], run["group_size"]
    return {
        **setting,
        SEED: run["values"].get(SEED, ""),
        "start": run["evals"]["start"][key],
        "start_scores": start_scores(run["evals"]["start"]),
        "final": run["evals"]["latest"][key],
        "final_step": run["evals"]["latest"]["step"],
        **{name: run[name] for name in RECORDED},
        "signal_samples_per_step": None if groups is None or not size else groups * size,
        "generations_per_step": run["generations_per_step"],
        **table1_cells(run),
        "machine": run["machine"],
        "run_dir": run["dir"],
    }


def record_tables(records: list[dict], runs: list[dict], row_axis: str, col_axes: list[str]) -> str:
    """The tables read from the runs' records: noise robustness, benchmarks, routing, gaps, anchor pools, compute."""
    text = noise_table(records, row_axis)
    text += benchmark_table(records, row_axis, runs[0]["benchmarks"], runs[0]["eval_samples"] or 0)
    text += routing_table(records, row_axis)
    text += gap_table(records, row_axis, col_axes) + pool_table(records, row_axis, col_axes)
    return text + compute_table(records, row_axis)


def noise_of_cells(records: list[dict], row_axis: str, grid: dict[str, list[str]]) -> dict[str, dict]:
    """Both noise metrics per method and judge flip probability (none without that axis in the grid), as
    results.json holds them; each run's record gets its cell's two."""
    noise = noise_fractions(records, row_axis) if NOISE_AXIS in grid else {}
    for r in records:
        for name, by_method in noise.items():
            r[name] = by_method.get(r[row_axis], {}).get(float(r[NOISE_AXIS]))
    return {
        name: {m: {str(p): v for p, v in by_flip.items()} for m, by_flip in by_method.items()}
        for name, by_method in noise.items()
    }


def write_results(out: Path, text: str, records: list[dict], results: dict[str, Any]) -> None:
    """table.md (`text`), table.csv (`records`, a row per run) and results.json (`results`) in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(text)
    with (out / "table.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    (out / "results.json").write_text(json.dumps(results, indent=1))
