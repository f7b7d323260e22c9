"""Task protocol and the shipped-data loader shared by tasks.

A task owns its prompts (train and held-out splits, with reference anchors). Capabilities beyond that are
protocols checked once, where a component is built: SimulatedQuality (a latent quality q(prompt, text) for
the offline simulated judge) and Verifiable (a programmatic check for RLVR regimes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from tsrl.errors import DataError
from tsrl.types import Anchor, Prompt

DATA_DIR = Path(__file__).parent / "data"


class Task(Protocol):
    name: str

    def prompts(self, split: str) -> list[Prompt]: ...


@runtime_checkable
class SimulatedQuality(Protocol):
    """A task with a latent quality q(prompt, text) computed from observable properties (judge=rubric_sim)."""

    def quality(self, prompt: Prompt, text: str) -> float: ...


@runtime_checkable
class Verifiable(Protocol):
    """A task that can also check a response programmatically (RLVR): verify(prompt, text) ∈ [0, 1]."""

    def verify(self, prompt: Prompt, text: str) -> float: ...


def read_jsonl(path: Path, parse_row: Callable[[dict[str, Any], str], Prompt]) -> list[Prompt]:
    """Parse a JSONL file row by row; any problem raises DataError naming file and line."""
    if not path.is_file():
        raise DataError(f"Data file {path} does not exist; check the task's train_file/eval_file setting.")
    prompts: list[Prompt] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{where}: not valid JSON ({err.msg}); fix or remove that line.") from None
            if not isinstance(row, dict):
                raise DataError(f"{where}: each line must be a JSON object, got {type(row).__name__}.")
            try:
                prompt = parse_row(row, where)
            except (KeyError, TypeError) as err:
                raise DataError(f"{where}: malformed row ({err!s}); see the task's docstring for the schema.") from None
            if prompt.id in seen:
                raise DataError(f"{where}: duplicate id {prompt.id!r}; ids must be unique within a file.")
            seen.add(prompt.id)
            prompts.append(prompt)
    if not prompts:
        raise DataError(f"Data file {path} holds no rows; it needs at least one prompt.")
    return prompts


def parse_anchors(row: dict[str, Any], where: str) -> tuple[Anchor, ...]:
    anchors = row.get("anchors", [])
    if not isinstance(anchors, list) or not all(isinstance(a, dict) and isinstance(a.get("text"), str) for a in anchors):
        raise DataError(f"{where}: 'anchors' must be a list of objects with a 'text' string.")
    return tuple(Anchor(text=a["text"], tier=str(a.get("tier", ""))) for a in anchors)


class TaskView:
    """A task seen through other prompts: `prompts(split)` answers with the given ones for every split, and
    everything else — name (unless given), quality, verify, any other capability — is the task's own, so
    capability checks (isinstance against SimulatedQuality, Verifiable) see what the task can do."""

    def __init__(self, task: Any, prompts: list[Prompt], name: str | None = None) -> None:
        self.task, self._prompts = task, prompts
        self.name = name or task.name

    def prompts(self, split: str) -> list[Prompt]:
        return self._prompts

    def __getattr__(self, attr: str) -> Any:
        if attr == "task":  # not yet set (copy/pickle): no recursion
            raise AttributeError(attr)
        return getattr(self.task, attr)
