"""generator=vllm's settings (`VLLMGeneratorConfig`) and their checks; the generator itself is
tsrl/generation/vllm.py, the engine it starts tsrl/generation/vllm_engine.py."""

from __future__ import annotations

from dataclasses import dataclass

from tsrl.errors import ConfigError
from tsrl.generation.hf import check_sampling

DTYPES = ("auto", "float32", "bfloat16", "float16")
AUTO = "auto"  # generator.gpu_memory_utilization, max_num_seqs, max_num_batched_tokens: sized by the memory plan


@dataclass
class VLLMGeneratorConfig:
    """Generator `vllm`: a colocated vLLM engine, synced with the learner's weights after every update."""

    temperature: float = 1.0
    """Sampling temperature (the learner divides logits by the same value)."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_new_tokens: int = 48
    """Completion length cap; longer completions are cut and flagged truncated."""
    dtype: str = "auto"
    """Engine precision: auto (the policy's parameter dtype, so sampler and learner agree) | float32 | bfloat16 |
    float16."""
    gpu_memory_utilization: float | str = "auto"
    """Share of the accelerator's memory the engine may take (weights + KV cache); the learner needs the rest. auto:
    under tsrl-train on a GPU the largest share the memory plan leaves beside the learner
    (tsrl/training/memory_engine.py), elsewhere 0.3 (on CPU cpu_kv_cache_gib sizes the cache)."""
    max_num_seqs: int | str = "auto"
    """Sequences the engine decodes at once. auto: under tsrl-train on a GPU this process's rows of a step (prompts
    per process × group size, × tensor_parallel_size), elsewhere vLLM's default."""
    max_num_batched_tokens: int | str = "auto"
    """Tokens per engine step (prefill chunks and decodes). auto: under tsrl-train on a GPU the context length (at
    most 8,192), at least max_num_seqs; elsewhere vLLM's default."""
    cpu_kv_cache_gib: int = 1
    """CPU backend only: KV cache size in GiB (sets VLLM_CPU_KVCACHE_SPACE); ignored on GPUs."""
    tensor_parallel_size: int = 1
    """Ranks per engine (tensor parallel); must divide the number of processes. Not verified here (no GPUs)."""
    max_model_len: int = 0
    """Longest prompt + completion in tokens; 0 = sized at start: the task's longest prompt + 64 tokens of margin +
    max_new_tokens, rounded up to a multiple of 256 (capped at the model's max_position_embeddings)."""
    enforce_eager: bool = False
    """Run the model eagerly (no CUDA graphs / compilation): slower decoding, faster start."""
    enable_sleep_mode: bool = True
    """Free engine memory during the update (sleep/wake_up); a no-op where vLLM has no sleep mode (CPU)."""
    sleep_level: int = 2
    """2: drop the KV cache and the weights (the sync after the update refills them: vLLM's advice when weights
    are replaced); 1: keep the weights in host memory, copied out and back every step."""
    enable_prefix_caching: bool = True
    """Reuse the KV of shared prompt prefixes (the G samples of a prompt); reset after every weight sync."""
    seed: int = 0
    """Engine seed (dummy initial weights and requests without their own seed)."""

    def __post_init__(self) -> None:
        check_sampling(self.temperature, self.top_p)
        if self.max_new_tokens < 1 or self.tensor_parallel_size < 1 or self.cpu_kv_cache_gib < 1:
            raise ConfigError(
                "generator.max_new_tokens, tensor_parallel_size and cpu_kv_cache_gib must be >= 1, got "
                f"{self.max_new_tokens}, {self.tensor_parallel_size} and {self.cpu_kv_cache_gib}."
            )
        check_engine_sizes(self)
        if self.sleep_level not in (1, 2):
            raise ConfigError(f"generator.sleep_level must be 1 or 2, got {self.sleep_level}.")
        if self.dtype not in DTYPES:
            raise ConfigError(f"generator.dtype={self.dtype!r} is unknown; choose one of {list(DTYPES)}.")
        if self.max_model_len < 0:
            raise ConfigError(
                f"generator.max_model_len must be >= 0 (0 = sized to the longest prompt), got {self.max_model_len}."
            )


def check_engine_sizes(cfg: VLLMGeneratorConfig) -> None:
    """generator.gpu_memory_utilization in (0, 1], max_num_seqs and max_num_batched_tokens >= 1, or auto."""
    share, seqs, tokens = cfg.gpu_memory_utilization, cfg.max_num_seqs, cfg.max_num_batched_tokens
    if share != AUTO and not (isinstance(share, float | int) and 0 < share <= 1):
        raise ConfigError(f"generator.gpu_memory_utilization must lie in (0, 1] or be auto, got {share!r}.")
    for name, value in (("max_num_seqs", seqs), ("max_num_batched_tokens", tokens)):
        if value != AUTO and not (isinstance(value, int) and value >= 1):
            raise ConfigError(f"generator.{name} must be a whole number >= 1 or auto, got {value!r}.")
