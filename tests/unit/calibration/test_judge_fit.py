"""Fitting the perception model (tsrl/calibration/fit.py) and judge profiles (tsrl/judging/profile.py): the fit
recovers the parameters the simulated judge answered with, within the intervals it reports; a judge blind to
quality is reported as such; profiles load, are checked, and `ideal` is the default simulator answer for answer."""

from __future__ import annotations

import math
import random

import pytest

from tsrl.calibration.fit import GUMBEL_STD, collect_answers, fit_answers
from tsrl.calibration.fitted_profile import profile_from_fit
from tsrl.errors import ConfigError
from tsrl.judging import RubricSimConfig, SimulatedJudge, judge_fingerprint
from tsrl.judging.profile import PROFILE_FIELDS, load_profile, shipped_profiles, write_profile
from tsrl.types import Anchor, PairRequest, Prompt, ScoreRequest

TRUTH = dict(
    tau=0.8,
    position_bias=0.4,
    tie_band=0.3,
    length_weight_pair=0.5,
    score_centre=2.0,
    score_scale=1.2,
    rubric_noise=1.0,
    length_weight_grade=0.3,
)
FITTED_AS = {"rubric_noise": "grade_noise"}  # a fit reports the grade's whole noise under this name


def ladder(prompts: int, anchors: int, seed: int) -> tuple[list[Prompt], dict[str, float]]:
    """Ladders of known latent quality (best first, 0.7 apart on average, jittered) and lengths of 1–40 words."""
    rng, quality, out = random.Random(seed), {}, []
    for i in range(prompts):
        items = []
        for rank in range(anchors):
            text = f"p{i}a{rank} " + "w " * rng.randint(1, 40)
            quality[text] = 5.0 - 0.7 * rank + rng.gauss(0.0, 0.3)
            items.append(Anchor(text))
        out.append(Prompt(id=f"p{i}", text="tell a joke", anchors=tuple(items)))
    return out, quality


def fit_simulated(truth: dict, seed: int, prompts: int = 60) -> dict:
    ladders, quality = ladder(prompts, 8, seed)
    judge = SimulatedJudge(RubricSimConfig(seed=seed, taste=0.0, **truth), lambda p, text: quality[text])
    return fit_answers(collect_answers(judge, ladders, lambda p, rank, text: quality[text]))


def test_the_fit_recovers_the_parameters_within_the_intervals_it_reports():
    fit = fit_simulated(TRUTH, seed=0)
    assert fit["data"]["verdicts"] == 60 * 28 * 2 and fit["data"]["grades"] == 60 * 8
    for name, value in TRUTH.items():
        e = fit["estimates"][FITTED_AS.get(name, name)]
        assert e.low <= value <= e.high, (name, value, e)
        assert e.high - e.low < max(1.0, 0.6 * abs(value)), (name, e)  # an interval that says something
    assert fit["signal_test"]["p_value"] < 1e-10


def test_the_intervals_cover_the_truth_about_as_often_as_they_say():
    """Ten independent data sets: each parameter's 95 % interval holds the truth in at least 8 of 10 (a
    correct interval fails that 1.2 % of the time; an overconfident one — half as wide — 31 %)."""
    covered = {name: 0 for name in TRUTH}
    for seed in range(1, 11):
        fit = fit_simulated(TRUTH, seed, prompts=30)
        for name, value in TRUTH.items():
            e = fit["estimates"][FITTED_AS.get(name, name)]
            covered[name] += e.low <= value <= e.high
    assert min(covered.values()) >= 8, covered


def test_a_frame_shows_as_grade_noise_beyond_the_verdicts_item_noise():
    """Grades with item noise of the verdicts' size (τπ/√6) and a frame σ_η = 1: the fit finds σ_η."""
    truth = {**TRUTH, "rubric_noise": GUMBEL_STD * TRUTH["tau"], "frame_noise": 1.0}
    e = fit_simulated(truth, seed=3, prompts=120)["estimates"]
    assert e["frame_noise"].low <= 1.0 <= e["frame_noise"].high and e["frame_noise"].low > 0.3
    assert e["grade_noise"].low <= math.hypot(truth["rubric_noise"], 1.0) <= e["grade_noise"].high
    assert fit_simulated(TRUTH, seed=3, prompts=120)["estimates"]["frame_noise"].low == 0.0  # none: none found


def test_a_judge_blind_to_quality_is_reported_as_such():
    """Verdicts by position alone (a judge that sees no difference between the anchors, first shown +1.5): no
    evidence of signal, a strong position bias, and a profile that says so."""
    ladders, quality = ladder(30, 6, seed=4)
    judge = SimulatedJudge(RubricSimConfig(taste=0.0, position_bias=1.5), lambda p, text: 0.0)
    fit = fit_answers(collect_answers(judge, ladders, lambda p, rank, text: quality[text]))
    assert fit["signal_test"]["p_value"] > 0.01
    e = fit["estimates"]
    assert e["p_first_if_equal"].low > 0.7 and e["signal_per_tau"].low < 0 < e["signal_per_tau"].high
    assert math.isinf(e["tau"].high) and math.isinf(e["position_bias"].high)
    profile = profile_from_fit(fit, "blind", "a blind judge", "test")
    assert "likelihood ratio" in profile.description and profile.parameters["taste"] == 0.0
    # the profile answers as the judge did: first-position wins at its rate, whatever the quality
    pairs = [PairRequest(p, a.text, b.text) for p in ladders for a in p.anchors for b in p.anchors if a != b]
    shown = [v.p_first for v in judge.compare(pairs)]
    replayed = [
        v.p_first for v in SimulatedJudge(RubricSimConfig(**profile.parameters), lambda p, t: quality[t]).compare(pairs)
    ]
    assert abs(sum(replayed) - sum(shown)) / len(pairs) < 0.05


