"""Take policy updates on a fixed set of groups, split over however many processes launched this script, and
write the losses and the final consolidated weights (tests/integration/test_scale_out.py compares 1 process,
2-process DDP and 2-process ZeRO-3).

    python dist_update.py OUT.json [lora] [checkpointing]   # one process; checkpointing: model.gradient_checkpointing
    accelerate launch --config_file configs/accelerate/cpu_zero3.yaml dist_update.py OUT.json

The groups are random token ids with random advantages and lengths (seeded, identical on every process);
process r takes groups r, r + W, ...; 3 updates of 2 epochs in micro-batches of 2 rows, then 2 updates as
trainer.pipeline=overlap takes them (stale=True: the ratio against the rollouts' sampling log-probs), KL to the
reference on (one minibatch: with several, each process would shuffle only its own rows into them), so accumulation,
the cross-process normaliser and the reference model are all exercised."""

from __future__ import annotations

import json
import os
import sys

import torch


def main() -> None:
    from accelerate import Accelerator
    from accelerate.utils import InitProcessGroupKwargs

    from tsrl.algo import GRPOConfig
    from tsrl.config import RunConfig, TrainerConfig
    from tsrl.generation import HFGeneratorConfig
    from tsrl.models import TinyModelConfig
    from tsrl.models.forward import collate, gradient_checkpointing_active
    from tsrl.models.lora import LoraSettings
    from tsrl.registry import load_components
    from tsrl.tasks.humor import HumorConfig
    from tsrl.training.learner import Learner
    from tsrl.types import Group, Prompt, Rollout

    out, lora = sys.argv[1], "lora" in sys.argv[2:]
    load_components()
    handlers = [InitProcessGroupKwargs(backend="gloo")] if int(os.environ.get("WORLD_SIZE", "1")) > 1 else []
    acc = Accelerator(kwargs_handlers=handlers)
    model_cfg = TinyModelConfig(
        warmstart_steps=0,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        vocab_size=600,
        cache_dir=os.environ["TSRL_TEST_CACHE"],
        lora=LoraSettings(r=4, alpha=8.0) if lora else LoraSettings(),
        gradient_checkpointing="checkpointing" in sys.argv[2:],
    )
    cfg = RunConfig(
        task=HumorConfig(),
        model=model_cfg,
        judge=None,
        reward=None,
        algo=GRPOConfig(epochs=2, kl_beta=0.05, adv_scale="none"),
        generator=HFGeneratorConfig(max_new_tokens=10),
        logger=None,
        trainer=TrainerConfig(micro_batch_size=2, lr=5e-3, grad_clip=1.0, lr_schedule="linear", max_steps=6),
    )  # a schedule the ZeRO optimizer must follow
    learner = Learner.build(cfg, acc)
    rng = torch.Generator().manual_seed(0)
    groups = []
    for b in range(4):  # 4 groups of 4: each of 2 processes gets 2 whole groups
        prompt = torch.randint(10, 500, (int(torch.randint(3, 8, (1,), generator=rng)),), generator=rng).tolist()
        rollouts = []
        for _ in range(4):
            ids = torch.randint(10, 500, (int(torch.randint(1, 11, (1,), generator=rng)),), generator=rng).tolist()
            rollouts.append(Rollout("", ids, [0.0] * len(ids), False))
        groups.append(Group(Prompt(f"p{b}", ""), prompt, rollouts))
    advantages = torch.randn(4, 4, generator=rng)
    mine = list(range(acc.process_index, 4, acc.num_processes))
    batch = collate([groups[i] for i in mine], advantages[mine], learner.tokenizer.pad_token_id)
    # trainer.pipeline=overlap's update: the same rollouts as if sampled one version earlier (their sampling
    # log-probs, seeded, identical on every process), the ratio taken against them
    stale_groups = [
        Group(
            g.prompt,
            g.prompt_ids,
            [
                Rollout("", r.token_ids, (-0.5 - 2.5 * torch.rand(len(r.token_ids), generator=rng)).tolist(), False)
                for r in g.rollouts
            ],
        )
        for g in groups
    ]
    stale = collate([stale_groups[i] for i in mine], advantages[mine], learner.tokenizer.pad_token_id)
    losses = []
    for step in range(1, 6):
        metrics = learner.update(batch, step) if step <= 3 else learner.update(stale, step, stale=True)
        losses.append(float(acc.reduce(torch.tensor(metrics["train/loss"]), reduction="mean")))
    weights = learner.state_dict_full(bucket_elements=20_000)  # many buckets: the tiny policy has ~100k weights
    if acc.is_main_process:
        json.dump(
            {
                "losses": losses,
                "processes": acc.num_processes,
                "distributed": str(acc.distributed_type),
                "zero_stage": learner.zero_stage,
                "partitioned_on_load": learner.partitioned_on_load,
                "checkpointing": gradient_checkpointing_active(learner.model),
                "weights": {k: v.flatten().tolist() for k, v in weights.items()},
            },
            open(out, "w"),
        )


if __name__ == "__main__":
    main()
