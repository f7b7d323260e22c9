"""The RL loop: generate → score → advantages → update → log, one step per function call.

Where it departs from textbook GRPO (all configurable, defaults in configs/):
- advantages are TSRL's group-centred win-rates, w − mean(w), with no std scaling (algo.adv_scale=none);
- the on-policy case (1 epoch, 1 minibatch) uses the current log-probs, detached, as the "old" ones, so the
  ratio is exactly 1 and no extra forward pass is paid; otherwise the pre-update log-probs are computed once;
- a group whose reward could not be computed (no verdicts) is dropped: it takes no part in the update (no
  forward/backward, not in the loss normaliser, the KL term or the batch std), counted as train/dropped_groups;
- optionally (algo.mask_truncated) completions cut at max_new_tokens are left out of the loss (DAPO);
- each process generates and scores whole groups for its share of the step's global batch, so tournaments see all G;
  each completion is drawn under a seed of its own (tsrl/training/sampler.py), whichever process draws it;
- held-out evaluation uses its own judge (`eval_judge`, by default the training judge without injected noise,
  position bias or budget), named in eval.json;
- a stop that needs the user (judge budget spent, judge down) checkpoints the last finished step first;
- the offline baselines (algo=sft | dpo) replace generate → score by the ladder's anchors (offline_step) and
  share the rest: the update, logging, evaluation and checkpoints;
- trainer.pipeline=overlap (overlap_step, tsrl/training/pipeline.py) scores one step's groups in a worker while
  the next are generated and the step's update runs; trainer.fill=resample (fill_batch) draws further batches
  until every group of the step carries a signal.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tsrl.algo import group_advantages
from tsrl.config import RunConfig
from tsrl.errors import UserError
from tsrl.evaluation import headline
from tsrl.judging import close_judge, set_noise_stream, step_stream
from tsrl.models.forward import RolloutBatch, collate
from tsrl.progress import bar_fields
from tsrl.rewards import SamplingRegime
from tsrl.tasks import build_task
from tsrl.training.checkpoint import (
    DONE_FILE,
    capture_rng,
    checkpoint_dir,
    finished_run,
    mark_finished,
    restore_rng,
    save_checkpoint,
)
from tsrl.training.collective import gather, reduce_metrics
from tsrl.training.heldout import evaluate
from tsrl.training.offline import offline_groups, offline_ladders
from tsrl.training.sampler import Share
from tsrl.training.setup import Run, open_judges, quiet_libraries, say_spend, setup, stopped_cleanly, trainer_state
from tsrl.types import Count, Emit, Group, RewardBatch


def train_step(run: Run, step: int) -> tuple[dict[str, float], list[Group], np.ndarray]:
    """One RL step on this process's prompts; returns (metrics, groups, rewards [B, G])."""
    t0 = time.perf_counter()
    set_noise_stream(run.judge, *step_stream(step))
    groups, scored, times = generate_and_score(run)
    if run.cfg.trainer.fill == "resample":
        groups, scored = fill_batch(run, groups, scored, times)
    return learn(run, step, groups, scored, t0, times)


def generate_and_score(run: Run) -> tuple[list[Group], RewardBatch, dict[str, float]]:
    """This process's share of the next global batch, generated then scored (sync), or scored while it is generated
    (trainer.pipeline=stream); with the step's times."""
    if run.streamer is not None:
        share = run.sampler.next_batch()
        return run.streamer.run(lambda emit: generate_groups(run, share, emit), len(share.prompts))
    t0 = time.perf_counter()
    groups = generate_groups(run)
    t1 = time.perf_counter()
    scored = run.regime.score(groups)
    return groups, scored, {"time/generate_s": t1 - t0, "time/score_s": time.perf_counter() - t1}


