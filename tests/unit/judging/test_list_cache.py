"""The verdict cache on lists (Judge.score_lists): its own table `lists`, keyed by the list identity, prompt, rubric
and the responses with their image digests in the order shown; only real answers stored; a hit costs nothing."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tsrl.judging import JudgePolicyConfig, VerdictCache, wrap
from tsrl.judging.cache import list_key
from tsrl.testing.fakes import AnswerJudge, ScriptedJudge
from tsrl.types import ListRequest, ListScores, Prompt, ScoreRequest

PROMPT = Prompt("p", "Rank these.", fields={"rubric": "higher q is better"})


def ask(cache: VerdictCache, *responses: str, prompt: Prompt = PROMPT, images: tuple = ()) -> ListScores:
    return cache.score_lists([ListRequest(prompt, responses, images)])[0]


def test_a_list_is_stored_once_and_a_hit_keeps_its_scores_and_raw_text_at_no_cost(tmp_path):
    inner = ScriptedJudge()
    cache = VerdictCache(inner, tmp_path / "v.sqlite", "judge|v1")
    miss = ask(cache, "q=3 a", "q=7 b")
    assert (miss.values, miss.tokens, miss.cached) == ([3.0, 7.0], 3, False)
    hit = ask(cache, "q=3 a", "q=7 b")
    assert (hit.values, hit.raw, hit.tokens, hit.cached) == ([3.0, 7.0], miss.raw, 0, True)
    assert len(inner.list_requests) == 1
    metrics = cache.drain_metrics()
    assert metrics["cache_hits"] == 1 and len(cache) == 0  # len counts pairwise verdicts; lists have their table
    cache.close()
    again = VerdictCache(ScriptedJudge(), tmp_path / "v.sqlite", "judge|v1")  # a restarted process
    assert ask(again, "q=3 a", "q=7 b").cached


def test_the_shown_order_the_rubric_the_images_and_the_identity_are_part_of_the_key(tmp_path):
    """The same responses in another order are another question (the judge's position bias differs); so are
    another rubric, another rendering and another judge."""
    inner = ScriptedJudge()
    cache = VerdictCache(inner, tmp_path / "v.sqlite", "judge|v1")
    page = tmp_path / "a.png"
    page.write_bytes(b"pixels")
    ask(cache, "q=3 a", "q=7 b")
    reordered = ask(cache, "q=7 b", "q=3 a")
    assert not reordered.cached and reordered.values == [7.0, 3.0]
    assert not ask(cache, "q=3 a", "q=7 b", prompt=Prompt("p", "Rank these.", fields={"rubric": "other"})).cached
    assert not ask(cache, "q=3 a", "q=7 b", images=(str(page), None)).cached
    assert ask(cache, "q=3 a", "q=7 b", images=(str(page), None)).cached
    assert ask(cache, "q=3 a", "q=7 b", images=(None, None)).cached  # no images = no image for each
    assert not ask(VerdictCache(ScriptedJudge(), tmp_path / "v.sqlite", "judge|v2"), "q=3 a", "q=7 b").cached
    assert len(inner.list_requests) == 4  # the first, reordered, other rubric, with an image
    a, b = ListRequest(PROMPT, ("x", "y")), ListRequest(PROMPT, ("y", "x"))
    assert list_key("j", a) != list_key("j", b) and list_key("j", a) == list_key("j", ListRequest(PROMPT, ("x", "y")))


def test_failures_are_not_stored_and_duplicates_in_a_batch_are_asked_once(tmp_path):
    inner = ScriptedJudge(grades={"q=0 broken": None})
    cache = VerdictCache(inner, tmp_path / "v.sqlite", "judge|v1", chunk=1)
    requests = [ListRequest(PROMPT, r) for r in (("q=1 a", "q=2 b"), ("q=1 a", "q=0 broken"), ("q=1 a", "q=2 b"))]
    answers = cache.score_lists(requests)
    assert [a.values for a in answers] == [[1.0, 2.0], None, [1.0, 2.0]]
    assert [a.cached for a in answers] == [False, False, True] and len(inner.list_requests) == 2
    assert answers[1].error.startswith("unparseable_list")
    assert [a.cached for a in cache.score_lists(requests)] == [True, False, True]  # the failure is asked again
    assert len(inner.list_requests) == 3


def test_lists_live_in_their_own_table_as_json_in_the_shown_order(tmp_path):
    path = tmp_path / "v.sqlite"
    cache = VerdictCache(AnswerJudge(lambda r: ListScores([2.5, 9.0, 0.0], raw="ok")), path, "judge|v1")
    cache.score_lists([ListRequest(PROMPT, ("c", "a", "b"))])
    cache.close()
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT key, value, raw FROM lists").fetchall()
        assert [(json.loads(v), raw) for _, v, raw in rows] == [([2.5, 9.0, 0.0], "ok")]
        assert rows[0][0] == list_key("judge|v1|list", ListRequest(PROMPT, ("c", "a", "b")))  # the default identity
        assert db.execute("SELECT COUNT(*) FROM scores").fetchone() == (0,)
    finally:
        db.close()


class ListJudge(ScriptedJudge):
    identity, score_identity, list_identity = "model|pairwise-v1", "model|pointwise-v1", "model|listwise-v1"


def test_wrap_keys_lists_by_the_judges_list_identity(tmp_path):
    """build_judge's composition hands the model judge's list_identity to the cache: two judges whose verdicts and
    grades share identities but whose list templates differ do not share lists."""
    cfg = JudgePolicyConfig(cache_path=str(tmp_path / "v.sqlite"))
    request = [ListRequest(PROMPT, ("q=1 a", "q=2 b"))]
    first = wrap(ListJudge(), cfg)
    first.score_lists(request)
    first.score([ScoreRequest(PROMPT, "q=1 a")])
    other = ListJudge()
    other.list_identity = "model|listwise-v2"
    second = wrap(other, cfg)
    assert not second.score_lists(request)[0].cached
    assert second.score([ScoreRequest(PROMPT, "q=1 a")])[0].cached  # the grade's identity is unchanged
    assert wrap(ListJudge(), cfg).score_lists(request)[0].cached


@pytest.mark.parametrize("chunk, kept", [(1, 2), (2, 2), (3, 0)])
def test_misses_go_to_the_judge_in_committed_chunks(tmp_path, chunk, kept):
    """A judge that dies on its third list: the chunks answered before the one it died in are kept."""
    asked = []

    def answer(request: ListRequest) -> ListScores:
        asked.append(request)
        if len(asked) == 3:
            raise RuntimeError("the judge died")
        return ListScores([1.0, 2.0])

    cache = VerdictCache(AnswerJudge(answer), tmp_path / "v.sqlite", "j", chunk=chunk)
    with pytest.raises(RuntimeError):
        cache.score_lists([ListRequest(PROMPT, (f"a{i}", "b")) for i in range(4)])
    assert cache.db.execute("SELECT COUNT(*) FROM lists").fetchone()[0] == kept
