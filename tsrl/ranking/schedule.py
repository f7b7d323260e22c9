"""Tournament schedules: the protocol, rank helpers, and the round-by-round driver.

A schedule over N players (the G completions of one group) emits *rounds* of matches; every match of a
round can be judged concurrently. After each round the caller records one outcome y ∈ [0, 1] per match
(P(first ≻ second); ½ = tie). When `next_round()` returns an empty list the schedule is finished and
`scores()` gives one number per player, higher = better; `ranks(scores)` turns them into ranks 0 … N−1
(0 = best, ties share their average rank).

The driver `run_schedules` advances many schedules (one per group, B groups) in lockstep: round r of every
unfinished schedule goes to the caller's `ask` function as one batch, so a judge sees B·(pairs per round)
requests at once. `ask` does the I/O; everything here stays pure.

Reward of a rank (ArenaRL): r = 1 − rank/(N−1), then standardised within the group, (r − mean)/std,
with a constant group mapped to zeros.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class Match:
    """One pairwise question inside a schedule: player `first` shown first; `principle` ≥ 0 for
    constitutional matches (index into the constitution), −1 otherwise."""

    first: int
    second: int
    principle: int = -1


class Schedule(Protocol):
    def next_round(self) -> list[Match]: ...

    def record(self, outcomes: Sequence[float]) -> None: ...

    def scores(self) -> np.ndarray: ...


def ranks(scores: np.ndarray) -> np.ndarray:
    """Ranks [N] from scores [N]: 0 = highest score; tied scores share the average of their ranks."""
    scores = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-scores, kind="stable")
    positions = np.empty(len(scores))
    positions[order] = np.arange(len(scores))
    out = np.empty(len(scores))
    for value in np.unique(scores):
        tied = scores == value
        out[tied] = positions[tied].mean()
    return out


def standardise(values: np.ndarray) -> np.ndarray:
    """(v − mean)/std over the last axis; a constant row becomes zeros."""
    values = np.asarray(values, dtype=np.float64)
    std = values.std(axis=-1, keepdims=True)
    return np.where(std > 1e-12, (values - values.mean(axis=-1, keepdims=True)) / np.maximum(std, 1e-12), 0.0)


def rank_rewards(scores: np.ndarray) -> np.ndarray:
    """ArenaRL: 1 − rank/(N−1) for a group's scores [N], standardised within the group."""
    n = len(scores)
    return standardise(1.0 - ranks(scores) / max(n - 1, 1))


def winner(y: float, tie_break: float) -> int:
    """0 when the first player wins y, 1 when the second does; an exact tie goes by tie_break < ½."""
    if y == 0.5:
        return 0 if tie_break < 0.5 else 1
    return 0 if y > 0.5 else 1


Ask = Callable[[list[tuple[int, Match]]], list[float]]
"""The caller's judge: (schedule index, match) pairs in, one outcome y ∈ [0, 1] per pair out."""


MAX_ROUNDS = 1000
"""tsrl's schedules finish within N + 3 rounds (checked for N = 2 … 64; double elimination is the longest); one
still asking after this many rounds is broken, and `run_schedules` stops it instead of judging forever."""


def run_schedules(schedules: Sequence[Schedule], ask: Ask, max_rounds: int = MAX_ROUNDS) -> int:
    """Play every schedule to the end, one round at a time across all of them; returns the rounds played."""
    rounds = 0
    while True:
        pending = [(s, schedule.next_round()) for s, schedule in enumerate(schedules)]
        pending = [(s, matches) for s, matches in pending if matches]
        if not pending:
            return rounds
        if rounds >= max_rounds:
            name = type(schedules[pending[0][0]]).__name__
            raise RuntimeError(
                f"{name} still has matches after {max_rounds} rounds; a schedule must finish "
                f"(next_round() returning []) — this is a bug in the schedule."
            )
        batch = [(s, m) for s, matches in pending for m in matches]
        outcomes = ask(batch)
        if len(outcomes) != len(batch):
            raise ValueError(f"ask returned {len(outcomes)} outcomes for {len(batch)} matches; it must answer each.")
        start = 0
        for s, matches in pending:
            schedules[s].record(outcomes[start : start + len(matches)])
            start += len(matches)
        rounds += 1
