"""The colocated vLLM engine (generator=vllm) in the memory plan (tsrl/training/memory.py): its weights, working
memory and sampler, its batch limits, and the automatic sizes the trainer starts it with. Letters as memory.py's.

vLLM, colocated (generator=vllm): the engine reserves u·M while awake (its weights, working memory and KV cache); asleep
during the update it keeps only its CUDA graphs (ENGINE_GRAPH_BYTES, none with enforce_eager), unless it never sleeps
(generator.enable_sleep_mode=false: it then holds u·M through the update). The offline baselines' steps (algo=sft | dpo)
generate nothing but put it to sleep for their update too (tsrl/training/loop.py). At start vLLM requires what is left
of u·M after its weights e·P (and a LoRA policy's adapter slot, e·A at its max_lora_rank) and its working memory (a
profiling forward of max_num_batched_tokens tokens, the sampler's logits in e for min(max_num_seqs,
max_num_batched_tokens) rows, its graphs) to hold the KV cache of one sequence of its context length: 2·L·kv·e bytes per
token. Its sampler takes more at run time than that profile saw (vLLM's own note: the dummy run may skip top-k, top-p
and log-probs): a float32 copy of the logits, 4·V bytes per row of max_num_seqs, and with top_p < 1 the sort's values,
int64 indices, softmax and running sum, 20·V more; outside u·M, so counted in generation.
Automatic sizes (generator.* = auto): gpu_memory_utilization the largest u whose u·M fits beside what the learner
holds while the engine is awake and the sampler's run-time copies, less SHARE_MARGIN of the device, at most
MAX_SHARE (engine_share). A sleeping engine wakes after the update, and vLLM empties PyTorch's cache as it wakes
(CuMemAllocator.wake_up), so the update's activations are back on the device: the learner holds its model state.
An engine that never sleeps shares the device with the whole update: its share leaves room for it;
max_num_seqs this process's rows of a step (× tensor_parallel_size: an engine serves its ranks' requests);
max_num_batched_tokens the context length (at most BATCHED_TOKENS_CAP), at least max_num_seqs
(engine_batch_limits).
These are read in vLLM 0.32's source (its memory request, profiling run, KV check and V2 sampler), not measured on
a GPU.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from tsrl.generation.vllm_config import AUTO
from tsrl.models.shape import ModelShape

log = logging.getLogger("tsrl")
GIB = 2**30
ENGINE_GRAPH_BYTES = GIB  # vLLM's CUDA graphs (an allowance; none with enforce_eager)
SHARE_MARGIN = 0.05  # of the device, kept free by the automatic engine share: the plan's own error (not measured)
MAX_SHARE = 0.9  # the automatic share's cap: vLLM's default, for a device it has to itself
BATCHED_TOKENS_CAP = 8192  # the automatic max_num_batched_tokens' cap: vLLM's default below 70 GiB (16,384 above)


@dataclass(frozen=True)
class Engine:
    """A colocated vLLM engine, as the plan sees it."""

    utilization: float | None
    """generator.gpu_memory_utilization: the share of the device it reserves while awake; None = auto (engine_share)."""
    context_tokens: int
    """Its max_model_len: the KV cache must hold one sequence this long."""
    dtype_bytes: int
    """Bytes per element of its weights and KV cache."""
    sleeps: bool = True
    """Whether it sleeps (frees its weights and KV cache) during the update."""
    graphs: bool = True
    """Whether it captures CUDA graphs (not enforce_eager)."""
    max_num_seqs: int = 0
    """Sequences it decodes at once; 0 = vLLM's default for the device (1,024 from 70 GiB, else 256)."""
    max_num_batched_tokens: int = 0
    """Tokens per engine step; 0 = vLLM's default for the device (16,384 from 70 GiB, else 8,192)."""
    lora_rank: int = 0
    """Its adapter slot's max_lora_rank for a LoRA policy; 0: none."""
    top_p: bool = False
    """It samples with generator.top_p < 1 (its sampler sorts the logits)."""

    @property
    def asleep_in_update(self) -> bool:
        return self.sleeps


