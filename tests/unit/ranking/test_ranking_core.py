"""Batched Bradley–Terry, Elo and the tournament schedules (pure functions, deterministic judges)."""

import math

import numpy as np
import pytest

from tsrl.ranking import (
    TOPOLOGIES,
    AnchorBased,
    ConstitutionalBracket,
    DoubleElimination,
    LiveTrace,
    RoundRobin,
    SingleElimination,
    Swiss,
    bracket_order,
    elo_ratings,
    fit_bradley_terry,
    fit_bradley_terry_batch,
    pad_matches,
    rank_rewards,
    ranks,
    run_schedules,
)


def random_groups(count, n, m, seed):
    rng = np.random.default_rng(seed)
    groups = []
    for _ in range(count):
        i = rng.integers(0, n, m)
        j = (i + rng.integers(1, n, m)) % n
        groups.append(np.column_stack([i, j, rng.choice([0.0, 0.5, 1.0, 0.8], m)]))
    return groups


def test_batched_fit_equals_per_group_fit():
    """Same strictly convex objective: Newton and L-BFGS-B reach the same minimiser (L-BFGS-B stops at
    ~1e-5 gradient, hence the tolerance)."""
    groups = random_groups(20, 6, 18, seed=0) + [np.array([[0, 1, 1.0]] * 5)]  # a one-sided group too
    batched = fit_bradley_terry_batch(6, *pad_matches(groups), l2=0.1)
    single = np.stack([fit_bradley_terry(6, g, l2=0.1) for g in groups])
    assert np.abs(batched - single).max() < 1e-4


def test_batched_fit_handles_padding_and_empty_groups():
    groups = [np.array([[0, 1, 1.0], [1, 2, 1.0]]), np.zeros((0, 3))]
    beta = fit_bradley_terry_batch(3, *pad_matches(groups), l2=0.1)
    assert beta[0, 0] > beta[0, 1] > beta[0, 2]
    assert np.allclose(beta[1], 0.0)


def test_mirror_equals_doubled_data_weight_and_is_order_independent():
    rows = [(0, 1, 1.0), (1, 2, 0.5), (2, 0, 0.0), (0, 2, 0.9)]
    swapped = [(j, i, 1.0 - y) for i, j, y in rows]
    mirrored = fit_bradley_terry_batch(3, np.array([rows]), l2=0.2)
    assert np.allclose(mirrored, fit_bradley_terry_batch(3, np.array([swapped]), l2=0.2), atol=1e-9)
    assert np.allclose(mirrored, fit_bradley_terry_batch(3, np.array([rows]), l2=0.1, mirror=False), atol=1e-9)
    assert not np.allclose(mirrored, fit_bradley_terry_batch(3, np.array([rows]), l2=0.2, mirror=False))


def test_batched_fit_rejects_bad_input():
    with pytest.raises(ValueError, match="must lie in"):
        fit_bradley_terry_batch(2, np.array([[[0, 1, 1.5]]]))
    with pytest.raises(ValueError, match="indices"):
        fit_bradley_terry_batch(2, np.array([[[0, 3, 1.0]]]))


def test_elo_orders_a_transitive_round_robin_and_is_seeded():
    rows = [(i, j, float(i < j)) for i in range(5) for j in range(5) if i != j]
    r = elo_ratings(5, rows, k_factor=16, seed=3)
    assert list(np.argsort(-r)) == [0, 1, 2, 3, 4]
    assert np.allclose(r, elo_ratings(5, rows, k_factor=16, seed=3))
    assert abs(r.sum()) < 1e-9
    single = elo_ratings(2, [(0, 1, 1.0)], k_factor=32, permutations=1)
    assert single[0] - single[1] == pytest.approx(32.0)  # one win from equal ratings: ±K·½ each


def ask_by_strength(strengths, log=None):
    """A perfect judge: the stronger player wins; ½ on equal strength."""

    def ask(batch):
        if log is not None:
            log.append(batch)
        out = []
        for s, m in batch:
            a, b = strengths[s][m.first], strengths[s][m.second]
            out.append(0.5 if a == b else float(a > b))
        return out

    return ask


def calls(schedule, strengths):
    log = []
    run_schedules([schedule], ask_by_strength([strengths], log))
    return sum(len(b) for b in log), len(log)


