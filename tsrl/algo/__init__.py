"""Advantages and losses as pure tensor functions; each loss registers itself in tsrl.registry.ALGOS."""

from tsrl.algo.advantages import ADV_SCALES, SCALES, group_advantages
from tsrl.algo.losses import (
    AGGREGATES,
    AlgoConfig,
    CISPOConfig,
    DrGRPOConfig,
    GRPOConfig,
    LossInputs,
    LossOutputs,
    inert_clip_warning,
    k3_kl,
    policy_loss,
)

__all__ = [
    "ADV_SCALES",
    "SCALES",
    "group_advantages",
    "AGGREGATES",
    "AlgoConfig",
    "GRPOConfig",
    "DrGRPOConfig",
    "CISPOConfig",
    "LossInputs",
    "LossOutputs",
    "inert_clip_warning",
    "k3_kl",
    "policy_loss",
]
