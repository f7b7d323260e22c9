"""The simulated judge's per-text error σ_t (`judge.text_error`): one normal draw per (seed, text) that every
call showing the text shares, verdicts and grades alike — what breaks TSRL §2.1's "Verdicts are assumed
conditionally independent across anchors" — and the evaluation judge's own draws of it.

Correlations are over n = 4,000 texts; under independence a sample correlation has standard error 1/√n ≈ 0.016,
so |r| < 0.07 is a 4-SE band, and the effects asserted (r ≈ 0.17 for verdicts at σ_t = 1, τ = 1) lie far
outside it. The judge's draws are stable hashes, so a pass is reproducible.
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from tsrl.errors import ConfigError
from tsrl.judging import RubricSimConfig, SimulatedJudge, build_judge, clean_judge_config
from tsrl.judging.profile import load_profile, shipped_profiles
from tsrl.types import PairRequest, Prompt, ScoreRequest

PROMPT = Prompt(id="p0", text="request")
N = 4000
BAND = 0.07


class TextQuality:
    """A task whose latent quality is a fixed function of the text (spread over about [-1, 6])."""

    name = "pinned"

    def quality(self, prompt: Prompt, text: str) -> float:
        return (sum(map(ord, text)) % 71) / 10.0 - 1.0


def flat(prompt: Prompt, text: str) -> float:
    """Every text of the same latent quality: whatever separates them is the judge's per-text error."""
    return 0.0


def texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = ["cat", "dog", "pun", "joke", "moon", "tax", "sock", "banana", "robot", "tea"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 30))) for _ in range(n)]


def verdicts_against(judge: SimulatedJudge, anchor: str) -> np.ndarray:
    """Each of N distinct texts judged against one anchor (shown first)."""
    return np.array([v.p_first for v in judge.compare([PairRequest(PROMPT, f"text {i}", anchor) for i in range(N)])])


def anchor_correlation(cfg: RubricSimConfig) -> float:
    """Across texts of equal quality: the correlation of a text's verdict against one anchor with its verdict
    against another (the text shown first with a small edge, so that equal perceptions do not all tie)."""
    judge = SimulatedJudge(replace(cfg, position_bias=0.5), flat)
    return float(np.corrcoef(verdicts_against(judge, "anchor A"), verdicts_against(judge, "anchor B"))[0, 1])


def test_defaults_answer_as_before_the_text_error_existed():
    """Pinned from the simulator before `text_error` existed: the training judge (random order) and the derived
    evaluation judge (both orders), verdicts and grades."""
    sample = texts(24)
    pairs = [PairRequest(PROMPT, a, b) for a, b in zip(sample[:12], sample[12:])]
    grades = [ScoreRequest(PROMPT, t) for t in sample[:12]]
    pinned_grades = [9.0, 1.0, 5.0, 1.0, 10.0, 6.0, 0.0, 4.0, 6.0, 2.0, 8.0, 5.0]
    train = build_judge(RubricSimConfig(), TextQuality())
    assert [v.p_first for v in train.compare(pairs)] == [1, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1]
    assert [s.value for s in train.score(grades)] == pinned_grades
    evaluation = build_judge(clean_judge_config(RubricSimConfig()), TextQuality())
    assert [v.p_first for v in evaluation.compare(pairs)] == [1, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0.5, 0.5]
    assert [s.value for s in evaluation.score(grades)] == pinned_grades
    plain, clean = SimulatedJudge(RubricSimConfig(), flat), SimulatedJudge(clean_judge_config(RubricSimConfig()), flat)
    assert "text_error" not in plain.identity + plain.score_identity  # caches of today's runs stay valid
    assert (clean.identity, clean.score_identity) == (plain.identity, plain.score_identity)


def test_a_text_error_correlates_a_text_s_verdicts_across_anchors():
    """σ_t = 1 at τ = 1: a text's two verdicts share its error, r ≈ Var σ(N(0, 1)) / ¼ ≈ 0.17; without it
    (and without taste, the other per-text term) they are independent given q."""
    assert anchor_correlation(RubricSimConfig(taste=0.0, text_error=1.0)) > 0.12
    assert abs(anchor_correlation(RubricSimConfig(taste=0.0))) < BAND


def test_a_text_error_moves_the_text_s_grade_with_its_verdicts():
    """Grades see the same error: with no grade noise, the grade of a text of flat quality follows its share of
    wins against 16 anchors; at σ_t = 0 every such text gets the same grade."""
    anchors = [f"anchor {j}" for j in range(16)]
    n = 500

    def wins_and_grades(cfg: RubricSimConfig) -> tuple[np.ndarray, np.ndarray]:
        judge = SimulatedJudge(cfg, flat)
        pairs = [PairRequest(PROMPT, f"text {i}", a) for i in range(n) for a in anchors]
        wins = np.array([v.p_first for v in judge.compare(pairs)]).reshape(n, len(anchors)).mean(1)
        grades = np.array([s.value for s in judge.score([ScoreRequest(PROMPT, f"text {i}") for i in range(n)])])
        return wins, grades

    exact = dict(taste=0.0, rubric_noise=0.0, score_centre=0.0, grade_levels=101)
    wins, grades = wins_and_grades(RubricSimConfig(**exact, text_error=1.0))
    assert np.corrcoef(wins, grades)[0, 1] > 0.6
    assert len(set(wins_and_grades(RubricSimConfig(**exact))[1])) == 1


def test_the_evaluation_judge_draws_its_own_text_errors():
    """clean_judge_config keeps σ_t but takes the next draw: its per-text errors are independent of the
    training judge's (r ≈ 0 across texts of equal quality), each of std σ_t."""
    train_cfg = RubricSimConfig(taste=0.0, text_error=1.0)
    eval_cfg = clean_judge_config(train_cfg)
    assert eval_cfg.text_error == 1.0 and eval_cfg.text_error_seed != train_cfg.text_error_seed
    train, evaluation = SimulatedJudge(train_cfg, flat), SimulatedJudge(eval_cfg, flat)
    request = PairRequest(PROMPT, "", "")
    errors = np.array([[j.latent(request, f"text {i}") for j in (train, evaluation)] for i in range(N)])  # [N, 2]
    assert abs(np.corrcoef(errors.T)[0, 1]) < BAND
    assert np.allclose(errors.std(0), 1.0, atol=0.05)
    assert train.identity != evaluation.identity  # a shared cache_path never mixes their verdicts


def test_the_text_error_is_a_profile_parameter_with_a_source():
    assert RubricSimConfig(profile="ideal").text_error == 0.0
    for name in shipped_profiles():
        assert load_profile(name).sources.get("text_error", "").strip(), name


def test_a_negative_text_error_is_one_sentence():
    with pytest.raises(ConfigError, match="judge.text_error"):
        replace(RubricSimConfig(), text_error=-0.5)
