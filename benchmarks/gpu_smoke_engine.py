"""The weight-sync jobs of scripts/gpu_smoke.sh (benchmarks/gpu_smoke.py runs them under their timeouts): the
learner's weights, built as tsrl-train builds them, handed to a generation engine.

- sync (`sync_drains`): `Learner.weights_for_sync()` drained into buffers preallocated with the shapes vLLM's Llama
  holds (q/k/v stacked in qkv_proj, gate/up in gate_up_proj, the vocabulary padded to a multiple of 64): a
  stand-in for the engine's load_weights where the image has no vLLM. Every engine parameter must be written
  exactly once per drain, under the engine's names (a LoRA adapter's own weights, where the sync hands them over
  for the engine to apply, once each into an adapter slot);
- vllm (`vllm_round`): generator=vllm itself, through tsrl's public API (`build_generator`, `load_weights`,
  `generate`, `sleep`, `wake_up`): the engine's start, the first sync, generation timed over a step's prompts, then
  one step as the trainer runs it (sleep, update, wake the weights, sync, wake the KV cache) and a generation
  after it, checked against the learner: its sampling log-probs must be those of the updated weights.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig

from tsrl.algo import GRPOConfig, group_advantages
from tsrl.config import RunConfig, TrainerConfig
from tsrl.generation import Generator, HFGeneratorConfig, build_generator
from tsrl.generation.vllm_config import VLLMGeneratorConfig
from tsrl.models.forward import collate
from tsrl.models.hf import HFModelConfig
from tsrl.models.lora import LoraSettings
from tsrl.registry import load_components
from tsrl.tasks import HumorConfig, build_task
from tsrl.training.learner import Learner
from tsrl.types import Group, Prompt

GIB = 2**30
VOCAB_PADDING = 64  # vLLM pads its embedding and head to a multiple of this
# vLLM's Llama stacks these Hugging Face weights into one engine parameter: (engine name, position in the stack)
STACKED = {
    "q_proj": ("qkv_proj", 0),
    "k_proj": ("qkv_proj", 1),
    "v_proj": ("qkv_proj", 2),
    "gate_proj": ("gate_up_proj", 0),
    "up_proj": ("gate_up_proj", 1),
}
TEMPERATURE = 0.7  # not 1: the greedy rows' log-probs must be rescaled to it by tsrl's logits processor
CHECK_LR = 1e-2  # one AdamW step at this rate moves the log-probs far past the engine's rounding (docs/scaling.md)
STALE_MARGIN = 4.0  # a synced engine sits at least this many times closer to the learner than a stale one


# ----- measuring on either device ------------------------------------------------------------------------------


def device_synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def allocated_bytes() -> int:
    return torch.cuda.memory_allocated() if torch.cuda.is_available() else rss_bytes()


def reset_peak() -> None:
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def peak_bytes() -> int:
    """CUDA: the peak allocated since reset_peak; CPU: the process's peak resident set (never reset)."""
    return torch.cuda.max_memory_allocated() if torch.cuda.is_available() else rss_bytes()


def rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def accelerator() -> Any:
    """accelerate's Accelerator as tsrl-train builds it (gloo between CPU processes)."""
    from accelerate import Accelerator
    from accelerate.utils import InitProcessGroupKwargs

    handlers = []
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        handlers.append(InitProcessGroupKwargs(backend="nccl" if torch.cuda.is_available() else "gloo"))
    return Accelerator(kwargs_handlers=handlers)


def run_config(model: Path, lora: int, generator: Any = None, trainer: TrainerConfig | None = None) -> RunConfig:
    """A run config holding the bf16 policy in `model` (with a LoRA adapter of rank `lora` when > 0)."""
    load_components()
    settings = LoraSettings(r=lora, alpha=2.0 * lora) if lora else LoraSettings()
    return RunConfig(
        task=HumorConfig(),
        model=HFModelConfig(path=str(model), dtype="bfloat16", lora=settings),
        judge=None,
        reward=None,
        algo=GRPOConfig(),
        generator=generator or HFGeneratorConfig(),
        logger=None,
        trainer=trainer or TrainerConfig(micro_batch_size=8),
    )


# ----- sync: weights_for_sync() into the engine's buffers -----------------------------------------------------


