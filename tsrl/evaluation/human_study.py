"""`tsrl-human-study`: TSRL §4.12's blinded human study — held-out prompts, every method's generation plus the
task's reference anchors, randomly ordered, ranked best to worst by annotators.

    tsrl-human-study export --runs runs/reproduce/tsrl_table1 --where task=stories --where seed=0 \
        --prompts 50 --annotators 6 --out study/stories
    # hand study/stories/sheets/ to the annotators (an offline HTML page and a CSV sheet each); keep key/ apart
    tsrl-human-study import study/stories filled/annotator_01.csv filled/annotator_02.csv …
    tsrl-human-study judge study/stories judge=openai judge.model=<judge> 'judge.base_urls=[http://host:8000/v1]'
    tsrl-human-study report study/stories

export: per prompt, one held-out generation of each selected run (sample 0 of the run's last evaluation, from
its heldout.jsonl) plus every reference anchor of the prompt, shuffled with --seed under blinded item ids
(P07-C); sheets/<annotator>.html and .csv (items in an order of their own per annotator), study.json (prompts
and items, no labels) and key/KEY-item-to-method-DO-NOT-SHARE.json (item → method or anchor tier).
import: each annotator's filled CSV, checked (every item of every prompt ranked once, ranks 1..n, no ties) and
stored as rankings/<annotator>.json; a bad sheet is refused with its file, row and the fix, and nothing already
imported changes. judge (optional): a round-robin of each prompt's items with the clean judge (both orders), in
judge.json. report: report.md and report.json — mean rank per method and anchor tier with a percentile-bootstrap
interval over prompts; each one's human win-rate (the share of the pairwise comparisons its annotators' rankings
imply that it wins against the other items of its prompt: our reading of TSRL §4.12's "average win-rates");
Kendall's W per prompt and over methods (the inter-annotator agreement; TSRL §4.12 gives a number per task without
naming its statistic); Kendall's τ_b and Spearman's ρ with its p-value against the judge (judge.json); τ_b
against the runs' held-out win-rates (eval.json). The sheets: tsrl.evaluation.study_sheets; the math:
tsrl.ranking.agreement; the command line: tsrl.commands.human_study.
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tsrl.evaluation import HELDOUT_FILE
from tsrl.evaluation.study_sheets import StudyError, read_sheet, write_sheets
from tsrl.ranking.agreement import (
    average_ranks,
    bootstrap_mean_ci,
    kendall_tau_b,
    kendalls_w,
    pairwise_win_rate,
    spearman_rho,
)

STUDY_FILE, JUDGE_FILE, KEY_FILE = "study.json", "judge.json", "key/KEY-item-to-method-DO-NOT-SHARE.json"
ANCHOR = "anchor"


@dataclass
class StudyRun:
    """One finished run whose held-out generations enter the study under `label`."""

    label: str
    run_dir: Path
    completions: dict[str, str]
    """prompt id → sample 0 of the run's last evaluation."""
    values: dict[str, str] = field(default_factory=dict)
    """The run's grid values (.hydra/overrides.yaml)."""


def read_heldout(run_dir: Path) -> tuple[int, dict[str, str]]:
    """The last evaluation step in a run's heldout.jsonl and its first sample per prompt."""
    rows = [json.loads(line) for line in (run_dir / HELDOUT_FILE).read_text().splitlines() if line.strip()]
    if not rows:
        raise StudyError(f"{run_dir / HELDOUT_FILE} is empty; the run has not evaluated yet (trainer.eval.every).")
    step = max(r["step"] for r in rows)
    first: dict[str, tuple[int, str]] = {}
    for r in rows:
        if r["step"] == step and (r["prompt_id"] not in first or r["sample"] < first[r["prompt_id"]][0]):
            first[r["prompt_id"]] = (r["sample"], r["completion"])
    return step, {pid: text for pid, (_, text) in first.items()}


