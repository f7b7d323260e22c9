"""Groups → padded tensors, and the policy's forward pass over them: per-token log-probabilities of
completions (the learner) and raw outputs (regimes that read the policy: self-certainty, hidden states).

Below both the trainer and the reward regimes, so that the layout (left-padded prompt, right-padded
completion, position ids as generate() counts them) is written once.

Shared prompts: the G completions of a group continue the same prompt, so `completion_logprobs` runs each
distinct prompt of a micro-batch once (keeping its keys and values), repeats that cache to the rows that share
it, and runs only the completions on top. Log-probs and gradients are those of one full forward per sequence
(the prompt's gradient arrives summed over its rows, as it would from G separate copies) up to float rounding;
the prompt tokens cost 1/G of the FLOPs. One difference: with dropout on (LoRA dropout, say) the rows of a group
share the prompt's dropout mask. `share_prompt=False` (trainer.share_prompt) runs one full forward per row."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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

    def select(self, index: torch.Tensor) -> RolloutBatch:
        return RolloutBatch(
            self.input_ids[index],
            self.attention_mask[index],
            self.completion_mask[index],
            self.advantages[index],
            self.sampler_logprobs[index],
            self.prompt_width,
        )


def collate(
    groups: Sequence[Group], advantages: torch.Tensor, pad_id: int, mask_truncated: bool = False
) -> RolloutBatch:
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
        input_ids[n, P - len(prompt) : P] = torch.tensor(prompt)
        input_ids[n, P : P + L] = torch.tensor(rollout.token_ids, dtype=torch.long)
        attention[n, P - len(prompt) : P + L] = 1
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
    return model(
        input_ids=batch.input_ids.to(device),
        attention_mask=batch.attention_mask.to(device),
        position_ids=position_ids.to(device),
        use_cache=False,
        output_hidden_states=hidden,
    )


def innermost(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model under DDP / DeepSpeed (`.module`) and peft (`get_base_model`) wrappers."""
    while isinstance(getattr(model, "module", None), torch.nn.Module):
        model = model.module
    return model.get_base_model() if hasattr(model, "get_base_model") else model


@functools.cache
def keeps_logits(model_class: type) -> bool:
    """Whether the model's forward takes `logits_to_keep` (the head then runs on the last positions only)."""
    return "logits_to_keep" in inspect.signature(model_class.forward).parameters


def _shared_prompts(batch: RolloutBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """The distinct prompts of the batch — ids [U, P] and mask [U, P] — and each row's prompt index [N];
    None when no prompt repeats or the prompt is a single column (nothing to share)."""
    P = batch.prompt_width
    if P < 2:
        return None
    rows = torch.cat([batch.input_ids[:, :P], batch.attention_mask[:, :P]], dim=1)  # [N, 2P]
    distinct, inverse = torch.unique(rows, dim=0, return_inverse=True)  # [U, 2P], [N]
    if distinct.shape[0] == rows.shape[0]:
        return None
    return distinct[:, :P], distinct[:, P:], inverse


def completion_logits(model: torch.nn.Module, batch: RolloutBatch, share_prompt: bool = True) -> torch.Tensor:
    """The logits [N, T, V] that predict each completion token: position P−1 … P+T−2 of the sequence."""
    device = next(model.parameters()).device
    P, T = batch.prompt_width, batch.input_ids.shape[1] - batch.prompt_width
    keep = keeps_logits(type(innermost(model)))
    shared = _shared_prompts(batch) if share_prompt else None
    position_ids = (batch.attention_mask.cumsum(-1) - 1).clamp_min(0)  # [N, P+T], matches generate()
    if shared is None:
        extra = {"logits_to_keep": T + 1} if keep else {}
        logits = model(
            input_ids=batch.input_ids.to(device),
            attention_mask=batch.attention_mask.to(device),
            position_ids=position_ids.to(device),
            use_cache=False,
            **extra,
        ).logits
        return logits[:, -(T + 1) : -1]  # [N, T, V]
    prompt_ids, prompt_mask, inverse = (t.to(device) for t in shared)
    prompt = model(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        use_cache=True,
        position_ids=(prompt_mask.cumsum(-1) - 1).clamp_min(0),
        **({"logits_to_keep": 1} if keep else {}),
    )
    cache = prompt.past_key_values
    cache.batch_select_indices(inverse)  # [U, …] → [N, …], differentiable: each row's gradient flows back
    rest = model(
        input_ids=batch.input_ids[:, P:].to(device),
        attention_mask=batch.attention_mask.to(device),
        position_ids=position_ids[:, P:].to(device),
        past_key_values=cache,
        use_cache=True,
    ).logits  # [N, T, V]
    return torch.cat([prompt.logits[:, -1:][inverse], rest[:, :-1]], dim=1)  # [N, T, V]


def completion_logprobs(
    model: torch.nn.Module,
    batch: RolloutBatch,
    temperature: float,
    with_entropy: bool = False,
    share_prompt: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log π(token) [N, T] of each completion token at the sampling temperature, and optionally the
    per-token entropy [N, T] (no grad). `share_prompt`: run each distinct prompt once (module docstring)."""
    P = batch.prompt_width
    logits = completion_logits(model, batch, share_prompt).float() / temperature  # [N, T, V]
    targets = batch.input_ids[:, P:].to(logits.device)  # [N, T]
    log_norm = torch.logsumexp(logits, dim=-1)  # [N, T]
    logprobs = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - log_norm  # [N, T]
    entropy = None
    if with_entropy:
        with torch.no_grad():
            probs = torch.softmax(logits, dim=-1)  # [N, T, V]
            entropy = log_norm - (probs * logits).sum(-1)  # [N, T]
    return logprobs, entropy
