"""The memory plan (tsrl/training/memory.py, the learner's terms in memory_learner.py): its numbers on a
hand-computed small case, the shipped model shapes against the models' published sizes, every paper recipe on the
GPUs its header states, and the refusals, whose sentences name the numbers and the settings to change. Pure
arithmetic and config composition: no GPU."""

from __future__ import annotations

import json
import logging
import re
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hydra import compose, initialize_config_module

from tsrl.commands.base import to_run_config
from tsrl.config import register_configs
from tsrl.errors import ConfigError
from tsrl.models.shape import ModelShape, model_shape, shipped_shape
from tsrl.reproduce import grid_of
from tsrl.training.memory import (
    CONTEXT_BYTES,
    GIB,
    Engine,
    RunShape,
    check_memory,
    plan_memory,
    refusal,
    run_shape,
)
from tsrl.training.memory_learner import activation_bytes

ROOT = Path(__file__).resolve().parents[3]
RECIPES = sorted(p.stem for p in (ROOT / "recipes" / "paper").glob("*.yaml"))
H100 = 80 * 10**9  # an 80 GB H100 (torch reports a little more: 79.2 GiB); the plan must fit in 74.5 GiB
PROMPT_TOKENS = 1024
"""Prompt allowance for the recipes' real datasets (chat template included): the shipped samples' prompts are under
900 characters; a LiveCodeBench problem can run to a thousand tokens."""


def composed(*overrides: str):
    register_configs()
    with initialize_config_module("tsrl.configs", version_base="1.3"):
        return to_run_config(compose("config", overrides=list(overrides)))


# ----- the arithmetic -------------------------------------------------------------------------------------------

SMALL = ModelShape(
    hidden_size=8,
    intermediate_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=4,
    vocab_size=10,
    tie_word_embeddings=False,
    max_position_embeddings=64,
)
# q = 8, kv = 4. A layer: q 8·8 + k 8·4 + v 8·4 + o 8·8 + gate 8·16 + up 8·16 + down 16·8 + 2 norms·8 = 592.
# P = embeddings 2·10·8 + 2 layers·592 + final norm 8 = 1352.
SMALL_RUN = RunShape(
    processes=1,
    zero_stage=0,
    dtype_bytes=2,
    lora_rank=0,
    checkpointing=False,
    micro_batch=2,
    prompt_tokens=3,
    completion_tokens=5,
)


def test_each_process_plans_for_its_share_of_the_global_batch():
    """trainer.prompts_per_step is the step's batch over every process: with 16 prompts × G = 8 and 8 processes each
    holds 16 rows, so a micro-batch of 32 has 16 and generator=hf decodes 2 prompts' rows at once; one process holds
    all 128 rows (micro-batch 32, one call of 16 prompts)."""
    cfg = composed("trainer.prompts_per_step=16", "trainer.group_size=8", "trainer.micro_batch_size=32", "generator=hf")
    eight, one = run_shape(cfg, 8, 3, PROMPT_TOKENS), run_shape(cfg, 1, 0, PROMPT_TOKENS)
    assert (eight.micro_rows, eight.generation_rows) == (16, 2 * 8)
    assert (one.micro_rows, one.generation_rows) == (32, 16 * 8)
    uncapped = replace(eight, step_rows=0)  # what the plan counted before: 32 rows a micro-batch on every process
    assert activation_bytes(SMALL, eight) * 2 == activation_bytes(SMALL, uncapped)
    assert replace(eight, processes=16).micro_rows == 8  # more processes, fewer rows each (the ZeRO-3 remedy)


