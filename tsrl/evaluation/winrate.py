"""Held-out win-rate against reference anchors (the papers' metric), in percent.

For each held-out prompt the policy samples `samples` completions; each is judged against every reference
anchor of that prompt; win-rate = 100 · mean p(completion ≻ anchor) (ties ½). Per-tier win-rates show
which part of the quality spectrum the policy beats. Verdicts the judge could not give are excluded and
counted. Returns sums so that several processes can add their shares before dividing.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from tsrl.generation import Generator
from tsrl.judging import Judge
from tsrl.types import PairRequest, Prompt


def winrate_sums(generator: Generator, judge: Judge, prompts: Sequence[Prompt], samples: int) -> dict[str, float]:
    """Sums of wins and counts, overall and per anchor tier (keys wins/<tier>, n/<tier>)."""
    groups = generator.generate(prompts, samples)
    pairs = [(g.prompt, r.text, a) for g in groups for r in g.rollouts for a in g.prompt.anchors]
    verdicts = judge.compare([PairRequest(prompt, text, anchor.text) for prompt, text, anchor in pairs])
    sums: dict[str, float] = defaultdict(float)
    for (_, _, anchor), verdict in zip(pairs, verdicts):
        if verdict.p_first is None:
            sums["missing"] += 1
            continue
        for key in ("all", anchor.tier or "untiered"):
            sums[f"wins/{key}"] += verdict.p_first
            sums[f"n/{key}"] += 1
    rollouts = [r for g in groups for r in g.rollouts]
    sums["length_sum"] = float(sum(len(r.token_ids) for r in rollouts))
    sums["samples"] = float(len(rollouts))
    return dict(sums)


def winrate_summary(sums: dict[str, float]) -> dict[str, float]:
    """Percentages from (possibly process-summed) win sums."""
    result = {"winrate": 100.0 * sums.get("wins/all", 0.0) / max(sums.get("n/all", 0.0), 1.0)}
    for key, n in sums.items():
        if key.startswith("n/") and key != "n/all":
            result[f"winrate/{key[2:]}"] = 100.0 * sums[f"wins/{key[2:]}"] / max(n, 1.0)
    result["mean_length"] = sums.get("length_sum", 0.0) / max(sums.get("samples", 0.0), 1.0)
    result["missing_verdicts"] = sums.get("missing", 0.0)
    return result
