"""`reward=in_batch` and `reward=arena`: rewards from tournaments *inside* each group (no anchors).

in_batch (TSRL's in-batch rank baseline): a round-robin among the G completions of a group — G(G−1)/2
matches — and reward = the completion's mean soft win-rate against the other G−1, a moving reference
(the group itself improves with the policy, unlike a frozen ladder). Rewards lie in [0, 1].

arena (ArenaRL): the group plays one of the topologies of tsrl.ranking.TOPOLOGIES (`reward.topology`);
its scores give ranks 0 … G−1 (ties share the average rank) and

    r = 1 − rank/(G−1),  reward = (r − mean_G r) / std_G r   (a constant group → zeros).

Judge calls per sample (matches, ×2 when the judge asks both orders — the default, as ArenaRL does):
round_robin (G−1)/2, anchor (G−1)/G, single_elimination 2(G−1)/G with seeding, double_elimination
3(G−1)/G with seeding (exactly 2G−2 bracket matches), swiss ⌊G/2⌋⌈log2 G⌉/G.

Shapes: B groups, G completions. Differences from ArenaRL: its anchor (sample 0) is decoded greedily;
tsrl's generator samples all G alike, so the anchor is an ordinary sample. Tie handling, the double-
elimination details and the Swiss pairing rule are tsrl's (see tsrl/ranking).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tsrl.errors import ConfigError
from tsrl.ranking import TOPOLOGIES, RoundRobin, rank_rewards
from tsrl.rewards.base import RegimeContext, StepCounted
from tsrl.rewards.matches import Table, check_fallback, diagnostics, play
from tsrl.types import Group, RewardBatch


@dataclass
class InBatchConfig:
    """Reward `in_batch`: mean win-rate in a round-robin inside the group (moving reference)."""

    on_failure: str = "drop"
    """A match without verdict: drop (the group) | tie | random (project default: drop)."""
    seed: int = 0
    """Seed of the random fallback."""

    def __post_init__(self) -> None:
        check_fallback(self.on_failure)


@dataclass
class ArenaConfig:
    """Reward `arena`: ArenaRL intra-group tournament, ranks → standardised rewards."""

    topology: str = "round_robin"
    """round_robin | anchor | single_elimination | double_elimination | swiss."""
    on_failure: str = "drop"
    """A match without verdict: drop (the group) | tie | random (project default: drop)."""
    seed: int = 0
    """Seed of elimination coin flips, Swiss draws and the random fallback (mixed with the step)."""

    def __post_init__(self) -> None:
        if self.topology not in TOPOLOGIES:
            raise ConfigError(f"reward.topology={self.topology!r} is unknown; choose one of {', '.join(TOPOLOGIES)}.")
        check_fallback(self.on_failure)


def finish(rewards: np.ndarray, played, histories, n: int, route: str) -> RewardBatch:
    """Apply dropped groups and build the batch with the shared tournament diagnostics."""
    rewards[sorted(played.dropped)] = np.nan
    metrics = diagnostics(histories, n, played, rewards.size)
    return RewardBatch(rewards=rewards, routes=[route] * len(rewards), judge_calls=played.requests, metrics=metrics)


class InBatchRegime(StepCounted):
    """Round-robin inside each group; reward = mean win-rate against the rest of the group."""

    def __init__(self, cfg: InBatchConfig, ctx: RegimeContext) -> None:
        self.cfg, self.ctx, self.steps = cfg, ctx, 0

    def score(self, groups: Sequence[Group]) -> RewardBatch:
        self.steps += 1
        schedules = [RoundRobin(g.size) for g in groups]
        rng = np.random.default_rng([self.cfg.seed, self.steps])
        played = play(groups, schedules, Table(self.ctx.judge, self.cfg.on_failure, rng))
        rewards = np.stack([s.scores() for s in schedules])  # [B, G] mean soft win-rate
        batch = finish(rewards, played, [s.tally.history for s in schedules], groups[0].size, "in_batch")
        batch.metrics["tournament/top_winrate"] = float(np.nanmean(np.nanmax(rewards, axis=1))) if len(rewards) else 0.0
        return batch


class ArenaRegime(StepCounted):
    """One ArenaRL topology per group; reward = standardised 1 − rank/(G−1)."""

    def __init__(self, cfg: ArenaConfig, ctx: RegimeContext) -> None:
        self.cfg, self.ctx, self.steps = cfg, ctx, 0

    def score(self, groups: Sequence[Group]) -> RewardBatch:
        self.steps += 1
        seeds = np.random.default_rng([self.cfg.seed, self.steps]).integers(2**31, size=len(groups) + 1)
        schedules = [TOPOLOGIES[self.cfg.topology](g.size, int(s)) for g, s in zip(groups, seeds)]
        table = Table(self.ctx.judge, self.cfg.on_failure, np.random.default_rng(int(seeds[-1])))
        played = play(groups, schedules, table)
        rewards = np.stack([rank_rewards(s.scores()) for s in schedules])  # [B, G]
        return finish(rewards, played, [s.tally.history for s in schedules], groups[0].size,
                      f"arena/{self.cfg.topology}")
