"""Held-out pass ratio@n and pass@k for verifiable tasks (Reasoning Arena reports pass ratio@16), in percent.

The Reasoning Arena text names pass ratio@16 (math, GPQA-Diamond) and pass@5 (LiveCodeBench) without defining
them; tsrl reads pass ratio@16 as the mean accuracy over 16 samples per problem (equal in expectation to pass@1,
estimated from 16 samples).

For each held-out problem the policy samples n completions and the task's verifier scores each; with c of the
n correct (verify = 1):
- pass ratio@n = mean over problems of c / n (mean accuracy over the n samples; partial verifier credit
  counts as its value);
- pass@k = mean over problems of 1 − C(n − c, k) / C(n, k), the unbiased estimator of "at least one of k
  samples is correct" (Chen et al. 2021), for k = 1, 2, 4, … up to n, plus the k a task names in `report_k`
  (task=code: 5, Reasoning Arena's LiveCodeBench v6 pass@5) when k ≤ n;
- answered = share of samples from which the verifier could read an answer at all (when the task says: its
  `answer(prompt, text)`, or `extract(text)`).
A prompt that names its benchmark (`fields["benchmark"]`, task=stem: several held-out sets in one run) is also
counted under `<benchmark>/`: the summary then holds `<benchmark>/pass_ratio`, `<benchmark>/pass@k`, … beside the
numbers pooled over every prompt. Returns sums so that several processes can add their shares before dividing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    read = answer_reader(task)
    extra = tuple(getattr(task, "report_k", ()))
    sums: dict[str, float] = {}
    for group, scores in zip(groups, verify_rollouts(task, groups)):
        n, c = len(scores), sum(s >= 1.0 for s in scores)
        counts = {"problems": 1.0, "accuracy": sum(scores) / n}
        counts |= {f"pass@{k}": pass_at_k(n, c, k) for k in ks_for(n, extra)}
        if read is not None:
            counts["answered"] = sum(read(group.prompt, r.text) is not None for r in group.rollouts) / n
        benchmark = group.prompt.fields.get("benchmark")
        for prefix in ("", f"{benchmark}/") if benchmark else ("",):
            for key, value in counts.items():
                sums[prefix + key] = sums.get(prefix + key, 0.0) + value
        sums["length_sum"] = sums.get("length_sum", 0.0) + float(sum(len(r.token_ids) for r in group.rollouts))
        sums["samples"] = sums.get("samples", 0.0) + n
    return sums


def answer_reader(task: Any) -> Callable[[Prompt, str], Any] | None:
    """How to read the answer of a completion to a prompt: the task's answer(prompt, text), else its extract(text)
    (None when the task has neither)."""
    answer = getattr(task, "answer", None)
    if answer is not None:
        return answer
    extract = getattr(task, "extract", None)
    return None if extract is None else lambda prompt, text: extract(text)


def pass_summary(sums: dict[str, float], samples: int) -> dict[str, float]:
    """Percentages from (possibly process-summed) sums: pass_ratio (= pass ratio@samples), pass@k, answered."""
    result = {"samples_per_problem": float(samples)}
    benchmarks = dict.fromkeys(key.rpartition("/")[0] + "/" for key in sums if "/" in key)
    for prefix in ("", *benchmarks):
        problems = max(sums.get(f"{prefix}problems", 0.0), 1.0)
        result[f"{prefix}pass_ratio"] = 100.0 * sums.get(f"{prefix}accuracy", 0.0) / problems
        for key, value in sums.items():
            name = key.removeprefix(prefix)
            if key.startswith(prefix) and name.startswith(("pass@", "answered")):
                result[key] = 100.0 * value / problems
        result[f"{prefix}problems"] = sums.get(f"{prefix}problems", 0.0)
    result["mean_length"] = sums.get("length_sum", 0.0) / max(sums.get("samples", 0.0), 1.0)
    return result
