"""The papers' offline baselines, trained on each prompt's ranked anchor ladder instead of sampled completions,
through the same Learner (DDP, ZeRO-3, LoRA), logging, checkpoints and evaluation as GRPO.

- `algo=sft` (TSRL Table 1's SFT row): maximum likelihood of the top fraction of the prompt's anchors (default
  the top half, ⌈k/2⌉ of k — the middle anchor of an odd k included), per-token loss −log π(token), averaged
  over the tokens of the minibatch.
- `algo=dpo` (TSRL §4.7; Rafailov et al. 2023): preference pairs (better, worse) from the anchors' ladder order,
  loss −log σ(β·[(log π(y_w) − log π_ref(y_w)) − (log π(y_l) − log π_ref(y_l))]) per pair with sequence
  log-probabilities, averaged over pairs; the reference is the frozen initial policy (the base with the
  adapter off under LoRA).

The ladder is the one `reward=ladder` builds and ranks at start (round-robin + Bradley–Terry with the training
judge, stored and reused like any ladder); the reward regime scores nothing during these runs. Which anchors
(`algo.anchors`): `ladder` (default, as TSRL: the anchors the ladder method itself uses) — the k anchors the reward
compares with (reward.k, reward.select: the regime's own selection), so SFT imitates the top half of those k and
DPO pairs only those k; `all` — every one of the prompt's K ranked anchors (tsrl's earlier default). Each step takes
`trainer.prompts_per_step` prompts from the same sampler as GRPO; `trainer.group_size` plays no part.

The surrogate is written per token so that the Learner's accumulation stays one code path: DPO puts its pair
loss on every token of both rows and runs with the `sequence` aggregate, whose normaliser (row length × rows in
the minibatch) turns the sum back into the mean over pairs. Rows 2i and 2i + 1 are a pair, so a micro-batch
must hold whole pairs (an even trainer.micro_batch_size, checked at start) and the minibatch is not shuffled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from tsrl.algo.losses import AlgoConfig, LossInputs
from tsrl.errors import ConfigError
from tsrl.registry import ALGOS

PAIR_RULES = ("all", "adjacent", "top_bottom")
ANCHOR_SETS = ("ladder", "all")


@dataclass
class OfflineConfig(AlgoConfig):
    """What the offline baselines share: which of a prompt's ranked anchors they train on."""

    OFFLINE: ClassVar[bool] = True
    ANCHOR_ADVANTAGE: ClassVar[float] = 0.0
    """The advantage every anchor row carries into the update (SFT: 1, imitate it; DPO's loss does not read it)."""
    anchors: str = "ladder"
    """ladder: the k anchors the ladder reward uses (reward.k, reward.select; TSRL) | all: all K ranked anchors."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.anchors not in ANCHOR_SETS:
            raise ConfigError(
                f"algo.anchors={self.anchors!r} is unknown; choose ladder (the k anchors of "
                "reward.k, TSRL's) or all (every ranked anchor of the prompt)."
            )


@dataclass
class SFTConfig(OfflineConfig):
    """Algo `sft`: supervised fine-tuning on the top fraction of each prompt's ranked anchors."""

    ANCHOR_ADVANTAGE: ClassVar[float] = 1.0
    top_fraction: float = 0.5
    """Share of the anchors trained on (strongest first) imitated, ⌈fraction · n⌉ (TSRL: the top half; an odd n
    keeps its middle anchor, k = 1 its only one)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 < self.top_fraction <= 1.0:
            raise ConfigError(f"algo.top_fraction must lie in (0, 1], got {self.top_fraction}.")


@dataclass
class DPOConfig(OfflineConfig):
    """Algo `dpo`: direct preference optimisation on (better, worse) anchor pairs of each ranked ladder."""

    NEEDS_REFERENCE: ClassVar[bool] = True
    beta: float = 0.1
    """β of the DPO loss (Rafailov et al.'s common value)."""
    pairs: str = "all"
    """Which pairs of the n anchors trained on (algo.anchors): all (every better/worse pair, n(n−1)/2) | adjacent
    (rank r vs r+1) | top_bottom (the strongest vs each weaker one)."""
    max_pairs: int = 0
    """At most this many pairs per prompt and step, drawn at random from the rule's (0 = all)."""
    aggregate: str = "sequence"
    """sequence: with the pair loss on every token, the mean over pairs (module docstring); fixed."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.beta <= 0:
            raise ConfigError(f"algo.beta must be > 0, got {self.beta}.")
        if self.pairs not in PAIR_RULES:
            raise ConfigError(f"algo.pairs={self.pairs!r} is unknown; choose one of {', '.join(PAIR_RULES)}.")
        if self.max_pairs < 0:
            raise ConfigError(f"algo.max_pairs must be >= 0, got {self.max_pairs}.")
        if self.aggregate != "sequence" or self.minibatches != 1:
            raise ConfigError(
                "algo=dpo needs algo.aggregate=sequence and algo.minibatches=1 (pairs must stay whole "
                "in a minibatch); use algo.epochs for several passes."
            )


def sft_surrogate(inp: LossInputs, cfg: SFTConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token negative log-likelihood [N, T]; nothing is clipped."""
    return -inp.logprobs, torch.zeros_like(inp.logprobs)


def dpo_pair_loss(
    logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor, beta: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per pair: the DPO loss [N/2] and the implicit reward margin z [N/2], rows 2i (better) and 2i+1 (worse)."""
    seq = (logprobs * mask).sum(dim=1) - (ref_logprobs * mask).sum(dim=1)  # [N]  log π/π_ref per sequence
    pairs = seq.view(-1, 2)  # [N/2, 2]
    z = beta * (pairs[:, 0] - pairs[:, 1])  # [N/2]
    return -torch.nn.functional.logsigmoid(z), z


def dpo_surrogate(inp: LossInputs, cfg: DPOConfig) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """The pair loss on every token of both rows [N, T] (see the module docstring), the indicator of pairs the
    policy still orders wrongly (z ≤ 0) [N, T], and the pair metrics."""
    if inp.ref_logprobs is None or inp.logprobs.shape[0] % 2:
        raise ValueError("algo=dpo needs reference log-probs and whole (better, worse) pairs in each micro-batch.")
    loss, z = dpo_pair_loss(inp.logprobs, inp.ref_logprobs, inp.mask, cfg.beta)  # [N/2], [N/2]
    per_row = loss.repeat_interleave(2)  # [N]
    wrong = (z.detach() <= 0).float().repeat_interleave(2)  # [N]
    metrics = {
        "dpo/accuracy": float((z.detach() > 0).float().mean()),
        "dpo/margin": float(z.detach().mean() / cfg.beta),
    }
    return per_row.unsqueeze(1).expand_as(inp.logprobs), wrong.unsqueeze(1).expand_as(inp.logprobs), metrics


ALGOS.register("sft", SFTConfig, sft_surrogate)
ALGOS.register("dpo", DPOConfig, dpo_surrogate)
