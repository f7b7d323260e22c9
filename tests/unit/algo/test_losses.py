import math

import pytest
import torch

from tsrl.algo import AGGREGATES, CISPOConfig, DrGRPOConfig, GRPOConfig, LossInputs, k3_kl, policy_loss


def inputs(logp, old, adv, mask, normalizer=None, ref=None):
    logp = torch.tensor(logp, requires_grad=True)
    mask = torch.tensor(mask)
    return LossInputs(
        logp,
        torch.tensor(old),
        torch.tensor(adv),
        mask,
        float(mask.sum()) if normalizer is None else normalizer,
        None if ref is None else torch.tensor(ref),
    )


def test_grpo_on_policy_ratio_is_one_and_loss_is_minus_mean_token_advantage():
    inp = inputs(
        [[-1.0, -2.0, -3.0], [-0.5, -0.1, -9.0]],
        [[-1.0, -2.0, -3.0], [-0.5, -0.1, -9.0]],
        [1.0, -1.0],
        [[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]],
    )
    out = policy_loss(inp, GRPOConfig())
    # tokens: (+1, +1) from row 0 and (-1) from row 1 -> -(1 + 1 - 1) / 3
    assert out.loss.item() == pytest.approx(-1.0 / 3.0)
    out.loss.backward()
    # d/dlogp of -r*A at r = 1 is -A / normaliser on unmasked tokens, 0 elsewhere
    assert torch.allclose(inp.logprobs.grad, torch.tensor([[-1 / 3, -1 / 3, 0.0], [1 / 3, 0.0, 0.0]]))
    assert out.metrics["clip_frac"] == 0.0


def test_grpo_clips_positive_advantage_above_one_plus_eps_high():
    inp = inputs([[math.log(1.5)]], [[0.0]], [1.0], [[1.0]])
    out = policy_loss(inp, GRPOConfig(eps_low=0.2, eps_high=0.2))
    assert out.loss.item() == pytest.approx(-1.2)
    out.loss.backward()
    assert inp.logprobs.grad.item() == 0.0  # clipped: no gradient
    assert out.metrics["clip_frac"] == 1.0


def test_grpo_keeps_pessimistic_unclipped_term_for_negative_advantage():
    inp = inputs([[math.log(1.5)]], [[0.0]], [-1.0], [[1.0]])
    out = policy_loss(inp, GRPOConfig(eps_low=0.2, eps_high=0.2))
    assert out.loss.item() == pytest.approx(1.5)
    out.loss.backward()
    assert inp.logprobs.grad.item() == pytest.approx(1.5)  # d/dlogp of r*1 = r


def test_asymmetric_eps_low_clips_small_ratios():
    inp = inputs([[math.log(0.5)]], [[0.0]], [-1.0], [[1.0]])
    out = policy_loss(inp, GRPOConfig(eps_low=0.1, eps_high=0.3))
    assert out.loss.item() == pytest.approx(0.9)  # -min(-0.5, -0.9)


def test_dr_grpo_normalises_by_constant_not_token_count():
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    assert AGGREGATES["constant"](mask, 4) == 8.0
    assert AGGREGATES["token"](mask, 4) == 3.0
    inp = inputs([[0.0] * 4, [0.0] * 4], [[0.0] * 4, [0.0] * 4], [1.0, 1.0], mask.tolist(), normalizer=8.0)
    assert policy_loss(inp, DrGRPOConfig()).loss.item() == pytest.approx(-3.0 / 8.0)


def test_cispo_caps_weight_at_absolute_value_and_keeps_gradient():
    # ratio 10 > cap 4: weight 4, stop-gradient; ratio 2 < cap: weight 2
    inp = inputs([[math.log(10.0), math.log(2.0)]], [[0.0, 0.0]], [0.5], [[1.0, 1.0]])
    out = policy_loss(inp, CISPOConfig(cispo_cap=4.0))
    expected = -(4.0 * 0.5 * math.log(10.0) + 2.0 * 0.5 * math.log(2.0)) / 2
    assert out.loss.item() == pytest.approx(expected)
    out.loss.backward()
    assert torch.allclose(inp.logprobs.grad, torch.tensor([[-4.0 * 0.5 / 2, -2.0 * 0.5 / 2]]))
    assert out.metrics["clip_frac"] == 0.5


def test_cispo_on_policy_gradient_equals_reinforce():
    inp = inputs([[-1.0, -2.0]], [[-1.0, -2.0]], [2.0], [[1.0, 1.0]])
    policy_loss(inp, CISPOConfig()).loss.backward()
    assert torch.allclose(inp.logprobs.grad, torch.tensor([[-1.0, -1.0]]))


