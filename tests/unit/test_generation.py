"""The generator and the learner agree: on-policy log-probs recomputed by the learner equal the sampler's,
so the importance ratio is 1 before any update."""

import pytest
import torch

from tests.conftest import number_prompt
from tsrl.algo import group_advantages
from tsrl.generation import HFGenerator, HFGeneratorConfig
from tsrl.models.forward import collate, completion_logprobs


@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.7, 1.0)])
def test_learner_logprobs_match_sampler_logprobs(policy, temperature, top_p):
    model, tokenizer = policy
    prompts = [number_prompt("a", [0]), number_prompt("a longer prompt id", [0])]
    generator = HFGenerator(model, tokenizer, HFGeneratorConfig(temperature=temperature, top_p=top_p, max_new_tokens=10))
    groups = generator.generate(prompts, n=3)
    assert [g.size for g in groups] == [3, 3]
    assert all(len(r.token_ids) == len(r.logprobs) <= 10 for g in groups for r in g.rollouts)
    assert all(r.truncated == (tokenizer.eos_token_id not in r.token_ids) for g in groups for r in g.rollouts)
    batch = collate(groups, group_advantages(torch.rand(2, 3)), tokenizer.pad_token_id)
    with torch.no_grad():
        logp, _ = completion_logprobs(model, batch, temperature)
    mask = batch.completion_mask.bool()
    assert torch.allclose(logp[mask], batch.sampler_logprobs[mask], atol=1e-4)


def test_greedy_first_decodes_sample_zero_greedily_and_keeps_learner_logprobs(policy):
    """ArenaRL's anchor: completion 0 of each group is the greedy decode (the same text however often it is
    drawn, and the argmax at every step), the rest are samples; the log-probs of all of them still equal the
    learner's at the sampling temperature."""
    model, tokenizer = policy
    prompts = [number_prompt("a", [0]), number_prompt("b", [0])]
    generator = HFGenerator(model, tokenizer, HFGeneratorConfig(temperature=0.7, max_new_tokens=8))
    first = generator.generate(prompts, n=4, greedy_first=True)
    again = generator.generate(prompts, n=4, greedy_first=True)
    assert [g.size for g in first] == [4, 4]
    assert [g.rollouts[0].token_ids for g in first] == [g.rollouts[0].token_ids for g in again]
    batch = collate(first, torch.zeros(2, 4), tokenizer.pad_token_id)
    with torch.no_grad():
        logp, _ = completion_logprobs(model, batch, 0.7)
    mask = batch.completion_mask.bool()
    assert torch.allclose(logp[mask], batch.sampler_logprobs[mask], atol=1e-4)
    with torch.no_grad():  # sample 0 of each group: every token is the argmax of the policy's next-token logits
        position_ids = (batch.attention_mask.cumsum(-1) - 1).clamp_min(0)
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=position_ids).logits
    P = batch.prompt_width
    argmax = logits[:, P - 1:-1].argmax(-1)  # [N, T]
    for row in (0, 4):
        keep = batch.completion_mask[row].bool()
        assert torch.equal(argmax[row][keep], batch.input_ids[row, P:][keep])
    only = generator.generate(prompts[:1], n=1, greedy_first=True)
    assert only[0].rollouts[0].token_ids == first[0].rollouts[0].token_ids
