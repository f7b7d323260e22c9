"""`tsrl-judge-check`: measure a judge on the task's reference anchors before spending a run on it.

The task's anchors are listed best first (the data's convention: humor lists top > good > okay > weak >
low), which gives every pair of anchors of a prompt a known better side. The check asks every such pair
of `prompts` prompts in both orders, with the judge's order handling (`order`) and noise
injection (`flip_prob`) turned off, so what is measured is the model's own behaviour, and reports:

- accuracy: mean probability given to the better anchor (soft verdicts count as given; a tie is ½),
  overall and by rank gap (1 = neighbours in the ladder, the hardest);
- position bias: mean P(first shown wins) — 0.5 is none; the gap to 0.5 is what `judge.order=both` cancels;
- swap consistency: share of pairs whose two orders pick the same anchor (a judge that follows position
  rather than content scores low);
- tie rate, errors by kind, latency p50/p95, tokens and cost per 1,000 comparisons (from the judge's metrics);
- for a model judge: format following (share of its answers that held a readable verdict), the share of
  questions answered only after a re-ask, how the verdicts were asked (judge.form / judge.constrain, per answer)
  and, where the verdicts are soft (P(A) from log-probs, e.g. judge.form=direct), their calibration against the
  ladder order: expected calibration error over CALIBRATION_BINS equal-width bins of P(first is better) and the
  Brier score.

With `check.min_accuracy` set, a judge below it makes the command exit with status 1 (a gate for scripts).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from omegaconf import MISSING

from tsrl.errors import ConfigError
from tsrl.judging.base import Judge, close_judge
from tsrl.types import PairRequest, Prompt, Verdict

CALIBRATION_BINS = 10


@dataclass
class CheckConfig:
    """What `tsrl-judge-check` asks."""

    split: str = "eval"
    """Task split whose prompts and anchors are used."""
    prompts: int = 16
    """Prompts to use (the first ones of the split; 0 = all)."""
    min_accuracy: float = 0.0
    """Exit with status 1 when the accuracy is below this (0 = report only)."""

    def __post_init__(self) -> None:
        if self.prompts < 0:
            raise ConfigError(f"check.prompts must be ≥ 0, got {self.prompts}.")
        if not 0.0 <= self.min_accuracy <= 1.0:
            raise ConfigError(f"check.min_accuracy must lie in [0, 1], got {self.min_accuracy}.")


@dataclass
class JudgeCheckRunConfig:
    task: Any = MISSING
    judge: Any = MISSING
    check: CheckConfig = field(default_factory=CheckConfig)
    run_dir: str = ""
    """Where judge_check.json goes (empty = Hydra's output directory)."""


def raw_positions(cfg: Any) -> Any:
    """The judge config with order handling and noise off, so the check sees what the model does."""
    return replace(cfg, order="fixed", flip_prob=0.0, failure="drop")


def anchor_questions(prompts: Sequence[Prompt]) -> tuple[list[PairRequest], list[tuple[int, bool]]]:
    """Every anchor pair (i < j, i better) of every prompt in both orders; per request (rank gap, better first)."""
    requests, meta = [], []
    for p in prompts:
        for i in range(len(p.anchors)):
            for j in range(i + 1, len(p.anchors)):
                better, worse = p.anchors[i].text, p.anchors[j].text
                requests += [PairRequest(p, better, worse), PairRequest(p, worse, better)]
                meta += [(j - i, True), (j - i, False)]
    return requests, meta


def calibration(predicted: Sequence[float], outcome: Sequence[float]) -> dict[str, float]:
    """Expected calibration error (CALIBRATION_BINS equal-width bins, weighted by count) and Brier score of
    probabilities `predicted` for binary `outcome`s."""
    p, y = np.asarray(predicted, float), np.asarray(outcome, float)
    bins = np.minimum((p * CALIBRATION_BINS).astype(int), CALIBRATION_BINS - 1)
    ece = sum(abs(p[bins == b].mean() - y[bins == b].mean()) * (bins == b).sum() for b in np.unique(bins)) / len(p)
    return {"ece": float(ece), "brier": float(np.mean((p - y) ** 2)), "n": float(len(p))}


def model_answers(verdicts: Sequence[Verdict], meta: Sequence[tuple[int, bool]], metrics: dict[str, float]) -> dict:
    """Format following, re-asks, forms and soft-verdict calibration; empty for judges that are not models."""
    if not metrics.get("answers"):
        return {}
    answered = [v for v in verdicts if v.p_first is not None]
    forms: dict[str, int] = defaultdict(int)
    for v in answered:
        forms[v.form or "unknown"] += 1
    soft = [(v.p_first, float(better_first)) for v, (_, better_first) in zip(verdicts, meta)
            if v.p_first is not None and v.form.endswith("+soft")]
    return {
        "format_following": 1.0 - metrics.get("unreadable_answers", 0.0) / metrics["answers"],
        "reask_share": metrics.get("reasked_requests", 0.0) / len(answered) if answered else float("nan"),
        "forms": dict(forms),
        "calibration": calibration(*zip(*soft)) if soft else None,
    }


def summarise(verdicts: Sequence[Verdict], meta: Sequence[tuple[int, bool]], judge_metrics: dict[str, float]) -> dict:
    """The report of a check from its verdicts (in anchor_questions order) and the judge's drained metrics."""
    correct: list[float] = []
    first: list[float] = []
    by_gap: dict[int, list[float]] = defaultdict(list)
    consistent: list[float] = []
    for k in range(0, len(verdicts), 2):  # (better, worse) then (worse, better)
        pair = []
        for v, (gap, better_first) in zip(verdicts[k:k + 2], meta[k:k + 2]):
            if v.p_first is None:
                continue
            p_better = v.p_first if better_first else 1.0 - v.p_first
            correct.append(p_better)
            by_gap[gap].append(p_better)
            first.append(v.p_first)
            pair.append(np.sign(p_better - 0.5))
        if len(pair) == 2:
            consistent.append(float(pair[0] == pair[1]))
    answered = len(correct)
    calls = judge_metrics.get("calls", 0.0) or float(len(verdicts))
    return {
        "questions": len(verdicts),
        "answered": answered,
        "accuracy": float(np.mean(correct)) if correct else float("nan"),
        "accuracy_by_gap": {str(g): float(np.mean(v)) for g, v in sorted(by_gap.items())},
        "position_bias_p_first": float(np.mean(first)) if first else float("nan"),
        "swap_consistency": float(np.mean(consistent)) if consistent else float("nan"),
        "tie_rate": float(np.mean([p == 0.5 for p in first])) if first else float("nan"),
        "errors": {k.split("/", 1)[1]: v for k, v in judge_metrics.items() if k.startswith("errors/")},
        "latency_p50_s": judge_metrics.get("latency_p50_s"),
        "latency_p95_s": judge_metrics.get("latency_p95_s"),
        "tokens_per_1k": 1000.0 * judge_metrics.get("tokens", 0.0) / calls,
        "cost_usd_per_1k": 1000.0 * judge_metrics.get("cost_usd", 0.0) / calls,
        "cache_hits": judge_metrics.get("cache_hits", 0.0),
        **model_answers(verdicts, meta, judge_metrics),
    }


def judge_label(cfg: Any) -> str:
    """'openai (model judge)' / 'hf_local (model …)' / 'rubric_sim': the config group name plus the model."""
    from tsrl.registry import JUDGES

    name = JUDGES.of(cfg).name
    model = getattr(cfg, "model", None) or getattr(cfg, "model_path", None)
    return f"{name} (model {model})" if model else name


def check_judge(judge: Judge, prompts: Sequence[Prompt]) -> dict:
    requests, meta = anchor_questions(prompts)
    judge.drain_metrics()
    verdicts = judge.compare(requests)
    return summarise(verdicts, meta, judge.drain_metrics())


def run_check(cfg: JudgeCheckRunConfig) -> dict:
    """Build the task and the judge (raw positions), check it, write run_dir/judge_check.json."""
    from tsrl.judging import build_judge
    from tsrl.tasks import build_task

    task = build_task(cfg.task)
    prompts = [p for p in task.prompts(cfg.check.split) if len(p.anchors) >= 2]
    if not prompts:
        raise ConfigError(f"The {cfg.check.split!r} split of task {task.name!r} has no prompt with two anchors "
                          "or more; the judge check needs reference anchors (choose another check.split).")
    prompts = prompts[: cfg.check.prompts] if cfg.check.prompts else prompts
    judge = build_judge(raw_positions(cfg.judge), task)
    try:
        report = {"judge": judge_label(cfg.judge), "task": task.name, "split": cfg.check.split,
                  "prompts": len(prompts), **check_judge(judge, prompts)}
    finally:
        close_judge(judge)
    out = Path(cfg.run_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "judge_check.json").write_text(json.dumps(report, indent=1))
    return report


def format_report(report: dict) -> str:
    gaps = "  ".join(f"{g}: {100 * a:.1f}%" for g, a in report["accuracy_by_gap"].items())
    errors = ", ".join(f"{k} {v:.0f}" for k, v in report["errors"].items()) or "none"
    latency = ("n/a" if report["latency_p50_s"] is None else
               f"p50 {1000 * report['latency_p50_s']:.0f} ms, p95 {1000 * report['latency_p95_s']:.0f} ms")
    return "\n".join([
        f"judge check: {report['judge']} on {report['prompts']} {report['task']} prompts ({report['split']}), "
        f"{report['answered']}/{report['questions']} questions answered",
        f"  accuracy (P to the better anchor)  {100 * report['accuracy']:.1f}%",
        f"  by rank gap                        {gaps}",
        f"  position bias P(first wins)        {report['position_bias_p_first']:.3f}   (0.5 = none)",
        f"  swap consistency                   {100 * report['swap_consistency']:.1f}%",
        f"  tie rate                           {100 * report['tie_rate']:.1f}%",
        f"  errors                             {errors}",
        f"  latency                            {latency}",
        f"  tokens / cost per 1k comparisons   {report['tokens_per_1k']:.0f} / ${report['cost_usd_per_1k']:.4f}",
        *model_lines(report),
    ])


def model_lines(report: dict) -> list[str]:
    if "format_following" not in report:
        return []
    forms = ", ".join(f"{form} {count}" for form, count in sorted(report["forms"].items())) or "none"
    cal = report["calibration"]
    calibrated = ("n/a (no soft verdicts: ask for log-probs, e.g. judge.form=direct)" if cal is None else
                  f"ECE {cal['ece']:.3f}, Brier {cal['brier']:.3f} over {cal['n']:.0f} soft verdicts")
    return [
        f"  format following                   {100 * report['format_following']:.1f}% of answers readable",
        f"  answered after a re-ask            {100 * report['reask_share']:.1f}%",
        f"  asked as                           {forms}",
        f"  calibration of P(first better)     {calibrated}",
    ]
