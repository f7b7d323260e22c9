"""Float32 master weights for a bf16 policy without DeepSpeed: the weights move by what Adam asks at lr 1e-5 (plain
AdamW on the bf16 weights leaves most of them where they were), a saved and reloaded optimizer continues the same
trajectory bit for bit, and the Learner picks the masters exactly when a trainable parameter is half precision."""

from __future__ import annotations

import copy
import io

import pytest
import torch

from tsrl.algo import GRPOConfig
from tsrl.config import RunConfig, TrainerConfig
from tsrl.generation import HFGeneratorConfig
from tsrl.training.learner import Learner
from tsrl.training.precision import MasterWeightAdamW

LR, STEPS = 1e-5, 200


def bf16_layer(seed: int = 0) -> torch.nn.Linear:
    """A 64×64 bf16 layer with weights ~ N(0, 0.05²), the scale of a trained model's."""
    torch.manual_seed(seed)
    layer = torch.nn.Linear(64, 64, bias=False)
    torch.nn.init.normal_(layer.weight, std=0.05)
    return layer.to(torch.bfloat16)


def constant_sign_steps(layer: torch.nn.Linear, optimizer: torch.optim.Optimizer, steps: int) -> None:
    """`steps` optimizer steps with the gradient +1 on every weight: Adam's bias-corrected update is then lr·1/(1+ε)
    per step, so each float32 weight would move by exactly −steps·lr."""
    for _ in range(steps):
        layer.weight.grad = torch.ones_like(layer.weight)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def half_spacing(values: torch.Tensor) -> torch.Tensor:
    """Half the distance between neighbouring bf16 numbers at `values` (the most a rounding may move them)."""
    exponent = torch.floor(torch.log2(values.abs().clamp_min(1e-30)))
    return 0.5 * torch.pow(2.0, exponent - 7)  # bf16: 7 stored mantissa bits


def test_bf16_weights_move_by_the_adam_update_with_float32_masters():
    """After 200 steps at lr 1e-5 the float32 weight is w0 − 2e-3, about 8 bf16 spacings away at |w| ≈ 0.05: the bf16
    weight must be that value rounded (within half a spacing). Plain AdamW rounds every single update of 1e-5
    away wherever half a spacing exceeds it (|w| > ~0.005), so most of its weights never move."""
    layer = bf16_layer()
    start = layer.weight.detach().float().clone()
    expected = start - STEPS * LR
    constant_sign_steps(layer, MasterWeightAdamW(layer.parameters(), lr=LR, weight_decay=0.0), STEPS)
    weight = layer.weight.detach().float()
    assert layer.weight.dtype == torch.bfloat16
    assert ((weight - expected).abs() <= half_spacing(expected) + 1e-6).all()
    assert (weight != start).float().mean() > 0.95  # nearly every weight moved

    plain = bf16_layer()
    constant_sign_steps(plain, torch.optim.AdamW(plain.parameters(), lr=LR, weight_decay=0.0), STEPS)
    stuck = (plain.weight.detach().float() == start).float().mean()
    assert stuck > 0.8  # the failure the masters fix: most bf16 weights never moved


def test_float32_parameters_step_as_plain_adamw():
    """A float32 parameter beside a bf16 one is stepped in place, exactly as torch's AdamW steps it."""
    torch.manual_seed(0)
    full = torch.nn.Parameter(torch.randn(8))
    reference = torch.nn.Parameter(full.detach().clone())
    half = torch.nn.Parameter(torch.randn(8).bfloat16())
    ours, theirs = MasterWeightAdamW([full, half], lr=0.1), torch.optim.AdamW([reference], lr=0.1)
    for step in range(3):
        grad = torch.randn(8, generator=torch.Generator().manual_seed(step))
        full.grad, reference.grad, half.grad = grad.clone(), grad.clone(), grad.bfloat16()
        ours.step()
        theirs.step()
    assert torch.equal(full, reference)
    assert len(ours.model_parameters()) == 1 and ours.model_parameters()[0] is half


def steps_with_seeded_gradients(layer: torch.nn.Linear, optimizer: torch.optim.Optimizer, steps: range) -> None:
    for step in steps:
        layer.weight.grad = torch.randn(layer.weight.shape, generator=torch.Generator().manual_seed(step)).bfloat16()
        optimizer.step()
        optimizer.zero_grad()


