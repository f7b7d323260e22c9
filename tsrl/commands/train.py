"""`tsrl-train` (also `python -m tsrl.commands.train`, the form `accelerate launch -m` takes): compose
configs/config.yaml with the command line's overrides, train (tsrl.training.loop.train), then say where the run
is and how its held-out headline moved. The YAML's root schema, `run_schema`, is tsrl.config.RunConfig."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from tsrl.commands.base import CONFIG_PATH, check_recipes, command_line, run_app, run_or_exit, setup_or_exit
from tsrl.config import RunConfig
from tsrl.reproduce.sweep import close_sweep
from tsrl.training.checkpoint import kept_checkpoint
from tsrl.training.loop import train

RESUME = "trainer.checkpoint.resume=auto"
LOOPING = 10.0  # repeated word bigrams (%) past which the end line flags a policy stuck in loops


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name="config")
def app(cfg: DictConfig) -> None:
    summary = run_or_exit(train, cfg, stopped)
    if not summary["main_process"]:
        return
    for line in end_lines(summary):
        print(line)


def end_lines(summary: dict) -> list[str]:
    """What a finished run says: already done, how the held-out headline and the samples' repetition moved, where
    the run is."""
    lines = []
    if summary.get("already_done"):
        lines.append(
            f"{summary['run_dir']} already finished (done.json); nothing to train. Raise trainer.max_steps or "
            "trainer.max_judge_calls to continue it, or set trainer.checkpoint.resume=never to train it again."
        )
    if summary["heldout_start"] is not None:
        start, end = summary["heldout_start"], summary["heldout_end"]
        lines.append(f"{summary['headline']}: {start:.1f}% -> {end:.1f}% ({end - start:+.1f} points)")
    if summary.get("repeated_end") is not None:
        start, end = summary["repeated_start"], summary["repeated_end"]
        looping = f" (over {LOOPING:g}%: samples repeat themselves; read heldout.jsonl)" if end > LOOPING else ""
        lines.append(f"held-out samples' repeated word bigrams: {start:.1f}% -> {end:.1f}%{looping}")
    lines.append(f"run directory: {summary['run_dir']} (metrics.jsonl, eval.json, plot.png, checkpoints/)")
    return lines


def stopped(cfg: RunConfig) -> str:
    """After Ctrl-C: the run's newest checkpoint, and the command that continues it — resume=auto in the same
    folder (run_dir; for a sweep its hydra.sweep.dir, whose finished runs it skips)."""
    sweep = (
        HydraConfig.get().sweep.dir if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN else ""
    )
    place = f"hydra.sweep.dir={sweep}" if sweep else f"run_dir={cfg.run_dir}"
    finished = "the sweep's finished runs, and " if sweep else ""
    return f"{finished}{kept_checkpoint(Path(cfg.run_dir))}; to resume: {command_line([place, RESUME])}"


def main() -> None:
    setup_or_exit()  # run_schema is stored with the components
    check_recipes(sys.argv[1:])
    try:
        run_app(app)
    except BaseException:  # a multirun that a failed cell or Ctrl-C stopped still gets its sweep.md, which says so
        close_sweep(stopped=True)
        raise


if __name__ == "__main__":
    main()
