"""The tournament regimes behave as their papers describe them: TSRL's in-batch rank baseline, the
cai-tournament constitutional bracket, Reasoning Arena's non-live trace round-robin and ArenaRL's greedy
anchor. Real fakes only: NumberTask (quality = the q number in the text) and ScriptedJudge (the larger q
wins unless its table says otherwise)."""

import math

import numpy as np
import pytest

import tsrl.ranking as ranking
from tsrl.errors import ConfigError
from tsrl.ranking import TOPOLOGIES, ConstitutionalBracket, LiveTrace, fit_bradley_terry, run_schedules
from tsrl.rewards import AdaptiveConfig, ArenaConfig, ConstitutionalConfig, InBatchConfig, RegimeContext, build_regime
from tsrl.testing.fakes import ScriptedJudge, VerifiedNumberTask, number_prompt
from tsrl.types import Group, Rollout

P0 = number_prompt("p0", [3, 1, 2, 0])


def group(qualities, prompt=P0):
    return texts_group([f"q={q} sample {k}" for k, q in enumerate(qualities)], prompt)


def texts_group(texts, prompt=P0):
    return Group(prompt, [1], [Rollout(t, [1], [0.0], False) for t in texts])


def make(cfg, tmp_path, judge=None):
    judge = judge or ScriptedJudge()
    task = VerifiedNumberTask([number_prompt("p0", [3, 1, 2, 0])])
    return build_regime(cfg, RegimeContext(task, judge, "scripted", tmp_path / "run")), judge


def by_strength(q, log):
    """A noiseless judge for run_schedules: the larger q wins, equal q ties; logs every round."""

    def ask(batch):
        log.append([m for _, m in batch])
        return [0.5 if q[m.first] == q[m.second] else float(q[m.first] > q[m.second]) for _, m in batch]

    return ask


# ---- 1. in_batch: the rank of a completion in its group's round-robin -------------------------------


def test_in_batch_rewards_the_rank_not_the_win_rate(tmp_path):
    """A soft verdict (q=2 beats q=1 only with p = 0.6) separates the two: win-rates 0, 0.7, 0.8 but
    ranks 2, 1, 0, so rewards 1 − rank/(G−1) = 0, ½, 1 — unstandardised (the trainer centres them)."""
    soft = ScriptedJudge({("q=1 sample 1", "q=2 sample 2"): 0.4})
    regime, judge = make(InBatchConfig(), tmp_path, soft)
    batch = regime.score([group([0, 1, 2])])
    assert batch.rewards[0].tolist() == pytest.approx([0.0, 0.5, 1.0])
    assert len(judge.requests) == 3 and batch.metrics["tournament/top_winrate"] == pytest.approx(0.8)
    regime, _ = make(InBatchConfig(output="winrate"), tmp_path, ScriptedJudge(dict(soft.table)))
    assert regime.score([group([0, 1, 2])]).rewards[0].tolist() == pytest.approx([0.0, 0.7, 0.8])


def test_in_batch_ties_share_the_average_rank_and_bad_output_is_named(tmp_path):
    """q=0 upsets q=3: win-rates ⅓, ⅓, ⅔, ⅔, so ranks 2.5, 2.5, 0.5, 0.5 and rewards 1 − rank/3."""
    regime, _ = make(InBatchConfig(), tmp_path, ScriptedJudge({("q=0 sample 0", "q=3 sample 3"): 1.0}))
    batch = regime.score([group([0, 1, 2, 3])])
    assert batch.rewards[0].tolist() == pytest.approx([1 / 6, 1 / 6, 5 / 6, 5 / 6])
    with pytest.raises(ConfigError, match="reward.output='elo' is unknown; choose one of rank, winrate"):
        InBatchConfig(output="elo")


# ---- 2. constitutional: pair-off byes, independent coherence check, G = 1 ---------------------------


