import torch

from tsrl.models.forward import collate
from tsrl.testing.fakes import number_prompt
from tsrl.types import Group, Rollout


def groups():
    prompt = number_prompt("p", [0])
    return [
        Group(prompt, [5, 6, 7], [Rollout("a", [1, 2, 0], [-0.1, -0.2, -0.3], False), Rollout("b", [3], [-1.0], True)]),
        Group(prompt, [8], [Rollout("c", [4, 4], [-0.5, -0.5], False), Rollout("d", [9, 9], [-2.0, -2.0], True)]),
    ]


def test_collate_left_pads_prompts_and_right_pads_completions():
    batch = collate(groups(), torch.tensor([[1.0, -1.0], [0.5, -0.5]]), pad_id=99)
    assert batch.prompt_width == 3
    assert batch.input_ids.tolist() == [
        [5, 6, 7, 1, 2, 0],
        [5, 6, 7, 3, 99, 99],
        [99, 99, 8, 4, 4, 99],
        [99, 99, 8, 9, 9, 99],
    ]
    assert batch.attention_mask.tolist() == [
        [1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 0, 0],
        [0, 0, 1, 1, 1, 0],
        [0, 0, 1, 1, 1, 0],
    ]
    assert batch.completion_mask.tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0], [1, 1, 0]]
    assert batch.advantages.tolist() == [1.0, -1.0, 0.5, -0.5]
    assert torch.allclose(batch.sampler_logprobs[0], torch.tensor([-0.1, -0.2, -0.3]))


def test_mask_truncated_removes_cut_completions_from_the_loss():
    batch = collate(groups(), torch.zeros(2, 2), pad_id=99, mask_truncated=True)
    assert batch.completion_mask.sum(1).tolist() == [3.0, 0.0, 2.0, 0.0]
