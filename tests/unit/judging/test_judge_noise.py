"""Noise as the TSRL paper injects it (per comparison), the rubric grade's own noise (σ_rub), and the clean
held-out evaluation judge derived from a noisy training judge."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tsrl.errors import ConfigError
from tsrl.judging import (
    BudgetConfig,
    JudgePolicyConfig,
    RubricSimConfig,
    build_judge,
    clean_judge_config,
    judge_identity,
    set_noise_stream,
    wrap,
)
from tsrl.remote.openai_config import OpenAIJudgeConfig
from tsrl.rewards import LadderConfig, LadderRegime, RegimeContext
from tsrl.testing.fakes import NumberTask, ScriptedJudge
from tsrl.types import Group, PairRequest, Prompt, Rollout, ScoreRequest

PROMPT = Prompt(id="p", text="prompt")
N = 4000


def sure_pairs(n: int = N) -> list[PairRequest]:
    """Pairs the judge decides the same way every time: q = 50 against q = 0 (σ(50) = 1 to double precision)."""
    return [PairRequest(PROMPT, f"q=50 #{i}", f"q=0 #{i}") for i in range(n)]


def outcome_shares(judge) -> dict[float, float]:
    counts = Counter(v.p_first for v in judge.compare(sure_pairs()))
    return {p: c / N for p, c in counts.items()}


@pytest.mark.parametrize(
    "make",
    [
        lambda scope: build_judge(
            RubricSimConfig(taste=0.0, flip_prob=0.3, noise_scope=scope, order="both"), NumberTask()
        ),
        lambda scope: wrap(ScriptedJudge(), JudgePolicyConfig(order="both", flip_prob=0.3, noise_scope=scope)),
    ],
    ids=["rubric_sim", "model_judge_wrappers"],
)
def test_noise_flips_the_comparison_not_each_call(make):
    """A sure pair judged in both orders at p = 0.3: per comparison (the paper's injection, the default) the
    outcome is 1 w.p. .7 and 0 w.p. .3, never ½; per call each order flips on its own, giving
    {1: .49, ½: .42, 0: .09}. 4,000 pairs: the standard error of a share is ≤ 0.008, so ±0.03 is > 3.5σ."""
    default = outcome_shares(make("comparison"))
    assert set(default) == {0.0, 1.0}
    assert default[1.0] == pytest.approx(0.7, abs=0.03)
    per_call = outcome_shares(make("call"))
    assert per_call[1.0] == pytest.approx(0.49, abs=0.03)
    assert per_call[0.5] == pytest.approx(0.42, abs=0.03)
    assert per_call[0.0] == pytest.approx(0.09, abs=0.03)


def test_comparison_noise_draws_once_per_comparison_and_afresh_for_each():
    """Per comparison, in both orders: one draw for the comparison (never ½), and a fresh draw each time the same
    comparison is asked again (TSRL §4.5: each judgment independently): 500 copies of one sure pair at p = 0.3
    come out 0 about 150 times (Binomial(500, .3): sd 10), not all alike as a draw keyed by the pair gave."""
    judge = build_judge(RubricSimConfig(taste=0.0, flip_prob=0.3, order="both"), NumberTask())
    answers = [v.p_first for v in judge.compare([PairRequest(PROMPT, "q=50 #0", "q=0 #0")] * 500)]
    assert set(answers) == {0.0, 1.0}
    assert answers.count(0.0) == pytest.approx(150, abs=45)
    assert judge.drain_metrics()["noise_flips"] == answers.count(0.0)


def test_grade_noise_draws_afresh_for_the_same_response():
    """A grade replaced with probability p, drawn per judgment: the same response graded 400 times at p = 0.5
    keeps its judge's grade about half the time (sd 10) and gets several different replacement grades."""
    judge = build_judge(RubricSimConfig(taste=0.0, rubric_noise=0.0, flip_prob=0.5), NumberTask())
    values = [s.value for s in judge.score([ScoreRequest(PROMPT, "q=3 #0")] * 400)]
    assert values.count(5.0) == pytest.approx(200 + 200 / 11, abs=45)
    assert len(set(values)) >= 6


def test_unknown_noise_scope_names_the_option():
    with pytest.raises(ConfigError, match="judge.noise_scope"):
        RubricSimConfig(noise_scope="token")
    with pytest.raises(ConfigError, match="judge.noise_scope"):
        JudgePolicyConfig(noise_scope="batch")


def grades(cfg: RubricSimConfig, q: float, n: int = 2000) -> np.ndarray:
    judge = build_judge(cfg, NumberTask())
    return np.array([s.value for s in judge.score([ScoreRequest(PROMPT, f"q={q} #{i}") for i in range(n)])])


def test_rubric_grade_carries_gaussian_noise_sigma_rub():
    """TSRL §2.1: a rubric score is q + ε, ε ~ N(0, σ²_rub). At q = score_centre the grade is
    round(10·σ(ε/score_scale)); with σ_rub = 1.5 = score_scale the delta method gives a std of 10·¼ = 2.5,
    less where the logistic bends (≈ 2.1 measured), mean 5 by symmetry (±0.15 over 2,000 grades is > 3σ).
    With σ_rub = 0 every response of equal quality gets the same grade (the old behaviour, now a switch)."""
    noisy = grades(RubricSimConfig(taste=0.0), 3.0)
    assert 1.7 < noisy.std() < 2.5
    assert noisy.mean() == pytest.approx(5.0, abs=0.15)
    assert set(grades(RubricSimConfig(taste=0.0, rubric_noise=0.0), 3.0)) == {5.0}
    with pytest.raises(ConfigError, match="rubric_noise"):
        RubricSimConfig(rubric_noise=-1.0)


def test_noisier_rubric_separates_qualities_less_than_pairwise_verdicts():
    """The paper's premise in simulation: for two responses 1 latent unit apart, the default rubric orders them
    correctly less often than the default pairwise judge: Φ(1/(1.5·√2)) ≈ .68 before rounding against
    σ(1) ≈ .73 for a verdict (2,000 pairs each: standard errors ≈ .01, so a .03 gap is > 2σ of the difference)."""
    high, low = grades(RubricSimConfig(taste=0.0), 3.5), grades(RubricSimConfig(taste=0.0, seed=1), 2.5)
    rubric_correct = np.mean(high > low) + 0.5 * np.mean(high == low)
    judge = build_judge(RubricSimConfig(taste=0.0), NumberTask())
    pairwise = np.mean(
        [v.p_first for v in judge.compare([PairRequest(PROMPT, f"q=3.5 #{i}", f"q=2.5 #{i}") for i in range(2000)])]
    )
    assert rubric_correct < pairwise - 0.03


def test_clean_evaluation_judge_drops_training_noise_bias_and_budget():
    noisy = RubricSimConfig(flip_prob=0.3, position_bias=1.0, order="fixed", tau=0.5)
    clean = clean_judge_config(noisy)
    assert (clean.flip_prob, clean.position_bias, clean.order, clean.tau) == (0.0, 0.0, "both", 0.5)
    api = OpenAIJudgeConfig(model="m", flip_prob=0.2, order="random", budget=BudgetConfig(max_calls_per_run=10))
    clean_api = clean_judge_config(api)
    assert (clean_api.flip_prob, clean_api.order, clean_api.budget, clean_api.model) == (
        0.0,
        "both",
        BudgetConfig(),
        "m",
    )
    assert judge_identity(clean_api)["model"] == "m" and judge_identity(clean)["kind"] == "rubric_sim"
    assert '"flip_prob": 0.0' in judge_identity(clean)["fingerprint"]


def test_default_order_is_one_binary_verdict_per_comparison():
    """TSRL's accounting: one call per anchor comparison, shown in a random order, a binary verdict (k calls per
    sample). order=both (ArenaRL's bidirectional evaluation) stays a switch and costs two calls."""
    assert JudgePolicyConfig().order == RubricSimConfig().order == OpenAIJudgeConfig(model="m").order == "random"
    pairs = [PairRequest(PROMPT, f"q=1 #{i}", f"q=0.5 #{i}") for i in range(200)]
    inner = ScriptedJudge()
    verdicts = wrap(inner, JudgePolicyConfig()).compare(pairs)
    assert len(inner.requests) == len(pairs) and {v.p_first for v in verdicts} == {1.0}
    shown_first = Counter(r.first.startswith("q=1 ") for r in inner.requests)
    assert 70 < shown_first[True] < 130  # a random order: 200 fair coins, > 4σ from either bound
    both = ScriptedJudge()
    wrap(both, JudgePolicyConfig(order="both")).compare(pairs)
    assert len(both.requests) == 2 * len(pairs)


@pytest.mark.parametrize("scope", ["comparison", "call"])
def test_grade_noise_reaches_every_judge(scope):
    """TSRL §4.5's p for a scalar reward: each real grade is replaced, with probability p = 0.3, by a grade drawn
    uniformly from the 0–10 scale, for a model judge as for the simulated one. Every response here is graded 7:
    a replaced grade differs from 7 w.p. 10/11, so the share of other grades is .3·10/11 ≈ .273 (2,000 grades:
    standard error .010, ±.04 is 4σ), and the replacements cover the whole scale. A missing grade stays missing
    (the failure policy decides it, not the noise)."""
    judge = wrap(ScriptedJudge(grades={"q=7 none": None}), JudgePolicyConfig(flip_prob=0.3, noise_scope=scope))
    requests = [ScoreRequest(PROMPT, f"q=7 #{i}") for i in range(2000)]
    values = np.array([s.value for s in judge.score(requests)])
    assert np.mean(values != 7.0) == pytest.approx(0.3 * 10 / 11, abs=0.04)
    assert set(values) == {float(g) for g in range(11)}
    assert judge.drain_metrics()["noise_flips"] == pytest.approx(0.3 * 2000, abs=80)
    assert judge.score([ScoreRequest(PROMPT, "q=7 none")])[0].value is None
    set_noise_stream(judge, "setup")  # the same stream again replays its draws (a resumed step)
    assert (values == np.array([s.value for s in judge.score(requests)])).all()
    assert (values != np.array([s.value for s in judge.score(requests)])).any()  # asked again: fresh draws


def test_identical_completions_against_the_same_anchors_get_different_rewards_under_noise(number_task, tmp_path):
    """Eight identical completions of one group at p = 0.3, each judged against the same 4 anchors: a draw
    per judgment gives them different win-rates (a draw keyed by the text pair gave all eight the same one,
    a zero-variance group a policy could lock onto). P(all eight equal) is below 0.3⁸·… ≪ 10⁻³ here; the
    same step scored again with the same stream gives the same rewards (a resumed step)."""
    task = number_task
    judge = build_judge(RubricSimConfig(taste=0.0, flip_prob=0.3), task)
    ctx = RegimeContext(task, judge, "sim", tmp_path / "run")
    ladder = LadderRegime(LadderConfig(ladder_dir=str(tmp_path / "ladders"), k=4), ctx)
    prompt = task.prompts("train")[0]
    group = Group(prompt=prompt, prompt_ids=[1], rollouts=[Rollout("q=2.5 same", [1], [0.0], False)] * 8)
    set_noise_stream(judge, "train", 1, 0)
    rewards = ladder.score([group]).rewards[0]
    assert len(set(rewards.tolist())) > 1
    set_noise_stream(judge, "train", 1, 0)
    assert ladder.score([group]).rewards[0].tolist() == rewards.tolist()
    clean = LadderRegime(
        LadderConfig(ladder_dir=str(tmp_path / "ladders"), k=4),
        RegimeContext(task, build_judge(RubricSimConfig(taste=0.0), task), "sim", tmp_path / "run"),
    )
    assert len(set(clean.score([group]).rewards[0].tolist())) == 1  # unnoised: deterministic per question
