"""Exact pins of the losses and advantages: the clipped surrogate and CISPO on inputs of size two, the
normalisers, the KL metric, the diagnostics, and the checks on every shared setting.

Each test checks a behaviour the module docstring promises on a case small enough to work out by hand, written
against the mutants `make mutate` found alive (this file pins what the broader tests leave loose).
"""

from __future__ import annotations

import math

import pytest
import torch

from tsrl.algo import (
    AGGREGATES,
    AlgoConfig,
    CISPOConfig,
    DrGRPOConfig,
    GRPOConfig,
    LossInputs,
    inert_clip_warning,
    policy_loss,
)
from tsrl.algo.advantages import group_advantages
from tsrl.algo.losses import sequence_normalizer
from tsrl.errors import ConfigError


def loss_inputs(logp, old, adv, mask, normalizer=None, ref=None) -> LossInputs:
    mask = torch.tensor(mask)
    return LossInputs(
        torch.tensor(logp, requires_grad=True),
        torch.tensor(old),
        torch.tensor(adv),
        mask,
        float(mask.sum()) if normalizer is None else normalizer,
        None if ref is None else torch.tensor(ref),
    )


def test_clipped_surrogate_with_advantages_of_size_two():
    """|A| = 2 separates r·A from r/A and from r + A. Per token −min(r·A, clip(r, 0.8, 1.2)·A):
    r = 1.5, A = +2: −min(3, 2.4) = −2.4 (clipped, no gradient);  r = 1.5, A = −2: −min(−3, −2.4) = 3;
    r = 0.5, A = −2: −min(−1, −1.6) = 1.6 (clipped);             r = 0.5, A = +2: −min(1, 1.6) = −1.
    Token mean: (−2.4 + 3 + 1.6 − 1)/4 = 0.3; half the tokens are clipped. The unclipped tokens' gradients are
    −A·r/4: −(−2)(1.5)/4 = 0.75 and −(2)(0.5)/4 = −0.25."""
    up, down = math.log(1.5), math.log(0.5)
    inp = loss_inputs([[up], [up], [down], [down]], [[0.0]] * 4, [2.0, -2.0, -2.0, 2.0], [[1.0]] * 4)
    out = policy_loss(inp, GRPOConfig())
    assert out.loss.item() == pytest.approx(0.3)
    assert out.metrics["clip_frac"] == 0.5
    out.loss.backward()
    assert inp.logprobs.grad.flatten().tolist() == pytest.approx([0.0, 0.75, 0.0, -0.25])
    approx_kl = ((1.5 - 1 - up) * 2 + (0.5 - 1 - down) * 2) / 4  # mean of r − 1 − log r
    assert out.metrics["approx_kl_old"] == pytest.approx(approx_kl)


def test_cispo_weight_times_advantage_of_size_two():
    """−min(r, cap)·A·logp, cap 1.2, A = −2: r = 1.5 → −1.2·(−2)·log 1.5; r = 0.5 → −0.5·(−2)·log 0.5."""
    up, down = math.log(1.5), math.log(0.5)
    inp = loss_inputs([[up, down]], [[0.0, 0.0]], [-2.0], [[1.0, 1.0]])
    out = policy_loss(inp, CISPOConfig(cispo_cap=1.2))
    assert out.loss.item() == pytest.approx((2.4 * up + 1.0 * down) / 2)
    assert out.metrics["clip_frac"] == 0.5


def test_per_sequence_normaliser_divides_each_row_by_its_own_value():
    """A normaliser [N] divides row n by value n: rows of loss −2·1 token each, normalisers 4 and 1."""
    inp = loss_inputs([[0.0], [0.0]], [[0.0], [0.0]], [2.0, 2.0], [[1.0], [1.0]], normalizer=torch.tensor([4.0, 1.0]))
    assert policy_loss(inp, GRPOConfig()).loss.item() == pytest.approx(-2.0 / 4 - 2.0 / 1)


def test_kl_metric_counts_only_masked_tokens_and_needs_a_positive_beta():
    ref = [[math.log(2.0), 5.0]]
    value = 2.0 - math.log(2.0) - 1.0
    out = policy_loss(loss_inputs([[0.0, 0.0]], [[0.0, 0.0]], [0.0], [[1.0, 0.0]], ref=ref), GRPOConfig(kl_beta=0.1))
    assert out.metrics["kl"] == pytest.approx(value) and out.loss.item() == pytest.approx(0.1 * value)
    off = policy_loss(loss_inputs([[0.0, 0.0]], [[0.0, 0.0]], [0.0], [[1.0, 0.0]], ref=ref), GRPOConfig())
    assert "kl" not in off.metrics and off.loss.item() == 0.0


