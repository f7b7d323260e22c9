"""Exact pins of the anchor ladder: the prompt each judge request carries, strengths as the batched fit or Elo,
ranking and ties, what the ladder's path depends on, the selection rules and the stored ladder.

Each test checks a behaviour the module docstring promises on a case small enough to work out by hand, written
against the mutants `make mutate` found alive (this file pins what the broader tests leave loose).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import numpy as np
import pytest

from tsrl.errors import ConfigError
from tsrl.ranking import elo_ratings, fit_bradley_terry_batch, pad_matches
from tsrl.rewards import LadderConfig, LadderRegime, RegimeContext
from tsrl.rewards.ladder import (
    OneAnchorConfig,
    Rung,
    ladder_path,
    nested_order,
    rank_ladders,
    round_robin,
    select_rungs,
)
from tsrl.testing.fakes import NumberTask, ScriptedJudge, number_prompt
from tsrl.types import Anchor, Count, Group, Prompt, Rollout


def ladder(
    task: NumberTask, tmp_path, judge=None, fingerprint: str = "scripted", **kw
) -> tuple[LadderRegime, ScriptedJudge]:
    judge = judge or ScriptedJudge()
    ctx = RegimeContext(task, judge, fingerprint, tmp_path / "run")
    return LadderRegime(LadderConfig(ladder_dir=str(tmp_path / "ladders"), **kw), ctx), judge


def rollouts(prompt: Prompt, texts: Sequence[str]) -> Group:
    return Group(prompt=prompt, prompt_ids=[1], rollouts=[Rollout(t, [1], [0.0], False) for t in texts])


def true_matches(prompt: Prompt) -> list[tuple[int, int, float]]:
    """The round robin a perfect judge gives: 1 when anchor i's q is higher, ½ on equal q."""
    q = [NumberTask().quality(prompt, a.text) for a in prompt.anchors]
    return [(i, j, 0.5 if q[i] == q[j] else float(q[i] > q[j])) for i, j in round_robin(len(q))]


def strengths_by_anchor(regime: LadderRegime, prompt: Prompt) -> np.ndarray:
    by_text = {r.anchor.text: r.strength for r in regime.ladders[prompt.id]}
    return np.array([by_text[a.text] for a in prompt.anchors])


def test_every_judge_request_carries_its_own_prompt(number_task, tmp_path):
    regime, judge = ladder(number_task, tmp_path, k=2)
    p0, p1 = number_task.prompts("train")
    for request in judge.requests:  # the round robins of both prompts, in one batch
        anchors = {a.text for a in request.prompt.anchors}
        assert request.prompt in (p0, p1) and {request.first, request.second} <= anchors
    assert [r.prompt.id for r in judge.requests] == ["p0"] * 6 + ["p1"] * 6
    judge.requests = []
    regime.score([rollouts(p0, ["q=1 a"]), rollouts(p1, ["q=2 b"])])
    assert [(r.prompt, r.first) for r in judge.requests] == [(p0, "q=1 a")] * 2 + [(p1, "q=2 b")] * 2


def test_ladder_strengths_are_the_batched_fit_with_the_configured_l2(tmp_path):
    prompts = [number_prompt("p0", [3, 1, 2, 0]), number_prompt("p1", [0, 2, 1, 3]), number_prompt("p2", [1, 0, 4])]
    task = NumberTask(prompts)
    fits = {}
    for l2 in (0.1, 1.0):
        regime, _ = ladder(task, tmp_path / str(l2), k=2, l2=l2)
        for p in prompts:
            expected = fit_bradley_terry_batch(len(p.anchors), *pad_matches([true_matches(p)]), l2=l2)[0]
            assert strengths_by_anchor(regime, p) == pytest.approx(expected, abs=1e-9)
        fits[l2] = strengths_by_anchor(regime, prompts[0])
    assert np.abs(fits[0.1] - fits[1.0]).max() > 0.1


