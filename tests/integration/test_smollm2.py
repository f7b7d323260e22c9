"""model=smollm2: the packaged GGUF converted once into a plain Hugging Face folder, and trained through the CLI.

The module converts once into the session's cache (about a minute on 2 cores); both tests reuse it.
"""

import json
import shutil
from pathlib import Path

import pytest

from tsrl.testing.cli import read_metrics, run_cli

pytestmark = pytest.mark.slow

PROMPT = [{"role": "user", "content": "Write a short, funny joke that uses both of these words: piano, cat."}]


@pytest.fixture(scope="module")
def converted(cache_dir) -> Path:
    pytest.importorskip("gguf")
    from tsrl.models import smollm2_folder

    return smollm2_folder("float32", str(cache_dir / "models"))


def test_converted_folder_reloads_plainly_with_the_ggufs_logits(converted):
    """A plain from_pretrained(folder) — no gguf_file, no tsrl — gives the same tokens, chat prompt and
    logits as transformers reading the GGUF itself (both de-quantise the same Q4_1 blocks to float32)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tsrl.models.smollm2 import smollm2_gguf

    assert {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json"} <= {
        p.name for p in converted.iterdir()
    }
    assert "quantization_config" not in json.loads((converted / "config.json").read_text())
    source = smollm2_gguf()
    folder_tok = AutoTokenizer.from_pretrained(converted, local_files_only=True)
    gguf_tok = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    chat = gguf_tok.apply_chat_template(PROMPT, add_generation_prompt=True, tokenize=False)
    assert folder_tok.apply_chat_template(PROMPT, add_generation_prompt=True, tokenize=False) == chat
    ids = gguf_tok(chat, return_tensors="pt", add_special_tokens=False)["input_ids"]  # [1, L]
    assert folder_tok(chat, return_tensors="pt", add_special_tokens=False)["input_ids"].tolist() == ids.tolist()
    assert folder_tok.eos_token == gguf_tok.eos_token == "<|im_end|>"

    folder_model = AutoModelForCausalLM.from_pretrained(converted, local_files_only=True).eval()
    gguf_model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32).eval()
    assert getattr(folder_model, "hf_quantizer", None) is None
    with torch.no_grad():
        expected, got = gguf_model(ids).logits, folder_model(ids).logits  # [1, L, V]
    assert got.shape == expected.shape and got.shape[-1] == 49152
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-4)


def test_two_training_steps_through_the_cli(converted, cache_dir, tmp_path, monkeypatch):
    """The real tsrl-train with model=smollm2, tiny batches: it finds the session's conversion, trains two
    steps, evaluates at start and end."""
    # One OpenMP thread: on 2 cores shared with other work (pytest itself, a parallel job) two threads made
    # this run 3.6x slower (129 s against 36 s measured), the small matrix products of decoding waiting on a
    # descheduled thread.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    run = tmp_path / "run"
    result = run_cli(
        [
            "model=smollm2",
            f"model.cache_dir={cache_dir / 'models'}",
            f"reward.ladder_dir={cache_dir / 'ladders'}",
            "trainer.max_steps=2",
            "trainer.prompts_per_step=1",
            "trainer.group_size=2",
            "trainer.lr=1e-5",
            "generator.max_new_tokens=8",
            "trainer.eval.samples=1",
            "trainer.eval.max_prompts=2",
            f"run_dir={run}",
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_metrics(run)
    assert [r["step"] for r in rows] == [1, 2]
    assert all(0.0 <= r["reward/mean"] <= 1.0 and r["judge/calls"] > 0 for r in rows)
    evals = json.loads((run / "eval.json").read_text())
    assert [e["step"] for e in evals["history"]] == [0, 2] and 0.0 <= evals["latest"]["winrate"] <= 100.0
    policy = json.loads((run / "checkpoints" / "step_000002" / "policy" / "config.json").read_text())
    assert policy["num_hidden_layers"] == 30 and policy["vocab_size"] == 49152  # SmolLM2-135M, not the tiny model
    assert [p.name for p in (cache_dir / "models").iterdir() if p.name.startswith("smollm2")] == [converted.name]
    shutil.rmtree(run / "checkpoints")  # 1.6 GB of weights and optimizer state
