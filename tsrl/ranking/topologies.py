"""Intra-group topologies as schedules, ArenaRL's and NeMo Gym's circular one (see schedule.py for the protocol).

N = G completions of one group (players 0 … N−1). Calls are counted in *matches*; a judge that asks both
orders (the default BothOrders wrapper) doubles the requests, not the matches.

- RoundRobin: one round of all N(N−1)/2 pairs; score = mean soft win-rate.
- AnchorBased: one round, every player j ≥ 1 against the anchor 0 (N−1 matches); score = y(j ≻ 0), the
  anchor itself ½. The anchor is sample 0 of the group; ArenaRL decodes it greedily, and so does tsrl
  unless reward.greedy_anchor=false (the regime's greedy_first, see tsrl/rewards/intragroup.py).
- SingleElimination: optional seeding pass = AnchorBased (N−1 matches), seeds by that score; bracket
  order 1v8 4v5 2v7 3v6 generalised to the next power of two P (seeds > N are byes, so the top seeds get
  them); the winner of a match advances, a bye advances unjudged; N−1 bracket matches in ⌈log2 N⌉ rounds.
  Score = rounds survived + ½·(mean outcome over all the player's matches, seeding included).
- DoubleElimination: the same seeding and winners' bracket; losers drop into a losers' bracket played in
  lockstep (pairs in drop-in order, odd one out gets a bye); the winners' and losers' champions meet in
  one grand final, no bracket reset (project choice). Exactly 2N−2 bracket matches. Score = round of
  elimination (champion last) + ½·mean outcome.

- Circular (NeMo Gym's `comparison_strategy: circular`, resources_servers/genrm_compare): one round of the N
  matches (i, i+1 mod N), i shown first; score = mean soft outcome over the player's two matches (as the first of
  (i, i+1) and the second of (i−1, i)). N = 2 plays the one pair twice, once in each order — NeMo Gym's rule
  gives (0, 1), (1, 0) there too; N = 1 plays nothing. NeMo Gym's GenRM answers each pair with two 1–5
  helpfulness grades and a 1–6 ranking that only breaks equal grades, and rewards each response the mean of its
  grades over its comparisons (plus optional length and style adjustments); tsrl's judges answer one soft
  outcome y per match, so the score here is the mean outcome, and the arena regime turns it into the
  standardised rank like every other topology (ours).

Exact ties (y = ½) in an elimination match are decided by a seeded coin. Differences from ArenaRL: the
paper does not specify tie handling, the tie-break inside a survival round (we use mean outcome) or
double-elimination details; those are tsrl's choices above.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tsrl.ranking.schedule import Match, winner


class Tally:
    """Outcomes seen so far: history rows (i, j, y) and each player's mean outcome from its side."""

    def __init__(self, n: int) -> None:
        self.total = np.zeros(n)
        self.count = np.zeros(n)
        self.history: list[tuple[int, int, float]] = []

    def add(self, match: Match, y: float) -> None:
        self.history.append((match.first, match.second, float(y)))
        self.total[[match.first, match.second]] += (y, 1.0 - y)
        self.count[[match.first, match.second]] += 1

    def mean(self) -> np.ndarray:
        return np.where(self.count > 0, self.total / np.maximum(self.count, 1), 0.5)


def bracket_order(size: int) -> list[int]:
    """Seed numbers (1-based) in bracket position order for a power-of-two size: 8 → 1 8 4 5 2 7 3 6."""
    order = [1]
    while len(order) < size:
        m = 2 * len(order)
        order = [s for x in order for s in (x, m + 1 - x)]
    return order


def initial_slots(seeded: Sequence[int]) -> list[int | None]:
    """Bracket slots for players listed best seed first; None marks a bye."""
    size = 1 << max(0, math.ceil(math.log2(max(len(seeded), 1))))
    return [seeded[s - 1] if s <= len(seeded) else None for s in bracket_order(size)]


class RoundRobin:
    """Every pair once, in one round."""

    def __init__(self, n: int) -> None:
        self.n, self.tally, self.done = n, Tally(n), False

    def next_round(self) -> list[Match]:
        return [] if self.done else [Match(i, j) for i in range(self.n) for j in range(i + 1, self.n)]

    def record(self, outcomes: Sequence[float]) -> None:
        for m, y in zip(self.next_round(), outcomes):
            self.tally.add(m, y)
        self.done = True

    def scores(self) -> np.ndarray:
        return self.tally.mean()


class Circular:
    """Each player against the next one, (i, i+1 mod N), in one round: N matches (none for N < 2)."""

    def __init__(self, n: int) -> None:
        self.n, self.tally, self.done = n, Tally(n), False

    def next_round(self) -> list[Match]:
        return [] if self.done or self.n < 2 else [Match(i, (i + 1) % self.n) for i in range(self.n)]

    def record(self, outcomes: Sequence[float]) -> None:
        for m, y in zip(self.next_round(), outcomes):
            self.tally.add(m, y)
        self.done = True

    def scores(self) -> np.ndarray:
        return self.tally.mean()  # [N] mean of y as first of (i, i+1) and 1 − y as second of (i−1, i)


