"""The Learner: the one place that knows how the policy is held — one process, DDP, or DeepSpeed ZeRO (stage 3
partitions parameters, gradients and optimizer state over the processes), with or without a LoRA adapter.

It builds the model (under ZeRO-3 partitioned while it loads, see tsrl/models/source.py), holds the optimizer
and the learning-rate schedule, runs the policy update, gives the reference log-probs, hands out the weights
for generation in buckets, and saves a consolidated Hugging Face folder plus the state to resume. Everything
else (the step, the regimes, checkpoints) goes through it and never touches the wrapped module.

Accumulation: a minibatch is split into micro-batches whose losses are scaled so that they add up to the
minibatch's loss (the aggregate's normaliser is computed once for the whole minibatch, over every process).
Under DDP the micro-batches before the last run without gradient all-reduce (`no_sync`); under DeepSpeed the
engine owns accumulation — tsrl marks the last micro-batch as the accumulation boundary, the engine reduces and
accumulates the partitioned gradients, clips (its `gradient_clipping`, set from trainer.grad_clip) and steps.

Same update on any number of processes: gradients are averaged over processes, so each process divides its
summed loss by (the minibatch's normaliser over every process) / (number of processes); one process with the
whole batch and W processes with a W-th each then take the same step (tests/integration/test_scale_out.py).
"""

from __future__ import annotations

import copy
import logging
import warnings
from collections import defaultdict
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tsrl.algo import AGGREGATES, LossInputs, policy_loss
from tsrl.config import RunConfig
from tsrl.models import policy_source
from tsrl.models.forward import RolloutBatch, completion_logprobs, enable_checkpointing
from tsrl.models.lora import adapter_lr, add_adapter, is_adapted, lora_settings
from tsrl.models.source import PolicySource, load_model, load_tokenizer
from tsrl.models.view import PolicyView, is_partitioned, weights_fingerprint
from tsrl.tasks.base import DatasetConfig
from tsrl.training.precision import adamw
from tsrl.training.weights_out import SYNC_BUCKET_ELEMENTS, bucketed, merged_units, sync_units, write_folder

log = logging.getLogger("tsrl")
Baselines = tuple[torch.Tensor | None, torch.Tensor | None]  # the loss's old and reference log-probs [N, T] each
Stats = dict[str, list[float]]  # diagnostics per micro-batch or minibatch, averaged at the end of an update


