"""Command-line entry points, Hydra apps over the configs shipped in the package: `tsrl-train`,
`tsrl-judge-check`, `tsrl-eval` and `tsrl-ladder`.

configs/ and recipes/ sit at the repository root and are installed as the packages tsrl.configs and
tsrl.configs.recipes (pyproject.toml maps the folders), so both commands find them from any directory, in an
editable install and from a wheel alike. A folder of your own joins the search path with `--config-dir DIR`
(its recipes/ folder adds recipes).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from tsrl.config import register_configs
from tsrl.errors import UserError

CONFIG_PACKAGE = "tsrl.configs"


def requested_recipes(args: Any) -> list[str]:
    """The recipe names that `recipes=<name>` (or a sweep `recipes=a,b`) asks for on the command line."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep
    from hydra.errors import OverrideParseException

    try:
        overrides = OverridesParser.create().parse_overrides(args.overrides)
    except OverrideParseException:
        return []  # Hydra reports the syntax error itself
    names: list[str] = []
    for override in overrides:
        if override.key_or_group != "recipes" or override.is_delete():
            continue
        value = override.value()
        values = value.list if isinstance(value, ChoiceSweep) else [value]  # glob(...) and ranges: Hydra's
        names += [str(v) for v in values if v is not None]  # recipes=null: no recipe
    return names


def check_recipes(argv: list[str]) -> None:
    """Exit with status 2 and one sentence when `recipes=<name>` names no file in the installed recipes/ or
    in <--config-dir>/recipes/ (Hydra alone fails later, with status 1 and its search path)."""
    from hydra._internal.utils import get_args_parser  # the parser @hydra.main reads sys.argv with

    args, _ = get_args_parser().parse_known_args(argv)
    folders = [Path(os.environ["TSRL_RECIPES_ROOT"]) / "recipes"]
    if args.config_dir:
        if not Path(args.config_dir).is_dir():
            return  # Hydra says that the folder is not there
        folders.insert(0, Path(args.config_dir).resolve() / "recipes")
    for name in requested_recipes(args):
        if any((folder / f"{name}.yaml").is_file() for folder in folders):
            continue
        listed = [(", ".join(sorted(p.stem for p in folder.glob("*.yaml"))), folder) for folder in folders]
        known = "; ".join(f"{stems} (from {folder})" for stems, folder in listed if stems) or "none"
        print(f"tsrl: error: recipes={name} is not a recipe; the recipes are: {known}.", file=sys.stderr)
        sys.exit(2)


def to_run_config(cfg: DictConfig) -> Any:
    """The composed Hydra config as typed dataclasses; run_dir defaults to Hydra's output directory."""
    if not cfg.run_dir:
        from hydra.core.hydra_config import HydraConfig

        cfg.run_dir = HydraConfig.get().runtime.output_dir if HydraConfig.initialized() else "runs/default"
    return OmegaConf.to_object(cfg)


def run_or_exit(job: Callable[[Any], dict], cfg: DictConfig) -> dict:
    """job(typed config); a UserError ends the process with its one sentence and exit status 2."""
    try:
        return job(to_run_config(cfg))
    except UserError as err:
        print(f"tsrl: error: {err}", file=sys.stderr)
        sys.exit(2)


@hydra.main(version_base="1.3", config_path=f"pkg://{CONFIG_PACKAGE}", config_name="config")
def _train(cfg: DictConfig) -> None:
    from tsrl.training.loop import train

    summary = run_or_exit(train, cfg)
    if not summary["main_process"]:
        return
    if summary.get("already_done"):
        print(
            f"{summary['run_dir']} already finished (done.json); nothing to train. Raise trainer.max_steps or "
            "trainer.max_judge_calls to continue it, or set trainer.checkpoint.resume=never to train it again."
        )
    if summary["heldout_start"] is not None:
        start, end = summary["heldout_start"], summary["heldout_end"]
        print(f"{summary['headline']}: {start:.1f}% -> {end:.1f}% ({end - start:+.1f} points)")
    print(f"run directory: {summary['run_dir']} (metrics.jsonl, eval.json, plot.png, checkpoints/)")


def setup_or_exit() -> None:
    """Register every component (plugins included); a plugin that cannot load is one sentence, exit 2."""
    try:
        register_configs()
    except UserError as err:
        print(f"tsrl: error: {err}", file=sys.stderr)
        sys.exit(2)


def train_main() -> None:
    setup_or_exit()
    check_recipes(sys.argv[1:])
    _train()


@hydra.main(version_base="1.3", config_path=f"pkg://{CONFIG_PACKAGE}", config_name="judge_check")
def _judge_check(cfg: DictConfig) -> None:
    from tsrl.judging.check import format_report, run_check

    report = run_or_exit(run_check, cfg)
    print(format_report(report))
    print(f"report: {Path(cfg.run_dir) / 'judge_check.json'}")
    if report["answered"] == 0:
        print(
            f"tsrl: judge check failed: the judge answered none of the {report['questions']} questions (errors above).",
            file=sys.stderr,
        )
        sys.exit(1)
    if report["accuracy"] < cfg.check.min_accuracy:
        print(
            f"tsrl: judge check failed: accuracy {100 * report['accuracy']:.1f}% is below check.min_accuracy="
            f"{cfg.check.min_accuracy}.",
            file=sys.stderr,
        )
        sys.exit(1)


def start(app: Callable[[], None], schema_name: str, schema: type) -> None:
    """Register the components and a tool's typed config (its YAML's first default), then run its Hydra app."""
    from hydra.core.config_store import ConfigStore

    setup_or_exit()
    ConfigStore.instance().store(name=schema_name, node=schema)
    app()


def judge_check_main() -> None:
    from tsrl.judging.check import JudgeCheckRunConfig

    start(_judge_check, "check_schema", JudgeCheckRunConfig)  # configs/judge_check.yaml


@hydra.main(version_base="1.3", config_path=f"pkg://{CONFIG_PACKAGE}", config_name="eval")
def _eval(cfg: DictConfig) -> None:
    from tsrl.evaluation.report import evaluate_policies, markdown

    report = run_or_exit(evaluate_policies, cfg)
    print(markdown(report), end="")
    print(f"report: {Path(cfg.run_dir) / 'eval_report.json'} (and eval_report.md)")


def eval_main() -> None:
    from tsrl.evaluation.report import EvalRunConfig

    start(_eval, "eval_run_schema", EvalRunConfig)  # configs/eval.yaml


@hydra.main(version_base="1.3", config_path=f"pkg://{CONFIG_PACKAGE}", config_name="ladder")
def _ladder(cfg: DictConfig) -> None:
    from tsrl.rewards.ladder_tool import build_ladders, format_report

    report = run_or_exit(build_ladders, cfg)
    print(format_report(report))
    print(f"ladders: {report['ladder_file']}; report: {Path(cfg.run_dir) / 'ladder_report.json'}")


def ladder_main() -> None:
    from tsrl.rewards.ladder_tool import LadderRunConfig

    start(_ladder, "ladder_run_schema", LadderRunConfig)  # configs/ladder.yaml


if __name__ == "__main__":
    train_main()
