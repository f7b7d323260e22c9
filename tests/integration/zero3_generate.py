"""generator=hf under ZeRO-3, gathered once per generate call against layer by layer at every token: the same
samples, and the per-call time of each (tests/integration/test_zero3_generation.py launches it on 2 processes).

    accelerate launch --config_file configs/accelerate/cpu_zero3.yaml zero3_generate.py OUT_DIR

Each process samples its own prompts under the same seed both ways, takes one policy update (the hooks the
gather switched off must be back for the backward pass), and samples again both ways; it writes
OUT_DIR/rank<r>.json with the token ids, log-probs, seconds and DeepSpeed layer fetches of each call."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch


def main() -> None:
    from accelerate import Accelerator
    from accelerate.utils import InitProcessGroupKwargs

    from tsrl.algo import GRPOConfig
    from tsrl.config import RunConfig, TrainerConfig
    from tsrl.generation import HFGenerator, HFGeneratorConfig
    from tsrl.models import TinyModelConfig
    from tsrl.models.forward import collate
    from tsrl.models.view import element_count
    from tsrl.registry import load_components
    from tsrl.tasks.humor import HumorConfig
    from tsrl.training.learner import Learner
    from tsrl.types import Prompt

    out = Path(sys.argv[1])
    load_components()
    handlers = [InitProcessGroupKwargs(backend="gloo")] if int(os.environ.get("WORLD_SIZE", "1")) > 1 else []
    acc = Accelerator(kwargs_handlers=handlers)
    model_cfg = TinyModelConfig(
        warmstart_steps=0,
        hidden_size=64,
        num_layers=4,
        num_heads=2,
        vocab_size=600,
        cache_dir=os.environ["TSRL_TEST_CACHE"],
    )
    cfg = RunConfig(
        task=HumorConfig(),
        model=model_cfg,
        judge=None,
        reward=None,
        algo=GRPOConfig(),
        generator=HFGeneratorConfig(max_new_tokens=24, temperature=1.0),
        logger=None,
        trainer=TrainerConfig(micro_batch_size=8, lr=5e-3),
    )
    learner = Learner.build(cfg, acc)
    prompts = [
        Prompt(f"p{acc.process_index}-{i}", f"tell a joke about topic {acc.process_index} {i}") for i in range(4)
    ]
    generators = {
        gather: HFGenerator(
            learner.module,
            learner.tokenizer,
            HFGeneratorConfig(max_new_tokens=24, gather_zero3=gather),
            learner.whole_model,
        )
        for gather in (False, True)
    }
    calls: dict[str, list] = {}
    layer_fetches = count_layer_fetches()

    def sample(label: str, gather: bool) -> list:
        torch.manual_seed(1234 + acc.process_index)
        way = "gather" if gather else "layers"
        start, fetches = time.perf_counter(), layer_fetches[0]
        groups = generators[gather].generate(prompts, n=4)
        calls.setdefault(f"{label}/seconds/{way}", []).append(time.perf_counter() - start)
        calls.setdefault(f"{label}/layer_fetches/{way}", []).append(layer_fetches[0] - fetches)
        return groups

    results = {}
    for label in ("before", "after"):
        for repeat in range(2):  # alternated, so a noisy moment hits both ways
            for gather in (repeat % 2 == 0, repeat % 2 == 1):
                groups = sample(label, gather)
                results[f"{label}/{'gather' if gather else 'layers'}"] = [
                    [(r.token_ids, r.logprobs) for r in g.rollouts] for g in groups
                ]
        if label == "before":  # one update: the backward pass needs DeepSpeed's hooks back
            advantages = torch.randn(len(groups), 4, generator=torch.Generator().manual_seed(acc.process_index))
            learner.update(collate(groups, advantages, learner.tokenizer.pad_token_id), step=1)
    partitioned = all(p.numel() == 0 for p in learner.module.parameters() if element_count(p) > 10_000)
    (out / f"rank{acc.process_index}.json").write_text(
        json.dumps(
            {
                "processes": acc.num_processes,
                "zero_stage": learner.zero_stage,
                "partitioned_after": partitioned,
                "samples": results,
                "calls": calls,
            }
        )
    )


def count_layer_fetches() -> list[int]:
    """A counter [n] of DeepSpeed's per-module fetches (its pre-forward hook's work), counted from now on."""
    from deepspeed.runtime.zero.parameter_offload import DeepSpeedZeRoOffload

    counter = [0]
    fetch = DeepSpeedZeRoOffload.pre_sub_module_forward_function

    def counted(self, sub_module):
        counter[0] += 1
        return fetch(self, sub_module)

    DeepSpeedZeRoOffload.pre_sub_module_forward_function = counted
    return counter


if __name__ == "__main__":
    main()