def test_k3_kl_hand_values_and_penalty():
    assert k3_kl(torch.tensor([0.3]), torch.tensor([0.3])).item() == 0.0
    value = k3_kl(torch.tensor([0.0]), torch.tensor([math.log(2.0)])).item()
    assert value == pytest.approx(2.0 - math.log(2.0) - 1.0)
    inp = inputs([[0.0]], [[0.0]], [0.0], [[1.0]], ref=[[math.log(2.0)]])
    out = policy_loss(inp, GRPOConfig(kl_beta=0.5))
    assert out.loss.item() == pytest.approx(0.5 * value)
    assert out.metrics["kl"] == pytest.approx(value)


def test_masked_tokens_never_contribute():
    base = inputs([[-1.0, -1.0]], [[-1.0, -1.0]], [1.0], [[1.0, 0.0]])
    other = inputs([[-1.0, 5.0]], [[-1.0, -7.0]], [1.0], [[1.0, 0.0]])
    a = policy_loss(base, GRPOConfig()).loss.item()
    b = policy_loss(other, GRPOConfig()).loss.item()
    assert a == b


def test_a_config_no_loss_registered_for_is_rejected_naming_the_losses():
    import tsrl.algo.offline  # noqa: F401  registers sft and dpo, whatever ran before
    from tsrl.algo import AlgoConfig
    from tsrl.errors import ConfigError

    with pytest.raises(
        ConfigError,
        match="No algo is registered for a AlgoConfig config; the registered algos are: cispo, dpo, dr_grpo, grpo, sft",
    ):
        policy_loss(inputs([[0.0]], [[0.0]], [0.0], [[1.0]]), AlgoConfig())


def test_sequence_aggregate_averages_each_sequence_then_the_sequences():
    """DeepSeekMath's GRPO: (1/N) Σ_n mean_t ℓ_nt. Row 0 has 3 tokens of loss −1 each, row 1 one token of
    loss +1: sequence mean = (−1 + 1)/2 = 0, where the token mean is (−3 + 1)/4 = −0.5."""
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    zeros = [[0.0] * 3, [0.0] * 3]
    by_sequence = inputs(zeros, zeros, [1.0, -1.0], mask.tolist(), normalizer=AGGREGATES["sequence"](mask, 3))
    by_token = inputs(zeros, zeros, [1.0, -1.0], mask.tolist(), normalizer=AGGREGATES["token"](mask, 3))
    assert policy_loss(by_sequence, GRPOConfig()).loss.item() == pytest.approx(0.0)
    assert policy_loss(by_token, GRPOConfig()).loss.item() == pytest.approx(-0.5)
    loss = policy_loss(by_sequence, GRPOConfig()).loss
    loss.backward()  # each row's tokens share 1/(N·len): 1/6 for row 0, 1/2 for row 1
    assert torch.allclose(by_sequence.logprobs.grad, torch.tensor([[-1 / 6] * 3, [0.5, 0.0, 0.0]]))


def test_aggregate_defaults_and_names(tmp_path):
    from tsrl.errors import ConfigError

    assert [c().aggregate for c in (GRPOConfig, DrGRPOConfig, CISPOConfig)] == ["token", "constant", "token"]
    assert GRPOConfig(aggregate="sequence").aggregate == "sequence"
    with pytest.raises(ConfigError, match="algo.aggregate"):
        GRPOConfig(aggregate="per_prompt")


def mismatch_inputs(sampler, mask=None, ref=None):
    """On-policy GRPO inputs (logp = old = 0, advantage 1) whose sampler log-probs differ from the learner's:
    the surrogate of every kept token is −1, so the loss shows each token's importance weight directly."""
    T = len(sampler)
    inp = inputs([[0.0] * T], [[0.0] * T], [1.0], [mask or [1.0] * T], normalizer=4.0, ref=ref)
    inp.sampler_logprobs = torch.tensor([sampler])
    return inp


# ρ = exp(old − sampler) = 1, 1.5, 3, 0.25 on the completion; a 5th, padded token with a wild sampler value
SAMPLER = [0.0, -math.log(1.5), -math.log(3.0), math.log(4.0), -50.0]
PADDED = [1.0, 1.0, 1.0, 1.0, 0.0]


