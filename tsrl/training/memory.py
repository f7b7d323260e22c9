"""The memory plan: what one process of a GPU run holds, term by term, against the device's memory — printed at
start, and a run that cannot fit is refused before its policy is loaded (an 8B model takes minutes to load and
then dies at the first update with a CUDA out-of-memory error that names none of the settings to change).

Letters: P parameters, A adapter parameters (LoRA), W processes, e bytes of the model's dtype, L layers, h hidden,
i MLP width, a query heads, k key/value heads, d head width (q = a·d, kv = k·d), V vocabulary, n micro-batch rows
(trainer.micro_batch_size, at most the B·G/W rows each process holds of a step's global batch of B prompts × G),
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
vLLM, colocated (generator=vllm): its share u·M while awake, asleep only its graphs, its KV cache check, its
sampler's run-time copies and the automatic sizes: tsrl/training/memory_engine.py.
The optimizer step over half-precision weights upcasts gradients: DeepSpeed's ZeRO optimizer this process's
partition of them (ZeRO-3: one sub-group of at most DEEPSPEED_SUB_GROUP elements at a time) for its float32 masters,
tsrl's masters without DeepSpeed every one; 4 bytes per element, counted with the update's activations (an upper
bound: the step runs after the backward pass has freed them).
generator=hf instead holds a static KV cache for min(generator.prompts_per_call, B/W) × G rows of S tokens.

Peak per process = CONTEXT_BYTES + model state + max(update, generation), where the update adds the activations,
the logits, the step's float32 gradients and the sleeping engine, and generation adds the awake engine and its
sampler's run-time copies (or the hf generator's cache).
These are estimates written from the libraries' documented behaviour and their source, not measured on a GPU.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from tsrl.errors import ConfigError
from tsrl.generation.hf import longest_prompt_tokens
from tsrl.generation.vllm_config import AUTO
from tsrl.generation.vllm_engine import engine_lora_rank, sized_context
from tsrl.models import policy_source
from tsrl.models.shape import ModelShape, model_shape
from tsrl.models.source import load_tokenizer
from tsrl.registry import GENERATORS
from tsrl.training.memory_engine import (
    ENGINE_GRAPH_BYTES,
    Engine,
    engine_batch_limits,
    engine_limits,
    engine_share,
    engine_weight_bytes,
    engine_working_bytes,
    sampler_bytes,
    size_engine,
    utilization_needed,
)
from tsrl.training.memory_learner import activation_bytes, logit_bytes, model_state, step_gradient_bytes

log = logging.getLogger("tsrl")
GIB = 2**30
CONTEXT_BYTES = GIB  # CUDA context, NCCL buffers, allocator slack


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
    step_rows: int = 0
    """Rows of a step's batch over every process (trainer.prompts_per_step × group size): each process holds
    step_rows / processes of them, so a micro-batch has at most that many (0 = trainer.micro_batch_size rows)."""

    @property
    def micro_rows(self) -> int:
        """The rows of one micro-batch: trainer.micro_batch_size, or fewer where this process's share of the step's
        batch is smaller."""
        return min(self.micro_batch, self.step_rows // self.processes) if self.step_rows else self.micro_batch


UPDATE_ONLY = frozenset({"activations", "logits", "float32 step gradients", "vLLM asleep"})
GENERATION_ONLY = frozenset({"vLLM awake", "vLLM sampler", "hf generation cache"})


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes per process, term by term, and whether they fit the device. A term counts in both phases unless it is
    in UPDATE_ONLY or GENERATION_ONLY."""

    terms: dict[str, int]
    device: int
    kv_available: int = 0
    kv_needed: int = 0
    share: float = 0.0
    """The vLLM engine's share of the device (generator.gpu_memory_utilization, auto resolved); 0 without one."""
    rows: int = 0
    """This process's rows of a step, which the engine generates at once when it can hold them."""
    concurrent: int = 0
    """Sequences of its full context length the engine holds at once: its KV cache's, at most max_num_seqs."""

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
                f"  vLLM (share {self.share:.2f}) KV cache: {self.kv_available / GIB:.2f} GiB, "
                f"{self.kv_available / self.kv_needed:.1f} sequences of its context length (at least 1)"
                + (f"; a step's {self.rows} rows per process in {self.waves} wave(s)" if self.rows else "")
            )
        return "\n".join(lines)

    @property
    def waves(self) -> int:
        """Rounds in which the engine generates this process's rows of a step when every sequence reaches the
        context length; 0 when it holds none."""
        return -(-self.rows // self.concurrent) if self.concurrent else 0


def plan_memory(shape: ModelShape, run: RunShape, device: int) -> MemoryPlan:
    """The plan of `run` on a device of `device` bytes (module docstring); an automatic engine share is resolved
    from the learner's terms (memory_engine.engine_share)."""
    terms = {"CUDA context": CONTEXT_BYTES, **model_state(shape, run)}
    terms["activations"] = activation_bytes(shape, run)
    terms["logits"] = logit_bytes(shape, run)
    terms["float32 step gradients"] = step_gradient_bytes(shape, run)
    engine, kv_available, kv_needed, share, concurrent = run.engine, 0, 0, 0.0, 0
    if engine is not None:
        # beside the awake engine the learner holds its update's memory only when the engine stays awake through it
        held = terms if not engine.asleep_in_update else {k: v for k, v in terms.items() if k not in UPDATE_ONLY}
        sampler = sampler_bytes(shape, engine, device)
        share = engine.utilization
        share = engine_share(sum(held.values()), sampler, device) if share is None else share
        awake = int(share * device)
        terms["vLLM awake"] = awake
        terms["vLLM asleep"] = (ENGINE_GRAPH_BYTES if engine.graphs else 0) if engine.asleep_in_update else awake
        terms["vLLM sampler"] = sampler
        used = engine_weight_bytes(shape, engine) + engine_working_bytes(shape, engine, device)
        kv_available = max(0, awake - used)
        kv_needed = engine.context_tokens * shape.kv_bytes_per_token(engine.dtype_bytes)
        concurrent = min(kv_available // kv_needed, engine_limits(engine, device)[1])
    sequence = run.prompt_tokens + run.completion_tokens
    terms["hf generation cache"] = run.generation_rows * sequence * shape.kv_bytes_per_token(run.dtype_bytes)
    rows = run.step_rows // run.processes if engine is not None else 0
    return MemoryPlan(terms, device, kv_available, kv_needed, share, rows, concurrent)


def remedies(shape: ModelShape, run: RunShape, device: int) -> list[str]:
    """Settings that lower the plan's peak, each with the peak it would give; the largest micro-batch that fits."""
    tries: list[tuple[str, RunShape]] = []
    if not run.checkpointing:
        tries.append(("model.gradient_checkpointing=true", replace(run, checkpointing=True)))
    fitting = [
        m for m in range(run.micro_rows - 1, 0, -1) if plan_memory(shape, replace(run, micro_batch=m), device).fits
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
    engine = run.engine
    if engine is not None and not engine.asleep_in_update and engine.utilization is not None:
        tries.append(("generator.gpu_memory_utilization=auto", replace(run, engine=replace(engine, utilization=None))))
    if engine is not None and not engine.sleeps:
        tries.append(("generator.enable_sleep_mode=true", replace(run, engine=replace(engine, sleeps=True))))
    now = plan_memory(shape, run, device).peak
    said = []
    for setting, candidate in tries:
        plan = plan_memory(shape, candidate, device)
        if plan.peak < now:
            said.append(f"{setting} (peak {plan.peak / GIB:.1f} GiB{'' if plan.fits else ', not enough alone'})")
    return said


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
        needed = utilization_needed(shape, run.engine, device)
        if run.engine.utilization is None:
            setting = f"auto: {plan.share}, what the learner leaves"
            fix = f"leave the engine a share of {needed} (the remedies above)"
        else:
            setting, fix = str(run.engine.utilization), f"set generator.gpu_memory_utilization={needed}"
        reasons.append(
            f"vLLM's share (generator.gpu_memory_utilization={setting} of {device / GIB:.1f} GiB) leaves "
            f"{plan.kv_available / GIB:.2f} GiB for its KV cache after its weights and working memory, less than one "
            f"sequence of {run.engine.context_tokens} tokens needs ({plan.kv_needed / GIB:.2f} GiB): {fix} or lower "
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
    model, gen, algo = cfg.model, cfg.generator, cfg.algo
    share, group = cfg.trainer.prompts_per_step // processes, cfg.trainer.group_size  # prompts per process and step
    e = DTYPE_BYTES[getattr(model, "dtype", "float32")]
    lora = getattr(model, "lora", None)
    engine = None
    if GENERATORS.of(gen).name == "vllm":
        context = gen.max_model_len or sized_context(gen, prompt_tokens)
        rows = max(1, share) * group * gen.tensor_parallel_size  # an engine serves its ranks' requests
        seqs, tokens = engine_batch_limits(rows if gen.max_num_seqs == AUTO else gen.max_num_seqs, context)
        engine = Engine(
            utilization=None if gen.gpu_memory_utilization == AUTO else float(gen.gpu_memory_utilization),
            context_tokens=context,
            dtype_bytes=e if gen.dtype == "auto" else DTYPE_BYTES[gen.dtype],
            sleeps=gen.enable_sleep_mode,
            graphs=not gen.enforce_eager,
            max_num_seqs=seqs,
            max_num_batched_tokens=tokens if gen.max_num_batched_tokens == AUTO else gen.max_num_batched_tokens,
            lora_rank=engine_lora_rank(lora.r) if lora is not None and lora.r else 0,
            top_p=gen.top_p < 1,
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
        # generator=hf decodes at most this process's share of the step's prompts in one call
        generation_rows=0 if engine else min(getattr(gen, "prompts_per_call", 1), max(1, share)) * group,
        step_rows=cfg.trainer.prompts_per_step * group,
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
    if run.engine is not None:
        size_engine(cfg.generator, run.engine, plan.share, accelerator.is_main_process)
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
        f"micro-batch {run.micro_rows} x ({run.prompt_tokens} + {run.completion_tokens}) tokens, {run.logits} logits"
    )
