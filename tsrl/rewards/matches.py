"""Playing tournament schedules against a Judge: the I/O side of tsrl.ranking, shared by the regimes.

`play` runs one schedule per group (B groups) round by round; each round of every group playing is a single
judge.compare batch. The groups come from a GroupStream (tsrl/rewards/stream.py): a group that arrives while
others play starts its first round with their next one, so with `trainer.pipeline=stream` the tournament runs
while the batch is still being generated; given the whole batch at once it is ranking.run_schedules' lockstep.

There is one failure policy, the judge's (`judge.failure`): with `tie` or `random` the judge stack has already
answered a failed request. A match that still has no verdict (Verdict.p_first None, `judge.failure=drop`) is
counted with its reason and handled by the regime's rule: `drop` (y = ½ so the schedule can finish, then the
whole group is dropped: NaN rewards, left out of the update) for in_batch, arena and adaptive; `random` (a
seeded coin, cai-tournament's rule) for the constitutional bracket. Diagnostics summarise the matches actually
played: tie rate, decisiveness
E|2y − 1|, and the Bradley–Terry spread (max β − min β per group, all groups in one batched fit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from tsrl.judging import Judge
from tsrl.ranking import Match, Schedule, fit_bradley_terry_batch, pad_matches
from tsrl.ranking.schedule import MAX_ROUNDS
from tsrl.rewards.stream import GroupStream
from tsrl.types import Count, Group, PairRequest

RequestFor = Callable[[Group, Match], PairRequest]
"""Builds the judge request for a match of a group (the constitutional regime adds the principle)."""

MakeSchedules = Callable[[int, list[Group]], list["Schedule | None"]]
"""(index of the first, groups that just arrived) → a fresh schedule per group, or None for a group that plays
no match (adaptive routing's verifier-separated groups). Called in batch order."""


def plain_request(group: Group, match: Match) -> PairRequest:
    return PairRequest(group.prompt, group.rollouts[match.first].text, group.rollouts[match.second].text)


@dataclass
class Played:
    """What happened while the schedules ran."""

    requests: int = 0  # judge requests issued (matches that reached the judge)
    failures: list[tuple[int, str]] = field(default_factory=list)  # (group index, reason)
    dropped: set[int] = field(default_factory=set)  # groups whose rewards become NaN
    groups: list[Group] = field(default_factory=list)  # every group of the stream, in batch order
    schedules: list[Schedule | None] = field(default_factory=list)  # each group's finished schedule (or None)

    def histories(self) -> list[list[tuple[int, int, float]]]:
        """The match history of every group that played."""
        return [s.tally.history for s in self.schedules if s is not None]


@dataclass
class Table:
    """How to play: the judge, the fallback for failed matches, and the request builder."""

    judge: Judge
    on_failure: str = "drop"
    rng: np.random.Generator = field(default_factory=np.random.default_rng)
    request_for: RequestFor = plain_request


def play(stream: GroupStream, make: MakeSchedules, table: Table) -> Played:
    """Run a schedule for every group of `stream` to its end; returns the groups, their schedules, the request
    count and the failures. Each judge batch holds the next round of every group playing, newcomers included."""
    played = Played()
    rounds: list[int] = []
    pending: list[tuple[int, list[Match]]] = []  # (group index, its next round), in batch order

    def ask(batch: list[tuple[int, Match]]) -> list[float]:
        verdicts = table.judge.compare([table.request_for(played.groups[s], m) for s, m in batch])
        played.requests += len(batch)
        return [v.p_first if v.p_first is not None else fallback(s, v.error) for (s, _), v in zip(batch, verdicts)]

    def fallback(s: int, error: str | None) -> float:
        played.failures.append((s, error or "no verdict"))
        if table.on_failure == "drop":
            played.dropped.add(s)
        return float(table.rng.integers(2)) if table.on_failure == "random" else 0.5  # drop: ½ to finish

    while True:
        arrived = stream.take(wait=not pending)  # blocks only when nothing is left to play
        start = len(played.groups)
        played.groups += arrived
        played.schedules += make(start, arrived) if arrived else []
        for s in range(start, len(played.groups)):
            rounds.append(0)
            first = played.schedules[s].next_round() if played.schedules[s] is not None else []
            if first:
                pending.append((s, first))
        if not pending:
            if stream.ended:
                return played
            continue
        batch = [(s, m) for s, matches in pending for m in matches]
        outcomes = ask(batch)
        at = 0
        for s, matches in pending:
            played.schedules[s].record(outcomes[at : at + len(matches)])
            at += len(matches)
            rounds[s] += 1
        pending = [(s, nxt) for s, nxt in ((s, played.schedules[s].next_round()) for s, _ in pending) if nxt]
        if pending and max(rounds[s] for s, _ in pending) >= MAX_ROUNDS:
            name = type(played.schedules[next(s for s, _ in pending if rounds[s] >= MAX_ROUNDS)]).__name__
            raise RuntimeError(
                f"{name} still has matches after {MAX_ROUNDS} rounds; a schedule must finish "
                "(next_round() returning []) — this is a bug in the schedule."
            )


def diagnostics(
    histories: Sequence[list[tuple[int, int, float]]], n: int, played: Played, samples: int
) -> dict[str, float]:
    """reward/* counters plus tournament/* summaries of the matches in every group's history."""
    outcomes = np.array([y for h in histories for _, _, y in h])  # [M_all]
    spread = 0.0
    if outcomes.size:
        beta = fit_bradley_terry_batch(n, *pad_matches(list(histories)), l2=0.1)  # [B, N]
        spread = float((beta.max(axis=1) - beta.min(axis=1)).mean())
    return {
        "reward/comparisons_per_sample": played.requests / samples,
        "reward/matches_per_sample": outcomes.size / samples,
        "reward/missing_verdicts": Count(len(played.failures)),
        "reward/dropped_groups": Count(len(played.dropped)),
        "tournament/tie_rate": float((outcomes == 0.5).mean()) if outcomes.size else 0.0,
        "tournament/decisiveness": float(np.abs(2 * outcomes - 1).mean()) if outcomes.size else 0.0,
        "tournament/bt_spread": spread,
    }
