"""A bf16 layer trained under DDP (2 CPU processes, gloo) with the Learner's optimizer at lr 1e-5: every process ends
with the same weights, moved by what Adam asks (tests/integration/test_bf16_masters.py launches it).

    ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 ddp_bf16_masters.py OUT_DIR

Process r's loss is (1 + r)·Σ W·1 through the DDP module, so the averaged gradient is a constant 1.5 on every
weight and Adam's update is lr per step: after 200 steps each float32 master is w0 − 2e-3 and the bf16 weight its
rounding."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch


def main() -> None:
    from accelerate import Accelerator
    from accelerate.utils import InitProcessGroupKwargs

    from tsrl.training.precision import adamw

    handlers = [InitProcessGroupKwargs(backend="gloo")] if int(os.environ.get("WORLD_SIZE", "1")) > 1 else []
    acc = Accelerator(kwargs_handlers=handlers)
    torch.manual_seed(0)  # the same start on every process
    layer = torch.nn.Linear(64, 64, bias=False)
    torch.nn.init.normal_(layer.weight, std=0.05)
    layer = layer.to(torch.bfloat16)
    start = layer.weight.detach().float().clone()
    model, optimizer = acc.prepare(layer, adamw(list(layer.parameters()), 1e-5, 0.0, deepspeed=False))
    ones = torch.ones(1, 64, dtype=torch.bfloat16)  # [1, 64]: d(Σ out)/dW = 1 on every weight
    for _ in range(200):
        acc.backward((1.0 + acc.process_index) * model(ones).float().sum())
        acc.clip_grad_norm_(model.parameters(), float("inf"))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    weight = acc.unwrap_model(model).weight.detach()
    (Path(sys.argv[1]) / f"rank{acc.process_index}.json").write_text(
        json.dumps(
            {
                "processes": acc.num_processes,
                "dtype": str(weight.dtype),
                "optimizer": type(optimizer.optimizer).__name__,
                "start": start.flatten().tolist(),
                "weight": weight.float().flatten().tolist(),
            }
        )
    )


if __name__ == "__main__":
    main()
