"""model.gradient_checkpointing: the same log-probs and gradients as without it (full fine-tuning and LoRA, with
trainer.share_prompt on, whose KV cache checkpointed layers would drop), the passes without gradient still
sharing prompts, and the setting reaching the model through Learner.build."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import yaml

from tsrl.generation import HFGenerator, HFGeneratorConfig
from tsrl.models import forward
from tsrl.models.forward import collate, completion_logprobs, enable_checkpointing
from tsrl.testing.fakes import number_prompt

GPU_MODELS = ["llama31_8b", "qwen3_4b", "qwen25_3b", "qwen25_7b", "ministral3_8b"]
CONFIGS = Path(__file__).resolve().parents[3] / "configs" / "model"


def training_copy(model: torch.nn.Module, adapter: bool, checkpointing: bool) -> torch.nn.Module:
    """A copy of the policy in training mode, checkpointing enabled as Learner.build does (before the adapter)."""
    model = copy.deepcopy(model).train()
    if checkpointing:
        enable_checkpointing(model)
    if adapter:
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(3)
        config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        model = get_peft_model(model, config)
    return model


@pytest.fixture(scope="module")
def batch(policy):
    """3 prompts (one much longer: left padding) × 4 completions: every prompt repeats, so sharing applies."""
    model, tokenizer = policy
    torch.manual_seed(1)
    prompts = [number_prompt("a", [0]), number_prompt("a much longer prompt id here", [0]), number_prompt("b", [0])]
    groups = HFGenerator(model, tokenizer, HFGeneratorConfig(max_new_tokens=10)).generate(prompts, n=4)
    return collate(groups, torch.zeros(3, 4), tokenizer.pad_token_id)


def step(model: torch.nn.Module, batch) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """Log-probs, entropy and every trainable gradient of one loss over the batch, prompts shared."""
    model.zero_grad()
    logp, entropy = completion_logprobs(model, batch, 0.8, with_entropy=True, share_prompt=True)
    (logp * batch.completion_mask * torch.linspace(-1, 1, logp.shape[1])).sum().backward()
    return logp.detach(), entropy, {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("adapter", [False, True], ids=["full", "lora"])
def test_checkpointing_gives_the_same_logprobs_and_gradients(policy, batch, adapter):
    """One training step's log-probs, entropy and gradients with checkpointing on equal those with it off. Off, the
    prompts are shared; on, the pass with gradient runs full rows (a shared prompt's cache would be dropped by the
    checkpointed layers and the completions would see no prompt)."""
    plain = training_copy(policy[0], adapter, checkpointing=False)
    checkpointed = training_copy(policy[0], adapter, checkpointing=True)
    assert forward.gradient_checkpointing_active(checkpointed)
    expected_logp, expected_entropy, expected = step(plain, batch)
    logp, entropy, grads = step(checkpointed, batch)
    mask = batch.completion_mask.bool()
    assert torch.allclose(logp[mask], expected_logp[mask], atol=1e-5)
    assert torch.allclose(entropy[mask], expected_entropy[mask], atol=1e-5)
    assert sorted(grads) == sorted(expected) and (not adapter or all("lora" in name for name in grads))
    for name, grad in expected.items():
        assert grad.abs().max() > 0, name
        assert torch.allclose(grads[name], grad, rtol=1e-4, atol=1e-6), name


def test_a_pass_without_gradient_shares_prompts_under_checkpointing(policy, batch):
    """The "old" log-probs (no gradient, training mode) still run each prompt once: checkpointing is paused for
    the pass, and on again after it. The values equal the full forward's."""
    model = training_copy(policy[0], adapter=False, checkpointing=True)
    prompt_rows = []
    model.model.register_forward_pre_hook(
        lambda _, args, kwargs: prompt_rows.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    with torch.no_grad():
        shared, _ = completion_logprobs(model, batch, 0.8, share_prompt=True)
        full, _ = completion_logprobs(model, batch, 0.8, share_prompt=False)
    assert prompt_rows == [3, 12, 12]  # the 3 distinct prompts, then the 12 rows' completions; then 12 full rows
    assert forward.gradient_checkpointing_active(model)
    mask = batch.completion_mask.bool()
    assert torch.allclose(shared[mask], full[mask], atol=1e-5)


def test_checkpointing_is_off_by_default_and_on_in_the_gpu_recipes():
    """Every model config has the field (default off: it costs a second forward); the GPU models turn it on."""
    from tsrl.models import HFModelConfig, TinyModelConfig
    from tsrl.models.smollm2 import SmolLM2Config

    assert not any(c().gradient_checkpointing for c in (HFModelConfig, TinyModelConfig, SmolLM2Config))
    for name in GPU_MODELS:
        assert yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())["gradient_checkpointing"] is True, name


def test_the_tiny_policy_folder_does_not_depend_on_checkpointing(number_task):
    """Checkpointing is applied after loading: the cached tiny policy is the same folder either way."""
    from tsrl.models import TinyModelConfig
    from tsrl.models.tiny import _fingerprint

    assert _fingerprint(TinyModelConfig(gradient_checkpointing=True), number_task) == _fingerprint(
        TinyModelConfig(), number_task
    )


def test_learner_build_enables_checkpointing(policy, tmp_path):
    """model.gradient_checkpointing=true reaches the loaded model through Learner.build, with a LoRA adapter on
    top, and acts: the model is in training mode (from_pretrained returns eval mode, where transformers does not
    checkpoint). Without it the model is built as before."""
    from accelerate import Accelerator

    from tsrl.algo import GRPOConfig
    from tsrl.config import RunConfig, TrainerConfig
    from tsrl.models import HFModelConfig
    from tsrl.models.lora import LoraSettings
    from tsrl.tasks.humor import HumorConfig
    from tsrl.training.learner import Learner

    model, tokenizer = policy
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    for on in (True, False):
        model_cfg = HFModelConfig(path=str(tmp_path), gradient_checkpointing=on, lora=LoraSettings(r=4))
        cfg = RunConfig(
            task=HumorConfig(),
            model=model_cfg,
            judge=None,
            reward=None,
            algo=GRPOConfig(),
            generator=HFGeneratorConfig(max_new_tokens=8),
            trainer=TrainerConfig(micro_batch_size=4),
            logger=None,
        )
        learner = Learner.build(cfg, Accelerator(cpu=True))
        assert learner.adapted
        assert forward.innermost(learner.model).is_gradient_checkpointing == on
        assert forward.gradient_checkpointing_active(learner.model) == on  # from_pretrained leaves eval mode
