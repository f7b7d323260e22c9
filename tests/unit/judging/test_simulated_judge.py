import math

import pytest

from tsrl.judging import BothOrders, RubricSimConfig, SimulatedJudge, build_judge
from tsrl.testing.fakes import NumberTask
from tsrl.types import PairRequest, Prompt

PROMPT = Prompt(id="p", text="prompt")


def win_rate(judge, delta: float, n: int = 4000) -> float:
    """Mean p(first) over n distinct pairs whose latent qualities differ by delta."""
    requests = [PairRequest(PROMPT, f"q={delta} #{i}", f"q=0 #{i}") for i in range(n)]
    return sum(v.p_first for v in judge.compare(requests)) / n


def test_verdicts_follow_bradley_terry_probability():
    """4,000 independent draws: the standard error of a win-rate near 0.73 is ≈ 0.007, so ±0.03 is > 4σ."""
    judge = SimulatedJudge(RubricSimConfig(tau=1.0, taste=0.0), NumberTask().quality)
    assert win_rate(judge, 1.0) == pytest.approx(1 / (1 + math.exp(-1.0)), abs=0.03)
    sharp = SimulatedJudge(RubricSimConfig(tau=0.5, taste=0.0), NumberTask().quality)
    assert win_rate(sharp, 1.0) == pytest.approx(1 / (1 + math.exp(-2.0)), abs=0.03)


def test_flip_prob_mixes_verdicts_as_expected():
    """P(win) = p(1−f) + (1−p)f; same 4σ argument as above."""
    p = 1 / (1 + math.exp(-1.0))
    judge = build_judge(RubricSimConfig(taste=0.0, flip_prob=0.3, order="fixed"), NumberTask())
    assert win_rate(judge, 1.0) == pytest.approx(p * 0.7 + (1 - p) * 0.3, abs=0.03)
    inverted = build_judge(RubricSimConfig(taste=0.0, flip_prob=1.0, order="fixed"), NumberTask())
    assert win_rate(inverted, 1.0) == pytest.approx(1 - p, abs=0.03)


def test_equal_quality_is_a_tie_and_answers_are_reproducible():
    judge = SimulatedJudge(RubricSimConfig(taste=0.0), NumberTask().quality)
    request = PairRequest(PROMPT, "q=1 a", "q=1 b")
    assert judge.compare([request])[0].p_first == 0.5
    other = PairRequest(PROMPT, "q=2 a", "q=1.5 b")
    assert judge.compare([other] * 5) == judge.compare([other] * 5)
    reseeded = SimulatedJudge(RubricSimConfig(taste=0.0, seed=7), NumberTask().quality)
    draws = [PairRequest(PROMPT, f"q=0.1 #{i}", f"q=0 #{i}") for i in range(200)]
    assert [v.p_first for v in judge.compare(draws)] != [v.p_first for v in reseeded.compare(draws)]


def test_both_orders_cancels_position_bias():
    """A bias of 2 makes the first-shown response win σ(2) ≈ 88% of equal-quality pairs; judging both
    orders makes the mean exactly ½ in expectation (±0.03 over 4,000 pairs is > 4σ)."""
    biased = SimulatedJudge(RubricSimConfig(taste=0.0, position_bias=2.0), NumberTask().quality)
    assert win_rate(biased, 0.0) == pytest.approx(1 / (1 + math.exp(-2.0)), abs=0.03)
    fair = BothOrders(SimulatedJudge(RubricSimConfig(taste=0.0, position_bias=2.0), NumberTask().quality))
    assert win_rate(fair, 0.0) == pytest.approx(0.5, abs=0.03)
    assert fair.drain_metrics()["swap_agreement"] < 0.5


def test_counters_are_drained_per_step():
    judge = BothOrders(SimulatedJudge(RubricSimConfig(taste=0.0), NumberTask().quality))
    judge.compare([PairRequest(PROMPT, "q=1 a", "q=1 b"), PairRequest(PROMPT, "q=3 a", "q=0 b")])
    metrics = judge.drain_metrics()
    assert metrics["calls"] == 4.0  # 2 pairs x 2 orders
    assert metrics["tie_rate"] == 0.5
    assert judge.drain_metrics()["calls"] == 0.0


def test_invalid_settings_name_the_option():
    with pytest.raises(ValueError, match="judge.flip_prob"):
        RubricSimConfig(flip_prob=1.5)
    with pytest.raises(ValueError, match="judge.tau"):
        RubricSimConfig(tau=0.0)


def test_pointwise_scores_are_monotone_grades():
    from tsrl.types import ScoreRequest

    judge = BothOrders(SimulatedJudge(RubricSimConfig(taste=0.0, rubric_noise=0.0), NumberTask().quality))
    grades = [s.value for s in judge.score([ScoreRequest(PROMPT, f"q={q}") for q in (-3, 0, 3, 6, 9)])]
    assert grades == sorted(grades) and grades[0] <= 1 and grades[-1] >= 9 and grades[2] == 5
    assert all(float(g).is_integer() for g in grades)
    assert judge.drain_metrics()["calls"] == 5
