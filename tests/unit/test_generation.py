"""The generator and the learner agree: on-policy log-probs recomputed by the learner equal the sampler's,
so the importance ratio is 1 before any update."""

import pytest
import torch

from tests.conftest import number_prompt
from tsrl.algo import group_advantages
from tsrl.generation import HFGenerator, HFGeneratorConfig
from tsrl.training.rollouts import collate, completion_logprobs


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
