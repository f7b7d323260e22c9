"""Evaluation on held-out prompts, by the task's metric: win-rate against reference anchors with the
evaluation judge (judged tasks: the headline against the task's reference set, beside it all tiers and the top
tier — winrate.py), pass ratio@n and pass@k with the verifier (verifiable tasks)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tsrl.evaluation.passk import pass_at_k, pass_summary, pass_sums
from tsrl.evaluation.winrate import (
    REFERENCE_SETS,
    ReferenceSet,
    check_references,
    reference_set,
    winrate_summary,
    winrate_sums,
)
from tsrl.tasks.base import task_metric
from tsrl.types import Prompt

HELDOUT_FILE = "heldout.jsonl"
"""A run's held-out generations: one row per completion of each evaluation, {step, prompt_id, prompt, sample,
completion} (the training loop's evaluation writes them; tsrl-human-study reads them)."""

HEADLINE = {
    "winrate": ("winrate", "held-out win-rate vs reference anchors"),
    "pass": ("pass_ratio", "held-out pass ratio@n (mean accuracy over n samples)"),
}


def headline(task: Any) -> tuple[str, str]:
    """The key of a task's main held-out number in an evaluation result, and how to say it (for a judged task,
    with the reference set it is measured against)."""
    key, label = HEADLINE[task_metric(task)]
    if key == "winrate":
        label += f" ({reference_set(task.name).name})"
    return key, label


def evaluation_sums(
    task: Any, generator: Any, judge: Any, prompts: Sequence[Prompt], samples: int, groups_out: list | None = None
) -> dict[str, float]:
    """The task's evaluation sums for these prompts (add several processes' sums, then summarise); a judged task
    appends its generated groups to `groups_out` when given (heldout.jsonl, tsrl-human-study)."""
    if task_metric(task) == "pass":
        return pass_sums(generator, task, prompts, samples)
    reference = reference_set(task.name)
    check_references(task.name, prompts, reference)
    return winrate_sums(generator, judge, prompts, samples, reference, groups_out)


def heldout_rows(step: int, groups: Sequence[Any]) -> list[dict[str, Any]]:
    """The HELDOUT_FILE rows of one evaluation's groups (tsrl.types.Group)."""
    return [
        {"step": step, "prompt_id": g.prompt.id, "prompt": g.prompt.text, "sample": i, "completion": r.text}
        for g in groups
        for i, r in enumerate(g.rollouts)
    ]


def evaluation_summary(task: Any, sums: dict[str, float], samples: int) -> dict[str, float]:
    return pass_summary(sums, samples) if task_metric(task) == "pass" else winrate_summary(sums)


__all__ = [
    "HEADLINE",
    "HELDOUT_FILE",
    "REFERENCE_SETS",
    "ReferenceSet",
    "check_references",
    "evaluation_sums",
    "evaluation_summary",
    "headline",
    "heldout_rows",
    "pass_at_k",
    "pass_sums",
    "pass_summary",
    "reference_set",
    "winrate_sums",
    "winrate_summary",
]