def test_small_case_by_hand():
    assert SMALL.parameters == 1352
    plan = plan_memory(SMALL, SMALL_RUN, device=2 * GIB)
    # weights 2·P; gradients 2·P; Adam's two float32 moments 8·P plus float32 masters 4·P (bf16, no DeepSpeed)
    assert (plan.terms["weights"], plan.terms["gradients"], plan.terms["optimizer states"]) == (2704, 2704, 16224)
    # per token and layer: 2·(4·8 + 2·8 + 2·4 + 4·16) + 4·2 heads + 8 = 256; outside the layers 2·2·8 = 32;
    # no checkpointing: 2 layers kept + 1 for the backward: 3·256 + 32 = 800 bytes per token, 2·(3 + 5) tokens
    assert plan.terms["activations"] == 16 * 800
    # logits: 2 rows · (5 + 1) positions · 10 = 120 elements; chunked: 2·120·2 bytes + two float32 chunks 2·4·120
    assert plan.terms["logits"] == 480 + 960
    assert plan_memory(SMALL, replace(SMALL_RUN, logits="naive"), 2 * GIB).terms["logits"] == 120 * (2 + 20)
    # the optimizer step: tsrl's masters upcast every bf16 gradient, 4·P
    assert plan.terms["float32 step gradients"] == 4 * 1352
    assert plan.update == CONTEXT_BYTES + 2704 + 2704 + 16224 + 12800 + 1440 + 5408
    assert plan.generation == CONTEXT_BYTES + 2704 + 2704 + 16224  # no engine, no hf cache rows
    assert plan.fits


def test_small_case_checkpointing_zero3_and_lora_by_hand():
    # checkpointing: each layer's input 2·8 bytes per layer + one layer recomputed + one for the backward
    ckpt = plan_memory(SMALL, replace(SMALL_RUN, checkpointing=True), 2 * GIB)
    assert ckpt.terms["activations"] == 16 * (2 * 16 + 256 + 256 + 32)
    # ZeRO-3 on 4: everything partitioned; gathers 2·(V·h + one layer) = 2·(80 + 592)
    zero3 = plan_memory(SMALL, replace(SMALL_RUN, processes=4, zero_stage=3), 2 * GIB).terms
    assert (zero3["weights"], zero3["gradients"], zero3["optimizer states"]) == (676, 676, 4056)
    assert zero3["ZeRO-3 gathers"] == 1344 and zero3["DDP gradient buckets"] == 0
    # DDP on 2: full copies plus the gradient buckets
    assert plan_memory(SMALL, replace(SMALL_RUN, processes=2), 2 * GIB).terms["DDP gradient buckets"] == 2704
    # LoRA r = 2 on every linear layer: 2·(16 + 12 + 12 + 16 + 24 + 24 + 24) = 256 per layer, 512 in all;
    # frozen base 2·P, adapter float32 weights, gradients and Adam (no masters)
    assert SMALL.adapter_parameters(2) == 512
    lora = plan_memory(SMALL, replace(SMALL_RUN, lora_rank=2, reference=True), 2 * GIB).terms
    assert (lora["weights"], lora["gradients"], lora["optimizer states"]) == (2704 + 4 * 512, 4 * 512, 8 * 512)
    assert lora["reference"] == 0  # the base with the adapter off
    assert plan_memory(SMALL, replace(SMALL_RUN, reference=True), 2 * GIB).terms["reference"] == 2704


def test_vllm_share_and_kv_cache_by_hand():
    engine = Engine(utilization=0.5, context_tokens=100, dtype_bytes=2, graphs=False)
    plan = plan_memory(SMALL, replace(SMALL_RUN, engine=engine), device=GIB)
    assert plan.terms["vLLM awake"] == GIB // 2 and plan.terms["vLLM asleep"] == 0
    assert plan.kv_needed == 100 * 2 * 2 * 4 * 2  # tokens · (K and V) · layers · kv width · bytes
    # working memory below 70 GiB (vLLM's defaults, 8,192 tokens and 256 rows): the profiling forward, 8,192 tokens ·
    # (3·16 + 4·8 + 8 + 2·4) · 2 bytes, and the dummy sampler run's logits, 256 rows · 10 · 2 bytes
    assert plan.kv_available == GIB // 2 - 1352 * 2 - (8192 * 96 * 2 + 256 * 20)
    # at run time the sampler copies the logits of its 256 rows to float32, outside the share
    assert plan.terms["vLLM sampler"] == 256 * 10 * 4 and "vLLM sampler" not in plan.phase("update")
    sorted_too = plan_memory(SMALL, replace(SMALL_RUN, engine=replace(engine, top_p=True)), GIB)
    assert sorted_too.terms["vLLM sampler"] == 256 * 10 * (4 + 20)  # top_p < 1: the sort's values and indices
    awake_all_along = plan_memory(SMALL, replace(SMALL_RUN, engine=replace(engine, sleeps=False)), GIB)
    assert awake_all_along.update - plan.update == GIB // 2