def run_values(run_dir: Path) -> dict[str, str]:
    overrides = run_dir / ".hydra" / "overrides.yaml"
    if not overrides.is_file():
        return {}
    import yaml

    return dict(o.split("=", 1) for o in yaml.safe_load(overrides.read_text()) or [] if "=" in o)


def find_runs(paths: Sequence[Path], where: Sequence[str], label_by: Sequence[str]) -> list[StudyRun]:
    """The runs under `paths` (a run directory or a folder of them) with a heldout.jsonl whose grid values match
    every `key=value` of `where`, labelled by their values of `label_by` (else by their folder's name)."""
    wanted = dict(w.split("=", 1) for w in where)
    dirs = sorted(
        {
            f.parent
            for p in paths
            for f in ([p / HELDOUT_FILE] if (p / HELDOUT_FILE).is_file() else Path(p).rglob(HELDOUT_FILE))
        }
    )
    runs = []
    for run_dir in dirs:
        values = run_values(run_dir)
        if any(values.get(k) != v for k, v in wanted.items()):
            continue
        label = "+".join(values[k] for k in label_by) if all(k in values for k in label_by) else run_dir.name
        runs.append(StudyRun(label, run_dir, read_heldout(run_dir)[1], values))
    if not runs:
        raise StudyError(
            f"no run with a {HELDOUT_FILE} under {', '.join(map(str, paths))}"
            f"{' matching ' + ' '.join(where) if where else ''}; give finished run directories "
            f"(tsrl-reproduce --out or tsrl-train run_dir) trained with held-out evaluation on."
        )
    labels: dict[str, Path] = {}
    for run in runs:
        if run.label in labels:
            raise StudyError(
                f"two runs share the label {run.label!r}: {labels[run.label]} and {run.run_dir}; narrow "
                "the runs with --where (e.g. --where seed=0) or label by more keys (--label-by method,model)."
            )
        labels[run.label] = run.run_dir
    return runs


def compose_config(overrides: Sequence[str]) -> Any:
    """tsrl-train's composed config (configs/config.yaml) with these overrides."""
    from hydra import compose, initialize_config_module

    from tsrl.config import CONFIG_PACKAGE, register_configs

    register_configs()
    with initialize_config_module(CONFIG_PACKAGE, version_base="1.3"):
        return compose("config", overrides=list(overrides))


def load_task(overrides: Sequence[str]) -> Any:
    from omegaconf import OmegaConf

    from tsrl.tasks import build_task

    return build_task(OmegaConf.to_object(compose_config(overrides).task))


def item_ids(prompt_number: int, count: int) -> list[str]:
    """Blinded ids P07-A, P07-B, … (two letters past Z) for one prompt's items, in sheet order."""
    letters = string.ascii_uppercase
    codes = list(letters) if count <= 26 else [a + b for a in letters for b in letters]
    return [f"P{prompt_number:02d}-{code}" for code in codes[:count]]


def study_anchors(task_name: str, prompt: Any, which: str) -> list[Any]:
    """A prompt's anchors in the study: all of them, or those of the task's held-out reference set (the anchors
    the headline win-rate is measured against, tsrl.evaluation.winrate.REFERENCE_SETS)."""
    if which == "all":
        return list(prompt.anchors)
    from tsrl.evaluation.winrate import reference_set

    return [a for a in prompt.anchors if reference_set(task_name).holds(a)]


