"""Test support for the vLLM generator: how far a sampler's log-probs are from the learner's own forward pass.

Shared by tests/integration/test_vllm_generator.py and the two-rank worker it launches under torchrun
(tests/integration/vllm_two_ranks.py), which must sample at the same temperature as the tests measure.
"""

from __future__ import annotations

from typing import Any

import torch

from tsrl.algo import group_advantages
from tsrl.models.forward import collate, completion_logprobs
from tsrl.types import Group

TEMPERATURE = 0.7  # not 1: the greedy rows' log-probs must be rescaled to it


def logprob_gap(model: torch.nn.Module, tokenizer: Any, groups: list[Group]) -> tuple[float, float]:
    """(max, mean) |sampler − learner| log-prob over the completion tokens of `groups`, sampled at TEMPERATURE."""
    batch = collate(groups, group_advantages(torch.zeros(len(groups), groups[0].size)), tokenizer.pad_token_id)
    with torch.no_grad():
        learner, _ = completion_logprobs(model, batch, TEMPERATURE)  # [N, T]
    gap = (learner - batch.sampler_logprobs).abs()[batch.completion_mask.bool()]
    return float(gap.max()), float(gap.mean())
