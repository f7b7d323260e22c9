"""Pure ranking math: Bradley–Terry (per group and batched), Elo, the topological order of a comparison graph, and
tournament schedules. No I/O."""

import numpy as np

from tsrl.ranking.bradley_terry import bradley_terry_loss, fit_bradley_terry, fit_bradley_terry_batch, pad_matches
from tsrl.ranking.elo import elo_ratings
from tsrl.ranking.live import ConstitutionalBracket, LiveTrace, TraceRoundRobin, soft_outcome
from tsrl.ranking.schedule import Match, Schedule, rank_rewards, ranks, run_schedules, standardise
from tsrl.ranking.swiss import Swiss
from tsrl.ranking.topological import topological_order, topological_strengths
from tsrl.ranking.topologies import (
    AnchorBased,
    Circular,
    DoubleElimination,
    RoundRobin,
    SingleElimination,
    bracket_order,
)

TOPOLOGIES = {
    "round_robin": lambda n, seed: RoundRobin(n),
    "anchor": lambda n, seed: AnchorBased(n),
    "single_elimination": lambda n, seed: SingleElimination(n, seed=seed),
    "double_elimination": lambda n, seed: DoubleElimination(n, seed=seed),
    "swiss": lambda n, seed: Swiss(n, order=np.random.default_rng(seed).permutation(n).tolist()),
    "circular": lambda n, seed: Circular(n),
}
"""Intra-group topologies by name: (N, seed) → a fresh Schedule (Swiss starts from a seeded draw). ArenaRL's five, and
NeMo Gym's circular comparison of neighbours."""

ANCHORED_TOPOLOGIES = frozenset({"anchor", "single_elimination", "double_elimination"})
"""The topologies that play sample 0 as an anchor (elimination brackets in their seeding pass)."""

__all__ = [
    "bradley_terry_loss",
    "fit_bradley_terry",
    "fit_bradley_terry_batch",
    "pad_matches",
    "elo_ratings",
    "topological_order",
    "topological_strengths",
    "ConstitutionalBracket",
    "LiveTrace",
    "TraceRoundRobin",
    "soft_outcome",
    "Match",
    "Schedule",
    "rank_rewards",
    "ranks",
    "run_schedules",
    "standardise",
    "Swiss",
    "AnchorBased",
    "Circular",
    "DoubleElimination",
    "RoundRobin",
    "SingleElimination",
    "bracket_order",
    "TOPOLOGIES",
    "ANCHORED_TOPOLOGIES",
]
