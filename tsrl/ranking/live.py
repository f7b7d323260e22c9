"""Reasoning Arena's trace tournaments (live and round-robin) and the cai-tournament constitutional bracket.

N = G completions (traces) of one group, players 0 … N−1. Both trace tournaments turn a hard verdict y into
the soft outcome y ∈ {m, ½, 1 − m} (soft margin m ∈ (½, 1]) and score the group by a mirror-augmented,
L2 Bradley–Terry fit of those soft outcomes (tsrl.ranking.bradley_terry, strength λ): β [N].

LiveTrace — traces arrive one by one (`arrival` order; tsrl's generator finishes a whole group at once,
so the regime passes a seeded random order as a stand-in for completion order). Each new trace is judged
against the current best, worst and median of the traces already scored (distinct ones: 0, 1, 2, then 3
matches). "Current" is a leaderboard of the matches so far (`leaderboard`, LEADERBOARDS):
- winrate (default, Reasoning Arena's): each scored trace's win-rate, the mean outcome of its own matches
  (a win 1, a tie ½, a loss 0; the judge's soft p where it gives one), highest first;
- bt (ours, tsrl's earlier default): the soft-margin Bradley–Terry β of the matches so far, a fit per round.
Equal keys keep arrival order (the earlier trace ranks higher; ours). So at most 3 matches per trace, 3N − 6
in all for N ≥ 3, one round per arriving trace (median = position ⌊k/2⌋ of k scored traces, best first).
Either way the group's reward is the Bradley–Terry fit of all its matches; the leaderboard only picks opponents.

TraceRoundRobin — the paper's non-live tournament: all N(N−1)/2 pairs judged in one round (player i < j
shown first), then the same soft outcomes and the same fit as LiveTrace.

ConstitutionalBracket — single elimination over a seeded random draw (no seeding pass: the constitutional
method ranks by principles, not by an anchor). Each round pairs the remaining players off in order
(1st v 2nd, 3rd v 4th, …); with an odd number left, the last one gets a bye and advances. Winners keep
their order for the next round, so nothing is padded to a power of two. Every match is judged under one
principle sampled uniformly from the constitution; an exact tie goes by a seeded coin. A bracket of N
players plays N − 1 matches in ⌈log2 N⌉ rounds (the players left after r rounds are ⌈N/2^r⌉), and

    score = wins / ⌈log2 N⌉,   a bye counting as a win,

so the champion gets 1 and a first-round loser 0; a lone player (N = 1) is the champion, score 1, with
no match.

Differences from the papers: m, λ and the arrival order are not published (tsrl: m = 0.9, λ = 0.1, seeded
random order), nor how equal win-rates are ordered (tsrl: arrival order); picking opponents by β is ours
(leaderboard="bt"); cai-tournament's draw is not specified (tsrl: a seeded random permutation), nor how a
principle is chosen (tsrl: uniformly, one per match).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tsrl.ranking.bradley_terry import fit_bradley_terry_batch
from tsrl.ranking.schedule import Match, winner
from tsrl.ranking.topologies import Tally


def soft_outcome(y: float, margin: float) -> float:
    """Reasoning Arena's soft label: first wins → m, second wins → 1 − m, tie → ½."""
    return 0.5 if y == 0.5 else (margin if y > 0.5 else 1.0 - margin)


def check_margin(margin: float) -> None:
    if not 0.5 < margin <= 1.0:
        raise ValueError(f"soft margin m must lie in (0.5, 1], got {margin}.")


def soft_strengths(n: int, soft: Sequence[tuple[int, int, float]], l2: float) -> np.ndarray:
    """Bradley–Terry β [N] of soft match rows (i, j, y), mirror-augmented; zeros before any match."""
    if not soft:
        return np.zeros(n)
    return fit_bradley_terry_batch(n, np.array([soft]), l2=l2, mirror=True)[0]


def leaderboard_order(scored: Sequence[int], key: np.ndarray) -> list[int]:
    """The scored players, highest key first; equal keys keep their order in `scored` (arrival order)."""
    return sorted(scored, key=lambda p: -key[p])  # sorted is stable


