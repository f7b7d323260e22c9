"""The RewardRegime protocol and what a regime is built from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable

from tsrl.judging import Judge
from tsrl.tasks import Task
from tsrl.types import Group, RewardBatch


class RewardRegime(Protocol):
    def score(self, groups: Sequence[Group]) -> RewardBatch: ...


@runtime_checkable
class StatefulRegime(Protocol):
    """A regime whose state must travel in checkpoints (step counters, sampled ladders)."""

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


@runtime_checkable
class SamplingRegime(Protocol):
    """A regime that asks the generator for something besides plain samples (ArenaRL: a greedy sample 0)."""

    greedy_first: bool


@dataclass
class RegimeContext:
    """Everything a regime may use besides its own config."""

    task: Task
    judge: Judge
    judge_fingerprint: str  # identifies judge + its settings, for stored ladders and caches
    run_dir: Path
    model: Any = None  # the live policy (torch module), for regimes that read its logits (intuitor, reward_model)
    tokenizer: Any = None  # the policy's tokenizer
    generator: Any = None  # a Generator sampling from the live policy (self_bootstrap)


def require_policy(ctx: RegimeContext, regime: str, *needs: str) -> None:
    """Raise a UserError naming what `regime` needs from the policy when the context lacks it."""
    missing = [name for name in needs if getattr(ctx, name) is None]
    if missing:
        from tsrl.errors import ConfigError

        raise ConfigError(
            f"reward={regime} needs the policy's {' and '.join(missing)}, which this context lacks; the trainer sets "
            f"them, and outside it pass policy=(model, tokenizer) to tsrl.score_groups / tsrl.build_scorer.")


class StepCounted:
    """For regimes that seed each step's randomness (draws, coin flips, arrival order) from the number of
    score() calls so far: the count travels in checkpoints (the trainer saves state_dict()), so a resumed
    run draws the same numbers as an uninterrupted one."""

    steps: int = 0

    def state_dict(self) -> dict:
        return {"steps": self.steps}

    def load_state_dict(self, state: dict) -> None:
        self.steps = state["steps"]
