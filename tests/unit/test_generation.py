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


LLAMA_PACKED = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]}


def test_fused_group_names_the_vllm_layer_and_all_its_parts():
    """generator=vllm holds the parts of a fused layer until all have arrived: which HF names belong together."""
    from tsrl.generation.vllm import fused_group

    fused, members = fused_group("model.layers.3.self_attn.k_proj.weight", LLAMA_PACKED)
    assert fused == "model.layers.3.self_attn.qkv_proj.weight"
    assert members == {f"model.layers.3.self_attn.{m}_proj.weight" for m in "qkv"}
    fused, members = fused_group("model.layers.0.mlp.up_proj.bias", LLAMA_PACKED)
    assert (fused, members) == ("model.layers.0.mlp.gate_up_proj.bias",
                                {"model.layers.0.mlp.gate_proj.bias", "model.layers.0.mlp.up_proj.bias"})
    for alone in ("model.layers.0.self_attn.o_proj.weight", "model.embed_tokens.weight", "lm_head.weight", "bias"):
        assert fused_group(alone, LLAMA_PACKED) is None


def test_vllm_generator_settings_are_checked_without_vllm():
    from tsrl.errors import ConfigError
    from tsrl.generation.vllm import VLLMGeneratorConfig

    assert VLLMGeneratorConfig().sleep_level == 1
    for bad, field in [({"sleep_level": 3}, "sleep_level"), ({"dtype": "fp8"}, "dtype"), ({"top_p": 0.0}, "top_p"),
                       ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
                       ({"tensor_parallel_size": 0}, "max_new_tokens, tensor_parallel_size"), ({"max_model_len": -1}, "max_model_len")]:
        with pytest.raises(ConfigError, match=f"generator.{field}"):
            VLLMGeneratorConfig(**bad)
