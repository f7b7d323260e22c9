"""Short stories for a premise (the WritingPrompts setting of TSRL's Table 1).

Data rows (JSONL): {"id": str, "premise": str, "anchors": [{"text": str, "tier": str}, ...]}.
The shipped sample (tsrl/tasks/data/stories/) was written for tsrl: 48 training premises with ten anchors
each (two per tier top, good, okay, weak, low; varied in voice and form: first, second and third person,
letters, diaries, dialogue), enough for TSRL's k sweep up to 10; and 16 held-out premises with five reference
anchors, one per tier, on themes the training premises avoid.

The real dataset: WritingPrompts (`task.dataset=euclaise/writingprompts`, columns `prompt` and `story`,
splits train / validation / test). Rows sharing a prompt become one premise whose human stories are its
anchors (at most task.max_anchors), untiered; the "[ WP ]" tag is stripped from the premise.

Latent quality for the simulated judge, from observable properties only (a stand-in for taste):
    q = 3·premise coverage (share of the premise's content words the story uses, capped at 0.5 → 1.5)
        + length term (1 inside 80–220 words, −0.02 per word outside, ≥ −3)
        − 6·(1 − distinct-word ratio of content words) + 0.5·[paragraphs ≥ 2] + 0.5·[dialogue]
        + 0.5·[ends with . ! ? or a closing quote]
An empty response scores −8. These features stay in the simulator: neither the policy's prompt nor the judge's
criteria (tsrl/judging/prompts/stories_criteria_v1.txt) state a length or any other of them.
On the shipped anchors the mean q falls from the top two tiers (together) to okay, weak and low; it does not
separate top from good (good scores 0.2 higher on average: the distinct-word ratio falls with length, and top
stories are longer), which a real judge is there for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tsrl.registry import TASKS
from tsrl.tasks.base import DataError, DatasetConfig, DatasetSchema, PromptSource, parse_anchors, reference_anchors
from tsrl.types import Prompt

WORD = re.compile(r"[A-Za-z']+")
TAG = re.compile(r"^\s*\[\s*[A-Z]{2}\s*\]\s*")
STOP = frozenset(
    "the a an and or but of to in on at for with from by is are was were be been your you yours "
    "his her their its it this that they them he she i we our my me as into after before one".split()
)


@dataclass
class StoriesConfig(DatasetConfig):
    """Task `stories`: a short story for a premise (WritingPrompts)."""

    columns: dict[str, str] = field(default_factory=dict)
    """Task field → dataset column; defaults premise=prompt, anchors=story (WritingPrompts)."""
    eval_split: str = "test"
    """Split for held-out prompts."""


SCHEMA = DatasetSchema(
    "WritingPrompts",
    {"premise": "prompt", "anchors": "story"},
    ("premise", "anchors"),
    group_by="premise",
    collect="anchors",
)


def story_prompt_text(premise: str) -> str:
    """The policy's instruction: the WritingPrompts task (a story for a premise), with no length: the simulated
    quality's length band (80–220 words) is the simulator's, not the task's, and a real judge never sees it."""
    return f"Write a short story for this premise:\n{premise}"


def _parse_row(row: dict[str, Any], where: str) -> Prompt:
    premise = row["premise"]
    if not isinstance(premise, str) or not premise.strip():
        raise DataError(f"{where}: 'premise' must be a non-empty string.")
    premise = TAG.sub("", premise).strip()
    return Prompt(
        id=str(row["id"]),
        text=story_prompt_text(premise),
        anchors=parse_anchors(row, where),
        fields={"premise": premise},
    )


def _native(row: dict[str, Any], index: int, cfg: DatasetConfig) -> dict[str, Any]:
    return {"id": f"wp-{index}", "premise": row["premise"], "anchors": reference_anchors(row["anchors"], cfg)}


def content_words(text: str) -> list[str]:
    return [w for w in (t.lower() for t in WORD.findall(text)) if len(w) > 2 and w not in STOP]


def story_quality(text: str, premise: str) -> float:
    """Latent quality q(text) used by the simulated judge (see module docstring)."""
    tokens = WORD.findall(text)
    if not tokens:
        return -8.0
    wanted = set(content_words(premise))
    content = content_words(text)
    coverage = min(0.5, len(wanted & set(content)) / max(len(wanted), 1))
    n = len(tokens)
    distance = max(0, 80 - n, n - 220)
    length = max(-3.0, 1.0 - 0.02 * distance) if distance else 1.0
    distinct = len(set(content)) / len(content) if content else 0.0
    stripped = text.strip()
    paragraphs = len([p for p in stripped.split("\n\n") if p.strip()]) >= 2
    dialogue = '"' in stripped or "\u201c" in stripped
    ends = stripped.endswith((".", "!", "?", '"', "\u201d"))
    return 3.0 * coverage + length - 6.0 * (1.0 - distinct) + 0.5 * paragraphs + 0.5 * dialogue + 0.5 * ends


class StoriesTask:
    name = "stories"

    def __init__(self, cfg: StoriesConfig) -> None:
        self.source = PromptSource(self.name, cfg, SCHEMA, _parse_row, _native)

    def prompts(self, split: str) -> list[Prompt]:
        return self.source.prompts(split)

    def quality(self, prompt: Prompt, text: str) -> float:
        return story_quality(text, prompt.fields["premise"])


TASKS.register("stories", StoriesConfig, StoriesTask)
