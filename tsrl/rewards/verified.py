"""`reward=verifier` (plain RLVR) and `reward=adaptive` (Reasoning Arena's routed reward).

verifier: reward = task.verify(prompt, completion) ∈ [0, 1] (humor: both required words present → 1).
No judge calls.

adaptive, per group of G completions with verifier rewards v [G]:
- route `verifier` when Var(v) > 0 — the verifier already separates the group, reward = v;
- route `tournament` otherwise — a trace tournament among the G completions (`reward.tournament`):
  - `live` (default): tsrl.ranking.LiveTrace, each arriving trace vs the current best, worst and median,
    ≤ 3 matches per trace, 3G − 6 per group for G ≥ 3; "current" by the win-rate leaderboard of the matches so
    far (the paper's; `reward.leaderboard=bt` orders by Bradley–Terry β instead, ours);
  - `round_robin`: tsrl.ranking.TraceRoundRobin, the paper's non-live variant, all G(G−1)/2 pairs in one
    round;
  either way hard verdicts become soft outcomes y ∈ {m, ½, 1 − m}, every match is mirror-augmented, and
  Bradley–Terry β [G] minimises
  L(β) = −Σ[y·log σ(βi−βj) + (1−y)·log σ(βj−βi)] + (λ/2)‖β‖², reward = (β − min β)/(max β − min β);
  a constant β (no preference at all) gives every completion ½ — a constant group, so zero advantages.
- `pointwise` (Reasoning Arena's Adaptive Pointwise baseline): no tournament; each routed trace gets the
  judge's pointwise grade / 10 (one score call per trace), as reward=rubric does.
Route counts and fractions are logged (route/verifier, route/tournament, route/*_frac; with pointwise,
route/tournament counts the groups sent to the judge).

Shapes: B groups, G completions. Differences from Reasoning Arena: traces finish together in tsrl's
generator, so the live arrival order is a seeded permutation; m = 0.9 and λ = 0.1 are project defaults
(the paper does not publish them); the paper's CISPO loss is `algo=cispo`, not implied by this regime.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tsrl.errors import ConfigError
from tsrl.ranking import LiveTrace, Schedule, TraceRoundRobin
from tsrl.ranking.live import LEADERBOARDS
from tsrl.registry import REWARDS
from tsrl.rewards.base import RegimeContext, StepCounted
from tsrl.rewards.matches import Table, diagnostics, play
from tsrl.rewards.rubric import graded_batch, grades
from tsrl.rewards.stream import GroupStream, Streams
from tsrl.tasks import Task, Verifiable
from tsrl.tasks.base import verify_rollouts
from tsrl.types import Count, Group, RewardBatch


@dataclass
class VerifierConfig:
    """Reward `verifier`: the task's programmatic check (plain RLVR), no judge."""


TRACE_TOURNAMENTS: dict[str, Callable[[int, np.random.Generator, AdaptiveConfig], Schedule]] = {
    "live": lambda n, rng, c: LiveTrace(
        n, arrival=rng.permutation(n).tolist(), margin=c.margin, l2=c.l2, leaderboard=c.leaderboard
    ),
    "round_robin": lambda n, rng, c: TraceRoundRobin(n, margin=c.margin, l2=c.l2),  # no arrival order
}
"""Reasoning Arena's trace tournaments by name: (G, rng for the arrival order, reward config) → a fresh Schedule."""


@dataclass
class AdaptiveConfig:
    """Reward `adaptive`: verifier when it separates the group, else a trace tournament + Bradley–Terry."""

    tournament: str = "live"
    """live: each trace vs the current best, worst, median (3G − 6 matches) | round_robin: all G(G−1)/2 |
    pointwise: no tournament, the judge's 0–10 grade / 10 of each trace (Reasoning Arena's Adaptive Pointwise)."""
    scale: float = 10.0
    """tournament=pointwise: the grade that maps to reward 1."""
    margin: float = 0.9
    """Soft margin m ∈ (½, 1]: a win is the outcome m, a loss 1 − m (project default)."""
    l2: float = 0.1
    """L2 strength λ of the Bradley–Terry fit (project default)."""
    seed: int = 0
    """Seed of the arrival order and the random fallback (mixed with the step)."""
    leaderboard: str = "winrate"
    """tournament=live: how the current best, worst and median opponents are picked — winrate (each trace's
    win-rate over its matches so far, Reasoning Arena's leaderboard) | bt (Bradley–Terry β so far, ours)."""

    def __post_init__(self) -> None:
        if self.leaderboard not in LEADERBOARDS:
            raise ConfigError(
                f"reward.leaderboard={self.leaderboard!r} is unknown; choose one of "
                f"{', '.join(LEADERBOARDS)} (winrate is Reasoning Arena's)."
            )
        if self.tournament not in (*TRACE_TOURNAMENTS, "pointwise"):
            raise ConfigError(
                f"reward.tournament={self.tournament!r} is unknown; choose one of "
                f"{', '.join(TRACE_TOURNAMENTS)}, pointwise (live is the default)."
            )
        if not 0.5 < self.margin <= 1.0:
            raise ConfigError(f"reward.margin={self.margin} must lie in (0.5, 1]; the paper's soft margin is m > ½.")
        if self.l2 <= 0:
            raise ConfigError(f"reward.l2={self.l2} must be > 0 to keep Bradley-Terry strengths finite.")


