"""`tsrl-eval`: a task's held-out metrics for one or more policies, with any judge, as JSON and a markdown table.

A policy is a model folder: a run's checkpoint (its consolidated `policy/` folder is used), any Hugging Face
folder (a base model), or, with no `eval.policies`, the `model` group's policy (tiny, smollm2, hf). The metric
is the task's own (for judged tasks the win-rate against the task's reference set — tsrl.evaluation.winrate —
with the all-tier and top-tier win-rates beside it; pass ratio@n and pass@k with the verifier for verifiable
ones). The judge is made clean first — no injected flips, no position bias, no
budget — and named in the report. Each seed in `eval.seeds` is one evaluation run (its own sampling); with
several, every number is reported as mean (std) over runs. A seed samples as a training run's evaluation does
(fixed chunks of prompts, each under its own seed: tsrl.evaluation.chunks), so the seed of `trainer.eval.seed`
(1234), the same samples per prompt and the same generator settings give a run's own numbers for its policy.

    tsrl-eval task=stories judge=openai judge.model=big-judge 'eval.policies=[runs/a/checkpoints/step_000100]'
    tsrl-eval task=aime model=smollm2 eval.samples=16 'eval.seeds=[0,1,2]'
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import MISSING

from tsrl.config import CommandConfig
from tsrl.errors import ConfigError
from tsrl.evaluation import evaluation_summary, headline, reference_set
from tsrl.evaluation.chunks import ChunkPlan, chunk_size, chunked_sums, ordered_total
from tsrl.generation import build_generator
from tsrl.judging import Judge, build_judge, clean_judge_config, close_judge, judge_identity
from tsrl.models import policy_source
from tsrl.models.source import PolicySource, load_source
from tsrl.spend import winrate_calls
from tsrl.tasks import Task, build_task
from tsrl.types import Prompt

POLICY_DIR = "policy"


@dataclass
class EvalSettings:
    """What `tsrl-eval` evaluates and how often."""

    policies: list[str] = field(default_factory=list)
    """Model folders or checkpoint directories to evaluate; empty = the `model` group's policy."""
    split: str = "eval"
    """Task split whose prompts are evaluated (held-out by default)."""
    samples: int = 4
    """Completions per prompt (the n of pass ratio@n; 16 for the paper's AIME number)."""
    max_prompts: int = 0
    """Evaluate on the first N prompts of the split (0 = all)."""
    seeds: list[int] = field(default_factory=lambda: [0])
    """One evaluation run per seed; several → mean (std) over runs."""

    def __post_init__(self) -> None:
        if self.samples < 1 or self.max_prompts < 0 or not self.seeds:
            raise ConfigError(
                f"tsrl-eval needs eval.samples >= 1, eval.max_prompts >= 0 and at least one seed; got "
                f"samples={self.samples}, max_prompts={self.max_prompts}, seeds={self.seeds}."
            )


@dataclass
class EvalRunConfig(CommandConfig):
    """tsrl-eval's root (configs/eval.yaml); run_dir receives eval_report.json and eval_report.md."""

    model: Any = MISSING
    generator: Any = MISSING
    eval: EvalSettings = field(default_factory=EvalSettings)


