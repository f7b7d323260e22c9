"""reward=listwise: one shuffled list per group and order, the listwise ladder (k anchors in every list), split
lists, dropped groups, seeded shuffles, streaming, and the checks on the judge and the settings. Cases small enough
to work out by hand; the judge here is a real class answering score_lists from tables."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from tsrl.errors import ConfigError
from tsrl.rewards import LadderConfig, ListwiseConfig, ListwiseRegime, RegimeContext, build_regime
from tsrl.rewards.listwise import call_values, shuffled_calls
from tsrl.rewards.stream import GroupStream
from tsrl.testing.fakes import NumberTask, ScriptedJudge, number_prompt
from tsrl.types import Group, ListRequest, ListScores, Prompt, Rollout

Table = Callable[[int, ListRequest, str], float | None]
"""(index of the call among all calls so far, its request, one response) → that response's score."""


def by_quality(_: int, request: ListRequest, text: str) -> float:
    return NumberTask().quality(request.prompt, text)


class ListJudge(ScriptedJudge):
    """Compares pairs by the texts' q numbers (for the anchor round-robin) and scores each list response by
    `table`; a list whose prompt id is in `fail` gets no answer. Keeps every list request in order."""

    def __init__(self, table: Table = by_quality, fail: Sequence[str] = ()) -> None:
        super().__init__()
        self.list_table, self.fail, self.lists = table, set(fail), []

    def score_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]:
        out = []
        for request in requests:
            call = len(self.lists)
            self.lists.append(request)
            if request.prompt.id in self.fail:
                out.append(ListScores(None, error="the answer scores R1 but not R2"))
            else:
                out.append(ListScores([self.list_table(call, request, t) for t in request.responses]))
        return out


def group(prompt: Prompt, texts: Sequence[str]) -> Group:
    return Group(prompt=prompt, prompt_ids=[1], rollouts=[Rollout(t, [1], [0.0], False) for t in texts])


def regime(tmp_path, judge, prompts: Sequence[Prompt], **cfg) -> ListwiseRegime:
    cfg.setdefault("ladder", {})
    ladder = {"ladder_dir": str(tmp_path / "ladders"), **cfg.pop("ladder")}
    ctx = RegimeContext(NumberTask(list(prompts)), judge, "lists", tmp_path / "run")
    return build_regime(ListwiseConfig(**cfg, ladder=LadderConfig(**ladder)), ctx)


ANCHORED = number_prompt("p0", [3, 1, 2])  # anchors "q=3 anchor 0", "q=1 anchor 1", "q=2 anchor 2"
SCORES = {"q=3 anchor 0": 8.0, "q=1 anchor 1": 3.0, "q=2 anchor 2": 5.0}


def test_listwise_ladder_by_hand_one_order_and_two(tmp_path):
    """Anchors scored 8, 3, 5. Order 0 scores c1 5 (beats 3, ties 5, below 8: 1.5/3 = ½) and c2 9 (all three: 1);
    order 1 scores c1 9 (1) and c2 2 (none: 0); two orders average to ¾ and ½."""
    tables = [{"c1": 5.0, "c2": 9.0}, {"c1": 9.0, "c2": 2.0}]
    judge = ListJudge(lambda call, _, text: SCORES.get(text, tables[call % 2].get(text)))
    one = regime(tmp_path, judge, [ANCHORED], anchors=3)
    assert len(judge.requests) == 3  # the anchor round-robin, judged once at setup (3 pairs)
    batch = one.score([group(ANCHORED, ["c1", "c2"])])
    assert batch.rewards.tolist() == [[0.5, 1.0]]
    assert sorted(judge.lists[0].responses) == sorted(["c1", "c2", *SCORES])  # one list: 2 completions + 3 anchors
    assert batch.metrics["reward/comparisons_per_sample"] == 0.5 and batch.metrics["listwise/calls"] == 1
    assert batch.metrics["listwise/anchor_tie_rate"] == pytest.approx(1 / 6)  # c1 = anchor 2, of 2 × 3 pairs

    judge.lists = []
    two = regime(tmp_path, judge, [ANCHORED], anchors=3, orders=2)
    batch = two.score([group(ANCHORED, ["c1", "c2"])])
    assert len(judge.lists) == 2 and batch.metrics["reward/comparisons_per_sample"] == 1.0
    assert batch.rewards.tolist() == [[0.75, 0.5]]
    assert len(judge.requests) == 3  # the second regime re-ranked the stored ladder: no new comparison


def test_anchors_are_the_ladders_k_selected_and_stay_frozen(tmp_path):
    prompt = number_prompt("p0", [1, 4, 0, 3, 2])
    judge = ListJudge()
    listwise = regime(tmp_path, judge, [prompt], anchors=2)
    nested = {"q=4 anchor 1", "q=0 anchor 2"}  # k = 2 of select=nested: the strongest and the weakest
    for _ in range(2):
        listwise.score([group(prompt, ["q=2 a", "q=5 b"])])
    assert [set(r.responses) - {"q=2 a", "q=5 b"} for r in judge.lists] == [nested, nested]
    top = regime(tmp_path / "top", ListJudge(), [prompt], anchors=2, ladder={"select": "top"})
    assert set(top.anchors["p0"]) == {"q=4 anchor 1", "q=3 anchor 3"}


