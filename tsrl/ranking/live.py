"""Reasoning Arena's live trace tournament and the cai-tournament constitutional bracket (schedules).

LiveTrace — traces arrive one by one (`arrival` order; tsrl's generator finishes a whole group at once,
so the regime passes a seeded random order as a stand-in for completion order). Each new trace is judged
against the current best, worst and median of the traces already scored (distinct ones: 0, 1, 2, then 3
matches), "current" meaning the Bradley–Terry order of the matches so far. So at most 3 matches per trace,
3N − 6 in all for N ≥ 3, one round per arriving trace. A hard verdict y becomes the soft outcome
y ∈ {m, ½, 1 − m} (soft margin m ∈ (½, 1]); the final strengths β [N] are a mirror-augmented, L2
Bradley–Terry fit of those soft outcomes (median = position ⌊k/2⌋ of k scored traces, best first).

ConstitutionalBracket — a single-elimination bracket over a seeded random draw (no seeding pass: the
constitutional method ranks by principles, not by an anchor), each match judged under one principle
sampled uniformly from the constitution. Reward = wins / rounds with rounds = ⌈log2 N⌉, a bye counting as
a win, so the champion gets 1 and a first-round loser 0.

Differences from the papers: m, λ and the arrival order are not published (tsrl: m = 0.9, λ = 0.1, seeded
random order); cai-tournament's draw is not specified (tsrl: seeded random).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from tsrl.ranking.bradley_terry import fit_bradley_terry_batch
from tsrl.ranking.schedule import Match, winner
from tsrl.ranking.topologies import Tally, initial_slots


def soft_outcome(y: float, margin: float) -> float:
    """Reasoning Arena's soft label: first wins → m, second wins → 1 − m, tie → ½."""
    return 0.5 if y == 0.5 else (margin if y > 0.5 else 1.0 - margin)


class LiveTrace:
    """Each arriving trace vs current best, worst and median; see the module docstring."""

    def __init__(self, n: int, *, arrival: Sequence[int] | None = None, margin: float = 0.9, l2: float = 0.1) -> None:
        if not 0.5 < margin <= 1.0:
            raise ValueError(f"soft margin m must lie in (0.5, 1], got {margin}.")
        self.arrival = list(range(n)) if arrival is None else list(arrival)
        if sorted(self.arrival) != list(range(n)):
            raise ValueError(f"arrival must be a permutation of 0..{n - 1}.")
        self.n, self.margin, self.l2 = n, margin, l2
        self.tally = Tally(n)
        self.soft: list[tuple[int, int, float]] = []  # [M] (i, j, soft y)
        self.scored: list[int] = []
        self.next_index = 0

    def _strengths(self) -> np.ndarray:
        if not self.soft:
            return np.zeros(self.n)
        return fit_bradley_terry_batch(self.n, np.array([self.soft]), l2=self.l2, mirror=True)[0]

    def next_round(self) -> list[Match]:
        while self.next_index < self.n and not self.scored:
            self.scored.append(self.arrival[self.next_index])  # the first trace has nobody to meet
            self.next_index += 1
        if self.next_index >= self.n:
            return []
        beta = self._strengths()
        ranked = sorted(self.scored, key=lambda p: -beta[p])
        opponents = dict.fromkeys([ranked[0], ranked[-1], ranked[len(ranked) // 2]])  # distinct, in order
        return [Match(self.arrival[self.next_index], o) for o in opponents]

    def record(self, outcomes: Sequence[float]) -> None:
        for m, y in zip(self.next_round(), outcomes):
            self.tally.add(m, y)
            self.soft.append((m.first, m.second, soft_outcome(y, self.margin)))
        self.scored.append(self.arrival[self.next_index])
        self.next_index += 1

    def scores(self) -> np.ndarray:
        return self._strengths()


class ConstitutionalBracket:
    """Single elimination over a random draw, one sampled principle per match; scores = wins / rounds."""

    def __init__(self, n: int, n_principles: int, *, seed: int = 0) -> None:
        if n_principles < 1:
            raise ValueError("A constitutional bracket needs at least one principle.")
        self.rng = np.random.default_rng(seed)
        self.n, self.n_principles = n, n_principles
        self.slots: list[int | None] = initial_slots([int(p) for p in self.rng.permutation(n)])
        self.rounds = max(1, math.ceil(math.log2(max(n, 1))))
        self.wins = np.zeros(n)  # [N]
        self.tally = Tally(n)
        self._pending: list[Match] | None = None

    def next_round(self) -> list[Match]:
        if len(self.slots) < 2:
            return []
        if self._pending is None:
            pairs = [(a, b) for a, b in zip(self.slots[0::2], self.slots[1::2]) if a is not None and b is not None]
            self._pending = [Match(a, b, int(self.rng.integers(self.n_principles))) for a, b in pairs]
        return self._pending

    def record(self, outcomes: Sequence[float]) -> None:
        results = dict(zip([(m.first, m.second) for m in self.next_round()], outcomes))
        advancing: list[int | None] = []
        for a, b in zip(self.slots[0::2], self.slots[1::2]):
            if a is None or b is None:
                advancing.append(a if b is None else b)  # a bye counts as a win
            else:
                self.tally.add(Match(a, b), results[(a, b)])
                advancing.append((a, b)[winner(results[(a, b)], self.rng.random())])
            self.wins[advancing[-1]] += 1
        self.slots, self._pending = advancing, None

    def scores(self) -> np.ndarray:
        return self.wins / self.rounds
