"""The memory plan: what one process of a GPU run holds, term by term, against the device's memory — printed at
start, and a run that cannot fit is refused before its policy is loaded (an 8B model takes minutes to load and
then dies at the first update with a CUDA out-of-memory error that names none of the settings to change).

Letters: P parameters, A adapter parameters (LoRA), W processes, e bytes of the model's dtype, L layers, h hidden,
i MLP width, a query heads, k key/value heads, d head width (q = a·d, kv = k·d), V vocabulary, n micro-batch rows,
S = prompt + completion tokens of a row, T completion tokens, u = generator.gpu_memory_utilization, M device bytes.

Model state (bytes per process; the ZeRO paper's 2 + 2 + 12 bytes per parameter for bf16 with Adam):
    weights     e·P, divided by W under ZeRO-3 (LoRA: the frozen base e·P plus the adapter)
    gradients   e·P, divided by W under ZeRO-2/3; DDP (W > 1, no DeepSpeed) adds its gradient buckets (e·P again)
    optimizer   Adam's two float32 moments 8·P, plus float32 master weights 4·P for half-precision weights
                (DeepSpeed's fp32 partition, or tsrl's masters without DeepSpeed); divided by W under ZeRO-1/2/3.
                LoRA without DeepSpeed: peft keeps the adapter in float32 (4 + 4 + 8 bytes per adapter parameter).
                Adapter of rank r on a target linear layer (in → out): r·(in + out) parameters.
    ZeRO-3 gathers  e·(V·h + one decoder layer): the largest module gathered whole, and the next one prefetched.
    reference   e·P (divided by W under ZeRO-3) when algo.kl_beta > 0 or DPO, without LoRA (LoRA's reference is
                the base with the adapter off).
Activations of one micro-batch (n·S tokens), per token and decoder layer, in bytes:
    e·(4h + 2q + 2kv + 4i) + 4a + 8
This is Korthikanti et al. (2022)'s s·b·h·(34 + 5·a·s/h) re-derived for these models: the 5·a·s/h term is the s×s
attention scores, softmax and dropout mask, which flash/memory-efficient SDPA never keeps (it keeps its output and
a float32 log-sum-exp per head, the 4a); no dropout masks (dropout is 0); RMSNorm keeps its input (2 × e·h) and a
float32 inverse norm; attention keeps its input e·h, Q and its output (2 × e·q), K and V (2 × e·kv); the SwiGLU
MLP keeps its input e·h and four i-wide tensors (gate, up, SiLU(gate), their product). Plus e·2h per token outside
the layers (embedding output, final norm). Without checkpointing all L layers are kept; with it
(model.gradient_checkpointing) only each layer's input e·h, and one layer is recomputed at a time. Either way
one more layer's worth is counted for the backward pass's gradients of the activations. Rows are counted at the full
S even where trainer.share_prompt runs a group's prompt once (an upper bound).
Logits of one micro-batch, E = n·(T + 1)·V elements (the head runs on the completion positions only):
    naive   E·(e + 20): the model's logits, then the float32 copies of the log-softmax written out (upcast, /τ,
            logsumexp's temporaries, a softmax for the entropy, the backward's exp and scatter); 20 bytes per
            element is the peak measured on CPU over the model's logits for that path, forward with the
            entropy and backward (N = 2, T = 256, V = 128,256; bf16 and float32 logits alike).
    chunked 2·E·e + 2·4·CHUNK_ELEMENTS: the model's logits and their gradient in the model's dtype, and two
            float32 working chunks (tsrl/models/logsoftmax.py: the selective log-softmax and the entropy).
vLLM, colocated (generator=vllm): the engine reserves u·M while awake (its weights, working memory and KV cache);
asleep during the update it keeps only its CUDA graphs (ENGINE_GRAPH_BYTES, none with enforce_eager). At start
vLLM requires what is left of u·M after its weights e·P and its working memory (a profiling forward of
max_num_batched_tokens tokens, the sampler's float32 logits for max_num_seqs rows, its graphs) to hold the KV
cache of one sequence of its context length: 2·L·kv·e bytes per token.
generator=hf instead holds a static KV cache for generator.prompts_per_call × group rows of S tokens.

Peak per process = CONTEXT_BYTES + model state + max(update, generation), where the update adds the activations,
the logits and the sleeping engine, and generation adds the awake engine (or the hf generator's cache).
These are estimates written from the libraries' documented behaviour and their source, not measured on a GPU.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from tsrl.errors import ConfigError
from tsrl.models.logsoftmax import CHUNK_ELEMENTS
from tsrl.models.shape import ModelShape, model_shape

log = logging.getLogger("tsrl")
GIB = 2**30
CONTEXT_BYTES = GIB  # CUDA context, NCCL buffers, allocator slack
ENGINE_GRAPH_BYTES = GIB  # vLLM's CUDA graphs (an allowance; none with enforce_eager)
NAIVE_LOGIT_BYTES = 20  # bytes per logit element over the model's logits on the naive path (measured, see above)


@dataclass(frozen=True)
class Engine:
    """A colocated vLLM engine, as the plan sees it."""

    utilization: float
    """generator.gpu_memory_utilization: the share of the device it reserves while awake."""
    context_tokens: int
    """Its max_model_len: the KV cache must hold one sequence this long."""
    dtype_bytes: int
    """Bytes per element of its weights and KV cache."""
    sleeps: bool = True
    """Whether it sleeps (frees its weights and KV cache) during the update."""
    graphs: bool = True
    """Whether it captures CUDA graphs (not enforce_eager)."""


@dataclass(frozen=True)
class RunShape:
    """What the plan needs of a run, beside the model's shape and the device."""

    processes: int
    """Processes (GPUs) of the run."""
    zero_stage: int
    """DeepSpeed ZeRO stage 1, 2 or 3; 0 = no DeepSpeed (one process or DDP)."""
    dtype_bytes: int
    """Bytes per element of the model's dtype (2 for bfloat16)."""
    lora_rank: int
    """model.lora.r (0 = full fine-tuning)."""
    checkpointing: bool
    """model.gradient_checkpointing."""
    micro_batch: int
    """trainer.micro_batch_size: rows per forward and backward pass."""
    prompt_tokens: int
    """The longest prompt, in tokens."""
    completion_tokens: int
    """generator.max_new_tokens."""
    reference: bool = False
    """A KL or DPO reference policy is used (algo.kl_beta > 0, DPO)."""
    engine: Engine | None = None
    """The vLLM engine; None for generator=hf."""
    generation_rows: int = 0
    """generator=hf: rows decoded at once (prompts_per_call × group size), each with a static cache of S tokens."""
    lora_targets: tuple[str, ...] = ("all-linear",)
    """model.lora.target_modules."""
    logits: str = "chunked"
    """chunked: the selective log-softmax; naive: float32 copies of the logits (the path before it)."""


