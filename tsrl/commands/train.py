"""`tsrl-train` (also `python -m tsrl.commands.train`, the form `accelerate launch -m` takes): compose
configs/config.yaml with the command line's overrides, train (tsrl.training.loop.train), then say where the run
is and how its held-out headline moved. The YAML's root schema, `run_schema`, is tsrl.config.RunConfig."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from tsrl.commands.base import CONFIG_PATH, check_recipes, run_or_exit, setup_or_exit
from tsrl.training.loop import train

LOOPING = 10.0  # repeated word bigrams (%) past which the end line flags a policy stuck in loops


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name="config")
def app(cfg: DictConfig) -> None:
    summary = run_or_exit(train, cfg)
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


def main() -> None:
    setup_or_exit()  # run_schema is stored with the components
    check_recipes(sys.argv[1:])
    app()


if __name__ == "__main__":
    main()
