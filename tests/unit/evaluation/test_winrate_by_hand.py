"""Exact pins of the held-out win-rate: the sums per reference set, tier and in all, on a case worked out by hand
(two completions against three tiered anchors, one verdict missing), and the percentages made from them.

Written against the mutants `make mutate` found alive: the broader tests in test_heldout_reference.py check the
headline of whole tasks, not every sum and key."""

from __future__ import annotations

import pytest

from tsrl.errors import ConfigError
from tsrl.evaluation.winrate import (
    EVERY_ANCHOR,
    REFERENCE_SETS,
    ReferenceSet,
    check_references,
    percent,
    reference_set,
    repeated_share,
    winrate_summary,
    winrate_sums,
)
from tsrl.testing.fakes import ScriptedJudge
from tsrl.types import Anchor, Group, Prompt, Rollout

PROMPT = Prompt("p", "write", anchors=(Anchor("q=3 top", "top"), Anchor("q=1 mid", "mid"), Anchor("q=0 low", "low")))
TOP_ONLY = ReferenceSet(("top",), "the top tier", "—", "the top anchor")


class TwoCompletions:
    """Two completions of quality 2 (3 and 5 tokens): each loses to the top anchor and beats the other two."""

    def generate(self, prompts, n):
        rollouts = [Rollout("q=2 a", [1, 2, 3], [0.0] * 3, False), Rollout("q=2 b", [1, 2, 3, 4, 5], [0.0] * 5, False)]
        return [Group(p, [1], rollouts) for p in prompts]


def sums(reference: ReferenceSet = TOP_ONLY, groups_out: list | None = None) -> dict[str, float]:
    judge = ScriptedJudge({("q=2 a", "q=0 low"): None})  # this verdict fails: counted missing, in no sum
    return winrate_sums(TwoCompletions(), judge, [PROMPT], 2, reference, groups_out)


def test_sums_count_wins_per_tier_in_all_and_against_the_reference_set() -> None:
    kept: list[Group] = []
    assert sums(groups_out=kept) == {
        "n/reference": 2.0,
        "wins/reference": 0.0,
        "wins/all": 3.0,
        "n/all": 5.0,
        "wins/top": 0.0,
        "n/top": 2.0,
        "wins/mid": 2.0,
        "n/mid": 2.0,
        "wins/low": 1.0,
        "n/low": 1.0,
        "missing": 1.0,
        "length_sum": 8.0,
        "repeated_sum": 0.0,
        "samples": 2.0,
    }
    assert [g.prompt for g in kept] == [PROMPT]  # heldout.jsonl receives the generated groups


def test_every_anchor_is_the_reference_set_by_default_and_untiered_anchors_count_as_untiered() -> None:
    prompt = Prompt("u", "write", anchors=(Anchor("q=1 real", ""),))
    result = winrate_sums(TwoCompletions(), ScriptedJudge(), [prompt], 2, EVERY_ANCHOR)
    assert result["wins/reference"] == result["wins/untiered"] == result["wins/all"] == 2.0
    assert result["n/reference"] == result["n/untiered"] == 2.0 and "missing" not in result


def test_summary_percentages_by_hand() -> None:
    assert winrate_summary(sums()) == {
        "winrate": 0.0,  # against the top tier alone
        "winrate_all": 60.0,  # 3 of 5 answered verdicts
        "winrate_top": 0.0,
        "winrate/top": 0.0,
        "winrate/mid": 100.0,
        "winrate/low": 100.0,
        "mean_length": 4.0,
        "repeated_bigrams": 0.0,
        "missing_verdicts": 1.0,
    }


def test_summary_without_a_reference_count_or_a_top_tier_heads_with_all_tiers() -> None:
    plain = {"wins/all": 1.5, "n/all": 2.0, "wins/mid": 1.5, "n/mid": 2.0}
    assert winrate_summary(plain) == {
        "winrate": 75.0,
        "winrate_all": 75.0,
        "winrate/mid": 75.0,
        "mean_length": 0.0,
        "repeated_bigrams": 0.0,
        "missing_verdicts": 0.0,
    }


