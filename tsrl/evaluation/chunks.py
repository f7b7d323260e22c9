"""Held-out samples that do not depend on how many processes evaluate.

The held-out prompts are cut into fixed chunks of `size` prompts (the generator's batch, so that a chunk is one
generate call); chunk c is generated under its own seed, derived from (evaluation seed, c), and the chunks go
round-robin to the processes. A chunk's samples then depend only on its prompts and its seed — the evaluation names
no sampling seeds, so both generators draw each prompt's group seed from torch's global RNG in prompt order
(tsrl.generation.seeds), which the chunk's seed sets — and not on which process draws them or what it drew before.
Training's samples have seeds of their own (tsrl.training.sampler), which evaluation neither uses nor moves. Each
chunk's sums are kept apart and the caller adds them in chunk order, so one process and eight give the same samples
and, to the bit, the same metric.

Under ZeRO-3 (generator=hf: the forward gathers parameters) and vLLM tensor parallelism a generate call is
collective: every process makes the same number of them. A process with no chunk left in a round while others
still have one generates a throwaway group (one prompt) to keep in step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

from tsrl.evaluation import evaluation_sums
from tsrl.types import Group, Prompt

DEFAULT_CHUNK = 16
"""Prompts per chunk for a generator without a batch setting of its own (generator=vllm)."""


class ChunkResult(NamedTuple):
    """One chunk's evaluation: its index (position in the prompt order), its sums and its generated groups."""

    index: int
    sums: dict[str, float]
    groups: list[Group]


def chunk_bounds(n_prompts: int, size: int) -> list[tuple[int, int]]:
    """[start, stop) of each chunk of `size` consecutive prompts (the last may be shorter)."""
    return [(start, min(start + size, n_prompts)) for start in range(0, n_prompts, size)]


def chunk_seed(seed: int, index: int) -> int:
    """The sampling seed of chunk `index` of an evaluation seeded `seed`: chunk 0 samples under the seed itself (an
    evaluation of one chunk is `torch.manual_seed(seed)` and one generate call), every later chunk under a seed of
    its own drawn from (seed, index)."""
    if index == 0:
        return seed
    return int(np.random.SeedSequence([seed & (2**64 - 1), index]).generate_state(1)[0])


def rounds(n_chunks: int, rank: int, world: int) -> list[int | None]:
    """The chunk process `rank` of `world` generates in each round (round-robin), None where it has none left
    while another process still has one."""
    total = -(-n_chunks // world)  # ceil
    return [c if (c := r * world + rank) < n_chunks else None for r in range(total)]


def chunk_size(generator_cfg: Any) -> int:
    """Prompts per chunk: the generator's batch (generator.prompts_per_call) where it has one, so that a chunk is
    one generate call, else DEFAULT_CHUNK."""
    return int(getattr(generator_cfg, "prompts_per_call", DEFAULT_CHUNK))


def ordered_total(chunk_sums: Sequence[tuple[int, dict[str, float]]]) -> dict[str, float]:
    """Every chunk's sums, (index, sums) from any process in any order, added in chunk order: the same float
    additions on one process and on many."""
    total: dict[str, float] = {}
    for _, sums in sorted(chunk_sums, key=lambda chunk: chunk[0]):
        for key, value in sums.items():
            total[key] = total.get(key, 0.0) + value
    return total


def fork_devices() -> list[int]:
    """The accelerator whose RNG evaluation must leave untouched besides the CPU's: the current CUDA device."""
    return [torch.cuda.current_device()] if torch.cuda.is_available() else []


@dataclass(frozen=True)
class ChunkPlan:
    """How one evaluation is cut into chunks and shared between processes."""

    samples: int
    """Completions per prompt."""
    seed: int
    """The evaluation's seed; chunk c samples under chunk_seed(seed, c)."""
    size: int
    """Prompts per chunk (the generator's batch: generator.prompts_per_call where it has one)."""
    rank: int = 0
    """This process."""
    world: int = 1
    """Processes sharing the chunks."""


def chunked_sums(
    task: Any, generator: Any, judge: Any, prompts: Sequence[Prompt], plan: ChunkPlan
) -> list[ChunkResult]:
    """The evaluation sums and groups of this process's chunks, each generated under its own seed; torch's RNG
    (CPU and the current CUDA device) is left where it was."""
    bounds = chunk_bounds(len(prompts), plan.size)
    results = []
    with torch.random.fork_rng(devices=fork_devices()):
        for index in rounds(len(bounds), plan.rank, plan.world):
            if index is None:
                generator.generate(prompts[:1], plan.samples)  # in step with the processes that still generate
                continue
            start, stop = bounds[index]
            torch.manual_seed(chunk_seed(plan.seed, index))
            groups: list[Group] = []
            sums = evaluation_sums(task, generator, judge, prompts[start:stop], plan.samples, groups)
            results.append(ChunkResult(index, sums, groups))
    return results
