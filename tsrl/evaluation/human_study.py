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
against the runs' held-out win-rates (eval.json). The sheets: tsrl.evaluation.study_sheets; the report's
numbers: tsrl.evaluation.study_report; the math: tsrl.ranking.agreement; the command line: tsrl.commands.human_study.
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

from tsrl.config import CONFIG_PACKAGE, register_configs
from tsrl.evaluation import HEADLINE, HELDOUT_FILE
from tsrl.evaluation.study_report import ANCHOR, markdown, summarise
from tsrl.evaluation.study_sheets import StudyError, read_sheet, write_sheets
from tsrl.evaluation.winrate import reference_set
from tsrl.judging import build_judge, clean_judge_config, close_judge, judge_identity
from tsrl.tasks import build_task
from tsrl.types import PairRequest

STUDY_FILE, JUDGE_FILE, KEY_FILE = "study.json", "judge.json", "key/KEY-item-to-method-DO-NOT-SHARE.json"


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

    register_configs()
    with initialize_config_module(CONFIG_PACKAGE, version_base="1.3"):
        return compose("config", overrides=list(overrides))


def load_task(overrides: Sequence[str]) -> Any:
    from omegaconf import OmegaConf

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
    if out.exists() and not out.is_dir():
        raise StudyError(f"--out {out} is a file; give a folder for the study.")
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
    evals = json.loads(path.read_text())
    metric = next((k for k, _ in HEADLINE.values() if k in evals["latest"]), None)
    return {} if metric is None else {"metric": metric, "value": evals["latest"][metric], "judge": evals.get("judge")}


def load_study(folder: Path) -> dict:
    if not (folder / STUDY_FILE).is_file():
        raise StudyError(
            f"{folder} is not a study folder (no {STUDY_FILE}); give the --out folder of tsrl-human-study export."
        )
    return read_study_json(folder / STUDY_FILE, "export it again into a new folder")


def read_study_json(path: Path, fix: str) -> Any:
    """The JSON in one of a study's files, or a StudyError naming the file and `fix` (a hand-edited or truncated
    file otherwise ends in a parser's traceback)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise StudyError(f"{path} is unusable ({type(err).__name__}: {err}); {fix}.") from None


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


def report_study(folder: Path, key_path: Path, samples: int = 10_000) -> dict[str, Any]:
    """report.json and report.md of the rankings imported into `folder` (at least 2 annotators), with the
    judge's round-robin (judge.json) when there is one; returns the report."""
    study = load_study(folder)
    if not key_path.is_file():
        raise StudyError(f"no key at {key_path}; pass the key file export wrote with --key PATH.")
    if samples < 1:
        raise StudyError(f"--bootstrap {samples}: the intervals need at least 1 resample (10000 by default).")
    again = "import that annotator's sheet again with --replace"
    rankings = [read_study_json(p, again) for p in sorted((folder / "rankings").glob("*.json"))]
    if len(rankings) < 2:
        raise StudyError(
            f"{len(rankings)} annotator(s) imported into {folder / 'rankings'}; agreement needs at "
            "least 2: tsrl-human-study import STUDY SHEET.csv …"
        )
    judge_path = folder / JUDGE_FILE
    judge = read_study_json(judge_path, "run tsrl-human-study judge again") if judge_path.is_file() else None
    key = read_study_json(key_path, "pass the key file export wrote with --key PATH")
    report = summarise(study, key, rankings, judge, samples)
    write_json(folder / "report.json", report)
    (folder / "report.md").write_text(markdown(report))
    return report
