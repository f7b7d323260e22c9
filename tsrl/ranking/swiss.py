"""Swiss-system schedule (ArenaRL): ⌈log2 N⌉ rounds, no rematches, Buchholz tie-break.

Each round the N players are ordered by standings (points, then initial order) and paired top-down with
the nearest player they have not met (depth-first backtracking, so a pairing without rematches is found
whenever one exists — with ⌈log2 N⌉ ≤ N−1 rounds one always does for N ≥ 2). With N odd the lowest-ranked
player without a bye so far sits out and scores a full win (1 point). Points are soft: a match with
outcome y gives y to the first player and 1 − y to the second. Final order: points, then Buchholz (sum of
the final points of the opponents met; a bye adds nothing). N/2 matches per round, ⌊N/2⌋·⌈log2 N⌉ in all.

The caller's initial order is copied, never shuffled in place, and every result is credited to the
players of the match it answers (a public implementation got both wrong). Differences from ArenaRL: the
paper gives rounds and tie-break only; top-down adjacent pairing, bye rule and bye value are tsrl's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tsrl.ranking.schedule import Match
from tsrl.ranking.topologies import Tally


def pair_without_rematch(players: list[int], met: list[set[int]]) -> list[tuple[int, int]] | None:
    """Pairs of consecutive-as-possible players none of whom met before, or None when impossible."""
    if not players:
        return []
    first = players[0]
    for k in range(1, len(players)):
        if players[k] in met[first]:
            continue
        rest = pair_without_rematch(players[1:k] + players[k + 1 :], met)
        if rest is not None:
            return [(first, players[k]), *rest]
    return None


class Swiss:
    """Swiss system over n players; `order` (optional) is the initial standing, best first."""

    def __init__(self, n: int, *, rounds: int | None = None, order: Sequence[int] | None = None) -> None:
        self.order = list(range(n)) if order is None else list(order)  # a copy: the caller's list stays as it is
        if sorted(self.order) != list(range(n)):
            raise ValueError(f"Swiss order must be a permutation of 0..{n - 1}, got {self.order}.")
        self.n = n
        self.rounds = math.ceil(math.log2(n)) if rounds is None and n > 1 else (rounds or 0)
        if self.rounds > max(n - 1, 0):
            raise ValueError(
                f"Swiss with {n} players allows at most {n - 1} rounds without rematches, "
                f"got {self.rounds}; lower the number of rounds."
            )
        self.points = np.zeros(n)
        self.met: list[set[int]] = [set() for _ in range(n)]
        self.had_bye: set[int] = set()
        self.tally, self.played = Tally(n), 0
        self._pending: list[Match] | None = None
        self._bye: int | None = None

    def _standings(self) -> list[int]:
        position = {p: k for k, p in enumerate(self.order)}
        return sorted(range(self.n), key=lambda p: (-self.points[p], position[p]))

    def next_round(self) -> list[Match]:
        if self.played >= self.rounds:
            return []
        if self._pending is None:
            standing = self._standings()
            self._bye = None
            if self.n % 2:
                self._bye = next(p for p in reversed(standing) if p not in self.had_bye)
                standing.remove(self._bye)
            pairs = pair_without_rematch(standing, self.met)
            if pairs is None:
                raise ValueError(f"Swiss round {self.played + 1} cannot be paired without a rematch; use fewer rounds.")
            self._pending = [Match(a, b) for a, b in pairs]
        return self._pending

    def record(self, outcomes: Sequence[float]) -> None:
        for m, y in zip(self.next_round(), outcomes):
            self.tally.add(m, y)
            self.points[m.first] += y
            self.points[m.second] += 1.0 - y
            self.met[m.first].add(m.second)
            self.met[m.second].add(m.first)
        if self._bye is not None:
            self.points[self._bye] += 1.0
            self.had_bye.add(self._bye)
        self.played += 1
        self._pending = None

    def buchholz(self) -> np.ndarray:
        return np.array([sum(self.points[o] for o in self.met[p]) for p in range(self.n)])

    def scores(self) -> np.ndarray:
        """Dense lexicographic rank of (points, Buchholz) as a number, higher = better."""
        keys = list(zip(np.round(self.points, 9), np.round(self.buchholz(), 9)))
        distinct = sorted(set(keys))
        return np.array([float(distinct.index(k)) for k in keys])
