"""The Judge protocol and the counters every judge keeps.

A judge answers batches of pairwise questions. `compare` returns one Verdict per request, in order;
`score` returns one pointwise rubric Score (0–10) per request, in order; `drain_metrics` hands back the counters accumulated since its last call (the trainer logs them per step
under judge/*). Wrappers (both orders, noise, cache, budget) are judges around a judge.
"""

from __future__ import annotations

import hashlib
import struct
from collections import Counter
from typing import Protocol, Sequence

from tsrl.types import PairRequest, Score, ScoreRequest, Verdict


class Judge(Protocol):
    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]: ...

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]: ...

    def drain_metrics(self) -> dict[str, float]: ...


class JudgeCounters:
    """Per-step counters: calls, ties, errors; drained into a metrics dict."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def record(self, answers: Sequence[Verdict | Score]) -> None:
        self.counts["calls"] += len(answers)
        for answer in answers:
            value = answer.p_first if isinstance(answer, Verdict) else answer.value
            if value is None:
                self.counts["errors"] += 1
            elif isinstance(answer, Verdict) and value == 0.5:
                self.counts["ties"] += 1
            self.counts["tokens"] += answer.tokens
            self.counts["cache_hits"] += answer.cached

    def drain(self) -> dict[str, float]:
        counts, self.counts = self.counts, Counter()
        calls = counts["calls"]
        metrics = {k: float(counts[k]) for k in ("calls", "errors", "tokens", "cache_hits")}
        metrics["tie_rate"] = counts["ties"] / calls if calls else 0.0
        return metrics


def stable_uniform(*parts: object) -> float:
    """A uniform number in [0, 1) determined by its arguments (stable across runs and processes)."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return struct.unpack("<Q", digest)[0] / 2.0**64
