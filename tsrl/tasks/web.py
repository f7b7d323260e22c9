"""Web pages from a description (the WebSight setting of TSRL's Table 1): a complete, self-contained HTML page.

Data rows (JSONL): {"id": str, "description": str, "anchors": [{"text": str, "tier": str}, ...]}; anchors
are HTML documents. The shipped sample (tsrl/tasks/data/web/) was written for tsrl: 48 training and 16
held-out descriptions, five anchor pages each, one per tier top > good > okay > weak > low, every page under
4 KB with inline CSS and nothing fetched from the network.

Judging: the task is Rendered — page(text) is the HTML document in a completion (a fenced ```html block, or
<html>…</html>, or the text itself). The judge wrapper (judging/rendering_judge.py) renders both pages in
headless Chromium (network blocked) and gives a vision judge the screenshots (judge=openai: by default, as
TSRL's web judge, Kimi-K2-VL, sees rendered pages; judge.vision=false for a text judge, which compares the HTML).
A page that fails to render (empty, too large,
fetching from the network, never finishing) loses its matches, with the reason recorded.

The real dataset: WebSight (`task.dataset=HuggingFaceM4/WebSight task.subset=v0.2`, columns
`llm_generated_idea` (the description) and `text` (the page's HTML), one split, train — so the defaults hold
out its last 1 %: train_split=train[:99%], eval_split=train[99%:]); each page is its prompt's one anchor.

Latent quality for the simulated judge, from the HTML only (no rendering):
    q = 3·coverage (share of the description's content words in the page's visible text, capped at 0.5)
        + 1·[a complete document: <html … </html>] + 0.5·[<title>] + 0.5·[CSS: <style> or style=]
        + min(structural elements, 6)/3 (header, nav, main, section, footer, h1–h3, ul, form, button, table)
        + size term (1 inside 600–4,000 characters, −1 per 1,000 outside, ≥ −3) − 3·[fetches from the network]
Text without a tag scores −8.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tsrl.registry import TASKS
from tsrl.rendering import extract_page, network_reference
from tsrl.tasks.base import DataError, DatasetConfig, DatasetSchema, PromptSource, parse_anchors, reference_anchors
from tsrl.tasks.stories import content_words
from tsrl.types import Prompt

TAGS = re.compile(r"<[^>]*>")
SCRIPTS = re.compile(r"<(script|style)\b.*?</\1>", re.IGNORECASE | re.DOTALL)
STRUCTURE = re.compile(r"<(header|nav|main|section|footer|h1|h2|h3|ul|form|button|table)\b", re.IGNORECASE)


@dataclass
class WebConfig(DatasetConfig):
    """Task `web`: a self-contained HTML page for a description (WebSight)."""

    columns: dict[str, str] = field(default_factory=dict)
    """Task field → dataset column; defaults description=llm_generated_idea, anchors=text (WebSight v0.2)."""
    train_split: str = "train[:99%]"
    """Split for training prompts (WebSight has only train)."""
    eval_split: str = "train[99%:]"
    """Split for held-out prompts."""
    max_anchors: int = 5
    """At most this many reference pages per prompt from a real dataset."""


SCHEMA = DatasetSchema("WebSight", {"description": "llm_generated_idea", "anchors": "text"}, ("description", "anchors"))


def web_prompt_text(description: str) -> str:
    return (
        "Write one complete, self-contained HTML page (inline CSS, no scripts or images fetched from the "
        f"network) for this description. Answer with the HTML only.\n{description}"
    )


def _parse_row(row: dict[str, Any], where: str) -> Prompt:
    description = row["description"]
    if not isinstance(description, str) or not description.strip():
        raise DataError(f"{where}: 'description' must be a non-empty string.")
    return Prompt(
        id=str(row["id"]),
        text=web_prompt_text(description.strip()),
        anchors=parse_anchors(row, where),
        fields={"description": description.strip()},
    )


def _native(row: dict[str, Any], index: int, cfg: DatasetConfig) -> dict[str, Any]:
    return {
        "id": f"websight-{index}",
        "description": row["description"],
        "anchors": reference_anchors(row["anchors"], cfg),
    }


def visible_text(html: str) -> str:
    return TAGS.sub(" ", SCRIPTS.sub(" ", html))


def web_quality(html: str, description: str) -> float:
    """Latent quality q(page) used by the simulated judge (see module docstring)."""
    if "<" not in html:
        return -8.0
    lower = html.lower()
    wanted = set(content_words(description))
    coverage = min(0.5, len(wanted & set(content_words(visible_text(html)))) / max(len(wanted), 1))
    size = len(html)
    distance = max(0, 600 - size, size - 4000)
    size_term = max(-3.0, 1.0 - distance / 1000) if distance else 1.0
    document = "<html" in lower and "</html>" in lower
    styled = "<style" in lower or "style=" in lower
    structure = min(len(STRUCTURE.findall(html)), 6) / 3
    return (
        3.0 * coverage
        + 1.0 * document
        + 0.5 * ("<title" in lower)
        + 0.5 * styled
        + structure
        + size_term
        - 3.0 * (network_reference(html) is not None)
    )


class WebTask:
    name = "web"

    def __init__(self, cfg: WebConfig) -> None:
        self.source = PromptSource(self.name, cfg, SCHEMA, _parse_row, _native)

    def prompts(self, split: str) -> list[Prompt]:
        return self.source.prompts(split)

    def page(self, text: str) -> str:
        return extract_page(text)

    def quality(self, prompt: Prompt, text: str) -> float:
        return web_quality(self.page(text), prompt.fields["description"])


TASKS.register("web", WebConfig, WebTask)
