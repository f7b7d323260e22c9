"""Multiple-choice science with a letter verifier (GPQA; Reasoning Arena reports GPQA-Diamond), so that
`reward=adaptive` has a second verifiable task.

Data rows (JSONL): {"id": str, "question": str, "choices": [str × 4], "answer": "A"–"D", "domain": str,
"explanation": str}. The shipped sample (tsrl/tasks/data/gpqa/) was written for tsrl: 48 training and 16
held-out graduate-level questions (physics, chemistry, biology), four choices each; the calculations are
rechecked by tests/data_checks/gpqa/check.py, which the test suite runs.

Verifier (tsrl/tasks/answers.py): the chosen letter is read from \\boxed{B}, "the answer is (B)" or
"Answer: B"; several different letters or none score 0. The explanation ending in the letter is the prompt's
one anchor. Evaluated by pass ratio@n and pass@k.

The real dataset: `task.dataset=Idavidrein/gpqa task.subset=gpqa_diamond` (gated: download it once with
your token, then it loads from the local cache; columns Question, Correct Answer, Incorrect Answer 1–3,
Explanation; one split, train). Held-out questions need disjoint slices of it
(`task.train_split=train[:50%] task.eval_split=train[50%:]`) or another table (`task.eval_dataset`); the same
split for both is refused. The four answers are shuffled into A–D by a hash of the question, so the
correct letter is spread evenly and the same on every run.

Latent quality for the simulated judge: tsrl/tasks/aime.py's trace quality, from the trace alone (a clear
letter counts as its final answer); it never reads the answer key, which only the verifier uses.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

from tsrl.registry import TASKS
from tsrl.tasks.aime import trace_quality
from tsrl.tasks.answers import extract_choice, verify_choice
from tsrl.tasks.base import DataError, DatasetConfig, DatasetSchema, PromptSource
from tsrl.types import Anchor, Prompt

LETTERS = "ABCD"


@dataclass
class GpqaConfig(DatasetConfig):
    """Task `gpqa`: four-choice science questions, checked by a letter verifier."""

    columns: dict[str, str] = field(default_factory=dict)
    """Task field → dataset column; defaults are GPQA's (Question, Correct Answer, Incorrect Answer 1–3)."""
    eval_split: str = "train"
    """Split for held-out prompts (GPQA has one split)."""


SCHEMA = DatasetSchema(
    "GPQA",
    {
        "question": "Question",
        "correct": "Correct Answer",
        "wrong1": "Incorrect Answer 1",
        "wrong2": "Incorrect Answer 2",
        "wrong3": "Incorrect Answer 3",
        "explanation": "Explanation",
    },
    ("question", "correct", "wrong1", "wrong2", "wrong3"),
)


def gpqa_prompt_text(question: str, choices: list[str]) -> str:
    options = "\n".join(f"({letter}) {choice}" for letter, choice in zip(LETTERS, choices))
    return (
        f"Answer this multiple-choice question. Reason step by step, then give the letter of the correct "
        f"choice as \\boxed{{X}}.\n\n{question}\n\n{options}"
    )


def _parse_row(row: dict[str, Any], where: str) -> Prompt:
    question, choices, answer = row["question"], row["choices"], row["answer"]
    if not isinstance(question, str) or not question.strip():
        raise DataError(f"{where}: 'question' must be a non-empty string.")
    if not (isinstance(choices, list) and len(choices) == 4 and all(isinstance(c, str) and c.strip() for c in choices)):
        raise DataError(f"{where}: 'choices' must be a list of four non-empty strings.")
    if not (isinstance(answer, str) and answer.strip().upper() in LETTERS and len(answer.strip()) == 1):
        raise DataError(f"{where}: 'answer' must be one of the letters A, B, C, D, got {answer!r}.")
    letter = answer.strip().upper()
    explanation = str(row.get("explanation") or "").strip()
    worked = f"{explanation}\n\nThe answer is \\boxed{{{letter}}}." if explanation else f"\\boxed{{{letter}}}"
    return Prompt(
        id=str(row["id"]),
        text=gpqa_prompt_text(question.strip(), [c.strip() for c in choices]),
        anchors=(Anchor(worked, "reference"),),
        fields={"answer": letter, "domain": str(row.get("domain", ""))},
    )


def _native(row: dict[str, Any], index: int, cfg: DatasetConfig) -> dict[str, Any]:
    options = [str(row["correct"]), str(row["wrong1"]), str(row["wrong2"]), str(row["wrong3"])]
    order = list(range(4))
    random.Random(hashlib.sha256(str(row["question"]).encode()).hexdigest()).shuffle(order)
    return {
        "id": f"gpqa-{index}",
        "question": row["question"],
        "choices": [options[i] for i in order],
        "answer": LETTERS[order.index(0)],
        "explanation": row.get("explanation") or "",
    }


class GpqaTask:
    name = "gpqa"
    metric = "pass"

    def __init__(self, cfg: GpqaConfig) -> None:
        self.source = PromptSource(self.name, cfg, SCHEMA, _parse_row, _native)

    def prompts(self, split: str) -> list[Prompt]:
        return self.source.prompts(split)

    def verify(self, prompt: Prompt, text: str) -> float:
        return verify_choice(text, prompt.fields["answer"])

    def quality(self, prompt: Prompt, text: str) -> float:
        return trace_quality(extract_choice(text).value is not None, text)  # the trace only: no answer key

    def extract(self, text: str) -> Any:
        """The letter a completion chooses (None when it gives none), for evaluation reports."""
        return extract_choice(text).value


TASKS.register("gpqa", GpqaConfig, GpqaTask)