def engine_limits(engine: Engine, device: int) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) of the engine: its own, or vLLM's offline defaults (LLM class) for the
    device, 16,384 tokens and 1,024 rows from 70 GiB, else 8,192 and 256."""
    tokens, rows = (16384, 1024) if device >= 70 * GIB else (8192, 256)
    return engine.max_num_batched_tokens or tokens, engine.max_num_seqs or rows


def engine_batch_limits(rows: int, context_tokens: int) -> tuple[int, int]:
    """generator.max_num_seqs and max_num_batched_tokens = auto: (max_num_seqs, max_num_batched_tokens) for `rows`
    rows a step per engine and a context of `context_tokens`. All the step's rows decode together, and a step's
    token budget holds a whole prompt's prefill (the context bounds it; at most BATCHED_TOKENS_CAP, beyond which
    vLLM prefills in chunks) and one token of every row (vLLM requires at least max_num_seqs). More tokens only
    enlarge the profiling forward, whose memory vLLM takes from the KV cache."""
    return rows, max(rows, min(context_tokens, BATCHED_TOKENS_CAP))


def engine_weight_bytes(shape: ModelShape, engine: Engine) -> int:
    """The engine's weights and, for a LoRA policy, its adapter slot (every linear layer at its max_lora_rank)."""
    slot = shape.adapter_parameters(engine.lora_rank) if engine.lora_rank else 0
    return (shape.parameters + slot) * engine.dtype_bytes


def engine_working_bytes(shape: ModelShape, engine: Engine, device: int) -> int:
    """vLLM's profiled memory besides its weights and KV cache: the profiling forward of max_num_batched_tokens
    tokens (the MLP's gate/up and product, the residual stream, Q/K/V), the dummy sampler run's logits in the
    engine's dtype for min(max_num_seqs, max_num_batched_tokens) rows, and its CUDA graphs."""
    tokens, seqs = engine_limits(engine, device)
    widths = 3 * shape.intermediate_size + 4 * shape.hidden_size + shape.q_width + 2 * shape.kv_width
    graphs = ENGINE_GRAPH_BYTES if engine.graphs else 0
    return tokens * widths * engine.dtype_bytes + min(tokens, seqs) * shape.vocab_size * engine.dtype_bytes + graphs


def sampler_bytes(shape: ModelShape, engine: Engine, device: int) -> int:
    """The sampler's run-time memory beyond what vLLM's profile measured, for max_num_seqs rows: a float32 copy of
    the logits (temperature, tsrl's greedy-logprob processor) and, with top_p < 1, the sort (float32 values, int64
    indices, softmax, running sum). Read in vLLM 0.32's V2 sampler, not measured."""
    _, seqs = engine_limits(engine, device)
    return seqs * shape.vocab_size * (4 + 20 * engine.top_p)


def engine_share(learner: int, sampler: int, device: int) -> float:
    """generator.gpu_memory_utilization = auto: the largest share of a device of `device` bytes whose awake engine
    fits beside `learner`, what the learner holds while the engine is awake (its model state; with the update's
    activations too for an engine that never sleeps), and `sampler`, the sampler's run-time copies; less
    SHARE_MARGIN, rounded down to a hundredth, between 0.01 and MAX_SHARE."""
    free = device - learner - sampler
    return min(MAX_SHARE, max(0.01, math.floor(100 * (free / device - SHARE_MARGIN)) / 100))


def utilization_needed(shape: ModelShape, engine: Engine, device: int) -> float:
    """The smallest generator.gpu_memory_utilization whose share holds the engine's weights, working memory and the
    KV cache of one sequence of its context length, rounded up to a hundredth."""
    need = (
        engine_weight_bytes(shape, engine)
        + engine_working_bytes(shape, engine, device)
        + engine.context_tokens * shape.kv_bytes_per_token(engine.dtype_bytes)
    )
    return -(-100 * need // device) / 100


def size_engine(gen: Any, engine: Engine, share: float, main: bool) -> None:
    """Fill generator=vllm's automatic sizes in `gen`, the run's generator config (the trainer starts its engine
    from it next), with the plan's: the share it resolved (`share`), the engine's batch limits; said once (`main`)."""
    chosen = {
        "gpu_memory_utilization": (share, "the largest share beside the learner's update"),
        "max_num_seqs": (engine.max_num_seqs, "this process's rows of a step"),
        "max_num_batched_tokens": (
            engine.max_num_batched_tokens,
            f"the context length up to {BATCHED_TOKENS_CAP}, at least max_num_seqs",
        ),
    }
    filled = {name: value for name, value in chosen.items() if getattr(gen, name) == AUTO}
    for name, (value, _) in filled.items():
        setattr(gen, name, value)
    if filled and main:
        said = ", ".join(f"{name}={value} ({why})" for name, (value, why) in filled.items())
        log.info("generator=vllm, automatic sizes from the memory plan: %s", said)
