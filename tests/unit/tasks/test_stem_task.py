"""Task `stem` (Reasoning Arena Table 1): one training mix of math and science problems with no code, six held-out
benchmarks each evaluated on its own, GPQA-Diamond never trained on, each prompt read and checked by its own task."""

from __future__ import annotations

import pytest

from tsrl.errors import ConfigError, DataError
from tsrl.evaluation.passk import pass_summary, pass_sums
from tsrl.judging.prompting import criteria_text
from tsrl.tasks import build_task
from tsrl.tasks.aime import AimeConfig, AimeTask
from tsrl.tasks.base import DATA_DIR
from tsrl.tasks.code import code_quality
from tsrl.tasks.gpqa import GpqaConfig, GpqaTask
from tsrl.tasks.stem import BenchmarkConfig, StemConfig, heldout_config
from tsrl.types import Group, Prompt, Rollout

TABLE1 = ["AIME 2024", "AIME 2025", "AIME 2026", "Beyond AIME", "GPQA-Diamond", "LiveCodeBench v6"]


@pytest.fixture(scope="module")
def stem():
    return build_task(StemConfig())


def test_the_training_mix_is_math_and_science_with_no_code(stem) -> None:
    """All 48 + 48 shipped aime and gpqa training prompts, none of code, each carrying its task and the judge
    criteria of that task (the generic templates read them as $criteria)."""
    train = stem.prompts("train")
    aime, gpqa = AimeTask(AimeConfig()).prompts("train"), GpqaTask(GpqaConfig()).prompts("train")
    assert [p.text for p in train] == [p.text for p in aime + gpqa]
    assert {p.fields["task"] for p in train} == {"aime", "gpqa"}
    assert not any("```python" in p.text or "tests" in p.fields for p in train)
    assert len({p.id for p in train}) == len(train)  # both samples number their rows train-001, …: prefixed
    for p in train:
        assert p.fields["rubric"] == criteria_text(f"{p.fields['task']}_criteria_v1")


def test_six_held_out_benchmarks_none_of_them_trained_on(stem) -> None:
    """The eval split is Table 1's six benchmarks in order; the GPQA-Diamond stand-in is the gpqa task's held-out
    questions, none of them a training prompt; the four math stand-ins are disjoint quarters of the aime held-out
    sample; LiveCodeBench v6 (evaluated though code is not trained on) is the code task's held-out problems."""
    heldout = stem.prompts("eval")
    keys = list(dict.fromkeys(p.fields["benchmark"] for p in heldout))
    assert [stem.cfg.heldout[k].label for k in keys] == TABLE1
    by_bench = {k: [p for p in heldout if p.fields["benchmark"] == k] for k in keys}
    trained = {p.text for p in stem.prompts("train")}
    assert not trained & {p.text for p in heldout}
    assert [p.text for p in by_bench["gpqa_diamond"]] == [p.text for p in GpqaTask(GpqaConfig()).prompts("eval")]
    math = [p.text for k in keys[:4] for p in by_bench[k]]
    assert math == [p.text for p in AimeTask(AimeConfig()).prompts("eval")] and all(
        len(by_bench[k]) == 4 for k in keys[:4]
    )
    assert {p.fields["task"] for p in by_bench["livecodebench_v6"]} == {"code"} and len(
        by_bench["livecodebench_v6"]
    ) == 8
    assert stem.report_k == (5,) and stem.cfg.heldout["livecodebench_v6"].metric == "pass@5"


def test_each_prompt_is_checked_by_its_own_task(stem) -> None:
    """A boxed integer passes an AIME prompt, a boxed letter a GPQA one; verify_many keeps the order across tasks;
    the answer reader is the prompt's task's."""
    aime = next(p for p in stem.prompts("eval") if p.fields["task"] == "aime")
    gpqa = next(p for p in stem.prompts("eval") if p.fields["task"] == "gpqa")
    right_a, right_g = f"so \\boxed{{{aime.fields['answer']}}}", f"hence \\boxed{{{gpqa.fields['answer']}}}"
    assert stem.verify(aime, right_a) == 1.0 and stem.verify(gpqa, right_g) == 1.0
    assert stem.verify(aime, right_g) == 0.0
    assert stem.verify_many([(gpqa, right_g), (aime, "\\boxed{1000}"), (aime, right_a)]) == [1.0, 0.0, 1.0]
    assert stem.answer(gpqa, right_g) == gpqa.fields["answer"] and stem.answer(aime, right_a) == aime.fields["answer"]
    code = next(p for p in stem.prompts("eval") if p.fields["task"] == "code")
    program = "Read n, print its square.\n```python\nn = int(input())\nprint(n * n)\n```"
    assert stem.quality(code, program) == code_quality(program) != stem.quality(aime, program)  # the code trace rule


class RightOnAime:
    """Answers AIME prompts correctly and every other prompt with nothing (a real generator's interface)."""

    def generate(self, prompts: list[Prompt], n: int) -> list[Group]:
        def text(p: Prompt) -> str:
            return f"\\boxed{{{p.fields['answer']}}}" if p.fields["task"] == "aime" else "no idea"

        return [Group(p, [1], [Rollout(text(p), [1, 2], [0.0, 0.0], False) for _ in range(n)]) for p in prompts]


def test_evaluation_reports_every_benchmark_on_its_own(stem) -> None:
    """16 AIME problems right of 40: pooled pass ratio 40 %, each math benchmark 100 %, GPQA and code 0 %."""
    summary = pass_summary(pass_sums(RightOnAime(), stem, stem.prompts("eval"), 4), 4)
    assert summary["pass_ratio"] == pytest.approx(40.0)
    for key in ("aime_2024", "aime_2025", "aime_2026", "beyond_aime"):
        assert summary[f"{key}/pass_ratio"] == 100.0 and summary[f"{key}/pass@4"] == 100.0
        assert summary[f"{key}/problems"] == 4.0 and summary[f"{key}/answered"] == 100.0
    assert summary["gpqa_diamond/pass_ratio"] == 0.0 and summary["livecodebench_v6/pass_ratio"] == 0.0
    assert summary["gpqa_diamond/problems"] == 16.0 and "livecodebench_v6/pass@5" not in summary  # 4 samples


def test_a_held_out_benchmark_that_holds_training_prompts_is_refused() -> None:
    leaky = StemConfig(
        heldout={
            "leak": BenchmarkConfig("Leak", "aime", settings={"eval_file": str(DATA_DIR / "aime" / "train.jsonl")})
        }
    )
    with pytest.raises(DataError, match="leak.*also training prompts"):
        build_task(leaky).prompts("eval")


def test_gpqa_diamond_as_the_science_training_set_is_refused() -> None:
    with pytest.raises(ConfigError, match="GPQA-Diamond, a held-out benchmark"):
        StemConfig(science=GpqaConfig(dataset="Idavidrein/gpqa", subset="gpqa_diamond"))
    with pytest.raises(ConfigError, match="code"):
        StemConfig(mix=["aime", "physics"])


def test_a_real_benchmark_is_read_as_held_out_only() -> None:
    """A benchmark's dataset is its held-out table (its training split is never read); unknown settings name the
    task's own."""
    cfg = heldout_config(BenchmarkConfig("Beyond AIME", "aime", dataset="ByteDance-Seed/BeyondAIME", split="test"))
    assert (cfg.dataset, cfg.eval_dataset, cfg.eval_split) == ("ByteDance-Seed/BeyondAIME",) * 2 + ("test",)
    with pytest.raises(ConfigError, match=r"\[.releas.\].*eval_file"):
        heldout_config(BenchmarkConfig("x", "aime", settings={"releas": "v6"}))