def fill_batch(
    run: Run, groups: list[Group], scored: RewardBatch, times: dict[str, float]
) -> tuple[list[Group], RewardBatch]:
    """trainer.fill=resample (DAPO's dynamic sampling): keep the groups whose rewards differ, draw and score
    further batches until every process holds its share of prompts_per_step such groups (all processes draw the same
    number of batches, so generation's collectives stay in step) or fill_max_batches were drawn. Returns the
    kept groups (the first of the share) and their rewards; the regime's metrics are the first batch's.
    fill/zero_var_frac is the zero-variance share of every group drawn, before filling removed them (the update's
    reward/zero_var_frac is then ~0 by construction)."""
    cfg = run.cfg.trainer
    want, kept, rows, drawn, flat = run.sampler.share, [], [], 1, []

    def keep(batch: list[Group], rewards: np.ndarray) -> None:
        flat.extend(float(np.ptp(row) == 0) for row in rewards if not np.isnan(row).any())
        for group, row in zip(batch, rewards):
            if not np.isnan(row).any() and np.ptp(row) > 0:
                kept.append(group)
                rows.append(row)

    keep(groups, scored.rewards)
    while drawn < cfg.fill_max_batches and max(
        d["short"] for d in gather(run.accelerator, {"short": float(len(kept) < want)})
    ):
        more, extra, spent = generate_and_score(run)
        for key, seconds in spent.items():
            times[key] = times.get(key, 0.0) + seconds
        keep(more, extra.rewards)
        drawn += 1
    metrics = {
        **scored.metrics,
        "fill/batches": float(drawn),
        "fill/kept_groups": Count(min(len(kept), want)),
        "fill/generations_per_step": Count(drawn * want * cfg.group_size),
        "fill/zero_var_frac": float(np.mean(flat)) if flat else 1.0,
    }
    if not kept:  # nothing with a signal: the first batch, which the update then skips as it would without fill
        return groups, RewardBatch(scored.rewards, metrics)
    return kept[:want], RewardBatch(np.stack(rows[:want]), metrics)


def generate_groups(run: Run, share: Share | None = None, emit: Emit | None = None) -> list[Group]:
    """G completions of each prompt of `share` (by default this process's share of the next global batch), from the
    current weights, each group under its seed."""
    greedy_first = isinstance(run.regime, SamplingRegime) and run.regime.greedy_first  # ArenaRL's greedy anchor
    share = run.sampler.next_batch() if share is None else share
    streaming = {} if emit is None else {"emit": emit}  # a generator written before emit existed runs sync as ever
    return run.generator.generate(
        share.prompts, run.cfg.trainer.group_size, greedy_first=greedy_first, seeds=share.seeds, **streaming
    )


def learn(
    run: Run,
    step: int,
    groups: list[Group],
    scored: RewardBatch,
    t0: float,
    times: dict[str, float],
    judge_metrics: dict[str, float] | None = None,
    staleness: int = 0,
) -> tuple[dict[str, float], list[Group], np.ndarray]:
    """Advantages, update and weight sync for scored groups, and the step's metrics. `judge_metrics`: the judge's
    drained metrics when scoring ran elsewhere (the overlap worker); `staleness`: policy versions since sampling."""
    t2 = time.perf_counter()
    rewards = torch.tensor(scored.rewards, dtype=torch.float32)  # [B, G], NaN rows = dropped groups
    kept = ~torch.isnan(rewards).any(dim=1)  # [B]
    batch, empty = update_batch(run, groups, rewards, kept), not bool(kept.any())
    run.generator.sleep()  # a colocated engine frees its memory for the update
    update = run.learner.update(batch, step, empty=empty, stale=staleness > 0)
    t3 = time.perf_counter()
    sync_weights(run)
    t4 = time.perf_counter()
    lengths = torch.tensor([float(len(r.token_ids)) for g in groups for r in g.rollouts])  # [N]
    judge_metrics = {
        f"judge/{k}": v for k, v in (run.judge.drain_metrics() if judge_metrics is None else judge_metrics).items()
    }
    samples = len(lengths)
    comparisons = scored.metrics.get("reward/comparisons_per_sample", 0.0) * samples
    calls = judge_metrics.get("judge/calls", 0.0)
    metrics = {
        **reward_metrics(rewards[kept]),
        "completion/length_mean": float(lengths.mean()),
        "completion/truncated_frac": float(np.mean([r.truncated for g in groups for r in g.rollouts])),
        **scored.metrics,
        **judge_metrics,
        **update,
        "train/dropped_groups": Count((~kept).sum()),
        "train/samples_in_update": Count(kept.sum() * groups[0].size),
        "judge/calls_per_sample": calls / samples,
        "judge/calls_per_comparison": calls / comparisons if comparisons else 0.0,
        **times,
        "time/update_s": t3 - t2,
        "time/sync_s": t4 - t3,
        "time/step_s": t4 - t0,
        "throughput/tokens_per_s": float(lengths.sum()) / (t4 - t0),
        # the tokens (prompt and completion, padding left out) of the rows the update ran on: its FLOPs ≈ 6·params·this
        "throughput/update_tokens": Count(0.0 if empty else float(batch.attention_mask.sum())),
        "memory/peak_gib": peak_memory_gib(),
    }
    if run.pipeline is not None:
        metrics["pipeline/staleness"] = float(staleness)
    return metrics, groups, scored.rewards


