"""Starting the vLLM engine that generator=vllm (tsrl/generation/vllm.py) drives: the engine's folder (the
policy's config and tokenizer, dummy weights), the engine itself (in-process, with the greedy-logprob processor
and the platform checks), the tensor-parallel group, and what the CPU backend needs after a weight reload."""

from __future__ import annotations

import functools
import logging
import os
import tempfile
from typing import TYPE_CHECKING, Any

import torch

from tsrl.errors import ConfigError

if TYPE_CHECKING:
    from tsrl.generation.vllm import VLLMGeneratorConfig

log = logging.getLogger("tsrl")
LOGPROB_TEMPERATURE = "tsrl_logprob_temperature"  # SamplingParams.extra_args key read by the greedy processor


def reprocess_shared_weights(model: torch.nn.Module) -> None:
    """Re-run the after-loading step of every vLLM layer whose weight is shared with another layer (a tied
    lm_head). The in-place reload re-processes the layers it loads, but a layer that shares the loaded weight
    keeps what it derived from the old one: on CPU, the oneDNN-packed copy of the tied lm_head. Only run on CPU,
    where that step merely repacks (on GPUs it does nothing for unquantized layers, and a quantized one must not
    be processed twice)."""
    sharing: dict[int, list[torch.nn.Module]] = {}
    for module in model.modules():
        weight = module._parameters.get("weight")
        if weight is not None and weight.numel() and hasattr(module, "quant_method"):
            sharing.setdefault(id(weight), []).append(module)
    for modules in sharing.values():
        for module in modules if len(modules) > 1 else ():
            module.quant_method.process_weights_after_loading(module)


@functools.cache
def no_sleep_notice() -> None:
    log.info("generator=vllm: this vLLM platform has no sleep mode; sleep() and wake_up() do nothing.")


class LoadNoiseFilter(logging.Filter):
    """vLLM's in-place reload warns about every layer a (partial, bucketed) sync did not touch; tsrl tracks
    which parameters are synced itself (VLLMGenerator.unsynced), so these lines are dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(("%s: Failed to load weights", "Following weights were not loaded"))


@functools.cache
def greedy_logprob_processor() -> type:
    """A vLLM logits processor that divides the logits of requests carrying extra_args[LOGPROB_TEMPERATURE] by
    that temperature. Greedy requests use it: the argmax is unchanged, and vLLM's processed log-probs of the
    greedy tokens become those at the sampling temperature. Declared not argmax-invariant so that vLLM applies
    it before the greedy pick (invariant ones only run on sampled rows)."""
    from vllm.v1.sample.logits_processor import LogitsProcessor
    from vllm.v1.sample.logits_processor.builtin import process_dict_updates

    class GreedyLogprobTemperature(LogitsProcessor):
        def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
            self.temperatures: dict[int, float] = {}  # batch row → temperature

        def is_argmax_invariant(self) -> bool:
            return False

        def update_state(self, batch_update: Any) -> None:
            process_dict_updates(
                self.temperatures,
                batch_update,
                lambda params, _prompt, _output: (params.extra_args or {}).get(LOGPROB_TEMPERATURE),
            )

        def apply(self, logits: torch.Tensor) -> torch.Tensor:
            if self.temperatures:
                rows = torch.tensor(list(self.temperatures), device=logits.device)  # [R]
                scale = torch.tensor(list(self.temperatures.values()), device=logits.device, dtype=logits.dtype)
                logits[rows] = logits[rows] / scale.unsqueeze(1)  # [R, V]
            return logits

    return GreedyLogprobTemperature


def engine_folder(model: torch.nn.Module, tokenizer: Any) -> str:
    """A per-process temporary folder holding the policy's config and tokenizer (its chat template included)."""
    folder = tempfile.mkdtemp(prefix=f"tsrl-vllm-{os.getpid()}-")
    model.config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tensor_parallel_group(tp: int) -> Any:
    """The process group of this rank's engine (tp consecutive ranks), or None with one rank per engine."""
    import torch.distributed as dist

    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    if world % tp:
        raise ConfigError(f"generator.tensor_parallel_size={tp} must divide the number of processes ({world}).")
    if tp == 1:
        return None
    return dist.new_subgroups(group_size=tp)[0]


def start_engine(cfg: VLLMGeneratorConfig, model: torch.nn.Module, folder: str) -> Any:
    """vllm.LLM on `folder` with dummy weights, in this process."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # in-process: syncs pass tensors by reference
    os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(cfg.cpu_kv_cache_gib)  # read by the CPU backend only
    import torch.distributed as dist
    from vllm import LLM
    from vllm.platforms import current_platform

    check_head_dim(model.config, current_platform)
    sleep = cfg.enable_sleep_mode and current_platform.is_sleep_mode_available()
    if cfg.enable_sleep_mode and not sleep:
        no_sleep_notice()
    several = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.") if cfg.dtype == "auto" else cfg.dtype
    set_threads = torch.set_num_threads  # vLLM's CPU worker replaces it, in this (the learner's) process
    try:
        return LLM(
            model=folder,
            load_format="dummy",
            dtype=dtype,
            seed=cfg.seed,
            generation_config="vllm",
            tensor_parallel_size=cfg.tensor_parallel_size,
            gpu_memory_utilization=cfg.gpu_memory_utilization,
            max_model_len=cfg.max_model_len or None,
            enforce_eager=cfg.enforce_eager,
            enable_sleep_mode=sleep,
            enable_prefix_caching=cfg.enable_prefix_caching,
            logprobs_mode="processed_logprobs",
            logits_processors=[greedy_logprob_processor()],
            distributed_executor_backend="external_launcher" if several else None,
        )
    finally:
        torch.set_num_threads = set_threads


def check_head_dim(config: Any, platform: Any) -> None:
    """vLLM's CPU attention supports some head sizes only; say so at start rather than at the first generate."""
    if not platform.is_cpu():
        return
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    supported = CPUAttentionBackend.get_supported_head_sizes()
    if head_dim not in supported:
        raise ConfigError(
            f"vLLM's CPU attention does not support head size {head_dim} (hidden_size / "
            f"num_attention_heads); choose a model whose head size is one of {supported}."
        )