UPDATE_ONLY = frozenset({"activations", "logits", "vLLM asleep"})
GENERATION_ONLY = frozenset({"vLLM awake", "hf generation cache"})


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes per process, term by term, and whether they fit the device. A term counts in both phases unless it is
    in UPDATE_ONLY or GENERATION_ONLY."""

    terms: dict[str, int]
    device: int
    kv_available: int = 0
    kv_needed: int = 0

    def phase(self, name: str) -> dict[str, int]:
        """The terms held during the update or during generation."""
        other = GENERATION_ONLY if name == "update" else UPDATE_ONLY
        return {term: value for term, value in self.terms.items() if term not in other}

    @property
    def update(self) -> int:
        return sum(self.phase("update").values())

    @property
    def generation(self) -> int:
        return sum(self.phase("generation").values())

    @property
    def peak(self) -> int:
        return max(self.update, self.generation)

    @property
    def fits(self) -> bool:
        return self.peak <= self.device and self.kv_available >= self.kv_needed

    def table(self, title: str) -> str:
        """A small text table in GiB: each term during the update and during generation."""
        update, generation = self.phase("update"), self.phase("generation")

        def cell(terms: dict[str, int], name: str) -> str:
            return f"{terms[name] / GIB:10.2f}" if name in terms else f"{'-':>10}"

        lines = [title, f"  {'GiB per process':<22}{'update':>10}{'generation':>12}"]
        lines += [f"  {n:<22}{cell(update, n)}  {cell(generation, n)}" for n, v in self.terms.items() if v]
        lines.append(f"  {'total':<22}{self.update / GIB:10.2f}  {self.generation / GIB:10.2f}")
        verdict = "fits" if self.fits else "DOES NOT FIT"
        lines.append(f"  {'device':<22}{self.device / GIB:10.2f}  {verdict:>10}")
        if self.kv_needed:
            lines.append(
                f"  vLLM KV cache: {self.kv_available / GIB:.2f} GiB, "
                f"{self.kv_available / self.kv_needed:.1f} sequences of its context length (at least 1)"
            )
        return "\n".join(lines)


def model_state(shape: ModelShape, run: RunShape) -> dict[str, int]:
    """Weights, gradients, optimizer states, ZeRO-3 gather buffers and the reference, per process."""
    W, stage, e = run.processes, run.zero_stage, run.dtype_bytes
    P = shape.parameters
    if run.lora_rank:
        frozen, trainable = P, shape.adapter_parameters(run.lora_rank, run.lora_targets)
        trainable_bytes = e if stage else 4  # DeepSpeed casts the adapter to its dtype; peft keeps float32
    else:
        frozen, trainable, trainable_bytes = 0, P, e
    masters = 4 if trainable_bytes < 4 else 0
    gradients = trainable * trainable_bytes
    return {
        "weights": (frozen * e + trainable * trainable_bytes) // (W if stage == 3 else 1),
        "gradients": gradients // (W if stage >= 2 else 1),
        "DDP gradient buckets": gradients if stage == 0 and W > 1 else 0,
        "optimizer states": trainable * (8 + masters) // (W if stage >= 1 else 1),
        "ZeRO-3 gathers": e * (shape.vocab_size * shape.hidden_size + shape.layer_parameters) if stage == 3 else 0,
        "reference": P * e // (W if stage == 3 else 1) if run.reference and not run.lora_rank else 0,
    }


def activation_bytes(shape: ModelShape, run: RunShape) -> int:
    """The saved activations of one micro-batch (module docstring)."""
    e, L = run.dtype_bytes, shape.num_hidden_layers
    tokens = run.micro_batch * (run.prompt_tokens + run.completion_tokens)
    layer = shape.activation_bytes_per_token(e)
    outside = 2 * e * shape.hidden_size
    kept = L * e * shape.hidden_size + layer if run.checkpointing else L * layer
    return tokens * (kept + layer + outside)


def logit_bytes(shape: ModelShape, run: RunShape) -> int:
    """The log-prob step's logits of one micro-batch: naive float32 copies, or the chunked selective log-softmax."""
    elements = run.micro_batch * (run.completion_tokens + 1) * shape.vocab_size
    if run.logits == "naive":
        return elements * (run.dtype_bytes + NAIVE_LOGIT_BYTES)
    return 2 * elements * run.dtype_bytes + 2 * 4 * min(CHUNK_ELEMENTS, elements)


