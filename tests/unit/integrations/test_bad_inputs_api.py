"""The public API (tsrl.score_groups, tsrl.build_scorer) and the verdict cache refuse a wrong argument in one
sentence naming it (a UserError, a ValueError), before any judge call, instead of failing deep inside."""

from __future__ import annotations

import pytest

import tsrl
from tsrl.errors import DataError, UserError
from tsrl.judging.cache import VerdictCache
from tsrl.testing.fakes import NeverAsked
from tsrl.types import Prompt


@pytest.mark.parametrize(
    "prompts, completions, message",
    [
        ([None], [["a", "b"]], r"prompts\[0\] is None \(NoneType\); a prompt is a str or a Prompt"),
        (["ok", 3], [["a", "b"], ["c", "d"]], r"prompts\[1\] is 3 \(int\)"),
        ("one prompt", [["a", "b"]], "prompts must be a non-empty list of strings or tsrl.types.Prompt"),
        ([], [], "prompts must be a non-empty list"),
        (["p", "q"], ["a", "b"], r"completions\[0\] is 'a', not a non-empty list of str"),
        (["p"], [[]], r"completions\[0\] is \[\], not a non-empty list"),
        (["p"], [["a", None]], r"completions\[0\]\[1\] is None; every completion is a str"),
        (["p", "q"], [["a", "b"]], "got 2 prompts and 1 lists"),
        (["p", "q"], [["a", "b"], ["c"]], r"got group sizes \[1, 2\]"),
        (["p"], None, "completions must hold one list of completions per prompt.*got NoneType"),
    ],
)
def test_score_groups_names_the_wrong_argument(prompts, completions, message):
    with pytest.raises(UserError, match=message):
        tsrl.score_groups(prompts, completions, regime="in_batch")


def test_build_scorer_names_a_prompt_that_is_not_text():
    with pytest.raises(UserError, match=r"prompts\[1\] is \{'text': 'x'\} \(dict\)"):
        tsrl.build_scorer("in_batch", prompts=[Prompt(id="a", text="a"), {"text": "x"}])


def test_build_scorer_names_a_bare_string_of_overrides_and_a_policy_that_is_not_a_pair():
    with pytest.raises(UserError, match=r"overrides must be a list of strings like \['judge.flip_prob=0.1'\]"):
        tsrl.build_scorer("in_batch", prompts=["p"], overrides="judge.flip_prob=0.1")
    with pytest.raises(UserError, match=r"policy must be \(model, tokenizer\), got object"):
        tsrl.build_scorer("in_batch", prompts=["p"], policy=object())


def test_a_misspelled_reward_option_names_the_close_match():
    with pytest.raises(UserError, match=r"reward.kk is not a setting of LadderConfig; did you mean reward.k\?"):
        tsrl.score_groups(["p"], [["a", "b"]], kk=3)


def test_an_unknown_prompt_for_a_ladder_names_regimes_that_exist():
    with pytest.raises(UserError, match=r"regime without anchors \(reward=in_batch, arena or self_bootstrap\)"):
        tsrl.score_groups(["a prompt of no task"], [["a", "b"]], regime="ladder")


def test_a_verdict_cache_path_that_is_a_folder_is_named_with_the_fix(tmp_path):
    with pytest.raises(DataError, match=rf"judge.cache_path={tmp_path} is a folder, not a file; point"):
        VerdictCache(NeverAsked(), tmp_path, "judge")


def test_a_verdict_cache_under_a_file_is_named_with_the_fix(tmp_path):
    (tmp_path / "plain").write_text("a file, not a folder")
    with pytest.raises(
        DataError, match=r"judge.cache_path=.*plain/verdicts.sqlite lies under .*plain, which is a file"
    ):
        VerdictCache(NeverAsked(), tmp_path / "plain" / "verdicts.sqlite", "judge")