class EngineBuffers:
    """One preallocated tensor per parameter of vLLM's Llama, and which rows of it each Hugging Face weight
    fills: `fill` copies every (name, tensor) there and counts what each name received. A LoRA adapter's own
    weights (peft's names, `….lora_A.weight`), which a sync hands over where the engine applies the adapter itself,
    go to an adapter slot of their shape, taken on first sight."""

    def __init__(self, config: Any, device: torch.device, dtype: torch.dtype) -> None:
        self.slots: dict[str, tuple[torch.Tensor, slice]] = {}
        self.adapter: dict[str, torch.Tensor] = {}
        self.written: Counter[str] = Counter()
        self.device, self.dtype = device, dtype
        h, inner = config.hidden_size, config.intermediate_size
        head = getattr(config, "head_dim", None) or h // config.num_attention_heads
        q, kv = config.num_attention_heads * head, config.num_key_value_heads * head
        vocab = config.vocab_size
        padded = -(-vocab // VOCAB_PADDING) * VOCAB_PADDING

        def new(*shape: int) -> torch.Tensor:
            return torch.empty(shape, device=device, dtype=dtype)

        self.slots["model.embed_tokens.weight"] = (new(padded, h), slice(0, vocab))
        if not config.tie_word_embeddings:
            self.slots["lm_head.weight"] = (new(padded, h), slice(0, vocab))
        self.slots["model.norm.weight"] = (new(h), slice(None))
        for i in range(config.num_hidden_layers):
            p = f"model.layers.{i}."
            stacks = {
                "qkv_proj": (new(q + 2 * kv, h), (q, kv, kv)),
                "gate_up_proj": (new(2 * inner, h), (inner, inner)),
            }
            for weight, (stack, position) in STACKED.items():
                module = "self_attn" if stack == "qkv_proj" else "mlp"
                buffer, sizes = stacks[stack]
                start = sum(sizes[:position])
                self.slots[f"{p}{module}.{weight}.weight"] = (buffer, slice(start, start + sizes[position]))
            self.slots[f"{p}self_attn.o_proj.weight"] = (new(h, q), slice(None))
            self.slots[f"{p}mlp.down_proj.weight"] = (new(h, inner), slice(None))
            for norm in ("input_layernorm", "post_attention_layernorm"):
                self.slots[f"{p}{norm}.weight"] = (new(h), slice(None))

    def fill(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        for name, tensor in weights:
            if ".lora_" in name:  # peft's lora_A / lora_B: the engine's adapter slot
                slot = self.adapter.setdefault(name, torch.empty(tensor.shape, device=self.device, dtype=self.dtype))
                slot.copy_(tensor, non_blocking=True)
            elif name in self.slots:
                buffer, rows = self.slots[name]
                buffer[rows].copy_(tensor, non_blocking=True)
            else:
                raise KeyError(f"the engine has no parameter for the synced weight {name!r}")
            self.written[name] += 1

    def unfilled(self, rounds: int) -> list[str]:
        """The engine parameters (and adapter weights) that did not receive exactly one tensor per round."""
        return [name for name in [*self.slots, *self.adapter] if self.written[name] != rounds]

    def bytes(self) -> int:
        adapter = sum(slot.nbytes for slot in self.adapter.values())
        return adapter + sum(buffer[rows].nbytes for buffer, rows in self.slots.values())


def sync_drains(model: Path, lora: int, repeats: int) -> dict[str, Any] | None:
    """Build the Learner as tsrl-train does, then drain weights_for_sync() into engine buffers 1 + `repeats`
    times (the first drain apart: first gathers, first touches), each timed to the last copy's completion. The
    numbers on the main process, None on the others."""
    acc = accelerator()
    learner = Learner.build(run_config(model, lora), acc)
    engine = EngineBuffers(AutoConfig.from_pretrained(model), acc.device, torch.bfloat16)
    seconds, extra = [], 0.0
    for _ in range(repeats + 1):
        acc.wait_for_everyone()
        device_synchronize()
        before = allocated_bytes()
        reset_peak()
        start = time.perf_counter()
        engine.fill(learner.weights_for_sync())
        device_synchronize()
        seconds.append(time.perf_counter() - start)
        extra = max(extra, (peak_bytes() - before) / GIB)
    unfilled = engine.unfilled(repeats + 1)
    if unfilled:
        raise RuntimeError(f"{len(unfilled)} engine parameters were not written once per drain, e.g. {unfilled[:3]}")
    result = {
        "tensors": len(engine.slots) + len(engine.adapter),
        "adapter_tensors": len(engine.adapter),
        "gib": engine.bytes() / GIB,
        "first_s": seconds[0],
        "drain_s": seconds[1:],
        "extra_gib": extra,
        "processes": acc.num_processes,
        "lora_rank": lora,
    }
    return result if acc.is_main_process else None


# ----- vllm: generator=vllm's engine, its sync and a generation after it --------------------------------------


@dataclass
class VllmRound:
    """What the vllm job runs: the policy folder, its LoRA rank (0: none), a step's shape, and the engine's mode."""

    model: Path
    lora: int
    prompts: int
    group: int
    tokens: int
    micro_batch: int
    repeats: int
    eager: bool


class Tally:
    """The bytes of the (name, tensor) pairs passed through `count`, as load_weights draws them."""

    def __init__(self) -> None:
        self.bytes = 0

    def count(self, pairs: Iterable[tuple[str, torch.Tensor]]) -> Iterator[tuple[str, torch.Tensor]]:
        for name, tensor in pairs:
            self.bytes += tensor.nbytes
            yield name, tensor


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds `action()` takes, to the device's last kernel, and what it returns."""
    device_synchronize()
    start = time.perf_counter()
    value = action()
    device_synchronize()
    return time.perf_counter() - start, value


def logprob_gap(learner: Learner, groups: list[Group]) -> float:
    """Mean |sampler − learner| log-prob over the completion tokens of `groups` (collective under ZeRO-3)."""
    batch = collate(groups, torch.zeros(len(groups), groups[0].size), learner.tokenizer.pad_token_id)
    current = learner.logprobs(batch, TEMPERATURE)  # [N, T]
    mask = batch.completion_mask.bool()  # [N, T]
    return float((current.float().cpu() - batch.sampler_logprobs).abs()[mask].mean())


def sync_problem(before: float, stale: float, after: float) -> str | None:
    """Why the engine did not sample from the learner's weights, or None. `before` and `after`: the mean log-prob
    gap of the engine's samples right after a sync, before the update and after it; `stale`: the gap of the
    samples drawn before the update, against the updated learner (how far the update moved the policy)."""
    limit = stale / STALE_MARGIN
    if before <= limit and after <= limit:
        return None
    return (
        f"after a sync the engine's log-probs sit {before:.3g} (before the update) and {after:.3g} (after it) from "
        f"the learner's, against {stale:.3g} for samples of the weights before the update: a synced engine must sit "
        f"{STALE_MARGIN:g}x closer than that; the sync did not reach the engine"
    )


def vllm_round(acc: Any, shape: VllmRound) -> dict[str, Any]:
    """Start generator=vllm for a Learner built as tsrl-train builds it, sync, time 1 + `repeats` generations of a
    step's prompts (the first apart: warm-up), then one step of the trainer checked (`step_check`)."""
    generator_cfg = VLLMGeneratorConfig(temperature=TEMPERATURE, max_new_tokens=shape.tokens, enforce_eager=shape.eager)
    trainer = TrainerConfig(micro_batch_size=shape.micro_batch, lr=CHECK_LR)
    learner = Learner.build(run_config(shape.model, shape.lora, generator_cfg, trainer), acc)
    prompts = build_task(HumorConfig()).prompts("train")[: shape.prompts]
    start_s, generator = timed(lambda: build_generator(generator_cfg, learner.module, learner.tokenizer, prompts))
    tally = Tally()
    first_sync_s, _ = timed(lambda: generator.load_weights(tally.count(learner.weights_for_sync())))
    seconds, tokens = [], []
    for _ in range(shape.repeats + 1):
        elapsed, groups = timed(lambda: generator.generate(prompts, shape.group))
        seconds.append(elapsed)
        tokens.append(sum(len(r.token_ids) for g in groups for r in g.rollouts))
    checked = step_check(learner, generator, prompts, groups)
    generator.close()
    rates = [t / s for t, s in zip(tokens[1:], seconds[1:])] or [tokens[0] / seconds[0]]
    return {
        "processes": acc.num_processes,
        "lora_rank": shape.lora,
        "eager": shape.eager,
        "engine_start_s": start_s,
        "first_sync_s": first_sync_s,
        "sync_gib": tally.bytes / GIB,
        "generate_s": seconds,
        "completion_tokens": tokens,
        "generation_tokens_per_s": statistics.median(rates),
        **checked,
    }


def step_check(learner: Learner, generator: Generator, prompts: list[Prompt], groups: list[Group]) -> dict[str, Any]:
    """One training step as tsrl.training.loop runs it around the engine — sleep, update (random advantages, one
    AdamW step at CHECK_LR), wake the weights, sync, wake the KV cache — then a generation (greedy completion 0
    included: tsrl's logits processor rescales its log-probs), with the log-prob gaps `sync_problem` reads."""
    before = logprob_gap(learner, groups)
    rewards = torch.randn(len(groups), groups[0].size, generator=torch.Generator().manual_seed(0))  # [B, G]
    batch = collate(groups, group_advantages(rewards), learner.tokenizer.pad_token_id)
    generator.sleep()
    update_s, _ = timed(lambda: learner.update(batch, step=1))
    stale = logprob_gap(learner, groups)

    def sync() -> None:  # tsrl.training.loop.sync_weights
        generator.wake_up(("weights",))
        generator.load_weights(learner.weights_for_sync())
        generator.wake_up(("kv_cache",))

    sync_s, _ = timed(sync)
    after = logprob_gap(learner, generator.generate(prompts, groups[0].size, greedy_first=True))
    return {
        "update_s": update_s,
        "sync_s": sync_s,
        "gap_before": before,
        "gap_stale": stale,
        "gap_after": after,
        "problem": sync_problem(before, stale, after),
    }
