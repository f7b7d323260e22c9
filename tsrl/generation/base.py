"""The Generator protocol: what the trainer asks of a sampler. Its lifecycle methods have no-op bodies, which
a generator that subclasses the protocol inherits (the hf generator shares the policy's module and has nothing
to free); vLLM's engine implements them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import torch

from tsrl.types import Emit, Group, Prompt


class Generator(Protocol):
    def generate(
        self,
        prompts: Sequence[Prompt],
        n: int,
        max_new_tokens: int | None = None,
        greedy_first: bool = False,
        emit: Emit | None = None,
        seeds: Sequence[int] | None = None,
    ) -> list[Group]:
        """n completions per prompt (completion 0 greedy with greedy_first); `emit`, if given, receives every group
        as soon as it is finished, before generate returns (trainer.pipeline=stream). `seeds`: each prompt's group
        seed, completion j drawn under seed + j (tsrl.generation.seeds); None = drawn from torch's global RNG."""

    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None: ...

    def sleep(self) -> None:
        """Free what the engine holds (its KV cache, at vLLM's level 2 its weights) while the policy updates; a
        generator that shares the policy's module has nothing to free."""

    def wake_up(self, tags: Sequence[str] | None = None) -> None:
        """Take back what sleep freed: ("weights",) before the new weights arrive, ("kv_cache",) after them (vLLM's
        names), None: everything."""

    def close(self) -> None:
        """Release the engine at the end of the run."""