def test_a_reloaded_optimizer_continues_the_same_trajectory_exactly():
    """6 steps in one go against 3 steps, save (weights and optimizer through torch.save), load into a fresh layer
    and optimizer, 3 more: bit-identical bf16 weights. Re-deriving the masters from the saved bf16 weights would
    lose what the masters held below bf16's resolution, and the trajectories would part."""
    whole = bf16_layer()
    whole_optimizer = MasterWeightAdamW(whole.parameters(), lr=LR)
    steps_with_seeded_gradients(whole, whole_optimizer, range(6))

    first = bf16_layer()
    optimizer = MasterWeightAdamW(first.parameters(), lr=LR)
    steps_with_seeded_gradients(first, optimizer, range(3))
    saved = io.BytesIO()
    torch.save({"model": first.state_dict(), "optimizer": optimizer.state_dict()}, saved)
    saved.seek(0)
    state = torch.load(saved)
    resumed = bf16_layer(seed=1)  # other weights: everything must come from the checkpoint
    resumed.load_state_dict(state["model"])
    optimizer = MasterWeightAdamW(resumed.parameters(), lr=LR)
    optimizer.load_state_dict(state["optimizer"])
    assert optimizer.pairs[0][0].dtype == torch.float32
    steps_with_seeded_gradients(resumed, optimizer, range(3, 6))
    assert torch.equal(resumed.weight, whole.weight)
    assert torch.equal(optimizer.pairs[0][0], whole_optimizer.pairs[0][0])


def make_learner(model, tokenizer) -> Learner:
    from accelerate import Accelerator

    cfg = RunConfig(
        task=None,
        model=None,
        judge=None,
        reward=None,
        algo=GRPOConfig(),
        generator=HFGeneratorConfig(max_new_tokens=8),
        trainer=TrainerConfig(micro_batch_size=4, lr=LR),
        logger=None,
    )
    return Learner(cfg, Accelerator(cpu=True), model, tokenizer)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_the_learner_keeps_float32_masters_only_for_half_precision_weights(policy, dtype):
    model, tokenizer = policy
    learner = make_learner(copy.deepcopy(model).to(dtype), tokenizer)
    inner = learner.optimizer.optimizer  # accelerate's wrapper around the Learner's optimizer
    assert isinstance(inner, MasterWeightAdamW) == (dtype == torch.bfloat16)
    assert all(p.dtype == torch.float32 for group in inner.param_groups for p in group["params"])


def rollouts(model, tokenizer):
    """A RolloutBatch of 2 prompts × 4 completions sampled from `model`, with fixed advantages."""
    from tsrl.generation import HFGenerator
    from tsrl.models.forward import collate
    from tsrl.testing.fakes import number_prompt

    torch.manual_seed(1)
    groups = HFGenerator(model, tokenizer, HFGeneratorConfig(max_new_tokens=8)).generate(
        [number_prompt("a", [0]), number_prompt("b", [0])], n=4
    )
    advantages = torch.tensor([[1.0, -1.0, 0.5, -0.5], [-1.0, 1.0, 0.25, -0.25]])
    return collate(groups, advantages, tokenizer.pad_token_id)


def test_a_bf16_learner_resumed_from_its_checkpoint_takes_the_same_updates(policy, tmp_path):
    """The Learner's checkpoint path (accelerate's save_state/load_state): 4 updates in one go against 2, save, a
    fresh Learner from the initial weights, load, 2 more — the same bf16 weights, bit for bit."""
    model, tokenizer = policy
    batch = rollouts(model, tokenizer)
    start = copy.deepcopy(model).to(torch.bfloat16)
    whole = make_learner(copy.deepcopy(start), tokenizer)
    for step in range(1, 5):
        whole.update(batch, step)
    first = make_learner(copy.deepcopy(start), tokenizer)
    for step in (1, 2):
        first.update(batch, step)
    first.acc.save_state(str(tmp_path / "checkpoint"))
    resumed = make_learner(copy.deepcopy(start), tokenizer)
    resumed.acc.load_state(str(tmp_path / "checkpoint"))
    for step in (3, 4):
        resumed.update(batch, step)
    moved = [not torch.equal(p, q) for p, q in zip(whole.module.parameters(), start.parameters())]
    assert sum(moved) > len(moved) // 2  # the updates did move the bf16 weights
    for (name, p), q in zip(whole.module.named_parameters(), resumed.module.parameters()):
        assert torch.equal(p, q), name
