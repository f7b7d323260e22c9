"""Command-line entry points, Hydra apps over configs/: `tsrl-train` (and recipes/), `tsrl-judge-check`."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable

import hydra
from omegaconf import DictConfig, OmegaConf

from tsrl.config import REPO, register_configs
from tsrl.errors import UserError

CONFIG_DIR = os.environ.get("TSRL_CONFIG_DIR", str(REPO / "configs"))


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


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")
def _train(cfg: DictConfig) -> None:
    from tsrl.training.loop import train

    summary = run_or_exit(train, cfg)
    if not summary["main_process"]:
        return
    if summary["winrate_start"] is not None:
        print(f"held-out win-rate vs reference anchors: {summary['winrate_start']:.1f}% -> "
              f"{summary['winrate_end']:.1f}% ({summary['winrate_end'] - summary['winrate_start']:+.1f} points)")
    print(f"run directory: {summary['run_dir']} (metrics.jsonl, eval.json, plot.png, checkpoints/)")


def train_main() -> None:
    register_configs()
    _train()


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="judge_check")
def _judge_check(cfg: DictConfig) -> None:
    from tsrl.judging.check import format_report, run_check

    report = run_or_exit(run_check, cfg)
    print(format_report(report))
    print(f"report: {Path(cfg.run_dir) / 'judge_check.json'}")
    if report["answered"] == 0:
        print(f"tsrl: judge check failed: the judge answered none of the {report['questions']} questions "
              "(errors above).", file=sys.stderr)
        sys.exit(1)
    if report["accuracy"] < cfg.check.min_accuracy:
        print(f"tsrl: judge check failed: accuracy {100 * report['accuracy']:.1f}% is below check.min_accuracy="
              f"{cfg.check.min_accuracy}.", file=sys.stderr)
        sys.exit(1)


def judge_check_main() -> None:
    register_configs()
    _judge_check()


if __name__ == "__main__":
    train_main()