def update_batch(run: Run, groups: list[Group], rewards: torch.Tensor, kept: torch.Tensor) -> RolloutBatch:
    """The rollouts the update runs on, with their advantages, from the groups kept [B] of `rewards` [B, G]. A
    dropped group takes no part in the update: not in the forward/backward, the loss normaliser, the KL term or
    the batch std of the advantages. No group kept: the first as a placeholder the update only runs to keep
    processes in step (scaled by 0), or skips."""
    algo, pad = run.cfg.algo, run.learner.tokenizer.pad_token_id
    kept_groups = [g for g, k in zip(groups, kept.tolist()) if k]
    if not kept_groups:
        return collate(groups[:1], torch.zeros(1, groups[0].size), pad, algo.mask_truncated)
    advantages = group_advantages(rewards[kept], algo.adv_scale, algo.std_floor)  # [B', G]
    return collate(kept_groups, advantages, pad, algo.mask_truncated)


def reward_metrics(rewards: torch.Tensor) -> dict[str, float]:
    """The kept groups' rewards [B', G]: mean, spread, and the share of groups without spread (no signal); NaN,
    NaN and 1 when no group was kept."""
    if not rewards.numel():
        return {"reward/mean": float("nan"), "reward/std": float("nan"), "reward/zero_var_frac": 1.0}
    return {
        "reward/mean": float(rewards.mean()),
        "reward/std": float(rewards.std(correction=0)),
        "reward/zero_var_frac": float((rewards.std(dim=1, correction=0) == 0).float().mean()),
    }


def overlap_step(run: Run, step: int) -> tuple[dict[str, float], list[Group], np.ndarray]:
    """One step of trainer.pipeline=overlap (tsrl/training/pipeline.py): generate the next groups while the
    judge scores this step's, hand the next to the judge, then update on this step's."""
    pipe, last = run.pipeline, step == run.cfg.trainer.max_steps
    t0 = time.perf_counter()
    if pipe.in_flight is None:  # the first step (or a resume without groups in flight): nothing scored ahead
        pipe.submit(generate_groups(run), version=step - 1, noise=step_stream(step))
    upcoming = None if last else generate_groups(run)  # from θ_{step−1}, trained on at step + 1 from θ_step
    t1 = time.perf_counter()
    done = pipe.collect()
    t2 = time.perf_counter()
    if upcoming is not None and budget_left(run, done.judge_metrics.get("calls", 0.0)):
        pipe.submit(upcoming, version=step - 1, noise=step_stream(step + 1))
    times = {"time/generate_s": t1 - t0, "time/score_s": done.score_s, "time/score_wait_s": t2 - t1}
    return learn(run, step, done.groups, done.batch, t0, times, done.judge_metrics, (step - 1) - done.version)


