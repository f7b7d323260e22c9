"""Exact pins of the judge wrappers (swapped and mirrored requests, Fallback, Budget, RandomOrder, BothOrders,
Noise), with a fake judge whose answers make each wrapper's effect visible (a judge that always prefers the first
response shows every swap). The random parts are stable hashes (tsrl.judging.base.stable_uniform): a test either
always passes or always fails; where one relies on a hash behaving like a coin, its docstring gives the odds.

Each test checks a behaviour the module docstring promises on a case small enough to work out by hand, written
against the mutants `make mutate` found alive (this file pins what the broader tests leave loose).
"""

from __future__ import annotations

import pytest

from tsrl.judging import (
    BothOrders,
    Budget,
    BudgetConfig,
    BudgetExceeded,
    Fallback,
    Noise,
    RandomOrder,
    set_noise_stream,
)
from tsrl.judging.base import stable_uniform
from tsrl.judging.wrappers import mirrored, swapped
from tsrl.testing.fakes import PAIR_PROMPT, AnswerJudge, first_wins, numbered_pairs
from tsrl.types import PairRequest, Score, ScoreRequest, Verdict


def test_swapped_exchanges_texts_and_images_and_mirrored_complements():
    request = PairRequest(PAIR_PROMPT, "a", "b", first_image="a.png", second_image="b.png")
    assert swapped(request) == PairRequest(PAIR_PROMPT, "b", "a", first_image="b.png", second_image="a.png")
    verdict = Verdict(0.25, raw="r", error=None, tokens=3)
    assert mirrored(verdict) == Verdict(0.75, raw="r", tokens=3)
    assert mirrored(Verdict(None, error="e")).p_first is None


def failing(texts: set[str]) -> AnswerJudge:
    """Verdict ¾ (grade 4) for everything except responses in `texts`, which fail with a timeout error."""

    def answer(r):
        text = r.first if isinstance(r, PairRequest) else r.response
        if isinstance(r, PairRequest):
            return Verdict(None, raw="", error="timeout: slow") if text in texts else Verdict(0.75, raw="ok")
        return Score(None, error="timeout: slow") if text in texts else Score(4.0, raw="ok")

    return AnswerJudge(answer)


def test_fallback_leaves_real_verdicts_alone_and_replaces_failures():
    requests = [PairRequest(PAIR_PROMPT, "fine", "x"), PairRequest(PAIR_PROMPT, "broken", "x")]
    for policy, expected in (("tie", 0.5), ("drop", None)):
        judge = Fallback(failing({"broken"}), policy, seed=0)
        real, replaced = judge.compare(requests)
        assert (real.p_first, real.raw, real.error) == (0.75, "ok", None)
        assert replaced.p_first == expected and replaced.error == "timeout: slow"
        metrics = judge.drain_metrics()
        assert metrics["fallbacks"] == 1 and metrics[f"fallbacks/{policy}"] == 1
    tie = Fallback(failing({"broken"}), "tie", seed=0).compare(requests)[1]
    assert tie.raw == "[fallback tie: timeout: slow] "
    clean = Fallback(failing(set()), "tie", seed=0)
    clean.compare(requests)
    assert "fallbacks" not in clean.drain_metrics()


def test_random_fallback_is_a_seeded_coin_per_pair():
    """The winner is stable_uniform(seed, "fallback", prompt id, first, second) < ½. Over 64 failed pairs both
    winners occur and seeds 0 and 1 disagree somewhere (each has probability 1 − 2·2⁻⁶⁴ for a fair hash)."""
    requests = [PairRequest(PAIR_PROMPT, f"broken {i}", f"other {i}") for i in range(64)]
    broken = {r.first for r in requests}

    def winners(seed: int) -> list[float]:
        return [v.p_first for v in Fallback(failing(broken), "random", seed).compare(requests)]

    seed0 = winners(0)
    assert seed0 == [float(stable_uniform(0, "fallback", "p", r.first, r.second) < 0.5) for r in requests]
    assert set(seed0) == {0.0, 1.0} and seed0 == winners(0) and seed0 != winners(1)