# ----- shapes ---------------------------------------------------------------------------------------------------

PUBLISHED = {  # parameters in billions as the model cards state them, to their digits (Ministral: its language model)
    "llama31_8b": "8.03",
    "qwen3_4b": "4.02",
    "qwen25_3b": "3.09",
    "qwen25_7b": "7.61",
    "ministral3_8b": "8.4",
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_shipped_shapes_have_the_published_sizes(name):
    """Counted from the shape (biases left out: Qwen2.5's 0.1-0.3M), the size agrees with the card to its last
    digit, rounded or cut."""
    shape = shipped_shape(name)
    assert shape is not None
    stated = PUBLISHED[name]
    step = 10.0 ** -len(stated.split(".")[1])
    assert float(stated) - step / 2 <= shape.parameters / 1e9 < float(stated) + step, shape.parameters


def test_every_gpu_model_config_has_a_shipped_shape():
    register_configs()
    with initialize_config_module("tsrl.configs", version_base="1.3"):
        for name in ("llama31_8b", "qwen3_4b", "qwen25_3b", "qwen25_7b", "ministral3_8b"):
            hub = compose("config", overrides=[f"model={name}"]).model.path
            assert shipped_shape(hub) == shipped_shape(name) is not None, name


def test_a_local_folder_config_is_read_and_a_multimodal_one_gives_its_text_model(tmp_path):
    text = json.loads((ROOT / "tsrl/models/shapes/ministral3_8b.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mistral3", "text_config": text}))
    assert model_shape(str(tmp_path)) == shipped_shape("ministral3_8b")
    assert model_shape(str(tmp_path / "absent")) is None


# ----- the paper recipes on their GPUs ---------------------------------------------------------------------------


def recipe_configs(recipe: str):
    """(label, config) for every method and policy of the recipe's grid (one Hydra initialisation per recipe)."""
    register_configs()
    axes = grid_of(f"paper/{recipe}", [])
    with initialize_config_module("tsrl.configs", version_base="1.3"):
        for method in axes.get("method", [None]):
            for model in axes.get("model", [None]):
                extra = [f"method={method}"] * bool(method) + [f"model={model}"] * bool(model)
                two_judges = method == "tsrl_bad_judge" or recipe == "tsrl_table2_weak_judge"  # distinct_judges
                weak = ["judge.model=weak", "eval_judge.model=strong"] * two_judges
                cfg = to_run_config(compose("config", overrides=[f"recipes=paper/{recipe}", *extra, *weak]))
                yield f"{recipe} {' '.join(extra)}", cfg


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_paper_recipe_fits_its_stated_gpus(recipe, capsys):
    """The recipes' headers: full fine-tuning on 8 GPUs under ZeRO-3, or one H100/H200 with model.lora.r=64. Both
    must fit an 80 GB H100 for every method and policy of the grid (printed: pytest -s)."""
    for label, cfg in recipe_configs(recipe):
        assert cfg.model.lora.r == 0, label
        shape = shipped_shape(cfg.model.path)
        full = run_shape(cfg, 8, 3, PROMPT_TOKENS)
        lora = replace(run_shape(cfg, 1, 0, PROMPT_TOKENS), lora_rank=64, reference=False)  # model.lora.r=64
        for where, run in (("8 x H100, ZeRO-3", full), ("1 x H100, LoRA r=64", lora)):
            plan = plan_memory(shape, run, H100)
            with capsys.disabled():
                print(plan.table(f"{label} on {where}"))
            assert plan.fits, (label, where, refusal(shape, run, H100))


# ----- refusals -------------------------------------------------------------------------------------------------


