"""`reward=in_batch` and `reward=arena`: rewards from tournaments *inside* each group (no anchors).

in_batch (TSRL §4.9's in-batch rank baseline): a round-robin among the G completions of a group —
G(G−1)/2 matches — gives each completion its mean soft win-rate w against the other G−1; the reward is
its rank in the group,

    reward = 1 − rank(w)/(G−1) ∈ [0, 1]   (rank 0 = highest w, tied w share their average rank),

not standardised here: the trainer's group advantages centre it. The reference moves with the policy (the
group improves with it, unlike a frozen ladder). `reward.output=winrate` rewards w itself instead (tsrl's
earlier default). In a transitive round-robin without soft verdicts the two coincide; they part when the
judge is soft or intransitive.

arena (ArenaRL): the group plays one of the topologies of tsrl.ranking.TOPOLOGIES (`reward.topology`: ArenaRL's
five, or NeMo Gym's circular comparison of neighbours);
its scores give ranks 0 … G−1 (ties share the average rank) and

    r = 1 − rank/(G−1),  reward = (r − mean_G r) / std_G r   (a constant group → zeros).

Judge calls per sample (matches, ×2 when the judge asks both orders — as ArenaRL does, `method=arenarl`):
round_robin (G−1)/2, anchor (G−1)/G, single_elimination 2(G−1)/G with seeding, double_elimination
3(G−1)/G with seeding (exactly 2G−2 bracket matches), swiss ⌊G/2⌋⌈log2 G⌉/G, circular 1 (G matches (i, i+1 mod G)
per group, G ≥ 2).

ArenaRL decodes its anchor (sample 0) greedily. With `reward.greedy_anchor=true` (the default) and a
topology that plays an anchor — anchor, or the seeding pass of single_elimination and double_elimination —
the regime's `greedy_first` is True and the generator decodes sample 0 of every group greedily, the other
G−1 by sampling; `greedy_anchor=false` samples all G alike. round_robin, swiss and circular have no anchor
and always sample all G.

Shapes: B groups, G completions. Differences from ArenaRL: tie handling, the double-elimination details
and the Swiss pairing rule are tsrl's (see tsrl/ranking). Differences from NeMo Gym's circular rule: its GenRM
grades both responses of a pair and rewards the mean grade, tsrl scores the mean soft outcome and rewards the
standardised rank (tsrl/ranking/topologies.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tsrl.errors import ConfigError
from tsrl.ranking import ANCHORED_TOPOLOGIES, TOPOLOGIES, RoundRobin, rank_rewards, ranks
from tsrl.registry import REWARDS
from tsrl.rewards.base import RegimeContext, StepCounted
from tsrl.rewards.matches import Played, Table, diagnostics, play
from tsrl.rewards.stream import GroupStream, Streams
from tsrl.types import RewardBatch


def rank_reward(winrate: np.ndarray) -> np.ndarray:
    """TSRL's in-batch reward 1 − rank/(G−1) ∈ [0, 1] from a group's win-rates [G]; ties share a mean rank."""
    return 1.0 - ranks(winrate) / max(len(winrate) - 1, 1)


IN_BATCH_OUTPUTS = {"rank": rank_reward, "winrate": lambda winrate: winrate}
"""What in_batch rewards, from a group's mean soft win-rates [G] in its round-robin."""


@dataclass
class InBatchConfig:
    """Reward `in_batch`: rank in a round-robin inside the group (moving reference), TSRL §4.9."""

    output: str = "rank"
    """rank: 1 − rank/(G−1) (TSRL) | winrate: the mean soft win-rate itself."""

    def __post_init__(self) -> None:
        if self.output not in IN_BATCH_OUTPUTS:
            raise ConfigError(
                f"reward.output={self.output!r} is unknown; choose one of "
                f"{', '.join(IN_BATCH_OUTPUTS)} (rank is TSRL's in-batch baseline)."
            )


@dataclass
class ArenaConfig:
    """Reward `arena`: ArenaRL intra-group tournament, ranks → standardised rewards."""

    topology: str = "round_robin"
    """round_robin | anchor | single_elimination | double_elimination | swiss (ArenaRL's) | circular (NeMo Gym's
    GenRM comparison: each completion against the next, (i, i+1 mod G), G matches; score = the mean soft outcome
    of its two matches)."""
    greedy_anchor: bool = True
    """Decode sample 0 of each group greedily when the topology uses an anchor — anchor, single_elimination,
    double_elimination (their seeding pass) — as ArenaRL does; ignored for round_robin, swiss and circular; false =
    sample it like the others."""
    seed: int = 0
    """Seed of elimination coin flips, Swiss draws and the random fallback (mixed with the step)."""

    def __post_init__(self) -> None:
        if self.topology not in TOPOLOGIES:
            raise ConfigError(f"reward.topology={self.topology!r} is unknown; choose one of {', '.join(TOPOLOGIES)}.")


def finish(rewards: np.ndarray, played: Played) -> RewardBatch:
    """Apply dropped groups and build the batch with the shared tournament diagnostics."""
    rewards[sorted(played.dropped)] = np.nan
    metrics = diagnostics(played.histories(), played.groups[0].size, played, rewards.size)
    return RewardBatch(rewards=rewards, metrics=metrics)


class InBatchRegime(Streams):
    """Round-robin inside each group; reward = rank by mean win-rate (or the win-rate, output=winrate)."""

    def __init__(self, cfg: InBatchConfig, ctx: RegimeContext) -> None:
        self.cfg, self.ctx = cfg, ctx

    def score_stream(self, stream: GroupStream) -> RewardBatch:
        played = play(stream, lambda _, groups: [RoundRobin(g.size) for g in groups], Table(self.ctx.judge, "drop"))
        winrate = np.stack([s.scores() for s in played.schedules])  # [B, G] mean soft win-rate
        rewards = np.stack([IN_BATCH_OUTPUTS[self.cfg.output](w) for w in winrate])  # [B, G]
        batch = finish(rewards, played)
        winrate[sorted(played.dropped)] = np.nan
        top = float(np.nanmean(np.nanmax(winrate, axis=1))) if len(winrate) else 0.0
        batch.metrics["tournament/top_winrate"] = top  # the best completion's win-rate, whatever `output`
        return batch


class ArenaRegime(Streams, StepCounted):
    """One ArenaRL topology per group; reward = standardised 1 − rank/(G−1)."""

    def __init__(self, cfg: ArenaConfig, ctx: RegimeContext) -> None:
        self.cfg, self.ctx, self.steps = cfg, ctx, 0

    @property
    def greedy_first(self) -> bool:
        """Whether the generator should decode sample 0 of each group greedily (ArenaRL's anchor)."""
        return self.cfg.greedy_anchor and self.cfg.topology in ANCHORED_TOPOLOGIES

    def score_stream(self, stream: GroupStream) -> RewardBatch:
        self.steps += 1
        seeds = np.random.default_rng([self.cfg.seed, self.steps]).integers(2**31, size=stream.total + 1)
        topology = TOPOLOGIES[self.cfg.topology]
        table = Table(self.ctx.judge, "drop", np.random.default_rng(int(seeds[-1])))
        played = play(
            stream, lambda start, groups: [topology(g.size, int(seeds[start + i])) for i, g in enumerate(groups)], table
        )
        rewards = np.stack([rank_rewards(s.scores()) for s in played.schedules])  # [B, G]
        return finish(rewards, played)


REWARDS.register("in_batch", InBatchConfig, InBatchRegime)
REWARDS.register("arena", ArenaConfig, ArenaRegime)
