"""Where a policy's weights live, and loading them.

A model family (tiny, hf, smollm2, a plugin) turns its config into a `PolicySource`: a local Hugging Face folder
plus how to read it. The folder is made first (built, converted or checked) on one process; every process then
loads it with `load_source`. Under DeepSpeed ZeRO-3 accelerate has registered the DeepSpeed config with
transformers before this runs, so `from_pretrained` builds the model inside `deepspeed.zero.Init` and each
process keeps only its partition of every parameter as the checkpoint streams in — the full model never sits
in one process's memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class PolicySource:
    """A local Hugging Face model folder and how to load it."""

    path: Path
    dtype: str = "float32"
    gguf_file: str = ""  # a GGUF file inside `path` (transformers de-quantises it to dtype)
    trust_remote_code: bool = False


def load_tokenizer(source: PolicySource):
    from transformers import AutoTokenizer

    extra = {"gguf_file": source.gguf_file} if source.gguf_file else {}
    tokenizer = AutoTokenizer.from_pretrained(
        source.path, local_files_only=True, trust_remote_code=source.trust_remote_code, **extra
    )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(source: PolicySource) -> torch.nn.Module:
    """The causal LM of the folder (partitioned as it loads when ZeRO-3 is active)."""
    from transformers import AutoModelForCausalLM

    extra = {"gguf_file": source.gguf_file} if source.gguf_file else {}
    return AutoModelForCausalLM.from_pretrained(
        source.path,
        local_files_only=True,
        dtype=DTYPES[source.dtype],
        trust_remote_code=source.trust_remote_code,
        **extra,
    )


def load_source(source: PolicySource) -> tuple[torch.nn.Module, object]:
    """(model, tokenizer) of a source."""
    return load_model(source), load_tokenizer(source)
