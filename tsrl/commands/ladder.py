"""`tsrl-ladder`: build, rank and store a task's anchor ladders (tsrl.anchors.build.build_ladders) and print
their diversity report."""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

from tsrl.anchors.build import LadderRunConfig, build_ladders, format_report
from tsrl.commands.base import CONFIG_PATH, run_or_exit, start


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name="ladder")
def app(cfg: DictConfig) -> None:
    report = run_or_exit(build_ladders, cfg)
    print(format_report(report))
    print(f"ladders: {report['ladder_file']}; report: {Path(cfg.run_dir) / 'ladder_report.json'}")


def main() -> None:
    start(app, "ladder_run_schema", LadderRunConfig)  # configs/ladder.yaml


if __name__ == "__main__":
    main()