def policy_folder(spec: str) -> Path:
    """A checkpoint directory's consolidated policy, or the folder itself when it holds a model."""
    path = Path(spec).expanduser()
    for candidate in (path / POLICY_DIR, path):
        if (candidate / "config.json").is_file():
            return candidate
    raise ConfigError(
        f"eval.policies entry {spec!r} is neither a model folder (config.json) nor a checkpoint "
        f"with a {POLICY_DIR}/ folder; pass a Hugging Face model folder or <run>/checkpoints/step_N."
    )


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def aggregate(runs: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per metric: mean and std over runs (keys every run has)."""
    keys = [k for k in runs[0] if all(k in r for r in runs)]
    return {k: dict(zip(("mean", "std"), mean_std([float(r[k]) for r in runs]))) for k in keys}


def evaluate_policies(cfg: EvalRunConfig) -> dict[str, Any]:
    """Every policy × every seed; the report (also written to run_dir)."""
    task = build_task(cfg.task)
    prompts = task.prompts(cfg.eval.split)
    prompts = prompts[: cfg.eval.max_prompts] if cfg.eval.max_prompts else prompts
    judge_cfg = clean_judge_config(cfg.judge)
    default = policy_source(cfg.model, cfg.task)
    sources = [  # a checkpoint renders its prompts as the model config says (chat_template_kwargs)
        PolicySource(policy_folder(p), default.dtype, chat_template_kwargs=default.chat_template_kwargs)
        for p in cfg.eval.policies
    ] or [default]
    if headline(task)[0] == "winrate":  # before the judge is built: what the evaluation will ask it
        per_run, seeds = winrate_calls(prompts, cfg.eval.samples, judge_cfg), len(cfg.eval.seeds)
        print(
            f"judge spend: {per_run * len(sources) * seeds:,} calls — {len(sources)} policies × {seeds} seeds × "
            f"{len(prompts)} prompts × {cfg.eval.samples} samples × their reference anchors",
            flush=True,
        )
    judge = build_judge(judge_cfg, task)
    report = report_header(cfg, task, len(prompts), judge_cfg)
    try:
        for source in sources:
            runs = evaluate_policy(cfg, source, task, judge, prompts)
            report["policies"].append({"policy": str(source.path), "runs": runs, "summary": aggregate(runs)})
    finally:
        close_judge(judge)
    write_report(report, Path(cfg.run_dir))
    return report


def report_header(cfg: EvalRunConfig, task: Task, prompts: int, judge_cfg: Any) -> dict[str, Any]:
    """The report's description of what was evaluated and how, with no policy yet."""
    key, label = headline(task)
    report: dict[str, Any] = {
        "task": task.name,
        "split": cfg.eval.split,
        "prompts": prompts,
        "samples": cfg.eval.samples,
        "seeds": list(cfg.eval.seeds),
        "headline": key,
        "headline_label": label,
        "judge": judge_identity(judge_cfg),
        "policies": [],
    }
    if key == "winrate":
        reference = reference_set(task.name)
        report["reference_set"] = {"tiers": reference.tiers, "paper": reference.paper, "here": reference.here}
    return report


def evaluate_policy(
    cfg: EvalRunConfig, source: PolicySource, task: Task, judge: Judge, prompts: list[Prompt]
) -> list[dict[str, float]]:
    """One policy's evaluation runs, one per seed, each chunked as a training run's evaluation: its seed gives
    the run's numbers."""
    model, tokenizer = load_source(source)
    generator = build_generator(cfg.generator, model, tokenizer, prompts)
    runs = []
    for seed in cfg.eval.seeds:
        plan = ChunkPlan(cfg.eval.samples, seed, chunk_size(cfg.generator))
        chunks = chunked_sums(task, generator, judge, prompts, plan)
        sums = ordered_total([(c.index, c.sums) for c in chunks])
        result = evaluation_summary(task, sums, cfg.eval.samples)
        result["judge_calls"] = float(judge.drain_metrics().get("calls", 0.0))
        runs.append(result)
    close = getattr(generator, "close", None)
    if close is not None:
        close()
    return runs


def markdown(report: dict[str, Any]) -> str:
    """The report as a markdown table: one row per policy, mean (std) over runs."""
    first = report["policies"][0]["summary"]
    columns = [report["headline"]] + [k for k in ("winrate_all", "winrate_top") if k in first]
    columns += sorted(k for k in first if k.startswith(("winrate/", "pass@")))
    columns += [k for k in ("answered", "mean_length", "repeated_bigrams", "judge_calls") if k in first]
    lines = [
        f"{report['headline_label']} — task {report['task']} ({report['split']}, {report['prompts']} prompts × "
        f"{report['samples']} samples, {len(report['seeds'])} run(s)); judge: {report['judge']['kind']} "
        f"{report['judge']['model']}"
    ]
    if "reference_set" in report:
        lines.append(f"Reference set: {report['reference_set']['here']} (paper: {report['reference_set']['paper']}).")
    lines += ["", "| policy | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for entry in report["policies"]:
        cells = []
        for column in columns:
            stat = entry["summary"].get(column)
            cells.append(
                "—"
                if stat is None
                else f"{stat['mean']:.1f} ({stat['std']:.1f})"
                if len(report["seeds"]) > 1
                else f"{stat['mean']:.1f}"
            )
        lines.append(f"| {entry['policy']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_report(report: dict[str, Any], run_dir: Path) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "eval_report.json").write_text(json.dumps(report, indent=2) + "\n")
    (run_dir / "eval_report.md").write_text(markdown(report))
