"""Groups → padded tensors, and the policy's forward pass over them: per-token log-probabilities of
completions (the learner) and raw outputs (regimes that read the policy: self-certainty, hidden states).

Below both the trainer and the reward regimes, so that the layout (left-padded prompt, right-padded
completion, position ids as generate() counts them) is written once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

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


def policy_forward(model: torch.nn.Module, batch: RolloutBatch, hidden: bool = False) -> Any:
    """The model's output over a batch, on the model's device, with position ids counted as generate() counts
    them; `hidden` asks for the hidden states too."""
    device = next(model.parameters()).device
    position_ids = (batch.attention_mask.cumsum(-1) - 1).clamp_min(0)  # [N, P+T], matches generate()
    return model(input_ids=batch.input_ids.to(device), attention_mask=batch.attention_mask.to(device),
                 position_ids=position_ids.to(device), use_cache=False, output_hidden_states=hidden)


def completion_logprobs(model: torch.nn.Module, batch: RolloutBatch, temperature: float,
                        with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log π(token) [N, T] of each completion token at the sampling temperature, and optionally the
    per-token entropy [N, T] (no grad)."""
    logits = policy_forward(model, batch).logits  # [N, P+T, V]
    P = batch.prompt_width
    logits = logits[:, P - 1:-1].float() / temperature  # [N, T, V] predicts completion tokens
    targets = batch.input_ids[:, P:].to(logits.device)  # [N, T]
    log_norm = torch.logsumexp(logits, dim=-1)  # [N, T]
    logprobs = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - log_norm  # [N, T]
    entropy = None
    if with_entropy:
        with torch.no_grad():
            probs = torch.softmax(logits, dim=-1)  # [N, T, V]
            entropy = log_norm - (probs * logits).sum(-1)  # [N, T]
    return logprobs, entropy
