"""The colocated vLLM engine in the memory plan (tsrl/training/memory_engine.py, tsrl/training/memory.py): its
automatic share and batch limits, with the 8B numbers that made generation run in waves at a share of 0.3, and the
plan's terms for the offline baselines' engine (asleep in the update), DeepSpeed's float32 gradients at the
optimizer step (tsrl/training/memory_learner.py) and the sampler's run-time copies. Pure arithmetic and config
composition: no GPU."""

from __future__ import annotations

import logging
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from hydra import compose, initialize_config_module

from tsrl.commands.base import to_run_config
from tsrl.config import register_configs
from tsrl.models.shape import shipped_shape
from tsrl.training.memory import (
    GIB,
    RunShape,
    check_memory,
    plan_memory,
    run_shape,
)
from tsrl.training.memory_engine import (
    BATCHED_TOKENS_CAP,
    MAX_SHARE,
    SHARE_MARGIN,
    engine_batch_limits,
    engine_share,
)
from tsrl.training.memory_learner import DEEPSPEED_SUB_GROUP, step_gradient_bytes

H100 = 80 * 10**9  # 74.5 GiB
LLAMA = shipped_shape("llama31_8b")
PROMPT = 300  # tokens: + 64 of margin + 1,024 new = 1,388, an engine context of 1,536 (the "1.4k tokens")
# trainer.prompts_per_step is the step's batch over every process: 128 prompts × G = 8 on 8 GPUs = 128 rows each
EIGHT_B = ("recipes=paper/tsrl_table1", "method=tsrl", "trainer.prompts_per_step=128")


def composed(*overrides: str):
    register_configs()
    with initialize_config_module("tsrl.configs", version_base="1.3"):
        return to_run_config(compose("config", overrides=list(overrides)))


def test_batch_limits_are_a_steps_rows_and_the_context():
    """Every row of a step decodes at once; a step's token budget holds a whole prompt (bounded by the context, capped
    where vLLM would prefill in chunks anyway) and one token of every row."""
    assert engine_batch_limits(128, 1536) == (128, 1536)
    assert engine_batch_limits(2048, 1536) == (2048, 2048)  # vLLM refuses fewer tokens than sequences
    assert engine_batch_limits(16, 131072) == (16, BATCHED_TOKENS_CAP)


def test_the_share_is_what_the_learner_leaves_less_the_margin():
    assert engine_share(learner=20 * GIB, sampler=0, device=100 * GIB) == pytest.approx(0.80 - SHARE_MARGIN)
    assert engine_share(learner=GIB, sampler=0, device=100 * GIB) == MAX_SHARE  # vLLM's default at most
    assert engine_share(learner=99 * GIB, sampler=GIB, device=100 * GIB) == 0.01  # refused by the KV check instead


def test_at_a_share_of_0_3_an_8b_engine_generates_a_step_in_waves_and_auto_in_one():
    """Llama-3.1-8B, 8 × H100 under ZeRO-3, 128 rows per process of up to 1,536 tokens (2·32·1,024·2 bytes = 128 KiB
    a token: 0.19 GiB a sequence). At 0.3 with vLLM's defaults (1,024 sequences, 16,384 tokens) the KV cache holds
    ~22 such sequences: six waves. The automatic sizes take what the learner's model state leaves (the engine sleeps
    through the update) and batch the step's 128 rows: one wave."""
    cfg = composed(*EIGHT_B)
    auto = run_shape(cfg, 8, 3, PROMPT)
    assert (auto.engine.utilization, auto.engine.context_tokens) == (None, 1536)
    assert (auto.engine.max_num_seqs, auto.engine.max_num_batched_tokens) == (128, 1536)
    plan = plan_memory(LLAMA, auto, H100)
    assert plan.fits and plan.rows == 128 and plan.waves == 1
    learner = sum(plan.phase("generation").values()) - plan.terms["vLLM awake"] - plan.terms["vLLM sampler"]
    assert learner < 18.5 * GIB  # CUDA context + ZeRO-3's partitions: what the engine shares the device with
    assert 0.70 <= plan.share <= (H100 - learner) / H100 - SHARE_MARGIN
    assert plan.kv_available / plan.kv_needed > 128

    explicit = ("generator.gpu_memory_utilization=0.3", "generator.max_num_seqs=1024")
    old = composed(*EIGHT_B, *explicit, "generator.max_num_batched_tokens=16384")
    before = plan_memory(LLAMA, run_shape(old, 8, 3, PROMPT), H100)
    assert before.share == 0.3 and 20 < before.kv_available / before.kv_needed < 28 and before.waves >= 5


def test_the_automatic_share_holds_the_models_own_context():
    """Llama-3.1-8B's own 131,072 tokens: 16 GiB for one sequence's KV cache, which 0.3 of an 80 GB GPU cannot hold
    (test_memory_plan.py) and the automatic share can."""
    cfg = composed("recipes=paper/tsrl_table1", "method=tsrl", "generator.max_model_len=131072")
    plan = plan_memory(LLAMA, run_shape(cfg, 8, 3, PROMPT), H100)
    assert plan.kv_needed == 16 * GIB and plan.fits and plan.concurrent >= 1


