"""Policy models: `tiny` (built and cached locally) and `hf` (a local checkpoint), chosen by config type."""

from __future__ import annotations

from typing import Any, Callable

from tsrl.models.hf import HFModelConfig, load_hf
from tsrl.models.tiny import TinyModelConfig, load_tiny
from tsrl.tasks import Task

MODELS: dict[type, Callable[[Any, Task], tuple]] = {TinyModelConfig: load_tiny, HFModelConfig: load_hf}


def load_policy(cfg: Any, task: Task) -> tuple:
    """(model, tokenizer) for the model config."""
    return MODELS[type(cfg)](cfg, task)


__all__ = ["MODELS", "load_policy", "HFModelConfig", "TinyModelConfig"]