@pytest.mark.parametrize(
    "output, tables, expected",
    [
        ("standardised", [[2, 8, 5, 5]], [-(2**0.5), 2**0.5, 0.0, 0.0]),  # mean 5, std √4.5
        ("rank", [[2, 8, 5, 5]], [0.0, 1.0, 0.5, 0.5]),  # ranks 3, 0, 1.5, 1.5 of G − 1 = 3
        ("rank", [[2, 8, 5, 5], [4, 6, 5, 7]], [0.0, 1.0, 1 / 3, 2 / 3]),  # mean 3, 7, 5, 6, then rank
        ("standardised", [[5, 5, 5, 5], [6, 6, 6, 6]], [0.0, 0.0, 0.0, 0.0]),  # a constant group
    ],
)
def test_outputs_without_anchors(tmp_path, output, tables, expected):
    texts = ["a", "b", "c", "d"]
    judge = ListJudge(lambda call, _, text: float(tables[call][texts.index(text)]))
    prompt = Prompt("p0", "prompt p0")
    batch = regime(tmp_path, judge, [prompt], output=output, orders=len(tables)).score([group(prompt, texts)])
    assert batch.rewards[0] == pytest.approx(expected)
    assert batch.metrics["listwise/flat_group_frac"] == float(len(set(expected)) == 1)
    assert batch.metrics["reward/comparisons_per_sample"] == len(tables) / 4
    assert all(sorted(r.responses) == texts for r in judge.lists)


def test_split_with_anchors_repeats_them_in_every_call(tmp_path):
    """G = 4, k = 2, max_items = 4: two calls per order of 2 completions + both anchors; by q the rewards are the
    share of the anchors (q = 3 and q = 1, select=nested) below each completion."""
    prompt = number_prompt("p0", [3, 1, 2])
    judge = ListJudge()
    listwise = regime(tmp_path, judge, [prompt], anchors=2, max_items=4, orders=2)
    texts = ["q=0 a", "q=2 b", "q=3 c", "q=4 d"]
    batch = listwise.score([group(prompt, texts)])
    assert batch.rewards[0].tolist() == [0.0, 0.5, 0.75, 1.0]
    assert len(judge.lists) == 4 and batch.metrics["listwise/split_calls"] == 2
    for request in judge.lists:
        assert len(request.responses) == 4 and {"q=3 anchor 0", "q=1 anchor 1"} <= set(request.responses)
    for order in (judge.lists[:2], judge.lists[2:]):  # each order shows every completion once
        assert sorted(t for r in order for t in r.responses if t in texts) == texts


def test_split_without_anchors_cancels_each_calls_frame(tmp_path):
    """G = 5, max_items = 3: near-equal chunks of 3 and 2 per order. Each chunk is standardised on its own, so a
    judge that shifts and stretches every call's scale differently gives the same rewards as one that does not."""
    prompt = Prompt("p0", "prompt p0")
    texts = [f"q={q} r" for q in (1, 5, 2, 4, 3)]
    plain, skewed = (
        ListJudge(),
        ListJudge(lambda call, request, text: 3 * call + (call + 1) * by_quality(0, request, text)),
    )
    rewards = [
        regime(tmp_path, j, [prompt], max_items=3, orders=2).score([group(prompt, texts)]) for j in (plain, skewed)
    ]
    assert rewards[0].rewards == pytest.approx(rewards[1].rewards)
    assert sorted(len(r.responses) for r in plain.lists) == [2, 2, 3, 3]
    assert rewards[0].metrics["listwise/split_calls"] == 2
    # one call's row: slots 2 and 0 scored 4 and 8 → standardised ±1 where shown, NaN elsewhere
    row = call_values(np.array([4.0, 8.0]), np.array([2, 0]), 3, anchored=False, split=True)
    assert row[[0, 2]].tolist() == [1.0, -1.0] and np.isnan(row[1])


def test_an_unscored_list_drops_its_group_only(tmp_path, caplog):
    prompts = [Prompt("p0", "prompt p0"), Prompt("p1", "prompt p1")]
    judge = ListJudge(lambda *_: 5.0, fail=["p1"])
    with caplog.at_level("WARNING", logger="tsrl"):
        batch = regime(tmp_path, judge, prompts, orders=2).score([group(p, ["q=1 a", "q=2 b"]) for p in prompts])
    assert (
        "1 of 2 groups dropped (NaN rewards), each with a list the judge could not score; the first reason: "
        "the answer scores R1 but not R2" in caplog.text
    )
    assert batch.rewards[0].tolist() == [0.0, 0.0] and np.isnan(batch.rewards[1]).all()
    assert batch.metrics["reward/missing_verdicts"] == 2 and batch.metrics["reward/dropped_groups"] == 1
    assert batch.metrics["listwise/flat_group_frac"] == 1.0  # the kept group scored all 5s


