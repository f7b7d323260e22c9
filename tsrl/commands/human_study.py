"""`tsrl-human-study`: export / import / judge / report of TSRL §4.12's blinded human study. What each step does,
the sheets and the report's statistics: tsrl.evaluation.human_study (its docstring describes the whole command),
tsrl.evaluation.study_sheets and tsrl.ranking.agreement; this module reads the command line, says what each step
did, and turns a StudyError into one sentence and exit status 2."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tsrl.evaluation import human_study
from tsrl.evaluation.human_study import (
    JUDGE_FILE,
    KEY_FILE,
    StudyError,
    build_study,
    check_export_folder,
    find_runs,
    heldout_metric,
    import_sheet,
    judge_study,
    load_study,
    load_task,
    markdown,
    report_study,
    save_study,
    study_task,
)


def export(args: argparse.Namespace) -> None:
    check_export_folder(args.out)
    runs = find_runs(args.runs, args.where, args.label_by.split(","))
    overrides = study_task(runs, args.overrides)
    task = load_task(overrides)
    study, key = build_study(task, runs, args.prompts, args.seed, args.anchors)
    study.update(task=task.name, task_overrides=[o for o in overrides if o.startswith("task")])
    key["runs"] = {r.label: {"run_dir": str(r.run_dir), "values": r.values, **heldout_metric(r.run_dir)} for r in runs}
    key_path = args.key or args.out / KEY_FILE
    save_study(args.out, study, key, args.annotators, key_path)
    used = len(study["prompts"])
    print(
        f"study: {used} prompts × {len(study['prompts'][0]['items'])} items ({len(runs)} runs: "
        f"{', '.join(r.label for r in runs)}; anchors) in {args.out}"
    )
    if used < args.prompts:
        print(
            f"note: {used} held-out prompts, not the {args.prompts} asked for (TSRL §4.12 uses 50 per task): the "
            "task's held-out split or the runs' evaluations have fewer (trainer.eval.max_prompts=0 evaluates all)."
        )
    print(f"sheets for the annotators: {args.out / 'sheets'}; the key, kept apart: {key_path}")


def import_sheets(args: argparse.Namespace) -> None:
    """Each sheet checked and stored on its own: a bad one is reported and skipped, the others are imported."""
    study = load_study(args.study)
    failures = 0
    for path in args.sheets:
        try:
            annotator, ranks = import_sheet(args.study, study, path, args.replace)
        except StudyError as err:
            failures += 1
            print(f"tsrl-human-study: not imported: {err}", file=sys.stderr)
            continue
        print(f"imported {annotator} from {path} ({len(ranks)} prompts)")
    if failures:
        sys.exit(2)


def judge(args: argparse.Namespace) -> None:
    judged = judge_study(args.study, args.overrides)
    missing = judged["missing_verdicts"]
    print(f"judge: {judged['pairs']} pairs ({missing} without a verdict) → {args.study / JUDGE_FILE}")


def report(args: argparse.Namespace) -> None:
    print(markdown(report_study(args.study, args.key or args.study / KEY_FILE, args.bootstrap)), end="")
    print(f"report: {args.study / 'report.md'} (and report.json)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tsrl-human-study", description=human_study.__doc__.splitlines()[0])
    steps = parser.add_subparsers(dest="command", required=True)
    ex = steps.add_parser("export", help="blinded ranking sheets from finished runs")
    ex.add_argument("--runs", type=Path, nargs="+", required=True, help="run directories or folders of runs")
    ex.add_argument("--out", type=Path, required=True, help="the study folder")
    ex.add_argument("--where", action="append", default=[], help="keep runs whose grid value key=value matches")
    ex.add_argument("--label-by", default="method", help="grid keys naming a run (comma-separated)")
    ex.add_argument("--prompts", type=int, default=50, help="held-out prompts (TSRL §4.12: 50 per task)")
    ex.add_argument("--annotators", type=int, default=6, help="sheets to write (TSRL §4.12: 6 annotators)")
    ex.add_argument("--seed", type=int, default=0, help="seed of the prompt draw and every shuffle")
    ex.add_argument(
        "--anchors",
        choices=["all", "reference"],
        default="all",
        help="every anchor of a prompt, or only the task's held-out reference set",
    )
    ex.add_argument("--key", type=Path, default=None, help=f"where the key goes (default OUT/{KEY_FILE})")
    ex.add_argument("overrides", nargs="*", help="task settings as the runs had them (task=… task.eval_file=…)")
    im = steps.add_parser("import", help="the annotators' filled CSV sheets")
    im.add_argument("study", type=Path)
    im.add_argument("sheets", type=Path, nargs="+")
    im.add_argument("--replace", action="store_true", help="replace an annotator imported before")
    ju = steps.add_parser("judge", help="a round-robin of each prompt's items with the clean judge")
    ju.add_argument("study", type=Path)
    ju.add_argument("overrides", nargs="*", help="the judge (judge=openai judge.model=…)")
    re = steps.add_parser("report", help="mean ranks, agreement, and the judge's agreement with the humans")
    re.add_argument("study", type=Path)
    re.add_argument("--key", type=Path, default=None, help=f"the key file (default STUDY/{KEY_FILE})")
    re.add_argument("--bootstrap", type=int, default=10_000, help="bootstrap resamples")
    return parser


STEPS = {"export": export, "import": import_sheets, "judge": judge, "report": report}


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        STEPS[args.command](args)
    except StudyError as err:
        print(f"tsrl-human-study: error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
