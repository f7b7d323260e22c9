"""What reward regimes may do with the live policy, whatever holds it (one process, DDP, ZeRO-3, LoRA).

Regimes that read the policy (Intuitor's self-certainty, the reward model's features) get a `PolicyView`:
forward passes without gradient and the policy's initial weights, frozen — never the module itself, so no
regime can deep-copy a partitioned model or change the one being trained. Under ZeRO-3 a forward pass gathers
each layer as it runs (DeepSpeed's hooks), so the view works there unchanged.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

import torch

from tsrl.models.forward import completion_logprobs, policy_forward


def element_count(param: torch.Tensor) -> int:
    """A parameter's true size: under ZeRO-3 `numel()` is 0 outside a gather; DeepSpeed keeps the count."""
    return int(getattr(param, "ds_numel", param.numel()))


def is_partitioned(param: torch.Tensor) -> bool:
    """Whether `param` is a ZeRO-3 partition (DeepSpeed marks its parameters with an id)."""
    return hasattr(param, "ds_id")


@contextmanager
def gathered(params: Sequence[torch.Tensor]) -> Iterator[None]:
    """Inside: the full values of `params` on every process (a no-op unless they are ZeRO-3 partitions)."""
    partitioned = [p for p in params if is_partitioned(p)]
    if not partitioned:
        yield
        return
    import deepspeed

    with deepspeed.zero.GatheredParameters(partitioned, modifier_rank=None):
        yield


def weights_fingerprint(module: torch.nn.Module) -> str:
    """Cheap identity of a model's weights: its name plus every parameter's sum (gathered one at a time)."""
    sums = []
    for name, param in module.named_parameters():
        with gathered([param]):
            sums.append((name, round(float(param.detach().double().sum()), 6)))
    name = getattr(getattr(module, "config", None), "_name_or_path", "")
    return hashlib.sha256(json.dumps([name, sums]).encode()).hexdigest()[:16]


class PolicyView:
    """Forward passes of a policy without gradient, and its frozen initial weights.

    `module` is what runs the forward pass (a plain module, a DDP wrapper or a DeepSpeed engine); `context`, if
    given, is entered around each pass (e.g. a LoRA adapter switched off); `initial` builds the view of the
    starting weights on first use (default: a deep copy, fine for a module held whole)."""

    def __init__(
        self,
        module: torch.nn.Module,
        context: Callable[[], Any] | None = None,
        initial: Callable[[], PolicyView] | None = None,
        identity: Callable[[], str] | None = None,
    ) -> None:
        self._module, self._context, self._initial_builder, self._identity = module, context, initial, identity
        self._initial: PolicyView | None = None

    @contextmanager
    def _running(self) -> Iterator[None]:
        """Eval mode and the view's context (e.g. the adapter off) for one pass; the module's mode restored after."""
        was_training = self._module.training
        self._module.eval()
        try:
            with self._context() if self._context else nullcontext():
                yield
        finally:
            self._module.train(was_training)

    @property
    def device(self) -> torch.device:
        return next(self._module.parameters()).device

    @torch.no_grad()
    def forward(self, batch, hidden: bool = False) -> Any:
        """The model's output over a RolloutBatch (tsrl.models.forward), in eval mode, without gradient."""
        with self._running():
            return policy_forward(self._module, batch, hidden)

    @torch.no_grad()
    def logprobs(self, batch, temperature: float, micro: int) -> torch.Tensor:
        """log π(token) [N, T] of the batch's completions (tsrl.models.forward), in micro-batches of `micro` rows."""
        with self._running():
            return torch.cat(
                [
                    completion_logprobs(self._module, batch.select(index), temperature)[0]
                    for index in torch.arange(len(batch)).split(max(1, micro))
                ]
            )

    def initial(self) -> PolicyView:
        """The policy as it was before training, frozen (built once)."""
        if self._initial is None:
            if self._initial_builder is not None:
                self._initial = self._initial_builder()
            else:
                frozen = copy.deepcopy(self._module).eval().requires_grad_(False)
                self._initial = PolicyView(frozen, identity=lambda: weights_fingerprint(frozen))
        return self._initial

    def fingerprint(self) -> str:
        """Identity of the weights this view runs (for caches keyed by the backbone)."""
        return self._identity() if self._identity else weights_fingerprint(self._module)


def as_view(model: Any) -> PolicyView | None:
    """A PolicyView of a raw module (kept as is when it already is a view)."""
    if model is None or isinstance(model, PolicyView):
        return model
    return PolicyView(model)
