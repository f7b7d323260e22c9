"""Sweeps: the cells of a `tsrl-train -m` multirun side by side, in sweep.md and sweep.png in its sweep folder.

A multirun (`tsrl-train -m reward.k=1,2 judge.flip_prob=0,0.2`) names each run folder by the settings it sweeps,
`reward.k=1,judge.flip_prob=0.2` (the `tsrl_cell` resolver in configs/config.yaml's hydra.sweep.subdir: the
command line's sweeps and a recipe's hydra.sweeper.params, in the job's order, other characters than letters,
digits and `.,=+@-` as `_`, at most NAME_LIMIT characters) and ends by writing sweep.md and sweep.png into its
sweep folder (the SweepTable callback in configs/config.yaml's hydra.callbacks; tsrl-train also writes them when a
failed cell or Ctrl-C stopped the multirun, and sweep.md names the cells without a finished run). `tsrl-sweep
FOLDER` (tsrl.commands.sweep) writes them again for any sweep folder, finished or not, a tsrl-reproduce grid's
included.

sweep.md: the settings that differ between the folder's runs (their .hydra/overrides.yaml) as rows and columns —
two settings are a matrix, any other number one row per cell — the seeds of a cell (`seed`, when it differs)
pooled. Per cell: the held-out headline at each finished run's last evaluation (eval.json's "latest": the
win-rate, or the pass ratio of a verifiable task), its mean over seeds with the seed count and a 95 % t-interval
over seeds from two seeds on (tsrl.reproduce.tables.interval); the judge calls a run made (training, from
metrics.jsonl, and evaluation, from eval.json), mean per run; the wall-clock of a run's steps and evaluations
(metrics.jsonl's time/step_s, eval.json's time_s; setup such as a policy build is not in it), mean per run.
sweep.png: the final headline against the first varied setting, one line per value of the others (mean and std
over seeds), beside the held-out curves. The run folders are read as tsrl-reproduce reads them
(tsrl.reproduce.runs.collect).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from tsrl.errors import UserError
from tsrl.progress import duration
from tsrl.reproduce.runs import collect, headline_key, run_folders
from tsrl.reproduce.tables import SEED, _sortable, draw_against_axis, draw_curves, interval

TABLE, PICTURE = "sweep.md", "sweep.png"
SWEPT_ENV = "TSRL_SWEPT_KEYS"  # the keys the running multirun sweeps, for its jobs' folder names (joblib workers too)
NAME_LIMIT = 120  # characters of a run folder's name; a longer one is cut and ends in its job number
UNSAFE = re.compile(r"[^\w.,=+@-]")
LINE = "line"  # the plot's line label, a record key no setting has
STOPPED = (
    "The multirun stopped before its end (a cell failed, or it was interrupted): the cells it had not started "
    "have no folder and are not listed."
)


def swept_keys(overrides: list[str], params: Any) -> list[str]:
    """The keys a multirun sweeps: its recipe's hydra.sweeper.params and the command line's sweeps (`k=1,2`)."""
    parsed = OverridesParser.create().parse_overrides([str(o) for o in overrides])
    keys = [str(k) for k in (params or {})] + [o.get_key_element() for o in parsed if o.is_sweep_override()]
    return list(dict.fromkeys(k.lstrip("+~") for k in keys))


def cell_folder(overrides: Any, num: Any) -> str:
    """A multirun job's folder name (resolver `tsrl_cell`): its swept settings as `key=value` joined by commas;
    its job number when the multirun sweeps nothing (or this process did not start it)."""
    swept = set(os.environ.get(SWEPT_ENV, "").split())
    items = [str(o) for o in overrides if str(o).split("=", 1)[0].lstrip("+~") in swept]
    name = UNSAFE.sub("_", ",".join(items))
    if not name:
        return str(num)
    return name if len(name) <= NAME_LIMIT else f"{name[:NAME_LIMIT]}-{num}"


OmegaConf.register_new_resolver("tsrl_cell", cell_folder, replace=True)  # on import: the callback imports it
_open: list[Path] = []  # the sweep folder of the multirun this process runs, until its table is written


class SweepTable(Callback):
    """Hydra callback (configs/config.yaml): notes the sweep folder and the swept keys when a multirun starts,
    writes sweep.md and sweep.png when it ends."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        os.environ[SWEPT_ENV] = " ".join(
            swept_keys(config.hydra.overrides.task, OmegaConf.select(config, "hydra.sweeper.params"))
        )
        _open[:] = [Path(config.hydra.sweep.dir)]

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        close_sweep()


