"""The update step with a real tiny policy: a dropped group takes no part in it."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tsrl.algo import AlgoConfig, CISPOConfig, GRPOConfig
from tsrl.algo.offline import SFTConfig
from tsrl.config import RunConfig, TrainerConfig
from tsrl.generation import Generator, HFGenerator, HFGeneratorConfig
from tsrl.rewards.ladder import Rung
from tsrl.testing.fakes import ScriptedJudge, number_prompt
from tsrl.training.learner import Learner
from tsrl.training.loop import Run, offline_step, train_step
from tsrl.training.sampler import Share
from tsrl.types import Anchor, Group, RewardBatch


class FixedGenerator(Generator):
    """Hands out the same groups every call (a Generator)."""

    def __init__(self, groups: list[Group]) -> None:
        self.groups = groups

    def generate(self, prompts, n, max_new_tokens=None, greedy_first=False, seeds=None) -> list[Group]:
        return self.groups

    def load_weights(self, named_tensors) -> None:
        pass


class FixedRegime:
    """Rewards from a table; a NaN row is a group the regime could not score (a RewardRegime)."""

    def __init__(self, rewards: np.ndarray) -> None:
        self.rewards = rewards

    def score(self, groups) -> RewardBatch:
        return RewardBatch(self.rewards.copy(), {"reward/comparisons_per_sample": 0.0})


class NoPrompts:
    def next_batch(self) -> Share:
        return Share([], [])


def make_run(model, tokenizer, groups, rewards, algo: AlgoConfig) -> Run:
    from accelerate import Accelerator

    model = copy.deepcopy(model).train()
    cfg = RunConfig(
        task=None,
        model=None,
        judge=None,
        reward=None,
        algo=algo,
        generator=HFGeneratorConfig(max_new_tokens=8),
        trainer=TrainerConfig(micro_batch_size=3),
        logger=None,
    )
    learner = Learner(
        cfg, Accelerator(cpu=True), model, tokenizer, optimizer=torch.optim.SGD(model.parameters(), lr=0.5)
    )
    return Run(
        cfg,
        learner.acc,
        None,
        learner,
        FixedGenerator(groups),
        ScriptedJudge(),
        ScriptedJudge(),
        FixedRegime(rewards),
        NoPrompts(),
        None,
        0,
        0.0,
    )


@pytest.fixture
def groups(policy):
    model, tokenizer = policy
    torch.manual_seed(1)
    generator = HFGenerator(model, tokenizer, HFGeneratorConfig(max_new_tokens=8))
    return generator.generate([number_prompt("a", [0]), number_prompt("b", [0]), number_prompt("c", [0])], n=4)


@pytest.mark.parametrize(
    "algo",
    [GRPOConfig(adv_scale="batch", kl_beta=0.1), CISPOConfig(minibatches=2)],
    ids=["grpo_batch_std_kl", "cispo_minibatches"],
)
def test_a_dropped_group_changes_nothing_in_the_update(policy, groups, algo):
    """The step with groups (a, b, c) where b could not be scored must equal the step on (a, c) alone: b is
    not in the forward/backward, the token normaliser, the KL term or the batch std of the advantages."""
    model, tokenizer = policy
    rewards = np.array([[1.0, 0.0, 0.5, 0.25], [np.nan] * 4, [0.0, 0.75, 1.0, 0.5]])
    with_drop = make_run(model, tokenizer, groups, rewards, algo)
    without = make_run(model, tokenizer, [groups[0], groups[2]], rewards[[0, 2]], algo)
    metrics, _, _ = train_step(with_drop, 1)
    reference, _, _ = train_step(without, 1)
    for p, q in zip(with_drop.learner.model.parameters(), without.learner.model.parameters()):
        assert torch.allclose(p, q, atol=1e-6)
    assert not all(
        torch.equal(p, q) for p, q in zip(with_drop.learner.model.parameters(), model.parameters())
    )  # it moved
    assert metrics["train/dropped_groups"] == 1.0 and metrics["train/samples_in_update"] == 8.0
    assert metrics["train/loss"] == pytest.approx(reference["train/loss"], rel=1e-5)


def test_a_step_with_every_group_dropped_leaves_the_policy_alone(policy, groups):
    model, tokenizer = policy
    run = make_run(model, tokenizer, groups, np.full((3, 4), np.nan), GRPOConfig(kl_beta=0.1))
    metrics, _, _ = train_step(run, 1)
    assert all(torch.equal(p, q) for p, q in zip(run.learner.model.parameters(), model.parameters()))
    assert metrics["train/dropped_groups"] == 3.0 and metrics["train/samples_in_update"] == 0.0
    assert run.learner.scheduler.last_epoch == 1  # the schedule still advances one step


class RecordingGenerator(FixedGenerator):
    """Records the engine calls a step makes (sleep, wake_up, load_weights), in order."""

    def __init__(self) -> None:
        super().__init__([])
        self.calls: list[str] = []

    def sleep(self) -> None:
        self.calls.append("sleep")

    def wake_up(self, tags=None) -> None:
        self.calls.append(f"wake_up {tags}")

    def load_weights(self, named_tensors) -> None:
        list(named_tensors)
        self.calls.append("load_weights")


class OnePrompt:
    def __init__(self, prompt) -> None:
        self.prompt = prompt

    def next_batch(self) -> Share:
        return Share([self.prompt], [7])


def test_an_offline_step_puts_the_engine_to_sleep_for_its_update(policy):
    """algo=sft generates nothing, but its update needs the device as much as an RL step's: the engine sleeps before
    the update and wakes around the sync, in the RL step's order (the memory plan counts it asleep)."""
    model, tokenizer = policy
    prompt = number_prompt("a", [2, 1])
    run = make_run(model, tokenizer, [], np.zeros((0, 0)), SFTConfig())
    rungs = [Rung(Anchor("q=2 best"), 1.0), Rung(Anchor("q=1 worse"), 0.0)]
    run.regime = SimpleNamespace(selected={"a": rungs}, ladders={"a": rungs})
    run.sampler, run.generator = OnePrompt(prompt), RecordingGenerator()
    metrics, _, _ = offline_step(run, 1)
    assert run.generator.calls == ["sleep", "wake_up ('weights',)", "load_weights", "wake_up ('kv_cache',)"]
    assert metrics["train/samples_in_update"] == 1.0