def test_full_fine_tuning_of_an_8b_model_on_one_gpu_without_deepspeed_is_refused_naming_the_fixes():
    cfg = composed("recipes=paper/tsrl_table1", "method=tsrl")
    shape = shipped_shape("llama31_8b")
    reason = refusal(shape, run_shape(cfg, 1, 0, PROMPT_TOKENS), H100)
    assert reason is not None
    assert re.search(r"This run needs \d+\.\d GiB per process at its (update|generation) \(optimizer states", reason)
    assert "on a 74.5 GiB GPU" in reason
    assert "model.lora.r=64 (peak" in reason and "ZeRO-3 on 4 or more GPUs" in reason
    assert reason.endswith("(trainer.memory_check=false starts the run anyway.)")


def test_activations_without_checkpointing_are_refused_naming_checkpointing_and_the_micro_batch():
    cfg = composed("recipes=paper/tsrl_table1", "method=tsrl", "model.lora.r=64")
    run = replace(run_shape(cfg, 1, 0, PROMPT_TOKENS), checkpointing=False, logits="naive")
    reason = refusal(shipped_shape("llama31_8b"), run, H100)
    assert reason is not None and "activations" in reason
    assert re.search(r"model\.gradient_checkpointing=true \(peak \d+\.\d GiB\); trainer\.micro_batch_size=\d", reason)


def test_the_models_own_context_length_is_refused_for_the_kv_cache():
    """max_model_len 131,072 for Llama-3.1-8B needs 16 GiB of KV cache; 0.3 of an 80 GB GPU leaves ~3 GiB after
    the weights: vLLM would refuse at start. (The automatic share holds it: test_memory_engine.py.)"""
    cfg = composed(
        "recipes=paper/tsrl_table1",
        "method=tsrl",
        "generator.max_model_len=131072",
        "generator.gpu_memory_utilization=0.3",
    )
    shape = shipped_shape("llama31_8b")
    plan = plan_memory(shape, run_shape(cfg, 8, 3, PROMPT_TOKENS), H100)
    assert plan.kv_needed == 16 * GIB and not plan.fits
    reason = refusal(shape, run_shape(cfg, 8, 3, PROMPT_TOKENS), H100)
    assert reason is not None
    assert "less than one sequence of 131072 tokens needs (16.00 GiB)" in reason
    needed = float(re.search(r"set generator\.gpu_memory_utilization=([0-9.]+)", reason).group(1))
    engine = replace(run_shape(cfg, 8, 3, PROMPT_TOKENS).engine, utilization=needed)
    assert plan_memory(shape, replace(run_shape(cfg, 8, 3, PROMPT_TOKENS), engine=engine), H100).kv_available >= (
        plan.kv_needed
    )


# ----- at run time ------------------------------------------------------------------------------------------------


class FakeAccelerator:
    """What check_memory reads of an Accelerator: one process, no DeepSpeed."""

    num_processes, is_main_process, device = 1, True, "cpu"
    state = SimpleNamespace(deepspeed_plugin=None)

    @contextmanager
    def main_process_first(self):
        yield


def test_on_cpu_there_is_no_plan():
    assert check_memory(composed(), FakeAccelerator(), task=None) is None


def test_on_a_gpu_the_plan_is_printed_and_a_run_that_cannot_fit_refused(monkeypatch, caplog):
    """The run-time path with CUDA faked: the tiny policy's folder, its tokenizer and the task's prompts."""
    from tsrl.tasks import build_task

    cfg = composed("trainer.micro_batch_size=4")
    task = build_task(cfg.task)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(total_memory=80 * GIB))
    with caplog.at_level(logging.INFO, logger="tsrl"):
        plan = check_memory(cfg, FakeAccelerator(), task)
    assert plan is not None and plan.fits and "memory plan per process" in caplog.text
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(total_memory=GIB))
    with pytest.raises(ConfigError, match=r"on a 1\.0 GiB GPU: change .*trainer\.memory_check=false"):
        check_memory(cfg, FakeAccelerator(), task)
    cfg.trainer.memory_check = False
    with caplog.at_level(logging.WARNING, logger="tsrl"):
        assert not check_memory(cfg, FakeAccelerator(), task).fits
    assert "This run needs" in caplog.text