def build_study(task: Any, runs: list[StudyRun], prompts: int, seed: int, anchors: str = "all") -> tuple[dict, dict]:
    """(study, key): up to `prompts` held-out prompts every run answered (a seeded draw when there are more),
    each with its runs' generations and its anchors (`all`, or the task's `reference` set), shuffled under
    blinded ids."""
    rng = np.random.default_rng(seed)
    heldout = [p for p in task.prompts("eval") if all(p.id in r.completions for r in runs)]
    if not heldout:
        raise StudyError(
            "no held-out prompt of the task was answered by every run; export runs of the same task "
            "(--where task=…) and pass the task's settings (task=… task.eval_file=…) as the runs had."
        )
    if len(heldout) > prompts:
        heldout = [heldout[i] for i in sorted(rng.choice(len(heldout), size=prompts, replace=False))]
    study: dict[str, Any] = {"prompts": [], "items": {}, "seed": seed, "requested_prompts": prompts}
    key: dict[str, Any] = {"items": {}}
    for number, prompt in enumerate(heldout, start=1):
        entries = [(r.label, r.completions[prompt.id]) for r in runs]
        entries += [
            (f"{ANCHOR}/{a.tier}" if a.tier else ANCHOR, a.text) for a in study_anchors(task.name, prompt, anchors)
        ]
        entries = [entries[i] for i in rng.permutation(len(entries))]
        ids = item_ids(number, len(entries))
        study["prompts"].append({"id": prompt.id, "number": number, "text": prompt.text, "items": ids})
        for item, (label, text) in zip(ids, entries):
            study["items"][item] = {"prompt_id": prompt.id, "text": text}
            key["items"][item] = label
    return study, key


def study_task(runs: Sequence[StudyRun], overrides: Sequence[str]) -> list[str]:
    """The task settings of an export: `overrides`, led by `task=<the runs' task>` unless they name one."""
    if any(o.startswith("task=") for o in overrides):
        return list(overrides)
    tasks = {r.values.get("task") for r in runs} - {None}
    if len(tasks) != 1:
        raise StudyError(
            f"the runs are of tasks {sorted(tasks) or 'unknown'}; export one task at a time "
            "(--where task=stories) or name it (task=stories)."
        )
    return [f"task={tasks.pop()}", *overrides]


def check_export_folder(out: Path) -> None:
    """Refuse to export into a study folder that already holds imported rankings: they rank its old draw's items."""
    if any((out / "rankings").glob("*.json")):
        raise StudyError(
            f"{out} already holds imported rankings (rankings/); a new export would re-draw the "
            "items they rank: export into a new folder."
        )


def save_study(out: Path, study: dict, key: dict, annotators: int, key_path: Path) -> None:
    """The annotators' sheets and study.json in `out` (study["annotators"] names the sheets), and the key at
    key_path."""
    study["annotators"] = write_sheets(study, out, annotators)
    write_json(out / STUDY_FILE, study)
    write_json(key_path, key)


def heldout_metric(run_dir: Path) -> dict[str, Any]:
    """A run's held-out headline number at its last evaluation (eval.json), for the win-rate comparison."""
    path = run_dir / "eval.json"
    if not path.is_file():
        return {}
    from tsrl.evaluation import HEADLINE

    evals = json.loads(path.read_text())
    metric = next((k for k, _ in HEADLINE.values() if k in evals["latest"]), None)
    return {} if metric is None else {"metric": metric, "value": evals["latest"][metric], "judge": evals.get("judge")}


def load_study(folder: Path) -> dict:
    if not (folder / STUDY_FILE).is_file():
        raise StudyError(
            f"{folder} is not a study folder (no {STUDY_FILE}); give the --out folder of tsrl-human-study export."
        )
    return json.loads((folder / STUDY_FILE).read_text())


