"""Generators: sample G completions per prompt and keep the policy's weights in sync; each registers in
GENERATORS with a builder (config, model, tokenizer) -> Generator."""

from __future__ import annotations

from tsrl.generation.base import Generator
from tsrl.generation.hf import HFGenerator, HFGeneratorConfig, chat_prompt
from tsrl.registry import GENERATORS


def build_generator(cfg, model, tokenizer) -> Generator:
    return GENERATORS.build(cfg, model, tokenizer)


__all__ = ["Generator", "GENERATORS", "build_generator", "HFGenerator", "HFGeneratorConfig", "chat_prompt"]
