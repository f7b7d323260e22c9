"""The simulated judge's lists (`score_lists`, tsrl/judging/simulated.py): one frame per call shared by its items,
item noise per item, a position effect per slot, the grade mapping of a pointwise grade, one call per list.

Most tests read the perceived quality back from the grades: with grade_levels = 100,001 the rounding is below
1e-4 on the 0–10 scale, and u = c₀ + s·logit(grade/10) inverts the grade mapping."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from tsrl.errors import ConfigError
from tsrl.judging import RubricSimConfig, SimulatedJudge, build_judge
from tsrl.judging.simulated import slot_position
from tsrl.testing.fakes import NumberTask
from tsrl.types import ListRequest, Prompt, ScoreRequest

PROMPT = Prompt(id="p", text="prompt")
FINE = dict(taste=0.0, grade_levels=100_001, score_scale=3.0, score_centre=0.0)  # grades that invert to u


def judge(**settings: float) -> SimulatedJudge:
    return SimulatedJudge(RubricSimConfig(**{**FINE, **settings}), NumberTask().quality)


def perceived(grades: list[float]) -> list[float]:
    """u of each grade (the inverse of the grade mapping at FINE's centre 0 and scale 3)."""
    return [3.0 * math.log(g / (10.0 - g)) for g in grades]


def items(*qualities: float, tag: str = "") -> tuple[str, ...]:
    return tuple(f"q={q} {tag}#{i}" for i, q in enumerate(qualities))


def test_the_same_list_asked_twice_gets_the_same_scores_and_another_order_is_another_call():
    noisy = judge(frame_noise=1.0, list_noise=0.7, list_position=0.5)
    shown = ListRequest(PROMPT, items(-1.0, 0.0, 1.0, 2.0))
    first = noisy.score_lists([shown, shown])
    again = judge(frame_noise=1.0, list_noise=0.7, list_position=0.5).score_lists([shown])  # a fresh judge
    assert first[0].values == first[1].values == again[0].values
    reordered = noisy.score_lists([ListRequest(PROMPT, shown.responses[::-1])])[0].values
    assert reordered[::-1] != first[0].values  # the same items in another order: a new frame and item noise


def test_a_frame_moves_every_score_of_a_call_together_and_leaves_their_ranks():
    """σ_list = 0, no position effect, σ_η = 1: within a call u − q is one number (the frame) for every item, the
    scores keep the order of q, and the frame differs between calls (200 calls: the same five items in random orders
    under 200 prompt ids)."""
    framed = judge(frame_noise=1.0, list_noise=0.0)
    qualities = (-2.0, -1.0, 0.0, 1.0, 2.0)
    texts = items(*qualities)
    frames = []
    for k in range(200):
        order = random.Random(k).sample(range(5), 5)
        scores = framed.score_lists([ListRequest(Prompt(id=f"p{k}", text="x"), tuple(texts[j] for j in order))])
        offsets = [u - qualities[j] for u, j in zip(perceived(scores[0].values), order)]
        assert max(offsets) - min(offsets) < 1e-3, offsets  # one shift for the whole call
        by_quality = sorted(zip(order, scores[0].values))
        assert [s for _, s in by_quality] == sorted(s for _, s in by_quality)  # ranks within the call: q's
        frames.append(offsets[0])
    assert statistics.stdev(frames) == pytest.approx(1.0, abs=0.15)  # σ_η: se of an sd over 200 draws ≈ 0.05


def test_item_noise_is_drawn_per_item_and_call_with_its_std():
    """σ_η = 0, σ_list = 0.8: u − q over 1,000 calls of four items has std 0.8 (se ≈ 0.01) and no shared part."""
    noisy = judge(list_noise=0.8)
    texts = items(0.0, 0.0, 0.0, 0.0)
    residuals, call_means = [], []
    for k in range(1000):
        values = noisy.score_lists([ListRequest(Prompt(id=f"p{k}", text="x"), texts)])[0].values
        residuals += perceived(values)
        call_means.append(statistics.mean(perceived(values)))
    assert statistics.stdev(residuals) == pytest.approx(0.8, abs=0.05)
    assert statistics.stdev(call_means) == pytest.approx(0.8 / 2, abs=0.04)  # independent items: σ/√4, no frame


def test_the_position_effect_moves_an_item_with_its_slot():
    """σ_η = σ_list = 0, π = 1.2: the same item gains π·(½ − i/(n−1)) in slot i of n, first +0.6, last −0.6."""
    positioned = judge(list_noise=0.0, list_position=1.2)
    fixed, others = "q=0.5 the item", items(0.0, 1.0, -1.0, 2.0, tag="o")
    gains = []
    for slot in range(5):
        shown = others[:slot] + (fixed,) + others[slot:4]
        values = positioned.score_lists([ListRequest(PROMPT, shown)])[0].values
        gains.append(perceived(values)[slot] - 0.5)
    assert gains == pytest.approx([1.2 * slot_position(i, 5) for i in range(5)], abs=1e-3)
    assert gains[0] == pytest.approx(0.6, abs=1e-3) and gains[-1] == pytest.approx(-0.6, abs=1e-3)
    assert slot_position(0, 1) == 0.0  # a single item has no position


def test_the_grades_of_a_list_are_pointwise_grades_when_nothing_else_is_on():
    """σ_η = σ_list = 0, no position: each item's list grade is its grade alone with the same (zero) noise."""
    plain = SimulatedJudge(RubricSimConfig(rubric_noise=0.0, list_noise=0.0), NumberTask().quality)
    texts = items(-1.0, 0.5, 2.0, 3.5, 6.0)
    alone = [s.value for s in plain.score([ScoreRequest(PROMPT, t) for t in texts])]
    assert plain.score_lists([ListRequest(PROMPT, texts)])[0].values == alone


def test_one_call_is_counted_per_list():
    counted = build_judge(RubricSimConfig(order="fixed"), NumberTask())
    requests = [ListRequest(Prompt(id=f"p{k}", text="x"), items(0.0, 1.0, 2.0, tag=str(k))) for k in range(3)]
    answers = counted.score_lists(requests)
    assert [len(a.values) for a in answers] == [3, 3, 3]
    assert counted.drain_metrics()["calls"] == 3


def test_list_noise_defaults_to_rubric_noise_and_the_list_settings_name_only_the_list_identity():
    default, explicit = judge(rubric_noise=0.9), judge(rubric_noise=0.9, list_noise=0.9)
    shown = [ListRequest(PROMPT, items(0.0, 1.0, 2.0))]
    assert default.score_lists(shown)[0].values == explicit.score_lists(shown)[0].values
    assert default.list_identity == explicit.list_identity
    moved = judge(rubric_noise=0.9, list_noise=0.3, list_position=0.5)
    assert moved.list_identity != default.list_identity
    assert (moved.identity, moved.score_identity) == (default.identity, default.score_identity)


def test_a_negative_list_noise_is_one_sentence_naming_the_setting():
    with pytest.raises(ConfigError, match=r"judge.list_noise must be >= 0 \(or null"):
        RubricSimConfig(list_noise=-0.1)
