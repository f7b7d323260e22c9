"""judge.budget's run caps: one allowance shared by the judges of a run that ask one endpoint (evaluation included),
the dollar cap priced from what the model judge paid, and the refusal at start of a run whose estimate passes a cap
(tsrl/spend.py's check_caps), worked out by hand on humor's shipped data."""

from __future__ import annotations

import re

import pytest
from hydra import compose, initialize_config_module

from tsrl.commands.base import to_run_config
from tsrl.config import register_configs
from tsrl.errors import ConfigError, UserError
from tsrl.judging import (
    Budget,
    BudgetConfig,
    BudgetExceeded,
    RunAllowance,
    eval_judge_config,
    ranking_judge_config,
    run_allowances,
)
from tsrl.judging.wrappers import usd_spent
from tsrl.spend import check_caps, estimate
from tsrl.tasks import build_task
from tsrl.testing.fakes import AnswerJudge, numbered_pairs
from tsrl.types import Verdict

OPENAI = [
    "judge=openai",
    "judge.base_urls=[http://127.0.0.1:9/v1]",
    "trainer.max_steps=10",
    "reward.ladder_dir=/nonexistent",
]


class PaidJudge(AnswerJudge):
    """A judge that pays `usd` a call (as the openai judge counts `spent_usd` from each answer's usage)."""

    def __init__(self, usd: float) -> None:
        super().__init__(lambda r: Verdict(1.0, tokens=10))
        self.usd, self.spent_usd = usd, 0.0

    def compare(self, requests):
        self.spent_usd += self.usd * len(requests)
        return super().compare(requests)


class Wrapped:
    """A wrapper between the budget and the model judge (as a RenderingJudge is)."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def compare(self, requests):
        return self.inner.compare(requests)


def test_judges_sharing_an_allowance_count_each_others_calls_and_keep_their_own_step_caps():
    shared = RunAllowance(BudgetConfig(max_calls_per_run=5))
    training = Budget(AnswerJudge(lambda r: Verdict(1.0)), BudgetConfig(max_calls_per_step=3), shared)
    evaluation = Budget(AnswerJudge(lambda r: Verdict(1.0)), BudgetConfig(), shared)
    evaluation.compare(numbered_pairs(4))  # no step cap of its own: 4 > 3 passes
    training.compare(numbered_pairs(1))
    with pytest.raises(BudgetExceeded, match="5 calls made and 1 more needed exceed judge.budget.max_calls_per_run=5"):
        training.compare(numbered_pairs(1))
    assert shared.calls == 5


def test_the_dollar_cap_refuses_a_batch_its_mean_cost_would_pass_and_stops_after_one_that_passed_it():
    inner = PaidJudge(usd=0.01)
    judge = Budget(Wrapped(inner), BudgetConfig(max_usd_per_run=0.065))
    judge.compare(numbered_pairs(3))  # $0.03
    assert judge.run.usd == pytest.approx(0.03) and usd_spent(Wrapped(inner)) == pytest.approx(0.03)
    with pytest.raises(BudgetExceeded, match=re.escape("$0.0300 paid for 3 calls, and 4 more at that mean cost")):
        judge.compare(numbered_pairs(4))  # $0.07 > $0.065: refused unasked
    assert len(inner.asked) == 3
    judge.compare(numbered_pairs(2))  # $0.05
    inner.usd = 0.02  # dearer answers than the mean foretold: stopped after the batch that passed the cap
    with pytest.raises(
        BudgetExceeded, match=re.escape("$0.0700 paid for 6 calls exceeds judge.budget.max_usd_per_run")
    ):
        judge.compare(numbered_pairs(1))
    with pytest.raises(ConfigError, match="judge.budget.max_usd_per_run must be >= 0"):
        BudgetConfig(max_usd_per_run=-1.0)


def run_config(*overrides: str):
    register_configs()
    with initialize_config_module("tsrl.configs", version_base="1.3"):
        return to_run_config(compose("config", overrides=[*OPENAI, "run_dir=/nonexistent/run", *overrides]))


def test_the_evaluation_and_the_ladder_ranking_judge_share_the_training_judges_allowance_on_its_endpoint():
    cfg = run_config("judge.flip_prob=0.2", "judge.budget.max_calls_per_run=7")
    of = run_allowances(cfg)
    assert of(cfg.judge) is of(eval_judge_config(cfg)) is of(ranking_judge_config(cfg))
    assert of(cfg.judge).cfg.max_calls_per_run == 7
    elsewhere = run_config(
        "judge@eval_judge=openai",
        "eval_judge.base_urls=[http://127.0.0.1:10/v1]",
        "eval_judge.budget.max_calls_per_run=3",
    )
    of = run_allowances(elsewhere)
    assert of(eval_judge_config(elsewhere)) is not of(elsewhere.judge)
    assert of(eval_judge_config(elsewhere)).cfg.max_calls_per_run == 3


def test_a_run_whose_estimate_passes_a_cap_is_refused_with_the_numbers_unless_partial_runs_are_meant():
    task = build_task(run_config().task)
    cfg = run_config("judge.budget.max_calls_per_run=1000")
    spend = estimate(cfg, task, world=1)
    total = spend.total.high  # the ladder's 64 × 45 pairs, 10 steps × 256, 2 evaluations × 960 (this endpoint's)
    assert total == 2880 + 10 * 256 + 2 * 960 and "held-out evaluation" in spend.caps
    with pytest.raises(
        UserError, match=f"an estimate of {total:,} calls against judge.budget.max_calls_per_run=1000 —"
    ):
        check_caps(spend, cfg, world=1)
    check_caps(spend, cfg, world=8)  # each of 8 processes holds 1,000
    check_caps(spend, run_config("judge.budget.max_calls_per_run=1000", "judge.budget.allow_partial=true"), 1)
    priced = run_config("judge.price_in_per_m=1", "judge.price_out_per_m=1", "judge.budget.max_usd_per_run=0.5")
    with pytest.raises(UserError, match=r"an estimate of \$[\d.]+ against judge.budget.max_usd_per_run=0.5"):
        check_caps(estimate(priced, task, world=1), priced, 1)
    unpriced = run_config("judge.budget.max_usd_per_run=0.5", "judge.budget.allow_partial=true")
    with pytest.raises(UserError, match="set judge.price_in_per_m and judge.price_out_per_m"):
        check_caps(estimate(unpriced, task, world=1), unpriced, 1)


def test_an_evaluation_judge_on_another_endpoint_counts_against_its_own_caps():
    task = build_task(run_config().task)
    other = ["judge@eval_judge=openai", "eval_judge.base_urls=[http://127.0.0.1:10/v1]"]
    cfg = run_config(*other, "judge.budget.max_calls_per_run=5440", "eval_judge.budget.max_calls_per_run=400")
    spend = estimate(cfg, task, world=1)
    assert "the evaluation asks another endpoint, under eval_judge.budget.max_calls_per_run=400" in spend.caps
    with pytest.raises(UserError, match=r"against eval_judge.budget.max_calls_per_run=400 —") as refused:
        check_caps(spend, cfg, world=1)
    assert "against judge.budget." not in str(refused.value)  # setup and training fit their 2,880 + 2,560
