"""A real judge server end to end: SmolLM2-135M-Instruct served by vLLM's OpenAI-compatible server on CPU.

`make test-judge-server` (part of `make test`) runs this module: `tsrl-serve-judge` starts the server from
.venv-vllm (TSRL_VLLM_PYTHON names its interpreter), the real commands run against it, and the server is stopped at
the end. SmolLM2 is a poor judge and does not end its answers with `VERDICT: A` on its own, which is what this
stage is for: with judge.constrain=auto every question is answered (the server constrains the answer), with
judge.constrain=off the run stops within seconds naming unreadable verdicts; verdicts, soft probabilities and the
token accounting are checked against the server's own counters; and a 2-step tsrl-train runs the ladder, rubric and
adaptive regimes against it, and the perception model is fitted to it. The server runs eagerly
(--enforce-eager): on this CPU vLLM's graph compilation cost more than it saved. Measured here: the server starts in
80 s, the module takes 6.5 min.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tsrl.testing.cli import cli_env, read_metrics, tiny_overrides

pytestmark = [pytest.mark.judge_server, pytest.mark.slow]

BIN = Path(sys.executable).parent
VLLM_PYTHON = os.environ.get("TSRL_VLLM_PYTHON", "")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(base URL, the judge overrides tsrl-serve-judge printed) while the server runs; stopped afterwards."""
    if not VLLM_PYTHON or not Path(VLLM_PYTHON).is_file():
        if os.environ.get("TSRL_REQUIRE_JUDGE_SERVER") == "1":
            pytest.fail(
                f"TSRL_VLLM_PYTHON={VLLM_PYTHON!r} is no interpreter; `make test-judge-server` sets it to "
                ".venv-vllm/bin/python (built by `make test-vllm`)."
            )
        pytest.skip("no vLLM environment (set TSRL_VLLM_PYTHON to .venv-vllm/bin/python)")
    from tsrl.models import smollm2_folder

    folder = tmp_path_factory.mktemp("judge_server")
    overrides_file = folder / "overrides.txt"
    port = free_port()
    server = subprocess.Popen(
        [
            str(BIN / "tsrl-serve-judge"),
            "--model",
            str(smollm2_folder()),
            "--name",
            "smollm2",
            "--python",
            VLLM_PYTHON,
            "--gpus",
            "cpu",
            "--dtype",
            "float32",
            "--max-model-len",
            "4096",
            "--port",
            str(port),
            "--log-dir",
            str(folder / "logs"),
            "--env-file",
            str(overrides_file),
            "--wait-s",
            "600",
            "--engine-arg=--enforce-eager",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        while not overrides_file.exists():
            if server.poll() is not None:
                pytest.fail(f"tsrl-serve-judge exited with {server.returncode}:\n{server.stdout.read()[-3000:]}")
            time.sleep(1.0)
        yield f"http://127.0.0.1:{port}/v1", overrides_file.read_text().split()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=90)
    assert server.returncode == 0


def judge_check(tmp_path: Path, judge: list[str], *overrides: str) -> tuple[subprocess.CompletedProcess, dict, float]:
    start = time.monotonic()
    done = subprocess.run(
        [str(BIN / "tsrl-judge-check"), *judge, "task=humor", f"run_dir={tmp_path}", *overrides],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=tmp_path,
        timeout=600,
    )
    report_file = tmp_path / "judge_check.json"
    report = json.loads(report_file.read_text()) if report_file.exists() else {}
    return done, report, time.monotonic() - start


def server_tokens(url: str) -> float:
    """Prompt + generated tokens the server has processed so far (its Prometheus counters)."""
    text = urllib.request.urlopen(url.removesuffix("/v1") + "/metrics", timeout=10).read().decode()
    counters = re.findall(r"^vllm:(?:prompt|generation)_tokens_total\{[^}]*\} ([0-9.e+]+)$", text, re.MULTILINE)
    assert len(counters) == 2, "the server's /metrics lacks vllm:prompt_tokens_total / generation_tokens_total"
    return sum(map(float, counters))


def server_requests(url: str) -> float:
    """Requests the server has finished so far, whatever their finish reason (its Prometheus counters)."""
    text = urllib.request.urlopen(url.removesuffix("/v1") + "/metrics", timeout=10).read().decode()
    counters = re.findall(r"^vllm:request_success_total\{[^}]*\} ([0-9.e+]+)$", text, re.MULTILINE)
    assert counters, "the server's /metrics lacks vllm:request_success_total"
    return sum(map(float, counters))


@pytest.mark.parametrize("form, constraint", [("reasoning", "regex"), ("direct", "choice")])
def test_constrained_verdicts_answer_every_question(served, tmp_path, form, constraint):
    _, judge = served
    done, report, _ = judge_check(tmp_path, judge, f"judge.form={form}", "check.prompts=1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert report["answered"] == report["questions"] == 20  # 1 prompt x C(5, 2) anchor pairs x 2 orders
    assert report["format_following"] == 1.0 and report["reask_share"] == 0.0
    assert report["forms"] == {f"{form}/{constraint}+soft": 20}  # constrained, P(A) from the verdict token
    assert 0.0 < report["position_bias_p_first"] < 1.0  # soft: not all-or-nothing
    assert report["calibration"]["n"] == 20 and 0.0 <= report["calibration"]["ece"] <= 1.0
    assert "format following                   100.0% of answers readable" in done.stdout


def test_the_fit_of_smollm2_says_it_is_a_poor_judge(served, tmp_path):
    """check.fit=true against the served SmolLM2 (direct form): every verdict and grade answered, and the fit
    finds what the model is — verdicts with no detectable dependence on quality and a strong first-position bias
    (measured on 16 prompts: likelihood ratio 0.0, p = 0.98; the first shown wins 91 % [87, 93] of equal pairs;
    every anchor graded 10) — and writes a profile the simulated judge loads."""
    from tsrl.judging import RubricSimConfig

    _, judge = served
    done, report, elapsed = judge_check(tmp_path, judge, "judge.form=direct", "check.prompts=4", "check.fit=true")
    assert done.returncode == 0, done.stderr[-3000:]
    fit = report["fit"]
    assert fit["data"]["verdicts"] == 80 and fit["data"]["grades"] == 20 and fit["data"]["unanswered"] == 0
    assert fit["signal_test"]["p_value"] > 0.01  # no evidence that its verdicts follow the ladder
    assert fit["estimates"]["p_first_if_equal"]["ci95"][0] > 0.7  # the first shown wins, whatever it is
    assert "perception model fit" in done.stdout
    low, high = fit["estimates"]["signal_per_tau"]["ci95"]
    assert low < 0.0 < high  # 1/τ: zero signal is inside its interval
    cfg = RubricSimConfig(profile=fit["profile"])
    assert cfg.profile == f"applied:{fit['profile']}" and cfg.taste == 0.0
    print(
        f"fit of SmolLM2 in {elapsed:.0f} s: LR p = {fit['signal_test']['p_value']:.2f}, "
        f"P(first | equal) = {fit['estimates']['p_first_if_equal']['value']:.3f}, grades {fit['data']['grades_used']}"
    )


def test_an_unconstrained_judge_that_ignores_the_format_stops_within_seconds(served, tmp_path):
    """It stops on its first answers: until one is readable only judge.retry.first_answers (4) requests go out, so
    the server finishes those 4 of the check's 320 questions. Counted by the server rather than timed, so that a
    loaded machine cannot fail it (20–22 s on a quiet one, 56 s beside a CI run and a study)."""
    url, judge = served
    before = server_requests(url)
    done, _, elapsed = judge_check(tmp_path, judge, "judge.constrain=off", "check.prompts=16")
    finished = server_requests(url) - before
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    error = done.stderr.strip().splitlines()[-1]
    assert "none of its first 4 answers held a readable verdict" in error and "judge.constrain=auto" in error
    assert "failed 20 requests in a row" not in error  # not taken for a dead server
    print(f"unconstrained judge stopped after {elapsed:.1f} s and {finished:.0f} finished requests: {error}")
    assert finished == 4, finished


def test_tokens_and_soft_probabilities_match_the_server(served):
    """In process: the tokens the judge counts equal what the server processed for the same questions, and each
    soft verdict is a probability strictly inside (0, 1) whose hard side matches the answer text."""
    from tsrl.calibration.check import anchor_questions, raw_positions
    from tsrl.judging import build_judge, close_judge
    from tsrl.remote.hedging import HedgeConfig
    from tsrl.remote.openai_config import OpenAIJudgeConfig
    from tsrl.tasks import HumorConfig, build_task

    url, _ = served
    task = build_task(HumorConfig())
    requests, _ = anchor_questions([p for p in task.prompts("eval") if len(p.anchors) >= 2][:1])
    cfg = OpenAIJudgeConfig(
        base_urls=[url], model="smollm2", api_key_env="", form="direct", hedge=HedgeConfig(enabled=False)
    )  # no duplicate requests: the counts must match
    judge = build_judge(raw_positions(cfg), task)
    try:
        judge.drain_metrics()
        before = server_tokens(url)
        verdicts = judge.compare(requests)
        metrics = judge.drain_metrics()
        after = server_tokens(url)
    finally:
        close_judge(judge)
    assert metrics["calls"] == len(requests) == 20 and metrics.get("errors", 0) == 0
    assert metrics["tokens"] == after - before  # prompt + completion tokens, as the server counted them
    assert metrics["soft_verdicts"] == 20
    for verdict in verdicts:  # greedy decoding picks the likeliest choice, so P(A) + ½P(TIE) sides with it
        assert 0.0 < verdict.p_first < 1.0 and verdict.form == "direct/choice+soft"
        answer = verdict.raw.strip()
        assert answer in ("A", "B", "TIE")
        assert verdict.p_first >= 0.5 if answer == "A" else verdict.p_first <= 0.5 if answer == "B" else True


ONE_PROMPT = ["task=humor", "task.max_prompts=1", "trainer.prompts_per_step=1"]  # the ladder: 45 verdicts
# One held-out prompt: each evaluation (at start and end) asks the served judge 10 anchors, not 4 prompts' 40.
ONE_HELD_OUT = ["trainer.eval.max_prompts=1"]
REGIMES = {  # method overrides
    "ladder": ["method=tsrl", *ONE_PROMPT],
    "rubric": ["method=rubric", *ONE_PROMPT, "trainer.step_multiplier=1"],
    "adaptive": ["method=reasoning_arena", "task=aime", "task.max_prompts=2", "judge.form=direct"],
}


@pytest.mark.parametrize("regime", REGIMES)
def test_two_training_steps_against_the_served_judge(served, cli, cache_dir, tmp_path, regime):
    url, judge = served
    before = server_tokens(url)
    small = [o for o in tiny_overrides(cache_dir) if regime == "ladder" or not o.startswith("reward.ladder_dir=")]
    overrides = [*small, *ONE_HELD_OUT, *judge, *REGIMES[regime], "trainer.max_steps=2", f"run_dir={tmp_path / 'run'}"]
    done = cli(overrides, tmp_path)  # tsrl-train's main() in a forked child (tests/integration/conftest.py)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == [1, 2]
    calls = sum(r.get("judge/calls", 0) for r in rows)
    assert calls > 0 and sum(r.get("judge/errors", 0) for r in rows) == 0
    answered = {key.removeprefix("judge/answers/") for r in rows for key in r if key.startswith("judge/answers/")}
    expected = {"ladder": {"reasoning/regex"}, "rubric": {"reasoning/regex"}, "adaptive": {"direct/choice"}}[regime]
    assert answered == expected, answered
    if regime != "rubric":  # verdicts carry soft probabilities; grades are integers
        assert sum(r.get("judge/soft_verdicts", 0) for r in rows) == sum(r["judge/answers"] for r in rows)
    assert 0 < sum(r["judge/tokens"] for r in rows) <= server_tokens(url) - before
    assert all(0.0 <= r["reward/mean"] <= 1.0 for r in rows)


TOKENS_FILE = Path(__file__).resolve().parents[2] / "runs" / "judge_tokens" / "smollm2.json"


def tokens_per_answer(judge, answers: list) -> dict:
    """The judge's drained metrics for `answers` as calls, answered, how they were asked, and prompt and completion
    tokens per call (its cost_usd counts completion tokens at price_out_per_m = 1e6)."""
    m = judge.drain_metrics()
    calls, completion = m["calls"], m.get("cost_usd", 0.0)
    return {
        "calls": calls,
        "answered": calls - m.get("errors", 0),
        "asked_as": sorted({a.form for a in answers if a.form}),
        "prompt_tokens": (m["tokens"] - completion) / calls,
        "completion_tokens": completion / calls,
    }


def test_tokens_per_verdict_by_answer_form(served):
    """Tokens per answer on the served SmolLM2, from the server's usage as the judge's metrics count it: 8 verdicts
    and 2 lists of 4 in the reasoning form and in the direct form (each constrained as judge.constrain=auto asks),
    prompt and completion tokens apart. Written to runs/judge_tokens/smollm2.json and printed; docs/benchmarks.md
    cites it. Asserted: only structure — every question is asked once, and the direct form generates fewer tokens
    per answer than the reasoning form."""
    from tsrl.calibration.check import anchor_questions
    from tsrl.judging import build_judge, close_judge
    from tsrl.remote.hedging import HedgeConfig
    from tsrl.remote.openai_config import OpenAIJudgeConfig
    from tsrl.tasks import HumorConfig, build_task
    from tsrl.types import ListRequest

    url, _ = served
    task = build_task(HumorConfig())
    prompt = task.prompts("train")[0]  # 10 anchors: 8 pairs of the first ones, lists of anchors 1–4 and 5–8
    pairs = anchor_questions([prompt])[0][:8]
    lists = [ListRequest(prompt, tuple(a.text for a in prompt.anchors[i : i + 4])) for i in (0, 4)]
    rows = {}
    for form in ("reasoning", "direct"):
        cfg = OpenAIJudgeConfig(
            base_urls=[url],
            model="smollm2",
            api_key_env="",
            form=form,
            price_out_per_m=1e6,
            hedge=HedgeConfig(enabled=False),
        )
        judge = build_judge(cfg, task)
        try:
            judge.drain_metrics()  # the constraint probe's answer
            rows[f"{form}, verdict"] = tokens_per_answer(judge, judge.compare(pairs))
            rows[f"{form}, list of 4"] = tokens_per_answer(judge, judge.score_lists(lists))
        finally:
            close_judge(judge)
    TOKENS_FILE.parent.mkdir(parents=True, exist_ok=True)
    TOKENS_FILE.write_text(json.dumps({"model": "SmolLM2-135M-Instruct (vLLM, CPU)", "answers": rows}, indent=1))
    for name, row in rows.items():
        print(f"{name}: {row['prompt_tokens']:.0f} prompt + {row['completion_tokens']:.1f} completion tokens/answer")
    assert [row["calls"] for row in rows.values()] == [8, 2, 8, 2]
    for kind in ("verdict", "list of 4"):
        assert rows[f"direct, {kind}"]["completion_tokens"] < rows[f"reasoning, {kind}"]["completion_tokens"]
