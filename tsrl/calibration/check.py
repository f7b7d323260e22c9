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
`check.fit=true` also grades the anchors and fits the simulated judge's perception model (tsrl/calibration/fit.py);
`check.lists=R` with it asks each prompt's anchors as one list in R orders and fits the lists' frame apart from
their item noise (tsrl/calibration/fit_lists.py).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from tsrl.calibration.fit import Answers, collect_answers, fit_answers
from tsrl.calibration.fit_lists import ListAnswers, collect_lists, fit_lists, list_lines
from tsrl.calibration.fitted_profile import profile_from_fit
from tsrl.config import CommandConfig
from tsrl.errors import ConfigError
from tsrl.judging import build_judge
from tsrl.judging.base import Judge, close_judge
from tsrl.judging.profile import write_profile
from tsrl.registry import JUDGES
from tsrl.tasks import SimulatedQuality, build_task
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
    fit: bool = False
    """Also grade every anchor and fit the simulated judge's perception model to the answers by maximum
    likelihood (tsrl/calibration/fit.py): parameters with 95 % intervals in the report, the profile written to
    run_dir/judge_profile.yaml for `judge=rubric_sim judge.profile=<that path>`."""
    repeats: int = 1
    """With fit: times each verdict and grade is asked (> 1 only helps a judge that samples; a temperature-0
    judge repeats its answer, and the fit would count it as new evidence)."""
    lists: int = 0
    """With fit: also ask each prompt's anchors as one list (one call) in this many different orders (rotations of
    a random order, at most one per anchor), so each anchor is graded in several calls and slots, and fit the
    lists' frame σ_η, item noise σ_list and position effect apart (tsrl/calibration/fit_lists.py); the profile gets
    them. 0 = no lists."""
    profile_name: str = "fitted"
    """With fit: the name written into the profile."""
    refit: str = ""
    """The run_dir of an earlier `check.fit=true`: fit its saved answers (judge_answers.json) again without asking
    any judge, e.g. after a fit failed or to compare settings; the report and profile go to this run_dir."""

    def __post_init__(self) -> None:
        if self.prompts < 0:
            raise ConfigError(f"check.prompts must be ≥ 0, got {self.prompts}.")
        if self.lists < 0 or (self.lists and not self.fit):
            raise ConfigError(
                f"check.lists={self.lists}: lists are asked for the fit; set check.fit=true with check.lists ≥ 1, "
                "or check.lists=0."
            )
        if self.repeats < 1:
            raise ConfigError(f"check.repeats must be ≥ 1, got {self.repeats}.")
        if not 0.0 <= self.min_accuracy <= 1.0:
            raise ConfigError(f"check.min_accuracy must lie in [0, 1], got {self.min_accuracy}.")


@dataclass
class JudgeCheckRunConfig(CommandConfig):
    """tsrl-judge-check's root (configs/judge_check.yaml); run_dir receives judge_check.json."""

    check: CheckConfig = field(default_factory=CheckConfig)


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
    soft = [
        (v.p_first, float(better_first))
        for v, (_, better_first) in zip(verdicts, meta)
        if v.p_first is not None and v.form.endswith("+soft")
    ]
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
        for v, (gap, better_first) in zip(verdicts[k : k + 2], meta[k : k + 2]):
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
    name = JUDGES.of(cfg).name
    model = getattr(cfg, "model", None) or getattr(cfg, "model_path", None)
    return f"{name} (model {model})" if model else name


def check_judge(judge: Judge, prompts: Sequence[Prompt]) -> tuple[dict, list[Verdict]]:
    """The report of the anchor pairs' verdicts, and the verdicts (in anchor_questions order)."""
    requests, meta = anchor_questions(prompts)
    judge.drain_metrics()
    verdicts = judge.compare(requests)
    return summarise(verdicts, meta, judge.drain_metrics()), verdicts