def test_random_grade_fallback_is_a_seeded_uniform_grade():
    requests = [ScoreRequest(PAIR_PROMPT, f"broken {i}") for i in range(16)]
    broken = {r.response for r in requests}

    def grades(seed: int) -> list[float]:
        return [s.value for s in Fallback(failing(broken), "random", seed).score(requests)]

    assert grades(3) == pytest.approx([10.0 * stable_uniform(3, "fallback-score", "p", r.response) for r in requests])
    assert grades(3) != grades(4)
    fine = Fallback(failing(set()), "random", 3).score(requests)
    assert [(s.value, s.raw) for s in fine] == [(4.0, "ok")] * 16


# --- wrappers: Budget ------------------------------------------------------------------------------------------


def tokens_judge(tokens: int) -> AnswerJudge:
    return AnswerJudge(
        lambda r: Verdict(1.0, tokens=tokens) if isinstance(r, PairRequest) else Score(5.0, tokens=tokens)
    )


def ask_n(judge: Budget, method: str, n: int) -> list:
    """n pairwise questions (method compare) or n grades (method score) in one batch."""
    return getattr(judge, method)(numbered_pairs(n) if method == "compare" else [ScoreRequest(PAIR_PROMPT, "x")] * n)


@pytest.mark.parametrize("method", ["compare", "score"])
def test_budget_refuses_a_batch_exactly_when_calls_would_pass_the_step_limit(method):
    inner = tokens_judge(1)
    judge = Budget(inner, BudgetConfig(max_calls_per_step=3))
    assert len(ask_n(judge, method, 2)) == 2
    assert len(ask_n(judge, method, 1)) == 1  # 2 + 1 = 3: at the limit, allowed
    with pytest.raises(
        BudgetExceeded, match=r"3 calls made and 1 more needed exceed judge.budget.max_calls_per_step=3"
    ):
        ask_n(judge, method, 1)
    assert len(inner.asked) == 3  # the refused batch never reached the judge
    judge.drain_metrics()  # a new step
    assert len(ask_n(judge, method, 3)) == 3
    with pytest.raises(BudgetExceeded, match="max_calls_per_step=3"):
        ask_n(judge, method, 4)  # one batch alone larger than the step


def test_budget_counts_the_run_across_steps():
    judge = Budget(tokens_judge(1), BudgetConfig(max_calls_per_run=5, max_calls_per_step=3))
    judge.compare(numbered_pairs(3))
    judge.drain_metrics()
    judge.compare(numbered_pairs(2))  # run total 5 = the limit
    judge.drain_metrics()
    with pytest.raises(BudgetExceeded, match="max_calls_per_run=5"):
        judge.compare(numbered_pairs(1))


@pytest.mark.parametrize("method", ["compare", "score"])
def test_budget_stops_after_a_batch_whose_tokens_pass_the_limit(method):
    for cfg, name in (
        (BudgetConfig(max_tokens_per_step=12), "max_tokens_per_step=12"),
        (BudgetConfig(max_tokens_per_run=12), "max_tokens_per_run=12"),
    ):
        judge = Budget(tokens_judge(4), cfg)
        ask_n(judge, method, 2)
        ask_n(judge, method, 1)  # 12 tokens: at the limit, allowed
        with pytest.raises(BudgetExceeded, match=f"16 judge tokens exceed judge.budget.{name}"):
            ask_n(judge, method, 1)
    step = Budget(tokens_judge(4), BudgetConfig(max_tokens_per_step=12, max_tokens_per_run=20))
    step.compare(numbered_pairs(3))
    step.drain_metrics()  # the step's tokens start again, the run's do not
    step.compare(numbered_pairs(2))  # run: 20
    step.drain_metrics()
    with pytest.raises(BudgetExceeded, match="24 judge tokens exceed judge.budget.max_tokens_per_run=20"):
        step.compare(numbered_pairs(1))


