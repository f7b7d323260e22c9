"""task=code: the shipped problems are sound (every reference solution passes its tests in the sandbox, a wrong
program fails them), the program is read from the completion's last code block, LiveCodeBench rows load from a
local file with their compressed private tests decoded without unpickling, the simulated judge's quality reads
the trace alone (never the tests or the reference), and evaluation reports pass@5 by the unbiased estimator."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from tsrl.errors import DataError
from tsrl.evaluation.passk import ks_for, pass_at_k, pass_summary, pass_sums
from tsrl.generation import Generator
from tsrl.tasks.code import CodeConfig, CodeTask, code_quality, decode_tests, extract_program, pickled_string
from tsrl.types import Group, Prompt, Rollout

WRONG = "```python\nimport sys\nsys.stdin.read()\nprint('WRONG')\n```"


def fenced(program: str) -> str:
    return f"Here is my solution.\n\n```python\n{program}\n```"


@pytest.fixture(scope="module")
def task() -> CodeTask:
    return CodeTask(CodeConfig())


def test_every_shipped_reference_passes_and_a_wrong_program_fails(task):
    """16 training and 8 held-out problems; each reference (its one anchor) passes all of its tests, a program
    printing WRONG passes none. Runs the 24 problems on 2 threads (each test is its own process)."""
    prompts = task.prompts("train") + task.prompts("eval")
    assert (len(task.prompts("train")), len(task.prompts("eval"))) == (16, 8)
    assert len({p.id for p in prompts}) == 24 and all(len(p.fields["tests"]) >= 4 for p in prompts)
    with ThreadPoolExecutor(2) as pool:
        right = list(pool.map(lambda p: task.verify(p, p.anchors[0].text), prompts))
        wrong = list(pool.map(lambda p: task.verify(p, WRONG), prompts))
    assert right == [1.0] * 24 and wrong == [0.0] * 24
    assert not any(out == "WRONG\n" for p in prompts for _, out in p.fields["tests"])


def test_the_program_is_the_last_code_block_and_no_block_scores_zero(task):
    prompt = task.prompts("train")[0]  # sum of two integers
    good = "a, b = map(int, input().split())\nprint(a + b)"
    assert extract_program(f"```python\nprint(0)\n```\nbetter:\n```py\n{good}\n```") == good + "\n"
    assert extract_program(f"```\n{good}\n```") == good + "\n"
    assert extract_program(f"```python\n{good}") is None  # truncated: the block never closes
    assert task.verify(prompt, f"```python\nprint(0)\n```\nbetter:\n```python\n{good}\n```") == 1.0
    assert task.verify(prompt, good) == 0.0 and task.extract(good) is None  # no fence: nothing runs
    assert task.verify(prompt, "```python\n\n```") == 0.0


def test_a_program_that_passes_some_tests_but_not_all_scores_zero(task):
    prompt = next(p for p in task.prompts("train") if p.id == "factorial")
    almost = "n = int(input())\nprint(1 if n < 2 else n * (n - 1) if n < 6 else 0)"  # right for 0, 1, 5
    assert task.verify(prompt, fenced(almost)) == 0.0


def test_the_simulated_quality_reads_the_trace_alone(task):
    """Two prompts that differ only in their tests and reference give every trace the same quality, so the
    simulated judge cannot act as a verifier."""
    prompt = task.prompts("train")[0]
    other = replace(prompt, anchors=(), fields={**prompt.fields, "tests": (("1 1\n", "999\n"),)})
    traces = [prompt.anchors[0].text, fenced("print(sum(map(int, input().split())))"), WRONG, "no code at all", ""]
    assert [task.quality(prompt, t) for t in traces] == [task.quality(other, t) for t in traces]
    assert [code_quality(t) for t in traces] == [task.quality(prompt, t) for t in traces]
    assert code_quality(fenced("print(1)")) > code_quality("print(1)") > code_quality("")


def lcb_row(index: int, date: str, private: str) -> dict:
    return {
        "question_id": f"q{index}",
        "question_title": f"Problem {index}",
        "question_content": "Print the sum.",
        "platform": "atcoder",
        "difficulty": "easy",
        "contest_date": date,
        "starter_code": "",
        "metadata": "{}",
        "public_test_cases": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]),
        "private_test_cases": private,
    }


def compressed(tests: list[dict], protocol: int = 4) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests), protocol=protocol))).decode()


def test_livecodebench_rows_load_with_private_tests_decoded_and_a_date_window(tmp_path, task):
    private = [{"input": "5 5\n", "output": "10\n", "testtype": "stdin"}]
    path = tmp_path / "test6.jsonl"
    rows = [
        lcb_row(0, "2025-01-15T00:00:00", compressed(private)),
        lcb_row(1, "2025-03-02T00:00:00", compressed(private, 0)),
        lcb_row(2, "2025-06-01T00:00:00", ""),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lcb = CodeTask(CodeConfig(eval_dataset=str(path), min_date="2025-02-01", max_date="2025-05-01"))
    assert len(lcb.prompts("train")) == 16  # training problems stay the shipped ones
    (held,) = lcb.prompts("eval")
    assert held.id == "eval/q1" and held.fields["tests"] == (("1 2\n", "3\n"), ("5 5\n", "10\n"))
    assert "Print the sum." in held.text and held.anchors == ()
    assert lcb.verify(held, fenced("print(sum(map(int, input().split())))")) == 1.0
    everything = CodeTask(CodeConfig(eval_dataset=str(path)))
    assert [p.id for p in everything.prompts("eval")] == ["eval/q0", "eval/q1", "eval/q2"]


def test_functional_livecodebench_rows_call_the_starter_method(tmp_path):
    row = lcb_row(0, "2025-03-01", "") | {
        "starter_code": "class Solution:\n    def add(self, a: int, b: int) -> int:\n        ",
        "metadata": json.dumps({"func_name": "add"}),
        "public_test_cases": json.dumps([{"input": "1\n2", "output": "3", "testtype": "functional"}]),
    }
    path = tmp_path / "lcb.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (held,) = CodeTask(CodeConfig(eval_dataset=str(path))).prompts("eval")
    assert held.fields["func_name"] == "add" and "class Solution" in held.text
    program = "class Solution:\n    def add(self, a, b):\n        return a + b"
    assert CodeTask(CodeConfig(eval_dataset=str(path))).verify(held, fenced(program)) == 1.0


class Evil:
    def __reduce__(self):
        return (print, ("unpickled!",))


def test_private_tests_are_read_without_unpickling_and_other_pickles_are_refused(capsys):
    tests = [{"input": "1\n", "output": "1\n", "testtype": "stdin"}]
    for protocol in range(0, pickle.HIGHEST_PROTOCOL + 1):
        assert decode_tests(compressed(tests, protocol), "row") == tests
    assert decode_tests(json.dumps(tests), "row") == tests and decode_tests("", "row") == []
    with pytest.raises(DataError, match="refuses to unpickle"):
        pickled_string(pickle.dumps(Evil()))
    with pytest.raises(DataError, match="refuses to unpickle"):
        decode_tests(base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode(), "row")
    assert "unpickled!" not in capsys.readouterr().out
    with pytest.raises(DataError):
        decode_tests("not base64 at all!", "row")


class FixedGenerator(Generator):
    """Answers every prompt with the given completions (a real Generator, no model)."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    def generate(self, prompts, n, max_new_tokens=None, greedy_first=False) -> list[Group]:
        return [Group(p, [1], [Rollout(t, [1, 2], [0.0, 0.0], False) for t in self.texts[:n]]) for p in prompts]


