"""`model=hf`: any local Hugging Face causal LM directory (or a GGUF file inside one). A vision-language Mistral 3
checkpoint or FP8 weights are exported once into a plain text-decoder folder in model.dtype first (export.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tsrl.errors import ConfigError
from tsrl.models.export import text_decoder_folder
from tsrl.models.lora import LoraSettings
from tsrl.models.source import DTYPES, PolicySource
from tsrl.registry import MODELS
from tsrl.tasks import Task

DEFAULT_CACHE = "~/.cache/tsrl/models"


@dataclass
class HFModelConfig:
    """Model `hf`: a local Hugging Face model directory; nothing is downloaded."""

    path: str = ""
    """Local model directory (config.json + weights), e.g. a Qwen or Llama checkpoint. A vision-language Mistral 3
    checkpoint (Ministral 3) trains its text decoder, and FP8 weights are dequantized to dtype: both through a
    one-time export into cache_dir (tsrl/models/export.py)."""
    gguf_file: str = ""
    """Optional GGUF file name inside `path` (transformers de-quantises it to dtype)."""
    dtype: str = "float32"
    """float32, bfloat16 or float16."""
    trust_remote_code: bool = False
    """Allow custom modelling code shipped with the checkpoint."""
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    """Switches of the chat template, passed to every rendering of the policy's prompts, e.g. enable_thinking:
    false (Qwen3: the template then closes an empty thinking block before the answer). A switch the template never
    reads is refused."""
    cache_dir: str = DEFAULT_CACHE
    """Where exports of `path` (a vision-language checkpoint's text decoder, FP8 weights dequantized) are stored."""
    lora: LoraSettings = field(default_factory=LoraSettings)
    """Train a LoRA adapter instead of every weight (model.lora.r > 0)."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward instead of keeping them (transformers'
    gradient_checkpointing_enable, non-reentrant): ~one more forward of compute for activation memory."""

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ConfigError(f"model.dtype={self.dtype!r} is not supported; use one of {sorted(DTYPES)}.")


def hf_source(cfg: HFModelConfig, task: Task) -> PolicySource:
    path = Path(cfg.path).expanduser()
    if not cfg.path or not path.is_dir():
        raise ConfigError(
            f"model.path={cfg.path!r} is not a local directory; set model.path to a "
            "Hugging Face model folder (tsrl never downloads models at run time)."
        )
    if not cfg.gguf_file and (path / "config.json").is_file():
        path = text_decoder_folder(path, cfg.dtype, cfg.cache_dir)
    return PolicySource(path, cfg.dtype, cfg.gguf_file, cfg.trust_remote_code, dict(cfg.chat_template_kwargs))


MODELS.register("hf", HFModelConfig, hf_source)
