"""Generators: sample G completions per prompt and keep the policy's weights in sync; each registers in
GENERATORS with a builder (config, model, tokenizer, prompts=()) -> Generator."""

from __future__ import annotations

from collections.abc import Sequence

from tsrl.generation.base import Generator
from tsrl.generation.hf import HFGenerator, HFGeneratorConfig, chat_prompt
from tsrl.registry import GENERATORS
from tsrl.types import Prompt


def build_generator(cfg, model, tokenizer, prompts: Sequence[Prompt] = ()) -> Generator:
    """`prompts`: those the generator will be asked for (the task's train and eval prompts), for an engine that
    sizes its context by them (generator=vllm's max_model_len 0)."""
    return GENERATORS.build(cfg, model, tokenizer, prompts=prompts)


__all__ = ["Generator", "GENERATORS", "build_generator", "HFGenerator", "HFGeneratorConfig", "chat_prompt"]
