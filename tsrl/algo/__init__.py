"""Advantages and losses as pure tensor functions, chosen by name from dicts."""

from tsrl.algo.advantages import SCALES, group_advantages
from tsrl.algo.losses import (AGGREGATES, DEFAULT_AGGREGATE, SURROGATES, LossInputs, LossOutputs, LossSettings, k3_kl,
                              policy_loss)

__all__ = [
    "SCALES", "group_advantages", "AGGREGATES", "DEFAULT_AGGREGATE", "SURROGATES", "LossInputs", "LossOutputs",
    "LossSettings", "k3_kl", "policy_loss",
]