class Learner:
    """The policy being trained and everything that updates it."""

    def __init__(
        self,
        cfg: RunConfig,
        accelerator: Any,
        model: torch.nn.Module,
        tokenizer: Any,
        source: PolicySource | None = None,
        optimizer: torch.optim.Optimizer | None = None,
    ) -> None:
        """Hold `model` (loaded, adapter added) for training under `accelerator`. Without a `source` folder the
        reference policy is a copy of `model` as given (fine for a model held whole, e.g. in tests)."""
        self.cfg, self.acc, self.tokenizer, self.source = cfg, accelerator, tokenizer, source
        plugin = accelerator.state.deepspeed_plugin
        self.deepspeed = plugin is not None
        self.zero_stage = int(plugin.zero_stage) if plugin is not None else 0
        self.adapted = is_adapted(model)
        self.partitioned_on_load = any(map(is_partitioned, model.parameters()))  # ZeRO-3 with zero3_init
        self._reference: PolicyView | None = None
        self._initial_copy = None
        if source is None and not self.adapted:
            self._initial_copy = copy.deepcopy(model).eval().requires_grad_(False)
        tcfg = cfg.trainer
        if optimizer is None:
            trainable = [p for p in model.parameters() if p.requires_grad]
            lr = adapter_lr(cfg.model, tcfg.lr) if self.adapted else tcfg.lr  # model.lora.lr, when set
            optimizer = adamw(trainable, lr, tcfg.weight_decay, deepspeed=self.deepspeed)  # masters if half
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lr_lambda(tcfg.lr_schedule, tcfg.warmup_steps, tcfg.max_steps)
        )
        if self.deepspeed:
            self._configure_deepspeed(plugin)
        self.model, self.optimizer = accelerator.prepare(model, optimizer)
        accelerator.register_for_checkpointing(self.scheduler)  # not prepared: accelerate would step it per process

    @classmethod
    def build(cls, cfg: RunConfig, accelerator: Any, task_cfg: DatasetConfig | None = None) -> Learner:
        """Load the configured policy (tiny, a local folder, smollm2, ...), add the LoRA adapter if asked. A policy
        built from the task's data (model=tiny) learns from `task_cfg` (default cfg.task): the run's task as the
        user configured it, before a ladder step adds anchors of its own."""
        with accelerator.main_process_first():  # build or convert the folder once; the others find it made
            source = policy_source(cfg.model, task_cfg or cfg.task)
        tokenizer = load_tokenizer(source)
        model = load_model(source)  # every process together: under ZeRO-3 the loading is collective
        if getattr(cfg.model, "gradient_checkpointing", False):  # before the adapter: peft keeps it as it is
            enable_checkpointing(model, cfg.trainer.share_prompt and accelerator.is_main_process)
        settings = lora_settings(cfg.model)
        if settings is not None:
            with torch.random.fork_rng(devices=[]):  # the same adapter on every process (their seeds differ)
                torch.manual_seed(cfg.seed)
                model = add_adapter(model, settings)
            if settings.lr > 0 and accelerator.is_main_process:
                log.info(
                    "model.lora: the adapter trains at lr %g (model.lora.lr; not trainer.lr %g)",
                    settings.lr,
                    cfg.trainer.lr,
                )
        return cls(cfg, accelerator, model, tokenizer, source)

    # ----- how the policy is held -------------------------------------------------------------------------------

    def _configure_deepspeed(self, plugin: Any) -> None:
        """Fill the DeepSpeed config's batch and clipping entries from tsrl's own settings (tsrl sets the
        accumulation boundaries itself, so the engine's gradient_accumulation_steps is 1)."""
        ds = plugin.deepspeed_config
        micro = self.cfg.trainer.micro_batch_size
        ds["train_micro_batch_size_per_gpu"] = micro
        ds["gradient_accumulation_steps"] = 1
        ds["train_batch_size"] = micro * self.acc.num_processes
        ds["gradient_clipping"] = float(self.cfg.trainer.grad_clip) if self.cfg.trainer.grad_clip > 0 else 0.0
        ds.setdefault("zero_allow_untested_optimizer", True)  # torch AdamW, held by the ZeRO optimizer

    @property
    def module(self) -> torch.nn.Module:
        """The policy module (peft-wrapped under LoRA); its parameters are partitions under ZeRO-3."""
        return self.acc.unwrap_model(self.model)

    def whole_model(self) -> AbstractContextManager[Any]:
        """For generate() with the policy's own module (generator=hf): under ZeRO-3 every weight gathered once and
        DeepSpeed's per-layer hooks off inside (its unwrap_model_for_generation), so decoding does not gather each
        layer at every token; elsewhere nothing. Collective under ZeRO-3; inside, no backward pass."""
        if self.zero_stage != 3:
            return nullcontext()
        from deepspeed.runtime.zero import unwrap_model_for_generation

        return unwrap_model_for_generation(self.model)

    def named_parameters(self) -> Iterator[tuple[str, torch.nn.Parameter]]:
        return self.module.named_parameters()

    def policy_view(self) -> PolicyView:
        """What reward regimes may read: forward passes of the live policy and its frozen initial weights."""
        return PolicyView(self.model, initial=self.reference, identity=lambda: weights_fingerprint(self.module))

    def reference(self) -> PolicyView:
        """The frozen initial policy: the base with the adapter switched off under LoRA, else a second copy
        loaded from the same folder (under DeepSpeed an inference engine, partitioned like the policy)."""
        if self._reference is None:
            if self.adapted:
                module = self.module
                self._reference = PolicyView(
                    self.model, context=module.disable_adapter, identity=lambda: "base:" + weights_fingerprint(module)
                )
            elif self._initial_copy is not None:
                frozen = self._initial_copy.to(self.acc.device)
                self._reference = PolicyView(frozen, identity=lambda: weights_fingerprint(frozen))
            else:
                frozen = load_model(self.source).eval().requires_grad_(False)
                if self.deepspeed:
                    frozen = self._inference_engine(frozen)
                else:
                    frozen = frozen.to(self.acc.device)
                self._reference = PolicyView(frozen, identity=lambda: weights_fingerprint(frozen))
        return self._reference

    def _inference_engine(self, model: torch.nn.Module) -> torch.nn.Module:
        import deepspeed

        config = {
            k: v
            for k, v in self.acc.state.deepspeed_plugin.deepspeed_config.items()
            if k not in ("optimizer", "scheduler")
        }
        if config.get("zero_optimization", {}).get("stage") != 3:
            config["zero_optimization"] = {"stage": 0}  # stages 1–2 partition nothing of a frozen model
        engine, *_ = deepspeed.initialize(model=model, config=config)
        engine.eval()
        return engine

    # ----- the update --------------------------------------------------------------------------------------------

    def logprobs(self, batch: RolloutBatch, temperature: float, reference: bool = False) -> torch.Tensor:
        """Log-probs [N, T] of the batch's completions without gradient, under the policy as it is now or under
        the reference, in micro-batches."""
        micro = self.cfg.trainer.micro_batch_size
        if reference:
            return self.reference().logprobs(batch, temperature, micro)
        with torch.no_grad():
            share = self.cfg.trainer.share_prompt
            return torch.cat(
                [
                    completion_logprobs(self.model, batch.select(index), temperature, share_prompt=share)[0]
                    for index in torch.arange(len(batch)).split(micro)
                ]
            )

    def update(self, batch: RolloutBatch, step: int, empty: bool = False, stale: bool = False) -> dict[str, float]:
        """algo.epochs passes × algo.minibatches optimizer steps over the rollouts, with gradient accumulation.
        `stale`: the rollouts were sampled from an earlier policy (trainer.pipeline=overlap), so the "old"
        log-probs of the ratio are their sampling log-probs, not the current ones.

        Every process runs the same number of minibatches (torch.tensor_split), so collectives stay in step. A
        minibatch with no rows here — or a step whose groups were all dropped (`empty`) — is skipped alone, and
        under several processes runs one placeholder row with its loss scaled by 0 instead."""
        algo = self.cfg.algo
        shared, lr = self.acc.num_processes > 1, self.scheduler.get_last_lr()[0]
        if empty and not shared:
            with warnings.catch_warnings():  # no optimizer step this time, on purpose: the schedule still advances
                warnings.simplefilter("ignore", UserWarning)
                self.scheduler.step()
            return {"train/lr": lr}
        baselines = self._baselines(batch, stale)
        shuffle = torch.Generator().manual_seed(self.cfg.seed * 1_000_003 + step)
        stats: Stats = defaultdict(list)
        for epoch in range(algo.epochs):
            order = torch.randperm(len(batch), generator=shuffle) if algo.minibatches > 1 else torch.arange(len(batch))
            for minibatch in torch.tensor_split(order, algo.minibatches):
                placeholder = empty or len(minibatch) == 0
                if placeholder and not shared:
                    continue
                # sorted, a group's rows sit together in a micro-batch, so its prompt runs once (share_prompt)
                minibatch = order[:1] if len(minibatch) == 0 else minibatch.sort().values
                total = self._accumulate(batch, minibatch, baselines, epoch == 0, None if placeholder else stats)
                norm = self._optimizer_step()
                if not placeholder:
                    stats["train/loss"].append(total)
                    stats["train/grad_norm"].append(norm)
        self.scheduler.step()
        names = [key for key in stats if not key.startswith("weight/")]  # weight/…: rows per micro-batch, if recorded
        means = {key: float(np.average(stats[key], weights=stats.get(f"weight/{key}"))) for key in names}
        return {**means, "train/lr": lr}

    def _baselines(self, batch: RolloutBatch, stale: bool) -> Baselines:
        """The log-probs [N, T] the loss compares with: the ratio's old policy (None on-policy, where it is the
        current log-probs detached) and the reference (None without a KL term or DPO)."""
        algo, temperature = self.cfg.algo, self.cfg.generator.temperature
        on_policy = algo.epochs * algo.minibatches == 1 and not stale
        old = batch.sampler_logprobs if stale else None if on_policy else self.logprobs(batch, temperature)
        needs_reference = algo.kl_beta > 0 or algo.NEEDS_REFERENCE  # KL term, or DPO
        return old, self.logprobs(batch, temperature, reference=True) if needs_reference else None

    def _accumulate(
        self, batch: RolloutBatch, rows: torch.Tensor, baselines: Baselines, with_entropy: bool, stats: Stats | None
    ) -> float:
        """Forward and backward of a minibatch's `rows` [n] in micro-batches whose losses add up to the minibatch's
        (one normaliser for all of them); returns their summed loss. `stats` None: a placeholder minibatch, run so
        that the collectives stay in step, its loss scaled by 0 and nothing recorded."""
        algo, cfg, (old, ref) = self.cfg.algo, self.cfg.trainer, baselines
        temperature, t_max = self.cfg.generator.temperature, self.cfg.generator.max_new_tokens
        offline = algo.OFFLINE  # anchors, not samples: no sampler log-probs to compare with
        normalizer = self._normalizer(batch.completion_mask[rows], t_max, stats is None)  # float or [n]
        size = cfg.micro_batch_size
        micros = rows.split(size)
        parts = normalizer.split(size) if isinstance(normalizer, torch.Tensor) else [normalizer] * len(micros)  # views
        total = 0.0
        for i, (index, part) in enumerate(zip(micros, parts)):
            micro, last = batch.select(index), i == len(micros) - 1
            with self._accumulating(last):
                logp, entropy = completion_logprobs(
                    self.model, micro, temperature, with_entropy=with_entropy, share_prompt=cfg.share_prompt
                )
                inputs = LossInputs(
                    logp,
                    logp.detach() if old is None else old[index],
                    micro.advantages,
                    micro.completion_mask,
                    part,
                    None if ref is None else ref[index],
                    sampler_logprobs=None if offline else micro.sampler_logprobs,
                )
                out = policy_loss(inputs, algo)
                self._backward(out.loss * (0.0 if stats is None else 1.0), last)
            if stats is None:
                continue
            total += float(out.loss.detach())
            record_micro(stats, out.metrics, micro, logp, entropy, sampled=not offline)
        return total

    def _normalizer(self, mask: torch.Tensor, t_max: int, placeholder: bool) -> float | torch.Tensor:
        """The aggregate's normaliser of the minibatch over every process, divided by the number of processes
        (gradients are averaged over processes): then W processes take the step one process would."""
        aggregate = self.cfg.algo.aggregate
        local = AGGREGATES[aggregate](mask, t_max)
        W = self.acc.num_processes
        if W == 1:
            return local
        lengths = mask.sum(dim=1)  # [n]
        mine = (
            torch.tensor([0.0, 0.0, 0.0])
            if placeholder
            else torch.tensor([float(lengths.sum()), float((lengths > 0).sum()), float(mask.shape[0])])
        )
        tokens, with_tokens, rows = self.acc.reduce(mine.to(self.acc.device), reduction="sum").cpu().tolist()
        if aggregate == "token":  # Σm over every process
            return max(tokens, 1.0) / W
        if aggregate == "constant":  # N·T_max over every process
            return max(rows, 1.0) * t_max / W
        # sequence: each row's length × the number of sequences with tokens over every process
        return lengths.clamp_min(1.0) * max(with_tokens, 1.0) / W

    def _accumulating(self, last: bool):
        """Micro-batches before the last skip the DDP gradient all-reduce (DeepSpeed: see _backward)."""
        if self.deepspeed or last or self.acc.num_processes == 1:
            return nullcontext()
        return self.acc.no_sync(self.model)

    def _backward(self, loss: torch.Tensor, last: bool) -> None:
        if self.deepspeed:
            self.model.set_gradient_accumulation_boundary(last)
            self.model.backward(loss)
        else:
            self.acc.backward(loss)

    def _optimizer_step(self) -> float:
        """Clip, step, zero the gradients; returns the gradient norm before clipping."""
        if self.deepspeed:
            self.model.step()
            norm = self.model.get_global_grad_norm()
            return float(norm) if norm is not None else float("nan")
        clip = self.cfg.trainer.grad_clip
        norm = self.acc.clip_grad_norm_(self.model.parameters(), clip if clip > 0 else float("inf"))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(norm)

    # ----- weights out -------------------------------------------------------------------------------------------

    def weights_for_sync(
        self, bucket_elements: int = SYNC_BUCKET_ELEMENTS, adapter_only: bool = False
    ) -> Iterator[tuple[str, torch.Tensor]]:
        """(name, full tensor) for every weight a generator engine loads.

        Without LoRA every parameter under its Hugging Face name. Under LoRA the base model's weights unmerged, under
        the base names (an adapted layer's `….q_proj.weight`), then the adapter's own weights under the names peft
        saves them with (`base_model.model.….q_proj.lora_A.weight`): the engine applies the adapter as the learner
        does, W·x + s·B·(A·x), where a merge into a bf16 base would round away every update smaller than half a
        bf16 step of the base weight (tsrl/generation/vllm_lora.py). adapter_only: the adapter's weights alone,
        under peft's parameter names (what save_pretrained hands to peft).

        Under ZeRO-3 parameters are gathered a bucket at a time (buckets sized by DeepSpeed's element count, as
        `numel()` is 0 outside a gather), each tensor valid until the next one is asked for — never the whole
        model at once. Every process must iterate to the end together (the gathers are collective)."""
        return bucketed(sync_units(self.module, adapter_only), bucket_elements)

    def merged_weights(self, bucket_elements: int = SYNC_BUCKET_ELEMENTS) -> Iterator[tuple[str, torch.Tensor]]:
        """(Hugging Face name, full tensor) of the policy as one plain model, what the consolidated folder holds:
        under LoRA each adapted layer's weight merged on the fly (W + s·B·A, in the base weight's dtype), so the
        trainer's modules are never merged in place. Gathered and collective as weights_for_sync."""
        return bucketed(merged_units(self.module), bucket_elements)

    def state_dict_full(self, bucket_elements: int = SYNC_BUCKET_ELEMENTS) -> dict[str, torch.Tensor]:
        """The consolidated weights (merged under LoRA) on the main process (CPU copies); empty elsewhere."""
        main = self.acc.is_main_process
        return {
            name: tensor.detach().to("cpu", copy=True) for name, tensor in self.merged_weights(bucket_elements) if main
        }

    def save_pretrained(self, path: Path) -> None:
        """A Hugging Face folder of the policy (merged under LoRA, plus the adapter alone in path/adapter) that
        `from_pretrained` and vLLM load. Collective: every process calls it."""
        weights = self.state_dict_full()
        adapter = None
        if is_adapted(self.module):
            adapter = {
                name: tensor.detach().to("cpu", copy=True)
                for name, tensor in self.weights_for_sync(adapter_only=True)
                if self.acc.is_main_process
            }
        if self.acc.is_main_process:
            write_folder(path, weights, adapter, self.module, self.tokenizer)
        self.acc.wait_for_everyone()


def record_micro(
    stats: dict[str, list[float]],
    loss_metrics: dict[str, float],
    micro: RolloutBatch,
    logp: torch.Tensor,
    entropy: torch.Tensor | None,
    sampled: bool = True,
) -> None:
    """Per-micro-batch diagnostics: the loss's own, entropy and (for sampled rollouts) the sampler/learner
    log-prob gap."""
    mask = micro.completion_mask  # [n, T]
    for key, value in loss_metrics.items():  # a mean over the micro-batch's rows: weighted by them (see update)
        stats[f"train/{key}"].append(value)
        stats[f"weight/train/{key}"].append(float(len(micro)))
    if entropy is not None:
        stats["train/entropy"].append(float((entropy * mask).sum() / mask.sum().clamp_min(1)))
    if entropy is not None and sampled:
        diff = ((logp.detach() - micro.sampler_logprobs).abs() * mask).sum() / mask.sum().clamp_min(1)
        stats["train/sampler_logprob_diff"].append(float(diff))


def lr_lambda(schedule: str, warmup: int, total: int):
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return {"constant": 1.0, "linear": 1.0 - progress, "cosine": 0.5 * (1 + np.cos(np.pi * progress))}[schedule]

    return factor
