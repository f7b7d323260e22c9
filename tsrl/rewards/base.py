"""The RewardRegime protocol and what a regime is built from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from tsrl.errors import ConfigError
from tsrl.judging import Judge
from tsrl.models.view import as_view
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


T = TypeVar("T")


class Collective(Protocol):
    """How a regime agrees with the other training processes, each of which scores its own groups. Setup work
    (a ladder's round-robin) is shared: each process judges its part (`share`) and `gather` hands every process
    the whole, so none waits on another for longer than the others' part takes."""

    is_main: bool  # the process that writes run files
    rank: int  # this process's index, 0 … world_size − 1
    world_size: int

    def mean(self, value: float) -> float:
        """The mean of `value` over every process."""

    def from_main(self, value: T) -> T:
        """The main process's `value` (picklable), on every process."""

    def gather(self, value: T) -> list[T]:
        """Every process's `value` (picklable), in process order, on every process."""


class SingleProcess:
    """The Collective of a run with one process."""

    is_main, rank, world_size = True, 0, 1

    def mean(self, value: float) -> float:
        return value

    def from_main(self, value: T) -> T:
        return value

    def gather(self, value: T) -> list[T]:
        return [value]


def share(n: int, collective: Collective) -> tuple[int, int]:
    """This process's contiguous part [lo, hi) of n items split over the processes, sizes differing by one at most
    (the first n mod W processes take one more)."""
    size, extra = divmod(n, collective.world_size)
    lo = collective.rank * size + min(collective.rank, extra)
    return lo, lo + size + (collective.rank < extra)


@dataclass
class RegimeContext:
    """Everything a regime may use besides its own config."""

    task: Task
    judge: Judge
    judge_fingerprint: str  # identifies judge + its settings, for stored ladders and caches
    run_dir: Path
    model: Any = None  # the live policy as a PolicyView (a raw module is wrapped), for intuitor and reward_model
    tokenizer: Any = None  # the policy's tokenizer
    generator: Any = None  # a Generator sampling from the live policy (self_bootstrap)
    collective: Collective = field(default_factory=SingleProcess)  # agreement across training processes
    rank_judge: Judge | None = None  # the judge that ranks anchor ladders (ladder.judge; None: `judge`)
    rank_fingerprint: str = ""  # its fingerprint, which keys stored ladders ("": judge_fingerprint)

    def __post_init__(self) -> None:
        self.model = as_view(self.model)
        if self.rank_judge is None:
            self.rank_judge, self.rank_fingerprint = self.judge, self.judge_fingerprint


def require_policy(ctx: RegimeContext, regime: str, *needs: str) -> None:
    """Raise a UserError naming what `regime` needs from the policy when the context lacks it."""
    missing = [name for name in needs if getattr(ctx, name) is None]
    if missing:
        raise ConfigError(
            f"reward={regime} needs the policy's {' and '.join(missing)}, which this context lacks; the trainer sets "
            f"them, and outside it pass policy=(model, tokenizer) to tsrl.score_groups / tsrl.build_scorer."
        )


class StepCounted:
    """For regimes that seed each step's randomness (draws, coin flips, arrival order) from the number of
    score() calls so far: the count travels in checkpoints (the trainer saves state_dict()), so a resumed
    run draws the same numbers as an uninterrupted one."""

    steps: int = 0

    def state_dict(self) -> dict:
        return {"steps": self.steps}

    def load_state_dict(self, state: dict) -> None:
        self.steps = state["steps"]
