"""Where a policy's weights live, and loading them.

A model family (tiny, hf, smollm2, a plugin) turns its config into a `PolicySource`: a local Hugging Face folder
plus how to read it. The folder is made first (built, converted or checked) on one process; every process then
loads it with `load_source`. Under DeepSpeed ZeRO-3 accelerate has registered the DeepSpeed config with
transformers before this runs, so `from_pretrained` builds the model inside `deepspeed.zero.Init` and each
process keeps only its partition of every parameter as the checkpoint streams in — the full model never sits
in one process's memory.

The policy's chat-template switches (`model.chat_template_kwargs`, e.g. Qwen3's enable_thinking) travel on its
tokenizer (the attribute CHAT_TEMPLATE_KWARGS), so every place that renders the policy's prompts
(tsrl.generation.hf.chat_prompt) renders them the same way.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from tsrl.errors import ConfigError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
CHAT_TEMPLATE_KWARGS = "tsrl_chat_template_kwargs"  # the tokenizer attribute chat_prompt reads


@dataclass(frozen=True)
class PolicySource:
    """A local Hugging Face model folder and how to load it."""

    path: Path
    dtype: str = "float32"
    gguf_file: str = ""  # a GGUF file inside `path` (transformers de-quantises it to dtype)
    trust_remote_code: bool = False
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict, hash=False)  # switches of the chat template


def load_tokenizer(source: PolicySource):
    from transformers import AutoTokenizer

    extra = {"gguf_file": source.gguf_file} if source.gguf_file else {}
    tokenizer = AutoTokenizer.from_pretrained(
        source.path, local_files_only=True, trust_remote_code=source.trust_remote_code, **extra
    )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    check_template_switches(tokenizer.chat_template, source.chat_template_kwargs, source.path)
    setattr(tokenizer, CHAT_TEMPLATE_KWARGS, dict(source.chat_template_kwargs))
    return tokenizer


def check_template_switches(template: str | dict | None, switches: dict[str, Any], path: Path) -> None:
    """Refuse a switch the chat template never reads: Jinja ignores an unknown variable, so a misspelt or
    misplaced switch (enable_thinking on a model without thinking) would otherwise change nothing, silently."""
    for name in switches:
        if template is None or name not in str(template):
            raise ConfigError(
                f"model.chat_template_kwargs.{name} is set, but the chat template of {path} "
                f"{'does not exist' if template is None else f'never reads {name!r}'}; remove the switch "
                f"(~model.chat_template_kwargs.{name}) or point model.path at a model whose template has it."
            )


def load_model(source: PolicySource) -> torch.nn.Module:
    """The causal LM of the folder (partitioned as it loads when ZeRO-3 is active)."""
    from transformers import AutoModelForCausalLM

    extra = {"gguf_file": source.gguf_file} if source.gguf_file else {}
    model = AutoModelForCausalLM.from_pretrained(
        source.path,
        local_files_only=True,
        dtype=DTYPES[source.dtype],
        trust_remote_code=source.trust_remote_code,
        **extra,
    )
    add_vllm_fields(model.config)
    return model


def add_vllm_fields(config: Any) -> None:
    """Config entries vLLM reads under other names than transformers, added so that an engine started from this
    config (generator=vllm writes it to the engine's folder; a saved checkpoint carries it) computes what the
    learner computes. Ministral 3 scales its queries by 1 + β·log(1 + ⌊position / original context⌋) (the
    "llama 4" attention scaling): transformers reads β from rope_parameters, vLLM's Mistral model only from a
    `llama_4_scaling` entry, and without it vLLM's log-probs differ past the original context (measured on CPU:
    tests/integration/test_vllm_ministral3.py)."""
    rope = getattr(config, "rope_parameters", None) or {}
    if getattr(config, "model_type", "") == "ministral3" and rope.get("llama_4_scaling_beta") is not None:
        config.llama_4_scaling = {
            "original_max_position_embeddings": rope["original_max_position_embeddings"],
            "beta": rope["llama_4_scaling_beta"],
        }


def load_source(source: PolicySource) -> tuple[torch.nn.Module, object]:
    """(model, tokenizer) of a source."""
    return load_model(source), load_tokenizer(source)


def build_once(target: Path, build: Callable[[Path], None]) -> Path:
    """`target`, made by build(folder) into a fresh temporary sibling and renamed into place, unless it is
    there already. The rename is atomic; if another process renamed its copy first, ours is discarded."""
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"{target.name}.tmp-", dir=target.parent))
    try:
        build(scratch)
        for made in scratch.iterdir():  # mkdtemp makes 0700 (and some writers 0600): a shared cache is readable
            made.chmod(0o755 if made.is_dir() else 0o644)
        scratch.chmod(0o755)
        try:
            os.rename(scratch, target)  # fails on an existing non-empty target, never merges
        except OSError:
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # gone already after a successful rename
    return target
