"""`tsrl-judge-check`: measure a judge on the task's reference anchors (tsrl.calibration.check.run_check), print the
report, and exit with status 1 when the judge answered nothing or scored below check.min_accuracy."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from tsrl.calibration.check import JudgeCheckRunConfig, format_report, run_check
from tsrl.commands.base import CONFIG_PATH, run_or_exit, start


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name="judge_check")
def app(cfg: DictConfig) -> None:
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


def main() -> None:
    start(app, "check_schema", JudgeCheckRunConfig)  # configs/judge_check.yaml


if __name__ == "__main__":
    main()
