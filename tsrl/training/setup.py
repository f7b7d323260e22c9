"""Building a run: the judges first (an unusable one stops the run before any model is built), then the
accelerator, the anchors the reward needs, the cheap checks, the policy, the generator, the regime, the pipeline
workers, and a resumed checkpoint's state. `Run` holds what the loop (tsrl/training/loop.py) steps with."""

from __future__ import annotations

import json
import logging
import os
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from tsrl.algo import inert_clip_warning
from tsrl.config import RunConfig
from tsrl.generation import Generator, HFGenerator, build_generator
from tsrl.judging import (
    Judge,
    build_judge,
    close_judge,
    eval_judge_config,
    judge_fingerprint,
    judge_identity,
    set_noise_stream,
)
from tsrl.registry import REWARDS
from tsrl.rewards import RegimeContext, RewardRegime, StatefulRegime, build_regime
from tsrl.rewards.ladder_step import prepare_ladder
from tsrl.rewards.spend import check_setup, estimate_run
from tsrl.tasks import Task
from tsrl.training.checkpoint import STATE_FILE, find_resume, load_checkpoint
from tsrl.training.collective import AccelerateCollective, gather
from tsrl.training.learner import Learner
from tsrl.training.logs import RunLog
from tsrl.training.memory import check_memory
from tsrl.training.offline import check_offline
from tsrl.training.pipeline import Overlap, Streamer, check_pipeline, decode_groups
from tsrl.training.sampler import PromptSampler


@dataclass
class Run:
    """Everything the step needs, built once by `setup`."""

    cfg: RunConfig
    accelerator: Any
    task: Task
    learner: Learner
    generator: Generator
    judge: Judge
    eval_judge: Judge
    regime: RewardRegime
    sampler: PromptSampler
    log: RunLog
    start_step: int
    judge_calls_total: float  # every judge call of the run so far, ladder building included
    training_calls: float = 0.0  # the judge calls of the training steps alone (trainer.max_judge_calls)
    pipeline: Overlap | None = None  # trainer.pipeline=overlap: the scoring worker
    streamer: Streamer | None = None  # trainer.pipeline=stream: the worker that scores groups as they are generated


def open_judges(cfg: RunConfig, task: Task) -> tuple[Judge, Judge]:
    """The training and evaluation judges. Built before anything else of the run: a judge that cannot answer
    (openai: an endpoint that is unreachable or does not serve the model) stops the run here, with one sentence."""
    judge = build_judge(cfg.judge, task)
    try:
        return judge, build_judge(eval_judge_config(cfg), task)
    except BaseException:
        close_judge(judge)
        raise


