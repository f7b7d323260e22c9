"""Groups → padded tensors, and the policy's forward pass over them: per-token log-probabilities of
completions (the learner) and raw outputs (regimes that read the policy: self-certainty, hidden states).

Below both the trainer and the reward regimes, so that the layout (left-padded prompt, right-padded
completion, position ids as generate() counts them) is written once.

Shared prompts: the G completions of a group continue the same prompt, so `completion_logprobs` runs each
distinct prompt of a micro-batch once (keeping its keys and values), repeats that cache to the rows that share
it, and runs only the completions on top. Log-probs and gradients are those of one full forward per sequence
(the prompt's gradient arrives summed over its rows, as it would from G separate copies) up to float rounding;
the prompt tokens cost 1/G of the FLOPs. One difference: with dropout on (LoRA dropout, say) the rows of a group
share the prompt's dropout mask. `share_prompt=False` (trainer.share_prompt) runs one full forward per row.

Gradient checkpointing (model.gradient_checkpointing): transformers' checkpointed layers keep no KV cache while
the model is training (a cache written in the forward would be written again by the recompute), so a pass with
gradient runs one full forward per row, and a pass without gradient (the "old" log-probs) pauses checkpointing,
which would save nothing there anyway, and still shares its prompts."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from tsrl.errors import ConfigError
from tsrl.models.logsoftmax import token_entropy, token_logprobs
from tsrl.types import Group

log = logging.getLogger("tsrl")


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


Piece = tuple[torch.Tensor, torch.Tensor, slice]
"""Logits [N, W, V], the token each position predicts [N, W], and the columns of W that are completion tokens."""


def enable_checkpointing(model: torch.nn.Module, notice: bool = False) -> None:
    """transformers' gradient checkpointing on every decoder layer of a loaded model (before a peft adapter is
    added), non-reentrant: it needs no input that requires grad (frozen embeddings under LoRA) and is the variant
    DeepSpeed ZeRO-3 (>= 0.19.8) re-gathers frozen parameters for. The model is put in training mode, the only
    mode in which transformers checkpoints (dropout, 0 in the shipped models, then acts too). `notice`: log what
    checkpointing does to share_prompt."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ConfigError(
            f"model.gradient_checkpointing=true: {type(model).__name__} does not support gradient checkpointing in "
            "transformers; set model.gradient_checkpointing=false."
        )
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()  # from_pretrained returns eval mode, in which checkpointed layers do not checkpoint
    if notice:
        log.info(
            "model.gradient_checkpointing: the update's forward runs every row in full, since checkpointed layers "
            "keep no KV cache to share a prompt through (trainer.share_prompt still applies to the passes without "
            "gradient)"
        )


def gradient_checkpointing_active(model: torch.nn.Module) -> bool:
    """Whether transformers' gradient checkpointing acts on the model's next call: it is enabled and the model is
    in training mode (checkpointed layers then drop any KV cache they are given)."""
    inner = innermost(model)  # a peft wrapper is in training mode whatever its base's mode is
    return inner.training and bool(getattr(inner, "is_gradient_checkpointing", False))


@contextmanager
def checkpointing_paused(model: torch.nn.Module) -> Iterator[None]:
    """Gradient checkpointing off for one pass (without gradient it saves nothing, and it would drop the cache)."""
    layers = [m for m in innermost(model).modules() if getattr(m, "gradient_checkpointing", False) is True]
    for layer in layers:
        layer.gradient_checkpointing = False
    try:
        yield
    finally:
        for layer in layers:
            layer.gradient_checkpointing = True


def _completion_pieces(model: torch.nn.Module, batch: RolloutBatch, shared: tuple | None) -> list[Piece]:
    """The logits that predict each completion token (positions P−1 … P+T−2), as the model returns them — no
    slice or concatenation of [N, T, V] tensors, whose backward would allocate another logits-sized gradient:
    positions that are not completion tokens get a placeholder target (0) and are dropped from the log-probs."""
    device = next(model.parameters()).device
    P, T = batch.prompt_width, batch.input_ids.shape[1] - batch.prompt_width
    ids = batch.input_ids.to(device)  # [N, P+T]
    keep = keeps_logits(type(innermost(model)))
    position_ids = (batch.attention_mask.cumsum(-1) - 1).clamp_min(0).to(device)  # [N, P+T], matches generate()
    after = torch.nn.functional.pad(ids[:, 1:], (0, 1))  # [N, P+T], the token each position predicts
    if shared is None:
        logits = model(
            input_ids=ids,
            attention_mask=batch.attention_mask.to(device),
            position_ids=position_ids,
            use_cache=False,
            **({"logits_to_keep": T + 1} if keep else {}),
        ).logits  # [N, T+1, V], or [N, P+T, V] without logits_to_keep
        width = logits.shape[1]
        return [(logits, after[:, -width:], slice(width - T - 1, width - 1))]
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
        input_ids=ids[:, P:],
        attention_mask=batch.attention_mask.to(device),
        position_ids=position_ids[:, P:],
        past_key_values=cache,
        use_cache=True,
    ).logits  # [N, T, V]
    first = prompt.logits[:, -1:][inverse]  # [N, 1, V]: position P−1 predicts the first completion token
    return [(first, ids[:, P : P + 1], slice(0, 1)), (rest, after[:, P:], slice(0, T - 1))]


def _sharing(model: torch.nn.Module, batch: RolloutBatch, share_prompt: bool) -> tuple[tuple | None, Any]:
    """The batch's shared prompts (or None) and the context to run them in. Checkpointed layers drop the KV cache
    while training, so a pass with gradient runs full rows then, and a pass without gradient pauses checkpointing."""
    shared = _shared_prompts(batch) if share_prompt else None
    if shared is None or not gradient_checkpointing_active(model):
        return shared, nullcontext()
    if torch.is_grad_enabled():
        return None, nullcontext()
    return shared, checkpointing_paused(model)


def completion_logprobs(
    model: torch.nn.Module,
    batch: RolloutBatch,
    temperature: float,
    with_entropy: bool = False,
    share_prompt: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log π(token) [N, T] of each completion token at the sampling temperature, and optionally the
    per-token entropy [N, T] (no grad). `share_prompt`: run each distinct prompt once (module docstring). The
    logits stay in the model's dtype; tsrl.models.logsoftmax reads them in float32 chunks."""
    shared, context = _sharing(model, batch, share_prompt)
    with context:
        pieces = _completion_pieces(model, batch, shared)
    logprobs = torch.cat([token_logprobs(z, y, temperature)[:, cols] for z, y, cols in pieces], dim=1)  # [N, T]
    entropy = None
    if with_entropy:
        entropy = torch.cat([token_entropy(z, temperature)[:, cols] for z, _, cols in pieces], dim=1)  # [N, T]
    return logprobs, entropy
