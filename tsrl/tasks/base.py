"""Task protocol, its optional capabilities, and the loaders shared by tasks.

A task owns its prompts (train and held-out splits, with reference anchors where it has them). Everything
else is a capability, a protocol checked once where the component that needs it is built, which then fails
with one sentence if the task lacks it:
- SimulatedQuality: a latent quality q(prompt, text) for the offline simulated judge (judge=rubric_sim);
- Verifiable: a programmatic check verify(prompt, text) ∈ [0, 1] (reward=verifier, reward=adaptive, pass@k);
- Rendered: page(text) → the HTML document to render; the judge then compares screenshots (task=web);
- chat messages: a Prompt may carry a conversation (`Prompt.messages`), shown to the policy as chat turns;
- the evaluation metric: `metric = "winrate"` (held-out win-rate against reference anchors, judged tasks) or
  `"pass"` (pass ratio@n and pass@k with the verifier, verifiable tasks).

Where the prompts come from (DatasetConfig): the sample shipped in tsrl/tasks/data/<task>/ by default, a
local JSONL file in the task's own schema, or the real dataset (a Hugging Face name, a local dataset folder,
or a JSON/JSONL/Parquet file with the dataset's columns) mapped onto the task's fields by `columns`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tsrl.errors import ConfigError, DataError, not_a_file
from tsrl.tasks.sources import load_rows
from tsrl.types import Anchor, Group, Prompt, Rendered, SimulatedQuality  # noqa: F401 (capabilities the judges check)

DATA_DIR = Path(__file__).parent / "data"


class Task(Protocol):
    name: str

    def prompts(self, split: str) -> list[Prompt]: ...


@runtime_checkable
class Verifiable(Protocol):
    """A task that can also check a response programmatically (RLVR): verify(prompt, text) ∈ [0, 1]."""

    def verify(self, prompt: Prompt, text: str) -> float: ...


def verify_rollouts(task: Verifiable, groups: Sequence[Group]) -> list[list[float]]:
    """Every rollout's verifier score, per group; a task with `verify_many` (task=code runs programs in parallel
    sandboxes) checks them all in one call, others one by one."""
    pairs = [(group.prompt, rollout.text) for group in groups for rollout in group.rollouts]
    many = getattr(task, "verify_many", None)
    flat = list(many(pairs)) if many is not None else [task.verify(prompt, text) for prompt, text in pairs]
    scores, start = [], 0
    for group in groups:
        scores.append(flat[start : start + len(group.rollouts)])
        start += len(group.rollouts)
    return scores


def task_metric(task: Any) -> str:
    """How a task is evaluated on held-out prompts: "winrate" (judged) or "pass" (verified)."""
    return getattr(task, "metric", "winrate")


@dataclass
class DatasetConfig:
    """Where a task's prompts come from (fields every task config shares)."""

    dataset: str = ""
    """The real dataset: a Hugging Face name, a local dataset folder, or a .json/.jsonl/.parquet file with its
    columns (mapped by `columns`); empty = the shipped sample (or train_file/eval_file)."""
    subset: str = ""
    """The dataset's configuration name, if it has several."""
    eval_dataset: str = ""
    """Held-out prompts from another dataset with the same columns (empty = `dataset`): train on one
    competition's problems, evaluate on another's."""
    train_split: str = "train"
    """Split for training prompts (Hugging Face slicing allowed: train[:95%])."""
    eval_split: str = "test"
    """Split for held-out prompts."""
    columns: dict[str, str] = field(default_factory=dict)
    """Task field → dataset column, overriding the task's defaults for the real dataset."""
    eval_columns: dict[str, str] = field(default_factory=dict)
    """Task field → column of `eval_dataset` where its names differ from `dataset`'s (over `columns`)."""
    train_file: str = ""
    """JSONL in the task's own schema with training prompts (when `dataset` is empty); empty = the shipped file."""
    eval_file: str = ""
    """JSONL in the task's own schema with held-out prompts; empty = the shipped file (with `dataset`: its
    eval_split). Set with `dataset`, held-out prompts come from this file, e.g. prompts with reference anchors
    when the dataset has none (MWAHAHA)."""
    max_prompts: int = 0
    """Use only the first N training prompts (0 = all)."""
    max_anchors: int = 10
    """At most this many reference anchors per prompt from a real dataset (its first ones)."""
    anchors_file: str = ""
    """Anchors built by tsrl-ladder (its anchors.jsonl): they replace the anchors of the training prompts it
    names; held-out references are never replaced. Empty = the data's own anchors."""