def test_diagnostics_average_over_unmasked_tokens_only():
    """kl and approx_kl_old are means over the mask's tokens; the third token is masked and carries extreme
    values. log r = logp − old = (0.5, −1), so approx_kl_old = mean(e^{log r} − 1 − log r); ref − logp = (0.5, 0),
    so kl = (e^{0.5} − 0.5 − 1 + 0)/2."""
    out = policy_loss(
        loss_inputs([[-1.0, -2.0, 0.0]], [[-1.5, -1.0, -30.0]], [0.0], [[1.0, 1.0, 0.0]], ref=[[-0.5, -2.0, 9.0]]),
        GRPOConfig(kl_beta=0.1),
    )
    expected_old = ((math.exp(0.5) - 1 - 0.5) + (math.exp(-1.0) - 1 + 1.0)) / 2
    assert out.metrics["approx_kl_old"] == pytest.approx(expected_old)
    assert out.metrics["kl"] == pytest.approx((math.exp(0.5) - 1.5) / 2)


def test_a_ratio_exactly_at_the_cap_is_not_counted_as_capped():
    out = policy_loss(loss_inputs([[-1.0]], [[-1.0]], [1.0], [[1.0]]), CISPOConfig(cispo_cap=1.0))
    assert out.metrics["clip_frac"] == 0.0


def test_advantages_are_plain_centring_by_default():
    assert group_advantages(torch.tensor([[1.0, 2.0, 6.0]])).tolist() == [[-2.0, -1.0, 3.0]]


def test_sequence_normaliser_for_one_sequence_and_for_an_empty_one():
    assert sequence_normalizer(torch.tensor([[1.0, 1.0, 0.0]]), 3).tolist() == [2.0]
    # an empty row counts 1 token (no division by zero) and is not counted among the sequences
    assert sequence_normalizer(torch.tensor([[0.0, 0.0], [1.0, 1.0], [1.0, 0.0]]), 2).tolist() == [2.0, 4.0, 2.0]
    assert sequence_normalizer(torch.zeros(2, 2), 2).tolist() == [1.0, 1.0]
    assert AGGREGATES["token"](torch.zeros(2, 2), 2) == 1.0 and AGGREGATES["constant"](torch.zeros(3, 2), 5) == 15.0


@pytest.mark.parametrize("make", [AlgoConfig, GRPOConfig, CISPOConfig])
@pytest.mark.parametrize(
    "bad", [{"epochs": 0}, {"minibatches": 0}, {"kl_beta": -0.1}, {"std_floor": 0.0}, {"adv_scale": "rank"}]
)
def test_each_shared_setting_is_checked_on_its_own(make, bad):
    with pytest.raises(ConfigError):
        make(**bad)


def test_shared_settings_accept_their_boundary_values():
    cfg = GRPOConfig(epochs=1, minibatches=1, kl_beta=0.0, std_floor=1e-9, eps_low=0.0, eps_high=0.0)
    assert (cfg.epochs, cfg.minibatches, cfg.eps_low, cfg.eps_high) == (1, 1, 0.0, 0.0)
    assert CISPOConfig(cispo_cap=1e-3).cispo_cap == 1e-3


@pytest.mark.parametrize("bad", [{"eps_low": 1.0}, {"eps_low": -0.1}, {"eps_high": -0.1}])
def test_clip_epsilons_are_checked(bad):
    with pytest.raises(ConfigError, match="eps_"):
        GRPOConfig(**bad)


@pytest.mark.parametrize("cap", [0.0, -1.0])
def test_cispo_cap_must_be_positive(cap):
    with pytest.raises(ConfigError, match="cispo_cap"):
        CISPOConfig(cispo_cap=cap)


def test_inert_clip_warning_cases():
    """Said when the ratio is identically 1 (epochs·minibatches = 1) and the clip matters: always for cispo, for
    grpo/dr_grpo only when an ε was changed from 0.2."""
    assert inert_clip_warning(GRPOConfig()) is None
    assert inert_clip_warning(DrGRPOConfig()) is None
    for cfg, name in (
        (GRPOConfig(eps_high=0.28), "grpo"),
        (GRPOConfig(eps_low=0.1), "grpo"),
        (DrGRPOConfig(eps_high=0.3), "dr_grpo"),
        (CISPOConfig(minibatches=1), "cispo"),
    ):
        warning = inert_clip_warning(cfg)
        assert warning is not None and warning.startswith(f"algo={name} with algo.epochs=1 and algo.minibatches=1")
        assert (
            "the importance ratio is identically 1, so the clip never acts and the loss is plain policy gradient; "
            "set algo.minibatches (or algo.epochs) above 1 for off-policy updates"
        ) in warning
    assert inert_clip_warning(CISPOConfig()) is None  # 4 minibatches: off-policy
    assert inert_clip_warning(CISPOConfig(minibatches=1, epochs=2)) is None
    assert inert_clip_warning(GRPOConfig(eps_high=0.28, minibatches=2)) is None
    assert inert_clip_warning(GRPOConfig(eps_high=0.28, epochs=2)) is None
