"""The shipped code task scores the same under bubblewrap isolation as under the audit hook alone: every test of
every shipped problem (16 training, 8 held-out) gives its reference solution the same status in both sandboxes,
`passed` each time, so pass@k of the shipped task is unchanged by task.sandbox; a wrong program fails the first
test in both. Skipped, with the reason, where bwrap cannot run here."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tsrl.tasks import isolation
from tsrl.tasks.code import CodeConfig, CodeTask, extract_program
from tsrl.tasks.sandbox import run_test

PROBLEM = isolation.bwrap_problem()
WRONG = "import sys\nsys.stdin.read()\nprint('WRONG')\n"


@pytest.mark.slow
@pytest.mark.skipif(bool(PROBLEM), reason=f"bubblewrap isolation is unavailable here: {PROBLEM}")
def test_every_shipped_reference_gets_the_same_results_under_bwrap_and_the_hook_alone():
    """About 110 test runs per sandbox, 2 at a time; each test's status compared, not only the problem's score."""
    tasks = {mode: CodeTask(CodeConfig(sandbox=mode)) for mode in ("bwrap", "hook")}
    prompts = tasks["hook"].prompts("train") + tasks["hook"].prompts("eval")
    assert len(prompts) == 24
    jobs = [
        (mode, prompt, extract_program(prompt.anchors[0].text), stdin, expected)
        for mode in tasks
        for prompt in prompts
        for stdin, expected in prompt.fields["tests"]
    ]

    def status(job: tuple) -> str:
        mode, prompt, program, stdin, expected = job
        return run_test(program, stdin, expected, tasks[mode].limits, prompt.fields["func_name"]).status

    with ThreadPoolExecutor(2) as pool:
        statuses = list(pool.map(status, jobs))
    half = len(jobs) // 2
    assert statuses[:half] == statuses[half:] == ["passed"] * half
    wrong = {mode: [run_test(WRONG, *p.fields["tests"][0], task.limits).status for p in prompts[:4]]
             for mode, task in tasks.items()}  # fmt: skip
    assert wrong["bwrap"] == wrong["hook"] == ["wrong_answer"] * 4