def test_an_explicit_size_wins_over_auto():
    cfg = composed(*EIGHT_B, "generator.gpu_memory_utilization=0.5", "generator.max_num_seqs=64")
    engine = run_shape(cfg, 8, 3, PROMPT).engine
    assert (engine.utilization, engine.max_num_seqs, engine.max_num_batched_tokens) == (0.5, 64, 1536)
    assert plan_memory(LLAMA, run_shape(cfg, 8, 3, PROMPT), H100).share == 0.5
    tokens = composed(*EIGHT_B, "generator.max_num_batched_tokens=4096")
    assert run_shape(tokens, 8, 3, PROMPT).engine.max_num_batched_tokens == 4096


def test_tensor_parallel_ranks_share_an_engine_and_its_rows():
    cfg = composed(*EIGHT_B, "generator.tensor_parallel_size=2")
    assert run_shape(cfg, 8, 3, PROMPT).engine.max_num_seqs == 256


def test_an_offline_baselines_engine_sleeps_through_the_update_as_the_online_ones():
    """algo=dpo trains on ladder anchors, but its step puts the engine to sleep for the update as the RL step does
    (tsrl/training/loop.py's offline_step): its plan holds the asleep engine, not the awake one, which leaves the
    automatic share more room than an engine that never sleeps."""
    dpo = composed("recipes=paper/tsrl_dpo", "method=dpo", "trainer.prompts_per_step=128")
    run = run_shape(dpo, 8, 3, PROMPT)
    plan = plan_memory(LLAMA, run, H100)
    assert run.engine.sleeps and run.engine.asleep_in_update
    assert plan.terms["vLLM asleep"] < plan.terms["vLLM awake"] and plan.fits
    never = plan_memory(LLAMA, replace(run, engine=replace(run.engine, sleeps=False)), H100)
    assert never.terms["vLLM asleep"] == never.terms["vLLM awake"] and never.share < plan.share


def test_the_optimizer_steps_float32_gradients_are_counted_in_the_update():
    """DeepSpeed's ZeRO optimizer upcasts this process's gradient partition for its float32 masters (ZeRO-3 a
    sub-group of at most 1e9 elements at a time), tsrl's masters without DeepSpeed every bf16 gradient; peft's float32
    adapter without DeepSpeed needs none."""
    P = LLAMA.parameters
    run = RunShape(8, 3, 2, 0, True, 8, PROMPT, 1024)
    assert step_gradient_bytes(LLAMA, run) == 4 * min(P // 8, DEEPSPEED_SUB_GROUP)
    assert step_gradient_bytes(LLAMA, replace(run, processes=1)) == 4 * DEEPSPEED_SUB_GROUP  # one sub-group at once
    assert step_gradient_bytes(LLAMA, replace(run, zero_stage=2)) == 4 * P // 8
    assert step_gradient_bytes(LLAMA, replace(run, processes=1, zero_stage=0)) == 4 * P  # tsrl's masters
    adapter = LLAMA.adapter_parameters(64)
    assert step_gradient_bytes(LLAMA, replace(run, lora_rank=64)) == 4 * adapter // 8  # DeepSpeed casts it to bf16
    assert step_gradient_bytes(LLAMA, replace(run, processes=1, zero_stage=0, lora_rank=64)) == 0
    assert step_gradient_bytes(LLAMA, replace(run, dtype_bytes=4)) == 0
    plan = plan_memory(LLAMA, run, H100)
    assert "float32 step gradients" in plan.phase("update") and "float32 step gradients" not in plan.phase("generation")


def test_the_samplers_run_time_copies_are_outside_the_engines_share():
    """vLLM profiles its sampler without the temperature's float32 copy, top-p's sort or log-probs: the copies of
    max_num_seqs rows come on top of its share, at generation."""
    cfg = composed(*EIGHT_B)
    run = run_shape(cfg, 8, 3, PROMPT)
    plan = plan_memory(LLAMA, run, H100)
    assert plan.terms["vLLM sampler"] == 128 * LLAMA.vocab_size * 4
    assert plan.generation == sum(v for k, v in plan.terms.items() if k not in ("activations", "logits")) - (
        plan.terms["float32 step gradients"] + plan.terms["vLLM asleep"]
    )
    nucleus = plan_memory(LLAMA, replace(run, engine=replace(run.engine, top_p=True)), H100)
    assert nucleus.terms["vLLM sampler"] == 128 * LLAMA.vocab_size * 24 and nucleus.share <= plan.share


class FakeAccelerator:
    num_processes, is_main_process, device = 1, True, "cpu"
    state = SimpleNamespace(deepspeed_plugin=None)

    def main_process_first(self):
        from contextlib import nullcontext

        return nullcontext()


def test_on_a_gpu_check_memory_fills_the_automatic_sizes_and_says_so(monkeypatch, caplog):
    """The run's generator config leaves check_memory with the plan's numbers, which the engine then starts with; an
    explicit value stays as it was."""
    from tsrl.tasks import build_task

    cfg = composed("generator=vllm", "trainer.micro_batch_size=4", "generator.max_num_batched_tokens=512")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(total_memory=80 * GIB))
    with caplog.at_level(logging.INFO, logger="tsrl"):
        plan = check_memory(cfg, FakeAccelerator(), build_task(cfg.task))
    gen = cfg.generator
    assert plan is not None and gen.gpu_memory_utilization == plan.share == MAX_SHARE  # a tiny policy
    assert gen.max_num_seqs == cfg.trainer.prompts_per_step * cfg.trainer.group_size
    assert gen.max_num_batched_tokens == 512
    assert f"max_num_seqs={gen.max_num_seqs} (this process's rows of a step)" in caplog.text
    assert "max_num_batched_tokens=" not in caplog.text.split("automatic sizes")[1]
