"""Property tests (hypothesis): the invariants the tournament schedules and the verdict cache promise.

Schedules. Every schedule in tsrl.ranking is played to the end over sizes N = 1 … 17, seeds, and outcome
sequences drawn by hypothesis (hard 0/1, exact ties ½, soft values in [0, 1]), and each run is checked
against what the module docstrings (and docs/concepts.md) state: the exact number of matches and rounds, no player
meeting itself, indices in range, no rematch where the format forbids one, byes where the docstring puts
them, one champion where the topology has one, and scores that are finite, of shape [N] and ordered as
documented. Where a tie is decided by the schedule's own seeded coin, the oracle reads the coin's result off
the scores (a match winner always outlives the loser), so ties are exercised too.

Verdict cache. The key is the judge identity + prompt text + rubric + the two responses (with image digests)
+ the shown order; each of those must change the key, and a cache in front of a judge must answer exactly
what the judge would (a shared key between two different questions shows up as a wrong answer).

All runs are derandomized (a fixed seed per test, no example database), so CI sees the same examples every
time; max_examples is kept moderate so the file runs in a few seconds.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tsrl.judging import VerdictCache
from tsrl.judging.cache import cache_key
from tsrl.ranking import (
    TOPOLOGIES,
    ConstitutionalBracket,
    DoubleElimination,
    LiveTrace,
    Match,
    RoundRobin,
    SingleElimination,
    Swiss,
    TraceRoundRobin,
    run_schedules,
    soft_outcome,
)
from tsrl.testing.fakes import NumberTask, ScriptedJudge
from tsrl.types import PairRequest, Prompt, Verdict

PROPERTY = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

SIZES = st.integers(1, 17)
SEEDS = st.integers(0, 2**16)
ANY_OUTCOME = st.one_of(st.sampled_from([0.0, 1.0, 0.5]), st.floats(0.0, 1.0))
DECISIVE = st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0).filter(lambda y: y != 0.5))
OUTCOMES = st.lists(ANY_OUTCOME, min_size=1, max_size=40)
DECISIVE_OUTCOMES = st.lists(DECISIVE, min_size=1, max_size=40)

Round = list[tuple[Match, float]]


def log2ceil(n: int) -> int:
    return math.ceil(math.log2(n)) if n > 1 else 0


def play(schedule, outcomes: Sequence[float], before_round: Callable[[list[Match]], None] | None = None) -> list[Round]:
    """Play a schedule to the end with its own next_round/record loop, answering with `outcomes` in turn
    (cycled). Fails if it is still scheduling after 4N + 4 rounds (every schedule here needs far fewer)."""
    feed, rounds = itertools.cycle(outcomes), []
    limit = 4 * schedule.n + 4
    while matches := schedule.next_round():
        assert len(rounds) < limit, f"{type(schedule).__name__}({schedule.n}) unfinished after {limit} rounds"
        assert schedule.next_round() == matches  # asking again, before recording, gives the same round
        if before_round:
            before_round(matches)
        ys = [next(feed) for _ in matches]
        schedule.record(ys)
        rounds.append(list(zip(matches, ys)))
    assert schedule.next_round() == []  # finished stays finished
    return rounds


def decisive_winner(match: Match, y: float) -> int | None:
    """The winner of a match by its outcome; None for an exact tie (the schedule's coin decides)."""
    return None if y == 0.5 else (match.first if y > 0.5 else match.second)


def winner_of(match: Match, y: float, scores: np.ndarray) -> int:
    """The winner by outcome, or for an exact tie the one the coin chose: in an elimination format the winner
    outlives the loser, so it ends with the higher score."""
    won = decisive_winner(match, y)
    if won is not None:
        return won
    return match.first if scores[match.first] > scores[match.second] else match.second


def players(matches: Sequence[Match]) -> list[int]:
    return [p for m in matches for p in (m.first, m.second)]


def initial_byes(n: int, seed_order: Sequence[int]) -> set[int]:
    """The players a seeded bracket of N gives a first-round bye: the top P − N seeds, P = 2^⌈log2 N⌉."""
    return set(seed_order[: (1 << log2ceil(n)) - n])


# name → (N, seed) → a fresh schedule, the documented number of matches, the documented number of rounds
# (None: only bounded, see test_every_schedule_terminates_with_the_documented_match_count).
Counts = Callable[[int], int]
SCHEDULES: dict[str, tuple[Callable[[int, int], object], Counts, Counts | None]] = {
    "round_robin": (TOPOLOGIES["round_robin"], lambda n: n * (n - 1) // 2, lambda n: int(n > 1)),
    "anchor": (TOPOLOGIES["anchor"], lambda n: n - 1, lambda n: int(n > 1)),
    "single_elimination": (
        TOPOLOGIES["single_elimination"],
        lambda n: (n - 1) * (1 + (n > 2)),
        lambda n: int(n > 2) + log2ceil(n),
    ),
    "single_elimination_unseeded": (
        lambda n, seed: SingleElimination(n, seeded=False, seed=seed),
        lambda n: n - 1,
        log2ceil,
    ),
    "double_elimination": (TOPOLOGIES["double_elimination"], lambda n: (n - 1) * (n > 2) + 2 * n - 2, None),
    "double_elimination_unseeded": (
        lambda n, seed: DoubleElimination(n, seeded=False, seed=seed),
        lambda n: 2 * n - 2,
        None,
    ),
    "swiss": (TOPOLOGIES["swiss"], lambda n: n // 2 * log2ceil(n), log2ceil),
    "circular": (TOPOLOGIES["circular"], lambda n: n if n > 1 else 0, lambda n: int(n > 1)),
    "live_trace": (
        lambda n, seed: LiveTrace(n, arrival=np.random.default_rng(seed).permutation(n).tolist()),
        lambda n: 3 * n - 6 if n >= 3 else n - 1,
        lambda n: max(n - 1, 0),
    ),
    "trace_round_robin": (lambda n, seed: TraceRoundRobin(n), lambda n: n * (n - 1) // 2, lambda n: int(n > 1)),
    "constitutional": (
        lambda n, seed: ConstitutionalBracket(n, n_principles=1 + seed % 4, seed=seed),
        lambda n: n - 1,
        log2ceil,
    ),
}


def test_every_topology_is_in_the_property_table():
    """A topology added to TOPOLOGIES must be added to SCHEDULES above, with its documented counts."""
    assert set(TOPOLOGIES) <= set(SCHEDULES)


@pytest.mark.parametrize("name", list(SCHEDULES))
@PROPERTY
@given(n=SIZES, seed=SEEDS, outcomes=OUTCOMES)
def test_every_schedule_terminates_with_the_documented_match_count(name, n, seed, outcomes):
    make, expected_matches, expected_rounds = SCHEDULES[name]
    schedule = make(n, seed)
    rounds = play(schedule, outcomes)
    matches = [m for r in rounds for m, _ in r]
    assert len(matches) == expected_matches(n)
    if expected_rounds is not None:
        assert len(rounds) == expected_rounds(n)
    assert len(rounds) <= len(matches)  # every round judges something
    for m in matches:
        assert 0 <= m.first < n and 0 <= m.second < n and m.first != m.second
        n_principles = getattr(schedule, "n_principles", 0)
        assert 0 <= m.principle < n_principles if n_principles else m.principle == -1
    scores = schedule.scores()
    assert scores.shape == (n,) and np.isfinite(scores).all()


@PROPERTY
@given(
    names=st.lists(st.sampled_from(list(SCHEDULES)), min_size=1, max_size=4),
    sizes=st.lists(SIZES, min_size=4, max_size=4),
    seed=SEEDS,
    outcomes=OUTCOMES,
)
def test_run_schedules_in_lockstep_plays_each_schedule_as_if_alone(names, sizes, seed, outcomes):
    """run_schedules batches round r of every unfinished schedule; that must not change any schedule's play.
    Outcome k of schedule s is the same in both runs."""
    alone = [
        play(SCHEDULES[name][0](n, seed), outcomes[s:] + outcomes[:s]) for s, (name, n) in enumerate(zip(names, sizes))
    ]
    together = [SCHEDULES[name][0](n, seed) for name, n in zip(names, sizes)]
    feeds = [itertools.cycle(outcomes[s:] + outcomes[:s]) for s in range(len(names))]
    seen: list[list[Match]] = [[] for _ in names]

    def ask(batch):
        for s, m in batch:
            seen[s].append(m)
        return [next(feeds[s]) for s, _ in batch]

    assert run_schedules(together, ask) == max(len(r) for r in alone)
    assert seen == [[m for r in rounds for m, _ in r] for rounds in alone]


@pytest.mark.parametrize("kind", [RoundRobin, TraceRoundRobin])
@PROPERTY
@given(n=SIZES, outcomes=OUTCOMES)
def test_round_robins_judge_every_pair_once_lower_index_first(kind, n, outcomes):
    rounds = play(kind(n), outcomes)
    pairs = [(m.first, m.second) for r in rounds for m, _ in r]
    assert sorted(pairs) == list(itertools.combinations(range(n), 2))


@PROPERTY
@given(n=SIZES, outcomes=OUTCOMES)
def test_round_robin_score_is_the_mean_soft_win_rate(n, outcomes):
    schedule = RoundRobin(n)
    points = np.zeros(n)
    for m, y in itertools.chain(*play(schedule, outcomes)):
        points[[m.first, m.second]] += (y, 1.0 - y)
    assert np.allclose(schedule.scores(), points / (n - 1) if n > 1 else 0.5)


@PROPERTY
@given(n=SIZES, outcomes=OUTCOMES)
def test_trace_round_robin_strengths_are_ordered_like_soft_points(n, outcomes):
    """In a complete round robin the L2 Bradley–Terry optimum satisfies h(β_i) = 2·s_i + 1 with h strictly
    increasing (h(x) = 2·Σ_j σ(x − β_j) + λx), s_i = player i's soft points {m, ½, 1 − m}: so β is ordered
    exactly like s, equal points giving equal strength, and Σβ = 0. Points differ by multiples of m − ½."""
    schedule = TraceRoundRobin(n, margin=0.9)
    points = np.zeros(n)
    for m, y in itertools.chain(*play(schedule, outcomes)):
        soft = soft_outcome(y, 0.9)
        points[[m.first, m.second]] += (soft, 1.0 - soft)
    beta = schedule.scores()
    assert abs(beta.sum()) < 1e-6
    for i, k in itertools.permutations(range(n), 2):
        if points[i] > points[k] + 1e-9:
            assert beta[i] > beta[k]
        elif abs(points[i] - points[k]) < 1e-9:
            assert beta[i] == pytest.approx(beta[k], abs=1e-6)


@PROPERTY
@given(n=SIZES, outcomes=OUTCOMES)
def test_anchor_based_plays_everyone_against_sample_0_and_scores_that_outcome(n, outcomes):
    schedule = TOPOLOGIES["anchor"](n, 0)
    rounds = play(schedule, outcomes)
    assert [m for r in rounds for m, _ in r] == [Match(j, 0) for j in range(1, n)]
    expected = np.full(n, 0.5)
    for m, y in itertools.chain(*rounds):
        expected[m.first] = y
    assert np.array_equal(schedule.scores(), expected)


def seeding_pass(n: int, seeded: bool, rounds: list[Round]) -> tuple[list[int], list[Round]]:
    """(seed order, bracket rounds): the seeding pass is the anchor round; its scores seed the bracket,
    stable on ties; unseeded, the seed order is 0 … N−1."""
    if not (seeded and n > 2):
        return list(range(n)), rounds
    assert [m for m, _ in rounds[0]] == [Match(j, 0) for j in range(1, n)]
    versus_anchor = np.full(n, 0.5)
    for m, y in rounds[0]:
        versus_anchor[m.first] = y
    return [int(p) for p in np.argsort(-versus_anchor, kind="stable")], rounds[1:]


def last_round(bracket: list[Round], n: int) -> np.ndarray:
    """[N] 1-based index of the bracket round of each player's last match (0: never played)."""
    last = np.zeros(n, dtype=int)
    for r, matches in enumerate(bracket, start=1):
        last[players([m for m, _ in matches])] = r
    return last


def check_bracket_rounds(bracket: list[Round]) -> None:
    for matches in bracket:
        in_round = players([m for m, _ in matches])
        assert len(in_round) == len(set(in_round)), "a player plays twice in one bracket round"


@pytest.mark.parametrize("seeded", [True, False])
@PROPERTY
@given(n=SIZES, seed=SEEDS, outcomes=OUTCOMES)
def test_single_elimination_bracket(seeded, n, seed, outcomes):
    """Byes in round 1 go to the top P − N seeds; bracket rounds hold N − P/2, P/4, …, 1 matches; no rematch;
    the loser of a match never plays again; score = rounds survived (byes included) + ½·mean outcome, so
    ⌊score⌋ is the round a player went out in minus one, and the champion's is ⌈log2 N⌉ (unique)."""
    schedule = SingleElimination(n, seeded=seeded, seed=seed)
    seed_order, bracket = seeding_pass(n, seeded, play(schedule, outcomes))
    check_bracket_rounds(bracket)
    size, depth = 1 << log2ceil(n), log2ceil(n)
    per_round = [n - size // 2] + [size >> k for k in range(2, depth + 1)] if n > 1 else []
    assert [len(r) for r in bracket] == per_round
    if bracket:
        assert initial_byes(n, seed_order) == set(range(n)) - set(players([m for m, _ in bracket[0]]))
    pairs = [frozenset((m.first, m.second)) for r in bracket for m, _ in r]
    assert len(pairs) == len(set(pairs))
    scores = schedule.scores()
    survived = np.floor(scores)
    assert np.allclose(survived, scores - 0.5 * schedule.tally.mean())  # the fraction is ½·mean outcome
    champions = np.flatnonzero(survived == depth)
    assert len(champions) == 1 and survived.max() == depth
    last = last_round(bracket, n)
    for r, matches in enumerate(bracket, start=1):
        for m, y in matches:
            loser = ({m.first, m.second} - {winner_of(m, y, scores)}).pop()
            assert last[loser] == r, "a loser played again"
            assert survived[loser] == r - 1
            if decisive_winner(m, y) is not None:
                assert winner_of(m, y, scores) == decisive_winner(m, y)
    if bracket:
        final, y = bracket[-1][0]
        assert champions[0] == winner_of(final, y, scores)


@pytest.mark.parametrize("seeded", [True, False])
@PROPERTY
@given(n=SIZES, seed=SEEDS, outcomes=OUTCOMES)
def test_double_elimination_is_out_after_its_elimination_round(seeded, n, seed, outcomes):
    """2N − 2 bracket matches; first-round byes to the top seeds; nobody plays twice in a round; ⌊score⌋ is
    the bracket round of the player's last match (champion: one more), so exactly one champion, who played
    (and won) the grand final, the last match. Rematches are possible by design (winners' bracket, then
    losers' bracket or the grand final), but a pair meets at most twice."""
    schedule = DoubleElimination(n, seeded=seeded, seed=seed)
    seed_order, bracket = seeding_pass(n, seeded, play(schedule, outcomes))
    check_bracket_rounds(bracket)
    assert sum(len(r) for r in bracket) == 2 * n - 2
    if bracket:
        assert initial_byes(n, seed_order) == set(range(n)) - set(players([m for m, _ in bracket[0]]))
    meetings = [frozenset((m.first, m.second)) for r in bracket for m, _ in r]
    assert all(meetings.count(p) <= 2 for p in meetings)
    scores = schedule.scores()
    out = np.floor(scores)
    champion_round = len(bracket) + 1
    assert np.flatnonzero(out == champion_round).size == 1 and out.max() == champion_round
    last = last_round(bracket, n)
    champion = int(np.argmax(out))
    assert np.array_equal(out, np.where(np.arange(n) == champion, champion_round, last))
    if bracket:
        final, y = bracket[-1][0]
        assert len(bracket[-1]) == 1 and champion in (final.first, final.second)
        assert decisive_winner(final, y) in (None, champion)


@pytest.mark.parametrize("seeded", [True, False])
@PROPERTY
@given(n=SIZES, seed=SEEDS, outcomes=DECISIVE_OUTCOMES)
def test_double_elimination_eliminates_on_the_second_loss(seeded, n, seed, outcomes):
    """Decisive outcomes (no coin): a player with two losses never plays again; the grand final is the
    winners' champion (no loss) against the losers' champion (one loss), with no reset: its loser is out;
    in the end every player but the champion has two losses, except the grand-final loser who may have one."""
    schedule = DoubleElimination(n, seeded=seeded, seed=seed)
    _, bracket = seeding_pass(n, seeded, play(schedule, outcomes))
    losses = np.zeros(n, dtype=int)
    for matches in bracket:
        for m, _ in matches:
            assert losses[m.first] < 2 and losses[m.second] < 2, "a player with two losses played again"
        if matches is bracket[-1]:
            assert sorted(losses[[matches[0][0].first, matches[0][0].second]]) == [0, 1]  # the grand final
        for m, y in matches:
            losses[({m.first, m.second} - {decisive_winner(m, y)}).pop()] += 1
    if n > 1:
        final, y = bracket[-1][0]
        champion = decisive_winner(final, y)
        runner_up = ({final.first, final.second} - {champion}).pop()
        assert losses[champion] <= 1 and losses[runner_up] in (1, 2)
        others = [p for p in range(n) if p not in (champion, runner_up)]
        assert all(losses[others] == 2)


def swiss_standings(points: np.ndarray, order: list[int]) -> list[int]:
    position = {p: k for k, p in enumerate(order)}
    return sorted(range(len(order)), key=lambda p: (-points[p], position[p]))


@PROPERTY
@given(n=SIZES, seed=SEEDS, outcomes=OUTCOMES)
def test_swiss_pairs_by_standings_without_rematches(n, seed, outcomes):
    """⌈log2 N⌉ rounds of ⌊N/2⌋ matches; never a rematch; with N odd one bye per round, to the lowest-standing
    player without one (never twice), worth a full point; round 1 pairs the initial order top-down; in every
    match the first player stands above the second, and the round's first match starts with the top
    player; points are credited to the match's own players; final scores order by points, then Buchholz."""
    order = np.random.default_rng(seed).permutation(n).tolist()
    schedule = Swiss(n, order=order)
    points, byes, met, played = np.zeros(n), [], [set() for _ in range(n)], []

    def check_round(matches: list[Match]) -> None:
        standing = swiss_standings(points, order)
        assert len(matches) == n // 2
        absent = set(range(n)) - set(players(matches))
        assert len(absent) == n % 2 and len(players(matches)) == 2 * len(matches)
        if absent:
            (bye,) = absent
            assert bye == next(p for p in reversed(standing) if p not in byes)
            byes.append(bye)
        rank = {p: k for k, p in enumerate(p for p in standing if p not in absent)}
        assert matches[0].first == min(rank, key=rank.get)
        for m in matches:
            assert m.second not in met[m.first], "Swiss rematch"
            assert rank[m.first] < rank[m.second]
        if not played:  # round 1: the initial order, paired top-down
            assert players(matches) == [p for p in order if p not in absent]

    feed = itertools.cycle(outcomes)
    while matches := schedule.next_round():
        check_round(matches)
        ys = [next(feed) for _ in matches]
        schedule.record(ys)
        played.append(matches)
        for m, y in zip(matches, ys):
            points[[m.first, m.second]] += (y, 1.0 - y)
            met[m.first].add(m.second)
            met[m.second].add(m.first)
        if n % 2:
            points[byes[-1]] += 1.0
    assert schedule.played == log2ceil(n) and len(set(byes)) == len(byes) == log2ceil(n) * (n % 2)
    assert np.allclose(schedule.points, points)
    assert points.sum() == pytest.approx(log2ceil(n) * math.ceil(n / 2))  # one point per match and per bye
    buchholz = [sum(points[o] for o in met[p]) for p in range(n)]
    keys = [(round(points[p], 9), round(buchholz[p], 9)) for p in range(n)]
    scores = schedule.scores()
    for i, k in itertools.permutations(range(n), 2):
        assert (scores[i] > scores[k]) == (keys[i] > keys[k])


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17])
def test_swiss_with_drawn_games_never_pairs_a_rematch(n):
    """All ties: the standings never move, so pairing by standings alone would replay round 1's pairs."""
    schedule = Swiss(n)
    rounds = play(schedule, [0.5])
    pairs = [frozenset((m.first, m.second)) for r in rounds for m, _ in r]
    assert len(pairs) == len(set(pairs)) == n // 2 * log2ceil(n)


@PROPERTY
@given(n=st.integers(2, 12), rounds=st.integers(1, 11), seed=SEEDS, outcomes=OUTCOMES)
def test_swiss_with_more_rounds_never_rematches_or_says_why(n, rounds, seed, outcomes):
    """Up to N − 1 rounds are accepted; when the standings leave no rematch-free pairing the schedule says
    so (ValueError naming the round) instead of pairing a rematch."""
    rounds = min(rounds, n - 1)
    schedule = Swiss(n, rounds=rounds, order=np.random.default_rng(seed).permutation(n).tolist())
    try:
        played = len(play(schedule, outcomes))
    except ValueError as err:
        assert "without a rematch" in str(err)
    else:
        assert played == rounds
    history = schedule.tally.history
    pairs = [frozenset(h[:2]) for h in history]
    assert len(pairs) == len(set(pairs))


def own_win_rates(n: int, history: Sequence[tuple[int, int, float]]) -> np.ndarray:
    """Each player's mean outcome over its own matches (½ before any), recomputed from the history."""
    won, played = np.zeros(n), np.zeros(n)
    for i, j, y in history:
        won[[i, j]] += (y, 1.0 - y)
        played[[i, j]] += 1
    return np.where(played > 0, won / np.maximum(played, 1), 0.5)


@PROPERTY
@given(n=SIZES, seed=SEEDS, outcomes=OUTCOMES, leaderboard=st.sampled_from(["winrate", "bt"]))
def test_live_trace_meets_current_best_worst_and_median(n, seed, outcomes, leaderboard):
    """Trace arrival[r] arrives in round r (r ≥ 1) and meets the distinct best, worst and median (position
    ⌊k/2⌋, best first) of the k traces already scored, by the leaderboard at that moment (win-rate over its own
    matches, Reasoning Arena's; or Bradley–Terry β, ours), equal keys in arrival order: min(k, 3) matches,
    3N − 6 in all for N ≥ 3; nobody is judged before it arrives."""
    arrival = np.random.default_rng(seed).permutation(n).tolist()
    schedule = LiveTrace(n, arrival=arrival, leaderboard=leaderboard)
    arrived = iter(range(1, n))

    def check_round(matches: list[Match]) -> None:
        k = next(arrived)
        key = own_win_rates(n, schedule.tally.history) if leaderboard == "winrate" else schedule.scores()
        ranked = sorted(arrival[:k], key=lambda p: -key[p])
        assert all(m.first == arrival[k] for m in matches)
        assert [m.second for m in matches] == list(dict.fromkeys([ranked[0], ranked[-1], ranked[k // 2]]))
        assert len(matches) == min(k, 3)

    rounds = play(schedule, outcomes, before_round=check_round)
    assert len(rounds) == max(n - 1, 0) and next(arrived, None) is None
    beta = schedule.scores()
    assert beta.shape == (n,) and np.isfinite(beta).all() and abs(beta.sum()) < 1e-6


@PROPERTY
@given(n=SIZES, seed=SEEDS, n_principles=st.integers(1, 5), outcomes=OUTCOMES)
def test_constitutional_bracket_pairs_off_in_order_with_byes_to_the_odd_one_out(n, seed, n_principles, outcomes):
    """Round 1 pairs the seeded draw off in order; winners keep their order, the odd one out (last) gets a bye
    and advances; ⌈N/2^r⌉ players after r rounds; no rematch; one principle in range per match;
    score = rounds survived / ⌈log2 N⌉: the champion (winner of the final) 1, everyone else (its elimination
    round − 1)/⌈log2 N⌉; a lone player is champion with score 1 and no match."""
    schedule = ConstitutionalBracket(n, n_principles, seed=seed)
    draw = list(schedule.draw)
    assert sorted(draw) == list(range(n))
    rounds = play(schedule, outcomes)
    depth, scores = log2ceil(n), schedule.scores()
    alive = draw
    for matches in rounds:
        assert [p for m, _ in matches for p in (m.first, m.second)] == alive[: len(alive) // 2 * 2]
        assert all(0 <= m.principle < n_principles for m, _ in matches)
        alive = [winner_of(m, y, scores) for m, y in matches] + alive[len(alive) // 2 * 2 :]
    assert len(alive) == 1 and [len(r) for r in rounds] == [math.ceil(n / 2**r) // 2 for r in range(depth)]
    pairs = [frozenset((m.first, m.second)) for r in rounds for m, _ in r]
    assert len(pairs) == len(set(pairs))
    last = last_round(rounds, n)
    champion = alive[0]
    expected = np.where(np.arange(n) == champion, 1.0, (last - 1) / max(depth, 1))
    assert np.allclose(scores, expected)


@pytest.mark.parametrize(
    "make",
    [
        lambda seed: SingleElimination(2, seed=seed),
        lambda seed: DoubleElimination(2, seed=seed),
        lambda seed: ConstitutionalBracket(2, n_principles=1, seed=seed),
    ],
    ids=["single_elimination", "double_elimination", "constitutional"],
)
def test_an_exact_tie_in_an_elimination_match_goes_by_a_seeded_coin(make):
    """Two players, every match ½: the champion is a coin flip, so over 40 seeds both players win some
    brackets (all-first or all-second has probability 2·2⁻⁴⁰), and the same seed always picks the same one."""

    def champion(seed: int) -> int:
        schedule = make(seed)
        play(schedule, [0.5])
        return int(np.argmax(schedule.scores()))

    champions = [champion(seed) for seed in range(40)]
    assert set(champions) == {0, 1}
    assert champions == [champion(seed) for seed in range(40)]


@pytest.mark.parametrize("kind", [LiveTrace, TraceRoundRobin])
def test_trace_tournaments_use_the_documented_margin_and_strength(kind):
    """m ∈ (½, 1] (m = 1 is a hard label, m = ½ would erase every verdict); defaults m = 0.9, λ = 0.1."""
    for bad in (0.5, 0.2, 1.01):
        with pytest.raises(ValueError, match="soft margin"):
            kind(4, margin=bad)
    outcomes = [1.0, 0.0, 0.5, 1.0, 1.0, 0.0]
    default, explicit, other = kind(4), kind(4, margin=0.9, l2=0.1), kind(4, margin=1.0, l2=1.0)
    for schedule in (default, explicit, other):
        play(schedule, outcomes)
    assert np.array_equal(default.scores(), explicit.scores())
    assert not np.allclose(default.scores(), other.scores())


# --- verdict cache ---------------------------------------------------------------------------------------

TEXTS = st.text(max_size=6)
IMAGES = st.one_of(st.none(), st.text(min_size=1, max_size=4))


def pair_request(
    pid: str, text: str, rubric: str | None, first: str, second: str, first_image: str | None, second_image: str | None
) -> PairRequest:
    prompt = Prompt(pid, text, fields={} if rubric is None else {"rubric": rubric})
    return PairRequest(prompt, first, second, first_image, second_image)


REQUESTS = st.builds(pair_request, TEXTS, TEXTS, st.one_of(st.none(), TEXTS), TEXTS, TEXTS, IMAGES, IMAGES)


def field_value(identity: str, request: PairRequest, field: str):
    if field == "identity":
        return identity
    if field == "prompt_text":
        return request.prompt.text
    if field == "rubric":
        return request.prompt.fields.get("rubric", "")
    return getattr(request, field)


def changed(request: PairRequest, field: str, value) -> PairRequest:
    prompt = request.prompt
    if field in ("prompt_text", "rubric"):
        text = value if field == "prompt_text" else prompt.text
        rubric = value if field == "rubric" else prompt.fields.get("rubric")
        return pair_request(
            prompt.id, text, rubric, request.first, request.second, request.first_image, request.second_image
        )
    return PairRequest(**{**request.__dict__, field: value})


@PROPERTY
@given(
    identity=TEXTS,
    request=REQUESTS,
    field=st.sampled_from(["identity", "prompt_text", "rubric", "first", "second", "first_image", "second_image"]),
    value=st.one_of(st.none(), TEXTS),
)
@example(
    identity="j", request=PairRequest(Prompt("p", "Tell a joke."), "a", "b"), field="prompt_text", value="Sum 2+2."
)
def test_every_field_of_the_question_changes_the_verdict_key(identity, request, field, value):
    """Judge identity (model, template name + hash, generation settings), prompt text, rubric (the criteria
    the judge is shown), each response, each image: change one and the key changes. (None and '' are the
    same image: no image; no rubric and '' are the same criteria.)"""
    old = field_value(identity, request, field)
    if field in ("first_image", "second_image"):
        if (old or None) == (value or None):
            return
    elif value is None or value == old:
        return
    key = cache_key(identity, request)[0]
    other = cache_key(value, request) if field == "identity" else cache_key(identity, changed(request, field, value))
    assert other[0] != key
    assert cache_key(identity, request)[0] == key  # and it is a function of the question only


@PROPERTY
@given(identity=TEXTS, request=REQUESTS)
def test_the_shown_order_is_part_of_the_verdict_key(identity, request):
    swapped = PairRequest(request.prompt, request.second, request.first, request.second_image, request.first_image)
    if (request.first, request.first_image or None) == (request.second, request.second_image or None):
        return  # the same response twice: both orders are one question
    key, flipped = cache_key(identity, request)
    swapped_key, swapped_flipped = cache_key(identity, swapped)
    assert key != swapped_key and flipped != swapped_flipped


class PositionalJudge:
    """A deterministic judge whose verdict depends on everything the cache keys on (prompt text, rubric, both
    responses, the order shown, both images) and not on the prompt id; p_first ∈ {0, ¼, ½, ¾, 1}, with
    p(a, b) ≠ 1 − p(b, a) in general, the way a position-biased judge answers."""

    def __init__(self) -> None:
        self.asked: list[PairRequest] = []

    @staticmethod
    def verdict(r: PairRequest) -> float:
        blob = repr(
            (
                r.prompt.text,
                r.prompt.fields.get("rubric", ""),
                r.first,
                r.second,
                r.first_image or "",
                r.second_image or "",
            )
        ).encode()
        return hashlib.sha256(blob).digest()[0] % 5 / 4

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        self.asked += requests
        return [Verdict(self.verdict(r)) for r in requests]

    def score(self, requests):
        raise NotImplementedError

    def drain_metrics(self) -> dict[str, float]:
        return {"calls": float(len(self.asked))}


SMALL_REQUESTS = st.builds(
    pair_request,
    st.just("p"),
    st.sampled_from(["Tell a joke.", "Sum 2+2."]),
    st.sampled_from([None, "Funnier wins."]),
    st.sampled_from(["x", "y", "z"]),
    st.sampled_from(["x", "y", "z"]),
    st.sampled_from([None, "page1.png"]),
    st.sampled_from([None, "page2.png"]),
)


def question(r: PairRequest) -> tuple:
    rubric = r.prompt.fields.get("rubric", "")
    return r.prompt.text, rubric, r.first, r.first_image or "", r.second, r.second_image or ""


@PROPERTY
@given(
    batches=st.lists(st.lists(SMALL_REQUESTS, min_size=1, max_size=8), min_size=1, max_size=3), chunk=st.integers(1, 4)
)
def test_a_cache_answers_exactly_what_its_judge_would(batches, chunk):
    """Any sequence of batches through a cache gives the judge's own verdicts (a key shared by two different
    questions would hand one of them the other's verdict), the judge is asked each distinct question once,
    and a restarted cache on the same file answers everything without asking."""
    with tempfile.TemporaryDirectory() as folder:
        judge = PositionalJudge()
        cache = VerdictCache(judge, Path(folder) / "v.sqlite", "judge|tmpl@abc|gen", chunk=chunk)
        for batch in batches:
            assert [v.p_first for v in cache.compare(batch)] == [judge.verdict(r) for r in batch]
        everything = [r for b in batches for r in b]
        assert len(judge.asked) == len({question(r) for r in everything})
        cache.close()
        restarted, fresh = PositionalJudge(), None
        fresh = VerdictCache(restarted, Path(folder) / "v.sqlite", "judge|tmpl@abc|gen")
        answers = fresh.compare(everything)
        assert [v.p_first for v in answers] == [judge.verdict(r) for r in everything]
        assert restarted.asked == [] and all(v.cached for v in answers)
        fresh.close()


def test_two_prompts_with_the_same_pair_are_two_questions(tmp_path):
    """The same two responses under different prompts are judged separately, through the public cache API."""
    inner = ScriptedJudge()
    cache = VerdictCache(inner, tmp_path / "v.sqlite", "judge|v1")
    pair = ("q=2 the same answer", "q=1 the same other answer")
    first = cache.compare([PairRequest(Prompt("p1", "Tell a joke."), *pair)])
    second = cache.compare([PairRequest(Prompt("p2", "Explain taxes."), *pair)])
    again = cache.compare([PairRequest(Prompt("p1", "Tell a joke."), *pair)])
    assert [first[0].cached, second[0].cached, again[0].cached] == [False, False, True]
    assert len(inner.requests) == 2 and len(cache) == 2


def test_judge_identity_and_shown_order_separate_verdicts(tmp_path):
    """Two judges (model or template differ) sharing one cache file never see each other's verdicts; asking
    the other order is another question (position-bias cancellation needs two real answers)."""
    request = PairRequest(Prompt("p", "Tell a joke."), "q=2 a", "q=1 b")
    path = tmp_path / "v.sqlite"
    judge_a = ScriptedJudge({("q=2 a", "q=1 b"): 0.75, ("q=1 b", "q=2 a"): 0.5})
    cache_a = VerdictCache(judge_a, path, "model-a|generic_pairwise_v1@111|gen0")
    assert cache_a.compare([request])[0].p_first == 0.75
    swapped = PairRequest(request.prompt, request.second, request.first)
    assert cache_a.compare([swapped])[0].p_first == 0.5 and len(judge_a.requests) == 2
    judge_b = ScriptedJudge({("q=2 a", "q=1 b"): 0.25})
    for identity in (
        "model-b|generic_pairwise_v1@111|gen0",
        "model-a|generic_pairwise_v1@222|gen0",
        "model-a|generic_pairwise_v1@111|gen1",
    ):
        answer = VerdictCache(judge_b, path, identity).compare([request])[0]
        assert answer.p_first == 0.25 and not answer.cached


def openai_identity(**settings) -> str:
    from tsrl.remote.openai_judge import OpenAIJudge, OpenAIJudgeConfig

    judge = OpenAIJudge(
        OpenAIJudgeConfig(api_key_env="", preflight=False, **{"constrain": "off", **settings}), NumberTask()
    )
    try:
        return judge.identity
    finally:
        judge.close()


def test_openai_judge_identity_names_model_template_and_generation_settings(tmp_path):
    """The identity the cache is keyed on changes with the model, the template (name and content), every
    generation setting sent with a request, the vision switch (whether the judge sees the images) and the form."""
    template = (Path(__file__).parents[3] / "tsrl/judging/prompts/generic_pairwise_v1.txt").read_text()
    edited = tmp_path / "edited" / "generic_pairwise_v1.txt"
    edited.parent.mkdir()
    edited.write_text(template.replace("\n---user---\n", "\nBe strict.\n---user---\n"))
    variants = [
        {},
        {"model": "other"},
        {"template": "humor_pairwise_v1"},
        {"template": str(edited)},
        {"temperature": 0.7},
        {"max_tokens": 32},
        {"logprobs": False},
        {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}},
        {"vision": True},
        {"form": "direct"},
    ]
    identities = [openai_identity(**v) for v in variants]
    assert len(set(identities)) == len(variants)


def test_the_rubric_shown_to_the_judge_is_part_of_the_verdict_key():
    """Two prompts with the same text but different rubrics are different questions (the rubric is rendered
    as the criteria of the pairwise prompt by the openai and hf_local judges)."""
    pair = ("a joke", "another joke")
    funny = PairRequest(Prompt("p", "Tell a joke.", fields={"rubric": "Funnier wins."}), *pair)
    short = PairRequest(Prompt("p", "Tell a joke.", fields={"rubric": "Shorter wins."}), *pair)
    assert cache_key("judge|v1", funny)[0] != cache_key("judge|v1", short)[0]
