"""`model=hf`: any local Hugging Face causal LM directory (or a GGUF file inside one)."""

from __future__ import annotations

from tsrl.errors import ConfigError

from dataclasses import dataclass
from pathlib import Path

import torch

from tsrl.registry import MODELS
from tsrl.tasks import Task

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class HFModelConfig:
    """Model `hf`: a local Hugging Face model directory; nothing is downloaded."""

    path: str = ""
    """Local model directory (config.json + weights), e.g. a Qwen or Llama checkpoint."""
    gguf_file: str = ""
    """Optional GGUF file name inside `path` (transformers de-quantises it to dtype)."""
    dtype: str = "float32"
    """float32, bfloat16 or float16."""
    trust_remote_code: bool = False
    """Allow custom modelling code shipped with the checkpoint."""

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ConfigError(f"model.dtype={self.dtype!r} is not supported; use one of {sorted(DTYPES)}.")


def load_hf(cfg: HFModelConfig, task: Task):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(cfg.path).expanduser()
    if not cfg.path or not path.is_dir():
        raise ConfigError(f"model.path={cfg.path!r} is not a local directory; set model.path to a "
                                "Hugging Face model folder (tsrl never downloads models at run time).")
    extra = {"gguf_file": cfg.gguf_file} if cfg.gguf_file else {}
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=cfg.trust_remote_code, **extra)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=DTYPES[cfg.dtype],
                                                 trust_remote_code=cfg.trust_remote_code, **extra)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


MODELS.register("hf", HFModelConfig, load_hf)
