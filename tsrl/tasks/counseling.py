"""Counseling replies (the MentalChat16K setting of TSRL's Table 1): a helpful, safe, empathetic reply to a
person's message, or to the last turn of a short conversation.

Data rows (JSONL): {"id": str, "messages": [{"role": "user"|"assistant", "content": str}, ...],
"anchors": [{"text": str, "tier": str}, ...]}; the conversation alternates user / assistant, starts and ends
with the user. The policy is shown the conversation as chat turns (Prompt.messages); the judge reads it as
text ("Person: … / Counselor: …"). The shipped sample (tsrl/tasks/data/counseling/) was written for tsrl:
48 training and 16 held-out conversations (a quarter of them multi-turn; a few where the person hints at
self-harm, whose top reply asks about safety and points to emergency services or a crisis line), five
anchors each, one per tier top > good > okay > weak > low.

The real dataset: MentalChat16K (`task.dataset=ShenLab/MentalChat16K`, columns `input` (the person's
message) and `output` (the counselor's reply), one split, train — so the defaults hold out its last 5 %:
train_split=train[:95%], eval_split=train[95%:]). Rows sharing a message become one prompt whose replies are
its anchors, untiered.

Latent quality for the simulated judge, from observable properties only (a stand-in for a clinician's
judgement, not a model of one):
    q = 3·reflection (share of the last message's content words the reply uses, capped at 0.4 → 1.2)
        + length term (1 inside 60–220 words, −0.02 per word outside, ≥ −3) − 4·(1 − distinct-word ratio)
        + 1·[validates] + 0.75·[asks a question] + 0.75·[offers a concrete step] − 3·[dismissive phrase]
        + 2·[mentions safety / crisis help] when the conversation signals risk (else 0)
An empty reply scores −8.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tsrl.registry import TASKS
from tsrl.tasks.base import DataError, DatasetConfig, DatasetSchema, PromptSource, parse_anchors, reference_anchors
from tsrl.tasks.stories import WORD, content_words
from tsrl.types import Prompt

ROLES = {"user": "Person", "assistant": "Counselor"}
VALIDATING = (
    "understandable",
    "makes sense",
    "it's okay",
    "it is okay",
    "valid",
    "sounds",
    "hear you",
    "normal to",
    "no wonder",
    "of course you",
)
STEPS = ("try ", "could ", "might ", "consider", "one step", "small step", "what if", "it may help", "you can ")
DISMISSIVE = (
    "cheer up",
    "get over it",
    "stop being",
    "don't be so",
    "everyone feels",
    "just relax",
    "man up",
    "not a big deal",
    "could be worse",
)
RISK = (
    "end it",
    "hopeless",
    "no point",
    "hurt myself",
    "kill myself",
    "suicid",
    "disappear",
    "not be here",
    "better off without me",
    "give up on everything",
)
SAFETY = (
    "crisis",
    "emergency",
    "your safety",
    "are you safe",
    "keep yourself safe",
    "trusted person",
    "someone you trust",
    "hotline",
    "helpline",
)


@dataclass
class CounselingConfig(DatasetConfig):
    """Task `counseling`: a counselor's reply to a person's message or conversation (MentalChat16K)."""

    columns: dict[str, str] = field(default_factory=dict)
    """Task field → dataset column; defaults message=input, anchors=output (MentalChat16K)."""
    train_split: str = "train[:95%]"
    """Split for training prompts (MentalChat16K has only train)."""
    eval_split: str = "train[95%:]"
    """Split for held-out prompts."""


SCHEMA = DatasetSchema(
    "MentalChat16K",
    {"message": "input", "anchors": "output"},
    ("message", "anchors"),
    group_by="message",
    collect="anchors",
)


def conversation_text(turns: tuple[tuple[str, str], ...]) -> str:
    """The conversation as the judge reads it; a single message is the message itself."""
    if len(turns) == 1:
        return turns[0][1]
    return "\n\n".join(f"{ROLES[role]}: {content}" for role, content in turns)


def _turns(messages: Any, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(messages, list) or not messages:
        raise DataError(f"{where}: 'messages' must be a non-empty list of {{role, content}} objects.")
    turns = tuple((str(m.get("role")), m.get("content")) for m in messages if isinstance(m, dict))
    expected = ["user" if i % 2 == 0 else "assistant" for i in range(len(turns))]
    if (
        len(turns) != len(messages)
        or [r for r, _ in turns] != expected
        or turns[-1][0] != "user"
        or not all(isinstance(c, str) and c.strip() for _, c in turns)
    ):
        raise DataError(
            f"{where}: 'messages' must alternate user / assistant turns with non-empty content, "
            "starting and ending with the user."
        )
    return tuple((role, content.strip()) for role, content in turns)


def _parse_row(row: dict[str, Any], where: str) -> Prompt:
    turns = _turns(row["messages"], where)
    return Prompt(
        id=str(row["id"]),
        text=conversation_text(turns),
        anchors=parse_anchors(row, where),
        fields={"last_message": turns[-1][1]},
        messages=turns,
    )


def _native(row: dict[str, Any], index: int, cfg: DatasetConfig) -> dict[str, Any]:
    return {
        "id": f"mc-{index}",
        "messages": [{"role": "user", "content": str(row["message"])}],
        "anchors": reference_anchors(row["anchors"], cfg),
    }


def counseling_quality(text: str, conversation: str, last_message: str) -> float:
    """Latent quality q(reply) used by the simulated judge (see module docstring)."""
    tokens = WORD.findall(text)
    if not tokens:
        return -8.0
    lower = text.lower()
    wanted, content = set(content_words(last_message)), content_words(text)
    reflection = min(0.4, len(wanted & set(content)) / max(len(wanted), 1))
    n = len(tokens)
    distance = max(0, 60 - n, n - 220)
    length = max(-3.0, 1.0 - 0.02 * distance) if distance else 1.0
    distinct = len(set(content)) / len(content) if content else 0.0
    risky = any(marker in conversation.lower() for marker in RISK)
    return (
        3.0 * reflection
        + length
        - 4.0 * (1.0 - distinct)
        + 1.0 * any(v in lower for v in VALIDATING)
        + 0.75 * ("?" in text)
        + 0.75 * any(s in lower for s in STEPS)
        - 3.0 * any(d in lower for d in DISMISSIVE)
        + 2.0 * (risky and any(s in lower for s in SAFETY))
    )


class CounselingTask:
    name = "counseling"

    def __init__(self, cfg: CounselingConfig) -> None:
        self.source = PromptSource(self.name, cfg, SCHEMA, _parse_row, _native)

    def prompts(self, split: str) -> list[Prompt]:
        return self.source.prompts(split)

    def quality(self, prompt: Prompt, text: str) -> float:
        return counseling_quality(text, prompt.text, prompt.fields["last_message"])


TASKS.register("counseling", CounselingConfig, CounselingTask)
