"""The generator and the learner agree: on-policy log-probs recomputed by the learner equal the sampler's,
so the importance ratio is 1 before any update."""

import pytest
import torch

from tsrl.algo import group_advantages
from tsrl.generation import HFGenerator, HFGeneratorConfig
from tsrl.models.forward import collate, completion_logprobs
from tsrl.testing.fakes import number_prompt


@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.7, 1.0)])
def test_learner_logprobs_match_sampler_logprobs(policy, temperature, top_p):
    model, tokenizer = policy
    prompts = [number_prompt("a", [0]), number_prompt("a longer prompt id", [0])]
    generator = HFGenerator(
        model, tokenizer, HFGeneratorConfig(temperature=temperature, top_p=top_p, max_new_tokens=10)
    )
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
    argmax = logits[:, P - 1 : -1].argmax(-1)  # [N, T]
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
    assert (fused, members) == (
        "model.layers.0.mlp.gate_up_proj.bias",
        {"model.layers.0.mlp.gate_proj.bias", "model.layers.0.mlp.up_proj.bias"},
    )
    for alone in ("model.layers.0.self_attn.o_proj.weight", "model.embed_tokens.weight", "lm_head.weight", "bias"):
        assert fused_group(alone, LLAMA_PACKED) is None


def test_vllm_generator_settings_are_checked_without_vllm():
    from tsrl.errors import ConfigError
    from tsrl.generation.vllm_config import VLLMGeneratorConfig

    assert VLLMGeneratorConfig().sleep_level == 2  # the weights are replaced at every sync
    for bad, field in [
        ({"sleep_level": 3}, "sleep_level"),
        ({"dtype": "fp8"}, "dtype"),
        ({"top_p": 0.0}, "top_p"),
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
        ({"tensor_parallel_size": 0}, "max_new_tokens, tensor_parallel_size"),
        ({"max_model_len": -1}, "max_model_len"),
    ]:
        with pytest.raises(ConfigError, match=f"generator.{field}"):
            VLLMGeneratorConfig(**bad)


# ----- shared prompts: the learner's forward and the generator's prefill ------------------------------------------


def _groups(policy, prompts, n=4, **cfg):
    model, tokenizer = policy
    return HFGenerator(model, tokenizer, HFGeneratorConfig(max_new_tokens=10, **cfg)).generate(prompts, n=n)


def _logprobs_and_grads(model, batch, share):
    model.zero_grad()
    logp, _ = completion_logprobs(model, batch, 0.8, share_prompt=share)
    (logp * batch.completion_mask * torch.linspace(-1, 1, logp.shape[1])).sum().backward()
    return logp.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("adapter", [False, True])
def test_shared_prompt_forward_gives_the_full_forward_logprobs_and_gradients(policy, adapter):
    """Each distinct prompt runs once and its keys/values are repeated to the group's rows: the log-probs and
    every parameter's gradient equal one full forward per sequence (prompts of different lengths, left padding
    included); with a LoRA adapter too, whose gradient reaches the adapter only."""
    import copy

    model, tokenizer = policy
    model = copy.deepcopy(model).train()
    if adapter:
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(3)
        model = get_peft_model(
            model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        )
    prompts = [number_prompt("a", [0]), number_prompt("a much longer prompt id here", [0]), number_prompt("b", [0])]
    groups = _groups((model, tokenizer), prompts)
    batch = collate(groups, torch.zeros(3, 4), tokenizer.pad_token_id)
    full, full_grads = _logprobs_and_grads(model, batch, share=False)
    shared, shared_grads = _logprobs_and_grads(model, batch, share=True)
    mask = batch.completion_mask.bool()
    assert torch.allclose(full[mask], shared[mask], atol=1e-5)
    trained = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trained and (not adapter or all("lora" in name for name in trained))
    for name in trained:
        assert full_grads[name].abs().max() > 0, name
        assert torch.allclose(full_grads[name], shared_grads[name], rtol=1e-4, atol=1e-6), name


def test_shared_prompt_forward_is_skipped_when_no_prompt_repeats(policy, monkeypatch):
    """One row per prompt: nothing to share, the full forward runs (and the result is the same)."""
    from tsrl.models import forward

    model, tokenizer = policy
    groups = _groups(policy, [number_prompt("a", [0]), number_prompt("b", [0])], n=1)
    batch = collate(groups, torch.zeros(2, 1), tokenizer.pad_token_id)
    assert forward._shared_prompts(batch) is None
    repeated = collate(_groups(policy, [number_prompt("a", [0])], n=3), torch.zeros(1, 3), tokenizer.pad_token_id)
    distinct, mask, inverse = forward._shared_prompts(repeated)
    assert distinct.shape[0] == 1 and inverse.tolist() == [0, 0, 0]


@pytest.mark.parametrize("kv_cache", ["static", "dynamic"])
def test_prefilled_generation_draws_the_tokens_generate_draws(policy, kv_cache):
    """The generator runs each prompt once and repeats its cache to the n samples: under the same seeds it draws
    the very tokens, with the same log-probs, as generate() expanding every prompt n times itself."""
    from tsrl.generation.hf import SeededSampling, chat_prompt

    model, tokenizer = policy
    prompts = [number_prompt("a", [0]), number_prompt("a much longer prompt id here", [0])]
    generator = HFGenerator(model, tokenizer, HFGeneratorConfig(temperature=0.9, max_new_tokens=12, kv_cache=kv_cache))
    groups = generator.generate(prompts, n=3, seeds=[11, 500])
    tokenizer.padding_side = "left"
    enc = tokenizer(
        [chat_prompt(tokenizer, p) for p in prompts], return_tensors="pt", padding=True, add_special_tokens=False
    )
    sampler = SeededSampling(0.9, 1.0, [11, 12, 13, 500, 501, 502], torch.device("cpu"))  # group seed + index
    with torch.no_grad():
        out = model.generate(  # every prompt expanded to its 3 rows, run whole by generate() itself
            input_ids=enc["input_ids"].repeat_interleave(3, 0),
            attention_mask=enc["attention_mask"].repeat_interleave(3, 0),
            do_sample=False,
            logits_processor=[sampler],
            max_new_tokens=12,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    drawn = [r.token_ids for g in groups for r in g.rollouts]
    assert len({tuple(ids) for ids in drawn}) > 1
    logprobs = torch.stack(sampler.logprobs, dim=1).tolist()  # [6, T]
    for row, lps, rollout in zip(
        out[:, enc["input_ids"].shape[1] :].tolist(), logprobs, (r for g in groups for r in g.rollouts)
    ):
        assert row[: len(rollout.token_ids)] == rollout.token_ids
        assert lps[: len(rollout.logprobs)] == pytest.approx(rollout.logprobs, abs=1e-5)


def test_unknown_kv_cache_is_refused():
    from tsrl.errors import ConfigError

    with pytest.raises(ConfigError, match="kv_cache"):
        HFGeneratorConfig(kv_cache="paged")
