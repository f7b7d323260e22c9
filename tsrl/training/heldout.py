"""Held-out evaluation during training: the task's metric on its eval prompts, at the start, every
trainer.eval.every steps and at the end of a run (tsrl/training/loop.py), with every held-out generation for
heldout.jsonl. It draws from its own seeds, so training's RNG does not move."""

from __future__ import annotations

import time

from tsrl.evaluation import evaluation_summary, heldout_rows
from tsrl.evaluation.chunks import ChunkPlan, chunk_size, chunked_sums, ordered_total
from tsrl.training.collective import gather
from tsrl.training.setup import Run


def evaluate(run: Run, step: int) -> tuple[dict[str, float], list[dict]]:
    """The task's held-out metric (win-rate or pass ratio@n) and every held-out generation as heldout.jsonl rows,
    in prompt order. The prompts are generated in fixed chunks, each under a seed of its own and shared round-robin
    between the processes (tsrl.evaluation.chunks): one process and several give the same samples and the same
    number, and training's RNG does not move. The result's time_s is the evaluation's wall-clock on this process
    (what tsrl/wallclock.py estimates later runs by)."""
    start = time.perf_counter()
    acc, cfg = run.accelerator, run.cfg.trainer.eval
    prompts = run.task.prompts("eval")
    prompts = prompts[: cfg.max_prompts] if cfg.max_prompts else prompts
    plan = ChunkPlan(cfg.samples, cfg.seed, chunk_size(run.cfg.generator), acc.process_index, acc.num_processes)
    chunks = [
        (c.index, c.sums, heldout_rows(step, c.groups))
        for c in chunked_sums(run.task, run.generator, run.eval_judge, prompts, plan)
    ]
    if acc.num_processes > 1:
        from accelerate.utils import gather_object

        chunks = gather_object(chunks)
    chunks.sort(key=lambda chunk: chunk[0])
    result = evaluation_summary(run.task, ordered_total([(index, sums) for index, sums, _ in chunks]), cfg.samples)
    result["judge_calls"] = sum(d["calls"] for d in gather(acc, run.eval_judge.drain_metrics()))
    result["time_s"] = time.perf_counter() - start
    return result, [row for _, _, rows in chunks for row in rows]
