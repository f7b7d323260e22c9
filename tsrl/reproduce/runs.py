"""What a finished or running grid left on disk, read back: each run folder's settings (its .hydra/overrides.yaml),
evaluations, judge calls and metrics, as tsrl-reproduce's tables (tsrl.reproduce) and a multirun's sweep table
(tsrl.reproduce.sweep) read them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from tsrl.evaluation import HEADLINE


def run_folders(out: Path) -> dict[Path, dict[str, str]]:
    """Every run folder under `out` (a Hydra job's: it holds .hydra/overrides.yaml), finished or not, with the
    settings its command line gave it (key → value as written)."""
    return {
        path.parent.parent: dict(o.split("=", 1) for o in yaml.safe_load(path.read_text()) or [] if "=" in o)
        for path in sorted(out.rglob(".hydra/overrides.yaml"))
    }


def collect(out: Path) -> list[dict[str, Any]]:
    """One record per run under `out` that has an eval.json: its grid values, evaluations and judge calls."""
    runs = []
    for run_dir, values in run_folders(out).items():
        if not (run_dir / "eval.json").is_file():
            continue
        evals = json.loads((run_dir / "eval.json").read_text())
        rows = (
            [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
            if (run_dir / "metrics.jsonl").is_file()
            else []
        )
        config = json.loads((run_dir / "config.json").read_text()) if (run_dir / "config.json").is_file() else {}
        runs.append(
            {
                "dir": str(run_dir),
                "values": values,
                "evals": evals,
                "done": (run_dir / "done.json").is_file(),
                "judge_calls": sum(r.get("judge/calls", 0.0) for r in rows),
                "judge_tokens": sum(r.get("judge/tokens", 0.0) for r in rows),
                "wall_s": sum(r.get("time/step_s", 0.0) for r in rows),
                "pool": anchor_pool(run_dir),
                "steps": len(rows),
                "group_size": config.get("trainer", {}).get("group_size"),
                "eval_samples": config.get("trainer", {}).get("eval", {}).get("samples"),
                "benchmarks": benchmarks_of(config),
                "machine": machine_of(run_dir),
                "generations_per_step": mean_metric(rows, "fill/generations_per_step"),
                "zero_var": [(r["step"], r["reward/zero_var_frac"]) for r in rows if "reward/zero_var_frac" in r],
                "refresh_steps": [
                    b["step"]
                    for a, b in zip([{}] + rows, rows)  # self_bootstrap's ladder rebuilds
                    if b.get("bootstrap/refreshes", 0) > a.get("bootstrap/refreshes", 0)
                ],
                "zero_var_frac": mean_metric(rows, "reward/zero_var_frac"),
                "zero_var_drawn": mean_metric(rows, "fill/zero_var_frac"),  # before trainer.fill=resample removed them
                "route_verifier_frac": mean_metric(rows, "route/verifier_frac"),
                "tournament_groups": mean_metric(rows, "route/tournament"),
            }
        )
    return runs


def benchmarks_of(config: dict) -> list[dict]:
    """The held-out benchmarks a run's config names (task=stem: key, label, metric, in table order); none for a task
    with one held-out set."""
    heldout = config.get("task", {}).get("heldout") or {}
    return [
        {"key": key, "label": b.get("label") or key, "metric": b.get("metric", "pass_ratio")}
        for key, b in heldout.items()
    ]


def machine_of(run_dir: Path) -> str | None:
    """Where a run ran, from its setup.json's machine record (CPU, torch's CPU kernels, torch version, threads,
    platform), in words; None for a run that recorded none (written before setup.json had one). Runs from
    different machines may have started from different policies (tsrl.reproduce.tables.mixed_bases)."""
    path = run_dir / "setup.json"
    machine = json.loads(path.read_text()).get("machine") if path.is_file() else None
    if not machine:
        return None
    return (
        f"{machine.get('cpu') or '?'} ({machine.get('cpu_capability', '?')}, torch {machine.get('torch', '?')}, "
        f"{machine.get('threads', '?')} threads, {machine.get('platform') or '?'})"
    )


UNTIMED = ("step", "time_s")
"""Step-0 evaluation fields that say when and how fast it ran, not what the policy wrote (start_scores)."""


def start_scores(start: dict[str, Any]) -> str:
    """The step-0 evaluation's scores (every numeric field but UNTIMED), as sorted JSON: the untrained policy's
    fingerprint. Two policies can share the headline score (two CPU builds of the tiny policy both scored 32.3
    against all tiers, 10.4 and 6.2 against the top tier), so runs started from one policy only if all agree."""
    return json.dumps(
        {k: round(float(v), 9) for k, v in start.items() if k not in UNTIMED and isinstance(v, (int, float))},
        sort_keys=True,
    )


def anchor_pool(run_dir: Path) -> dict | None:
    """The diversity and strength of the anchors a ladder run's reward compared with (ladder_diversity.json's
    "selected"); None for a run without a ladder."""
    path = run_dir / "ladder_diversity.json"
    return json.loads(path.read_text()).get("selected") if path.is_file() else None


def mean_metric(rows: list[dict], name: str) -> float | None:
    """A metric's mean over the steps that log it (None when none does)."""
    values = [r[name] for r in rows if r.get(name) is not None]
    return float(np.mean(values)) if values else None


def headline_key(evals: dict) -> str:
    """The task's headline number in an eval.json (tsrl.evaluation.HEADLINE: win-rate or pass ratio)."""
    return next(key for key, _ in HEADLINE.values() if key in evals["latest"])