def engine_working_bytes(shape: ModelShape, engine: Engine, device: int) -> int:
    """vLLM's memory besides its weights and KV cache: the profiling forward of max_num_batched_tokens tokens (the
    MLP's gate/up and product, the residual stream, Q/K/V), the sampler's float32 logits and probabilities for
    max_num_seqs rows, and its CUDA graphs. vLLM's offline defaults: 16,384 tokens and 1,024 rows on devices of
    70 GiB or more, else 8,192 and 256."""
    tokens, rows = (16384, 1024) if device >= 70 * GIB else (8192, 256)
    widths = 3 * shape.intermediate_size + 4 * shape.hidden_size + shape.q_width + 2 * shape.kv_width
    graphs = ENGINE_GRAPH_BYTES if engine.graphs else 0
    return tokens * widths * engine.dtype_bytes + rows * shape.vocab_size * 8 + graphs


def plan_memory(shape: ModelShape, run: RunShape, device: int) -> MemoryPlan:
    """The plan of `run` on a device of `device` bytes (module docstring)."""
    terms = {"CUDA context": CONTEXT_BYTES, **model_state(shape, run)}
    terms["activations"] = activation_bytes(shape, run)
    terms["logits"] = logit_bytes(shape, run)
    engine, kv_available, kv_needed = run.engine, 0, 0
    if engine is not None:
        awake = int(engine.utilization * device)
        terms["vLLM awake"] = awake
        terms["vLLM asleep"] = (ENGINE_GRAPH_BYTES if engine.graphs else 0) if engine.sleeps else awake
        weights = shape.parameters * engine.dtype_bytes
        kv_available = max(0, awake - weights - engine_working_bytes(shape, engine, device))
        kv_needed = engine.context_tokens * shape.kv_bytes_per_token(engine.dtype_bytes)
    sequence = run.prompt_tokens + run.completion_tokens
    terms["hf generation cache"] = run.generation_rows * sequence * shape.kv_bytes_per_token(run.dtype_bytes)
    return MemoryPlan(terms, device, kv_available, kv_needed)