def test_an_unlimited_budget_passes_everything_and_the_inner_metrics():
    inner = tokens_judge(100)
    judge = Budget(inner, BudgetConfig())
    assert (
        len(judge.compare(numbered_pairs(50))) == 50 and len(judge.score([ScoreRequest(PAIR_PROMPT, "x")] * 50)) == 50
    )
    assert judge.drain_metrics() == {"calls": 100}


# --- wrappers: order ---------------------------------------------------------------------------------------------


def test_random_order_shows_about_half_the_pairs_swapped_and_maps_answers_back():
    """A judge that always prefers the first response shown: a pair shown as given gets 1, a swapped one 0 once
    mapped back. Swaps follow stable_uniform(seed, "order", prompt id, first, second) < ½, so 400 pairs give
    a Binomial(400, ½) count of swaps: 200 ± 10 (sd); the bounds 140…260 are 6 sd away."""
    requests = [
        PairRequest(PAIR_PROMPT, f"a{i}", f"b{i}", first_image=f"a{i}.png", second_image=f"b{i}.png")
        for i in range(400)
    ]
    inner = AnswerJudge(first_wins)
    answers = RandomOrder(inner, seed=5).compare(requests)
    expected_swaps = [stable_uniform(5, "order", "p", r.first, r.second) < 0.5 for r in requests]
    assert [shown != r for shown, r in zip(inner.asked, requests)] == expected_swaps
    for shown, request, answer, swap in zip(inner.asked, requests, answers, expected_swaps):
        assert shown == (swapped(request) if swap else request)  # images travel with their texts
        assert answer.p_first == (0.0 if swap else 1.0) and answer.raw == "first"
    assert 140 <= sum(expected_swaps) <= 260
    again = AnswerJudge(first_wins)
    RandomOrder(again, seed=5).compare(requests)
    assert again.asked == inner.asked  # stable per seed
    other = AnswerJudge(first_wins)
    RandomOrder(other, seed=6).compare(requests)
    assert other.asked != inner.asked


def test_random_order_and_noise_pass_grades_and_metrics_through():
    """The order wrappers pass grades through; Noise at p = 0 too, and at p = 1 replaces every real grade (TSRL
    §4.5's p for a scalar reward), saying so in the raw text."""
    for wrapper in (lambda j: RandomOrder(j, 0), lambda j: BothOrders(j), lambda j: Noise(j, 0.0, 0)):
        inner = AnswerJudge(lambda r: Score(3.0, raw="g"))
        judge = wrapper(inner)
        assert [(s.value, s.raw) for s in judge.score([ScoreRequest(PAIR_PROMPT, "x")])] == [(3.0, "g")]
        assert judge.drain_metrics()["calls"] == 1
    noisy = Noise(AnswerJudge(lambda r: Score(3.0, raw="g")), 1.0, 0)
    graded = noisy.score([ScoreRequest(PAIR_PROMPT, f"x{i}") for i in range(50)])
    assert all(s.raw.startswith("[noise: grade 3.0 replaced by") for s in graded)
    assert len({s.value for s in graded}) > 5 and noisy.drain_metrics()["noise_flips"] == 50


