"""Held-out win-rate against reference anchors (the papers' metric), in percent.

For each held-out prompt the policy samples `samples` completions; each is judged against every reference
anchor of that prompt; win-rate = 100 · mean p(completion ≻ anchor) (ties ½). Verdicts the judge could not
give are excluded and counted. Returns sums so that several processes can add their shares before dividing.

Three numbers, always side by side (plus one per anchor tier, `winrate/<tier>`):
- `winrate` — the headline: against the task's *reference set*, the responses TSRL's held-out metric is
  measured against ("vs. the reference anchor set on held-out prompts"; REFERENCE_SETS says per task what the
  paper's set is and what stands in for it in the shipped sample);
- `winrate_all` — against every reference anchor of the prompt, all tiers;
- `winrate_top` — against the top-tier anchors only (absent where the anchors carry no tiers, e.g. a real
  dataset's references).

Beside them, `repeated_bigrams` (ours, no paper's): the mean over held-out samples of the share of a sample's word
bigrams that repeat an earlier one of the same sample, in percent. A policy that collapses into a loop ("he he
he he …") scores near 100 while a judge may still rate it; ordinary text scores near 0.

Which responses form the set decides the level: human-written stories put TSRL's base model at 13.5 on
stories, a low-to-top quality spectrum at 54.0 on humor. An anchor belongs to the reference set when its tier
is one the task's set names (every anchor for a set without tiers); a held-out prompt with no anchor in the set
is refused before anything is generated.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from tsrl.errors import ConfigError
from tsrl.generation import Generator
from tsrl.judging import Judge
from tsrl.rewards.diversity import words
from tsrl.types import Anchor, Group, PairRequest, Prompt

TOP_TIER = "top"


@dataclass(frozen=True)
class ReferenceSet:
    """One task's held-out reference set: which anchors the headline win-rate is measured against."""

    tiers: tuple[str, ...] | None
    """Anchor tiers in the set ("" = untiered, a real dataset's references); None = every anchor."""
    name: str
    """The set in a few words, for the headline's label."""
    paper: str
    """The paper's reference set, in its words (TSRL §3's anchors), or "—" for a task the paper does not have."""
    here: str
    """What forms it in tsrl, and where the shipped sample cannot follow the paper."""

    def holds(self, anchor: Anchor) -> bool:
        return self.tiers is None or anchor.tier in self.tiers


EVERY_ANCHOR = ReferenceSet(None, "all tiers", "—", "every reference anchor of the held-out prompt")

REFERENCE_SETS: dict[str, ReferenceSet] = {
    "stories": ReferenceSet(
        (TOP_TIER, ""),
        "human stories; shipped sample: its top tier",
        "human-written stories (WritingPrompts' writers)",
        "task.dataset=euclaise/writingprompts: the prompt's human stories (untiered), as the paper; the shipped "
        "sample has no human stories: its top tier (written for tsrl) stands in for them",
    ),
    "humor": ReferenceSet(
        None,
        "all tiers",
        "the Gemini quality spectrum (low-effort to top-tier jokes)",
        "every anchor: the shipped five tiers (top … low, written for tsrl) stand in for Gemini's spectrum",
    ),
    "web": ReferenceSet(
        (TOP_TIER, ""),
        "reference pages; shipped sample: its top tier",
        "Reference pages (TSRL §3)",
        "task.dataset=HuggingFaceM4/WebSight: the prompt's reference page (untiered), as the paper; the shipped "
        "sample has no reference pages: its top tier (written for tsrl) stands in for them (ours)",
    ),
    "counseling": ReferenceSet(
        (TOP_TIER, ""),
        "human counselor responses; shipped sample: its top tier",
        "Human counselor responses (TSRL §3)",
        "task.dataset=ShenLab/MentalChat16K: the prompt's counselor replies (untiered), as the paper; the shipped "
        "sample has no human counselor responses: its top tier (written for tsrl) stands in for them (ours)",
    ),
}
"""Per judged task, the held-out reference set; a task not listed is measured against every anchor."""


