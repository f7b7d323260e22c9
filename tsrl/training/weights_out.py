"""The policy's weights out of the Learner, a bucket of parameters gathered at a time: for a generator engine
(Learner.weights_for_sync: the base unmerged and, under LoRA, the adapter's own weights) and for the consolidated
Hugging Face folder (Learner.merged_weights: each LoRA layer merged on the fly; written by write_folder).

A unit of sync is (parameters to gather, producer of named tensors): the producer runs while its parameters are
gathered, so under ZeRO-3 each tensor it hands out is valid until the next one is asked for. Buckets are sized by
DeepSpeed's element count (`numel()` is 0 outside a gather), never the whole model at once; every process must
iterate to the end together (the gathers are collective).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch

from tsrl.models.lora import active_adapter, is_adapted, is_adapter_weight, saved_adapter_name
from tsrl.models.view import element_count, gathered

SYNC_BUCKET_ELEMENTS = 50_000_000  # ~200 MB of float32 per gathered bucket


def bucketed(units: Iterator[tuple[list, Any]], bucket_elements: int) -> Iterator[tuple[str, torch.Tensor]]:
    """The named tensors of `units` ((parameters to gather, producer of named tensors) each), gathered a bucket
    of about `bucket_elements` elements at a time."""
    bucket: list[tuple[list[torch.nn.Parameter], Any]] = []
    size = 0
    for params, produce in [*units, (None, None)]:  # the last entry flushes the last bucket
        if params is not None:
            bucket.append((params, produce))
            size += sum(element_count(p) for p in params)
        if bucket and (params is None or size >= bucket_elements):
            with gathered([p for ps, _ in bucket for p in ps]):
                for _, make in bucket:
                    yield from make()
            bucket, size = [], 0


def sync_units(module: torch.nn.Module, adapter_only: bool) -> Iterator[tuple[list, Any]]:
    """What weights_for_sync hands out of the policy `module`, a parameter per unit of sync."""
    if not is_adapted(module):
        yield from single_units(module.named_parameters())
        return
    adapter = active_adapter(module)
    adapter_weights = [(name, p) for name, p in module.named_parameters() if is_adapter_weight(name)]
    if adapter_only:
        yield from single_units(adapter_weights)
        return
    base = module.get_base_model().named_parameters()
    yield from single_units((n.replace(".base_layer.", "."), p) for n, p in base if not is_adapter_weight(n))
    yield from single_units((saved_adapter_name(n, adapter), p) for n, p in adapter_weights)


def merged_units(module: torch.nn.Module) -> Iterator[tuple[list, Any]]:
    """What merged_weights hands out of the policy `module`: a LoRA layer (base weight and adapter, merged) is one
    unit."""
    if not is_adapted(module):
        yield from single_units(module.named_parameters())
        return
    from peft.tuners.lora import LoraLayer

    base, adapter = module.get_base_model(), active_adapter(module)
    covered: set[int] = set()
    for prefix, layer in base.named_modules():
        if isinstance(layer, LoraLayer) and adapter in layer.lora_A:
            params = list(layer.parameters())
            covered.update(id(p) for p in params)
            yield params, (lambda pre=prefix, lay=layer: merged_layer(pre, lay, adapter))
    yield from single_units((n, p) for n, p in base.named_parameters() if id(p) not in covered)


def single_units(
    named: Iterable[tuple[str, torch.nn.Parameter]],
) -> Iterator[tuple[list[torch.nn.Parameter], Any]]:
    """A unit of sync per (name, parameter): the parameter to gather and the producer of its named tensor."""
    for name, param in named:
        yield [param], (lambda n=name, p=param: [(n, p.detach())])


def merged_layer(prefix: str, layer: Any, adapter: str) -> list[tuple[str, torch.Tensor]]:
    """A LoRA layer's base weight with the adapter merged (W + s·B·A), and its bias, under the base names."""
    weight = layer.get_base_layer().weight
    merged = weight.detach() + layer.get_delta_weight(adapter).to(weight.dtype)
    out = [(f"{prefix}.weight", merged)]
    bias = layer.get_base_layer().bias
    if bias is not None:
        out.append((f"{prefix}.bias", bias.detach()))
    return out


def write_folder(
    path: Path,
    weights: dict[str, torch.Tensor],
    adapter: dict[str, torch.Tensor] | None,
    module: torch.nn.Module,
    tokenizer: Any,
) -> None:
    """Write the consolidated `weights` of the policy `module` as a Hugging Face folder (its config, generation
    config and `tokenizer` beside them), plus `adapter` alone, as peft saves it, in path/adapter."""
    from huggingface_hub import save_torch_state_dict

    base = module.get_base_model() if is_adapted(module) else module
    path.mkdir(parents=True, exist_ok=True)
    save_torch_state_dict(weights, path)  # safetensors, sharded with an index when large
    base.config.save_pretrained(path)
    if base.generation_config is not None:
        base.generation_config.save_pretrained(path)
    tokenizer.save_pretrained(path)
    if adapter is not None:
        module.save_pretrained(path / "adapter", state_dict=adapter, safe_serialization=True)