def remedies(shape: ModelShape, run: RunShape, device: int) -> list[str]:
    """Settings that lower the plan's peak, each with the peak it would give; the largest micro-batch that fits."""
    tries: list[tuple[str, RunShape]] = []
    if not run.checkpointing:
        tries.append(("model.gradient_checkpointing=true", replace(run, checkpointing=True)))
    fitting = [
        m for m in range(run.micro_batch - 1, 0, -1) if plan_memory(shape, replace(run, micro_batch=m), device).fits
    ]
    if fitting:
        tries.append((f"trainer.micro_batch_size={fitting[0]}", replace(run, micro_batch=fitting[0])))
    if not run.lora_rank:
        tries.append(("model.lora.r=64", replace(run, lora_rank=64, reference=False)))
        more = [w for w in (2, 4, 8, 16, 32, 64) if w > run.processes]
        for w in more:
            if plan_memory(shape, replace(run, processes=w, zero_stage=3), device).fits:
                tries.append(
                    (
                        f"ZeRO-3 on {w} or more GPUs",
                        replace(run, processes=w, zero_stage=3),
                    )
                )
                break
    if run.engine is not None and run.engine.sleeps is False:
        tries.append(("generator.enable_sleep_mode=true", replace(run, engine=replace(run.engine, sleeps=True))))
    now = plan_memory(shape, run, device).peak
    said = []
    for setting, candidate in tries:
        plan = plan_memory(shape, candidate, device)
        if plan.peak < now:
            said.append(f"{setting} (peak {plan.peak / GIB:.1f} GiB{'' if plan.fits else ', not enough alone'})")
    return said


