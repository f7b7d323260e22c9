"""What regimes read from a policy model: self-certainty of completions and pooled hidden states.

Used by `reward=intuitor` (the live policy's logits) and `reward=reward_model` (hidden states of a frozen
copy). Both run the model on the same left-padded prompt + right-padded completion layout as the learner
(`tsrl.models.forward`), so positions match those seen during sampling.

Self-certainty of one completion o (Zhao et al. 2025, "Learning to Reason without External Rewards",
arXiv:2505.19590, Intuitor's reward):

    SC(o) = (1/|o|) Σ_t KL(U ‖ p_t) = (1/|o|) Σ_t [ −log V − (1/V) Σ_v log p_t(v) ],

p_t the next-token distribution at completion position t, U uniform over the V vocabulary entries.
SC ≥ 0, with 0 exactly when every p_t is uniform.

Shapes: N sequences (B·G), T completion tokens, V vocabulary, H hidden width.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from tsrl.generation import chat_prompt
from tsrl.models.forward import collate
from tsrl.models.view import as_view
from tsrl.types import Group, Prompt, Rollout


def self_certainty(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over masked tokens of KL(U ‖ softmax(logits)): logits [N, T, V], mask [N, T] → [N] (NaN when a row
    has no token)."""
    logp = torch.log_softmax(logits.float(), dim=-1)  # [N, T, V]
    kl = -math.log(logits.shape[-1]) - logp.mean(dim=-1)  # [N, T]
    count = mask.sum(dim=-1)  # [N]
    return torch.where(count > 0, (kl * mask).sum(dim=-1) / count.clamp_min(1), torch.nan)  # [N]


def text_groups(tokenizer: Any, prompts: Sequence[Prompt], responses: Sequence[Sequence[str]]) -> list[Group]:
    """Groups of plain texts, tokenised with the policy's chat template (no EOS appended to responses)."""
    groups = []
    for prompt, texts in zip(prompts, responses):
        prompt_ids = tokenizer(chat_prompt(tokenizer, prompt), add_special_tokens=False)["input_ids"]
        ids = tokenizer(list(texts), add_special_tokens=False)["input_ids"] if texts else []
        rollouts = [Rollout(text, row, [0.0] * len(row), False) for text, row in zip(texts, ids)]
        groups.append(Group(prompt=prompt, prompt_ids=prompt_ids, rollouts=rollouts))
    return groups


def _forward(policy: Any, groups: Sequence[Group], pad_id: int, micro: int, hidden: bool):
    """Yield (model output, completion mask [n, T], prompt width) per micro-batch of the groups' completions;
    `policy` is a PolicyView (a raw module is wrapped in one)."""
    view = as_view(policy)
    n = sum(g.size for g in groups)
    batch = collate(groups, torch.zeros(n), pad_id)
    device = view.device
    for index in torch.arange(n).split(max(1, micro)):
        part = batch.select(index)
        yield view.forward(part, hidden), part.completion_mask.to(device), part.prompt_width


@torch.no_grad()
def completion_self_certainty(
    policy: Any, groups: Sequence[Group], pad_id: int, temperature: float, micro: int
) -> torch.Tensor:
    """Self-certainty [N] of every completion of the groups under the policy (a PolicyView or a module) at
    `temperature`."""
    parts = []
    for out, mask, P in _forward(policy, groups, pad_id, micro, hidden=False):
        logits = out.logits[:, P - 1 : -1].float() / temperature  # [n, T, V] predicts completion tokens
        parts.append(self_certainty(logits, mask).cpu())
    return torch.cat(parts)


@torch.no_grad()
def completion_features(policy: Any, groups: Sequence[Group], pad_id: int, micro: int) -> torch.Tensor:
    """Last-layer hidden states mean-pooled over each completion's tokens: [N, H] (zeros for empty ones)."""
    parts = []
    for out, mask, P in _forward(policy, groups, pad_id, micro, hidden=True):
        states = out.hidden_states[-1][:, P:].float()  # [n, T, H]
        pooled = (states * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp_min(1)  # [n, H]
        parts.append(pooled.cpu())
    return torch.cat(parts)
