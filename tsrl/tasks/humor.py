"""Humor with word constraints (the MWAHAHA setting): write a joke that uses two given words.

Data rows (JSONL): {"id": str, "words": [str, str], "anchors": [{"text": str, "tier": str}, ...]}.
The shipped data (tsrl/tasks/data/humor/) was written for tsrl: 64 training prompts with ten anchors each
(two per tier, varied in style: riddles, one-liners, dialogue, rambling, junk), enough for TSRL's k sweep
k ∈ {1, 2, 4, 6, 8, 10}; and 24 held-out prompts with five reference anchors each, one per tier
top > good > okay > weak > low. Anchors are listed best first by their author's judgement.

The real dataset: MWAHAHA (SemEval-2026 Task 1), Subtask A's input files from its CodaBench competition
(no Hugging Face copy was found: `task.dataset=<folder>/task-a-en.tsv`, or any table with its columns). Columns
`id`, `word1`, `word2`, `headline`; a row sets either the two words or the headline and writes "-" for the other.
The word-inclusion rows become prompts (headline rows are skipped and counted); an optional column of
reference jokes (`task.columns.anchors`, default `joke`: one joke or a list per row) gives anchors. MWAHAHA's
inputs carry no jokes, so the training ladder is built first (tsrl-train's `ladder.build=auto`, from an
endpoint as TSRL's Gemini quality spectrum, or from the policy) and the held-out references come from
`task.eval_file` (prompts with anchors in the schema above, e.g. the shipped eval.jsonl). One split, so the
defaults slice it: train_split=train[:95%], eval_split=train[95%:]. English only: the verifier and the simulated
quality read ASCII words (task-a-es/zh would need their own).

Latent quality for the simulated judge, from observable properties only (a stand-in for taste, not a
model of humour):
    q = 2·(#required words present) + length term (1 inside 12–28 words, −0.25 per word outside, ≥ −2)
        − 4·(1 − distinct-word ratio) + 1.0·[setup/punchline shape] + 0.5·[ends with . ! ?]
An empty response scores −5.

Verifier (for `reward=verifier` and `reward=adaptive`): 1.0 when both required words appear as words of
the response (case-insensitive), else 0.0 — a checkable constraint, not a judgement of humour.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tsrl.registry import TASKS
from tsrl.tasks.base import (
    DATA_DIR,
    DataError,
    DatasetConfig,
    DatasetSchema,
    PromptSource,
    parse_anchors,
    reference_anchors,
)
from tsrl.types import Prompt

WORD = re.compile(r"[A-Za-z']+")
PUNCHLINE_MARKERS = ("because", " - ", "...", "turns out", " but ", " so ", "until")


@dataclass
class HumorConfig(DatasetConfig):
    """Task `humor`: jokes that must use two given words (MWAHAHA)."""

    columns: dict[str, str] = field(default_factory=dict)
    """Task field → dataset column; defaults id=id, word1=word1, word2=word2, anchors=joke (MWAHAHA Subtask A)."""
    train_split: str = "train[:95%]"
    """Split for training prompts (MWAHAHA's input file is one table)."""
    eval_split: str = "train[95%:]"
    """Split for held-out prompts (MWAHAHA's have no reference jokes: give task.eval_file instead)."""


SCHEMA = DatasetSchema(
    "MWAHAHA", {"id": "id", "word1": "word1", "word2": "word2", "anchors": "joke"}, ("word1", "word2"), blanks=("-",)
)


def humor_prompt_text(words: tuple[str, str]) -> str:
    return f"Write a short, funny joke that uses both of these words: {words[0]}, {words[1]}."


def _parse_row(row: dict[str, Any], where: str) -> Prompt:
    words = row["words"]
    if not (isinstance(words, list) and len(words) == 2 and all(isinstance(w, str) and w.strip() for w in words)):
        raise DataError(f"{where}: 'words' must be a list of two non-empty strings, got {words!r}.")
    pair = (words[0].strip().lower(), words[1].strip().lower())
    return Prompt(
        id=str(row["id"]), text=humor_prompt_text(pair), anchors=parse_anchors(row, where), fields={"words": pair}
    )


def _native(row: dict[str, Any], index: int, cfg: DatasetConfig) -> dict[str, Any]:
    ident = row["id"] if row["id"] is not None and str(row["id"]).strip() else f"mwahaha-{index}"
    return {
        "id": str(ident).strip(),
        "words": [str(row["word1"]), str(row["word2"])],
        "anchors": reference_anchors(row["anchors"], cfg),
    }


def humor_quality(text: str, words: tuple[str, ...]) -> float:
    """Latent quality q(text) used by the simulated judge (see module docstring)."""
    tokens = [w.lower() for w in WORD.findall(text)]
    if not tokens:
        return -5.0
    present = sum(1 for w in words if w in tokens)
    n = len(tokens)
    distance = max(0, 12 - n, n - 28)
    length = max(-2.0, 1.0 - 0.25 * distance) if distance else 1.0
    content = [t for t in tokens if len(t) > 2]
    distinct = len(set(content)) / len(content) if content else 0.0
    stripped = text.strip()
    qa = "?" in stripped[:-1] and len(WORD.findall(stripped.split("?", 1)[1])) >= 2
    shaped = qa or any(m in stripped.lower() for m in PUNCHLINE_MARKERS)
    return 2.0 * present + length - 4.0 * (1.0 - distinct) + 1.0 * shaped + 0.5 * stripped.endswith((".", "!", "?"))


class HumorTask:
    name = "humor"

    def __init__(self, cfg: HumorConfig) -> None:
        self.source = PromptSource(self.name, cfg, SCHEMA, _parse_row, _native)

    def prompts(self, split: str) -> list[Prompt]:
        return self.source.prompts(split)

    def vocabulary(self) -> list[str]:
        """The nouns a policy is assumed to know (shipped words.txt plus every word the prompts name, held-out
        ones included); the tiny model's warm start substitutes them into training anchors. It stands in for
        the vocabulary of a pretrained model: held-out pairings and anchors are never trained on."""
        lines = (DATA_DIR / "humor" / "words.txt").read_text().splitlines()
        named = [w for split in self.source.files for p in self.prompts(split) for w in p.fields["words"]]
        return sorted({w.strip() for w in lines if w.strip() and not w.startswith("#")} | set(named))

    def quality(self, prompt: Prompt, text: str) -> float:
        return humor_quality(text, prompt.fields["words"])

    def verify(self, prompt: Prompt, text: str) -> float:
        tokens = {w.lower() for w in WORD.findall(text)}
        return float(all(w in tokens for w in prompt.fields["words"]))


TASKS.register("humor", HumorConfig, HumorTask)
