"""Held-out evaluation in fixed, seeded chunks (tsrl/evaluation/chunks.py): the samples and the sums do not depend
on how many processes share the prompts, and training's RNG does not move.

The fake generator samples like generator=hf: one draw from torch's global RNG for the whole batch, so a sample
depends on everything drawn before it in the same stream — the property that made one process and two disagree.
"""

from __future__ import annotations

import random

import torch

from tsrl.evaluation.chunks import (
    DEFAULT_CHUNK,
    ChunkPlan,
    chunk_bounds,
    chunk_seed,
    chunk_size,
    chunked_sums,
    ordered_total,
    rounds,
)
from tsrl.generation.hf import HFGeneratorConfig
from tsrl.testing.fakes import NumberTask, ScriptedJudge, number_prompt
from tsrl.types import Group, Rollout

PROMPTS = [number_prompt(f"p{i}", [0.5, 1.5, 2.5]) for i in range(7)]


class BatchSampler:
    """Completions "q=<x>" with x drawn for the whole batch at once from torch's global RNG; records each call's
    prompt ids."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def generate(self, prompts, n):
        self.calls.append([p.id for p in prompts])
        draws = (torch.rand(len(prompts), n) * 3).tolist()  # [B, n]
        return [
            Group(p, [1], [Rollout(f"q={x:.6f}", [1, 2], [0.0, 0.0], False) for x in row])
            for p, row in zip(prompts, draws)
        ]


def evaluate(world: int, size: int = 3, seed: int = 1234) -> tuple[dict, list[list[str]], list[list[str]]]:
    """Every process's chunks of one evaluation over PROMPTS: the ordered total of the sums, the completions of
    each chunk in prompt order, and each process's generate calls."""
    results, calls = [], []
    for rank in range(world):
        generator = BatchSampler()
        results += chunked_sums(
            NumberTask(), generator, ScriptedJudge(), PROMPTS, ChunkPlan(2, seed, size, rank, world)
        )
        calls.append(generator.calls)
    results.sort(key=lambda r: r.index)
    texts = [[r.text for g in result.groups for r in g.rollouts] for result in results]
    return ordered_total([(r.index, r.sums) for r in results]), texts, calls


def test_one_two_and_three_processes_draw_the_same_samples_and_the_same_sums() -> None:
    one, two, three = evaluate(1), evaluate(2), evaluate(3)
    assert len(one[1]) == 3 and len(set(map(tuple, one[1]))) == 3  # chunks [0, 3), [3, 6), [6, 7)
    assert two[1] == one[1] and three[1] == one[1]
    assert two[0] == one[0] and three[0] == one[0]  # to the bit: the same additions in the same order
    assert one[0]["samples"] == 2 * len(PROMPTS)


def test_the_seed_and_the_chunk_size_change_the_samples() -> None:
    """Not a constant: another evaluation seed draws other samples; another chunk size cuts other batches."""
    assert evaluate(1, seed=99)[1][0] != evaluate(1)[1][0]
    assert [t for chunk in evaluate(1, size=2)[1] for t in chunk] != [t for chunk in evaluate(1)[1] for t in chunk]


def test_a_process_without_a_chunk_in_a_round_still_generates_to_keep_in_step() -> None:
    """3 chunks on 2 processes: process 1 has chunk 1, then nothing while process 0 generates chunk 2."""
    assert rounds(3, 0, 2) == [0, 2] and rounds(3, 1, 2) == [1, None]
    assert rounds(2, 3, 4) == [None] and rounds(0, 0, 1) == []
    _, _, calls = evaluate(2)
    assert calls == [[["p0", "p1", "p2"], ["p6"]], [["p3", "p4", "p5"], ["p0"]]]  # p0: the throwaway group


def test_training_rng_does_not_move() -> None:
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    evaluate(1)
    assert torch.equal(torch.rand(3), expected)


def test_chunks_bounds_and_seeds() -> None:
    assert chunk_bounds(7, 3) == [(0, 3), (3, 6), (6, 7)] and chunk_bounds(0, 3) == []
    seeds = {chunk_seed(s, c) for s in (0, 1, 1234) for c in range(1, 51)}
    assert len(seeds) == 150 and chunk_seed(1234, 3) == chunk_seed(1234, 3)
    assert chunk_seed(1234, 0) == 1234 and chunk_seed(-5, 0) == -5 and chunk_seed(-5, 1) >= 0


def test_a_chunk_is_one_generate_call_of_the_hf_generator() -> None:
    assert chunk_size(HFGeneratorConfig(prompts_per_call=5)) == 5
    assert chunk_size(object()) == DEFAULT_CHUNK


def test_ordered_total_adds_in_chunk_order_whatever_order_the_chunks_arrive_in() -> None:
    """0.1 + 0.2 + 0.3 depends on the grouping in floating point; the total must not depend on arrival order."""
    chunks = [(i, {"wins": v, **({"missing": 1.0} if i == 2 else {})}) for i, v in enumerate([0.1, 0.2, 0.3, 1e-17])]
    expected = ordered_total(chunks)
    for seed in range(10):
        shuffled = chunks[:]
        random.Random(seed).shuffle(shuffled)
        assert ordered_total(shuffled) == expected
    assert expected == {"wins": ((0.1 + 0.2) + 0.3) + 1e-17, "missing": 1.0}
