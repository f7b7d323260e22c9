"""Playing tournament schedules against a Judge: the I/O side of tsrl.ranking, shared by the regimes.

`play` runs one schedule per group (B groups) round by round via ranking.run_schedules; each round of all
groups is a single judge.compare batch. There is one failure policy, the judge's (`judge.failure`): with
`tie` or `random` the judge stack has already answered a failed request. A match that still has no verdict
(Verdict.p_first None, `judge.failure=drop`) is counted with its reason and handled by the regime's rule:
`drop` (y = ½ so the schedule can finish, then the whole group is dropped: NaN rewards, left out of the
update) for in_batch, arena and adaptive; `random` (a seeded coin, cai-tournament's rule) for the
constitutional bracket. Diagnostics summarise the matches actually played: tie rate, decisiveness
E|2y − 1|, and the Bradley–Terry spread (max β − min β per group, all groups in one batched fit).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from tsrl.judging import Judge
from tsrl.ranking import Match, Schedule, fit_bradley_terry_batch, pad_matches, run_schedules
from tsrl.types import Count, Group, PairRequest

RequestFor = Callable[[Group, Match], PairRequest]
"""Builds the judge request for a match of a group (the constitutional regime adds the principle)."""


def plain_request(group: Group, match: Match) -> PairRequest:
    return PairRequest(group.prompt, group.rollouts[match.first].text, group.rollouts[match.second].text)


@dataclass
class Played:
    """What happened while the schedules ran."""

    requests: int = 0  # judge requests issued (matches that reached the judge)
    failures: list[tuple[int, str]] = field(default_factory=list)  # (group index, reason)
    dropped: set[int] = field(default_factory=set)  # groups whose rewards become NaN


@dataclass
class Table:
    """How to play: the judge, the fallback for failed matches, and the request builder."""

    judge: Judge
    on_failure: str = "drop"
    rng: np.random.Generator = field(default_factory=np.random.default_rng)
    request_for: RequestFor = plain_request


def play(groups: Sequence[Group], schedules: Sequence[Schedule], table: Table) -> Played:
    """Run every group's schedule to the end; returns the request count and failures."""
    played = Played()

    def ask(batch: list[tuple[int, Match]]) -> list[float]:
        verdicts = table.judge.compare([table.request_for(groups[s], m) for s, m in batch])
        played.requests += len(batch)
        return [v.p_first if v.p_first is not None else fallback(s, v.error) for (s, _), v in zip(batch, verdicts)]

    def fallback(s: int, error: str | None) -> float:
        played.failures.append((s, error or "no verdict"))
        if table.on_failure == "drop":
            played.dropped.add(s)
        return float(table.rng.integers(2)) if table.on_failure == "random" else 0.5  # drop: ½ to finish

    run_schedules(schedules, ask)
    return played


def diagnostics(histories: Sequence[list[tuple[int, int, float]]], n: int, played: Played, samples: int
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
