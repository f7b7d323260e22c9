"""Groups → padded tensors, and per-token log-probabilities of completions under a model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from tsrl.types import Group


@dataclass
class RolloutBatch:
    """N = B·G sequences: left-padded prompt (width P) followed by right-padded completion (width T)."""

    input_ids: torch.Tensor  # [N, P+T]
    attention_mask: torch.Tensor  # [N, P+T]
    completion_mask: torch.Tensor  # [N, T] float, 1 on completion tokens
    advantages: torch.Tensor  # [N]
    sampler_logprobs: torch.Tensor  # [N, T] from the generator
    prompt_width: int  # P

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def select(self, index: torch.Tensor) -> "RolloutBatch":
        return RolloutBatch(self.input_ids[index], self.attention_mask[index], self.completion_mask[index],
                            self.advantages[index], self.sampler_logprobs[index], self.prompt_width)


def collate(groups: Sequence[Group], advantages: torch.Tensor, pad_id: int, mask_truncated: bool = False) -> RolloutBatch:
    """Pack groups [B] with advantages [B, G] into one RolloutBatch; with mask_truncated, completions cut
    at max_new_tokens get an all-zero completion mask (they take no part in the loss)."""
    prompts = [g.prompt_ids for g in groups for _ in g.rollouts]
    rollouts = [r for g in groups for r in g.rollouts]
    P = max(map(len, prompts))
    T = max(1, max(len(r.token_ids) for r in rollouts))
    N = len(rollouts)
    input_ids = torch.full((N, P + T), pad_id, dtype=torch.long)  # [N, P+T]
    attention = torch.zeros((N, P + T), dtype=torch.long)  # [N, P+T]
    sampler_lp = torch.zeros((N, T))  # [N, T]
    for n, (prompt, rollout) in enumerate(zip(prompts, rollouts)):
        L = len(rollout.token_ids)
        input_ids[n, P - len(prompt):P] = torch.tensor(prompt)
        input_ids[n, P:P + L] = torch.tensor(rollout.token_ids, dtype=torch.long)
        attention[n, P - len(prompt):P + L] = 1
        sampler_lp[n, :L] = torch.tensor(rollout.logprobs)
    completion_mask = attention[:, P:].float()  # [N, T]
    if mask_truncated:
        completion_mask[torch.tensor([r.truncated for r in rollouts])] = 0.0
    return RolloutBatch(input_ids, attention, completion_mask, advantages.reshape(N).float(), sampler_lp, P)


def completion_logprobs(model: torch.nn.Module, batch: RolloutBatch, temperature: float,
                        with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log π(token) [N, T] of each completion token at the sampling temperature, and optionally the
    per-token entropy [N, T] (no grad)."""
    position_ids = (batch.attention_mask.cumsum(-1) - 1).clamp_min(0)  # [N, P+T], matches generate()
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=position_ids,
                   use_cache=False).logits  # [N, P+T, V]
    P = batch.prompt_width
    logits = logits[:, P - 1:-1].float() / temperature  # [N, T, V] predicts completion tokens
    targets = batch.input_ids[:, P:]  # [N, T]
    log_norm = torch.logsumexp(logits, dim=-1)  # [N, T]
    logprobs = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - log_norm  # [N, T]
    entropy = None
    if with_entropy:
        with torch.no_grad():
            probs = torch.softmax(logits, dim=-1)  # [N, T, V]
            entropy = log_norm - (probs * logits).sum(-1)  # [N, T]
    return logprobs, entropy