def best_worst_median(ranked: Sequence[int]) -> list[int]:
    """The live tournament's opponents from a leaderboard (best first): best, worst, median (position ⌊k/2⌋),
    distinct and in that order."""
    return list(dict.fromkeys([ranked[0], ranked[-1], ranked[len(ranked) // 2]]))


LEADERBOARDS = ("winrate", "bt")
"""How LiveTrace orders the scored traces to pick its opponents (module docstring); winrate is the paper's."""


class LiveTrace:
    """Each arriving trace vs current best, worst and median; see the module docstring."""

    def __init__(
        self,
        n: int,
        *,
        arrival: Sequence[int] | None = None,
        margin: float = 0.9,
        l2: float = 0.1,
        leaderboard: str = "winrate",
    ) -> None:
        check_margin(margin)
        if leaderboard not in LEADERBOARDS:
            raise ValueError(f"leaderboard={leaderboard!r} is unknown; choose one of {', '.join(LEADERBOARDS)}.")
        self.arrival = list(range(n)) if arrival is None else list(arrival)
        if sorted(self.arrival) != list(range(n)):
            raise ValueError(f"arrival must be a permutation of 0..{n - 1}.")
        self.n, self.margin, self.l2, self.leaderboard = n, margin, l2, leaderboard
        self.tally = Tally(n)
        self.soft: list[tuple[int, int, float]] = []  # [M] (i, j, soft y)
        self.scored: list[int] = []
        self.next_index = 0

    def next_round(self) -> list[Match]:
        while self.next_index < self.n and not self.scored:
            self.scored.append(self.arrival[self.next_index])  # the first trace has nobody to meet
            self.next_index += 1
        if self.next_index >= self.n:
            return []
        key = self.tally.mean() if self.leaderboard == "winrate" else self.scores()  # [N]
        opponents = best_worst_median(leaderboard_order(self.scored, key))
        return [Match(self.arrival[self.next_index], o) for o in opponents]

    def record(self, outcomes: Sequence[float]) -> None:
        for m, y in zip(self.next_round(), outcomes):
            self.tally.add(m, y)
            self.soft.append((m.first, m.second, soft_outcome(y, self.margin)))
        self.scored.append(self.arrival[self.next_index])
        self.next_index += 1

    def scores(self) -> np.ndarray:
        return soft_strengths(self.n, self.soft, self.l2)


class TraceRoundRobin:
    """Every pair of traces once, in one round; scores = soft-margin Bradley–Terry β (module docstring)."""

    def __init__(self, n: int, *, margin: float = 0.9, l2: float = 0.1) -> None:
        check_margin(margin)
        self.n, self.margin, self.l2 = n, margin, l2
        self.tally = Tally(n)
        self.soft: list[tuple[int, int, float]] = []  # [M] (i, j, soft y)
        self.done = False

    def next_round(self) -> list[Match]:
        return [] if self.done else [Match(i, j) for i in range(self.n) for j in range(i + 1, self.n)]

    def record(self, outcomes: Sequence[float]) -> None:
        for m, y in zip(self.next_round(), outcomes):
            self.tally.add(m, y)
            self.soft.append((m.first, m.second, soft_outcome(y, self.margin)))
        self.done = True

    def scores(self) -> np.ndarray:
        return soft_strengths(self.n, self.soft, self.l2)


class ConstitutionalBracket:
    """Pair-off single elimination over a seeded draw, byes to the odd one out, one sampled principle per
    match; scores = wins / ⌈log2 N⌉ (module docstring)."""

    def __init__(self, n: int, n_principles: int, *, seed: int = 0) -> None:
        if n_principles < 1:
            raise ValueError("A constitutional bracket needs at least one principle.")
        self.rng = np.random.default_rng(seed)
        self.n, self.n_principles = n, n_principles
        self.draw = [int(p) for p in self.rng.permutation(n)]  # [N] the order of round 1
        self.alive = list(self.draw)  # players still in, in pairing order
        self.rounds = math.ceil(math.log2(n)) if n > 1 else 0
        self.wins = np.zeros(n)  # [N] matches won plus byes
        self.byes: list[int] = []  # who sat out, one entry per round with an odd number of players
        self.tally = Tally(n)
        self._pending: list[Match] | None = None

    def next_round(self) -> list[Match]:
        if len(self.alive) < 2:
            return []
        if self._pending is None:
            pairs = zip(self.alive[0::2], self.alive[1::2])
            self._pending = [Match(a, b, int(self.rng.integers(self.n_principles))) for a, b in pairs]
        return self._pending

    def record(self, outcomes: Sequence[float]) -> None:
        advancing = []
        for m, y in zip(self.next_round(), outcomes):
            self.tally.add(m, y)
            advancing.append((m.first, m.second)[winner(y, self.rng.random())])
        if len(self.alive) % 2:
            self.byes.append(self.alive[-1])
            advancing.append(self.alive[-1])  # the odd one out advances; the bye counts as a win
        self.wins[advancing] += 1
        self.alive, self._pending = advancing, None

    def scores(self) -> np.ndarray:
        return self.wins / self.rounds if self.rounds else np.ones(self.n)
