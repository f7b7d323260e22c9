"""Reward regimes behind RewardRegime.score(groups) -> RewardBatch; each regime module registers itself in
tsrl.registry.REWARDS (name, config class, builder(config, RegimeContext))."""

from __future__ import annotations

from typing import Any

from tsrl.registry import REWARDS
from tsrl.rewards.base import RegimeContext, RewardRegime, SamplingRegime, StatefulRegime
from tsrl.rewards.constitutional import ConstitutionalConfig, ConstitutionalRegime
from tsrl.rewards.intragroup import ArenaConfig, ArenaRegime, InBatchConfig, InBatchRegime
from tsrl.rewards.intuitor import IntuitorConfig, IntuitorRegime
from tsrl.rewards.ladder import LadderConfig, LadderRegime, OneAnchorConfig
from tsrl.rewards.listwise import ListwiseConfig, ListwiseRegime
from tsrl.rewards.reward_model import RewardModelConfig, RewardModelRegime
from tsrl.rewards.rubric import RubricConfig, RubricRegime
from tsrl.rewards.self_bootstrap import SelfBootstrapConfig, SelfBootstrapRegime
from tsrl.rewards.verified import AdaptiveConfig, AdaptiveRegime, VerifierConfig, VerifierRegime


def build_regime(cfg: Any, ctx: RegimeContext) -> RewardRegime:
    return REWARDS.build(cfg, ctx)


__all__ = [
    "RegimeContext",
    "RewardRegime",
    "SamplingRegime",
    "StatefulRegime",
    "build_regime",
    "LadderConfig",
    "LadderRegime",
    "IntuitorConfig",
    "IntuitorRegime",
    "RewardModelConfig",
    "RewardModelRegime",
    "SelfBootstrapConfig",
    "SelfBootstrapRegime",
    "OneAnchorConfig",
    "RubricConfig",
    "RubricRegime",
    "InBatchConfig",
    "InBatchRegime",
    "ArenaConfig",
    "ArenaRegime",
    "AdaptiveConfig",
    "AdaptiveRegime",
    "VerifierConfig",
    "VerifierRegime",
    "ConstitutionalConfig",
    "ConstitutionalRegime",
    "ListwiseConfig",
    "ListwiseRegime",
]
