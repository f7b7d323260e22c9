"""NeMo Gym's circular topology (`reward.topology=circular`): each completion against the next, (i, i+1 mod N), N
matches in one round; score = the mean soft outcome of a player's two matches; reward = the arena's standardised
rank. Checked by hand on N = 4, at the N = 2 edge (the one pair, once in each order) and through the regime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tsrl.config import register_configs
from tsrl.errors import ConfigError
from tsrl.ranking import TOPOLOGIES, Circular, Match, rank_rewards, run_schedules
from tsrl.rewards import ArenaConfig, RegimeContext, build_regime
from tsrl.testing.fakes import ScriptedJudge, VerifiedNumberTask, number_prompt
from tsrl.types import Group, Rollout

P0 = number_prompt("p0", [3, 1, 2, 0])
CONFIGS = Path(__file__).resolve().parents[3] / "configs"


def played(n: int, outcomes: list[float]) -> tuple[Circular, list[list[Match]]]:
    """A circular schedule of n played with the given outcomes (in match order); the rounds it asked."""
    schedule, rounds = Circular(n), []

    def ask(batch):
        rounds.append([m for _, m in batch])
        return outcomes[: len(batch)]

    run_schedules([schedule], ask)
    return schedule, rounds


@pytest.mark.parametrize("n", [3, 4, 5, 8])
def test_circular_plays_n_neighbour_pairs_in_one_round(n):
    _, rounds = played(n, [1.0] * n)
    assert len(rounds) == 1
    assert [(m.first, m.second) for m in rounds[0]] == [(i, (i + 1) % n) for i in range(n)]


def test_circular_scores_by_hand_for_four():
    """Outcomes y of (0,1), (1,2), (2,3), (3,0) = 1, ½, 0, ¼. Player i scores the mean of y(i, i+1) and
    1 − y(i−1, i): 0 → (1 + ¾)/2, 1 → (½ + 0)/2, 2 → (0 + ½)/2, 3 → (¼ + 1)/2. Ranks 0, 2.5, 2.5, 1 (1 and 2
    tie), so r = 1 − rank/3 = 1, ⅙, ⅙, ⅔ before standardising."""
    schedule, _ = played(4, [1.0, 0.5, 0.0, 0.25])
    scores = schedule.scores()
    assert scores.tolist() == pytest.approx([0.875, 0.25, 0.25, 0.625])
    r = np.array([1.0, 1 / 6, 1 / 6, 2 / 3])
    assert rank_rewards(scores) == pytest.approx((r - r.mean()) / r.std())


def test_circular_with_two_plays_the_one_pair_in_both_orders_and_with_one_nothing():
    """N = 2: (0, 1) then (1, 0), as NeMo Gym's rule gives; y = 1 and ½ → 0 scores (1 + ½)/2, 1 scores (½ + 0)/2.
    N = 1: no match, the lone player ½ like every topology's."""
    schedule, rounds = played(2, [1.0, 0.5])
    assert [(m.first, m.second) for m in rounds[0]] == [(0, 1), (1, 0)]
    assert schedule.scores().tolist() == pytest.approx([0.75, 0.25])
    lone, rounds = played(1, [])
    assert rounds == [] and lone.scores().tolist() == [0.5]


def test_arena_accepts_circular_and_asks_g_matches_per_group(tmp_path):
    """reward=arena reward.topology=circular through the registry: G requests per group (one per match with a
    one-call judge), in neighbour order. Qualities 0, 2, 1, 3, 0.5: the matches (0,1) (1,2) (2,3) (3,4) (4,0) give
    y = 0, 1, 0, 1, 1, so the scores are 0, 1, 0, 1, ½ — the two that beat both neighbours tie at the top."""
    assert "circular" in TOPOLOGIES and ArenaConfig(topology="circular").topology == "circular"
    judge = ScriptedJudge()
    regime = build_regime(
        ArenaConfig(topology="circular"), RegimeContext(VerifiedNumberTask([P0]), judge, "scripted", tmp_path)
    )
    texts = [f"q={q} sample {k}" for k, q in enumerate([0, 2, 1, 3, 0.5])]
    groups = [Group(P0, [1], [Rollout(t, [1], [0.0], False) for t in texts])] * 2
    batch = regime.score(groups)
    assert len(judge.requests) == 2 * 5
    asked = [(r.first, r.second) for r in judge.requests[:5]]
    assert asked == [(texts[i], texts[(i + 1) % 5]) for i in range(5)]
    assert batch.rewards[0] == pytest.approx(rank_rewards(np.array([0.0, 1.0, 0.0, 1.0, 0.5])))
    assert batch.rewards[1] == pytest.approx(batch.rewards[0])


def test_the_run_config_accepts_reward_topology_circular():
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = OmegaConf.to_object(compose("config", overrides=["reward=arena", "reward.topology=circular"]))
        assert isinstance(cfg.reward, ArenaConfig) and cfg.reward.topology == "circular"
        with pytest.raises(ConfigError, match="circular"):  # the error lists it among the choices
            OmegaConf.to_object(compose("config", overrides=["reward=arena", "reward.topology=ring"]))
