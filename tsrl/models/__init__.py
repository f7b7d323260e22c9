"""Policy models: `tiny` (built and cached locally) and `hf` (a local checkpoint); each registers in MODELS."""

from __future__ import annotations

from typing import Any

from tsrl.models.hf import HFModelConfig
from tsrl.models.tiny import TinyModelConfig
from tsrl.registry import MODELS
from tsrl.tasks import Task


def load_policy(cfg: Any, task: Task) -> tuple:
    """(model, tokenizer) for the model config."""
    return MODELS.build(cfg, task)


__all__ = ["MODELS", "load_policy", "HFModelConfig", "TinyModelConfig"]
