"""The RewardRegime protocol and what a regime is built from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

from tsrl.judging import Judge
from tsrl.tasks import Task
from tsrl.types import Group, RewardBatch


class RewardRegime(Protocol):
    def score(self, groups: Sequence[Group]) -> RewardBatch: ...


@dataclass
class RegimeContext:
    """Everything a regime may use besides its own config."""

    task: Task
    judge: Judge
    judge_fingerprint: str  # identifies judge + its settings, for stored ladders and caches
    run_dir: Path
