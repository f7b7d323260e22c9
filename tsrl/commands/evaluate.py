"""`tsrl-eval`: a task's held-out metrics for one or more policies (tsrl.evaluation.report.evaluate_policies),
printed as a markdown table."""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

from tsrl.commands.base import CONFIG_PATH, run_or_exit, start
from tsrl.evaluation.report import EvalRunConfig, evaluate_policies, markdown


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name="eval")
def app(cfg: DictConfig) -> None:
    report = run_or_exit(evaluate_policies, cfg)
    print(markdown(report), end="")
    print(f"report: {Path(cfg.run_dir) / 'eval_report.json'} (and eval_report.md)")


def main() -> None:
    start(app, "eval_run_schema", EvalRunConfig)  # configs/eval.yaml


if __name__ == "__main__":
    main()