def test_constitutional_bracket_pairs_off_in_order_and_gives_the_odd_one_out_a_bye():
    """G = 6: 3 + 1 + 1 matches; round 2 has three players, so the third (the winner of draw[4] v draw[5])
    gets the bye. No padding to 8 slots, hence no bye in round 1."""
    q = np.array([5.0, 0.0, 3.0, 1.0, 4.0, 2.0])
    schedule, log = ConstitutionalBracket(6, n_principles=2, seed=7), []
    run_schedules([schedule], by_strength(q, log))
    assert [len(r) for r in log] == [3, 1, 1]
    d = schedule.draw
    assert sorted(d) == list(range(6))
    assert [(m.first, m.second) for m in log[0]] == [(d[0], d[1]), (d[2], d[3]), (d[4], d[5])]
    third = max(d[4], d[5], key=lambda p: q[p])
    assert schedule.byes == [third] and third in (log[2][0].first, log[2][0].second)
    assert schedule.rounds == 3 and schedule.scores()[0] == 1.0  # player 0 (q = 5) won 3 of 3 rounds
    assert schedule.scores().sum() * 3 == pytest.approx(5 + 1)  # G − 1 match wins + 1 bye


def test_constitutional_bracket_with_five_players_gives_the_last_drawn_two_byes():
    """G = 5: round 1 pairs d0–d1 and d2–d3, d4 sits out; round 2 has three players and d4 is again the
    last; the final is d4 against the round-2 winner. 2 + 1 + 1 = G − 1 matches in ⌈log2 5⌉ = 3 rounds."""
    q = np.arange(5.0)
    schedule, log = ConstitutionalBracket(5, n_principles=3, seed=1), []
    run_schedules([schedule], by_strength(q, log))
    d = schedule.draw
    assert [len(r) for r in log] == [2, 1, 1]
    assert schedule.byes == [d[4], d[4]] and d[4] in (log[2][0].first, log[2][0].second)
    assert all(0 <= m.principle < 3 for r in log for m in r)
    assert schedule.scores()[4] == 1.0 and schedule.scores().sum() * 3 == pytest.approx(4 + 2)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 9, 12, 16, 17])
def test_constitutional_bracket_plays_g_minus_1_matches_in_ceil_log2_g_rounds(n):
    q = np.random.default_rng(n).permutation(n).astype(float)
    schedule, log = ConstitutionalBracket(n, n_principles=1, seed=n), []
    run_schedules([schedule], by_strength(q, log))
    assert sum(len(r) for r in log) == n - 1
    assert len(log) == schedule.rounds == math.ceil(math.log2(n))
    assert schedule.scores()[np.argmax(q)] == 1.0 and schedule.scores().max() == 1.0


def test_constitutional_coherence_check_does_not_touch_the_bracket(tmp_path):
    """The incoherent completion (q = 9, repeated) plays and wins every match it meets; only afterwards is
    its reward set to 0. All G − 1 = 3 matches are judged; the other three share the one remaining match
    win over 2 rounds, so their rewards sum to ½ whatever the draw."""
    cfg = ConstitutionalConfig(coherence_min_distinct=0.5)
    regime, judge = make(cfg, tmp_path)
    texts = ["q=2 a", "q=4 b", "q=9 q=9 q=9 q=9", "q=1 c"]
    batch = regime.score([texts_group(texts)])
    assert len(judge.requests) == 3 and batch.metrics["reward/comparisons_per_sample"] == 3 / 4
    assert sum(texts[2] in (r.first, r.second) for r in judge.requests) == 2
    assert batch.rewards[0][2] == 0.0 and batch.rewards[0].sum() == pytest.approx(0.5)
    assert batch.metrics["constitutional/vetoed_frac"] == 0.25


def test_constitutional_single_completion_is_the_champion_without_a_judge_call(tmp_path):
    regime, judge = make(ConstitutionalConfig(), tmp_path)
    batch = regime.score([texts_group(["q=1 alone"])])
    assert batch.rewards[0].tolist() == [1.0] and judge.requests == []