def test_tis_multiplies_each_token_loss_by_its_truncated_importance_weight():
    """cap 2: weights min(ρ, 2) = 1, 1.5, 2, 0.25; loss −(1 + 1.5 + 2 + 0.25)/4; gradient −w/4 per token; one
    of the four completion tokens is truncated; the padded token counts nowhere."""
    inp = mismatch_inputs(SAMPLER, PADDED)
    out = policy_loss(inp, GRPOConfig(is_correction="tis", is_cap=2.0))
    assert out.loss.item() == pytest.approx(-4.75 / 4)
    out.loss.backward()
    assert torch.allclose(inp.logprobs.grad, torch.tensor([[-0.25, -0.375, -0.5, -0.0625, 0.0]]))
    assert out.metrics["is_clipped_frac"] == 0.25
    assert out.metrics["is_mismatch"] == pytest.approx((math.log(1.5) + math.log(3.0) + math.log(4.0)) / 4)


def test_mask_drops_tokens_outside_the_band_and_keeps_the_normaliser():
    """cap 2, band [0.5, 2]: ρ = 3 and ρ = 0.25 are dropped; loss −(1 + 1)/4 (normaliser still 4)."""
    inp = mismatch_inputs(SAMPLER, PADDED)
    out = policy_loss(inp, GRPOConfig(is_correction="mask", is_cap=2.0))
    assert out.loss.item() == pytest.approx(-0.5)
    out.loss.backward()
    assert torch.allclose(inp.logprobs.grad, torch.tensor([[-0.25, -0.25, 0.0, 0.0, 0.0]]))
    assert out.metrics["is_clipped_frac"] == 0.5


def test_the_band_and_the_cap_are_inclusive():
    """cap 1: the band is [1, 1]. A token with ρ exactly 1 is kept by mask and not counted as truncated by
    tis; ρ = e^±0.5 are masked, and tis truncates only the one above the cap."""
    sampler = [0.0, 0.5, -0.5, 0.0]
    masked = policy_loss(mismatch_inputs(sampler), GRPOConfig(is_correction="mask", is_cap=1.0))
    assert masked.loss.item() == pytest.approx(-2.0 / 4)
    assert masked.metrics["is_clipped_frac"] == 0.5
    tis = policy_loss(mismatch_inputs(sampler), GRPOConfig(is_correction="tis", is_cap=1.0))
    assert tis.loss.item() == pytest.approx(-(1 + math.exp(-0.5) + 1 + 1) / 4)
    assert tis.metrics["is_clipped_frac"] == 0.25


def test_a_masked_token_drops_its_kl_term_too():
    """Token 1's ρ = e^−5 leaves the band: of the k3 KL terms (ref − logp = −1: e^−1 + 1 − 1 each) only token
    0's remains, over the given normaliser 4; the advantage is 0, so the KL is the whole loss."""
    inp = mismatch_inputs([0.0, 5.0], ref=[[-1.0, -1.0]])
    inp.advantages = torch.tensor([0.0])
    out = policy_loss(inp, GRPOConfig(kl_beta=0.1, is_correction="mask"))
    assert out.loss.item() == pytest.approx(0.1 * math.exp(-1.0) / 4)


def test_no_correction_leaves_the_loss_alone_and_still_reports_the_gap():
    inp = mismatch_inputs(SAMPLER, PADDED)
    out = policy_loss(inp, GRPOConfig())
    assert out.loss.item() == pytest.approx(-1.0)
    assert out.metrics["is_mismatch"] == pytest.approx((math.log(1.5) + math.log(3.0) + math.log(4.0)) / 4)
    assert "is_clipped_frac" not in out.metrics
    assert "is_mismatch" not in policy_loss(inputs([[0.0]], [[0.0]], [1.0], [[1.0]]), GRPOConfig()).metrics


def test_is_correction_settings_are_checked():
    from tsrl.errors import ConfigError

    assert (GRPOConfig().is_correction, GRPOConfig().is_cap) == ("auto", 2.0)  # resolved with the generator
    with pytest.raises(ConfigError, match="algo.is_correction='clip' is unknown"):
        CISPOConfig(is_correction="clip")
    with pytest.raises(ConfigError, match="algo.is_cap must be >= 1"):
        GRPOConfig(is_correction="tis", is_cap=0.5)
    assert GRPOConfig(is_cap=1.0).is_cap == 1.0
    with pytest.raises(ValueError, match="needs LossInputs.sampler_logprobs"):
        policy_loss(inputs([[0.0]], [[0.0]], [1.0], [[1.0]]), GRPOConfig(is_correction="tis"))