def fit_judge(
    judge: Judge,
    judge_cfg: Any,
    task: Any,
    prompts: Sequence[Prompt],
    verdicts: Sequence[Verdict],
    cfg: CheckConfig,
    label: str,
    out: Path,
) -> dict:
    """Grade the anchors, fit the perception model to grades and verdicts, write out/judge_profile.yaml."""
    if isinstance(task, SimulatedQuality):
        latent, kind = (lambda p, rank, text: task.quality(p, text)), "quality"
    else:
        latent, kind = (lambda p, rank, text: -float(rank)), "rank"
    answers = collect_answers(judge, prompts, latent, cfg.repeats, verdicts=verdicts)
    answers.latent = kind
    lists = {}
    if cfg.lists:
        asked = collect_lists(judge, prompts, latent, cfg.lists)
        asked.latent = kind
        lists = {"lists": asked.to_json()}
    scale = [
        getattr(judge_cfg, name, default)
        for name, default in (("grade_lo", 0.0), ("grade_hi", 10.0), ("grade_levels", 11))
    ]  # a model judge: the rubric's 0–10
    command = (
        f"tsrl-judge-check task={task.name} check.fit=true check.prompts={len(prompts)} check.repeats={cfg.repeats}"
        + (f" check.lists={cfg.lists}" if cfg.lists else "")
    )
    saved = {"judge": label, "command": command, "scale": scale, **answers.to_json(), **lists}
    (out / "judge_answers.json").write_text(json.dumps(saved))  # a failed fit loses no answer: check.refit
    return fit_saved(saved, cfg.profile_name, out)


def fit_saved(saved: dict, name: str, out: Path) -> dict:
    """Fit saved answers (judge_answers.json's content; its lists too where it has them) and write
    out/judge_profile.yaml."""
    fit = fit_answers(Answers.from_json(saved), *saved["scale"])
    if "lists" in saved:
        fit["lists"] = fit_lists(ListAnswers.from_json(saved["lists"]), *saved["scale"])
    profile = profile_from_fit(fit, name, saved["judge"], saved["command"])
    path = out / "judge_profile.yaml"
    write_profile(profile, path)
    return {**profile.fit, "profile": str(path), "parameters": profile.parameters}


def refit(cfg: JudgeCheckRunConfig) -> dict:
    """check.refit: the earlier check's report with a new fit of its saved answers; no judge is asked."""
    source = Path(cfg.check.refit)
    files = source / "judge_check.json", source / "judge_answers.json"
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ConfigError(
            f"check.refit={source}: {', '.join(missing)} missing; refit needs the run_dir of an earlier "
            "`tsrl-judge-check check.fit=true` that got as far as asking its questions."
        )
    try:
        report, saved = (json.loads(f.read_text()) for f in files)
        missing_keys = sorted({"judge", "command", "scale", *Answers.ARRAYS, "unanswered", "latent"} - set(saved))
    except (OSError, ValueError, TypeError) as err:
        raise ConfigError(
            f"check.refit={source}: its saved check is unreadable ({err}); run the check again."
        ) from None
    if missing_keys:
        raise ConfigError(
            f"check.refit={source}: judge_answers.json lacks {', '.join(missing_keys)}; it was not "
            "written by `tsrl-judge-check check.fit=true`, or was cut short: run the check again."
        )
    out = Path(cfg.run_dir)
    out.mkdir(parents=True, exist_ok=True)
    report["fit"] = fit_saved(saved, cfg.check.profile_name, out)
    (out / "judge_check.json").write_text(json.dumps(report, indent=1))
    return report


def check_calls(check: CheckConfig, prompts: Sequence[Prompt]) -> tuple[int, str]:
    """The model calls a check will make (its judge asks in fixed order: one call a question): every anchor pair in
    both orders; with the fit, check.repeats − 1 more rounds of them, every anchor's grade check.repeats times and
    each prompt's list in check.lists orders."""
    pairs = sum(len(p.anchors) * (len(p.anchors) - 1) for p in prompts)
    if not check.fit:
        return pairs, f"{len(prompts)} prompts' anchor pairs in both orders"
    grades = sum(len(p.anchors) for p in prompts)
    calls = pairs * check.repeats + grades * check.repeats + len(prompts) * check.lists
    what = f"{len(prompts)} prompts' anchor pairs in both orders and their anchors' grades, {check.repeats} time(s)"
    return calls, what + (f", and {check.lists} list(s) a prompt" if check.lists else "")


