"""Lists (Judge.score_lists) through every judge wrapper: one call per list, the list's order kept, noise drawn per
item of each judgment, the failure policy, the budget, the verdict cache and the screenshots of web pages — each
wrapper alone, then the whole chain as build_judge composes it. The random parts are stable hashes
(tsrl.judging.base.stable_uniform): a test either always passes or always fails."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tsrl.judging import (
    BothOrders,
    Budget,
    BudgetConfig,
    BudgetExceeded,
    Fallback,
    JudgePolicyConfig,
    Noise,
    RandomOrder,
    set_noise_stream,
    wrap,
)
from tsrl.judging.base import stable_uniform
from tsrl.judging.noise import GRADES
from tsrl.judging.rendering_judge import RenderingJudge
from tsrl.rendering import Rendering, extract_page
from tsrl.testing.fakes import AnswerJudge, ScriptedJudge
from tsrl.types import ListRequest, ListScores, Prompt

PROMPT = Prompt("p", "Rank these.", fields={"rubric": "higher q is better"})


def lists(*texts: tuple[str, ...]) -> list[ListRequest]:
    return [ListRequest(PROMPT, t) for t in texts]


def graded(r: ListRequest) -> ListScores:
    """An answer for AnswerJudge: the slot number as each response's score (R1 → 1, R2 → 2, …), so any reordering
    shows; 7 tokens a list."""
    return ListScores([float(i + 1) for i in range(len(r.responses))], raw="slots", tokens=7)


def test_order_wrappers_pass_a_list_through_in_its_order():
    """The caller shuffles a list; BothOrders and RandomOrder neither reorder nor repeat it (one call each)."""
    request = lists(("q=1 c", "q=3 a", "q=2 b"))
    for wrapper in (BothOrders, lambda inner: RandomOrder(inner, seed=0)):
        inner = AnswerJudge(graded)
        answer = wrapper(inner).score_lists(request)[0]
        assert answer.values == [1.0, 2.0, 3.0] and inner.asked == request


def test_noise_replaces_each_item_on_its_own_draw_and_counts_every_replacement():
    """A list is one judgment, the n-th asking of its question in the stream; the item in slot i is replaced iff
    stable_uniform(seed, *stream, "list", prompt id, *responses, n, "flip", i) < flip_prob, by
    GRADES[⌊stable_uniform(…, n, "grade", i)·11⌋]. At flip_prob ½, 40 askings of one list of 5 items draw 200 coins:
    all alike has probability 2⁻¹⁹⁹. The same stream replays the same draws."""
    requests = lists(*[tuple(f"q=1 r{i}" for i in range(5))] * 40)
    judge = Noise(AnswerJudge(graded), 0.5, seed=3)
    judge.set_stream("train", 2)
    answers = judge.score_lists(requests)
    expected_flips = 0
    asked = ("list", requests[0].prompt.id, *requests[0].responses)
    for n, answer in enumerate(answers):
        for slot, value in enumerate(answer.values):
            flip = stable_uniform(3, "train", 2, *asked, n, "flip", slot) < 0.5
            grade = GRADES[int(stable_uniform(3, "train", 2, *asked, n, "grade", slot) * 11)]
            assert value == (grade if flip else slot + 1.0)
            expected_flips += flip
    assert 60 <= expected_flips <= 140  # Binomial(200, ½): 100 ± 7
    assert judge.drain_metrics()["noise_flips"] == expected_flips
    assert answers[0].raw.startswith("[noise: ") and answers[0].raw.endswith("] slots")
    set_noise_stream(judge, "train", 2)
    assert [a.values for a in judge.score_lists(requests)] == [a.values for a in answers]  # a resumed step

    failing = Noise(ScriptedJudge(grades={"q=0 broken": None}), 1.0, seed=0)
    assert failing.score_lists(lists(("q=1 a", "q=0 broken")))[0].values is None  # no answer: nothing to replace
    assert failing.drain_metrics()["noise_flips"] == 0


def test_fallback_policies_for_a_list_without_an_answer():
    """tie → 5 for every item, random → a stable uniform grade in [0, 10] per item (prompt, responses, slot), drop →
    None; each list counted once."""
    broken = {"q=0 x": None}
    requests = lists(("q=4 ok", "q=2 fine"), ("q=4 ok", "q=0 x", "q=3 y"))
    tie = Fallback(ScriptedJudge(grades=broken), "tie", seed=0)
    assert [a.values for a in tie.score_lists(requests)] == [[4.0, 2.0], [5.0, 5.0, 5.0]]
    assert tie.drain_metrics()["fallbacks/tie"] == 1

    drop = Fallback(ScriptedJudge(grades=broken), "drop", seed=0)
    dropped = drop.score_lists(requests)[1]
    assert dropped.values is None and dropped.error == "unparseable_list: the answer scores R1, R3 but not R2"
    assert drop.drain_metrics()["fallbacks/drop"] == 1

    random = Fallback(ScriptedJudge(grades=broken), "random", seed=4).score_lists(requests)[1]
    responses = requests[1].responses
    assert random.values == [10.0 * stable_uniform(4, "fallback-list", "p", *responses, slot) for slot in range(3)]
    assert len(set(random.values)) == 3 and random.raw.startswith("[fallback random: unparseable_list")
    again = Fallback(ScriptedJudge(grades=broken), "random", seed=4).score_lists(requests)[1]
    assert again.values == random.values  # the same question, the same draw


def test_budget_counts_a_list_as_one_call_and_charges_its_tokens():
    inner = AnswerJudge(graded)
    judge = Budget(inner, BudgetConfig(max_calls_per_step=3))
    long_lists = lists(*[tuple(f"q=1 r{i}" for i in range(8))] * 3)  # 24 responses, 3 calls
    assert len(judge.score_lists(long_lists)) == 3
    with pytest.raises(BudgetExceeded, match=r"3 calls made and 1 more needed exceed judge.budget.max_calls_per_step"):
        judge.score_lists(long_lists[:1])
    assert len(inner.asked) == 3  # the refused list never reached the judge
    tokens = Budget(AnswerJudge(graded), BudgetConfig(max_tokens_per_step=13))
    tokens.score_lists(long_lists[:1])  # 7 tokens
    with pytest.raises(BudgetExceeded, match="14 judge tokens exceed judge.budget.max_tokens_per_step=13"):
        tokens.score_lists(long_lists[:1])


class TableRenderer:
    """Renders from a table page → Rendering; records each batch."""

    def __init__(self, table: dict[str, Rendering]) -> None:
        self.table, self.batches = table, []

    def render_many(self, pages: Sequence[str]) -> list[Rendering]:
        self.batches.append(list(pages))
        return [self.table[p] for p in pages]

    def close(self) -> None:
        pass


SHOTS = {
    "<p>a</p>": Rendering("/shots/a.png", None, 1.0),
    "<p>b</p>": Rendering("/shots/b.png", None, 1.0),
    "<p>slow</p>": Rendering(None, "timeout: no screenshot after 20 s", 20.0),
    "": Rendering(None, "empty: the page has no content", 0.0),
}


def fenced(page: str) -> str:
    return f"```html\n{page}\n```"


def test_a_list_of_pages_is_judged_without_the_pages_that_failed_to_render():
    """Each page rendered once; a failed page gets 0 in its slot and is not shown, the others are asked as a
    shorter list with their screenshots; a list whose pages all failed is not asked."""
    inner, renderer = AnswerJudge(graded), TableRenderer(SHOTS)
    judge = RenderingJudge(inner, extract_page, renderer)
    pages = [("<p>a</p>", "<p>slow</p>", "<p>b</p>"), ("<p>slow</p>", ""), ("<p>b</p>", "<p>a</p>")]
    answers = judge.score_lists(lists(*[tuple(map(fenced, p)) for p in pages]))
    assert renderer.batches == [["<p>a</p>", "<p>slow</p>", "<p>b</p>", ""]]
    assert [a.values for a in answers] == [[1.0, 0.0, 2.0], [0.0, 0.0], [1.0, 2.0]]
    assert [(r.responses, r.images) for r in inner.asked] == [
        (("<p>a</p>", "<p>b</p>"), ("/shots/a.png", "/shots/b.png")),
        (("<p>b</p>", "<p>a</p>"), ("/shots/b.png", "/shots/a.png")),
    ]
    assert answers[0].raw == "[render failed, graded 0 and not shown: R2: timeout: no screenshot after 20 s] slots"
    assert answers[1].raw == (
        "render failed: R1: timeout: no screenshot after 20 s; R2: empty: the page has no content"
    )
    assert all(a.error is None for a in answers)  # a broken page is an outcome, not a judge failure
    metrics = judge.drain_metrics()
    assert metrics["render/failures"] == 2 and metrics["calls"] == 2

    grades = {"<p>a</p>": 6.0, "<p>b</p>": None}
    unanswered = RenderingJudge(ScriptedJudge(grades=grades), extract_page, TableRenderer(SHOTS))
    lost = unanswered.score_lists(lists(tuple(map(fenced, pages[0]))))[0]
    assert lost.values is None and lost.error  # the judge's failure is the list's: the failure policy decides
    nothing = RenderingJudge(inner, extract_page, TableRenderer(SHOTS)).score_lists(lists((fenced("<p>slow</p>"),)))
    assert nothing[0].values == [0.0] and len(inner.asked) == 2  # no call for a list left empty


def test_a_list_survives_the_whole_wrapper_chain(tmp_path):
    """wrap (build_judge's composition: noise → order → fallback → cache → budget) around rendered pages: each
    list one call, noise per item, the failure policy, the budget and the cache all act on lists."""
    inner = ScriptedJudge(grades={"<p>a</p>": 6.0, "<p>b</p>": None})
    cfg = JudgePolicyConfig(
        flip_prob=0.3, failure="tie", cache_path=str(tmp_path / "v.sqlite"), budget=BudgetConfig(max_calls_per_step=4)
    )
    shots = {**SHOTS, **{f"q={q}": Rendering(f"/shots/q{q}.png", None, 1.0) for q in range(1, 5)}}
    judge = wrap(RenderingJudge(inner, extract_page, TableRenderer(shots)), cfg)
    requests = lists(
        *[(f"q={q}", f"q={q + 1}", "<p>slow</p>") for q in range(1, 4)], (fenced("<p>a</p>"), fenced("<p>b</p>"))
    )
    set_noise_stream(judge, "train", 0)
    answers = judge.score_lists(requests)
    assert len(inner.list_requests) == 4 and all(len(r.responses) == 2 for r in inner.list_requests)
    clean = [[1.0, 2.0, 0.0], [2.0, 3.0, 0.0], [3.0, 4.0, 0.0], [5.0, 5.0]]  # the failed list: a tie for each item
    flips = [  # each list asked once (n = 0); the noise seed is the run's, 0 here
        [
            stable_uniform(0, "train", 0, "list", r.prompt.id, *r.responses, 0, "flip", slot) < 0.3
            for slot in range(len(values))
        ]
        for r, values in zip(requests, clean)
    ]
    for answer, values, flipped in zip(answers, clean, flips):
        assert [v for v, f in zip(answer.values, flipped) if not f] == [v for v, f in zip(values, flipped) if not f]
    metrics = judge.drain_metrics()
    assert metrics["calls"] == 4 and metrics["fallbacks/tie"] == 1
    assert metrics["noise_flips"] == sum(map(sum, flips)) > 0

    with pytest.raises(BudgetExceeded, match="max_calls_per_step=4"):
        judge.score_lists(lists(*[(f"q={q}", "q=9") for q in range(5)]))  # 5 new lists in one step
    set_noise_stream(judge, "train", 0)
    again = judge.score_lists(requests)  # the same step replayed: the answered lists come from the cache
    assert len(inner.list_requests) == 5  # only the list without an answer was asked again
    assert [a.cached for a in again] == [True, True, True, False]
    assert [a.values for a in again] == [a.values for a in answers]
    assert judge.drain_metrics()["cache_hits"] == 3