def verifier_of(task: Task, regime: str) -> Verifiable:
    if not isinstance(task, Verifiable):
        raise ConfigError(
            f"reward={regime} needs a task with a verifier, and task {task.name!r} has none; "
            "pick a task that defines verify(prompt, text) or another reward."
        )
    return task


def verify_groups(task: Verifiable, groups: Sequence[Group]) -> np.ndarray:
    """Verifier rewards [B, G]."""
    return np.array(verify_rollouts(task, groups), dtype=np.float64)  # task=code: its sandboxes run at once


def min_max(beta: np.ndarray) -> np.ndarray:
    """(β − min)/(max − min) over the last axis; a constant row becomes ½."""
    low, high = beta.min(axis=-1, keepdims=True), beta.max(axis=-1, keepdims=True)
    return np.where(high - low > 1e-9, (beta - low) / np.maximum(high - low, 1e-9), 0.5)


class VerifierRegime(Streams):
    """reward = task.verify(prompt, completion); streams: each arrival is verified at once."""

    def __init__(self, cfg: VerifierConfig, ctx: RegimeContext) -> None:
        self.task = verifier_of(ctx.task, "verifier")

    def score_stream(self, stream: GroupStream) -> RewardBatch:
        rewards = np.concatenate([verify_groups(self.task, chunk) for chunk in stream.chunks()])  # [B, G]
        metrics = {
            "reward/comparisons_per_sample": 0.0,
            "verifier/pass_rate": float(rewards.mean()),
            "verifier/separating_frac": float((rewards.std(axis=1) > 0).mean()),
        }
        return RewardBatch(rewards=rewards, metrics=metrics)


class AdaptiveRegime(Streams, StepCounted):
    """Route each group to its verifier rewards or to a trace tournament; see the module docstring. Streams:
    each arrival is verified at once, and its routed groups join the tournament (or are graded) right away."""

    def __init__(self, cfg: AdaptiveConfig, ctx: RegimeContext) -> None:
        self.cfg, self.ctx, self.steps = cfg, ctx, 0
        self.task = verifier_of(ctx.task, "adaptive")

    def score_stream(self, stream: GroupStream) -> RewardBatch:
        self.steps += 1
        if self.cfg.tournament == "pointwise":
            return self.graded(stream)
        rng = np.random.default_rng([self.cfg.seed, self.steps])
        make = TRACE_TOURNAMENTS[self.cfg.tournament]
        verified: list[np.ndarray] = []

        def schedules(_, groups: list[Group]) -> list[Schedule | None]:  # the verifier cannot separate a routed group
            rows = verify_groups(self.task, groups)  # [b, G]
            verified.extend(rows)
            return [make(g.size, rng, self.cfg) if row.std() == 0 else None for g, row in zip(groups, rows)]

        played = play(stream, schedules, Table(self.ctx.judge, "drop", rng))
        rewards = np.stack(verified)  # [B, G]
        routed = [b for b, schedule in enumerate(played.schedules) if schedule is not None]
        for b in routed:
            rewards[b] = min_max(played.schedules[b].scores())
        rewards[sorted(played.dropped)] = np.nan
        metrics = diagnostics(played.histories(), played.groups[0].size, played, rewards.size)
        return RewardBatch(rewards=rewards, metrics={**metrics, **route_counts(len(rewards), len(routed))})

    def graded(self, stream: GroupStream) -> RewardBatch:
        """Adaptive Pointwise: the routed groups get the judge's grade / scale (an ungraded trace drops its
        group, as reward=rubric does); the others keep their verifier rewards."""
        rows, routed, graded = [], [], []
        for chunk in stream.chunks():
            verified = verify_groups(self.task, chunk)  # [b, G]
            mine = [i for i, row in enumerate(verified) if row.std() == 0]
            if mine:
                graded.append(grades(self.ctx.judge, [chunk[i] for i in mine]))
            routed += [len(rows) + i for i in mine]
            rows += list(verified)
        rewards = np.stack(rows)  # [B, G]
        metrics: dict[str, float] = {"reward/comparisons_per_sample": 0.0}
        if routed:
            batch = graded_batch(np.concatenate(graded), self.cfg.scale)
            rewards[routed] = batch.rewards
            metrics = {**batch.metrics, "reward/comparisons_per_sample": len(routed) / len(rewards)}
        return RewardBatch(rewards=rewards, metrics={**metrics, **route_counts(len(rewards), len(routed))})


def route_counts(groups: int, routed: int) -> dict[str, float]:
    return {
        "route/verifier": Count(groups - routed),
        "route/tournament": Count(routed),
        "route/verifier_frac": (groups - routed) / groups,
        "route/tournament_frac": routed / groups,
    }


REWARDS.register("verifier", VerifierConfig, VerifierRegime, check=lambda cfg, task: verifier_of(task, "verifier"))
REWARDS.register("adaptive", AdaptiveConfig, AdaptiveRegime, check=lambda cfg, task: verifier_of(task, "adaptive"))