def test_a_list_with_the_wrong_number_of_scores_is_an_error(tmp_path):
    class Short(ListJudge):
        def score_lists(self, requests):
            return [ListScores([5.0]) for _ in requests]

    prompt = Prompt("p0", "prompt p0")
    with pytest.raises(RuntimeError, match="judge Short answered 1 scores for a list of 3 responses"):
        regime(tmp_path, Short(), [prompt]).score([group(prompt, ["a", "b", "c"])])


def shown(judge: ListJudge) -> list[tuple[str, ...]]:
    return [r.responses for r in judge.lists]


def test_shuffles_differ_across_orders_and_steps_and_resume(tmp_path):
    """Six completions (720 orders): every order of every step is another shuffle; a regime resumed from the
    state after step 1 shows step 2's shuffles exactly."""
    prompt = Prompt("p0", "prompt p0")
    batch = [group(prompt, [f"q={q} r" for q in range(6)])]
    judge = ListJudge()
    first = regime(tmp_path, judge, [prompt], orders=2)
    first.score(batch)
    state = first.state_dict()
    first.score(batch)
    assert len(set(shown(judge))) == 4  # 2 steps × 2 orders, all different
    again = ListJudge()
    resumed = regime(tmp_path, again, [prompt], orders=2)
    resumed.load_state_dict(state)
    resumed.score(batch)
    assert shown(again) == shown(judge)[2:]
    other = ListJudge()
    regime(tmp_path, other, [prompt], orders=2, seed=1).score(batch)
    assert shown(other) != shown(judge)[:2]  # reward.seed changes the shuffles


def test_shuffled_calls_cut_near_equal_chunks_each_with_every_anchor():
    rng = np.random.default_rng(0)
    calls = shuffled_calls(7, 2, 3, rng)  # ⌈7/3⌉ = 3 chunks of 3, 2, 2 completions, anchors are slots 7 and 8
    assert [len(c) for c in calls] == [5, 4, 4]
    assert sorted(s for c in calls for s in c if s < 7) == list(range(7))
    assert all({7, 8} <= set(c.tolist()) for c in calls)
    assert [len(c) for c in shuffled_calls(7, 0, 0, rng)] == [7]


def test_streamed_step_equals_batch_step(tmp_path):
    prompts = [number_prompt(f"p{b}", [3, 1, 2]) for b in range(3)]
    batch = [group(p, [f"q={(b * 7 + i) % 5} s{b}.{i}" for i in range(4)]) for b, p in enumerate(prompts)]
    whole, trickled = ListJudge(), ListJudge()
    a = regime(tmp_path, whole, prompts, anchors=2, orders=2, max_items=4).score(batch)
    stream = GroupStream(len(batch))

    def feed() -> None:
        for b in (2, 0, 1):
            time.sleep(0.01)
            stream.put([(b, batch[b])])
        stream.close()

    thread = threading.Thread(target=feed)
    thread.start()
    b = regime(tmp_path, trickled, prompts, anchors=2, orders=2, max_items=4).score_stream(stream)
    thread.join()
    assert np.array_equal(a.rewards, b.rewards) and a.metrics == b.metrics
    assert shown(whole) == shown(trickled)


def test_a_judge_without_score_lists_is_named(tmp_path):
    class PluginJudge:
        def compare(self, requests):
            return []

        def score(self, requests):
            return []

        def drain_metrics(self):
            return {}

    class Wrapper(ListJudge):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

    prompt = Prompt("p0", "prompt p0")
    with pytest.raises(ConfigError, match="judge PluginJudge has no score_lists"):
        regime(tmp_path, PluginJudge(), [prompt])
    with pytest.raises(ConfigError, match=r"judge PluginJudge \(inside Wrapper\) has no score_lists"):
        regime(tmp_path, Wrapper(PluginJudge()), [prompt])


@pytest.mark.parametrize(
    "settings, message",
    [
        (
            {"anchors": 3, "max_items": 3},
            "reward.max_items=3 leaves no room for a completion beside the reward.anchors=3 anchors",
        ),
        ({"max_items": 1}, "reward.max_items=1 shows one completion per call"),
        ({"orders": 0}, "reward.orders=0 must be at least 1"),
        ({"output": "winrate"}, "reward.output='winrate' is unknown"),
    ],
)
def test_bad_settings_fail_in_one_sentence(settings, message):
    with pytest.raises(ConfigError, match=message):
        ListwiseConfig(**settings)


def test_more_anchors_than_the_prompts_have_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="reward.anchors=4 puts 4 ladder anchors in every list, but prompt 'p0'"):
        regime(tmp_path, ListJudge(), [ANCHORED], anchors=4)
