"""Held-out pass ratio@n and pass@k for verifiable tasks (Reasoning Arena reports pass ratio@16), in percent.

Reasoning Arena's paper text defining "pass ratio@16" is not available here; tsrl reads it as the mean accuracy
over 16 samples per problem (equal in expectation to pass@1, estimated from 16 samples).

For each held-out problem the policy samples n completions and the task's verifier scores each; with c of the
n correct (verify = 1):
- pass ratio@n = mean over problems of c / n (mean accuracy over the n samples; partial verifier credit
  counts as its value);
- pass@k = mean over problems of 1 − C(n − c, k) / C(n, k), the unbiased estimator of "at least one of k
  samples is correct" (Chen et al. 2021), for k = 1, 2, 4, … up to n, plus the k a task names in `report_k`
  (task=code: 5, Reasoning Arena's LiveCodeBench v6 pass@5) when k ≤ n;
- answered = share of samples from which the verifier could read an answer at all (when the task says).
Returns sums so that several processes can add their shares before dividing.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb
from typing import Any

from tsrl.generation import Generator
from tsrl.tasks.base import verify_rollouts
from tsrl.types import Prompt


def pass_at_k(n: int, c: int, k: int) -> float:
    """P(at least one of k samples drawn without replacement from n, c of them correct, is correct)."""
    if not 1 <= k <= n or not 0 <= c <= n:
        raise ValueError(
            f"pass_at_k: needs 1 <= k <= n and 0 <= c <= n, got n={n}, c={c}, k={k}; n samples "
            "estimate pass@k only for k up to n (ks_for lists those)."
        )
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def ks_for(n: int, extra: Sequence[int] = ()) -> list[int]:
    """k = 1, 2, 4, … below n, then n itself, plus every k of `extra` that n samples can estimate (k ≤ n)."""
    ks, k = [], 1
    while k < n:
        ks.append(k)
        k *= 2
    return sorted({*ks, n, *(k for k in extra if 1 <= k <= n)})


def pass_sums(generator: Generator, task: Any, prompts: Sequence[Prompt], samples: int) -> dict[str, float]:
    """Sums over problems of accuracy, pass@k and answered share (keys accuracy, pass@k, answered, problems)."""
    groups = generator.generate(prompts, samples)
    extract = getattr(task, "extract", None)
    extra = tuple(getattr(task, "report_k", ()))
    sums: dict[str, float] = {"problems": 0.0, "accuracy": 0.0, "length_sum": 0.0, "samples": 0.0}
    for group, scores in zip(groups, verify_rollouts(task, groups)):
        n, c = len(scores), sum(s >= 1.0 for s in scores)
        sums["problems"] += 1
        sums["accuracy"] += sum(scores) / n
        for k in ks_for(n, extra):
            sums[f"pass@{k}"] = sums.get(f"pass@{k}", 0.0) + pass_at_k(n, c, k)
        if extract is not None:
            sums["answered"] = sums.get("answered", 0.0) + sum(extract(r.text) is not None for r in group.rollouts) / n
        sums["length_sum"] += float(sum(len(r.token_ids) for r in group.rollouts))
        sums["samples"] += n
    return sums


def pass_summary(sums: dict[str, float], samples: int) -> dict[str, float]:
    """Percentages from (possibly process-summed) sums: pass_ratio (= pass ratio@samples), pass@k, answered."""
    problems = max(sums.get("problems", 0.0), 1.0)
    result = {"pass_ratio": 100.0 * sums.get("accuracy", 0.0) / problems, "samples_per_problem": float(samples)}
    for key, value in sums.items():
        if key.startswith("pass@"):
            result[key] = 100.0 * value / problems
    if "answered" in sums:
        result["answered"] = 100.0 * sums["answered"] / problems
    result["mean_length"] = sums.get("length_sum", 0.0) / max(sums.get("samples", 0.0), 1.0)
    result["problems"] = sums.get("problems", 0.0)
    return result