@pytest.mark.parametrize(
    "given, expected",
    [({"wins/x": 1.0, "n/x": 4.0}, 25.0), ({"wins/x": 0.5, "n/x": 0.5}, 50.0), ({}, 0.0), ({"wins/x": 2.0}, 200.0)],
)
def test_percent_divides_by_the_count_or_by_one_when_there_is_none(given, expected) -> None:
    assert percent(given, "x") == expected


def test_the_judge_is_shown_the_prompt_and_every_missing_verdict_is_counted() -> None:
    judge = ScriptedJudge({("q=2 a", "q=0 low"): None, ("q=2 b", "q=0 low"): None})  # both verdicts vs low fail
    result = winrate_sums(TwoCompletions(), judge, [PROMPT], 2, TOP_ONLY)
    assert [r.prompt for r in judge.requests] == [PROMPT] * 6  # 2 completions x 3 anchors, each with its prompt
    assert result["missing"] == 2.0 and "n/low" not in result and result["n/all"] == 4.0


def test_summary_reports_the_top_tier_from_a_single_verdict() -> None:
    # one verdict against a top anchor, won: 1 / 1; one sample of 3 tokens: mean length 3 / 1
    one = {"wins/all": 1.0, "n/all": 1.0, "wins/top": 1.0, "n/top": 1.0, "length_sum": 3.0, "samples": 1.0}
    one["repeated_sum"] = 0.25
    assert winrate_summary(one) == {
        "winrate": 100.0,
        "winrate_all": 100.0,
        "winrate_top": 100.0,
        "winrate/top": 100.0,
        "mean_length": 3.0,
        "repeated_bigrams": 25.0,
        "missing_verdicts": 0.0,
    }


def test_a_task_without_a_listed_reference_set_is_measured_against_every_anchor() -> None:
    assert reference_set("code") is EVERY_ANCHOR
    assert reference_set("stories") is REFERENCE_SETS["stories"]


def test_a_prompt_without_anchors_is_refused_asking_for_a_reference_anchor() -> None:
    bare = Prompt("b", "write")  # no anchor at all: even "every anchor" leaves its headline undefined
    with pytest.raises(ConfigError, match=r"prompt 'b' \(1 of 2\).*give every held-out prompt a reference anchor \("):
        check_references("code", [PROMPT, bare], EVERY_ANCHOR)


@pytest.mark.parametrize(
    "text, share",
    [
        ("", 0.0),
        ("one", 0.0),
        ("a fine joke about a llama", 0.0),
        ("he he he he", 2 / 3),  # bigrams (he he) x3: two repeat the first
        ("He. he, HE he", 2 / 3),  # words, not punctuation or case
        ("the cat and the cat and the cat", 4 / 7),  # 7 bigrams, 3 distinct
    ],
)
def test_repeated_share_by_hand(text: str, share: float) -> None:
    assert repeated_share(text) == pytest.approx(share)


class LoopingAndFine:
    """One sample stuck in a loop, one fine: the evaluation's repeated_bigrams is their mean share."""

    def generate(self, prompts, n):
        loop = Rollout("q=2 he he he he", [1] * 4, [0.0] * 4, True)
        fine = Rollout("q=2 a b c", [1] * 4, [0.0] * 4, False)
        return [Group(p, [1], [loop, fine]) for p in prompts]


def test_a_looping_sample_shows_in_repeated_bigrams() -> None:
    result = winrate_sums(LoopingAndFine(), ScriptedJudge(), [PROMPT], 2, EVERY_ANCHOR)
    assert result["repeated_sum"] == pytest.approx(2 / 5)  # "q 2 he he he he": 5 bigrams, 2 repeat (he he)
    assert winrate_summary(result)["repeated_bigrams"] == pytest.approx(20.0)  # (0.4 + 0) / 2 samples
