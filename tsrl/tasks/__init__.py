"""Tasks: prompts, reference anchors and latent quality, chosen by config type."""

from __future__ import annotations

from typing import Any, Callable

from tsrl.tasks.base import DataError, Task, Verifiable
from tsrl.tasks.humor import HumorConfig, HumorTask

TASKS: dict[type, Callable[[Any], Task]] = {HumorConfig: HumorTask}


def build_task(cfg: Any) -> Task:
    return TASKS[type(cfg)](cfg)


__all__ = ["DataError", "Task", "Verifiable", "TASKS", "build_task", "HumorConfig", "HumorTask"]