def test_elo_ladder_strengths_are_elo_ratings_seeded_by_prompt_position(tmp_path):
    prompts = [number_prompt("p0", [3, 1, 2, 0]), number_prompt("p1", [0, 2, 1, 3, 5])]
    regime, _ = ladder(NumberTask(prompts), tmp_path, k=2, ranking="elo", elo_k=24.0)
    for seed, p in enumerate(prompts):
        expected = elo_ratings(len(p.anchors), true_matches(p), k_factor=24.0, seed=seed)
        assert strengths_by_anchor(regime, p) == pytest.approx(expected, abs=1e-9)


def test_ladder_ranks_strongest_first_and_keeps_index_order_on_ties(tmp_path):
    prompt = number_prompt("p", [1, 2, 2, 0])
    regime, _ = ladder(NumberTask([prompt]), tmp_path, k=2)
    assert [r.anchor.text for r in regime.ladders["p"]] == [
        "q=2 anchor 1",
        "q=2 anchor 2",
        "q=1 anchor 0",
        "q=0 anchor 3",
    ]


def test_ladder_path_changes_with_everything_the_ladder_depends_on(number_task, tmp_path):
    prompts = number_task.prompts("train")
    cfg = LadderConfig(ladder_dir=str(tmp_path / "l"))

    def path(cfg=cfg, prompts=prompts, fingerprint="judge-a", task=number_task):
        return ladder_path(cfg, fingerprint, task.name, prompts)

    base = path()
    assert base.parent == tmp_path / "l" and base.name.startswith("numbers-") and base.suffix == ".jsonl"
    assert len(base.stem) == len("numbers-") + 16 and base == path()
    changed_anchor = Prompt(
        prompts[1].id, prompts[1].text, (prompts[1].anchors[0], Anchor("q=9 new anchor"), *prompts[1].anchors[2:])
    )
    variants = [
        path(prompts=[prompts[0], changed_anchor]),
        path(prompts=[prompts[0]]),
        path(prompts=[prompts[0], Prompt(prompts[1].id, "other text", prompts[1].anchors)]),
        path(prompts=[prompts[0], Prompt("p9", prompts[1].text, prompts[1].anchors)]),
        path(fingerprint="judge-b"),
        path(cfg=LadderConfig(ladder_dir=cfg.ladder_dir, l2=0.2)),
        path(cfg=LadderConfig(ladder_dir=cfg.ladder_dir, ranking="elo")),
        path(cfg=LadderConfig(ladder_dir=cfg.ladder_dir, ranking="elo", elo_k=32.0)),
    ]
    assert len({base, *variants}) == len(variants) + 1
    # bt ignores the Elo K-factor (the key bt ladders had before Elo existed); the anchor tier is not judged
    assert path(cfg=LadderConfig(ladder_dir=cfg.ladder_dir, elo_k=32.0)) == base
    retiered = Prompt(prompts[0].id, prompts[0].text, tuple(Anchor(a.text, "gold") for a in prompts[0].anchors))
    assert path(prompts=[retiered, prompts[1]]) == base
    home = ladder_path(LadderConfig(ladder_dir="~/ladders"), "j", number_task.name, prompts)
    assert "~" not in str(home)
    expected = hashlib.sha256(b"judge-a|l2=0.1")
    for p in prompts:
        expected.update(json.dumps([p.id, p.text, [a.text for a in p.anchors]]).encode())
    assert base.stem == f"numbers-{expected.hexdigest()[:16]}"  # stored ladders keep their names across versions


def test_selection_rules_by_hand():
    assert nested_order(1) == [0] and nested_order(2) == [0, 1] and nested_order(3) == [0, 2, 1]
    assert nested_order(10) == [0, 9, 4, 2, 6, 1, 3, 5, 7, 8]  # the module docstring's K = 10 order
    rungs = [Rung(Anchor(str(i)), -i) for i in range(10)]

    def pick(k: int, rule: str) -> list[int]:
        return [int(r.anchor.text) for r in select_rungs(rungs, k, rule)]

    assert [pick(k, "nested") for k in (1, 2, 3, 4)] == [[0], [0, 9], [0, 4, 9], [0, 2, 4, 9]]
    assert pick(4, "spread") == [0, 3, 6, 9] and pick(2, "spread") == [0, 9] and pick(1, "spread") == [0]
    assert pick(4, "top") == [0, 1, 2, 3] and pick(1, "top") == [0]
    assert pick(10, "nested") == pick(10, "spread") == pick(10, "top") == list(range(10))