def write_json(path: Path, value: Any) -> None:
    """Written whole or not at all (a temporary file renamed over the target)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def import_sheet(folder: Path, study: dict, sheet: Path, replace: bool) -> tuple[str, dict]:
    """One annotator's filled sheet, checked against the study and stored as rankings/<annotator>.json; an
    annotator imported before is refused unless `replace`. Returns the annotator and their ranks per prompt."""
    annotator, ranks = read_sheet(sheet, study)
    target = folder / "rankings" / f"{annotator}.json"
    if target.is_file() and not replace:
        raise StudyError(
            f"{sheet}: {annotator} is already imported ({target}); pass --replace to replace "
            "that annotator's rankings with this sheet."
        )
    write_json(target, {"annotator": annotator, "source": str(sheet), "ranks": ranks})
    return annotator, ranks


def judge_study(folder: Path, overrides: Sequence[str]) -> dict:
    """judge.json: each item's mean P(win) in a round-robin of its prompt's items (both orders), with the clean
    judge that `overrides` compose; returns what it wrote."""
    from omegaconf import OmegaConf

    from tsrl.judging import build_judge, clean_judge_config, close_judge, judge_identity
    from tsrl.tasks import build_task
    from tsrl.types import PairRequest

    study = load_study(folder)
    cfg = compose_config([*study["task_overrides"], *overrides])
    task, judge_cfg = build_task(OmegaConf.to_object(cfg.task)), clean_judge_config(OmegaConf.to_object(cfg.judge))
    judge, prompts = build_judge(judge_cfg, task), {p.id: p for p in task.prompts("eval")}
    pairs = [(p["id"], a, b) for p in study["prompts"] for i, a in enumerate(p["items"]) for b in p["items"][i + 1 :]]
    try:
        verdicts = judge.compare(
            [PairRequest(prompts[pid], study["items"][a]["text"], study["items"][b]["text"]) for pid, a, b in pairs]
        )
    finally:
        close_judge(judge)
    wins: dict[str, list[float]] = {item: [] for item in study["items"]}
    for (_, a, b), verdict in zip(pairs, verdicts):
        if verdict.p_first is not None:
            wins[a].append(verdict.p_first)
            wins[b].append(1.0 - verdict.p_first)
    scores = {p["id"]: {i: float(np.mean(wins[i])) if wins[i] else None for i in p["items"]} for p in study["prompts"]}
    missing = sum(v.p_first is None for v in verdicts)
    judged = {"judge": judge_identity(judge_cfg), "pairs": len(pairs), "missing_verdicts": missing, "scores": scores}
    write_json(folder / JUDGE_FILE, judged)
    return judged


def rank_tables(study: dict, key: dict, rankings: list[dict]) -> dict[str, Any]:
    """labels [L] (runs, then anchor tiers); per_prompt [P, L] mean rank over annotators and the label's items;
    per_annotator [A, L] mean rank over prompts; per prompt its [A, N] rankings; each item's mean rank."""
    labels = list(key["runs"]) + sorted({v for v in key["items"].values() if v.startswith(ANCHOR)})
    column = {label: j for j, label in enumerate(labels)}
    per_prompt = np.full((len(study["prompts"]), len(labels)), np.nan)
    sums, counts = np.zeros((len(rankings), len(labels))), np.zeros((len(rankings), len(labels)))
    matrices, item_means = [], {}
    for p, prompt in enumerate(study["prompts"]):
        matrix = np.array([[r["ranks"][prompt["id"]][i] for i in prompt["items"]] for r in rankings], float)  # [A, N]
        matrices.append(matrix)
        item_means.update(zip(prompt["items"], matrix.mean(axis=0)))
        for n, item in enumerate(prompt["items"]):
            j = column[key["items"][item]]
            sums[:, j] += matrix[:, n]
            counts[:, j] += 1
        for label, j in column.items():
            mine = [n for n, item in enumerate(prompt["items"]) if key["items"][item] == label]
            if mine:
                per_prompt[p, j] = matrix[:, mine].mean()
    return {
        "labels": labels,
        "per_prompt": per_prompt,
        "per_annotator": sums / np.maximum(counts, 1),
        "matrices": matrices,
        "item_means": item_means,
    }