def budget_left(run: Run, calls_now: float) -> bool:
    """Whether the run's training calls, this step's included (over every process), leave trainer.max_judge_calls
    unspent: the next groups are only handed to the judge while they do."""
    cap = run.cfg.trainer.max_judge_calls
    if not cap:
        return True
    calls = sum(d["calls"] for d in gather(run.accelerator, {"calls": calls_now}))
    return run.training_calls + calls < cap


def offline_step(run: Run, step: int) -> tuple[dict[str, float], list[Group], np.ndarray]:
    """One step of an offline baseline (algo=sft | dpo): the sampler's prompts with their ladder's anchors as
    the rollouts (tsrl/training/offline.py), then the same update; no generation, no judge call."""
    algo = run.cfg.algo
    t0 = time.perf_counter()
    ladders = offline_ladders(algo, run.regime)  # the k anchors of the ladder reward, or all K (algo.anchors)
    tok, share = run.learner.tokenizer, run.sampler.next_batch()  # DPO's pairs drawn per prompt, by its group seed
    groups = [g for p, s in zip(*share) for g in offline_groups(algo, [p], ladders, tok, np.random.default_rng(s))]
    weights = torch.full((sum(g.size for g in groups),), algo.ANCHOR_ADVANTAGE)  # [N] SFT imitates; DPO ignores it
    batch = collate(groups, weights, run.learner.tokenizer.pad_token_id)
    run.generator.sleep()  # a colocated engine frees its memory for the update, as in `learn`; sync_weights wakes it
    update = run.learner.update(batch, step)
    t1 = time.perf_counter()
    sync_weights(run)
    t2 = time.perf_counter()
    lengths = batch.completion_mask.sum(dim=1)  # [N]
    metrics = {
        "reward/mean": float("nan"),
        "completion/length_mean": float(lengths.mean()),
        **update,
        "judge/calls": Count(0.0),
        "train/samples_in_update": Count(len(batch)),
        "time/update_s": t1 - t0,
        "time/sync_s": t2 - t1,
        "time/step_s": t2 - t0,
        "throughput/tokens_per_s": float(lengths.sum()) / (t2 - t0),
        "memory/peak_gib": peak_memory_gib(),
    }
    return metrics, [], np.zeros((0, 0))


def peak_memory_gib() -> float:
    """This process's peak memory so far: allocated GPU memory on CUDA, else the peak resident set (RSS)."""
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**30
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def sync_weights(run: Run) -> None:
    """A generator that slept through the update takes back its weights' memory, gets the policy's new weights (a
    no-op for the hf generator, which shares the module), then takes back its KV cache: the cache is allocated
    only once the sync's own buffers are gone, as TRL and verl order it."""
    run.generator.wake_up(("weights",))
    run.generator.load_weights(run.learner.weights_for_sync())
    run.generator.wake_up(("kv_cache",))


