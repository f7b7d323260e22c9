"""An order of players from the majority edges of their comparison graph (TSRL §2.2's "topological sort of the
comparison graph"), for anchor ladders.

Edges: for every pair (i, j) that met, the mean soft outcome ȳ_ij of i against j over their matches (either
order; a row (j, i, y) counts as 1 − y for i); i → j when ȳ_ij > ½ (i beats j by majority), no edge at ½ or when
they never met. Copeland score of i: the pairs it beats by majority minus the pairs it loses.

Order (one player at a time, K anchors of one prompt): among the players left, the candidates are those that no
player left outside their own strongly connected component reaches (the top component of what is left: one
player when the verdicts are transitive, a whole cycle when they are not); the candidate with the highest
Copeland score goes next, equal scores to the smaller index. On a transitive graph this is the topological sort
and the tie rule never acts; on a cycle (a ≻ b ≻ c ≻ a), where no topological order exists, the cycle is broken
by Copeland wins and then by index.

Returned as strengths [K], mean zero: K − 1 − position, so that sorting by strength gives the order (the gaps
carry no more than the order). Differences from the paper: it names the sort, not its tie or cycle rule, nor
how soft or repeated verdicts make an edge; those are ours.
"""

from __future__ import annotations

import numpy as np


def majority_wins(n: int, matches: np.ndarray | list) -> np.ndarray:
    """[n, n] boolean: i beats j by the mean of their outcomes (> ½)."""
    rows = np.asarray(matches, dtype=np.float64).reshape(-1, 3)  # [M, 3]
    total, count = np.zeros((n, n)), np.zeros((n, n))
    for i, j, y in rows:
        i, j = int(i), int(j)
        total[i, j] += y
        total[j, i] += 1.0 - y
        count[i, j] += 1
        count[j, i] += 1
    mean = np.divide(total, count, out=np.full((n, n), 0.5), where=count > 0)  # [n, n]
    return mean > 0.5


def reachable(edges: np.ndarray) -> np.ndarray:
    """[n, n] boolean transitive closure of `edges` (Warshall)."""
    reach = edges.copy()
    for k in range(len(edges)):
        reach |= reach[:, [k]] & reach[[k], :]
    return reach


def topological_order(n: int, matches: np.ndarray | list) -> list[int]:
    """The players in the order of the module docstring, first = strongest."""
    wins = majority_wins(n, matches)
    copeland = wins.sum(axis=1) - wins.sum(axis=0)  # [n]
    left, order = list(range(n)), []
    while left:
        sub = wins[np.ix_(left, left)]
        reach = reachable(sub)
        size = len(left)
        top = [a for a in range(size) if not any(reach[b, a] and not reach[a, b] for b in range(size) if b != a)]
        best = max((left[a] for a in top), key=lambda p: (copeland[p], -p))
        order.append(best)
        left.remove(best)
    return order


def topological_strengths(n: int, matches: np.ndarray | list) -> np.ndarray:
    """Strengths [n] (mean zero) whose descending sort is `topological_order`."""
    strength = np.zeros(n)
    for position, player in enumerate(topological_order(n, matches)):
        strength[player] = n - 1 - position
    return strength - strength.mean()