def close_sweep(stopped: bool = False) -> None:
    """The running multirun's sweep.md and sweep.png, once, by its main process (rank 0); nothing outside a
    multirun or before its first run folder. tsrl-train calls it with `stopped` when the multirun ended early (a
    failed cell or Ctrl-C: on_multirun_end is never reached), which sweep.md then says."""
    if not _open:
        return
    folder = _open.pop()
    if int(os.environ.get("RANK", "0")) != 0 or not run_folders(folder):
        return
    try:
        print(write_sweep(folder, stopped)[1], flush=True)
    except (UserError, OSError, ValueError) as err:  # a run's file unreadable: the multirun's outcome stands
        print(f"tsrl: sweep table not written ({type(err).__name__}: {err}); `tsrl-sweep {folder}` retries.")


@dataclass
class Cell:
    """One setting of the varied keys: its finished runs (tsrl.reproduce.collect's records) and other folders."""

    values: tuple[str, ...]
    runs: list[dict] = field(default_factory=list)
    unfinished: list[Path] = field(default_factory=list)


def read_cells(folder: Path) -> tuple[list[str], list[Cell], dict[str, str]]:
    """The varied keys (seed left out: a cell pools its seeds), the cells in the order of their values, and the
    settings every run shares. A UserError when the folder holds no run folder."""
    folders = run_folders(folder)
    if not folders:
        raise UserError(
            f"{folder} holds no run folder (one with a .hydra/overrides.yaml, as each run of a multirun has); give "
            "the sweep folder, hydra.sweep.dir (multirun/<date>/<time> unless set)."
        )
    keys = list(dict.fromkeys(k for values in folders.values() for k in values))
    varied = [k for k in keys if len({values.get(k, "") for values in folders.values()}) > 1]
    axes = [k for k in varied if k != SEED]
    finished = {Path(r["dir"]): r for r in collect(folder) if r["done"]}
    cells: dict[tuple[str, ...], Cell] = {}
    for run_dir, values in folders.items():
        setting = tuple(values.get(a, "") for a in axes)
        cell = cells.setdefault(setting, Cell(setting))
        if run_dir in finished:
            cell.runs.append(finished[run_dir])
        else:
            cell.unfinished.append(run_dir)
    ordered = sorted(cells.values(), key=lambda c: [_sortable(v) for v in c.values])
    first = next(iter(folders.values()))
    return axes, ordered, {k: v for k, v in first.items() if k not in varied}


def judge_calls(run: dict) -> float:
    """The judge calls a run made: its training steps' and its evaluations'."""
    return run["judge_calls"] + sum(e.get("judge_calls", 0.0) for e in run["evals"]["history"])


def wall_clock(run: dict) -> float:
    """Seconds a run spent on its steps and evaluations (metrics.jsonl's time/step_s, eval.json's time_s): resumes
    included, setup (a policy build, loading) not."""
    return run["wall_s"] + sum(e.get("time_s", 0.0) for e in run["evals"]["history"])


def numbers(cell: Cell, key: str) -> tuple[str, int, str, str]:
    """A cell's headline with its interval, its seed count, judge calls per run and wall-clock per run."""
    if not cell.runs:
        return "not finished", 0, "—", "—"
    finals = [r["evals"]["latest"][key] for r in cell.runs]
    calls = f"{np.mean([judge_calls(r) for r in cell.runs]):,.0f}"
    return interval(finals), len(finals), calls, duration(float(np.mean([wall_clock(r) for r in cell.runs])))


def cell_text(cell: Cell, key: str) -> str:
    """A matrix cell: `41.7 [30.1, 53.3] n=3 · 1,040 calls · 12 s`, and its folders without a finished run."""
    headline, seeds, calls, wall = numbers(cell, key)
    text = headline if not seeds else f"{headline}{f' n={seeds}' if seeds > 1 else ''} · {calls} calls · {wall}"
    return text + (f" · {len(cell.unfinished)} not finished" if cell.runs and cell.unfinished else "")


def cells_table(axes: list[str], cells: list[Cell], key: str) -> list[str]:
    """Two varied settings: a matrix, the first as rows, the second as columns; otherwise one row per cell."""
    if len(axes) == 2:
        rows = list(dict.fromkeys(c.values[0] for c in cells))
        columns = sorted({c.values[1] for c in cells}, key=_sortable)
        by_values = {c.values: c for c in cells}
        lines = [f"| {axes[0]} \\ {axes[1]} | " + " | ".join(v or "—" for v in columns) + " |"]
        lines.append("|---" * (len(columns) + 1) + "|")
        for row in rows:
            texts = [cell_text(by_values[(row, c)], key) if (row, c) in by_values else "—" for c in columns]
            lines.append(f"| {row or '—'} | " + " | ".join(texts) + " |")
        return lines
    partial = any(c.unfinished for c in cells)
    head = [*axes, f"held-out {key}", "seeds", "judge calls per run", "wall-clock per run"]
    head += ["not finished"] if partial else []
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for c in cells:
        cols = [*(v or "—" for v in c.values), *map(str, numbers(c, key))]
        cols += [str(len(c.unfinished))] if partial else []
        lines.append("| " + " | ".join(cols) + " |")
    return lines


