"""The simulated judge's perception model: at its defaults it is the earlier simulator, answer for answer; each
new parameter does what its equation says (docs/judge_simulator.md)."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from statistics import NormalDist

import pytest

from tsrl.errors import ConfigError
from tsrl.judging import RubricSimConfig, SimulatedJudge, clean_judge_config, stable_uniform
from tsrl.judging.simulated import verdict_probabilities
from tsrl.types import PairRequest, Prompt, ScoreRequest

PROMPTS = [Prompt(id=f"p{i}", text=f"request {i}") for i in range(4)]


def quality(prompt: Prompt, text: str) -> float:
    """A latent quality of the text alone, spread over about [-1, 6]: many distinct values, some equal ones."""
    return (sum(map(ord, text)) % 71) / 10.0 - 1.0


def texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = ["cat", "dog", "pun", "joke", "moon", "tax", "sock", "banana", "robot", "tea"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 30))) for _ in range(n)]


def earlier_verdict(cfg: RubricSimConfig, request: PairRequest) -> float:
    """The simulator's verdict as it was before the perception model (the oracle, kept verbatim)."""

    def latent(text: str) -> float:
        return quality(request.prompt, text) + cfg.taste * (2.0 * stable_uniform(cfg.seed, "taste", text) - 1.0)

    q1, q2 = latent(request.first) + cfg.position_bias, latent(request.second)
    if q1 == q2:
        return 0.5
    p_first = 1.0 / (1.0 + math.exp(-(q1 - q2) / cfg.tau))
    return 1.0 if stable_uniform(cfg.seed, request.prompt.id, request.first, request.second, "draw") < p_first else 0.0


def earlier_grade(cfg: RubricSimConfig, request: ScoreRequest) -> float:
    q = quality(request.prompt, request.response)
    q += cfg.taste * (2.0 * stable_uniform(cfg.seed, "taste", request.response) - 1.0)
    u = min(max(stable_uniform(cfg.seed, request.prompt.id, request.response, "rubric-noise"), 1e-12), 1 - 1e-12)
    q += cfg.rubric_noise * NormalDist().inv_cdf(u)
    return float(round(10.0 / (1.0 + math.exp(-(q - cfg.score_centre) / cfg.score_scale))))


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"tau": 0.5, "position_bias": 0.7, "taste": 0.0, "seed": 3},
        {"score_centre": 1.0, "score_scale": 0.6, "rubric_noise": 0.0, "taste": 1.0},
        {"rubric_noise": 3.0, "seed": 11, "tau": 2.0},
    ],
)
def test_the_defaults_reproduce_the_earlier_simulator_exactly(settings):
    cfg = RubricSimConfig(**settings)
    judge = SimulatedJudge(cfg, quality)
    items = texts(120, seed=len(settings))
    pairs = [PairRequest(PROMPTS[i % 4], a, b) for i, (a, b) in enumerate(zip(items, items[1:] + items[:1]))]
    pairs += [PairRequest(PROMPTS[0], a, a) for a in items[:5]]  # equal qualities: ties
    assert [v.p_first for v in judge.compare(pairs)] == [earlier_verdict(cfg, r) for r in pairs]
    grades = [ScoreRequest(PROMPTS[i % 4], t) for i, t in enumerate(items)]
    assert [s.value for s in judge.score(grades)] == [earlier_grade(cfg, r) for r in grades]
    assert len({s.value for s in judge.score(grades)}) > 4  # the check covers many grades, not one


def test_the_cache_identity_is_unchanged_at_the_defaults_and_names_a_changed_parameter():
    plain = SimulatedJudge(RubricSimConfig(), quality)
    assert plain.identity == "rubric_sim|tau=1.0|bias=0.0|taste=0.25|seed=0"
    framed = SimulatedJudge(RubricSimConfig(frame_noise=1.0, grade_levels=5), quality)
    assert framed.identity != plain.identity and "frame_noise=1.0" in framed.score_identity
    assert "grade_levels=5" in framed.identity


def test_a_frame_offset_moves_grades_but_never_a_verdict():
    """η is shared by both items of a verdict's call, so verdicts are those of σ_η = 0; grades move."""
    items = texts(80, seed=5)
    pairs = [PairRequest(PROMPTS[1], a, b) for a, b in zip(items, reversed(items))]
    grades = [ScoreRequest(PROMPTS[1], t) for t in items]
    base = SimulatedJudge(RubricSimConfig(), quality)
    framed = SimulatedJudge(RubricSimConfig(frame_noise=2.0), quality)
    assert [v.p_first for v in framed.compare(pairs)] == [v.p_first for v in base.compare(pairs)]
    moved = sum(a.value != b.value for a, b in zip(framed.score(grades), base.score(grades)))
    assert moved > len(grades) / 2


