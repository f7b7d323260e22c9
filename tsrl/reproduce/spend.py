"""What a `tsrl-reproduce` grid will ask its judges, said before the first run starts.

Every run of the grid is composed as tsrl-train would compose it and estimated as tsrl-train estimates itself before
its first call (tsrl/spend.py): setup, training and evaluation calls, dollars where the judge is priced.
Ladders are stored by their anchors and judge, so a ladder several runs share is ranked once, by the first: its
round-robin is counted once. A grid whose judges are not all simulated and whose calls pass `CONFIRM_ABOVE` runs
only with `--yes`, as does one with runs that cannot be estimated (its data cannot be read here, its settings stop
it): those are named with the reason, and tsrl-train stops them the same way when their turn comes. Beside the
calls: the grid's wall-clock, from the step and evaluation times of earlier runs with the same settings in the
output folder (tsrl/wallclock.py; runs without one are counted, not guessed), and the policies that must be
built first.
"""

from __future__ import annotations

import copy
import importlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tsrl.anchors.step import estimate_run
from tsrl.config import CONFIG_PACKAGE
from tsrl.errors import UserError
from tsrl.judging.simulated import RubricSimConfig
from tsrl.models import pending_build
from tsrl.progress import duration
from tsrl.reproduce.tables import SEED
from tsrl.spend import NONE, Calls, Spend
from tsrl.tasks import build_task
from tsrl.wallclock import Pace, measured, seconds

CONFIRM_ABOVE = 10_000
"""Judge calls of a grid with a judge that is not simulated above which tsrl-reproduce asks for --yes."""


@dataclass
class GridSpend:
    """The grid's judge calls, summed over its runs."""

    runs: int = 0
    setup: int = 0
    training: Calls = NONE
    evaluation: int = 0
    dollars: tuple[float, float] = (0.0, 0.0)
    priced: bool = False
    simulated: bool = True
    judges: set[str] = field(default_factory=set)
    failed: list[tuple[str, str]] = field(default_factory=list)
    """(the run's grid values, why it could not be estimated)."""
    folder: Path | None = None
    """The output folder whose earlier runs time the grid (None: no wall-clock estimate)."""
    wall_s: float = 0.0
    """The estimated wall-clock of the `timed` runs."""
    timed: int = 0
    builds: set[str] = field(default_factory=set)
    """What must be built before the runs can start (tsrl.models.pending_build)."""

    @property
    def total(self) -> Calls:
        fixed = self.setup + self.evaluation
        return self.training + Calls(fixed, fixed)

    def lines(self) -> list[str]:
        lines = [
            f"judge spend of the grid ({', '.join(sorted(self.judges)) or 'no judge'}; model calls, a cached verdict "
            f"is free): {self.total.text()} calls over {self.runs} runs (setup {self.setup:,}, a ladder shared by "
            f"several runs counted once; training {self.training.text()}; evaluation {self.evaluation:,})"
        ]
        if self.priced:
            low, high = self.dollars
            lines.append(
                f"  at the judge's prices: at most ${low:,.2f}–${high:,.2f}"
                if low != high
                else f"  at the judge's prices: at most ${high:,.2f}"
            )
        lines += self.time_lines()
        for values, why in self.failed[:5]:
            lines.append(f"  not estimated: {values}: {why}")
        if len(self.failed) > 5:
            lines.append(f"  not estimated: {len(self.failed) - 5} more runs")
        return lines

    def time_lines(self) -> list[str]:
        """The wall-clock estimate and what must be built first."""
        lines = [f"  to build first: {build}" for build in sorted(self.builds)]
        if self.folder is None:
            return lines
        if not self.timed:
            when = f"  wall-clock: not known yet: no earlier run with these runs' settings in {self.folder} to measure"
            return [when + " a step by (a run's progress bar shows s_per_step from its first step)", *lines]
        rest = f"; {self.runs - self.timed} runs have no such run to measure by" if self.timed < self.runs else ""
        return [
            f"  wall-clock: about {duration(self.wall_s)} for {self.timed} of {self.runs} runs, from the median step "
            f"and evaluation times of earlier runs with the same settings (seed, steps and schedules aside) in "
            f"{self.folder}{rest}; setup, builds, model loading and checkpoints not included",
            *lines,
        ]

    def needs_yes(self) -> bool:
        """A judge that may cost money, and calls above CONFIRM_ABOVE or runs whose calls are not known."""
        return not self.simulated and (self.total.high > CONFIRM_ABOVE or bool(self.failed))