@dataclass(frozen=True)
class DatasetSchema:
    """How a task reads its real dataset: default columns (field → column), the fields every row needs, and
    how rows merge (rows sharing `group_by` become one prompt whose `collect` field lists their values);
    `blanks` are cell values that mean empty (MWAHAHA writes "-")."""

    name: str
    columns: dict[str, str]
    required: tuple[str, ...]
    group_by: str = ""
    collect: str = ""
    blanks: tuple[str, ...] = ()


class PromptSource:
    """A task's prompts per split, read once: the shipped JSONL, a JSONL of the user's in the same schema, or
    the real dataset's rows turned into that schema by `native(row, index)` and parsed by the same
    `parse_row`, so every source is checked the same way."""

    def __init__(
        self,
        task: str,
        cfg: DatasetConfig,
        schema: DatasetSchema,
        parse_row: Callable[[dict[str, Any], str], Prompt],
        native: Callable[[dict[str, Any], int, DatasetConfig], dict[str, Any]],
    ) -> None:
        self.task, self.cfg, self.schema, self.parse_row, self.native = task, cfg, schema, parse_row, native
        if cfg.dataset and not (cfg.eval_dataset or cfg.eval_file) and cfg.train_split == cfg.eval_split:
            raise ConfigError(
                f"task {task}: train_split and eval_split are both {cfg.train_split!r} of {cfg.dataset}, "
                "so the held-out prompts would be training prompts; set task.eval_dataset to another "
                "dataset or give the splits disjoint slices (train[:95%] / train[95%:])."
            )
        root = DATA_DIR / task
        self.files = {
            "train": Path(cfg.train_file).expanduser() if cfg.train_file else root / "train.jsonl",
            "eval": Path(cfg.eval_file).expanduser() if cfg.eval_file else root / "eval.jsonl",
        }
        self._cache: dict[str, list[Prompt]] = {}
        self._read: dict[str, list[Prompt]] = {}  # every prompt of a split as read, before max_prompts and anchors

    def prompts(self, split: str) -> list[Prompt]:
        if split not in self.files:
            raise ConfigError(f"Unknown split {split!r}; task {self.task} has {sorted(self.files)}.")
        if split not in self._cache:
            rows = self._rows(split)
            if split == "eval" and self._from_table(split) and not self.cfg.eval_dataset:
                rows = self._unseen(rows)
            limit = self.cfg.max_prompts if split == "train" else 0
            rows = rows[:limit] if limit else rows
            if split == "train" and self.cfg.anchors_file:
                rows = with_anchors_file(rows, Path(self.cfg.anchors_file).expanduser())
            self._cache[split] = rows
        return self._cache[split]

    def _rows(self, split: str) -> list[Prompt]:
        """Every prompt of the split as read from its source, read once."""
        if split not in self._read:
            self._read[split] = (
                self._from_dataset(split) if self._from_table(split) else read_jsonl(self.files[split], self.parse_row)
            )
        return self._read[split]

    def _from_table(self, split: str) -> bool:
        """Whether the split comes from the real dataset (else from a JSONL file in the task's schema)."""
        return bool(self.cfg.dataset) and not (split == "eval" and self.cfg.eval_file)

    def _unseen(self, heldout: list[Prompt]) -> list[Prompt]:
        """Held-out prompts from the training dataset minus those whose text is also a training prompt's (rows
        grouped into one prompt can fall on both sides of a split's boundary)."""
        seen = {p.text for p in self._rows("train")}
        kept = [p for p in heldout if p.text not in seen]
        if len(kept) < len(heldout):
            import logging

            logging.getLogger(__name__).warning(
                "task %s: %d held-out prompts also occur in the training split and were left out",
                self.task,
                len(heldout) - len(kept),
            )
        if not kept:
            raise DataError(
                f"Every held-out prompt of {self.cfg.dataset} (split {self.cfg.eval_split}) is also a "
                "training prompt; choose disjoint splits or task.eval_dataset."
            )
        return kept

    def _from_dataset(self, split: str) -> list[Prompt]:
        cfg = self.cfg
        name = cfg.train_split if split == "train" else cfg.eval_split
        other = split == "eval" and bool(cfg.eval_dataset)
        dataset = cfg.eval_dataset if other else cfg.dataset
        columns = {**self.schema.columns, **cfg.columns, **(cfg.eval_columns if other else {})}
        rows = load_rows(
            dataset,
            name,
            columns,
            self.schema.required,
            subset=cfg.subset,
            group_by=self.schema.group_by,
            collect=self.schema.collect,
            blanks=self.schema.blanks,
        )
        if not rows:
            raise DataError(f"Dataset {dataset} (split {name}) holds no rows; choose another split.")
        # ids carry the split (row indices restart in each split): "train/wp-3", "eval/wp-3"
        return [
            replace(prompt, id=f"{split}/{prompt.id}")
            for index, row in enumerate(rows)
            for prompt in [self.parse_row(self.native(row, index, cfg), f"{dataset} (split {name}) row {index}")]
        ]


