"""`reward=self_bootstrap`: TSRL's self-bootstrapped ladder — the anchors are sampled from the policy itself.

Build (at setup and at every refresh): for every training prompt and every quality tier τ (TSRL §4.10: four
tiers, low-effort → top-tier; the instructions' wording is tsrl's), the policy samples `samples_per_tier` responses
to the prompt with the tier's instruction
appended, giving K = |tiers| · samples_per_tier anchors per prompt. The judge then ranks them exactly as
`reward=ladder` ranks given anchors (round-robin, Bradley–Terry, stored; the ladder module is reused, not
copied), and the training reward is the ladder win-rate over k of them, w(c) = (1/k) Σ_i p(c ≻ r_i).

Refresh schedule. The ladder is rebuilt from the current policy every `period` steps and at no other time:
TSRL §4.10's "refreshing anchors every 50 steps" (R = 50, the default), its Table 4 reading the policy after
each of four such iterations (steps 50, 100, 150, 200). Early refresh (ours, off by default: the paper
describes none): with `saturation_patience` > 0, a batch mean win-rate above `saturation_threshold` for
`saturation_patience` consecutive steps means the policy has outgrown its ladder (rewards bunch near 1,
advantages vanish), so the ladder is rebuilt early and the schedule restarts from there. A refresh takes
effect from the next step; both kinds are counted (`bootstrap/refreshes`, `bootstrap/early_refreshes`).

Ladder diversity (reported because the paper finds it matters) comes from the ladder's own report
(tsrl/rewards/diversity.py, logged as ladder/* — distinct-1/2, Jaccard): `bootstrap/ladder_diversity` is the
mean pairwise Jaccard distance between a prompt's anchor word sets, 1 − |A∩B|/|A∪B| ∈ [0, 1], averaged over
prompts (×100 for "points") and refreshed with the ladder, plus the share of distinct anchor texts.

Shapes: B groups, G completions, K anchors per prompt, k selected. Judge calls per sample = k (× 2 with
both orders) per step, plus the round-robin |prompts| · K(K−1)/2 (× 2) at each refresh, counted in that
step's judge/calls. Anchor sampling runs under its own seeded RNG (seed, refresh index), so it never shifts
the training trajectory. The refresh state and the sampled anchors travel in checkpoints (state_dict), so a
resumed run scores against the same ladder (re-ranked from the stored ladder file, no judge calls) and
refreshes on the same steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from tsrl.errors import ConfigError
from tsrl.registry import REWARDS
from tsrl.rewards.base import RegimeContext, require_policy
from tsrl.rewards.ladder import LadderConfig, LadderRegime
from tsrl.tasks import TaskView
from tsrl.types import Anchor, Count, Group, Prompt, RewardBatch

DEFAULT_TIERS = {  # TSRL §4.10: four quality tiers, low-effort to top-tier (the wording is tsrl's)
    "low": "Reply with minimal effort: the first thing that comes to mind.",
    "okay": "Give a decent, ordinary response.",
    "good": "Give a good, careful response.",
    "top": "Give a top-tier response: the best an expert could write.",
}


@dataclass
class SelfBootstrapConfig:
    """Reward `self_bootstrap`: ladder of anchors sampled from the policy under quality-tier prompts."""

    ladder: LadderConfig = field(default_factory=LadderConfig)
    """How the bootstrapped anchors are ranked and used (k, l2, ladder_dir... as in reward=ladder)."""
    tiers: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_TIERS))
    """Quality tier name → instruction appended to the task prompt when sampling that tier's anchors."""
    samples_per_tier: int = 1
    """Anchors sampled per tier and prompt (K = tiers × samples_per_tier)."""
    period: int = 50
    """R: rebuild the ladder from the current policy every R steps (paper: 50; 0 = never)."""
    saturation_threshold: float = 0.9
    """Mean win-rate above which a step counts as saturated, for the early refresh (≥ 1 disables it)."""
    saturation_patience: int = 0
    """Saturated steps in a row that trigger an early refresh (ours); 0, the default, keeps the paper's schedule
    alone (every `period` steps), e.g. 3 rebuilds after three saturated steps."""
    max_new_tokens: int = 0
    """Length cap of anchor samples (0 = the generator's max_new_tokens)."""
    seed: int = 0
    """Seed of anchor sampling (combined with the refresh index)."""

    def __post_init__(self) -> None:
        if not self.tiers or self.samples_per_tier < 1:
            raise ConfigError("reward.tiers must name at least one tier and reward.samples_per_tier must be >= 1.")
        anchors = len(self.tiers) * self.samples_per_tier
        if self.ladder.k > anchors:
            raise ConfigError(
                f"reward.ladder.k={self.ladder.k} but self_bootstrap samples only {anchors} anchors per "
                f"prompt (tiers × samples_per_tier); set reward.ladder.k to at most {anchors} or add tiers."
            )
        if self.period < 0 or self.saturation_patience < 0:
            raise ConfigError("reward.period and reward.saturation_patience must be >= 0 (0 disables).")


@dataclass(frozen=True)
class RefreshState:
    """Where the refresh schedule stands."""

    steps_since_refresh: int = 0
    saturated_steps: int = 0


