"""Tasks: prompts, reference anchors and latent quality; each task module registers itself in TASKS."""

from __future__ import annotations

from typing import Any

from tsrl.registry import TASKS
from tsrl.tasks.base import DataError, SimulatedQuality, Task, TaskView, Verifiable
from tsrl.tasks.humor import HumorConfig, HumorTask


def build_task(cfg: Any) -> Task:
    return TASKS.build(cfg)


__all__ = [
    "DataError",
    "SimulatedQuality",
    "Task",
    "TaskView",
    "Verifiable",
    "TASKS",
    "build_task",
    "HumorConfig",
    "HumorTask",
]