def with_anchors_file(prompts: list[Prompt], path: Path) -> list[Prompt]:
    """The prompts with the anchors that `path` (tsrl-ladder's anchors.jsonl: one {"prompt_id", "anchors"} per
    line) gives them, in the file's order; prompts the file does not name keep theirs. A file naming a prompt
    the task does not have is an error (it was built for other prompts)."""
    if not path.is_file():
        raise DataError(f"Anchors file {path} {not_a_file(path)}; build it with tsrl-ladder or fix task.anchors_file.")
    given: dict[str, tuple[Anchor, ...]] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                row = json.loads(line)
                given[str(row["prompt_id"])] = parse_anchors(row, f"{path}:{lineno}")
            except (json.JSONDecodeError, KeyError, TypeError):
                raise DataError(
                    f'{path}:{lineno}: expected {{"prompt_id": str, "anchors": [{{"text": str}}, ...]}} '
                    "as tsrl-ladder writes it."
                ) from None
    known = {p.id for p in prompts}
    unknown = sorted(set(given) - known)
    if unknown:
        raise DataError(
            f"Anchors file {path} names prompt {unknown[0]!r}, which the task's training prompts do not "
            f"have ({len(unknown)} such); it was built for other prompts — rebuild it with tsrl-ladder."
        )
    return [replace(p, anchors=given[p.id]) if p.id in given else p for p in prompts]


def reference_anchors(texts: Sequence[Any], cfg: DatasetConfig) -> list[dict[str, str]]:
    """A real dataset's references as anchors: the first `max_anchors` non-empty ones, untiered."""
    values = texts if isinstance(texts, (list, tuple)) else [texts]
    return [{"text": str(t)} for t in values if t is not None and str(t).strip()][: cfg.max_anchors]


def read_jsonl(path: Path, parse_row: Callable[[dict[str, Any], str], Prompt]) -> list[Prompt]:
    """Parse a JSONL file row by row; any problem raises DataError naming file and line."""
    if not path.is_file():
        raise DataError(f"Data file {path} {not_a_file(path)}; check the task's train_file/eval_file setting.")
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
    if not isinstance(anchors, list) or not all(
        isinstance(a, dict) and isinstance(a.get("text"), str) for a in anchors
    ):
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