def test_both_orders_combines_the_metadata_of_the_two_answers():
    table = {
        ("a", "b"): Verdict(1.0, raw="A", tokens=5, latency_s=0.2, cached=True),
        ("b", "a"): Verdict(0.5, raw="B", tokens=7, latency_s=0.5, cached=False),
        ("c", "d"): Verdict(0.75, raw="C", tokens=1, cached=True),
        ("d", "c"): Verdict(None, raw="", error="timeout: slow", tokens=2, cached=True),
        ("e", "f"): Verdict(None, error="parse: x", latency_s=0.9),
        ("f", "e"): Verdict(0.75, raw="F", tokens=3, latency_s=0.1),
        ("g", "h"): Verdict(None, error="e1"),
        ("h", "g"): Verdict(None, error="e2"),
        ("i", "j"): Verdict(0.25, cached=True),
        ("j", "i"): Verdict(0.75, cached=True),
    }
    inner = AnswerJudge(lambda r: table[(r.first, r.second)])
    judge = BothOrders(inner)
    ab, cd, ef, gh, ij = judge.compare([PairRequest(PAIR_PROMPT, f, s) for f, s in ("ab", "cd", "ef", "gh", "ij")])
    assert len(inner.batches) == 1 and len(inner.asked) == 10  # both orders in one batch
    assert (ab.p_first, ab.raw, ab.error, ab.tokens, ab.latency_s, ab.cached) == (
        0.75,
        "A\n---swapped---\nB",
        None,
        12,
        0.5,
        False,
    )  # ½·(1 + 1 − ½)
    assert (cd.p_first, cd.error, cd.tokens, cd.cached) == (0.75, "timeout: slow", 3, True)  # forward alone
    assert (ef.p_first, ef.raw, ef.error, ef.latency_s) == (0.25, "\n---swapped---\nF", "parse: x", 0.9)
    assert (gh.p_first, gh.error) == (None, "e1; e2")
    assert (ij.p_first, ij.cached) == (0.25, True)
    # agreement is logged where both orders answered: ab disagree (1 vs ½), ij agree (¼ vs ¼)
    assert judge.drain_metrics()["swap_agreement"] == 0.5
    assert "swap_agreement" not in judge.drain_metrics()
    judge.compare([PairRequest(PAIR_PROMPT, "a", "b")])  # a new step starts counting afresh
    assert judge.drain_metrics()["swap_agreement"] == 0.0


# --- wrappers: Noise ---------------------------------------------------------------------------------------------


def test_noise_draws_afresh_for_every_judgment_and_counts_flips():
    """The n-th asking of a question in a stream is flipped iff stable_uniform(seed, *stream, "pair", prompt id,
    first, second, n, "flip") < flip_prob (TSRL §4.5: each judgment independently). The same pair asked 200 times at
    flip_prob ½ is flipped some times and not others (all 200 alike has probability 2⁻¹⁹⁹); naming the same stream
    again replays the same draws (a resumed step); another stream or seed draws others. Failures are never
    flipped."""
    same = [PairRequest(PAIR_PROMPT, "z", "a")] * 200
    judge = Noise(AnswerJudge(first_wins), 0.5, 1)
    judge.set_stream("train", 3)
    flipped = [v.p_first == 0.0 for v in judge.compare(same)]
    assert judge.drain_metrics()["noise_flips"] == sum(flipped)
    assert 60 <= sum(flipped) <= 140  # Binomial(200, ½): 100 ± 7 (sd), bounds 5.7 sd away
    assert flipped == [
        stable_uniform(1, "train", 3, "pair", PAIR_PROMPT.id, "z", "a", n, "flip") < 0.5 for n in range(200)
    ]
    judge.set_stream("train", 3)  # the same step again: the same draws, split over two calls
    again = [v.p_first == 0.0 for v in judge.compare(same[:50]) + judge.compare(same[50:])]
    assert again == flipped
    judge.set_stream("train", 4)
    assert [v.p_first == 0.0 for v in judge.compare(same)] != flipped
    assert set_noise_stream(judge, "train", 3) == 1 and set_noise_stream(AnswerJudge(first_wins), "x") == 0
    reseeded = Noise(AnswerJudge(first_wins), 0.5, 2)
    reseeded.set_stream("train", 3)
    assert [v.p_first == 0.0 for v in reseeded.compare(same)] != flipped

    always = Noise(failing({"broken"}), 1.0, 0)
    out = always.compare([PairRequest(PAIR_PROMPT, "fine", "x"), PairRequest(PAIR_PROMPT, "broken", "x")])
    assert [v.p_first for v in out] == [0.25, None] and always.drain_metrics()["noise_flips"] == 1
    never = Noise(AnswerJudge(first_wins), 0.0, 0)
    assert all(v.p_first == 1.0 for v in never.compare(same)) and never.drain_metrics()["noise_flips"] == 0
