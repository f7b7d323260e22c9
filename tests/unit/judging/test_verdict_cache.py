"""Exact pins of the verdict cache: keys, hits, duplicates in one batch, chunked commits, stored values that
must not change between versions, and use from another thread.

Each test checks a behaviour the module docstring promises on a case small enough to work out by hand, written
against the mutants `make mutate` found alive (this file pins what the broader tests leave loose).
"""

from __future__ import annotations

import hashlib
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import pytest

from tsrl.judging import VerdictCache
from tsrl.judging.cache import cache_key, image_digest
from tsrl.testing.fakes import PAIR_PROMPT, AnswerJudge, first_wins, numbered_pairs
from tsrl.types import PairRequest, Prompt, Score, ScoreRequest, Verdict


def test_image_digest_hashes_the_file_bytes(tmp_path):
    """A path names a file: its bytes are hashed (a re-rendered page at the same path is a new question; two
    paths holding the same bytes are one). A string that is no file (a data URL) is hashed as text."""
    page = tmp_path / "page.png"
    page.write_bytes(b"pixels v1")
    assert image_digest(str(page)) == hashlib.sha256(b"pixels v1").hexdigest()[:16]
    assert image_digest("data:image/png;base64,AAAA") == hashlib.sha256(b"data:image/png;base64,AAAA").hexdigest()[:16]
    assert image_digest(None) == "" and image_digest("") == ""

    inner = AnswerJudge(lambda r: Verdict(0.75))
    cache = VerdictCache(inner, tmp_path / "deep" / "er" / "v.sqlite", "judge|v1")  # parent folders are made

    def ask(path) -> bool:
        return cache.compare([PairRequest(PAIR_PROMPT, "x", "y", first_image=str(path))])[0].cached

    assert ask(page) is False
    assert ask(page) is True
    page.write_bytes(b"pixels v2")  # same path, new rendering
    assert ask(page) is False
    copy = tmp_path / "copy.png"
    copy.write_bytes(b"pixels v2")  # other path, same bytes
    assert ask(copy) is True
    assert len(inner.asked) == 2 and len(cache) == 2


def test_a_hit_keeps_the_raw_text_and_costs_no_tokens(tmp_path):
    """Asked in either order, a stored verdict comes back for the order shown; a pointwise grade too."""
    inner = AnswerJudge(
        lambda r: (
            Verdict(0.75, raw=f"judged {r.first}", tokens=9, latency_s=0.5)
            if isinstance(r, PairRequest)
            else Score(6.0, raw="graded", tokens=4)
        )
    )
    forward = PairRequest(PAIR_PROMPT, "b text", "a text")  # shown flipped: "a text" < "b text" is canonical first
    backward = PairRequest(PAIR_PROMPT, "a text", "b text")
    cache = VerdictCache(inner, tmp_path / "v.sqlite", "judge|v1")
    miss = cache.compare([forward, backward])
    assert [(v.p_first, v.tokens, v.cached) for v in miss] == [(0.75, 9, False), (0.75, 9, False)]
    hits = cache.compare([forward, backward])
    assert [(v.p_first, v.raw, v.tokens, v.cached) for v in hits] == [
        (0.75, "judged b text", 0, True),
        (0.75, "judged a text", 0, True),
    ]
    grade = ScoreRequest(PAIR_PROMPT, "a text")
    assert cache.score([grade])[0].tokens == 4
    hit = cache.score([grade])[0]
    assert (hit.value, hit.raw, hit.tokens, hit.cached) == (6.0, "graded", 0, True)
    metrics = cache.drain_metrics()
    assert metrics["cache_hits"] == 3 and metrics["tokens"] == 0  # hits add no tokens of their own


def test_duplicates_in_one_batch_share_the_answer_and_a_failure_error(tmp_path):
    inner = AnswerJudge(
        lambda r: (
            Verdict(None, raw="?", error="parse: no verdict")
            if "bad" in r.first
            else Verdict(0.25, raw="fine", tokens=5)
        )
    )
    cache = VerdictCache(inner, tmp_path / "v.sqlite", "judge|v1")
    good, bad = PairRequest(PAIR_PROMPT, "good a", "good b"), PairRequest(PAIR_PROMPT, "bad a", "bad b")
    out = cache.compare([bad, good, bad, good])
    assert len(inner.asked) == 2  # each distinct question once
    assert [(v.p_first, v.error, v.cached) for v in out] == [
        (None, "parse: no verdict", False),
        (0.25, None, False),
        (None, "parse: no verdict", False),
        (0.25, None, True),
    ]
    assert out[3].raw == "fine" and out[2].raw == "?"
    metrics = cache.drain_metrics()
    # the two duplicates are counted by the cache (one error, one hit), the originals by the inner judge
    assert (metrics["calls"], metrics["errors"], metrics["cache_hits"]) == (4, 1, 1)
    assert len(cache) == 1  # the failure is not stored


def test_cache_hit_rate_is_hits_over_requests(tmp_path):
    path = tmp_path / "v.sqlite"
    first = VerdictCache(AnswerJudge(first_wins), path, "judge|v1")
    first.compare(numbered_pairs(1))
    assert first.drain_metrics()["cache_hit_rate"] == 0.0
    assert first.drain_metrics()["cache_hit_rate"] == 0.0  # nothing asked since: no division by zero
    first.close()
    again = VerdictCache(AnswerJudge(first_wins), path, "judge|v1")
    again.compare(numbered_pairs(3))  # pair 0 is stored, pairs 1 and 2 are new
    metrics = again.drain_metrics()
    assert metrics["calls"] == 3 and metrics["cache_hits"] == 1
    assert metrics["cache_hit_rate"] == pytest.approx(1 / 3)