class AnchorBased:
    """Every player against the anchor (player 0), in one round."""

    def __init__(self, n: int) -> None:
        self.n, self.tally, self.done = n, Tally(n), False
        self.versus_anchor = np.full(n, 0.5)  # [N] y(j ≻ anchor); the anchor itself ½

    def next_round(self) -> list[Match]:
        return [] if self.done else [Match(j, 0) for j in range(1, self.n)]

    def record(self, outcomes: Sequence[float]) -> None:
        for m, y in zip(self.next_round(), outcomes):
            self.tally.add(m, y)
            self.versus_anchor[m.first] = y
        self.done = True

    def scores(self) -> np.ndarray:
        return self.versus_anchor.copy()


class SingleElimination:
    """Seeded single-elimination bracket with byes; see the module docstring."""

    def __init__(self, n: int, *, seeded: bool = True, seed: int = 0) -> None:
        self.n, self.tally, self.rng = n, Tally(n), np.random.default_rng(seed)
        self.seeding = AnchorBased(n) if seeded and n > 2 else None
        self.slots: list[int | None] | None = None if self.seeding else initial_slots(range(n))
        self.survived = np.zeros(n)  # [N] bracket rounds won (byes included)

    def next_round(self) -> list[Match]:
        if self.slots is None:
            return self.seeding.next_round()
        if len(self.slots) < 2:
            return []
        pairs = zip(self.slots[0::2], self.slots[1::2])
        return [Match(a, b) for a, b in pairs if a is not None and b is not None]

    def record(self, outcomes: Sequence[float]) -> None:
        if self.slots is None:
            for m, y in zip(self.seeding.next_round(), outcomes):
                self.tally.add(m, y)
            self.seeding.record(outcomes)
            order = np.argsort(-self.seeding.scores(), kind="stable")
            self.slots = initial_slots([int(i) for i in order])
            return
        results = iter(outcomes)
        advancing: list[int | None] = []
        for a, b in zip(self.slots[0::2], self.slots[1::2]):
            if a is None or b is None:
                advancing.append(a if b is None else b)
                continue
            y = next(results)
            self.tally.add(Match(a, b), y)
            advancing.append((a, b)[winner(y, self.rng.random())])
        for p in advancing:
            self.survived[p] += 1
        self.slots = advancing

    def scores(self) -> np.ndarray:
        return self.survived + 0.5 * self.tally.mean()


class DoubleElimination:
    """Seeded double elimination in lockstep rounds, one grand final without reset; see the module docstring."""

    def __init__(self, n: int, *, seeded: bool = True, seed: int = 0) -> None:
        self.n, self.tally, self.rng = n, Tally(n), np.random.default_rng(seed)
        self.seeding = AnchorBased(n) if seeded and n > 2 else None
        self.winners: list[int | None] | None = None if self.seeding else initial_slots(range(n))
        self.losers: list[int] = []  # one loss, in drop-in order
        self.out_round = np.full(n, np.inf)  # [N] round of elimination; the champion stays at inf
        self.round = 0

    def _final(self) -> bool:
        return len(self.winners) == 1 and len(self.losers) == 1

    def next_round(self) -> list[Match]:
        if self.winners is None:
            return self.seeding.next_round()
        if self._final():
            return [Match(self.winners[0], self.losers[0])]
        wb = [Match(a, b) for a, b in zip(self.winners[0::2], self.winners[1::2]) if a is not None and b is not None]
        lb = [Match(a, b) for a, b in zip(self.losers[0::2], self.losers[1::2])]
        return wb + lb if len(self.winners) + len(self.losers) > 1 else []

    def record(self, outcomes: Sequence[float]) -> None:
        if self.winners is None:
            for m, y in zip(self.seeding.next_round(), outcomes):
                self.tally.add(m, y)
            self.seeding.record(outcomes)
            self.winners = initial_slots([int(i) for i in np.argsort(-self.seeding.scores(), kind="stable")])
            return
        self.round += 1
        matches, results = self.next_round(), list(outcomes)
        if self._final():
            self._play(matches[0], results[0], final=True)
            return
        n_wb = sum(1 for a, b in zip(self.winners[0::2], self.winners[1::2]) if a is not None and b is not None)
        wb_results, lb_results = results[:n_wb], results[n_wb:]
        advancing, dropped, it = self.winners[:1] if len(self.winners) == 1 else [], [], iter(wb_results)
        for a, b in zip(self.winners[0::2], self.winners[1::2]):
            if a is None or b is None:
                advancing.append(a if b is None else b)
                continue
            win, lose = self._play(Match(a, b), next(it))
            advancing.append(win)
            dropped.append(lose)
        survivors = [self._play(m, y)[0] for m, y in zip(matches[n_wb:], lb_results)]
        bye = self.losers[-1:] if len(self.losers) % 2 else []
        self.winners, self.losers = advancing, bye + survivors + dropped  # the bye moves to the front

    def _play(self, match: Match, y: float, final: bool = False) -> tuple[int, int]:
        self.tally.add(match, y)
        pair = (match.first, match.second)
        k = winner(y, self.rng.random())
        win, lose = pair[k], pair[1 - k]
        if final or lose not in (self.winners or []):
            self.out_round[lose] = self.round
            if final:
                self.winners, self.losers = [win], []
        return win, lose

    def scores(self) -> np.ndarray:
        finite = np.where(np.isinf(self.out_round), self.round + 1, self.out_round)
        return finite + 0.5 * self.tally.mean()
