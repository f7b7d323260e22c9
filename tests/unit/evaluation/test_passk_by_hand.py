"""Exact pins of pass@k and the pass ratio: the sums over problems worked out by hand (two problems of four
samples, one and four of them correct), every key of the summary, and the k the estimator is reported at.

Written against the mutants `make mutate` found alive: tests/unit/tasks/test_tasks.py checks the headline
numbers, not every key and fallback."""

from __future__ import annotations

import pytest

from tsrl.evaluation.passk import ks_for, pass_at_k, pass_summary, pass_sums
from tsrl.types import Group, Prompt, Rollout


class NumberAnswers:
    """A verifiable task: a response is right when it reads "= 7"; "?" is no answer at all."""

    name = "numbers"
    report_k = (3, 9)  # 3 is reported beside the powers of two; 9 needs more samples than there are

    def verify(self, prompt: Prompt, text: str) -> float:
        return float(text == "= 7")

    def extract(self, text: str) -> str | None:
        return None if text == "?" else text[2:]


class Fixed:
    """Problem a: one right answer in four (and one unanswered); problem b: four right answers."""

    def generate(self, prompts, n):
        texts = {"a": ["= 7", "= 3", "?", "= 1"], "b": ["= 7"] * 4}
        return [Group(p, [1], [Rollout(t, [1] * len(t), [0.0] * len(t), False) for t in texts[p.id]]) for p in prompts]


PROMPTS = [Prompt("a", "x + 2 = 9"), Prompt("b", "x - 1 = 6")]


def test_pass_sums_by_hand() -> None:
    sums = pass_sums(Fixed(), NumberAnswers(), PROMPTS, 4)
    assert sums == pytest.approx(
        {
            "problems": 2.0,
            "accuracy": 0.25 + 1.0,
            "pass@1": 0.25 + 1.0,
            "pass@2": 0.5 + 1.0,  # 1 - C(3,2)/C(4,2)
            "pass@3": 0.75 + 1.0,  # 1 - C(3,3)/C(4,3)
            "pass@4": 2.0,
            "answered": 0.75 + 1.0,
            "length_sum": 3 * 3 + 1 + 3 * 4,
            "samples": 8.0,
        }
    )


def test_pass_summary_by_hand() -> None:
    summary = pass_summary(pass_sums(Fixed(), NumberAnswers(), PROMPTS, 4), 4)
    assert summary == pytest.approx(
        {
            "pass_ratio": 62.5,
            "samples_per_problem": 4.0,
            "pass@1": 62.5,
            "pass@2": 75.0,
            "pass@3": 87.5,
            "pass@4": 100.0,
            "answered": 87.5,
            "mean_length": 22 / 8,
            "problems": 2.0,
        }
    )


def test_a_summary_of_nothing_is_zeros_without_an_answered_share() -> None:
    assert pass_summary({}, 8) == {"pass_ratio": 0.0, "samples_per_problem": 8.0, "mean_length": 0.0, "problems": 0.0}


@pytest.mark.parametrize(
    "n, c, k, expected",
    [(4, 0, 4, 0.0), (4, 1, 4, 1.0), (5, 2, 3, 1 - 1 / 10), (5, 2, 4, 1.0), (6, 1, 1, 1 / 6), (2, 0, 1, 0.0)],
)
def test_pass_at_k_by_hand(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize("n, c, k", [(3, 0, 5), (3, 3, 4), (4, 1, 0), (4, 5, 2), (4, -1, 2), (0, 0, 1)])
def test_pass_at_k_refuses_what_n_samples_cannot_estimate(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match=rf"n={n}, c={c}, k={k}; .*k up to n"):
        pass_at_k(n, c, k)


def test_reported_ks_are_powers_of_two_below_n_then_n_then_the_tasks_own_that_fit() -> None:
    assert ks_for(5) == [1, 2, 4, 5]
    assert ks_for(8) == [1, 2, 4, 8]
    assert ks_for(5, (3, 9, 0)) == [1, 2, 3, 4, 5]
    assert ks_for(2, (2,)) == [1, 2]


class RightOrWrong:
    """A bare verifiable task: nothing but `verify` (no `extract`, no `report_k`); "= 7" is right."""

    name = "bare"

    def verify(self, prompt: Prompt, text: str) -> float:
        return float(text == "= 7")


class AsManyAsAsked:
    """Samples as many completions as it is asked for: the first right, the rest wrong (two tokens each)."""

    def generate(self, prompts, n):
        texts = ["= 7"] + ["= 1"] * (n - 1)
        return [Group(p, [1], [Rollout(t, [1, 2], [0.0, 0.0], False) for t in texts]) for p in prompts]


def test_pass_sums_ask_for_the_samples_and_need_neither_extract_nor_report_k() -> None:
    sums = pass_sums(AsManyAsAsked(), RightOrWrong(), [Prompt("a", "x + 2 = 9")], 3)
    # by hand: 3 samples, 1 right; pass@2 = 1 - C(2,2)/C(3,2) = 2/3; no "answered" share without extract
    assert sums == pytest.approx(
        {
            "problems": 1.0,
            "accuracy": 1 / 3,
            "pass@1": 1 / 3,
            "pass@2": 2 / 3,
            "pass@3": 1.0,
            "length_sum": 6.0,
            "samples": 3.0,
        }
    )


def test_mean_length_of_a_single_sample_is_its_own_length() -> None:
    # one problem, one sample of 5 tokens: 5 / 1
    summary = pass_summary({"problems": 1.0, "accuracy": 1.0, "pass@1": 1.0, "length_sum": 5.0, "samples": 1.0}, 1)
    assert summary == {
        "pass_ratio": 100.0,
        "samples_per_problem": 1.0,
        "pass@1": 100.0,
        "mean_length": 5.0,
        "problems": 1.0,
    }