def reference_set(task_name: str) -> ReferenceSet:
    return REFERENCE_SETS.get(task_name, EVERY_ANCHOR)


def repeated_share(text: str) -> float:
    """The share of a text's word bigrams that repeat an earlier bigram of the same text (0 under two words)."""
    ws = words(text)
    grams = list(zip(ws, ws[1:]))
    return 1.0 - len(set(grams)) / len(grams) if grams else 0.0


def check_references(task_name: str, prompts: Sequence[Prompt], reference: ReferenceSet) -> None:
    """Refuse held-out prompts that have no anchor in the task's reference set (their headline is undefined)."""
    bare = [p.id for p in prompts if not any(reference.holds(a) for a in p.anchors)]
    if bare:
        tiers = " or ".join(repr(t) for t in reference.tiers or ())
        wanted = f"an anchor of tier {tiers}" if tiers else "a reference anchor"
        raise ConfigError(
            f"Task {task_name}'s held-out win-rate is measured against {reference.here}, but held-out "
            f"prompt {bare[0]!r} ({len(bare)} of {len(prompts)}) has no such anchor; give every held-out "
            f"prompt {wanted} (task.eval_file)."
        )


def winrate_sums(
    generator: Generator,
    judge: Judge,
    prompts: Sequence[Prompt],
    samples: int,
    reference: ReferenceSet = EVERY_ANCHOR,
    groups_out: list[Group] | None = None,
) -> dict[str, float]:
    """Sums of wins and counts against the reference set, all anchors and per tier (keys wins/<key>, n/<key>);
    the generated groups are appended to `groups_out` when given (the run's heldout.jsonl)."""
    groups = generator.generate(prompts, samples)
    if groups_out is not None:
        groups_out.extend(groups)
    pairs = [(g.prompt, r.text, a) for g in groups for r in g.rollouts for a in g.prompt.anchors]
    verdicts = judge.compare([PairRequest(prompt, text, anchor.text) for prompt, text, anchor in pairs])
    sums: dict[str, float] = defaultdict(float)
    sums["n/reference"] = 0.0  # present even when every verdict against the set is missing
    for (_, _, anchor), verdict in zip(pairs, verdicts):
        if verdict.p_first is None:
            sums["missing"] += 1
            continue
        keys = ["all", anchor.tier or "untiered"] + (["reference"] if reference.holds(anchor) else [])
        for key in keys:
            sums[f"wins/{key}"] += verdict.p_first
            sums[f"n/{key}"] += 1
    rollouts = [r for g in groups for r in g.rollouts]
    sums["length_sum"] = float(sum(len(r.token_ids) for r in rollouts))
    sums["repeated_sum"] = float(sum(repeated_share(r.text) for r in rollouts))
    sums["samples"] = float(len(rollouts))
    return dict(sums)


def percent(sums: dict[str, float], key: str) -> float:
    return 100.0 * sums.get(f"wins/{key}", 0.0) / max(sums.get(f"n/{key}", 0.0), 1.0)


def winrate_summary(sums: dict[str, float]) -> dict[str, float]:
    """Percentages from (possibly process-summed) win sums: the headline against the reference set, all tiers,
    the top tier (when there is one) and each tier."""
    result = {
        "winrate": percent(sums, "reference" if "n/reference" in sums else "all"),
        "winrate_all": percent(sums, "all"),
    }
    if sums.get(f"n/{TOP_TIER}", 0.0) > 0:
        result["winrate_top"] = percent(sums, TOP_TIER)
    for key in sums:
        if key.startswith("n/") and key not in ("n/all", "n/reference"):
            result[f"winrate/{key[2:]}"] = percent(sums, key[2:])
    result["mean_length"] = sums.get("length_sum", 0.0) / max(sums.get("samples", 0.0), 1.0)
    result["repeated_bigrams"] = 100.0 * sums.get("repeated_sum", 0.0) / max(sums.get("samples", 0.0), 1.0)
    result["missing_verdicts"] = sums.get("missing", 0.0)
    return result
