"""Float32 master weights for full fine-tuning of a bf16 or fp16 policy without DeepSpeed.

Why: torch's AdamW on a bf16 parameter adds each update to the bf16 value and rounds. bf16 keeps 8 significant
bits, so a weight w moves only when the update exceeds half its spacing, about |w|·2⁻⁹; Adam's update is about
lr per step, so at lr 1e-5 every weight with |w| > ~0.005 — most of a trained model's — never moves, and the run
trains nothing while its loss looks normal. DeepSpeed keeps float32 masters itself (its bf16 optimizer, ZeRO
stages 1–3) and a LoRA adapter trains in float32 (peft upcasts the adapter of a half-precision model), so only
full fine-tuning without DeepSpeed needs this.

`MasterWeightAdamW` is a torch AdamW whose parameter groups hold a float32 copy (the master) of each half-precision
trainable parameter, and float32 parameters as they are. A step upcasts each half parameter's gradient into its
master's, runs AdamW on the float32 tensors, and writes each master back rounded to its parameter's dtype: the
small updates accumulate in the master until they cross a representable step of the half-precision weight.
Being an AdamW, LambdaLR and accelerate's AcceleratedOptimizer take it as they take AdamW; its state_dict carries
the masters (and AdamW's float32 moments), so a resumed run continues from the same float32 values, not from the
rounded weights. Memory: 4 bytes per trainable parameter more than AdamW on the half weights (whose moments are
then half precision too), 16 bytes per parameter in all, as DeepSpeed's bf16 optimizer holds unpartitioned.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

HALF = (torch.bfloat16, torch.float16)
MASTERS_KEY = "float32_masters"  # the optimizer state_dict's entry: master index → float32 values


class MasterWeightAdamW(torch.optim.AdamW):
    """AdamW stepping float32 masters of half-precision parameters (see the module docstring)."""

    def __init__(self, params: Iterable[torch.nn.Parameter], **adamw: Any) -> None:
        self.pairs: list[tuple[torch.Tensor, torch.nn.Parameter]] = []  # (float32 master, half parameter)
        stepped: list[torch.Tensor] = []
        for param in params:
            if param.dtype in HALF:
                master = param.detach().clone().float().requires_grad_(True)  # a leaf AdamW may step
                self.pairs.append((master, param))
                stepped.append(master)
            else:
                stepped.append(param)
        super().__init__(stepped, **adamw)

    def model_parameters(self) -> list[torch.nn.Parameter]:
        """The half-precision parameters the masters stand for."""
        return [param for _, param in self.pairs]

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        self._follow_devices()
        for master, param in self.pairs:
            master.grad = None if param.grad is None else param.grad.float()  # [same shape], upcast
        loss = super().step(closure)
        for master, param in self.pairs:
            param.copy_(master)  # rounded to the parameter's dtype
            master.grad = None
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        super().zero_grad(set_to_none)
        for _, param in self.pairs:
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:
                param.grad.zero_()

    def state_dict(self) -> dict[str, Any]:
        out = super().state_dict()
        out[MASTERS_KEY] = {index: master.detach() for index, (master, _) in enumerate(self.pairs)}
        return out

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """AdamW's state, and the masters' float32 values (not re-derived from the rounded weights)."""
        state_dict = dict(state_dict)
        masters = state_dict.pop(MASTERS_KEY, {})
        super().load_state_dict(state_dict)
        with torch.no_grad():
            for index, (master, _) in enumerate(self.pairs):
                if index in masters:
                    master.copy_(masters[index])
        self._follow_devices()

    def _follow_devices(self) -> None:
        """Keep each master, and its Adam moments, on its parameter's device: the optimizer is made before
        accelerate moves the model to the accelerator, and a master made there stays behind."""
        for master, param in self.pairs:
            if master.device == param.device:
                continue
            master.data = master.data.to(param.device)
            state = self.state.get(master, {})
            for key, value in state.items():
                if torch.is_tensor(value) and key != "step":  # AdamW keeps its step count on the CPU
                    state[key] = value.to(param.device)


def needs_masters(params: Sequence[torch.nn.Parameter]) -> bool:
    """Whether any of the trainable `params` is half precision (bf16 or fp16)."""
    return any(p.dtype in HALF for p in params)


def adamw(params: Sequence[torch.nn.Parameter], lr: float, weight_decay: float, deepspeed: bool) -> torch.optim.AdamW:
    """The policy's optimizer: AdamW, with float32 masters when a trainable parameter is half precision and
    DeepSpeed (which keeps masters of its own) does not hold the model."""
    if needs_masters(params) and not deepspeed:
        return MasterWeightAdamW(params, lr=lr, weight_decay=weight_decay)
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