def runs_of(grids: Sequence[dict[str, list[str]]]) -> list[list[str]]:
    """Each run's axis overrides, grid by grid in the order Hydra runs them."""
    runs = []
    for grid in grids:
        axes = list(grid)
        for values in itertools.product(*(grid[a] for a in axes)):
            runs.append([f"{a}={v}" for a, v in zip(axes, values)])
    return runs


def world_of(accelerate: str | None) -> int:
    """The processes each run of a grid under `--accelerate CONFIG` has (num_processes), 1 without it."""
    if not accelerate:
        return 1
    import yaml

    return int((yaml.safe_load(Path(accelerate).read_text()) or {}).get("num_processes", 1))


def is_group(axis: str) -> bool:
    """Whether a grid axis picks a config group (method=, task=, judge@eval_judge=: the defaults change, so the
    config is composed again) rather than setting a value (reward.k=, seed=: set on a composed config)."""
    root = Path(importlib.import_module(CONFIG_PACKAGE).__file__).parent
    return axis[:1] in "+~" or (root / axis.split("@")[0]).is_dir()


def grid_spend(
    recipe: str, grids: Sequence[dict[str, list[str]]], fixed: list[str], world: int = 1, out: Path | None = None
) -> GridSpend:
    """Every run of the grids composed and estimated (module docstring), timed by the earlier runs in `out`. A config
    is composed once per choice of config groups; the value axes are set on a copy of it."""
    import yaml
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    total, ladders, tasks, composed, seen = GridSpend(folder=out), set(), {}, {}, {}
    with initialize_config_module(CONFIG_PACKAGE, version_base="1.3"):
        for run in runs_of(grids):
            total.runs += 1
            groups = tuple(o for o in run if is_group(o.split("=", 1)[0]))
            same = tuple(o for o in run if not o.startswith(f"{SEED}="))  # a seed changes no count
            if same in seen:
                add(total, *seen[same], ladders)
                continue
            cfg = None
            try:
                if groups not in composed:
                    composed[groups] = compose("config", overrides=[f"recipes={recipe}", *fixed, *groups])
                one = copy.deepcopy(composed[groups])  # typed, as composed: the value axes are set on it
                for override in run:
                    key, _, value = override.partition("=")
                    if override not in groups:
                        OmegaConf.update(one, key, yaml.safe_load(value), merge=False)
                one.run_dir = "/nonexistent/tsrl-reproduce-estimate"
                cfg = OmegaConf.to_object(one)
                key = repr(cfg.task)
                if key not in tasks:
                    tasks[key] = build_task(cfg.task)
                total.builds |= {pending_build(cfg.model, cfg.task)} - {""}
                spend = estimate_run(cfg, tasks[key], world)
            except (UserError, ValueError, OSError) as err:
                total.failed.append((" ".join(run), str(err).splitlines()[0][:300]))
                total.simulated &= cfg is not None and simulated(cfg)  # a judge not known may be a paid one
                continue
            seen[same] = (spend, cfg, measured(out, cfg) if out else None)
            add(total, *seen[same], ladders)
    return total


def simulated(cfg: Any) -> bool:
    """Whether a run's judges (training and evaluation) are both the simulator: nothing to pay."""
    return all(judge is None or isinstance(judge, RubricSimConfig) for judge in (cfg.judge, cfg.eval_judge))


def add(total: GridSpend, spend: Spend, cfg: Any, pace: Pace | None, ladders: set[str]) -> None:
    """One run's estimate into the grid's (its wall-clock at `pace`, where measured); a ladder already counted costs
    nothing again."""
    if pace is not None:
        total.timed += 1
        total.wall_s += seconds(pace, spend.steps, spend.evaluations)
    setup = 0 if spend.ladder and spend.ladder in ladders else spend.setup_calls
    if spend.ladder:
        ladders.add(spend.ladder)
    total.setup += setup
    total.training = total.training + spend.training
    total.evaluation += spend.per_eval * spend.evaluations
    total.judges.add(spend.judge)
    total.simulated &= simulated(cfg)
    run = spend.training + Calls(setup + spend.per_eval * spend.evaluations, setup + spend.per_eval * spend.evaluations)
    money = spend.dollars(run)
    if money is not None:
        total.priced = True
        total.dollars = (total.dollars[0] + money[0], total.dollars[1] + money[1])
