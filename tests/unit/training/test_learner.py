"""The Learner on one process: weights handed to the generator (bucketed, LoRA merged on the fly, the trainer's
modules never merged), the consolidated folder it saves, the reference policy and the view regimes get."""

from __future__ import annotations

import copy

import pytest
import torch

from tsrl.algo import GRPOConfig
from tsrl.config import RunConfig, TrainerConfig
from tsrl.generation import HFGeneratorConfig
from tsrl.models.lora import LoraSettings, add_adapter
from tsrl.models.view import PolicyView
from tsrl.training.learner import Learner


def make_learner(model, tokenizer, kl_beta: float = 0.0) -> Learner:
    from accelerate import Accelerator

    cfg = RunConfig(
        task=None,
        model=None,
        judge=None,
        reward=None,
        algo=GRPOConfig(kl_beta=kl_beta),
        generator=HFGeneratorConfig(max_new_tokens=8),
        trainer=TrainerConfig(micro_batch_size=4),
        logger=None,
    )
    return Learner(cfg, Accelerator(cpu=True), model, tokenizer)


def adapted(model, seed: int = 0):
    """The model with a LoRA adapter whose B is non-zero (a fresh adapter merges to the base exactly)."""
    torch.manual_seed(seed)
    model = add_adapter(copy.deepcopy(model), LoraSettings(r=4, alpha=8.0))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.1)
    return model


@pytest.mark.parametrize("bucket", [1, 500, 10**9], ids=["one_per_bucket", "small_buckets", "one_bucket"])
def test_sync_hands_out_every_weight_under_its_hf_name(policy, bucket):
    model, tokenizer = policy
    learner = make_learner(copy.deepcopy(model), tokenizer)
    synced = {name: tensor.clone() for name, tensor in learner.weights_for_sync(bucket_elements=bucket)}
    expected = dict(model.named_parameters())  # tied weights appear once, as the generator loads them
    assert sorted(synced) == sorted(expected)
    assert all(torch.equal(synced[name], expected[name]) for name in expected)


def test_lora_sync_hands_out_the_base_unmerged_and_the_adapter_as_peft_saves_it(policy):
    """The engine applies the adapter itself (tsrl/generation/vllm_lora.py): the base weights under the base names,
    unmerged, then the adapter's weights under the names of peft's saved adapter (no adapter name)."""
    from peft import get_peft_model_state_dict

    model, tokenizer = policy
    peft_model = adapted(model)
    saved = get_peft_model_state_dict(peft_model)  # what peft writes to adapter_model.safetensors
    learner = make_learner(peft_model, tokenizer)
    synced = dict(learner.weights_for_sync(bucket_elements=300))
    base = dict(model.named_parameters())
    assert sorted(synced) == sorted([*base, *saved])
    assert all(torch.equal(synced[name], base[name]) for name in base)  # unmerged
    assert all(torch.equal(synced[name], saved[name]) for name in saved)
    assert all(".lora_" in name and name.startswith("base_model.model.") for name in saved)


def test_lora_merged_weights_merge_each_layer_without_merging_the_trainer(policy):
    model, tokenizer = policy
    peft_model = adapted(model)
    reference = copy.deepcopy(peft_model).merge_and_unload()
    before = {n: p.clone() for n, p in peft_model.named_parameters()}
    learner = make_learner(peft_model, tokenizer)
    merged = dict(learner.merged_weights(bucket_elements=300))
    assert sorted(merged) == sorted(n for n, _ in reference.named_parameters())
    for name, param in reference.named_parameters():
        assert torch.allclose(merged[name], param, atol=1e-6), name
    assert any(not torch.equal(merged[n], p) for n, p in model.named_parameters())  # the adapter is in there
    after = dict(learner.module.named_parameters())
    assert all(torch.equal(before[n], after[n]) for n in before)  # the trainer's modules were never merged
    adapter = dict(learner.weights_for_sync(adapter_only=True))
    assert adapter and all("lora_" in name for name in adapter)


def test_the_adapter_trains_at_model_lora_lr(policy):
    """model.lora.lr (the GPU model configs' LoRA option: 2.5e-5) wins over trainer.lr for the adapter; 0 keeps
    trainer.lr."""
    from accelerate import Accelerator

    from tsrl.models.hf import HFModelConfig

    model, tokenizer = policy
    for lora_lr, expected in ((2.5e-5, 2.5e-5), (0.0, 1e-3)):
        cfg = RunConfig(
            task=None,
            model=HFModelConfig(path="unused", lora=LoraSettings(r=4, lr=lora_lr)),
            judge=None,
            reward=None,
            algo=GRPOConfig(),
            generator=HFGeneratorConfig(max_new_tokens=8),
            trainer=TrainerConfig(micro_batch_size=4, lr=1e-3),
            logger=None,
        )
        learner = Learner(cfg, Accelerator(cpu=True), adapted(model), tokenizer)
        assert learner.optimizer.param_groups[0]["lr"] == expected


def test_saved_folder_loads_as_the_merged_policy(policy, tmp_path):
    from transformers import AutoModelForCausalLM

    model, tokenizer = policy
    peft_model = adapted(model)
    ids = torch.tensor([[3, 7, 11, 5]])
    expected = copy.deepcopy(peft_model).merge_and_unload()(ids).logits
    learner = make_learner(peft_model, tokenizer)
    learner.save_pretrained(tmp_path / "policy")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "policy")
    assert torch.allclose(loaded(ids).logits, expected, atol=1e-5)
    assert (tmp_path / "policy" / "adapter" / "adapter_config.json").is_file()
    assert (tmp_path / "policy" / "tokenizer.json").is_file()


def test_lora_reference_is_the_base_with_the_adapter_off(policy):
    from tsrl.models.forward import collate
    from tsrl.types import Group, Prompt, Rollout

    model, tokenizer = policy
    learner = make_learner(adapted(model), tokenizer, kl_beta=0.1)
    group = Group(Prompt("p", ""), [3, 7, 11], [Rollout("", [5, 9, 2], [0.0] * 3, False)])
    batch = collate([group], torch.zeros(1, 1), tokenizer.pad_token_id)
    base = PolicyView(model).logprobs(batch, 1.0, micro=4)
    assert torch.allclose(learner.logprobs(batch, 1.0, reference=True), base, atol=1e-6)
    assert not torch.allclose(learner.logprobs(batch, 1.0), base, atol=1e-4)  # the adapter is on otherwise


def test_the_view_is_frozen_and_its_initial_weights_stay_put(policy):
    model, tokenizer = policy
    learner = make_learner(copy.deepcopy(model), tokenizer)
    view = learner.policy_view()
    start = view.initial().fingerprint()
    with torch.no_grad():
        for param in learner.module.parameters():
            param.add_(0.01)
    assert view.fingerprint() != start  # the live policy moved
    assert view.initial().fingerprint() == start  # its initial weights did not
