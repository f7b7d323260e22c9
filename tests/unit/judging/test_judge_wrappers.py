"""The verdict cache and the failure policy on pointwise grades (Judge.score), with a scripted judge."""

from __future__ import annotations

import importlib

import pytest

from tsrl.judging import Fallback, VerdictCache
from tsrl.testing.fakes import ScriptedJudge
from tsrl.types import PairRequest, Prompt, ScoreRequest

PROMPT = Prompt("p", "Grade this.", fields={"rubric": "numbers high"})


def requests(*texts: str) -> list[ScoreRequest]:
    return [ScoreRequest(PROMPT, t) for t in texts]


def test_grades_are_cached_across_restarts_and_failures_are_not(tmp_path):
    inner = ScriptedJudge(grades={"q=0 broken": None})
    cache = VerdictCache(inner, tmp_path / "c.sqlite", "judge|v1", chunk=2)
    first = cache.score(requests("q=3 a", "q=7 b", "q=3 a", "q=0 broken"))
    assert [s.value for s in first] == [3.0, 7.0, 3.0, None]
    assert [r.response for r in inner.score_requests] == ["q=3 a", "q=7 b", "q=0 broken"]  # duplicate asked once
    assert [s.cached for s in first] == [False, False, True, False]
    cache.close()

    inner = ScriptedJudge(grades={"q=0 broken": None})
    again = VerdictCache(inner, tmp_path / "c.sqlite", "judge|v1")  # a restarted process
    second = again.score(requests("q=7 b", "q=3 a", "q=0 broken"))
    assert [s.value for s in second] == [7.0, 3.0, None]
    assert [r.response for r in inner.score_requests] == ["q=0 broken"]  # only the failure is asked again
    assert again.drain_metrics()["cache_hits"] == 2
    other_rubric = again.score([ScoreRequest(Prompt("p", "Grade this.", fields={"rubric": "numbers low"}), "q=7 b")])
    assert not other_rubric[0].cached  # the rubric is part of the key
    other_judge = VerdictCache(ScriptedJudge(), tmp_path / "c.sqlite", "judge|v2").score(requests("q=7 b"))
    assert not other_judge[0].cached  # so is the judge (model + template)


def test_grades_and_verdicts_do_not_share_keys(tmp_path):
    cache = VerdictCache(ScriptedJudge(), tmp_path / "c.sqlite", "judge|v1")
    cache.score(requests("q=3 a"))
    assert len(cache) == 0  # len counts pairwise verdicts only; the grade lives in its own table


def test_images_are_part_of_the_verdict_key(tmp_path):
    inner = ScriptedJudge()
    cache = VerdictCache(inner, tmp_path / "c.sqlite", "judge|v1")
    page_a, page_b = tmp_path / "a.png", tmp_path / "b.png"
    page_a.write_bytes(b"pixels a")
    page_b.write_bytes(b"pixels b")
    texts = ("q=2 same text", "q=1 same text")
    cache.compare([PairRequest(PROMPT, *texts, first_image=str(page_a))])
    cache.compare([PairRequest(PROMPT, *texts, first_image=str(page_b))])  # other rendering: asked again
    cache.compare([PairRequest(PROMPT, *texts, first_image=str(page_a))])  # same rendering: a hit
    assert len(inner.requests) == 2 and len(cache) == 2


def test_failure_policy_applies_to_grades():
    broken = {"q=0 x": None, "q=0 y": None}
    texts = ("q=4 ok", "q=0 x", "q=0 y")
    tie = Fallback(ScriptedJudge(grades=broken), "tie", seed=0)
    assert [s.value for s in tie.score(requests(*texts))] == [4.0, 5.0, 5.0]
    metrics = tie.drain_metrics()
    assert metrics["fallbacks"] == 2 and metrics["fallbacks/tie"] == 2

    drop = Fallback(ScriptedJudge(grades=broken), "drop", seed=0)
    dropped = drop.score(requests(*texts))
    assert [s.value for s in dropped] == [4.0, None, None] and all(s.error for s in dropped[1:])
    assert drop.drain_metrics()["fallbacks/drop"] == 2

    random_a = Fallback(ScriptedJudge(grades=broken), "random", seed=0).score(requests(*texts))
    random_b = Fallback(ScriptedJudge(grades=broken), "random", seed=0).score(requests(*texts))
    values = [s.value for s in random_a[1:]]
    assert values == [s.value for s in random_b[1:]]  # stable: same question, same draw
    assert all(0.0 <= v <= 10.0 for v in values) and values[0] != values[1]
    assert random_a[1].raw.startswith("[fallback random: scripted failure]")


@pytest.mark.parametrize("name", ["OpenAIJudgeConfig", "RetryConfig", "HedgeConfig", "RateConfig"])
def test_a_name_that_moved_to_tsrl_remote_still_imports_with_a_warning_that_says_where(name):
    module = importlib.import_module("tsrl.judging")
    with pytest.warns(DeprecationWarning, match=f"tsrl.judging.{name} has moved: import it from tsrl.remote"):
        moved = getattr(module, name)
    assert moved is getattr(importlib.import_module(module.MOVED[name]), name)
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        _ = module.NoSuchName