def summarise(
    study: dict, key: dict, rankings: list[dict], judge: dict | None, samples: int = 10_000, level: float = 0.95
) -> dict[str, Any]:
    """The report's numbers (see the module docstring); seeded, so the same inputs give the same report."""
    t = rank_tables(study, key, rankings)
    mean, low, high = bootstrap_mean_ci(t["per_prompt"], samples, level, seed=study["seed"])
    w_prompts = np.array([kendalls_w(m) for m in t["matrices"]])  # [P]
    w_mean, w_low, w_high = bootstrap_mean_ci(w_prompts[:, None], samples, level, seed=study["seed"])
    by_annotator = np.array([average_ranks(row) for row in t["per_annotator"]])  # [A, L]: ties possible
    report: dict[str, Any] = {
        "task": study["task"],
        "prompts": len(study["prompts"]),
        "annotators": [r["annotator"] for r in rankings],
        "items_per_prompt": len(study["prompts"][0]["items"]),
        "interval": f"{round(100 * level)} % percentile bootstrap over prompts, {samples} resamples",
        "mean_rank": [
            {"label": lab, "mean": float(m), "low": float(lo), "high": float(hi)}
            for lab, m, lo, hi in sorted(zip(t["labels"], mean, low, high), key=lambda x: x[1])
        ],
        "kendalls_w": {
            "per_prompt": dict(zip((p["id"] for p in study["prompts"]), w_prompts.tolist())),
            "mean_over_prompts": float(w_mean[0]),
            "low": float(w_low[0]),
            "high": float(w_high[0]),
            "over_labels": kendalls_w(by_annotator),
        },
        "human_win_rate": human_win_rates(study, key, t),
        "vs_judge": None,
        "vs_winrate": None,
    }
    human = dict(zip(t["labels"], mean))
    if judge is not None:
        report["vs_judge"] = judge_agreement(study, key, judge, t, human)
    runs = {label: run["value"] for label, run in key["runs"].items() if "value" in run}
    if len(runs) >= 2:
        labels = list(runs)
        report["vs_winrate"] = {
            "metric": next(r["metric"] for r in key["runs"].values() if "metric" in r),
            "labels": labels,
            "tau_b": kendall_tau_b([-runs[x] for x in labels], [human[x] for x in labels]),
        }
    return report


def human_win_rates(study: dict, key: dict, t: dict) -> dict[str, float]:
    """Per label, the mean over its items and annotators of the pairwise win-rate (agreement.pairwise_win_rate)
    against the other items of the same prompt, best first."""
    shares: dict[str, list[float]] = {label: [] for label in t["labels"]}
    for prompt, matrix in zip(study["prompts"], t["matrices"]):
        for item, share in zip(prompt["items"], pairwise_win_rate(matrix)):
            shares[key["items"][item]].append(float(share))
    rates = {label: float(np.mean(v)) for label, v in shares.items() if v}
    return dict(sorted(rates.items(), key=lambda x: -x[1]))


def judge_agreement(study: dict, key: dict, judge: dict, t: dict, human: dict[str, float]) -> dict[str, Any]:
    """τ_b and Spearman's ρ between the judge's round-robin order and the human mean ranks: per prompt over its
    items, and over labels (the judge's mean rank per label against the humans'; ρ with its p-value)."""
    taus, rhos, judge_ranks = [], [], {label: [] for label in t["labels"]}
    for prompt in study["prompts"]:
        scored = [i for i in prompt["items"] if judge["scores"][prompt["id"]].get(i) is not None]
        scores = np.array([judge["scores"][prompt["id"]][i] for i in scored])  # [N'] higher = better
        humans = [t["item_means"][i] for i in scored]
        taus.append(kendall_tau_b(-scores, humans) if len(scored) > 1 else np.nan)
        rhos.append(spearman_rho(-scores, humans)[0] if len(scored) > 1 else np.nan)
        for item, rank in zip(scored, average_ranks(-scores)):
            judge_ranks[key["items"][item]].append(rank)
    labels = [label for label in t["labels"] if judge_ranks[label]]
    judged = [float(np.mean(judge_ranks[label])) for label in labels]
    rho, p_value = spearman_rho(judged, [human[x] for x in labels])
    return {
        "judge": judge["judge"],
        "tau_b_per_prompt_mean": float(np.nanmean(taus)),
        "tau_b_over_labels": kendall_tau_b(judged, [human[x] for x in labels]),
        "spearman_over_labels": {"rho": rho, "p_value": p_value, "n": len(labels)},
        "spearman_per_prompt_mean": float(np.nanmean(rhos)) if not np.all(np.isnan(rhos)) else float("nan"),
        "judge_mean_rank": dict(zip(labels, judged)),
    }


