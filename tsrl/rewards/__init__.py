"""Reward regimes behind RewardRegime.score(groups) -> RewardBatch, chosen by config type."""

from __future__ import annotations

from typing import Any, Callable

from tsrl.rewards.base import RegimeContext, RewardRegime
from tsrl.rewards.ladder import LadderConfig, LadderRegime
from tsrl.rewards.intuitor import IntuitorConfig, IntuitorRegime
from tsrl.rewards.reward_model import RewardModelConfig, RewardModelRegime
from tsrl.rewards.self_bootstrap import SelfBootstrapConfig, SelfBootstrapRegime
from tsrl.rewards.ladder import OneAnchorConfig
from tsrl.rewards.rubric import RubricConfig, RubricRegime
from tsrl.rewards.intragroup import ArenaConfig, ArenaRegime, InBatchConfig, InBatchRegime
from tsrl.rewards.verified import AdaptiveConfig, AdaptiveRegime, VerifierConfig, VerifierRegime
from tsrl.rewards.constitutional import ConstitutionalConfig, ConstitutionalRegime

REGIMES: dict[type, Callable[[Any, RegimeContext], RewardRegime]] = {LadderConfig: LadderRegime}
REGIMES.update({IntuitorConfig: IntuitorRegime, RewardModelConfig: RewardModelRegime,
                SelfBootstrapConfig: SelfBootstrapRegime})
REGIMES.update({OneAnchorConfig: LadderRegime, RubricConfig: RubricRegime, InBatchConfig: InBatchRegime,
                ArenaConfig: ArenaRegime, AdaptiveConfig: AdaptiveRegime, VerifierConfig: VerifierRegime,
                ConstitutionalConfig: ConstitutionalRegime})


def build_regime(cfg: Any, ctx: RegimeContext) -> RewardRegime:
    return REGIMES[type(cfg)](cfg, ctx)


__all__ = ["RegimeContext", "RewardRegime", "REGIMES", "build_regime", "LadderConfig", "LadderRegime",
           "IntuitorConfig", "IntuitorRegime", "RewardModelConfig", "RewardModelRegime", "SelfBootstrapConfig",
           "SelfBootstrapRegime", "OneAnchorConfig", "RubricConfig", "RubricRegime", "InBatchConfig", "InBatchRegime",
           "ArenaConfig", "ArenaRegime", "AdaptiveConfig", "AdaptiveRegime", "VerifierConfig", "VerifierRegime",
           "ConstitutionalConfig", "ConstitutionalRegime"]