def test_a_narrow_coarse_scale_collapses_a_group_s_grades():
    """grade_lo/hi = 6/9 with 4 levels: every grade is one of 6, 7, 8, 9, and far fewer distinct grades
    than on the full scale (discrimination collapse by the parameters alone)."""
    grades = [ScoreRequest(PROMPTS[2], t) for t in texts(200, seed=7)]
    full = {s.value for s in SimulatedJudge(RubricSimConfig(), quality).score(grades)}
    narrow = {
        s.value for s in SimulatedJudge(RubricSimConfig(grade_lo=6, grade_hi=9, grade_levels=4), quality).score(grades)
    }
    assert narrow <= {6.0, 7.0, 8.0, 9.0} and len(narrow) < len(full)


def test_a_tie_band_gives_rao_kupper_ties_whose_frequencies_follow_the_formula():
    """δ > 0: P(first) = σ((Δ − δ)/τ), P(second) = σ((−Δ − δ)/τ), the rest TIE — checked on 4,000 questions of
    one quality gap, within 4 binomial standard errors; close pairs tie more often than distant ones."""
    prompts = [Prompt(id=f"q{i}", text="") for i in range(4000)]
    gap = {"hi": 0.6, "lo": 0.0}
    cfg = RubricSimConfig(taste=0.0, tie_band=0.5, tau=0.8)
    answers = [
        v.p_first
        for v in SimulatedJudge(cfg, lambda p, t: gap[t]).compare([PairRequest(p, "hi", "lo") for p in prompts])
    ]
    p_first, p_second = verdict_probabilities(0.6, 0.8, 0.5)
    for outcome, expected in ((1.0, p_first), (0.0, p_second), (0.5, 1 - p_first - p_second)):
        share = sum(a == outcome for a in answers) / len(answers)
        assert abs(share - expected) < 4 * math.sqrt(expected * (1 - expected) / len(answers)), (outcome, share)
    far = [
        v.p_first
        for v in SimulatedJudge(cfg, lambda p, t: 3 * gap[t]).compare([PairRequest(p, "hi", "lo") for p in prompts])
    ]
    assert sum(a == 0.5 for a in far) < sum(a == 0.5 for a in answers) / 2


def test_a_length_weight_favours_the_longer_response_in_its_protocol_only():
    short, long = "cat", "cat " * 40
    pair = [PairRequest(PROMPTS[0], short, long), PairRequest(PROMPTS[0], long, short)]
    judge = SimulatedJudge(RubricSimConfig(taste=0.0, tau=0.05, length_weight_pair=5.0), quality)
    assert [v.p_first for v in judge.compare(pair)] == [0.0, 1.0]  # the long one wins whatever the order
    graded = judge.score([ScoreRequest(PROMPTS[0], long)])[0].value
    assert (
        graded
        == SimulatedJudge(RubricSimConfig(taste=0.0, tau=0.05), quality)
        .score([ScoreRequest(PROMPTS[0], long)])[0]
        .value
    )  # γ_grade = 0: grades unmoved


def test_the_clean_evaluation_judge_drops_the_judge_s_biases():
    biased = RubricSimConfig(
        position_bias=1.0, length_weight_pair=2.0, length_weight_grade=2.0, tie_band=0.3, frame_noise=1.0, flip_prob=0.2
    )
    clean = clean_judge_config(biased)
    assert (
        clean.position_bias,
        clean.length_weight_pair,
        clean.length_weight_grade,
        clean.tie_band,
        clean.frame_noise,
        clean.flip_prob,
    ) == (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert clean.tau == biased.tau and clean.taste == biased.taste


@pytest.mark.parametrize(
    "bad",
    [{"frame_noise": -1.0}, {"tie_band": -0.1}, {"grade_lo": 8, "grade_hi": 6}, {"grade_hi": 11}, {"grade_levels": 1}],
)
def test_bad_perception_settings_are_one_sentence(bad):
    with pytest.raises(ConfigError, match="judge\\."):
        replace(RubricSimConfig(), **bad)
