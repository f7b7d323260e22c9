"""Competition math with a verifier (AIME; Reasoning Arena's Table 1 reports pass ratio@16 on it).

Data rows (JSONL): {"id": str, "problem": str, "answer": int (0–999), "solution": str, "topic": str}.
The shipped sample (tsrl/tasks/data/aime/) was written for tsrl: 48 training and 16 held-out problems in the
AIME format (an integer answer from 0 to 999) across number theory, algebra, combinatorics, geometry and
probability, each with a worked solution; every answer is recomputed independently by
tests/data_checks/aime/check.py (brute force or exact arithmetic), which the test suite runs.

Verifier (tsrl/tasks/answers.py): the final answer is read from \\boxed{…} (or "the answer is …" without a
box), normalised (leading zeros, spaces, "42.0"), and must equal the integer answer exactly; a fraction, two
different boxed answers or no answer score 0. The worked solution, ending in \\boxed{answer}, is the prompt's
one anchor (the tiny policy's warm start and reward=ladder k=1 use it). Evaluated by pass ratio@n and pass@k.

The real dataset: any table with the problem and the integer answer, e.g.
`task.dataset=AI-MO/aimo-validation-aime` (columns problem, answer, solution) for training and
`task.eval_dataset=Maxwell-Jia/AIME_2024 task.eval_columns.problem=Problem task.eval_columns.answer=Answer
task.eval_columns.solution=Solution` for held-out problems — or local JSONL/Parquet files. One dataset for both
needs disjoint slices (train_split=train[:80%] eval_split=train[80%:]); the same split twice is refused.

Latent quality for the simulated judge (judge=rubric_sim, e.g. the trace tournament of reward=adaptive), from
the trace alone — it never reads the answer key, as a judge of reasoning traces sees none (Reasoning Arena
compares reasoning, "Beyond examining the final answer"; the verifier keeps the key for the reward and pass@k):
    q = 0.5·[one final answer in the asked form] + 0.5·[shows work: ≥ 20 words]
        + 0.25·min(steps, 8) − 3·(1 − distinct-line ratio) − 0.005·(words beyond 400)
where a step is a line or sentence stating a relation (=, <, >, ≤, ≥, ≡) or a justification (since, because,
so, thus, hence, therefore). Empty text scores −5. A stand-in for a judge's view of rigor, not a model of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tsrl.registry import TASKS
from tsrl.tasks.answers import extract_integer, verify_integer
from tsrl.tasks.base import DataError, DatasetConfig, DatasetSchema, PromptSource
from tsrl.types import Anchor, Prompt

WORDS = re.compile(r"\S+")
SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
STEP = re.compile(
    r"[=<>\u2264\u2265\u2261]|\\(?:le|ge|leq|geq|equiv|implies)\b|\b(?:since|because|so|thus|hence|"
    r"therefore)\b",
    re.IGNORECASE,
)


@dataclass
class AimeConfig(DatasetConfig):
    """Task `aime`: competition math with integer answers 0–999, checked by a verifier."""

    columns: dict[str, str] = field(default_factory=dict)
    """Task field → dataset column; defaults problem=problem, answer=answer, solution=solution."""
    eval_split: str = "train"
    """Split for held-out prompts (AIME tables have one split; set eval_dataset to another competition)."""


SCHEMA = DatasetSchema(
    "AIME", {"problem": "problem", "answer": "answer", "solution": "solution"}, ("problem", "answer")
)


def aime_prompt_text(problem: str) -> str:
    return (
        "Solve this competition problem. Reason step by step, then give the final answer, an integer from 0 "
        f"to 999, as \\boxed{{N}}.\n\n{problem}"
    )


def _answer(value: Any, where: str) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not re.fullmatch(r"\d{1,3}", text.lstrip("0") or "0"):
        raise DataError(f"{where}: 'answer' must be an integer from 0 to 999, got {value!r}.")
    return int(text)


def _parse_row(row: dict[str, Any], where: str) -> Prompt:
    problem = row["problem"]
    if not isinstance(problem, str) or not problem.strip():
        raise DataError(f"{where}: 'problem' must be a non-empty string.")
    answer = _answer(row["answer"], where)
    solution = str(row.get("solution") or "").strip()
    worked = f"{solution}\n\nThe answer is \\boxed{{{answer}}}." if solution else f"\\boxed{{{answer}}}"
    return Prompt(
        id=str(row["id"]),
        text=aime_prompt_text(problem.strip()),
        anchors=(Anchor(worked, "reference"),),
        fields={"answer": answer, "topic": str(row.get("topic", ""))},
    )


def _native(row: dict[str, Any], index: int, cfg: DatasetConfig) -> dict[str, Any]:
    return {
        "id": f"aime-{index}",
        "problem": row["problem"],
        "answer": row["answer"],
        "solution": row.get("solution") or "",
    }


def trace_quality(answered: bool, text: str) -> float:
    """Latent quality of a reasoning trace from its own features (see the module docstring); `answered` says
    whether it gives one final answer in the asked form. No answer key enters."""
    n = len(WORDS.findall(text))
    if not n:
        return -5.0
    steps = sum(1 for part in SENTENCES.split(text) if STEP.search(part))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    distinct = len(set(lines)) / len(lines)
    return 0.5 * answered + 0.5 * (n >= 20) + 0.25 * min(steps, 8) - 3.0 * (1.0 - distinct) - 0.005 * max(0, n - 400)


class AimeTask:
    name = "aime"
    metric = "pass"

    def __init__(self, cfg: AimeConfig) -> None:
        self.source = PromptSource(self.name, cfg, SCHEMA, _parse_row, _native)

    def prompts(self, split: str) -> list[Prompt]:
        return self.source.prompts(split)

    def verify(self, prompt: Prompt, text: str) -> float:
        return verify_integer(text, prompt.fields["answer"])

    def quality(self, prompt: Prompt, text: str) -> float:
        return trace_quality(extract_integer(text).value is not None, text)  # the trace only: no answer key

    def extract(self, text: str) -> Any:
        """The answer a completion gives (None when it gives none), for evaluation reports."""
        return extract_integer(text).value


TASKS.register("aime", AimeConfig, AimeTask)