def train(cfg: RunConfig) -> dict[str, Any]:
    """Run the whole training job; returns the held-out headline number (win-rate or pass ratio) at start and end."""
    quiet_libraries()
    task = build_task(cfg.task)
    done = finished_run(Path(cfg.run_dir), cfg.trainer)
    if done is not None:  # resume=auto of a run that already finished (tsrl-reproduce re-running a grid)
        key, label = headline(task)
        return {
            "run_dir": cfg.run_dir,
            "main_process": int(os.environ.get("RANK", "0")) == 0,
            "headline": label,
            "heldout_start": done["start"].get(key),
            "heldout_end": done["latest"].get(key),
            "repeated_start": done["start"].get("repeated_bigrams"),
            "repeated_end": done["latest"].get("repeated_bigrams"),
            "already_done": True,
        }
    say_spend(cfg, task)  # before any judge call: what the run will ask, stopped here if its setup is over the cap
    judge, eval_judge = open_judges(cfg, task)  # an unusable judge stops the run before any model is built
    try:
        run = setup(cfg, task, judge, eval_judge)
        try:
            run_steps(run)
        finally:  # before the judges close: the scoring worker may still hold a batch
            for worker in (run.pipeline, run.streamer):
                if worker is not None:
                    worker.close()
        run.generator.close()  # last: vLLM's shutdown also ends the process group
    finally:  # every exit, setup's too (a judge dead during the ladder build, Ctrl-C): connections, loop, cache
        close_judge(judge)
        close_judge(eval_judge)
    evals, (key, label) = run.log.evals, headline(task)
    return {
        "run_dir": cfg.run_dir,
        "main_process": run.accelerator.is_main_process,
        "headline": label,
        "heldout_start": evals[0][key] if evals else None,
        "heldout_end": evals[-1][key] if evals else None,
        "repeated_start": evals[0].get("repeated_bigrams") if evals else None,
        "repeated_end": evals[-1].get("repeated_bigrams") if evals else None,
    }


def run_steps(run: Run) -> None:
    """Evaluate at the start, then step, log, evaluate and checkpoint until trainer.max_steps."""
    from tqdm import tqdm

    acc, tcfg, log = run.accelerator, run.cfg.trainer, run.log
    offline = run.cfg.algo.OFFLINE  # algo=sft | dpo: anchors of the ranked ladder, no sampling
    if acc.is_main_process:
        (Path(run.cfg.run_dir) / DONE_FILE).unlink(missing_ok=True)  # until this run reaches its end
    if run.start_step == 0:
        log.log_eval(0, *evaluate(run, 0))
    # advanced by hand after each step's fields: a bar over the range would stop one short on the break below
    with tqdm(
        initial=run.start_step, total=tcfg.max_steps, disable=not acc.is_main_process, desc="tsrl", dynamic_ncols=True
    ) as bar:  # closed on every exit, so that what follows a stop starts on a line of its own
        for step in range(run.start_step + 1, tcfg.max_steps + 1):
            before = capture_rng(), trainer_state(run, step - 1)  # what a checkpoint of the last finished step holds
            try:
                step_fn = offline_step if offline else overlap_step if run.pipeline is not None else train_step
                metrics, groups, rewards = step_fn(run, step)
            except UserError as err:  # e.g. the judge budget is spent or the judge is down: keep every finished step
                restore_rng(before[0])
                raise stopped_cleanly(run, before[1], err) from err
            metrics = reduce_metrics(acc, metrics)
            run.judge_calls_total += metrics["judge/calls"]
            run.training_calls += metrics["judge/calls"]
            metrics["judge/calls_total"] = run.judge_calls_total
            spent = bool(tcfg.max_judge_calls) and run.training_calls >= tcfg.max_judge_calls
            last = step == tcfg.max_steps or spent
            log.log_step(step, metrics)
            log.log_samples(step, groups, rewards)
            if last or (tcfg.eval.every and step % tcfg.eval.every == 0):
                try:
                    log.log_eval(step, *evaluate(run, step))  # its own RNG: training's is untouched
                except UserError as err:
                    raise stopped_cleanly(run, trainer_state(run, step), err) from err
            if last or (tcfg.checkpoint.every and step % tcfg.checkpoint.every == 0):
                save_checkpoint(
                    acc,
                    run.learner,
                    checkpoint_dir(Path(run.cfg.run_dir), step),
                    trainer_state(run, step),
                    tcfg.checkpoint.keep,
                )
            heldout = log.evals[-1][headline(run.task)[0]] if log.evals else float("nan")
            bar.set_postfix(bar_fields(metrics, heldout, offline), refresh=False)
            bar.update()
            if last:
                if acc.is_main_process:
                    mark_finished(Path(run.cfg.run_dir), tcfg, step, "max_judge_calls" if spent else "max_steps")
                break
    log.close()
