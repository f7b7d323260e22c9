"""Judges: the protocol, the simulated judge, and composable wrappers; chosen by config type."""

from __future__ import annotations

from typing import Any, Callable

from tsrl.judging.base import Judge, JudgeCounters, stable_uniform
from tsrl.judging.simulated import RubricSimConfig, SimulatedJudge
from tsrl.judging.wrappers import BothOrders
from tsrl.tasks import Task

JUDGES: dict[type, Callable[[Any, Task], Judge]] = {RubricSimConfig: SimulatedJudge}


def build_judge(cfg: Any, task: Task) -> Judge:
    judge = JUDGES[type(cfg)](cfg, task)
    return BothOrders(judge) if getattr(cfg, "both_orders", False) else judge


__all__ = ["Judge", "JudgeCounters", "stable_uniform", "RubricSimConfig", "SimulatedJudge", "BothOrders",
           "JUDGES", "build_judge"]
