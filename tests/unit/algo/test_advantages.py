import math

import pytest
import torch

from tsrl.algo import group_advantages


def test_centred_without_scaling_matches_hand_values():
    rewards = torch.tensor([[1.0, 0.0, 0.5, 0.5], [0.25, 0.75, 0.75, 0.25]])
    adv = group_advantages(rewards, "none")
    assert torch.allclose(adv, torch.tensor([[0.5, -0.5, 0.0, 0.0], [-0.25, 0.25, 0.25, -0.25]]))


def test_group_scaling_divides_by_population_std():
    rewards = torch.tensor([[1.0, 0.0, 0.5, 0.5]])
    std = math.sqrt((0.25 + 0.25 + 0 + 0) / 4)  # population std of the group
    adv = group_advantages(rewards, "group")
    assert torch.allclose(adv, torch.tensor([[0.5 / std, -0.5 / std, 0.0, 0.0]]))


def test_batch_scaling_uses_one_std_for_all_groups():
    rewards = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    std = torch.tensor([1.0, 0.0, 0.5, 0.5]).std(correction=0)
    adv = group_advantages(rewards, "batch")
    assert torch.allclose(adv, torch.tensor([[0.5, -0.5], [0.0, 0.0]]) / std)


@pytest.mark.parametrize("scale", ["none", "group", "batch"])
def test_zero_variance_group_gives_zero_not_nan(scale):
    rewards = torch.tensor([[0.7, 0.7, 0.7], [1.0, 1.0, 1.0]])
    adv = group_advantages(rewards, scale)
    assert torch.equal(adv, torch.zeros(2, 3))


def test_floor_bounds_the_scaled_advantage():
    rewards = torch.tensor([[0.5, 0.5 + 1e-6]], dtype=torch.float64)
    adv = group_advantages(rewards, "group", floor=1e-2)
    assert adv.abs().max() <= 0.5e-6 / 1e-2 + 1e-9


def test_unknown_scale_is_rejected():
    with pytest.raises(ValueError, match="Unknown advantage scale"):
        group_advantages(torch.zeros(1, 2), "rank")
