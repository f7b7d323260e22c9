"""The ladder's three rankings (reward.ranking): Bradley–Terry (the default), Elo and the topological sort of the
comparison graph that TSRL §2.2 names. They agree where the verdicts are transitive; Elo depends on the order of
the matches and Bradley–Terry does not; a cycle still gets an order, by the documented rule (Copeland wins, then
the smaller index)."""

from __future__ import annotations

import numpy as np
import pytest

from tsrl.errors import ConfigError
from tsrl.ranking import elo_ratings, fit_bradley_terry, topological_order, topological_strengths
from tsrl.rewards.ladder import LadderConfig, ladder_strengths, round_robin
from tsrl.types import Anchor, Prompt


def transitive_round_robin(quality: list[int]) -> list[tuple[int, int, float]]:
    """Every pair once; the better anchor wins (hard verdicts)."""
    return [(i, j, 1.0 if quality[i] > quality[j] else 0.0) for i, j in round_robin(len(quality))]


def test_the_three_rankings_agree_on_a_transitive_round_robin():
    quality = [2, 5, 0, 4, 1, 3]
    matches = transitive_round_robin(quality)
    prompt = Prompt("p", "x", anchors=tuple(Anchor(f"a{i}", "") for i in range(len(quality))))
    wanted = sorted(range(len(quality)), key=lambda i: -quality[i])
    for ranking in ("bt", "elo", "topo"):
        (strength,) = ladder_strengths([prompt], {"p": matches}, 0.1, ranking, 16.0)
        assert list(np.argsort(-strength, kind="stable")) == wanted, ranking
    assert topological_order(len(quality), matches) == wanted


def test_elo_depends_on_the_order_of_the_matches_and_bradley_terry_does_not():
    """One pass of Elo over the same six matches in two orders gives different ratings (the last match moves the
    ratings most); the Bradley–Terry fit is a function of the set of matches."""
    matches = [(0, 1, 1.0), (1, 2, 1.0), (2, 0, 1.0), (0, 1, 0.0), (0, 2, 1.0), (1, 2, 0.0)]
    reordered = matches[::-1]
    one = elo_ratings(3, matches, permutations=1, seed=0)
    other = elo_ratings(3, matches, permutations=1, seed=1)
    assert not np.allclose(one, other)
    assert np.allclose(fit_bradley_terry(3, matches), fit_bradley_terry(3, reordered), atol=1e-6)


def test_a_cycle_is_broken_by_copeland_wins_then_by_index():
    """0 ≻ 1 ≻ 2 ≻ 0 and all three beat 3: no topological order exists among 0, 1, 2, each has Copeland score +1,
    so the smaller index goes first; 3 loses everything and comes last. A second match 0 vs 2 that 0 wins makes
    that pair even (mean ½: no edge), the graph acyclic, and the order its topological sort."""
    cycle = [(0, 1, 1.0), (1, 2, 1.0), (2, 0, 1.0), (0, 3, 1.0), (1, 3, 1.0), (2, 3, 1.0)]
    assert topological_order(4, cycle) == [0, 1, 2, 3]
    assert topological_strengths(4, cycle).tolist() == [1.5, 0.5, -0.5, -1.5]
    assert topological_order(4, [*cycle, (0, 2, 1.0)]) == [0, 1, 2, 3]


def test_inside_a_cycle_copeland_wins_go_before_the_index():
    """0 → 1 → 2 → 0, 1 → 3, 2 → 3, 3 → 0: one strongly connected component. Copeland: 1 and 2 +1, 0 and 3 −1, so
    1 goes first (not 0); what is left, 2 → 3 → 0 and 2 → 0, is acyclic and sorts as it is."""
    matches = [(0, 1, 1.0), (1, 2, 1.0), (2, 0, 1.0), (1, 3, 1.0), (2, 3, 1.0), (3, 0, 1.0)]
    assert topological_order(4, matches) == [1, 2, 3, 0]


def test_ladder_config_takes_topo_and_keeps_bradley_terry_as_the_default():
    assert LadderConfig().ranking == "bt" and LadderConfig(ranking="topo").ranking == "topo"
    with pytest.raises(ConfigError, match="bt, elo, topo"):
        LadderConfig(ranking="copeland")