@pytest.mark.parametrize("n", [2, 3, 5, 8, 11, 16])
def test_call_counts_per_topology(n):
    q = np.random.default_rng(n).permutation(n).astype(float)
    assert calls(RoundRobin(n), q)[0] == n * (n - 1) // 2
    assert calls(AnchorBased(n), q)[0] == n - 1
    seeding = n - 1 if n > 2 else 0
    assert calls(SingleElimination(n), q) == (seeding + n - 1, (n > 2) + math.ceil(math.log2(n)))
    assert calls(SingleElimination(n, seeded=False), q)[0] == n - 1
    assert calls(DoubleElimination(n), q)[0] == seeding + 2 * n - 2
    assert calls(Swiss(n), q) == ((n // 2) * math.ceil(math.log2(n)), math.ceil(math.log2(n)))
    live = LiveTrace(n)
    assert calls(live, q)[0] == sum(min(t, 3) for t in range(n))  # ≤ 3 per trace


def test_live_tournament_never_exceeds_three_matches_per_trace():
    log = []
    run_schedules([LiveTrace(12, arrival=list(range(11, -1, -1)))], ask_by_strength([np.arange(12.0)], log))
    assert max(len(b) for b in log) == 3
    for batch in log:
        assert len({m.first for _, m in batch}) == 1  # one arriving trace per round


def test_bracket_order_and_byes_go_to_top_seeds():
    assert bracket_order(8) == [1, 8, 4, 5, 2, 7, 3, 6]
    assert bracket_order(4) == [1, 4, 2, 3]
    q = np.array([3.0, 0.0, 1.0, 2.0, 4.0, 5.0])  # the seeding pass vs player 0 puts 4 and 5 on top
    log = []
    schedule = SingleElimination(6)
    run_schedules([schedule], ask_by_strength([q], log))
    first_bracket_round = {frozenset((m.first, m.second)) for _, m in log[1]}
    assert len(first_bracket_round) == 2  # 6 players in a bracket of 8: the top two seeds have byes
    assert all(5 not in pair and 4 not in pair for pair in first_bracket_round)
    assert schedule.survived[5] == 3 and ranks(schedule.scores())[5] == 0


@pytest.mark.parametrize("make", list(TOPOLOGIES))
def test_perfect_judge_puts_the_best_player_first(make):
    """A noiseless judge: every topology puts the strongest player at the top (anchor-based only knows who
    beat the anchor, so there it shares the top with the others that did; circular only who beat both neighbours)."""
    q = np.array([0.0, 3.0, 7.0, 1.0, 5.0, 2.0, 6.0, 4.0])
    schedule = TOPOLOGIES[make](8, 1)
    run_schedules([schedule], ask_by_strength([q]))
    scores = schedule.scores()
    assert scores[2] == scores.max()
    assert make in ("anchor", "circular") or ranks(scores)[2] == 0


def test_double_elimination_champion_can_come_from_the_losers_bracket():
    def ask(batch):  # player 1 wins everything except its very first match
        return [
            1.0
            if m.first == 1 and len(seen) > 1
            else 0.0
            if m.second == 1 and len(seen) > 1
            else float(m.first < m.second)
            for s, m in batch
            if not seen.append(1) or True
        ]

    seen = []
    schedule = DoubleElimination(4, seeded=False)
    run_schedules([schedule], ask)
    assert len(schedule.tally.history) == 2 * 4 - 2
    assert np.isinf(schedule.out_round).sum() == 1


def test_swiss_never_repeats_pairs_and_leaves_callers_list_untouched():
    order = [4, 2, 0, 6, 1, 3, 5]
    before = list(order)
    q = np.array([0.3, 0.9, 0.1, 0.5, 0.7, 0.2, 0.8])
    schedule = Swiss(7, order=order, rounds=3)
    run_schedules([schedule], ask_by_strength([q]))
    assert order == before
    pairs = [frozenset(h[:2]) for h in schedule.tally.history]
    assert len(pairs) == len(set(pairs)) == 3 * 3
    assert len(schedule.had_bye) == 3  # odd N: one bye per round, never twice to the same player
    # results credited to the right players: points are the wins each player actually earned (+1 per bye)
    wins = np.zeros(7)
    for i, j, y in schedule.tally.history:
        wins[i] += y
        wins[j] += 1 - y
    assert np.allclose(schedule.points - wins, [1.0 if p in schedule.had_bye else 0.0 for p in range(7)])


def test_swiss_rejects_more_rounds_than_opponents():
    with pytest.raises(ValueError, match="at most 3 rounds"):
        Swiss(4, rounds=4)


def test_constitutional_bracket_rewards_wins_over_rounds_with_byes_as_wins():
    q = np.arange(5.0)
    schedule = ConstitutionalBracket(5, n_principles=3, seed=2)
    log = []
    run_schedules([schedule], ask_by_strength([q], log))
    assert sum(len(b) for b in log) == 4  # N − 1 matches
    assert all(0 <= m.principle < 3 for b in log for _, m in b)
    scores = schedule.scores()
    assert scores[4] == 1.0  # the champion won all ⌈log2 5⌉ = 3 rounds
    assert scores.sum() * 3 == pytest.approx(4 + 2)  # 4 match wins + 2 byes (5 players, then 3: odd one out)


def test_rank_rewards_standardise_and_share_ties():
    r = rank_rewards(np.array([3.0, 1.0, 1.0, 0.0]))
    assert r[1] == r[2] and r[0] > r[1] > r[3]
    assert abs(r.mean()) < 1e-12 and r.std() == pytest.approx(1.0)
    assert np.allclose(rank_rewards(np.ones(4)), 0.0)


class EndlessSchedule:
    """A broken schedule: it asks the same match every round and never finishes (after 50 rounds it fails the
    test itself, so a driver without the guard fails instead of hanging)."""

    def __init__(self):
        self.asked = 0

    def next_round(self):
        self.asked += 1
        assert self.asked <= 50, "run_schedules did not stop a schedule that never finishes"
        return [RoundRobin(2).next_round()[0]]

    def record(self, outcomes):
        pass

    def scores(self):
        return np.zeros(2)


def test_a_schedule_that_never_finishes_is_stopped_with_its_name():
    asked = []
    with pytest.raises(RuntimeError, match="EndlessSchedule still has matches after 7 rounds"):
        run_schedules([EndlessSchedule()], lambda batch: asked.append(batch) or [1.0] * len(batch), max_rounds=7)
    assert len(asked) == 7


@pytest.mark.parametrize("name", sorted(TOPOLOGIES) + ["live", "constitutional"])
def test_every_schedule_finishes_within_n_plus_three_rounds(name):
    """What `MAX_ROUNDS` relies on: the longest schedule (double elimination) needs N + 3 rounds at most."""
    rng = np.random.default_rng(0)
    for n in range(2, 33):
        schedule = (
            LiveTrace(n, arrival=list(range(n)))
            if name == "live"
            else ConstitutionalBracket(n, 1, seed=n)
            if name == "constitutional"
            else TOPOLOGIES[name](n, n)
        )
        rounds = run_schedules([schedule], lambda batch: (rng.random(len(batch)) < 0.5).astype(float).tolist())
        assert rounds <= n + 3, (name, n, rounds)