def setup(cfg: RunConfig, task: Task, judge: Judge, eval_judge: Judge) -> Run:
    """Build every other component, prepare them with accelerate, and resume if asked."""
    from accelerate import Accelerator
    from accelerate.utils import InitProcessGroupKwargs, set_seed

    warning = inert_clip_warning(cfg.algo)
    if warning:
        logging.getLogger("tsrl").warning(warning)

    handlers = []
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # on CPU, gloo: otherwise every rank thinks it is rank 0 of 1
        handlers.append(InitProcessGroupKwargs(backend="nccl" if torch.cuda.is_available() else "gloo"))
    acc = Accelerator(kwargs_handlers=handlers)
    set_seed(cfg.seed, device_specific=True)
    check_memory(cfg, acc, task)  # on a GPU: print the memory plan, refuse a run that cannot fit
    configured = cfg.task  # the policy's data: the ladder step's anchors are the policy's own samples
    with acc.main_process_first():  # the ladder step: the main process writes missing anchors, the others read them
        cfg, task = prepare_ladder(cfg, task)
    REWARDS.check(cfg.reward, task)  # cheap checks (anchors per prompt against reward.k) before the policy is built
    run_dir = Path(cfg.run_dir)
    learner = Learner.build(cfg, acc, configured)
    fingerprint = judge_fingerprint(cfg.judge)
    generator = build_generator(
        cfg.generator, learner.module, learner.tokenizer, [*task.prompts("train"), *task.prompts("eval")]
    )
    if isinstance(generator, HFGenerator):  # it decodes with the policy's module: under ZeRO-3 gathered per call
        generator.whole_model = learner.whole_model
    generator.load_weights(learner.weights_for_sync())  # an engine of its own starts from the policy's weights
    # Not under main_process_first: building a regime may run collective steps (a ZeRO-3 forward pass); the
    # regimes themselves let the main process judge and store ladders first (RegimeContext.collective).
    regime = build_regime(
        cfg.reward,
        RegimeContext(
            task,
            judge,
            fingerprint,
            run_dir,
            model=learner.policy_view(),
            tokenizer=learner.tokenizer,
            generator=generator,
            collective=AccelerateCollective(acc),
        ),
    )
    if cfg.algo.OFFLINE:
        check_offline(cfg.algo, regime, cfg.trainer.micro_batch_size)
    pipeline = streamer = None
    if cfg.trainer.pipeline != "sync":
        check_pipeline(cfg.trainer.pipeline, REWARDS.of(cfg.reward).name, regime, cfg.algo.OFFLINE)
    if cfg.trainer.pipeline == "overlap":
        pipeline = Overlap(regime.score, judge.drain_metrics, lambda noise: set_noise_stream(judge, *noise))
    elif cfg.trainer.pipeline == "stream":
        streamer = Streamer(regime)
    setup_calls = sum(d["calls"] for d in gather(acc, judge.drain_metrics()))  # e.g. the ladder round-robin
    sampler = PromptSampler(
        task.prompts("train"), cfg.trainer.prompts_per_step, cfg.seed, acc.process_index, acc.num_processes
    )
    resume_from = find_resume(run_dir, cfg.trainer.checkpoint.resume)
    start_step, calls_total, training_calls = 0, setup_calls, 0.0
    if resume_from is not None:
        state = load_checkpoint(acc, resume_from)
        start_step, calls_total = state["step"], state["judge_calls_total"] + setup_calls
        training_calls = state.get("judge_calls_training", 0.0)
        sampler.load_state_dict(state["sampler"])
        if isinstance(regime, StatefulRegime) and state.get("regime") is not None:  # step counts, sampled ladders
            regime.load_state_dict(state["regime"])
        if pipeline is not None and state.get("pending"):  # the groups that were being scored: scored again
            # trained on at the next step, whose noise stream they draw from as they did before the stop
            noise = ("train", start_step + 1, acc.process_index)
            pipeline.submit(*decode_groups(state["pending"], task.prompts("train")), noise=noise)
        generator.load_weights(learner.weights_for_sync())  # the resumed weights
    log = RunLog(
        run_dir,
        cfg.logger,
        asdict(cfg),
        start_step if resume_from else None,
        acc.is_main_process,
        eval_judge=judge_identity(eval_judge_config(cfg)),
    )
    if acc.is_main_process:
        (run_dir / "setup.json").write_text(
            json.dumps({"judge_calls_setup": setup_calls, "resumed_from": str(resume_from) if resume_from else None})
        )
    return Run(
        cfg,
        acc,
        task,
        learner,
        generator,
        judge,
        eval_judge,
        regime,
        sampler,
        log,
        start_step,
        calls_total,
        training_calls,
        pipeline,
        streamer,
    )


def quiet_libraries() -> None:
    """Keep the console to tsrl's own progress bar: no per-shard bars or INFO chatter from libraries."""
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    for name in ("accelerate", "huggingface_hub", "DeepSpeed", "deepspeed"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # DeepSpeed 0.19 calls collectives torch has renamed; the warning repeats on every step and every process.
    warnings.filterwarnings("ignore", category=FutureWarning, module="torch.distributed")


def say_spend(cfg: RunConfig, task: Any) -> None:
    """Print the run's judge calls (setup, per step, evaluation, whole run; dollars where priced) on the main
    process, and stop the run, before anything is asked, when its setup would pass judge.max_setup_calls."""
    resume = find_resume(Path(cfg.run_dir), cfg.trainer.checkpoint.resume)
    done = json.loads((resume / STATE_FILE).read_text())["step"] if resume is not None else 0
    spend = estimate_run(cfg, task, start_step=done)  # a resumed run: the steps and evaluations still to come
    if int(os.environ.get("RANK", "0")) == 0:
        print("\n".join(spend.lines()), flush=True)
    check_setup(spend, cfg.judge.max_setup_calls)