def refresh_decision(
    state: RefreshState, mean_winrate: float, period: int, threshold: float, patience: int
) -> tuple[RefreshState, str | None]:
    """Advance the schedule by one scored step; returns the new state and "scheduled", "saturated" or None."""
    steps = state.steps_since_refresh + 1
    saturated = state.saturated_steps + 1 if mean_winrate > threshold else 0  # NaN compares False
    if period and steps >= period:
        return RefreshState(), "scheduled"
    if patience and saturated >= patience:
        return RefreshState(), "saturated"
    return RefreshState(steps, saturated), None


def sample_anchors(
    ctx: RegimeContext, cfg: SelfBootstrapConfig, prompts: Sequence[Prompt], refresh: int
) -> list[Prompt]:
    """Every prompt with K fresh anchors from the policy, one tier instruction at a time, under a seeded RNG."""
    import torch

    tiered = [
        Prompt(id=f"{p.id}@{tier}", text=f"{p.text}\n\n{instruction}", fields=p.fields)
        for p in prompts
        for tier, instruction in cfg.tiers.items()
    ]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed * 1_000_003 + refresh)
        groups = ctx.generator.generate(tiered, cfg.samples_per_tier, cfg.max_new_tokens or None)
    T = len(cfg.tiers)
    return [
        replace(
            p,
            anchors=tuple(
                Anchor(r.text, tier) for g, tier in zip(groups[b * T : (b + 1) * T], cfg.tiers) for r in g.rollouts
            ),
        )
        for b, p in enumerate(prompts)
    ]


class SelfBootstrapRegime:
    """Ladder reward over policy-sampled anchors, refreshed on a schedule (and, when switched on, on saturation)."""

    def __init__(self, cfg: SelfBootstrapConfig, ctx: RegimeContext) -> None:
        require_policy(ctx, "self_bootstrap", "generator")
        self.cfg, self.ctx = cfg, ctx
        self.state, self.refreshes, self.early_refreshes = RefreshState(), 0, 0
        self.refresh_calls = self._rebuild()

    def state_dict(self) -> dict:
        """The refresh schedule and the current anchors (JSON-serialisable), for checkpoints."""
        anchors = {p.id: [[a.text, a.tier] for a in p.anchors] for p in self.anchored}
        return {
            "refreshes": self.refreshes,
            "early_refreshes": self.early_refreshes,
            "steps_since_refresh": self.state.steps_since_refresh,
            "saturated_steps": self.state.saturated_steps,
            "anchors": anchors,
        }

    def load_state_dict(self, state: dict) -> None:
        self.refreshes, self.early_refreshes = state["refreshes"], state["early_refreshes"]
        self.state = RefreshState(state["steps_since_refresh"], state["saturated_steps"])
        prompts = [
            replace(p, anchors=tuple(Anchor(t, tier) for t, tier in state["anchors"][p.id]))
            for p in self.ctx.task.prompts("train")
        ]
        self._rank(prompts)

    def _rebuild(self) -> int:
        """Sample and rank a new ladder; returns the judge calls its round-robin cost. With several processes
        every one samples (generation may be collective, e.g. under ZeRO-3), the main process's anchors are
        used everywhere, and each process judges its share of the round-robin (LadderRegime)."""
        prompts = self.ctx.collective.from_main(
            sample_anchors(self.ctx, self.cfg, self.ctx.task.prompts("train"), self.refreshes)
        )
        return self._rank(prompts)

    def _rank(self, prompts: list[Prompt]) -> int:
        """Rank the given anchored prompts into the current ladder; returns the judge calls it cost."""
        self.anchored = prompts
        task = TaskView(self.ctx.task, prompts, f"{self.ctx.task.name}-selfboot")
        view = RegimeContext(
            task,
            self.ctx.judge,
            self.ctx.judge_fingerprint,
            self.ctx.run_dir,
            collective=self.ctx.collective,
            rank_judge=self.ctx.rank_judge,  # ladder.judge: the clean judge ranks each refresh too
            rank_fingerprint=self.ctx.rank_fingerprint,
        )
        self.ladder = LadderRegime(self.cfg.ladder, view)
        texts = [[r.anchor.text for r in rungs] for rungs in self.ladder.ladders.values()]
        self.diversity = float(self.ladder.diversity["jaccard_distance"])  # diversity.py, via the ladder
        self.distinct = float(np.mean([len(set(t)) / len(t) for t in texts]))
        return self.ladder.build_calls

    def score(self, groups: Sequence[Group]) -> RewardBatch:
        batch = self.ladder.score(groups)
        mean = float(np.nanmean(batch.rewards)) if not np.isnan(batch.rewards).all() else float("nan")
        mean = self.ctx.collective.mean(mean)  # every process takes the same refresh decision
        self.state, reason = refresh_decision(
            self.state, mean, self.cfg.period, self.cfg.saturation_threshold, self.cfg.saturation_patience
        )
        metrics = {
            **batch.metrics,
            "bootstrap/ladder_diversity": self.diversity,
            "bootstrap/distinct_anchor_frac": self.distinct,
            "bootstrap/saturated_steps": float(self.state.saturated_steps),
        }
        calls = 0
        if reason is not None:
            self.refreshes += 1
            self.early_refreshes += reason == "saturated"
            calls = self._rebuild()
        metrics.update(
            {
                "bootstrap/refreshes": float(self.refreshes),
                "bootstrap/early_refreshes": float(self.early_refreshes),
                "bootstrap/refresh_calls": Count(calls),
            }
        )
        return replace(batch, metrics=metrics)


REWARDS.register("self_bootstrap", SelfBootstrapConfig, SelfBootstrapRegime)