def test_evaluation_reports_pass_at_5_from_sixteen_samples(task):
    """3 of 16 samples right: pass ratio@16 = 3/16, pass@5 = 1 − C(13, 5)/C(16, 5) (the unbiased estimator)."""
    prompt: Prompt = task.prompts("eval")[0]
    texts = [prompt.anchors[0].text] * 3 + [WRONG] * 10 + ["no code"] * 3
    summary = pass_summary(pass_sums(FixedGenerator(texts), task, [prompt], 16), 16)
    assert summary["pass_ratio"] == pytest.approx(100 * 3 / 16)
    assert summary["pass@5"] == pytest.approx(100 * pass_at_k(16, 3, 5)) == pytest.approx(100 * (1 - 1287 / 4368))
    assert summary["answered"] == pytest.approx(100 * 13 / 16)
    assert ks_for(16, (5,)) == [1, 2, 4, 5, 8, 16] and ks_for(4, (5,)) == [1, 2, 4]


def test_verify_many_keeps_the_order_and_runs_sandboxes_at_once(task):
    """Four right programs that sleep 0.25 s per test (1 s over the problem's 4 tests) and two that fail at once:
    one after another they need ≥ 4 s, with 4 workers about 1 s (the bound, 3.5 s, leaves room for a loaded
    machine)."""
    import time

    prompt = task.prompts("train")[0]  # sum of two integers; its 4 tests run one after another per program
    slow = fenced("import time\ntime.sleep(0.25)\na, b = map(int, input().split())\nprint(a + b)")
    items = [(prompt, slow), (prompt, WRONG), (prompt, slow), (prompt, "no code"), (prompt, slow), (prompt, slow)]
    parallel = CodeTask(CodeConfig(workers=4))
    start = time.monotonic()
    assert parallel.verify_many(items) == [1.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    assert time.monotonic() - start < 3.5
