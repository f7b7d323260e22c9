"""Reward regimes behind RewardRegime.score(groups) -> RewardBatch, chosen by config type."""

from __future__ import annotations

from typing import Any, Callable

from tsrl.rewards.base import RegimeContext, RewardRegime
from tsrl.rewards.ladder import LadderConfig, LadderRegime

REGIMES: dict[type, Callable[[Any, RegimeContext], RewardRegime]] = {LadderConfig: LadderRegime}


def build_regime(cfg: Any, ctx: RegimeContext) -> RewardRegime:
    return REGIMES[type(cfg)](cfg, ctx)


__all__ = ["RegimeContext", "RewardRegime", "REGIMES", "build_regime", "LadderConfig", "LadderRegime"]
