"""Evaluation on held-out prompts, by the task's metric: win-rate against reference anchors with the
evaluation judge (judged tasks), pass ratio@n and pass@k with the verifier (verifiable tasks)."""

from __future__ import annotations

from typing import Any, Sequence

from tsrl.evaluation.passk import pass_at_k, pass_sums, pass_summary
from tsrl.evaluation.winrate import winrate_sums, winrate_summary
from tsrl.tasks.base import task_metric
from tsrl.types import Prompt

HEADLINE = {"winrate": ("winrate", "held-out win-rate vs reference anchors"),
            "pass": ("pass_ratio", "held-out pass ratio@n (mean accuracy over n samples)")}


def headline(task: Any) -> tuple[str, str]:
    """The key of a task's main held-out number in an evaluation result, and how to say it."""
    return HEADLINE[task_metric(task)]


def evaluation_sums(task: Any, generator: Any, judge: Any, prompts: Sequence[Prompt], samples: int) -> dict[str, float]:
    """The task's evaluation sums for these prompts (add several processes' sums, then summarise)."""
    if task_metric(task) == "pass":
        return pass_sums(generator, task, prompts, samples)
    return winrate_sums(generator, judge, prompts, samples)


def evaluation_summary(task: Any, sums: dict[str, float], samples: int) -> dict[str, float]:
    return pass_summary(sums, samples) if task_metric(task) == "pass" else winrate_summary(sums)


__all__ = ["HEADLINE", "headline", "evaluation_sums", "evaluation_summary", "pass_at_k", "pass_sums", "pass_summary",
           "winrate_sums", "winrate_summary"]
