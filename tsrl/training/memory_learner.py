"""The learner's terms in the memory plan (tsrl/training/memory.py, whose docstring gives their formulas; letters as
there): its model state (weights, gradients, optimizer states, ZeRO-3 gathers, the reference), the saved activations
and the logits of one micro-batch, and the float32 gradients of the optimizer step. The vLLM engine's terms are in
tsrl/training/memory_engine.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tsrl.models.logsoftmax import CHUNK_ELEMENTS
from tsrl.models.shape import ModelShape

if TYPE_CHECKING:  # one concern with memory.py, which imports this module: the plan, its learner terms kept apart
    from tsrl.training.memory import RunShape

NAIVE_LOGIT_BYTES = 20  # bytes per logit element over the model's logits on the naive path (measured, see memory.py)
DEEPSPEED_SUB_GROUP = 10**9  # elements: DeepSpeed's zero_optimization.sub_group_size default (tsrl's configs keep it)


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
    """The saved activations of one micro-batch (memory.py's docstring)."""
    e, L = run.dtype_bytes, shape.num_hidden_layers
    tokens = run.micro_rows * (run.prompt_tokens + run.completion_tokens)
    layer = shape.activation_bytes_per_token(e)
    outside = 2 * e * shape.hidden_size
    kept = L * e * shape.hidden_size + layer if run.checkpointing else L * layer
    return tokens * (kept + layer + outside)


def logit_bytes(shape: ModelShape, run: RunShape) -> int:
    """The log-prob step's logits of one micro-batch: naive float32 copies, or the chunked selective log-softmax."""
    elements = run.micro_rows * (run.completion_tokens + 1) * shape.vocab_size
    if run.logits == "naive":
        return elements * (run.dtype_bytes + NAIVE_LOGIT_BYTES)
    return 2 * elements * run.dtype_bytes + 2 * 4 * min(CHUNK_ELEMENTS, elements)


def step_gradient_bytes(shape: ModelShape, run: RunShape) -> int:
    """The float32 gradients an optimizer step makes of half-precision ones (memory.py's docstring): DeepSpeed's of this
    process's partition (ZeRO-3: a sub-group at a time), tsrl's masters' of every trainable weight; none for float32
    weights, nor for peft's float32 adapter without DeepSpeed."""
    W, stage = run.processes, run.zero_stage
    if run.dtype_bytes >= 4 or (run.lora_rank and not stage):
        return 0
    trainable = shape.adapter_parameters(run.lora_rank, run.lora_targets) if run.lora_rank else shape.parameters
    if stage == 3:
        return 4 * min(trainable // W, DEEPSPEED_SUB_GROUP)
    return 4 * trainable // (W if stage else 1)
