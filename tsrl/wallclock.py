"""How long a run will take, said before it starts: from this machine's own measurements, never from a guess.

Every run leaves its step times (metrics.jsonl's `time/step_s`) and its evaluations' (eval.json's `time_s`) in its
folder. `measured` looks, in the folder it is given and two levels below it, for runs with the same settings —
config.json equal but for the settings in TIMELESS, which change no step's time (the seed, the number of steps, the
evaluation and checkpoint schedules, the logger, cache folders, the judge's budget and injected noise) — and takes
the median step and evaluation time of their finished steps. tsrl-train looks in the folder holding its run
directory (its own earlier steps when it resumes, the other runs of a sweep, or of a day under outputs/),
tsrl-reproduce in its output folder. With no such run the estimate says so. Setup (a ladder's round-robin, a policy
build, loading the model) and checkpoints are not in the figure; what must be built first is said beside it
(`tsrl.models.pending_build`).
"""

from __future__ import annotations

import copy
import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tsrl.progress import counted, duration

TIMELESS = (
    "run_dir",
    "seed",
    "trainer.max_steps",
    "trainer.max_judge_calls",
    "trainer.checkpoint",
    "trainer.eval.every",
    "logger",
    "model.cache_dir",
    "reward.ladder_dir",
    "judge.budget",
    "judge.flip_prob",
    "judge.noise_seed",
    "judge.seed",
)
"""Settings (dotted paths of config.json) that change no step's time: runs differing only in them are compared."""
DEPTH = ("metrics.jsonl", "*/metrics.jsonl", "*/*/metrics.jsonl")


@dataclass
class Pace:
    """What earlier runs with the same settings measured: median seconds a step and an evaluation (None where
    they did not time their evaluations), over how many steps and runs."""

    step_s: float
    eval_s: float | None
    steps: int
    runs: int


def settings(config: dict) -> dict:
    """A run's config.json without the TIMELESS settings."""
    kept = copy.deepcopy(config)
    for key in TIMELESS:
        *path, last = key.split(".")
        node = kept
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return kept


def as_config(cfg: Any) -> dict:
    """A typed run config as its config.json holds it."""
    return json.loads(json.dumps(asdict(cfg), default=str))


def run_times(run: Path) -> tuple[list[float], list[float]]:
    """A run folder's step times and evaluation times ([] where it has none or they cannot be read)."""
    try:
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line]
        evals = json.loads((run / "eval.json").read_text())["history"] if (run / "eval.json").is_file() else []
    except (OSError, ValueError, KeyError):
        return [], []
    steps = [r["time/step_s"] for r in rows if isinstance(r.get("time/step_s"), (int, float))]
    return steps, [e["time_s"] for e in evals if isinstance(e.get("time_s"), (int, float))]


def measured(folder: Path, cfg: Any) -> Pace | None:
    """The median step and evaluation time of the runs in `folder` (and two levels below) with the settings of the
    typed run config `cfg` (module docstring); None where none has a finished step."""
    wanted, steps, evals, runs = settings(as_config(cfg)), [], [], 0
    for metrics in sorted({found for pattern in DEPTH for found in folder.glob(pattern)}):
        try:
            same = settings(json.loads((metrics.parent / "config.json").read_text())) == wanted
        except (OSError, ValueError):
            continue
        step_times, eval_times = run_times(metrics.parent) if same else ([], [])
        if step_times:
            runs, steps, evals = runs + 1, steps + step_times, evals + eval_times
    if not steps:
        return None
    return Pace(statistics.median(steps), statistics.median(evals) if evals else None, len(steps), runs)


def seconds(pace: Pace, steps: int, evaluations: int) -> float:
    """A run's estimated wall-clock at `pace`: its steps and evaluations (evaluations left out where not timed)."""
    return steps * pace.step_s + evaluations * (pace.eval_s or 0.0)


def pace_text(pace: Pace, folder: Path) -> str:
    """Where an estimate comes from, in words."""
    evals = f", {pace.eval_s:.1f} s an evaluation" if pace.eval_s is not None else "; evaluations not timed, left out"
    return (
        f"measured by {counted(pace.runs, 'earlier run')} with these settings (seed, steps and schedules aside) in "
        f"{folder}: median {pace.step_s:.2f} s a step over {counted(pace.steps, 'step')}{evals}"
    )


def wallclock_line(pace: Pace | None, steps: int, evaluations: int, folder: Path) -> str:
    """The start message's wall-clock line for a run of `steps` steps and `evaluations` evaluations."""
    if pace is None:
        return (
            f"  wall-clock: not known yet: no earlier run with these settings in {folder} to measure a step by "
            "(the progress bar shows s_per_step from the first step)"
        )
    return (
        f"  wall-clock: about {duration(seconds(pace, steps, evaluations))} for {counted(steps, 'step')} and "
        f"{counted(evaluations, 'evaluation')}, {pace_text(pace, folder)}; setup, model loading and checkpoints not "
        "included"
    )
