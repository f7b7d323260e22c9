"""Judges around a judge. `BothOrders` asks (a, b) and (b, a) and averages, cancelling position bias."""

from __future__ import annotations

from typing import Sequence

from tsrl.judging.base import Judge
from tsrl.types import PairRequest, Score, ScoreRequest, Verdict


class BothOrders:
    """P(a ≻ b) = ½·(p(a,b) + 1 − p(b,a)); one side missing → the other side alone; both → no verdict."""

    def __init__(self, inner: Judge) -> None:
        self.inner = inner
        self.agreements: list[float] = []

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        swapped = [PairRequest(prompt=r.prompt, first=r.second, second=r.first) for r in requests]
        answers = self.inner.compare([*requests, *swapped])
        return [self._combine(fwd, rev) for fwd, rev in zip(answers[: len(requests)], answers[len(requests):])]

    def _combine(self, fwd: Verdict, rev: Verdict) -> Verdict:
        sides = [p for p in (fwd.p_first, None if rev.p_first is None else 1.0 - rev.p_first) if p is not None]
        agreement = None
        if len(sides) == 2:
            agreement = float(sides[0] == sides[1])
            self.agreements.append(agreement)
        return Verdict(
            p_first=sum(sides) / len(sides) if sides else None,
            raw=f"{fwd.raw}\n---swapped---\n{rev.raw}",
            error="; ".join(e for e in (fwd.error, rev.error) if e) or None,
            tokens=fwd.tokens + rev.tokens,
            latency_s=max(fwd.latency_s, rev.latency_s),
            cached=fwd.cached and rev.cached,
            swap_agreement=agreement,
        )

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        return self.inner.score(requests)  # pointwise: no order to swap

    def drain_metrics(self) -> dict[str, float]:
        metrics = self.inner.drain_metrics()
        if self.agreements:
            metrics["swap_agreement"] = sum(self.agreements) / len(self.agreements)
        self.agreements = []
        return metrics