def run_check(cfg: JudgeCheckRunConfig) -> dict:
    """Build the task and the judge (raw positions), check it, write run_dir/judge_check.json."""
    if cfg.check.refit:
        return refit(cfg)
    task = build_task(cfg.task)
    prompts = [p for p in task.prompts(cfg.check.split) if len(p.anchors) >= 2]
    if not prompts:
        raise ConfigError(
            f"The {cfg.check.split!r} split of task {task.name!r} has no prompt with two anchors "
            "or more; the judge check needs reference anchors (choose another check.split)."
        )
    prompts = prompts[: cfg.check.prompts] if cfg.check.prompts else prompts
    calls, what = check_calls(cfg.check, prompts)
    print(f"judge spend: {calls:,} calls — {what}", flush=True)  # before the judge is built
    judge = build_judge(raw_positions(cfg.judge), task)
    out = Path(cfg.run_dir)
    out.mkdir(parents=True, exist_ok=True)
    label = judge_label(cfg.judge)
    try:
        summary, verdicts = check_judge(judge, prompts)
        report = {"judge": label, "task": task.name, "split": cfg.check.split, "prompts": len(prompts), **summary}
        if cfg.check.fit:
            (out / "judge_check.json").write_text(json.dumps(report, indent=1))  # kept if the fit fails
            report["fit"] = fit_judge(judge, cfg.judge, task, prompts, verdicts, cfg.check, label, out)
    finally:
        close_judge(judge)
    (out / "judge_check.json").write_text(json.dumps(report, indent=1))
    return report


def format_report(report: dict) -> str:
    gaps = "  ".join(f"{g}: {100 * a:.1f}%" for g, a in report["accuracy_by_gap"].items())
    errors = ", ".join(f"{k} {v:.0f}" for k, v in report["errors"].items()) or "none"
    latency = (
        "n/a"
        if report["latency_p50_s"] is None
        else f"p50 {1000 * report['latency_p50_s']:.0f} ms, p95 {1000 * report['latency_p95_s']:.0f} ms"
    )
    return "\n".join(
        [
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
            *fit_lines(report),
        ]
    )


def fit_lines(report: dict) -> list[str]:
    """The fitted perception model: each parameter with its 95 % interval, the signal test, the profile."""
    if "fit" not in report:
        return []
    fit = report["fit"]
    rows = []
    for name, e in fit["estimates"].items():
        low, high = e["ci95"]
        note = f"   ({e['fixed']})" if "fixed" in e else ""
        rows.append(f"    {name:<22} {e['value']:>8.3f}   95% CI [{low:.3f}, {high:.3f}]{note}")
    test, data = fit["signal_test"], fit["data"]
    used = ", ".join(f"{g}: {n}" for g, n in data["grades_used"].items())
    return [
        f"  perception model fit               {data['verdicts']} verdicts, {data['grades']} grades "
        f"({data['unanswered']} unanswered), latent = the task's {data['latent']}",
        *rows,
        f"    verdicts follow the latent quality: likelihood ratio {test['lr']:.1f}, p = {test['p_value']:.3g} "
        "(against a judge blind to it)",
        f"    grades used                      {used}",
        *(list_lines(fit["lists"]) if "lists" in fit else []),
        f"  profile                            {fit['profile']}  (judge=rubric_sim judge.profile=<this path>)",
    ]


def model_lines(report: dict) -> list[str]:
    if "format_following" not in report:
        return []
    forms = ", ".join(f"{form} {count}" for form, count in sorted(report["forms"].items())) or "none"
    cal = report["calibration"]
    calibrated = (
        "n/a (no soft verdicts: ask for log-probs, e.g. judge.form=direct)"
        if cal is None
        else f"ECE {cal['ece']:.3f}, Brier {cal['brier']:.3f} over {cal['n']:.0f} soft verdicts"
    )
    return [
        f"  format following                   {100 * report['format_following']:.1f}% of answers readable",
        f"  answered after a re-ask            {100 * report['reask_share']:.1f}%",
        f"  asked as                           {forms}",
        f"  calibration of P(first better)     {calibrated}",
    ]
