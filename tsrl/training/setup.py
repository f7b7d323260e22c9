"""Building a run: the judges first (an unusable one stops the run before any model is built), then the
accelerator, the anchors the reward needs, the cheap checks, the policy, the generator, the regime, the pipeline
workers, and a resumed checkpoint's state (trainer_state writes one). `Run` holds what the loop (loop.py) steps with."""

from __future__ import annotations

import json
import logging
import os
import platform
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from tsrl.algo import inert_clip_warning
from tsrl.anchors.step import estimate_run, prepare_ladder, step_prompts
from tsrl.config import RunConfig
from tsrl.errors import UserError
from tsrl.generation import Generator, HFGenerator, build_generator
from tsrl.judging import (
    Deferred,
    Judge,
    Ranked,
    build_judge,
    close_judge,
    eval_judge_config,
    judge_fingerprint,
    judge_identity,
    ranking_judge_config,
    run_allowances,
    set_noise_stream,
    step_stream,
)
from tsrl.models import pending_build
from tsrl.registry import REWARDS
from tsrl.rewards import RegimeContext, RewardRegime, StatefulRegime, build_regime
from tsrl.rewards.base import Collective
from tsrl.rewards.ladder import LadderConfig
from tsrl.spend import check_caps, check_setup
from tsrl.tasks import Task
from tsrl.training.checkpoint import (
    STATE_FILE,
    checkpoint_dir,
    find_resume,
    load_checkpoint,
    pending_groups,
    save_checkpoint,
)
from tsrl.training.collective import AccelerateCollective, gather
from tsrl.training.learner import Learner
from tsrl.training.logs import RunLog
from tsrl.training.memory import check_memory
from tsrl.training.offline import check_offline
from tsrl.training.pipeline import Overlap, Streamer, check_pipeline, decode_groups, encode_groups
from tsrl.training.sampler import PromptSampler
from tsrl.wallclock import measured, wallclock_line


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
    (openai: an endpoint that is unreachable or does not serve the model) stops the run here, with one sentence.
    The training judge carries the judge that ranks the anchor ladders when that is another one (`Ranked`). Every
    judge asking the training judge's endpoint counts against judge.budget's run caps (`run_allowances`)."""
    allowance = run_allowances(cfg)
    judge = build_judge(cfg.judge, task, cfg.seed, allowance(cfg.judge))
    try:
        judge = with_ranking_judge(cfg, task, judge, allowance)
        evaluation = eval_judge_config(cfg)
        return judge, build_judge(evaluation, task, cfg.seed, allowance(evaluation))
    except BaseException:
        close_judge(judge)
        raise


def with_ranking_judge(cfg: RunConfig, task: Task, judge: Judge, allowance: Callable[[Any], Any]) -> Judge:
    """`judge`, beside the judge ladder.judge names to rank the anchor ladders when that one's verdicts differ
    (built on its first question, so a regime that ranks no anchors never opens it; its calls counted against
    `allowance(its config)`); says which ranks them."""
    ranking = ranking_judge_config(cfg)
    fingerprint = judge_fingerprint(ranking)
    if ranks_anchors(cfg.reward):
        say_ranking_judge(cfg)
    if fingerprint == judge_fingerprint(cfg.judge):
        return judge
    return Ranked(judge, Deferred(lambda: build_judge(ranking, task, cfg.seed, allowance(ranking))), fingerprint)


def regime_context(cfg: RunConfig, task: Task, judge: Judge, **policy: Any) -> RegimeContext:
    """The context a run's regime is built in: the training judge, the judge that ranks the anchor ladders (the
    `Ranked` judge's, else the training judge itself) and what `policy` gives (model, tokenizer, generator,
    collective)."""
    ranked = isinstance(judge, Ranked)
    return RegimeContext(
        task,
        judge,
        judge_fingerprint(cfg.judge),
        Path(cfg.run_dir),
        rank_judge=judge.ranking if ranked else None,
        rank_fingerprint=judge.fingerprint if ranked else "",
        **policy,
    )


def ranks_anchors(reward: Any) -> bool:
    """Whether a reward config ranks anchor ladders (the ladder regimes, and those holding a ladder's settings)."""
    return isinstance(reward, LadderConfig) or isinstance(getattr(reward, "ladder", None), LadderConfig)


def say_ranking_judge(cfg: RunConfig) -> None:
    """Say, where the training judge is noisy or weak, which judge ranks the anchor ladders and the switch."""
    noisy, weak = cfg.judge.flip_prob > 0, cfg.distinct_judges
    if not (noisy or weak):
        return
    as_is = (
        f"the noisy training judge (judge.flip_prob={cfg.judge.flip_prob:g})" if noisy else "the weak training judge"
    )
    if cfg.ladder.judge == "train":
        logging.getLogger("tsrl").warning(
            "ladder.judge=train: the anchor ladders are ranked by %s, so they differ from the clean run's and a "
            "noise or judge grid varies its anchors too; ladder.judge=clean ranks them with the clean judge and "
            "holds them fixed",
            as_is,
        )
        return
    clean = "the strong evaluation judge" if weak else "the training judge without its injected noise"
    logging.getLogger("tsrl").info(
        "ladder: the anchor ladders are ranked by %s, the clean run's ladders; %s acts on the training verdicts "
        "only (ladder.judge=train ranks them with %s)",
        clean,
        "the weak judge" if weak else "the injected noise",
        as_is,
    )


def setup(cfg: RunConfig, task: Task, judge: Judge, eval_judge: Judge) -> Run:
    """Build every other component, prepare them with accelerate, and resume if asked."""
    from accelerate import Accelerator
    from accelerate.utils import set_seed

    warning = inert_clip_warning(cfg.algo)
    if warning:
        logging.getLogger("tsrl").warning(warning)

    acc = Accelerator(kwargs_handlers=process_group_kwargs(cfg.trainer.collective_timeout_s))
    set_seed(cfg.seed, device_specific=True)
    check_memory(cfg, acc, task)  # on a GPU: print the memory plan, refuse a run that cannot fit
    collective = AccelerateCollective(acc)
    cfg, task, learner, generator = build_policy(cfg, task, acc, collective)
    run_dir = Path(cfg.run_dir)
    # Building a regime may run collective steps (a ZeRO-3 forward pass) and shares its judging between the
    # processes (RegimeContext.collective): every process builds it.
    policy = {"model": learner.policy_view(), "tokenizer": learner.tokenizer, "generator": generator}
    regime = build_regime(cfg.reward, regime_context(cfg, task, judge, collective=collective, **policy))
    if cfg.algo.OFFLINE:
        check_offline(cfg.algo, regime, cfg.trainer.micro_batch_size)
    pipeline, streamer = scoring_workers(cfg, judge, regime)
    setup_calls = sum(d["calls"] for d in gather(acc, judge.drain_metrics()))  # e.g. the ladder round-robin
    sampler = PromptSampler(
        task.prompts("train"), cfg.trainer.prompts_per_step, cfg.seed, acc.process_index, acc.num_processes
    )
    resume_from = find_resume(run_dir, cfg.trainer.checkpoint.resume)
    state = load_checkpoint(acc, resume_from) if resume_from is not None else {}
    start_step = state.get("step", 0)
    log = RunLog(
        run_dir,
        cfg.logger,
        asdict(cfg),
        start_step if resume_from else None,
        acc.is_main_process,
        eval_judge=judge_identity(eval_judge_config(cfg)),
    )
    if acc.is_main_process:
        resumed = str(resume_from) if resume_from else None
        (run_dir / "setup.json").write_text(
            json.dumps({"judge_calls_setup": setup_calls, "resumed_from": resumed, "machine": machine_record()})
        )
    calls_total = state.get("judge_calls_total", 0.0) + setup_calls
    parts = (cfg, acc, task, learner, generator, judge, eval_judge, regime, sampler, log)
    run = Run(*parts, start_step, calls_total, state.get("judge_calls_training", 0.0), pipeline, streamer)
    if state:
        restore(run, state)
    return run


def machine_record() -> dict[str, Any]:
    """Where the run ran, for setup.json: torch's CPU kernels differ between CPUs, so the same recipe and code build
    a different tiny policy on another CPU (another step-0 score), and tsrl-reproduce names the machines of runs
    it will not compare. The CPU's model name comes from /proc/cpuinfo where readable, else platform.processor()."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name") and ":" in line]
    return {
        "cpu": names[0] if names else platform.processor(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "platform": platform.machine(),
    }


def build_policy(cfg: RunConfig, task: Task, acc: Any, collective: Collective) -> tuple[RunConfig, Task, Learner, Any]:
    """The learner and the generator, and the ladder step's anchors (tsrl/anchors/step.py): a step that
    only reads data runs before the policy is built; one that writes anchors with the policy runs after, with the
    run's own generator on every process. Returns the config and task with the anchors the reward needs."""
    configured = cfg.task  # the policy's data: the ladder step's anchors are the policy's own samples
    step_asks = step_prompts(cfg, task)  # the ladder step's instructed prompts, when the policy writes anchors
    if not step_asks:
        cfg, task = prepare_ladder(cfg, task, collective=collective)
        REWARDS.check(cfg.reward, task)  # cheap checks (anchors per prompt against reward.k)
    learner = Learner.build(cfg, acc, configured)
    prompts = [*task.prompts("train"), *task.prompts("eval"), *step_asks]  # an engine sizes its context by them
    generator = build_generator(cfg.generator, learner.module, learner.tokenizer, prompts)
    if isinstance(generator, HFGenerator):  # it decodes with the policy's module: under ZeRO-3 gathered per call
        generator.whole_model = learner.whole_model
    generator.load_weights(learner.weights_for_sync())  # an engine of its own starts from the policy's weights
    if step_asks:
        cfg, task = prepare_ladder(cfg, task, generator, collective)
        REWARDS.check(cfg.reward, task)
    return cfg, task, learner, generator


def scoring_workers(cfg: RunConfig, judge: Judge, regime: RewardRegime) -> tuple[Overlap | None, Streamer | None]:
    """trainer.pipeline's worker: overlap scores a step's groups while the next are generated, stream scores each
    group as it is generated; sync has none."""
    if cfg.trainer.pipeline == "sync":
        return None, None
    check_pipeline(cfg.trainer.pipeline, REWARDS.of(cfg.reward).name, regime, cfg.algo.OFFLINE)
    if cfg.trainer.pipeline == "overlap":
        return Overlap(regime.score, judge.drain_metrics, lambda noise: set_noise_stream(judge, *noise)), None
    return None, Streamer(regime)


def restore(run: Run, state: dict[str, Any]) -> None:
    """A resumed run's sampler position, regime state (step counts, sampled ladders), groups in flight (scored
    again) and the resumed weights in the generator."""
    acc = run.accelerator
    run.sampler.load_state_dict(state["sampler"])
    if isinstance(run.regime, StatefulRegime) and state.get("regime") is not None:
        run.regime.load_state_dict(state["regime"])
    pending = pending_groups(state, acc.process_index, acc.num_processes) if run.pipeline is not None else None
    if pending:  # the groups this process was scoring: trained on at the next step, whose noise stream they draw
        noise = step_stream(run.start_step + 1)  # from as they did before the stop
        run.pipeline.submit(*decode_groups(pending, run.task.prompts("train")), noise=noise)
    run.generator.load_weights(run.learner.weights_for_sync())


def trainer_state(run: Run, step: int) -> dict[str, Any]:
    """The trainer_state.json of a checkpoint at `step` (copied: later steps cannot change it)."""
    regime = run.regime.state_dict() if isinstance(run.regime, StatefulRegime) else None
    in_flight = run.pipeline.in_flight if run.pipeline is not None else None
    return json.loads(
        json.dumps(
            {
                "step": step,
                "sampler": run.sampler.state_dict(),
                "judge_calls_total": run.judge_calls_total,
                "judge_calls_training": run.training_calls,
                "regime": regime,
                "pending": encode_groups(*in_flight) if in_flight else None,
            }
        )
    )


def stopped_cleanly(run: Run, state: dict[str, Any], err: UserError) -> UserError:
    """Save what the run has finished before a stop that needs the user (a spent judge budget, a dead judge):
    a checkpoint of the last finished step, exactly as the periodic one would be (state and RNG from before
    the failed step), the logs and the plot. Returns the error to raise: the cause, then where to resume."""
    acc, step = run.accelerator, state["step"]
    run.log.close()
    if step <= run.start_step:
        return type(err)(f"{err} No step finished since the start; nothing new to save.")
    if acc.num_processes > 1:  # the failure may have hit one rank only: a collective save could hang
        return type(err)(f"{err} Multi-process run: the newest periodic checkpoint is the place to resume from.")
    path = checkpoint_dir(Path(run.cfg.run_dir), step)
    if not path.is_dir():
        save_checkpoint(acc, run.learner, path, state, run.cfg.trainer.checkpoint.keep)
    return type(err)(
        f"{err} Steps 1–{step} are saved in {path}; after the fix, the same command with "
        "trainer.checkpoint.resume=auto continues from there."
    )


def process_group_kwargs(timeout_s: int) -> list[Any]:
    """accelerate's process-group settings for a launch of several processes: gloo on CPU (otherwise every rank
    thinks it is rank 0 of 1), and trainer.collective_timeout_s, said once, for the waits at collectives."""
    from accelerate.utils import InitProcessGroupKwargs

    if int(os.environ.get("WORLD_SIZE", "1")) < 2:
        return []
    if int(os.environ.get("RANK", "0")) == 0:
        logging.getLogger("tsrl").info(
            "processes: %s; each waits up to %d s for the others at a collective (trainer.collective_timeout_s)",
            os.environ["WORLD_SIZE"],
            timeout_s,
        )
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    return [InitProcessGroupKwargs(backend=backend, timeout=timedelta(seconds=timeout_s))]


def quiet_libraries() -> None:
    """Keep the console to tsrl's own progress bar: no per-shard bars or INFO chatter from libraries."""
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    for name in ("accelerate", "huggingface_hub", "DeepSpeed", "deepspeed"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # DeepSpeed 0.19 calls collectives torch has renamed; the warning repeats on every step and every process.
    warnings.filterwarnings("ignore", category=FutureWarning, module="torch.distributed")


def time_lines(cfg: RunConfig, spend: Any) -> list[str]:
    """The start message's wall-clock estimate, from earlier runs beside this one (tsrl/wallclock.py), and
    what must be built before the first step."""
    folder = Path(cfg.run_dir).resolve().parent
    pace = measured(folder, cfg)
    lines = [wallclock_line(pace, spend.steps, spend.evaluations, folder)]
    build = pending_build(cfg.model, cfg.task)
    return [*lines, f"  to build first: {build}"] if build else lines


def say_spend(cfg: RunConfig, task: Any) -> None:
    """Print the run's judge calls (setup, per step, evaluation, whole run; dollars where priced; the run caps), its
    wall-clock estimate and what it must build first on the main process, and stop the run, before anything is
    asked, when its setup would pass judge.max_setup_calls or its estimate a run cap of judge.budget (unless
    judge.budget.allow_partial)."""
    resume = find_resume(Path(cfg.run_dir), cfg.trainer.checkpoint.resume)
    done = json.loads((resume / STATE_FILE).read_text())["step"] if resume is not None else 0
    spend = estimate_run(cfg, task, start_step=done)  # a resumed run: the steps and evaluations still to come
    if int(os.environ.get("RANK", "0")) == 0:
        print("\n".join([*spend.lines(), *time_lines(cfg, spend)]), flush=True)
    check_setup(spend, cfg.judge.max_setup_calls)
    check_caps(spend, cfg, int(os.environ.get("WORLD_SIZE", "1")))