@pytest.mark.parametrize("bad", [{"k": 0}, {"select": "best"}, {"ranking": "glicko"}, {"elo_k": 0.0}, {"elo_k": -1.0}])
def test_ladder_config_checks_each_setting(bad):
    with pytest.raises(ConfigError):
        LadderConfig(**bad)


def test_ladder_config_defaults():
    assert (LadderConfig().k, LadderConfig().l2, LadderConfig().ranking, LadderConfig().elo_k) == (4, 0.1, "bt", 16.0)
    assert OneAnchorConfig().k == 1 and LadderConfig(k=1, elo_k=1e-3).k == 1


def test_ladder_metrics_spread_and_ties(tmp_path):
    """bt_spread = mean over the batch's groups of (strongest − weakest anchor strength); tie_rate = ties among
    the verdicts given."""
    prompts = [number_prompt("p0", [3, 1, 2, 0]), number_prompt("p1", [0, 5])]
    regime, _ = ladder(NumberTask(prompts), tmp_path, k=2, select="top")
    spreads = [regime.ladders[p.id][0].strength - regime.ladders[p.id][-1].strength for p in prompts]
    batch = regime.score([rollouts(prompts[0], ["q=2 x", "q=9 y"]), rollouts(prompts[1], ["q=5 z", "q=0 w"])])
    # p0 vs anchors q=3, q=2: x loses, ties; y wins twice. p1 vs q=5, q=0: z ties, wins; w loses, ties.
    assert batch.rewards.tolist() == [[0.25, 1.0], [0.75, 0.25]]
    assert batch.metrics["ladder/bt_spread"] == pytest.approx(np.mean(spreads))
    assert batch.metrics["ladder/tie_rate"] == pytest.approx(3 / 8)
    assert batch.metrics["reward/comparisons_per_sample"] == 2.0
    assert isinstance(batch.metrics["reward/missing_verdicts"], Count)
    assert regime.build_calls == 6 + 1


def test_rank_ladders_ranks_by_elo_with_k_16_by_default(number_task):
    prompts = number_task.prompts("train")
    matches = {p.id: true_matches(p) for p in prompts}
    ladders = rank_ladders(prompts, matches, 0.1, "elo")
    for seed, p in enumerate(prompts):
        expected = np.sort(elo_ratings(len(p.anchors), matches[p.id], k_factor=16.0, seed=seed))[::-1]
        assert [r.strength for r in ladders[p.id]] == pytest.approx(expected, abs=1e-12)


def test_the_stored_ladder_lists_anchors_strongest_first_with_text_tier_and_strength(tmp_path):
    prompt = Prompt("p", "prompt p", anchors=(Anchor("q=1 low", "bronze"), Anchor("q=3 high", "gold")))
    regime, _ = ladder(NumberTask([prompt]), tmp_path, k=1)
    rows = [json.loads(line) for line in (tmp_path / "run" / "ladder.jsonl").read_text().splitlines()]
    assert [row["prompt_id"] for row in rows] == ["p"] and rows[0]["matches"] == [[0, 1, 0.0]]
    anchors = rows[0]["anchors"]
    assert [(a["text"], a["tier"]) for a in anchors] == [("q=3 high", "gold"), ("q=1 low", "bronze")]
    assert [a["strength"] for a in anchors] == [r.strength for r in regime.ladders["p"]]
    assert anchors[0]["strength"] > anchors[1]["strength"]


class SplitTask(NumberTask):
    """Training prompts differ from the evaluation ones; the ladder is built over the training split."""

    def __init__(self) -> None:
        super().__init__()
        self.splits = {"train": [number_prompt("train-0", [2, 0])], "eval": [number_prompt("eval-0", [1, 3, 2])]}

    def prompts(self, split: str) -> list[Prompt]:
        return self.splits.get(split, [])


def test_the_ladder_is_built_over_the_training_prompts(tmp_path):
    regime, judge = ladder(SplitTask(), tmp_path, k=2)
    assert set(regime.ladders) == {"train-0"} and {r.prompt.id for r in judge.requests} == {"train-0"}
