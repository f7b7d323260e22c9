"""`reward=rubric`: the Rubrics baseline — a pointwise judge score per completion, no comparisons. The same
reward is `reward=rlaif`, Reasoning Arena's RLAIF row (the judge's score as the whole reward, on verifiable tasks
too, where the verifier is then not used).

reward(c) = s(c) / 10 with s ∈ [0, 10] the judge's rubric grade (Judge.score). One score request per
completion (calls per sample = 1). A completion the judge could not grade drops its whole group (NaN
rewards → zero advantages) rather than counting as 0; missing scores are counted.
Diagnostics: mean grade, and the fraction of groups whose grades are all equal (no learning signal) —
the weakness of pointwise rubrics that the pairwise regimes address.

Shapes: B groups, G completions. Differences from TSRL's baseline: the rubric prompt is the judge's
(tsrl/judging), and dividing by 10 is tsrl's normalisation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tsrl.registry import REWARDS
from tsrl.rewards.base import RegimeContext
from tsrl.rewards.stream import GroupStream, Streams
from tsrl.types import Count, Group, RewardBatch, ScoreRequest


@dataclass
class RubricConfig:
    """Reward `rubric`: pointwise judge grade 0–10, scaled to [0, 1]."""

    scale: float = 10.0
    """The grade that maps to reward 1 (the judge grades 0–10)."""


@dataclass
class RLAIFConfig(RubricConfig):
    """Reward `rlaif` (Reasoning Arena's RLAIF row): the judge's pointwise grade as the whole reward, any task."""


def grades(judge, groups: Sequence[Group]) -> np.ndarray:
    """The judge's grade of every completion [B, G]; NaN where it gave none."""
    answers = judge.score([ScoreRequest(g.prompt, r.text) for g in groups for r in g.rollouts])
    return np.array([np.nan if a.value is None else a.value for a in answers]).reshape(len(groups), -1)


def graded_batch(grades: np.ndarray, scale: float) -> RewardBatch:
    """Rewards grade / scale from grades [B, G]; a group with an ungraded completion is dropped."""
    B, G = grades.shape
    missing = np.isnan(grades)
    dropped = missing.any(axis=1)  # [B]
    rewards = grades / scale
    rewards[dropped] = np.nan
    kept = grades[~dropped]
    metrics = {
        "reward/comparisons_per_sample": 1.0 if B * G else 0.0,  # one score request per completion
        "reward/missing_verdicts": Count(missing.sum()),
        "reward/dropped_groups": Count(dropped.sum()),
        "rubric/mean_grade": float(kept.mean()) if kept.size else float("nan"),
        "rubric/flat_group_frac": float((kept.std(axis=1) == 0).mean()) if kept.size else 1.0,
    }
    return RewardBatch(rewards=rewards, metrics=metrics)


class RubricRegime(Streams):
    """reward = judge grade / scale; an ungraded completion drops its group. Streams: each arrival is graded as
    one batch."""

    def __init__(self, cfg: RubricConfig, ctx: RegimeContext) -> None:
        self.cfg, self.ctx = cfg, ctx

    def score_stream(self, stream: GroupStream) -> RewardBatch:
        rows = [grades(self.ctx.judge, chunk) for chunk in stream.chunks()]
        return graded_batch(np.concatenate(rows) if rows else np.zeros((0, 0)), self.cfg.scale)


REWARDS.register("rubric", RubricConfig, RubricRegime)
REWARDS.register("rlaif", RLAIFConfig, RubricRegime)