def utilization_needed(shape: ModelShape, engine: Engine, device: int) -> float:
    """The smallest generator.gpu_memory_utilization whose share holds the engine's weights, working memory and the
    KV cache of one sequence of its context length, rounded up to a hundredth."""
    need = (
        shape.parameters * engine.dtype_bytes
        + engine_working_bytes(shape, engine, device)
        + engine.context_tokens * shape.kv_bytes_per_token(engine.dtype_bytes)
    )
    return -(-100 * need // device) / 100


def refusal(shape: ModelShape, run: RunShape, device: int) -> str | None:
    """Why the run cannot fit, a sentence per reason naming the numbers and the settings to change; None if it fits."""
    plan = plan_memory(shape, run, device)
    reasons = []
    if plan.peak > device:
        phase = "update" if plan.update >= plan.generation else "generation"
        largest = sorted(plan.phase(phase).items(), key=lambda kv: -kv[1])[:4]
        parts = ", ".join(f"{name} {value / GIB:.1f}" for name, value in largest)
        fixes = "; ".join(remedies(shape, run, device)) or "a larger GPU"
        reasons.append(
            f"This run needs {plan.peak / GIB:.1f} GiB per process at its {phase} ({parts} GiB, ...) on a "
            f"{device / GIB:.1f} GiB GPU: change {fixes}."
        )
    if plan.kv_available < plan.kv_needed and run.engine is not None:
        u = run.engine.utilization
        reasons.append(
            f"vLLM's share (generator.gpu_memory_utilization={u} of {device / GIB:.1f} GiB) leaves "
            f"{plan.kv_available / GIB:.2f} GiB for its KV cache after its weights and working memory, less than one "
            f"sequence of {run.engine.context_tokens} tokens needs ({plan.kv_needed / GIB:.2f} GiB): set "
            f"generator.gpu_memory_utilization={utilization_needed(shape, run.engine, device)} or lower "
            "generator.max_model_len (or generator.max_new_tokens)."
        )
    if not reasons:
        return None
    return " ".join(reasons) + " (trainer.memory_check=false starts the run anyway.)"


DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def run_shape(cfg: Any, processes: int, zero_stage: int, prompt_tokens: int) -> RunShape:
    """The plan's view of a run config whose longest prompt has `prompt_tokens` tokens. The vLLM engine's context is
    generator.max_model_len, else what the engine sizes itself to (tsrl.generation.vllm_engine.engine_context_length:
    the longest prompt + a margin + generator.max_new_tokens, rounded up)."""
    from tsrl.generation.vllm_engine import sized_context
    from tsrl.registry import GENERATORS

    model, gen, algo = cfg.model, cfg.generator, cfg.algo
    e = DTYPE_BYTES[getattr(model, "dtype", "float32")]
    lora = getattr(model, "lora", None)
    engine = None
    if GENERATORS.of(gen).name == "vllm":
        engine = Engine(
            utilization=gen.gpu_memory_utilization,
            context_tokens=gen.max_model_len or sized_context(gen, prompt_tokens),
            dtype_bytes=e if gen.dtype == "auto" else DTYPE_BYTES[gen.dtype],
            sleeps=gen.enable_sleep_mode,
            graphs=not gen.enforce_eager,
        )
    return RunShape(
        processes=processes,
        zero_stage=zero_stage,
        dtype_bytes=e,
        lora_rank=lora.r if lora is not None else 0,
        checkpointing=bool(getattr(model, "gradient_checkpointing", False)),
        micro_batch=cfg.trainer.micro_batch_size,
        prompt_tokens=prompt_tokens,
        completion_tokens=gen.max_new_tokens,
        reference=algo.kl_beta > 0 or algo.NEEDS_REFERENCE,
        engine=engine,
        generation_rows=0 if engine else getattr(gen, "prompts_per_call", 1) * cfg.trainer.group_size,
        lora_targets=tuple(lora.target_modules) if lora is not None else ("all-linear",),
    )


def longest_prompts(prompts: list[Any], count: int = 64) -> list[Any]:
    """The `count` prompts with the most characters: the longest in tokens is among them (tokenizing a real
    dataset's every prompt through the chat template would take minutes)."""
    return sorted(prompts, key=lambda p: -sum(len(c) for _, c in p.messages or (("user", p.text),)))[:count]


def check_memory(cfg: Any, accelerator: Any, task: Any) -> MemoryPlan | None:
    """On CUDA, before the policy is loaded: this run's plan from the policy folder's config.json, printed by the
    main process, and a ConfigError naming the settings to change when it cannot fit (trainer.memory_check=false:
    a warning instead). On CPU nothing: the terms describe a GPU's memory, not a host's."""
    import torch

    if not torch.cuda.is_available():
        return None
    from tsrl.generation.hf import longest_prompt_tokens
    from tsrl.models import policy_source
    from tsrl.models.source import load_tokenizer

    with accelerator.main_process_first():  # the folder is built or converted once
        source = policy_source(cfg.model, cfg.task)
    shape = model_shape(str(source.path))
    if shape is None:
        log.warning("no config.json in %s: no memory plan for this run", source.path)
        return None
    prompts = longest_prompts([*task.prompts("train"), *task.prompts("eval")])
    plugin = accelerator.state.deepspeed_plugin
    stage = int(plugin.zero_stage) if plugin is not None else 0
    run = run_shape(cfg, accelerator.num_processes, stage, longest_prompt_tokens(load_tokenizer(source), prompts))
    device = torch.cuda.get_device_properties(accelerator.device).total_memory
    plan = plan_memory(shape, run, device)
    if accelerator.is_main_process:
        log.info("%s", plan.table(plan_title(shape, run)))
    reason = refusal(shape, run, device)
    if reason and cfg.trainer.memory_check:
        raise ConfigError(reason)
    if reason and accelerator.is_main_process:
        log.warning("%s", reason)
    return plan


def plan_title(shape: ModelShape, run: RunShape) -> str:
    """The plan's heading: the model's size and the settings that decide the terms."""
    zero = f"ZeRO-{run.zero_stage}" if run.zero_stage else "no DeepSpeed"
    tuning = f"LoRA r={run.lora_rank}" if run.lora_rank else "full fine-tuning"
    return (
        f"memory plan per process: {shape.parameters / 1e9:.2f}B parameters, {run.processes} process(es), {zero}, "
        f"{tuning}, {run.dtype_bytes}-byte weights, checkpointing {'on' if run.checkpointing else 'off'}, "
        f"micro-batch {run.micro_batch} x ({run.prompt_tokens} + {run.completion_tokens}) tokens, {run.logits} logits"
    )
