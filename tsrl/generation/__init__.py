"""Generators: sample G completions per prompt and keep the policy's weights in sync; each registers in
GENERATORS with a builder (config, model, tokenizer) -> Generator."""

from __future__ import annotations

from typing import Iterable, Protocol, Sequence

import torch

from tsrl.generation.hf import HFGenerator, HFGeneratorConfig, chat_prompt
from tsrl.registry import GENERATORS
from tsrl.types import Group, Prompt


class Generator(Protocol):
    def generate(self, prompts: Sequence[Prompt], n: int, max_new_tokens: int | None = None,
                 greedy_first: bool = False) -> list[Group]: ...

    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None: ...


def build_generator(cfg, model, tokenizer) -> Generator:
    return GENERATORS.build(cfg, model, tokenizer)


__all__ = ["Generator", "GENERATORS", "build_generator", "HFGenerator", "HFGeneratorConfig", "chat_prompt"]
