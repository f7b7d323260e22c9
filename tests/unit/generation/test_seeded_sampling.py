"""generator=hf samples row by row: each completion under its own seed (group seed + index), so what it says does
not depend on the batch it is decoded in, on torch's global RNG, or on whether completion 0 is greedy; and what it
samples from is the distribution transformers' own warpers make."""

from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

from tsrl.generation import HFGenerator, HFGeneratorConfig
from tsrl.generation.hf import SeededSampling, processed_logits
from tsrl.testing.fakes import number_prompt

PROMPTS = [number_prompt("a", [0]), number_prompt("a much longer prompt id here", [0]), number_prompt("b", [0])]


def texts(groups) -> list[list[list[int]]]:
    return [[r.token_ids for r in g.rollouts] for g in groups]


@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.7, 1.0), (1.3, 0.8), (0.9, 0.3)])
def test_processed_logits_are_transformers_warpers_to_the_bit(temperature, top_p):
    """The distribution drawn from, and whose log-probs are returned, is generate()'s own: temperature, then
    top-p, bit for bit."""
    torch.manual_seed(0)
    logits = torch.randn(5, 300) * 3  # [R, V]
    expected = TopPLogitsWarper(top_p)(None, TemperatureLogitsWarper(temperature)(None, logits))
    ours = processed_logits(logits, temperature, top_p)
    assert torch.equal(ours, expected)
    assert (torch.isinf(ours).sum() > 0) == (top_p < 1)


def test_seeded_sampling_draws_from_the_processed_distribution():
    """4,000 rows, each its own seed, over 4 tokens with p = softmax(logits / 0.8) after a top-p of 0.9: each
    token's frequency has standard deviation ≤ sqrt(0.25 / 4000) ≈ 0.008, so 0.04 (5σ) is met unless the draw is
    biased; the token top-p removed is never drawn; the recorded log-prob is that of the processed distribution."""
    logits = torch.tensor([[2.0, 1.0, 0.5, -3.0]]).repeat(4000, 1)  # [R, V]
    sampler = SeededSampling(0.8, 0.9, range(4000), torch.device("cpu"))
    noisy = sampler(None, logits)
    drawn = noisy.argmax(dim=-1)  # [R]
    processed = processed_logits(logits[:1], 0.8, 0.9)[0]
    p = processed.softmax(dim=-1)
    assert p[3] == 0 and (drawn == 3).sum() == 0
    frequency = torch.bincount(drawn, minlength=4).float() / len(drawn)
    assert torch.allclose(frequency, p, atol=0.04)
    assert torch.allclose(sampler.logprobs[0], torch.log_softmax(processed, -1)[drawn])


def test_a_completion_depends_on_its_seed_not_on_its_batch_or_the_global_rng(policy):
    """The same prompt and group seed give the same completions alone, among other prompts, in chunks of another
    size, and whatever torch's global RNG holds; group seed 71 draws completion j under 71 + j, which is completion
    j + 1 of group seed 70 (vLLM's rule for a seeded request's n samples)."""
    model, tokenizer = policy
    cfg = dict(temperature=0.9, max_new_tokens=10)
    together = HFGenerator(model, tokenizer, HFGeneratorConfig(**cfg)).generate(PROMPTS, n=3, seeds=[7, 70, 700])
    torch.manual_seed(123)
    alone = HFGenerator(model, tokenizer, HFGeneratorConfig(**cfg)).generate(PROMPTS[1:2], n=3, seeds=[70])
    torch.manual_seed(456)
    chunked = HFGenerator(model, tokenizer, HFGeneratorConfig(prompts_per_call=2, **cfg)).generate(
        PROMPTS[::-1], n=3, seeds=[700, 70, 7]
    )
    assert texts(alone) == texts(together[1:2])
    assert texts(chunked) == texts(together[::-1])
    assert len({tuple(ids) for group in texts(together) for ids in group}) > 3  # samples, not one greedy text
    other = HFGenerator(model, tokenizer, HFGeneratorConfig(**cfg)).generate(PROMPTS[1:2], n=3, seeds=[71])
    assert texts(other)[0][:2] == texts(alone)[0][1:] and texts(other) != texts(alone)


def test_greedy_first_keeps_completion_zero_greedy_and_the_others_drawn_under_their_own_index(policy):
    """With greedy_first, completion 0 is the greedy decode and completions 1 … n − 1 are the ones a fully sampled
    group with the same seed draws at those indexes (seed + j)."""
    model, tokenizer = policy
    generator = HFGenerator(model, tokenizer, HFGeneratorConfig(temperature=0.9, max_new_tokens=10))
    anchored = generator.generate(PROMPTS[:2], n=4, greedy_first=True, seeds=[5, 9])
    sampled = generator.generate(PROMPTS[:2], n=4, seeds=[5, 9])
    greedy = generator.generate(PROMPTS[:2], n=1, greedy_first=True, seeds=[1, 2])
    assert [t[1:] for t in texts(anchored)] == [t[1:] for t in texts(sampled)]
    assert [t[0] for t in texts(anchored)] == [t[0] for t in texts(greedy)]


def test_without_seeds_the_global_rng_decides():
    """A caller that names no seeds (evaluation's chunks, the ladder builders) draws them from torch's global RNG:
    the same global seed, the same group seeds; the count must match the prompts when seeds are named."""
    from tsrl.generation.seeds import SEED_LIMIT, group_seeds

    torch.manual_seed(3)
    first = group_seeds(None, 4)
    torch.manual_seed(3)
    assert group_seeds(None, 4) == first and len(set(first)) == 4
    assert all(0 <= s < SEED_LIMIT for s in first)
    assert group_seeds([1, 2], 2) == [1, 2]
    with pytest.raises(ValueError, match="one seed per prompt"):
        group_seeds([1], 2)