def test_too_few_answers_is_a_one_sentence_error():
    ladders, quality = ladder(1, 3, seed=5)
    judge = SimulatedJudge(RubricSimConfig(), lambda p, text: quality[text])
    with pytest.raises(ConfigError, match="at least 10 readable verdicts"):
        fit_answers(collect_answers(judge, ladders, lambda p, rank, text: quality[text]))


def test_a_written_profile_loads_into_the_simulated_judge(tmp_path):
    fit = fit_simulated(TRUTH, seed=6, prompts=20)
    profile = profile_from_fit(fit, "sim", "rubric_sim", "test")
    assert set(profile.parameters) <= set(PROFILE_FIELDS) and set(profile.parameters) <= set(profile.sources)
    write_profile(profile, tmp_path / "p.yaml")
    cfg = RubricSimConfig(profile=str(tmp_path / "p.yaml"))
    assert cfg.profile == f"applied:{tmp_path / 'p.yaml'}"
    assert cfg.tau == profile.parameters["tau"] and cfg.position_bias == profile.parameters["position_bias"]
    assert RubricSimConfig(profile=str(tmp_path / "p.yaml"), tau=2.0).tau == 2.0  # a field set here wins
    assert load_profile(str(tmp_path / "p.yaml")).fit["estimates"]["tau"]["ci95"][0] > 0


def test_the_ideal_profile_is_the_default_simulator_answer_for_answer():
    ideal = load_profile("ideal")
    defaults = RubricSimConfig()
    assert set(ideal.parameters) == set(PROFILE_FIELDS)
    assert all(ideal.parameters[name] == getattr(defaults, name) for name in PROFILE_FIELDS)
    ladders, quality = ladder(8, 6, seed=7)
    pairs = [PairRequest(p, a.text, b.text) for p in ladders for a in p.anchors for b in p.anchors if a != b]
    grades = [ScoreRequest(p, a.text) for p in ladders for a in p.anchors]
    judged = [
        SimulatedJudge(cfg, lambda p, text: quality[text]) for cfg in (defaults, RubricSimConfig(profile="ideal"))
    ]
    assert [v.p_first for v in judged[0].compare(pairs)] == [v.p_first for v in judged[1].compare(pairs)]
    assert [s.value for s in judged[0].score(grades)] == [s.value for s in judged[1].score(grades)]
    assert judged[0].identity == judged[1].identity and judged[0].score_identity == judged[1].score_identity
    assert judge_fingerprint(defaults) == judge_fingerprint(RubricSimConfig(profile="ideal"))  # stored ladders too


@pytest.mark.parametrize("name", shipped_profiles())
def test_every_shipped_profile_loads_and_sources_every_value(name):
    profile = load_profile(name)
    assert profile.description and set(profile.parameters) <= set(profile.sources)
    cfg = RubricSimConfig(profile=name)
    assert {k: getattr(cfg, k) for k in profile.parameters} == profile.parameters  # every value reached the judge


@pytest.mark.parametrize(
    "body, message",
    [
        ("parameters: {tau: 1.0, warmth: 2}\nsources: {tau: x, warmth: y}", "warmth, which the simulated judge"),
        ("parameters: {tau: 1.0}\nsources: {}", "tau without a source"),
        ("parameters: [1, 2]", "no 'parameters' mapping"),
        ("parameters: {tau: 1.0\n", "not readable YAML"),
        ("parameters: {tau: fast}\nsources: {tau: x}", "must be a number"),
    ],
)
def test_a_bad_profile_is_one_sentence_naming_the_file(tmp_path, body, message):
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=message) as err:
        RubricSimConfig(profile=str(path))
    assert str(path) in str(err.value)


def test_an_unknown_profile_lists_the_shipped_ones():
    with pytest.raises(ConfigError, match="Shipped profiles: .*ideal"):
        RubricSimConfig(profile="nonesuch")


def test_the_shipped_smollm2_profile_is_the_fit_of_its_recorded_answers(tmp_path):
    """tests/data/smollm2_judge_answers.json holds the answers SmolLM2 (vLLM, CPU, direct form) gave to
    `tsrl-judge-check task=humor check.fit=true check.prompts=16`; fitting them again gives the shipped profile."""
    import json
    from pathlib import Path

    from tsrl.calibration.check import fit_saved

    saved = json.loads((Path(__file__).parents[2] / "data" / "smollm2_judge_answers.json").read_text())
    fit = fit_saved(saved, "smollm2-135m-vllm", tmp_path)
    shipped = load_profile("smollm2-135m-vllm")
    assert fit["parameters"] == shipped.parameters
    assert fit["signal_test"]["p_value"] > 0.5 and fit["data"]["grades_used"] == {"10": 80}
    assert 0.85 < fit["estimates"]["p_first_if_equal"]["value"] < 0.95