def sweep_markdown(
    folder: Path, axes: list[str], cells: list[Cell], shared: dict[str, str], key: str, stopped: bool
) -> str:
    """sweep.md's text: what the numbers are, the varied and shared settings, the cells, the unfinished runs (and,
    `stopped`, that the multirun ended before its last job)."""
    runs = [r for c in cells for r in c.runs]
    unfinished = [d for c in cells for d in c.unfinished]
    judge = runs[0]["evals"].get("judge", {}) if runs else {}
    seeds = sorted({r["values"].get(SEED, "") for r in runs} - {""}, key=_sortable)
    lines = [
        f"# Sweep {folder.name}",
        "",
        f"{len(runs) + len(unfinished)} runs in {len(cells)} cells under {folder}; {len(runs)} finished. Per cell: the "
        f"held-out {key} at each run's last evaluation (eval.json), mean over the cell's seeds with a 95 % "
        "t-interval over seeds from 2 seeds on (n = seeds); the judge calls a run made, training and evaluation "
        "(mean per run); the wall-clock of a run's steps and evaluations, setup not included (mean per run). "
        "Evaluation judge: "
        f"{judge.get('kind', '?')} ({judge.get('model', '?')}).",
        "",
        f"Varied: {' × '.join(axes) or ('only the seed' if len(seeds) > 1 else 'nothing (one cell)')}"
        + (f"; seeds {', '.join(seeds)} pooled per cell." if len(seeds) > 1 else "."),
        "Shared by every run: " + (" ".join(f"`{k}={v}`" for k, v in shared.items()) or "no override") + ".",
        "",
        *cells_table(axes, cells, key),
    ]
    if unfinished:
        names = ", ".join(d.relative_to(folder).as_posix() for d in unfinished)
        lines += ["", f"Not finished (failed, stopped or still running; no done.json): {names}."]
    if stopped:
        lines += ["", STOPPED]
    if runs:
        lines += ["", f"![final {key} against {axes[0] if axes else SEED}, and the held-out curves]({PICTURE})"]
    return "\n".join(lines) + "\n"


def plot_sweep(folder: Path, axes: list[str], cells: list[Cell], key: str) -> None:
    """sweep.png: the final headline against the first varied setting, a line per value of the others (mean and
    std over seeds; tsrl-reproduce's axis plot), beside the held-out curves of each cell (mean over seeds)."""
    import matplotlib  # deferred: matplotlib's import is only needed to draw

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = axes[0] if axes else SEED

    def label(values: dict[str, str], keys: list[str]) -> str:
        return ", ".join(f"{a}={values.get(a) or '—'}" for a in keys) or "every run"

    runs = [r for c in cells for r in c.runs]
    records = [
        {x: r["values"].get(x, ""), LINE: label(r["values"], axes[1:]), "final": r["evals"]["latest"][key]}
        for r in runs
    ]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    draw_against_axis(left, records, key, LINE, x)
    draw_curves(right, [{**r, "values": {LINE: label(r["values"], axes)}} for r in runs], key, LINE, [])
    fig.tight_layout()
    fig.savefig(folder / PICTURE, dpi=120)
    plt.close(fig)


def write_sweep(folder: Path, stopped: bool = False) -> tuple[str, str]:
    """sweep.md and (with a finished run) sweep.png in `folder`; returns sweep.md's text and a line saying where
    they are and which cells did not finish (`stopped`: the multirun ended before its last job)."""
    axes, cells, shared = read_cells(folder)
    runs = [r for c in cells for r in c.runs]
    key = headline_key(runs[0]["evals"]) if runs else "winrate"
    text = sweep_markdown(folder, axes, cells, shared, key, stopped)
    if runs:
        plot_sweep(folder, axes, cells, key)
    (folder / TABLE).write_text(text)
    unfinished = [d.relative_to(folder).as_posix() for c in cells for d in c.unfinished]
    said = f"{len(runs)} of {len(runs) + len(unfinished)} runs finished"
    said += f"; not finished: {', '.join(unfinished)}" if unfinished else ""
    said += "; the multirun stopped early, so cells it had not started are missing" if stopped else ""
    picture = f" and {PICTURE}" if runs else f" (no {PICTURE}: no run finished)"
    return text, f"sweep table: {folder / TABLE}{picture} ({said})"
