"""Policy-gradient losses as pure tensor functions: LossInputs → LossOutputs.

Notation: N sequences (B·G), T completion tokens, r_t = exp(logp_t − old_logp_t) the importance ratio,
A the sequence advantage broadcast to its tokens, m_t the completion mask.

- grpo:    per-token −min(r·A, clip(r, 1−ε_low, 1+ε_high)·A)  (PPO clipped surrogate, DAPO's asymmetric ε).
- dr_grpo: the same surrogate (Dr. GRPO, Liu et al. 2025); pair it with advantage scale "none".
- cispo:   per-token −sg(min(r, cap))·A·logp_t (MiniMax-M1's CISPO: the clipped importance weight is a
           constant, so every token keeps a gradient); cap is an explicit absolute value.
- KL (optional, all losses): β·k3 per token, k3 = exp(ref − logp) − (ref − logp) − 1 (Schulman's estimator).

Aggregates (how the per-token losses ℓ_nt of a minibatch of N sequences become one number, AGGREGATES):
- token    Σ_nt m·ℓ / Σ_nt m — every token of the minibatch weighs the same (DAPO; tsrl's grpo and cispo
           default, and MiniMax-M1's CISPO normalisation);
- sequence (1/N) Σ_n (Σ_t m·ℓ / Σ_t m) — each sequence's mean, then the mean over sequences (DeepSeekMath's
           GRPO as published: a long completion's tokens weigh less);
- constant Σ_nt m·ℓ / (N · T_max) — no length bias (Dr. GRPO).
The normaliser is computed by the caller from the whole minibatch (a float, or one value per sequence [N])
so that gradient accumulation over micro-batches gives the same update as one big batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


@dataclass
class LossInputs:
    logprobs: torch.Tensor  # [N, T] current policy, with grad
    old_logprobs: torch.Tensor  # [N, T] policy that sampled (or the pre-update policy)
    advantages: torch.Tensor  # [N]
    mask: torch.Tensor  # [N, T] 1.0 on completion tokens
    normalizer: float | torch.Tensor  # divides the summed per-token loss: a float or [N] (see module docstring)
    ref_logprobs: torch.Tensor | None = None  # [N, T] frozen reference, for the KL term


@dataclass
class LossSettings:
    eps_low: float = 0.2
    eps_high: float = 0.2
    cispo_cap: float = 4.0
    kl_beta: float = 0.0


@dataclass
class LossOutputs:
    loss: torch.Tensor  # scalar
    metrics: dict[str, float]


def clipped_surrogate(inp: LossInputs, cfg: LossSettings) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO/GRPO per-token loss [N, T] and the clipped-token indicator [N, T]."""
    ratio = torch.exp(inp.logprobs - inp.old_logprobs)  # [N, T]
    adv = inp.advantages.unsqueeze(1)  # [N, 1]
    unclipped = ratio * adv  # [N, T]
    clipped = ratio.clamp(1.0 - cfg.eps_low, 1.0 + cfg.eps_high) * adv  # [N, T]
    return -torch.minimum(unclipped, clipped), (clipped < unclipped).float()


def cispo_surrogate(inp: LossInputs, cfg: LossSettings) -> tuple[torch.Tensor, torch.Tensor]:
    """CISPO per-token loss [N, T] and the capped-token indicator [N, T]."""
    ratio = torch.exp(inp.logprobs - inp.old_logprobs).detach()  # [N, T]
    weight = ratio.clamp(max=cfg.cispo_cap)  # [N, T], stop-gradient
    return -weight * inp.advantages.unsqueeze(1) * inp.logprobs, (ratio > cfg.cispo_cap).float()


SURROGATES: dict[str, Callable[[LossInputs, LossSettings], tuple[torch.Tensor, torch.Tensor]]] = {
    "grpo": clipped_surrogate,
    "dr_grpo": clipped_surrogate,
    "cispo": cispo_surrogate,
}

def sequence_normalizer(mask: torch.Tensor, t_max: int) -> torch.Tensor:
    """[N]: each sequence's token count times the number of sequences that have tokens."""
    lengths = mask.sum(dim=1)  # [N]
    return lengths.clamp_min(1.0) * (lengths > 0).sum().clamp_min(1).float()


# How an aggregate turns the mask [N, T] of the *whole* minibatch into the normaliser of the summed loss.
AGGREGATES: dict[str, Callable[[torch.Tensor, int], float | torch.Tensor]] = {
    "token": lambda mask, t_max: float(mask.sum().clamp_min(1.0)),
    "sequence": sequence_normalizer,
    "constant": lambda mask, t_max: float(mask.shape[0] * t_max),
}
DEFAULT_AGGREGATE = {"grpo": "token", "dr_grpo": "constant", "cispo": "token"}  # algo.aggregate="" picks these


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(π ‖ π_ref) [N, T]; non-negative, unbiased in expectation."""
    log_ratio = ref_logprobs - logprobs  # [N, T]
    return torch.exp(log_ratio) - log_ratio - 1.0


def policy_loss(name: str, inp: LossInputs, cfg: LossSettings) -> LossOutputs:
    """The loss called `name` (a key of SURROGATES) plus the optional KL penalty, with diagnostics."""
    if name not in SURROGATES:
        raise ValueError(f"Unknown loss {name!r}; choose one of {sorted(SURROGATES)}.")
    per_token, clipped = SURROGATES[name](inp, cfg)  # [N, T], [N, T]
    mask = inp.mask
    metrics: dict[str, float] = {}
    if inp.ref_logprobs is not None and cfg.kl_beta > 0:
        kl = k3_kl(inp.logprobs, inp.ref_logprobs)  # [N, T]
        per_token = per_token + cfg.kl_beta * kl
        metrics["kl"] = float((kl.detach() * mask).sum() / mask.sum().clamp_min(1.0))
    normalizer = inp.normalizer.unsqueeze(1) if isinstance(inp.normalizer, torch.Tensor) else inp.normalizer
    loss = (per_token * mask / normalizer).sum()
    with torch.no_grad():
        n_tokens = mask.sum().clamp_min(1.0)
        log_ratio = (inp.logprobs - inp.old_logprobs) * mask  # [N, T]
        metrics["clip_frac"] = float((clipped * mask).sum() / n_tokens)
        metrics["approx_kl_old"] = float(((torch.exp(log_ratio) - 1 - log_ratio) * mask).sum() / n_tokens)
    return LossOutputs(loss=loss, metrics=metrics)
