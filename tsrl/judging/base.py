"""The Judge protocol and the counters every judge keeps.

A judge answers batches of questions. `compare` returns one Verdict per PairRequest, in order; `score` returns
one pointwise rubric Score (0–10) per ScoreRequest, in order; `score_lists` returns one ListScores per ListRequest
(a 0–10 score for each response of a list shown in one call), in order; `drain_metrics` hands back the counters
accumulated since its last call (the trainer logs them per step under judge/*). Wrappers (both orders, noise,
cache, budget) are judges around a judge.
"""

from __future__ import annotations

import hashlib
import struct
from collections import Counter
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from tsrl.errors import UserError
from tsrl.types import Count, ListRequest, ListScores, PairRequest, Score, ScoreRequest, Verdict


class JudgeUnavailable(UserError):
    """The judge cannot answer: its endpoint is unreachable or failed too many requests in a row."""


class JudgeUnreadable(JudgeUnavailable):
    """The judge answers, but its answers hold no readable verdict (a model that does not follow the format)."""


class Judge(Protocol):
    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]: ...

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]: ...

    def score_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]: ...

    def drain_metrics(self) -> dict[str, float]: ...


class JudgeCounters:
    """Per-step counters: calls, ties, errors (total and by kind), tokens, latency; drained into metrics.

    An error string reads "<kind>: <message>"; the kind is counted as errors/<kind>. `add` counts anything
    else a judge or wrapper wants logged (retries, fallbacks, cost)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.latencies: list[float] = []

    def record(self, answers: Sequence[Verdict | Score | ListScores]) -> None:
        self.counts["calls"] += len(answers)
        for answer in answers:
            value = answer.p_first if isinstance(answer, Verdict) else answer.value
            if value is None:
                self.counts["errors"] += 1
                self.counts[f"errors/{error_kind(answer.error)}"] += 1
            elif isinstance(answer, Verdict) and value == 0.5:
                self.counts["ties"] += 1
            self.counts["tokens"] += answer.tokens
            self.counts["cache_hits"] += answer.cached
            if answer.latency_s > 0 and not answer.cached:
                self.latencies.append(answer.latency_s)

    def add(self, key: str, amount: float = 1.0) -> None:
        self.counts[key] += amount

    def drain(self) -> dict[str, float]:
        counts, self.counts = self.counts, Counter()
        latencies, self.latencies = self.latencies, []
        calls = counts["calls"]
        metrics: dict[str, float] = {k: Count(counts[k]) for k in ("calls", "errors", "tokens", "cache_hits", "ties")}
        metrics.update({k: Count(v) for k, v in counts.items() if k not in metrics})  # every count sums
        metrics["tie_rate"] = counts["ties"] / calls if calls else 0.0
        if latencies:
            metrics["latency_p50_s"], metrics["latency_p95_s"] = (float(q) for q in np.quantile(latencies, [0.5, 0.95]))
        return metrics


def close_judge(judge: object) -> None:
    """Release what a judge holds (connections, its event loop, the cache file), down through its wrappers."""
    while judge is not None:
        close = getattr(judge, "close", None)
        if callable(close):
            close()
        judge = getattr(judge, "inner", None)


def error_kind(error: str | None) -> str:
    """The kind part of an error string "<kind>: <message>" (the whole string if it has no colon)."""
    return (error or "unknown").split(":", 1)[0].strip() or "unknown"


def merge_metrics(outer: dict[str, float], inner: dict[str, float]) -> dict[str, float]:
    """Add a wrapper's counts to its inner judge's metrics; tie_rate is recomputed from the summed counts."""
    merged = dict(inner)
    for key, value in outer.items():
        if key.startswith("latency_") and key in inner:
            continue  # cache hits carry no latency: the inner judge's percentiles stand
        merged[key] = Count(0.0) + merged.get(key, 0.0) + value if isinstance(value, Count) else value
    if merged.get("calls"):
        merged["tie_rate"] = merged.get("ties", 0.0) / merged["calls"]
    return merged


def stable_uniform(*parts: object) -> float:
    """A uniform number in [0, 1) determined by its arguments (stable across runs and processes)."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return struct.unpack("<Q", digest)[0] / 2.0**64
