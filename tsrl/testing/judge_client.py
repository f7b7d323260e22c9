"""Test and benchmark support: the openai judge pointed at a loopback `JudgeServer`.

A retry policy fast enough for faults injected by the hundred, pairs whose winner the server's word-count rule
makes known (`expected`), lists whose scores it makes known (`word_lists`, `expected_scores`), and `judge_for`,
which builds a judge on a server and keeps it until `close_judges` (a fixture calls it after each test, so no test
leaves connections or event loops behind).
"""

from __future__ import annotations

import time
from typing import Any

from tsrl.judging import Judge, build_judge, close_judge
from tsrl.remote.openai_config import OpenAIJudgeConfig, RetryConfig
from tsrl.testing.fakes import NumberTask
from tsrl.testing.judge_server import JudgeServer
from tsrl.types import ListRequest, PairRequest, Prompt

KEY_ENV, KEY = "TSRL_TEST_JUDGE_KEY", "sk-test-5ecret-never-logged"
PROMPT = Prompt("p", "Say something.")
FAST = RetryConfig(timeout_s=0.5, max_retries=8, backoff_s=0.005, backoff_max_s=0.1, max_consecutive_failures=20)

OPENED: list[Judge] = []  # judges made by judge_for since the last close_judges


def judge_for(server: JudgeServer, **overrides: Any) -> Judge:
    """An openai judge on `server` (fixed order, 16 workers, FAST retries, no constraint: the loopback server
    constrains nothing by default); `overrides` are OpenAIJudgeConfig fields. Closed by close_judges."""
    settings = {
        "base_urls": [server.url],
        "api_key_env": KEY_ENV,
        "order": "fixed",
        "concurrency": 16,
        "retry": FAST,
        "constrain": "off",
        **overrides,
    }
    OPENED.append(build_judge(OpenAIJudgeConfig(**settings), NumberTask()))
    return OPENED[-1]


def close_judges() -> None:
    """Close every judge judge_for made."""
    while OPENED:
        close_judge(OPENED.pop())


def word_pairs(n: int) -> list[PairRequest]:
    """n distinct pairs (the index is part of each text) with known word-count winners."""
    return [PairRequest(PROMPT, " ".join([f"w{i}"] * (i % 5 + 1)), " ".join([f"v{i}"] * (i % 3 + 1))) for i in range(n)]


def expected(request: PairRequest) -> float:
    """The server's verdict on `request` as p_first: the response with more words wins, equal counts tie."""
    a, b = len(request.first.split()), len(request.second.split())
    return 1.0 if a > b else 0.0 if b > a else 0.5


def word_lists(n: int, size: int) -> list[ListRequest]:
    """n distinct lists of `size` responses (the indices are part of each text) of 1 … 12 words."""
    return [
        ListRequest(PROMPT, tuple(" ".join([f"w{i}x{j}"] * ((3 * i + 5 * j) % 12 + 1)) for j in range(size)))
        for i in range(n)
    ]


def expected_scores(request: ListRequest) -> list[float]:
    """The server's scores of `request`, in slot order: each response's words, at most 10."""
    return [float(min(10, len(text.split()))) for text in request.responses]


def most_in_any_window(times: list[float], window_s: float) -> int:
    """The most of `times` (seconds) that one interval [t, t + window_s) holds, over every start t: a rate limit of
    R per window holds if this is at most R."""
    ordered, most, first = sorted(times), 0, 0
    for last, end in enumerate(ordered):
        while ordered[first] <= end - window_s:
            first += 1
        most = max(most, last - first + 1)
    return most


def timed_compare(judge: Judge, requests: list[PairRequest]) -> float:
    """Seconds `judge.compare(requests)` takes: a baseline measured in the test itself, so that a timing bound
    holds on a loaded machine (bound = baseline + what the behaviour under test may add)."""
    start = time.perf_counter()
    judge.compare(requests)
    return time.perf_counter() - start
