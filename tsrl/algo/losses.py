"""Policy-gradient losses as pure tensor functions: LossInputs → LossOutputs.

Notation: N sequences (B·G), T completion tokens, r_t = exp(logp_t − old_logp_t) the importance ratio,
A the sequence advantage broadcast to its tokens, m_t the completion mask.

- grpo:    per-token −min(r·A, clip(r, 1−ε_low, 1+ε_high)·A)  (PPO clipped surrogate, DAPO's asymmetric ε).
- dr_grpo: the same surrogate (Dr. GRPO, Liu et al. 2025); pair it with advantage scale "none".
- cispo:   per-token −sg(min(r, cap))·A·logp_t (MiniMax-M1's CISPO: the clipped importance weight is a
           constant, so every token keeps a gradient); cap is an explicit absolute value.
- KL (optional, all losses): β·k3 per token, k3 = exp(ref − logp) − (ref − logp) − 1 (Schulman's estimator).

Train/inference mismatch (optional, all losses; IS_CORRECTIONS): a separate sampler (vLLM) computes log-probs
with other kernels and precision than the learner, so even at identical weights the "old" policy the loss is
relative to (old_logp: the learner's pre-update log-probs) is not exactly the policy that sampled (sampler_logp).
With ρ_t = exp(old_logp_t − sampler_logp_t), each token's loss (surrogate and KL) is multiplied by a detached
weight:
- tis:  min(ρ_t, C) — truncated importance sampling (Yao et al. 2025, "Your efficient RL framework secretly
        brings you off-policy RL training");
- mask: 1 if ρ_t ∈ [1/C, C] else 0 — the token is dropped from the loss's numerator, the normaliser is kept;
- none: 1.
The default, auto, is tis when the sampler is a separate engine (generator=vllm) and none when it is the learner's
own module (generator=hf); tsrl-train resolves it when the run's config is built (tsrl/config.py), and a config
that was never resolved acts as none. TRL corrects vLLM's samples by default too.
C is algo.is_cap. Logged: is_mismatch = mean |old_logp − sampler_logp| and is_clipped_frac = share of tokens
whose weight was truncated (tis) or masked (mask), over completion tokens.

Aggregates (how the per-token losses ℓ_nt of a minibatch of N sequences become one number, AGGREGATES):
- token    Σ_nt m·ℓ / Σ_nt m — every token of the minibatch weighs the same (DAPO; tsrl's grpo and cispo
           default, and MiniMax-M1's CISPO normalisation);
- sequence (1/N) Σ_n (Σ_t m·ℓ / Σ_t m) — each sequence's mean, then the mean over sequences (DeepSeekMath's
           GRPO as published: a long completion's tokens weigh less);
- constant Σ_nt m·ℓ / (N · T_max) — no length bias (Dr. GRPO).
The normaliser is computed by the caller from the whole minibatch (a float, or one value per sequence [N])
so that gradient accumulation over micro-batches gives the same update as one big batch.

Each loss is a config class (its hyperparameters on top of AlgoConfig's shared ones) and a surrogate
(LossInputs, config) → (per-token loss, clipped-token indicator[, metrics]), registered together in
tsrl.registry.ALGOS under its `algo=` name; a
new loss is one module with both plus configs/algo/<name>.yaml. The trainer calls `policy_loss` only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch

from tsrl.algo.advantages import ADV_SCALES
from tsrl.errors import ConfigError
from tsrl.registry import ALGOS


@dataclass
class LossInputs:
    logprobs: torch.Tensor  # [N, T] current policy, with grad
    old_logprobs: torch.Tensor  # [N, T] policy that sampled (or the pre-update policy)
    advantages: torch.Tensor  # [N]
    mask: torch.Tensor  # [N, T] 1.0 on completion tokens
    normalizer: float | torch.Tensor  # divides the summed per-token loss: a float or [N] (see module docstring)
    ref_logprobs: torch.Tensor | None = None  # [N, T] frozen reference, for the KL term
    sampler_logprobs: torch.Tensor | None = None  # [N, T] what the generator reported, for algo.is_correction


@dataclass
class LossOutputs:
    loss: torch.Tensor  # scalar
    metrics: dict[str, float]


@dataclass
class AlgoConfig:
    """What every loss shares: advantages, the KL term, update schedule, overlong filtering, aggregation."""

    adv_scale: str = "none"
    """Advantage std scaling: none (TSRL: w − mean w) | group (GRPO) | batch."""
    std_floor: float = 1e-4
    """Lower bound of the std divisor; zero-variance groups get zero advantages."""
    kl_beta: float = 0.0
    """Weight of the k3 KL penalty to the frozen initial policy (0 = no reference model)."""
    epochs: int = 1
    """μ: passes over each batch of rollouts."""
    minibatches: int = 1
    """Optimizer steps per pass (each over 1/minibatches of the rollouts)."""
    mask_truncated: bool = False
    """Leave completions cut at max_new_tokens out of the loss (DAPO's overlong filtering)."""
    aggregate: str = "token"
    """token (DAPO) | sequence (DeepSeekMath's GRPO) | constant (Dr. GRPO): see the module docstring."""
    is_correction: str = "auto"
    """Sampler/learner mismatch correction: none | tis (truncated importance weight) | mask (drop tokens whose
    weight leaves [1/is_cap, is_cap]) | auto (tis under a separate sampler such as generator=vllm, none under
    generator=hf, whose sampler is the learner's module); see the module docstring."""
    is_cap: float = 2.0
    """C of is_correction: the tis weight's cap and the mask's band [1/C, C]; must be >= 1."""

    OFFLINE: ClassVar[bool] = False
    """What the trainer asks of a loss. OFFLINE: it trains on a ladder's anchors (algo=sft | dpo), so a step has no
    generation and no judge; NEEDS_REFERENCE: it needs the frozen initial policy even at kl_beta = 0 (DPO)."""
    NEEDS_REFERENCE: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.adv_scale not in ADV_SCALES:
            raise ConfigError(f"algo.adv_scale={self.adv_scale!r} is unknown; choose one of {list(ADV_SCALES)}.")
        if self.aggregate not in AGGREGATES:
            raise ConfigError(f"algo.aggregate={self.aggregate!r} is unknown; choose one of {sorted(AGGREGATES)}.")
        if self.epochs < 1 or self.minibatches < 1:
            raise ConfigError("algo.epochs and algo.minibatches must be at least 1.")
        if self.is_correction not in (*IS_CORRECTIONS, "auto"):
            raise ConfigError(
                f"algo.is_correction={self.is_correction!r} is unknown; choose one of {[*IS_CORRECTIONS, 'auto']}."
            )
        if not self.is_cap >= 1:
            raise ConfigError(f"algo.is_cap must be >= 1 (the band is [1/is_cap, is_cap]), got {self.is_cap}.")
        if self.kl_beta < 0 or self.std_floor <= 0:
            raise ConfigError(
                f"algo.kl_beta must be >= 0 and algo.std_floor > 0, got {self.kl_beta} and {self.std_floor}."
            )

    def resolve_is_correction(self, separate_sampler: bool) -> None:
        """Set algo.is_correction=auto to what it means for this run: tis when the samples come from a separate
        engine (whose log-probs differ from the learner's even at equal weights) and the loss reads sampler
        log-probs, none otherwise. An explicit value is kept. A method, so that tsrl.config imports no loss."""
        if self.is_correction == "auto":
            self.is_correction = "tis" if separate_sampler and not self.OFFLINE else "none"


@dataclass
class GRPOConfig(AlgoConfig):
    """Algo `grpo`: the PPO-clipped surrogate, token aggregate, TSRL advantages (w − mean w)."""

    eps_low: float = 0.2
    """Lower clip ε of the ratio."""
    eps_high: float = 0.2
    """Upper clip ε of the ratio; > eps_low is DAPO's clip-higher."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (0 <= self.eps_low < 1 and self.eps_high >= 0):
            raise ConfigError(
                f"algo.eps_low must lie in [0, 1) and algo.eps_high be >= 0, got {self.eps_low} and {self.eps_high}."
            )


@dataclass
class DrGRPOConfig(GRPOConfig):
    """Algo `dr_grpo`: the clipped surrogate with a constant normaliser and no std scaling (Dr. GRPO)."""

    aggregate: str = "constant"
    """constant: Σ m·ℓ / (N · max_new_tokens), Dr. GRPO's normaliser."""


@dataclass
class CISPOConfig(AlgoConfig):
    """Algo `cispo` (MiniMax-M1; Reasoning Arena's loss), off-policy as they run it: each generation batch is
    split into several optimizer steps, and advantages are group-standardised, (R − mean)/std."""

    adv_scale: str = "group"
    """group: MiniMax-M1's group-standardised advantages."""
    minibatches: int = 4
    """Optimizer steps per generation batch: from the second on the ratio differs from 1 and the cap acts."""
    cispo_cap: float = 4.0
    """Absolute cap on the stop-gradient importance weight (project default; MiniMax-M1 clips at 1 + ε_high)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.cispo_cap <= 0:
            raise ConfigError(f"algo.cispo_cap must be > 0, got {self.cispo_cap}.")


def inert_clip_warning(cfg: AlgoConfig) -> str | None:
    """A sentence when a clipped loss runs where its importance ratio is identically 1 (one epoch, one
    minibatch, sampler = learner): the clip can never act. Said for cispo, whose clipped weight is the whole
    point, and for grpo/dr_grpo when their ε was changed from the default (a tuned clip that cannot act)."""
    if cfg.epochs * cfg.minibatches > 1:
        return None
    defaults = type(cfg)  # a dataclass keeps each field's default as a class attribute
    tuned = isinstance(cfg, GRPOConfig) and (cfg.eps_low, cfg.eps_high) != (defaults.eps_low, defaults.eps_high)
    if isinstance(cfg, CISPOConfig) or tuned:
        return (
            f"algo={ALGOS.of(cfg).name} with algo.epochs=1 and algo.minibatches=1 updates on-policy: the importance "
            "ratio is identically 1, so the clip never acts and the loss is plain policy gradient; set "
            "algo.minibatches (or algo.epochs) above 1 for off-policy updates, as the algo=cispo preset does."
        )
    return None


def clipped_surrogate(inp: LossInputs, cfg: GRPOConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO/GRPO per-token loss [N, T] and the clipped-token indicator [N, T]."""
    ratio = torch.exp(inp.logprobs - inp.old_logprobs)  # [N, T]
    adv = inp.advantages.unsqueeze(1)  # [N, 1]
    unclipped = ratio * adv  # [N, T]
    clipped = ratio.clamp(1.0 - cfg.eps_low, 1.0 + cfg.eps_high) * adv  # [N, T]
    return -torch.minimum(unclipped, clipped), (clipped < unclipped).float()


def cispo_surrogate(inp: LossInputs, cfg: CISPOConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """CISPO per-token loss [N, T] and the capped-token indicator [N, T]."""
    ratio = torch.exp(inp.logprobs - inp.old_logprobs).detach()  # [N, T]
    weight = ratio.clamp(max=cfg.cispo_cap)  # [N, T], stop-gradient
    return -weight * inp.advantages.unsqueeze(1) * inp.logprobs, (ratio > cfg.cispo_cap).float()


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


def truncated_is_weight(log_ratio: torch.Tensor, cap: float) -> tuple[torch.Tensor, torch.Tensor]:
    """tis: weight min(exp(log_ratio), cap) [N, T] and the truncated-token indicator [N, T]."""
    ratio = torch.exp(log_ratio)  # [N, T]
    return ratio.clamp(max=cap), (ratio > cap).float()


def masked_is_weight(log_ratio: torch.Tensor, cap: float) -> tuple[torch.Tensor, torch.Tensor]:
    """mask: weight 1 where exp(log_ratio) lies in [1/cap, cap], else 0 [N, T], and the masked indicator [N, T]."""
    ratio = torch.exp(log_ratio)  # [N, T]
    keep = (ratio >= 1.0 / cap) & (ratio <= cap)  # [N, T]
    return keep.float(), (~keep).float()


# Sampler/learner mismatch corrections: log ρ = old_logp − sampler_logp [N, T], cap → (weight, corrected) [N, T].
IS_CORRECTIONS: dict[str, Callable[[torch.Tensor, float], tuple[torch.Tensor, torch.Tensor]]] = {
    "none": lambda log_ratio, cap: (torch.ones_like(log_ratio), torch.zeros_like(log_ratio)),
    "tis": truncated_is_weight,
    "mask": masked_is_weight,
}


def resolved_correction(cfg: AlgoConfig) -> str:
    """The correction a loss applies: algo.is_correction, with an unresolved auto acting as none."""
    return "none" if cfg.is_correction == "auto" else cfg.is_correction


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(π ‖ π_ref) [N, T]; non-negative, unbiased in expectation."""
    log_ratio = ref_logprobs - logprobs  # [N, T]
    return torch.exp(log_ratio) - log_ratio - 1.0


def mismatch_weight(inp: LossInputs, cfg: AlgoConfig, metrics: dict[str, float]) -> torch.Tensor:
    """The detached per-token weight [N, T] of algo.is_correction; records is_mismatch (and, with a correction,
    is_clipped_frac) over the completion tokens in `metrics`."""
    with torch.no_grad():
        log_ratio = (inp.old_logprobs - inp.sampler_logprobs) * inp.mask  # [N, T], 0 off the completion
        correction = resolved_correction(cfg)
        weight, corrected = IS_CORRECTIONS[correction](log_ratio, cfg.is_cap)  # [N, T], [N, T]
        n_tokens = inp.mask.sum().clamp_min(1.0)
        metrics["is_mismatch"] = float(log_ratio.abs().sum() / n_tokens)
        if correction != "none":
            metrics["is_clipped_frac"] = float((corrected * inp.mask).sum() / n_tokens)
    return weight


def policy_loss(inp: LossInputs, cfg: AlgoConfig) -> LossOutputs:
    """The loss `cfg` is the config of (its registered surrogate) plus the optional KL penalty, with diagnostics."""
    per_token, clipped, *extra = ALGOS.of(cfg).build(inp, cfg)  # [N, T], [N, T], optionally its own metrics
    mask = inp.mask
    metrics: dict[str, float] = dict(extra[0]) if extra else {}
    if inp.ref_logprobs is not None and cfg.kl_beta > 0:
        kl = k3_kl(inp.logprobs, inp.ref_logprobs)  # [N, T]
        per_token = per_token + cfg.kl_beta * kl
        metrics["kl"] = float((kl.detach() * mask).sum() / mask.sum().clamp_min(1.0))
    if inp.sampler_logprobs is not None:
        per_token = per_token * mismatch_weight(inp, cfg, metrics)
    elif resolved_correction(cfg) != "none":
        raise ValueError(f"algo.is_correction={cfg.is_correction} needs LossInputs.sampler_logprobs.")
    normalizer = inp.normalizer.unsqueeze(1) if isinstance(inp.normalizer, torch.Tensor) else inp.normalizer
    loss = (per_token * mask / normalizer).sum()
    with torch.no_grad():
        n_tokens = mask.sum().clamp_min(1.0)
        log_ratio = (inp.logprobs - inp.old_logprobs) * mask  # [N, T]
        metrics["clip_frac"] = float((clipped * mask).sum() / n_tokens)
        metrics["approx_kl_old"] = float(((torch.exp(log_ratio) - 1 - log_ratio) * mask).sum() / n_tokens)
    return LossOutputs(loss=loss, metrics=metrics)


ALGOS.register("grpo", GRPOConfig, clipped_surrogate)
ALGOS.register("dr_grpo", DrGRPOConfig, clipped_surrogate)
ALGOS.register("cispo", CISPOConfig, cispo_surrogate)
