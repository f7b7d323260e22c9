"""`reward=intuitor`: Intuitor (Zhao et al. 2025, "Learning to Reason without External Rewards",
arXiv:2505.19590) — the reward is the policy's own self-certainty, no judge and no verifier.

For a completion o of prompt q, with p_t = π(· | q, o_<t) the policy's next-token distribution over the V
vocabulary entries at completion position t and U the uniform distribution (paper, Eq. for Self-certainty):

    r(o) = SC(o) = (1/|o|) Σ_t KL(U ‖ p_t) = −(1/(|o|·V)) Σ_t Σ_v log(V · p_t(v)).

As in the paper the score is computed *online*, with the current policy (the same weights that sampled
the group, before this step's update), which the authors found prevents the policy from exploiting a
frozen scorer. The tokens scored are exactly the sampled ones (EOS included when the model stopped);
logits are divided by `temperature` first (default 1: the model's raw distribution, as in the paper).

Shapes: B groups, G completions, T completion tokens, V vocabulary. Judge calls per sample: 0.

Differences from the paper: the paper standardises rewards within the group (GRPO); tsrl's default
advantage is w − mean(w) (algo.adv_scale=none) — set algo.adv_scale=group to match the paper. A completion
with no token has no self-certainty: its group is dropped (NaN rewards, zero advantages), never scored 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tsrl.errors import ConfigError
from tsrl.registry import REWARDS
from tsrl.rewards.base import RegimeContext, require_policy
from tsrl.rewards.policy_features import completion_self_certainty
from tsrl.types import Count, Group, RewardBatch


@dataclass
class IntuitorConfig:
    """Reward `intuitor`: self-certainty of the policy's own next-token distributions."""

    temperature: float = 1.0
    """Divide the logits by this before measuring certainty (1 = the model's distribution, as in the paper)."""
    micro_batch_size: int = 32
    """Sequences per no-grad forward pass."""

    def __post_init__(self) -> None:
        if self.temperature <= 0:
            raise ConfigError(f"reward.temperature must be > 0, got {self.temperature}.")


class IntuitorRegime:
    """Scores each completion by its self-certainty under the live policy."""

    def __init__(self, cfg: IntuitorConfig, ctx: RegimeContext) -> None:
        require_policy(ctx, "intuitor", "model", "tokenizer")
        self.cfg, self.ctx = cfg, ctx

    def score(self, groups: Sequence[Group]) -> RewardBatch:
        B, G = len(groups), groups[0].size
        certainty = completion_self_certainty(
            self.ctx.model, groups, self.ctx.tokenizer.pad_token_id, self.cfg.temperature, self.cfg.micro_batch_size
        )  # [B*G]
        rewards = certainty.double().numpy().reshape(B, G)  # [B, G]
        dropped = np.isnan(rewards).any(axis=1)  # [B]
        rewards[dropped] = np.nan
        kept = rewards[~dropped]
        metrics = {
            "reward/comparisons_per_sample": 0.0,
            "reward/dropped_groups": Count(dropped.sum()),
            "intuitor/self_certainty_mean": float(kept.mean()) if kept.size else float("nan"),
            "intuitor/within_group_std": float(kept.std(axis=1).mean()) if kept.size else float("nan"),
        }
        return RewardBatch(rewards=rewards, metrics=metrics)


REWARDS.register("intuitor", IntuitorConfig, IntuitorRegime)
