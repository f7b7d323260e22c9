"""tsrl-train's ladder step (RunConfig.ladder): tsrl-ladder's builders, run before training when the training prompts
have fewer anchors than the reward needs.

Whether anchors are written at all is `short_prompts`' decision, taken on the data alone before anything is built or
asked: only when asked (ladder.build=policy|endpoint) or, with ladder.build=auto, on data with at most one reference
per prompt (WebSight, MentalChat16K, MWAHAHA: the datasets this step exists for). Anchors written by the policy are
not the task's, so data with ladders of its own (humor's 10 a prompt) never gets them unasked: a reward.k above
what it has stops the run in one sentence naming both numbers and the ways out. `estimate_run` is the spend preview
of a run about to start (tsrl/spend.py's `estimate`) with the anchors this step will write counted.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from tsrl.anchors.build import (
    DEFAULT_TIERS,
    BuildSettings,
    from_endpoint,
    from_generator,
    requests_for,
    write_anchors,
)
from tsrl.errors import UserError
from tsrl.generation.seeds import derived_seed
from tsrl.rewards.base import Collective, SingleProcess, share
from tsrl.rewards.ladder import LadderConfig
from tsrl.rewards.listwise import ListwiseConfig
from tsrl.rewards.reward_model import RewardModelConfig
from tsrl.spend import Spend, estimate
from tsrl.tasks import build_task
from tsrl.tasks.base import task_metric
from tsrl.types import Anchor, Prompt

STEP_FILE = "ladder_anchors.jsonl"
LADDER_STEP_SEED = 1  # the ladder step's stream of sampling seeds (tsrl.generation.seeds.derived_seed)
log = logging.getLogger("tsrl")


def anchors_needed(reward: Any) -> int:
    """Anchors per training prompt the reward regime reads from the data: reward.k for the ladder regimes,
    reward.anchors for the listwise ladder, 2 for a reward model trained on the ladder's pairs, 0 for a regime
    without data anchors (self_bootstrap samples its own)."""
    if isinstance(reward, LadderConfig):
        return reward.k
    if isinstance(reward, ListwiseConfig):
        return reward.anchors
    return 2 if isinstance(reward, RewardModelConfig) else 0


def step_settings(step: Any, needed: int, prompts: Sequence[Prompt]) -> BuildSettings:
    """tsrl-ladder's build settings for the step: its writer resolved (ladder.build=policy|endpoint, else
    ladder.source), and with ladder.samples=0 the fewest samples per tier × style that give every prompt `needed`
    anchors next to its own."""
    chosen = step.build if step.build in ("policy", "endpoint") else step.source
    source = chosen if chosen != "auto" else ("endpoint" if step.endpoint.base_url else "policy")
    tiers = dict(step.tiers) or dict(DEFAULT_TIERS)
    per_sample = len(tiers) * max(len(step.styles), 1)
    missing = max(needed - min(len(p.anchors) for p in prompts), 1)
    samples = step.samples or -(-missing // per_sample)
    return BuildSettings(source=source, tiers=tiers, styles=list(step.styles), samples=samples)


def short_prompts(cfg: Any, task: Any) -> tuple[int, list[Prompt]]:
    """The anchors per training prompt the reward needs and the prompts short of them, when tsrl-train may write
    the missing ones (ladder.build=policy|endpoint, or auto on data with at most one reference per prompt); a
    UserError naming both numbers and the ways out otherwise. Reads data only: nothing is built or asked."""
    needed, prompts = anchors_needed(cfg.reward), task.prompts("train")
    short = [p for p in prompts if len(p.anchors) < needed]
    if not short:
        return needed, []
    first = f"prompt {short[0].id!r} of task {task.name} has {len(short[0].anchors)}"
    listwise = isinstance(cfg.reward, ListwiseConfig)
    setting = "reward.k" if isinstance(cfg.reward, LadderConfig) else "reward.anchors" if listwise else ""
    what = f"{setting}={needed}" if setting else "the reward model's ladder"
    fewest, most = min(len(p.anchors) for p in prompts), max(len(p.anchors) for p in prompts)
    lower = f"lower {setting} to at most {fewest}" if fewest and setting else "choose another reward"
    if cfg.ladder.build == "off" or (cfg.ladder.build == "auto" and most > 1):
        why = (
            "ladder.build=off"
            if cfg.ladder.build == "off"
            else "the task's data has its own anchors, so ladder.build=auto writes none"
        )
        writers = (
            "ladder.build=auto: the data has one reference per prompt"
            if most <= 1
            else "ladder.build=policy, or ladder.build=endpoint with ladder.endpoint.*; the ladder then holds "
            "anchors that are not the task's"
        )
        raise UserError(
            f"{what} needs {needed} anchors per training prompt, but {first} ({len(short)} of {len(prompts)} "
            f"prompts short; {why}): {lower}, or have tsrl-train write the missing ones with the policy or a "
            f"stronger model first ({writers}), or build them with tsrl-ladder and pass "
            "task.anchors_file=<its anchors.jsonl>."
        )
    if not hasattr(cfg.task, "anchors_file"):
        raise UserError(
            f"{first} of the {needed} anchors {what} needs, and task {task.name} has no anchors_file setting to "
            f"give it built ones; {lower}."
        )
    return needed, short


def check_references(task: Any) -> None:
    """A task evaluated by win-rate needs reference anchors on its held-out prompts (else every win-rate is 0)."""
    bare = [p for p in task.prompts("eval") if not p.anchors] if task_metric(task) == "winrate" else []
    if bare:
        raise UserError(
            f"Held-out prompt {bare[0].id!r} of task {task.name} has no reference anchors ({len(bare)} "
            "such), so its win-rate cannot be measured; point task.eval_file at held-out prompts with "
            "anchors in the task's schema (for humor the shipped tsrl/tasks/data/humor/eval.jsonl)."
        )


def step_prompts(cfg: Any, task: Any) -> list[Prompt]:
    """The instructed prompts (tier × style) the ladder step will ask the run's generator, for an engine that sizes
    its context by the prompts it will see; none when the step writes nothing or asks an endpoint. Data only."""
    check_references(task)
    needed, short = short_prompts(cfg, task)
    path = Path(cfg.run_dir) / STEP_FILE
    if not short or path.is_file():
        return []
    build = step_settings(cfg.ladder, needed, short)
    return [] if build.source == "endpoint" else [p for _, _, p in requests_for(short, build)]


def estimate_run(cfg: Any, task: Any, world: int | None = None, start_step: int = 0) -> Spend:
    """`estimate` for a run about to start: where the ladder step will write anchors (ladder.build), each short
    prompt counts its own anchors plus those to be written (or those the run directory's file already holds), and
    the writes to an endpoint are said. Raises the ladder step's UserError where the reward asks for more anchors
    than the data has and nothing may write them."""
    needed, short = short_prompts(cfg, task)
    if not short:
        return estimate(cfg, task, world, start_step)
    written = Path(cfg.run_dir) / STEP_FILE
    if written.is_file():  # a resumed run reuses it
        return estimate(cfg, build_task(replace(cfg.task, anchors_file=str(written))), world, start_step)
    build = step_settings(cfg.ladder, needed, short)
    extra = len(build.tiers) * max(len(build.styles), 1) * build.samples
    blank = tuple(Anchor(f"(to be written {i})", "") for i in range(extra))
    missing = {p.id for p in short}
    prompts = [replace(p, anchors=p.anchors + blank) if p.id in missing else p for p in task.prompts("train")]
    spend = estimate(cfg, TrainPrompts(task, prompts), world, start_step)
    spend.writes = (
        f"{len(short) * extra:,} requests to {cfg.ladder.endpoint.model} at {cfg.ladder.endpoint.base_url} (not judge "
        f"calls): {extra} anchors for each of {len(short)} training prompts"
        if build.source == "endpoint"
        else f"the policy writes {extra} anchors for each of {len(short)} training prompts (no judge call)"
    )
    return spend


class TrainPrompts:
    """A task whose training prompts are the given ones (holding the anchors the ladder step will write); every
    other split and capability is the task's."""

    def __init__(self, task: Any, train: list[Any]) -> None:
        self.task, self.train = task, train

    def prompts(self, split: str) -> list[Any]:
        return self.train if split == "train" else self.task.prompts(split)

    def __getattr__(self, attr: str) -> Any:
        if attr == "task":
            raise AttributeError(attr)
        return getattr(self.task, attr)


def prepare_ladder(cfg: Any, task: Any, generator: Any = None, collective: Collective | None = None) -> tuple[Any, Any]:
    """The run's config and task with every training prompt holding the anchors the reward needs: the ones the
    data has, else (`short_prompts` allowing it) those of the run directory's ladder_anchors.jsonl — read if it is there
    (a resumed run), else written now by `write_step_anchors` with the run's own `generator` (built from the policy,
    on every process). The task is rebuilt with task.anchors_file pointing at the file. Every process calls it."""
    collective = collective or SingleProcess()
    check_references(task)
    needed, short = short_prompts(cfg, task)
    if not short:
        return cfg, task
    path = Path(cfg.run_dir) / STEP_FILE
    if collective.from_main(path.is_file()):  # every process decides alike
        log.info(
            "ladder: reusing %s (written by an earlier start of this run) for %d prompts short of %d anchors",
            path,
            len(short),
            needed,
        )
    else:
        write_step_anchors(cfg, StepWork(short, needed, path), generator, collective)
    cfg = replace(cfg, task=replace(cfg.task, anchors_file=str(path)))
    task = build_task(cfg.task)
    still = [p for p in task.prompts("train") if len(p.anchors) < needed]
    if still:
        raise UserError(
            f"{path} gives prompt {still[0].id!r} {len(still[0].anchors)} anchors, fewer than the "
            f"{needed} needed; it was built for a smaller reward.k or other prompts: delete it to build "
            "it again, or use another run_dir."
        )
    return cfg, task


@dataclass(frozen=True)
class StepWork:
    """What the ladder step writes: the prompts short of anchors, the anchors each needs, the file."""

    short: Sequence[Prompt]
    needed: int
    path: Path


def write_step_anchors(cfg: Any, work: StepWork, generator: Any, collective: Collective) -> None:
    """Each short prompt's own anchors plus tier × style anchors from the endpoint or the run's generator, saying
    what it does, where and how long it took. The processes share the prompts (`share`), each writes its part
    with its own generator (one engine per process: a second engine, or a policy loaded anew under ZeRO-3,
    would wait on or break the others), and the main process stores the gathered whole. Each prompt's anchors are
    sampled under seeds of the run seed and the prompt's place (the same on any number of processes), on a forked
    RNG: the training RNG is the same whether the file was written now or reused."""
    build = step_settings(cfg.ladder, work.needed, work.short)
    writer = (
        f"endpoint {cfg.ladder.endpoint.model} at {cfg.ladder.endpoint.base_url}"
        if build.source == "endpoint"
        else "the policy"
    )
    styles = max(len(build.styles), 1)
    log.info(
        "ladder: %d training prompts have fewer than the %d anchors the reward needs; writing %d more per "
        "prompt (%d tiers × %d styles × %d samples) with %s into %s, once (a resumed run reuses it)%s",
        len(work.short),
        work.needed,
        len(build.tiers) * styles * build.samples,
        len(build.tiers),
        styles,
        build.samples,
        writer,
        work.path,
        f"; {collective.world_size} processes share the prompts" if collective.world_size > 1 else "",
    )
    start = time.perf_counter()
    lo, hi = share(len(work.short), collective)
    with torch.random.fork_rng(devices=[]):
        written = (
            from_endpoint(cfg.ladder.endpoint, build, work.short[lo:hi])
            if build.source == "endpoint"
            else policy_share(generator, build, work.short, (lo, hi), (cfg.seed, collective.world_size))
        )
    every = list(itertools.chain.from_iterable(collective.gather(written)))
    if collective.is_main:
        work.path.parent.mkdir(parents=True, exist_ok=True)
        write_anchors(work.path, [replace(p, anchors=p.anchors + w.anchors) for p, w in zip(work.short, every)])
    collective.gather(None)  # the others read the file once the main process has written it
    log.info("ladder: wrote %s in %.1f s", work.path, time.perf_counter() - start)


def policy_share(
    generator: Any, build: BuildSettings, short: Sequence[Prompt], part: tuple[int, int], run: tuple[int, int]
) -> list[Prompt]:
    """This process's part [lo, hi) of the short prompts with anchors sampled by the run's generator; `run` is (run
    seed, processes). Every process asks for the same number of prompts (the largest part; a smaller one is padded
    with a copy of a prompt, its anchors dropped), so a generator whose calls are collective (ZeRO-3) stays in
    step."""
    if generator is None:
        raise UserError("the ladder step writes anchors with the policy, but no generator was given to it.")
    (lo, hi), (seed, processes) = part, run
    width = -(-len(short) // processes)
    places = list(range(lo, hi)) + [lo if hi > lo else 0] * (width - (hi - lo))
    seeds = [derived_seed(seed, LADDER_STEP_SEED, place) for place in places]
    return from_generator(generator, build, [short[place] for place in places], seeds)[: hi - lo]
