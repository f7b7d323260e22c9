"""scripts/gpu_smoke.sh's Python halves without a GPU: the engine-shaped buffers the sync job drains
`weights_for_sync()` into (benchmarks/gpu_smoke.py), the peak table, and the report's rows and formulas
(benchmarks/gpu_smoke_report.py) over job folders made here in the shape the jobs write them."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


smoke, smoke_report = load("gpu_smoke"), load("gpu_smoke_report")


@pytest.fixture(scope="module")
def llama():
    """A 2-layer Llama with grouped-query attention (4 heads, 2 key/value heads) and a vocabulary of 100."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config)


def weights(model) -> list[tuple[str, torch.Tensor]]:
    return [(name, p.detach()) for name, p in model.named_parameters()]


def test_engine_buffers_take_every_llama_weight_once_in_vllm_layout(llama):
    engine = smoke.EngineBuffers(llama.config, torch.device("cpu"), torch.float32)
    engine.fill(weights(llama))
    assert engine.unfilled(1) == []
    layer = llama.model.layers[1]
    qkv, rows = engine.slots["model.layers.1.self_attn.k_proj.weight"]
    assert qkv.shape == (32 + 2 * 16, 32) and rows == slice(32, 48)  # q: 4 heads × 8, k and v: 2 × 8 each
    attention = layer.self_attn
    expected = torch.cat([attention.q_proj.weight, attention.k_proj.weight, attention.v_proj.weight])
    assert torch.equal(qkv, expected)
    gate_up, _ = engine.slots["model.layers.1.mlp.up_proj.weight"]
    assert torch.equal(gate_up, torch.cat([layer.mlp.gate_proj.weight, layer.mlp.up_proj.weight]))
    embedding, rows = engine.slots["model.embed_tokens.weight"]
    assert embedding.shape == (128, 32) and torch.equal(embedding[rows], llama.model.embed_tokens.weight)
    assert engine.bytes() == sum(p.nbytes for p in llama.parameters())


def test_engine_buffers_refuse_a_name_the_engine_does_not_have(llama):
    """The peft wrapper's names are not the engine's: the drain stops on the first one, naming it."""
    engine = smoke.EngineBuffers(llama.config, torch.device("cpu"), torch.float32)
    wrapped = "base_model.model.model.layers.0.self_attn.q_proj.weight"
    with pytest.raises(KeyError, match=wrapped):
        engine.fill([(wrapped, llama.model.layers[0].self_attn.q_proj.weight)])


def test_engine_buffers_name_a_weight_sent_twice_or_never(llama):
    engine = smoke.EngineBuffers(llama.config, torch.device("cpu"), torch.float32)
    sent = [(n, w) for n, w in weights(llama) if n != "lm_head.weight"]
    engine.fill(sent)
    engine.fill(sent[:1])
    assert engine.unfilled(1) == [sent[0][0], "lm_head.weight"]


def test_device_peak_by_cuda_name():
    assert smoke.device_peak("NVIDIA H100 80GB HBM3") == 989.0  # SXM
    assert smoke.device_peak("NVIDIA H100 PCIe") == 756.0
    assert smoke.device_peak("NVIDIA H200") == 989.0
    assert smoke.device_peak("Tesla T4") is None


def job(scratch: Path, name: str, rc: int, processes: int = 1, timeout: int = 90) -> Path:
    folder = scratch / "jobs" / name
    folder.mkdir(parents=True)
    status = {"rc": rc, "wall_s": 42, "timeout_s": timeout, "processes": processes}
    (folder / "status.json").write_text(json.dumps(status))
    return folder


def train_run(folder: Path, steps: list[dict], prompts: int = 8, group: int = 8) -> None:
    run = folder / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"trainer": {"prompts_per_step": prompts, "group_size": group}}))
    (run / "metrics.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    (folder / "memory-0.json").write_text(json.dumps({"allocated_peak_gib": 20.0, "reserved_peak_gib": 24.0}))
    (folder / "memory-1.json").write_text(json.dumps({"allocated_peak_gib": 21.0, "reserved_peak_gib": 23.0}))
    (folder / "nvsmi.csv").write_text("1024\n30720\n2048\n")


def step(generate_s: float, update_s: float, tokens: float, length: float = 100.0) -> dict:
    return {
        "time/step_s": generate_s + update_s,
        "time/generate_s": generate_s,
        "time/update_s": update_s,
        "completion/length_mean": length,
        "throughput/update_tokens": tokens,
    }


def test_report_has_every_job_with_its_result_and_the_steady_state_numbers(tmp_path):
    scratch, out = tmp_path / "scratch", tmp_path / "out"
    job(scratch, "model", 0)
    (scratch / "jobs" / "model" / "model.json").write_text(
        json.dumps({"params": 10**9, "hidden": 2048, "layers": 16, "vocab": 2048})
    )
    (scratch / "peak.json").write_text(json.dumps({"tflops": 1000.0, "source": "test"}))
    # ZeRO-3 on 2 processes: the first step (warm-up) is left out, the medians of the other three are taken
    zero3 = job(scratch, "train-zero3", 0, processes=2)
    train_run(zero3, [step(60.0, 90.0, 1.0), step(2.0, 3.0, 20_000), step(4.0, 4.0, 30_000), step(3.0, 5.0, 40_000)])
    job(scratch, "train-lora", 124, timeout=85)
    job(scratch, "sync-zero3", 1)
    sync = job(scratch, "sync-lora", 0)
    (sync / "result.json").write_text(json.dumps({"tensors": 3, "gib": 2.0, "first_s": 1.0, "drain_s": [0.5, 0.4]}))
    assert smoke_report.report(scratch, out) is False  # not every job ran ok
    text = (out / "report.md").read_text()
    results = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1] for line in text.splitlines() if " | " in line}
    assert results["train-bf16"] == "not run" and results["logits-128k"] == "not run"
    assert results["train-zero3"] == "ok" and results["sync-lora"] == "ok"
    assert results["train-lora"] == "timed out (85 s)" and results["sync-zero3"] == "failed (exit 1)"
    numbers = json.loads((out / "numbers.json").read_text())["jobs"]["train-zero3"]
    assert numbers["generate_s"] == 3.0 and numbers["update_s"] == 4.0 and numbers["update_tokens"] == 30_000
    assert numbers["generation_tokens_per_s"] == pytest.approx(100 * 8 * 8 * 2 / 3.0)  # both processes' tokens
    assert numbers["mfu"] == pytest.approx(6 * 1e9 * 30_000 / 4.0 / (2 * 1000e12))  # 6·N·tokens / s / (W·peak)
    assert numbers["memory"] == {"allocated_peak_gib": 21.0, "reserved_peak_gib": 24.0, "device_peak_gib": 30.0}
    assert "| sync-lora | ok | 42 | 3 | 2 | 1 | 0.45 | 4.77 |" in text  # 2 GiB in 0.45 s


def test_report_counts_4_n_per_token_under_lora(tmp_path):
    """LoRA's frozen base gets no weight gradient: forward (2N) and backward to the activations (2N) only."""
    scratch = tmp_path / "scratch"
    job(scratch, "model", 0)
    (scratch / "jobs" / "model" / "model.json").write_text(json.dumps({"params": 1e9}))
    train_run(job(scratch, "train-lora", 0), [step(1.0, 1.0, 10_000), step(1.0, 2.0, 10_000)])
    numbers = smoke_report.job_numbers(scratch, "train-lora", {"params": 1e9}, 1000.0)
    assert numbers["mfu"] == pytest.approx(4 * 1e9 * 10_000 / 2.0 / 1000e12)