def markdown(report: dict[str, Any]) -> str:
    w = report["kendalls_w"]
    lines = [
        f"Blinded human ranking — task {report['task']}: {report['prompts']} prompts × "
        f"{report['items_per_prompt']} items, {len(report['annotators'])} annotators; rank 1 = best. "
        f"Intervals: {report['interval']}.",
        "",
        "| method / anchor | mean rank | interval | human win-rate |",
        "|---|---|---|---|",
    ]
    wins = report["human_win_rate"]
    lines += [
        f"| {r['label']} | {r['mean']:.2f} | [{r['low']:.2f}, {r['high']:.2f}] | {100 * wins[r['label']]:.1f} % |"
        for r in report["mean_rank"]
    ]
    lines += [
        "",
        f"Inter-annotator agreement, Kendall's W (no ties: a sheet ranks without ties): mean over prompts "
        f"{w['mean_over_prompts']:.3f} [{w['low']:.3f}, {w['high']:.3f}], range "
        f"{min(w['per_prompt'].values()):.3f}–{max(w['per_prompt'].values()):.3f}; over methods (each "
        f"annotator's mean ranks, tie-corrected) {w['over_labels']:.3f}. (TSRL §4.12 gives one agreement per "
        "task without naming its statistic.)",
        "Human win-rate: the share of the pairwise comparisons implied by the annotators' rankings that the item "
        'wins against the other items of its prompt (a tie ½); our reading of TSRL\'s "average win-rates".',
    ]
    judge = report["vs_judge"]
    if judge:
        lines.append(
            f"Judge ({judge['judge']['kind']} {judge['judge']['model']}, round-robin of the same items, both "
            f"orders) against the human mean ranks: Kendall's τ_b {judge['tau_b_over_labels']:.3f} over "
            f"methods and anchors, {judge['tau_b_per_prompt_mean']:.3f} per prompt (mean over prompts); "
            f"Spearman's ρ {judge['spearman_over_labels']['rho']:.3f} (p = "
            f"{judge['spearman_over_labels']['p_value']:.3g}, n = {judge['spearman_over_labels']['n']}) over "
            f"methods and anchors, {judge['spearman_per_prompt_mean']:.3f} per prompt (mean over prompts)."
        )
    winrate = report["vs_winrate"]
    if winrate:
        lines.append(
            f"The runs' held-out {winrate['metric']} (eval.json, evaluation judge) against the human mean "
            f"ranks: Kendall's τ_b {winrate['tau_b']:.3f} over {len(winrate['labels'])} methods."
        )
    return "\n".join(lines) + "\n"


def report_study(folder: Path, key_path: Path, samples: int = 10_000) -> dict[str, Any]:
    """report.json and report.md of the rankings imported into `folder` (at least 2 annotators), with the
    judge's round-robin (judge.json) when there is one; returns the report."""
    study = load_study(folder)
    if not key_path.is_file():
        raise StudyError(f"no key at {key_path}; pass the key file export wrote with --key PATH.")
    rankings = [json.loads(p.read_text()) for p in sorted((folder / "rankings").glob("*.json"))]
    if len(rankings) < 2:
        raise StudyError(
            f"{len(rankings)} annotator(s) imported into {folder / 'rankings'}; agreement needs at "
            "least 2: tsrl-human-study import STUDY SHEET.csv …"
        )
    judge_path = folder / JUDGE_FILE
    judge = json.loads(judge_path.read_text()) if judge_path.is_file() else None
    report = summarise(study, json.loads(key_path.read_text()), rankings, judge, samples)
    write_json(folder / "report.json", report)
    (folder / "report.md").write_text(markdown(report))
    return report