# ---- 3. adaptive: the paper's non-live trace round-robin --------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 6, 9])
def test_trace_round_robin_judges_every_pair_once_in_one_round(n):
    q = np.random.default_rng(n).permutation(n).astype(float)
    schedule, log = ranking.TraceRoundRobin(n, margin=0.8, l2=0.3), []
    run_schedules([schedule], by_strength(q, log))
    assert [len(r) for r in log] == [n * (n - 1) // 2]
    assert len(schedule.tally.history) == n * (n - 1) // 2
    assert list(np.argsort(-schedule.scores())) == list(np.argsort(-q))


def test_trace_round_robin_fits_soft_margin_outcomes_with_the_same_l2():
    """Strengths equal an independent L-BFGS-B fit of the soft rows y ∈ {m, ½, 1 − m} (mirrored, same λ);
    L-BFGS-B stops near 1e-5 gradient, hence the tolerance."""
    q = np.array([2.0, 0.0, 1.0, 1.0])
    schedule = ranking.TraceRoundRobin(4, margin=0.8, l2=0.3)
    run_schedules([schedule], by_strength(q, []))
    soft = [(i, j, 0.5 if q[i] == q[j] else (0.8 if q[i] > q[j] else 0.2)) for i in range(4) for j in range(i + 1, 4)]
    assert np.abs(schedule.scores() - fit_bradley_terry(4, soft, l2=0.3)).max() < 1e-4
    with pytest.raises(ValueError, match="soft margin"):
        ranking.TraceRoundRobin(3, margin=0.4)


def test_adaptive_round_robin_tournament_judges_all_pairs_and_ranks_by_strength(tmp_path):
    """A group the verifier cannot separate (every q < 2): round_robin asks G(G−1)/2 = 15 matches (the live
    tournament Σ min(t, 3) = 12) and its min–max β spans [0, 1] in the order of q."""
    qualities = [0.1, 0.7, 0.5, 0.3, 1.5, 0.9]
    regime, judge = make(AdaptiveConfig(tournament="round_robin"), tmp_path)
    batch = regime.score([group(qualities)])
    assert batch.metrics["route/tournament"] == 1 and len(judge.requests) == 15
    r = batch.rewards[0]
    assert r.min() == 0.0 and r.max() == 1.0
    assert list(np.argsort(-r)) == list(np.argsort(-np.array(qualities)))
    live, live_judge = make(AdaptiveConfig(), tmp_path)
    live.score([group(qualities)])
    assert len(live_judge.requests) == 12
    with pytest.raises(ConfigError, match="reward.tournament='swiss' is unknown; choose one of live, round_rob"):
        AdaptiveConfig(tournament="swiss")


def test_live_trace_call_count_is_below_the_round_robin_from_g_5():
    for n in (5, 8):
        live, rr = LiveTrace(n), ranking.TraceRoundRobin(n)
        counts = []
        for schedule in (live, rr):
            log = []
            run_schedules([schedule], by_strength(np.arange(float(n)), log))
            counts.append(sum(len(r) for r in log))
        assert counts == [3 * n - 6, n * (n - 1) // 2]


# ---- 4. arena: ArenaRL's greedy anchor ------------------------------------------------------------


@pytest.mark.parametrize("topology", list(TOPOLOGIES))
def test_arena_decodes_sample_0_greedily_exactly_when_the_topology_has_an_anchor(tmp_path, topology):
    anchored = topology in ("anchor", "single_elimination", "double_elimination")
    regime, _ = make(ArenaConfig(topology=topology), tmp_path)
    assert regime.greedy_first is anchored
    off, _ = make(ArenaConfig(topology=topology, greedy_anchor=False), tmp_path)
    assert off.greedy_first is False
    with pytest.raises(AttributeError):
        regime.greedy_first = not anchored