def test_misses_go_to_the_judge_in_committed_chunks(tmp_path):
    """chunk = misses per request batch and per transaction: 5 misses in chunks of 2 are 2 + 2 + 1, and a judge
    failing in the third chunk leaves the first two chunks stored. chunk ≤ 0 means 1."""
    inner = AnswerJudge(first_wins)
    VerdictCache(inner, tmp_path / "a.sqlite", "j", chunk=2).compare(numbered_pairs(5))
    assert [len(b) for b in inner.batches] == [2, 2, 1]
    inner = AnswerJudge(first_wins)
    VerdictCache(inner, tmp_path / "b.sqlite", "j", chunk=0).compare(numbered_pairs(2))
    assert [len(b) for b in inner.batches] == [1, 1]
    inner = AnswerJudge(first_wins)
    VerdictCache(inner, tmp_path / "c.sqlite", "j").compare(numbered_pairs(300))
    assert [len(b) for b in inner.batches] == [256, 44]  # the default chunk

    def dies_on_the_fifth(r: PairRequest) -> Verdict:
        if r.first.endswith(" 4"):
            raise RuntimeError("judge process killed")
        return Verdict(1.0)

    crashing = VerdictCache(AnswerJudge(dies_on_the_fifth), tmp_path / "d.sqlite", "j", chunk=2)
    with pytest.raises(RuntimeError):
        crashing.compare(numbered_pairs(5))
    assert len(crashing) == 4


def test_the_default_score_identity_is_the_judge_identity_plus_pointwise(tmp_path):
    path = tmp_path / "v.sqlite"
    VerdictCache(AnswerJudge(lambda r: Score(7.0)), path, "judge|v1").score([ScoreRequest(PAIR_PROMPT, "x")])
    same = VerdictCache(AnswerJudge(lambda r: Score(1.0)), path, "other", score_identity="judge|v1|pointwise")
    assert same.score([ScoreRequest(PAIR_PROMPT, "x")])[0].value == 7.0
    other = VerdictCache(AnswerJudge(lambda r: Score(1.0)), path, "judge|v1", score_identity="judge|v2|pointwise")
    assert other.score([ScoreRequest(PAIR_PROMPT, "x")])[0].value == 1.0


def test_no_rubric_and_an_empty_rubric_are_the_same_criteria(tmp_path):
    bare, empty = Prompt("p", "Tell a joke."), Prompt("p", "Tell a joke.", fields={"rubric": ""})
    assert cache_key("j", PairRequest(bare, "a", "b")) == cache_key("j", PairRequest(empty, "a", "b"))
    cache = VerdictCache(AnswerJudge(lambda r: Score(6.0)), tmp_path / "v.sqlite", "j")
    cache.score([ScoreRequest(bare, "x")])
    assert cache.score([ScoreRequest(empty, "x")])[0].cached


def test_keys_and_stored_values_do_not_change_between_versions(tmp_path):
    """A cache file outlives the code that wrote it: a changed key silently re-pays for every stored verdict.
    These keys were computed by this version (identity, prompt text, rubric, canonical pair, shown order). The
    verdict is stored for the canonical order (a flipped request's ¾ is stored as ¼); grades as given."""
    prompt = Prompt("p", "Tell a joke.", fields={"rubric": "Funnier wins."})
    flipped, canonical = PairRequest(prompt, "b joke", "a joke"), PairRequest(prompt, "a joke", "b joke")
    flipped_key, canonical_key = cache_key("judge|v1", flipped), cache_key("judge|v1", canonical)
    assert (flipped_key[0][:16], flipped_key[1]) == ("0fcf5015f4f221c7", True)
    assert (canonical_key[0][:16], canonical_key[1]) == ("c233c3cc3d22ca7e", False)
    assert cache_key("judge|v1", PairRequest(prompt, "same", "same"))[0][:16] == "a8841e9f37d45e5d"
    path = tmp_path / "v.sqlite"
    cache = VerdictCache(
        AnswerJudge(lambda r: Verdict(0.75) if isinstance(r, PairRequest) else Score(7.0)), path, "judge|v1"
    )
    cache.compare([flipped, canonical])
    cache.score([ScoreRequest(prompt, "a joke")])
    cache.close()
    db = sqlite3.connect(path)
    try:
        assert dict(db.execute("SELECT key, p FROM verdicts").fetchall()) == {
            flipped_key[0]: 0.25,
            canonical_key[0]: 0.75,
        }
        assert db.execute("SELECT value FROM scores").fetchall() == [(7.0,)]
    finally:
        db.close()


def test_a_cache_answers_from_another_thread(tmp_path):
    cache = VerdictCache(AnswerJudge(first_wins), tmp_path / "v.sqlite", "j")
    cache.compare(numbered_pairs(1))
    with ThreadPoolExecutor(1) as pool:
        answers = pool.submit(cache.compare, numbered_pairs(2)).result()
    assert [v.cached for v in answers] == [True, False]
