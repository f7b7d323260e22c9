"""TSRL §4.3's low-diversity pool (reward.select=near_duplicate): one anchor and k − 1 near-duplicates of it, by
hand, on every shipped task (far less diverse than the nested pool of the same ladder, markup untouched), and
in the ladder regime (the pool it compares with, its diversity and strength reported)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tsrl.rewards import LadderConfig, LadderRegime, RegimeContext
from tsrl.rewards.diversity import jaccard_distance
from tsrl.rewards.ladder import Rung, near_duplicate_rungs, select_rungs
from tsrl.rewards.near_duplicates import MARKUP, near_duplicates
from tsrl.tasks import build_task
from tsrl.tasks.counseling import CounselingConfig
from tsrl.tasks.humor import HumorConfig
from tsrl.tasks.stories import StoriesConfig
from tsrl.tasks.web import WebConfig
from tsrl.testing.fakes import NumberTask, ScriptedJudge
from tsrl.types import Anchor, Prompt


def test_copies_swap_every_other_swappable_word_by_hand():
    """Swappable words: think, it's, big, Don't. Two copies: copy 0 swaps words 0 and 2, copy 1 words 1 and 3;
    capitals kept, punctuation untouched."""
    assert near_duplicates("I think it's big. Don't.", 2) == [
        "I believe it's large. Don't.",
        "I think it is big. Do not.",
    ]
    assert near_duplicates("q=3 anchor 0", 3) == ["q=3 anchor 0"] * 3  # nothing swappable: exact copies


def test_markup_style_and_script_are_never_edited():
    page = "<html><style>.big { color: red }</style><body class='big'><p>A big, happy day.</p></body></html>"
    (copy,) = near_duplicates(page, 1)
    assert copy == page.replace("A big, happy day.", "A large, glad day.")
    assert MARKUP.findall(copy) == MARKUP.findall(page)


def ladder(texts: list[str]) -> list[Rung]:
    return [Rung(Anchor(t, f"t{i}"), float(len(texts) - i)) for i, t in enumerate(texts)]


def test_the_duplicated_rung_is_the_one_nearest_the_nested_pools_mean_strength():
    """K = 10 rungs of strength 10, 9, …, 1: nested k = 4 takes ranks 0, 2, 4, 9 (strengths 10, 8, 6, 1), mean
    6.25; the nearest rung is rank 4 (strength 6). The pool: that rung and 3 copies at its strength."""
    rungs = ladder([f"rung {i}: I think it's big and very small" for i in range(10)])
    assert [rungs.index(r) for r in select_rungs(rungs, 4, "nested")] == [0, 2, 4, 9]
    pool = near_duplicate_rungs(rungs, 4)
    assert pool[0] is rungs[4] and [r.strength for r in pool] == [6.0] * 4
    assert len({r.anchor.text for r in pool}) == 4 and all(r.anchor.tier == "t4" for r in pool)
    assert select_rungs(rungs, 4, "near_duplicate") == pool
    assert near_duplicate_rungs(rungs, 1) == [rungs[0]]  # k = 1: the nested set is the strongest alone


SHIPPED = {"stories": StoriesConfig(), "humor": HumorConfig(), "web": WebConfig(), "counseling": CounselingConfig()}


@pytest.mark.parametrize("name", list(SHIPPED))
def test_on_the_shipped_anchors_the_pool_is_near_duplicates_and_far_less_diverse(name):
    """Every shipped training prompt at k = 4: most copies differ from their anchor, every copy keeps the
    anchor's markup, and the word-Jaccard distance within the pool is a fraction of the nested pool's."""
    prompts = build_task(SHIPPED[name]).prompts("train")
    near, diverse, edited, copies = [], [], 0, 0
    for prompt in prompts:
        rungs = ladder([a.text for a in prompt.anchors])  # strongest first by file order: enough for diversity
        pool = [r.anchor.text for r in near_duplicate_rungs(rungs, 4)]
        near.append(jaccard_distance(pool))
        diverse.append(jaccard_distance([r.anchor.text for r in select_rungs(rungs, 4, "nested")]))
        edited += sum(text != pool[0] for text in pool[1:])
        copies += 3
        assert all(MARKUP.findall(text) == MARKUP.findall(pool[0]) for text in pool[1:])
    assert edited / copies > 0.5, (name, edited, copies)
    assert np.mean(near) < 0.1 < 0.3 < np.mean(diverse), (name, np.mean(near), np.mean(diverse))


def test_the_ladder_regime_compares_with_the_pool_and_reports_its_diversity_and_strength(tmp_path):
    """Anchors q = 3, 2, 1, 0 judged by their q numbers; nested k = 2 takes q = 3 and q = 0 (mean strength at the
    ladder's mean), so the duplicated rung is one of the middle ones; the reward's pool is that rung and a copy
    of it, and ladder_diversity.json reports the pool's diversity and strength."""
    story = "I think it's big: the whole town came to see the old mill by the river at dawn"
    texts = [f"q={q} {story}" for q in (3, 1, 2, 0)]
    task = NumberTask([Prompt("p0", "prompt p0", tuple(Anchor(t, f"t{i}") for i, t in enumerate(texts)))])
    judge = ScriptedJudge()
    regime = LadderRegime(
        LadderConfig(k=2, select="near_duplicate", ladder_dir=str(tmp_path / "ladders")),
        RegimeContext(task, judge, "scripted", tmp_path / "run"),
    )
    pool = [r.anchor.text for r in regime.selected["p0"]]
    assert pool[0].startswith(("q=1 ", "q=2 ")) and pool[1] != pool[0] and pool[1].split()[0] == pool[0].split()[0]
    report = json.loads((tmp_path / "run" / "ladder_diversity.json").read_text())["selected"]
    assert report["jaccard_distance"] < 0.5 and abs(report["strength"]) < 1.0 and report["bt_spread"] == 0.0