def test_processes_add_counters_and_average_everything_else():
    """Whoever emits a metric declares a counter by wrapping it in Count; the loop lists no metric names, so a
    regime's own counter (here constitutional/random_fallbacks) is summed like judge/calls."""
    from tsrl.training.collective import combine_metrics
    from tsrl.types import Count

    ranks = [
        {
            "judge/calls": Count(64),
            "constitutional/random_fallbacks": Count(1),
            "reward/mean": 0.25,
            "judge/tie_rate": 0.5,
        },
        {
            "judge/calls": Count(32),
            "constitutional/random_fallbacks": Count(2),
            "reward/mean": 0.75,
            "judge/tie_rate": 0.0,
            "bootstrap/refresh_calls": Count(12),
        },
    ]
    merged = combine_metrics(ranks)
    assert merged == {
        "judge/calls": 96,
        "constitutional/random_fallbacks": 3,
        "reward/mean": 0.5,
        "judge/tie_rate": 0.25,
        "bootstrap/refresh_calls": 12,
    }
    assert isinstance(merged["judge/calls"], Count) and not isinstance(merged["reward/mean"], Count)


def test_judge_counters_are_counts_and_rates_are_not():
    from tsrl.judging import RubricSimConfig, build_judge
    from tsrl.testing.fakes import NumberTask
    from tsrl.types import Count, PairRequest

    judge = build_judge(RubricSimConfig(flip_prob=0.5, failure="tie", order="both"), NumberTask())  # swap_agreement
    judge.compare([PairRequest(number_prompt("p", [0]), "q=1 a", "q=0 b")])
    metrics = judge.drain_metrics()
    assert all(isinstance(metrics[k], Count) for k in ("calls", "ties", "noise_flips"))
    assert not isinstance(metrics["tie_rate"], Count) and not isinstance(metrics["swap_agreement"], Count)
