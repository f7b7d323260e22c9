"""Run records: metrics.jsonl (one object per step), eval.json, samples.jsonl, plot.png, optional wandb.

Only the main process writes. On resume, rows after the checkpoint's step are dropped so that the files
describe one trajectory.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from tsrl.errors import ConfigError
from tsrl.registry import LOGGERS
from tsrl.types import Group


@dataclass
class JsonlLoggerConfig:
    """Logger `jsonl`: metrics.jsonl, eval.json, samples.jsonl and plot.png in the run directory."""

    samples_every: int = 10
    """Write the step's completions with their rewards every N steps (0 = never)."""

    def __post_init__(self) -> None:
        if self.samples_every < 0:
            raise ConfigError(f"logger.samples_every must be >= 0 (0 = never), got {self.samples_every}.")


@dataclass
class WandbLoggerConfig(JsonlLoggerConfig):
    """Logger `wandb`: everything `jsonl` writes, plus a wandb run (offline unless mode says otherwise); the runs of
    one multirun share a wandb group, its sweep folder's name."""

    project: str = "tsrl"
    """wandb project."""
    entity: str = ""
    """wandb entity (empty = your default)."""
    mode: str = "offline"
    """offline | online | disabled."""


def _keep_until(path: Path, step: int) -> None:
    if path.is_file():
        rows = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= step]
        path.write_text("".join(line + "\n" for line in rows))


class RunLog:
    def __init__(
        self,
        run_dir: Path,
        logger_cfg: Any,
        config: dict,
        resume_step: int | None,
        enabled: bool,
        eval_judge: dict | None = None,
    ) -> None:
        self.run_dir, self.cfg, self.enabled = run_dir, logger_cfg, enabled
        self.eval_judge = eval_judge or {}  # the judge every held-out number was measured with
        self.metrics_path, self.samples_path = run_dir / "metrics.jsonl", run_dir / "samples.jsonl"
        self.eval_path, self.heldout_path = run_dir / "eval.json", run_dir / "heldout.jsonl"
        self.evals: list[dict] = []
        self.wandb = None
        if not enabled:
            return
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.json").write_text(json.dumps(config, indent=1, default=str))
        if resume_step is None:
            for path in (self.metrics_path, self.samples_path, self.eval_path, self.heldout_path):
                path.unlink(missing_ok=True)
        else:
            _keep_until(self.metrics_path, resume_step)
            _keep_until(self.samples_path, resume_step)
            _keep_until(self.heldout_path, resume_step)
            if self.eval_path.is_file():
                self.evals = [e for e in json.loads(self.eval_path.read_text())["history"] if e["step"] <= resume_step]
        self.wandb = LOGGERS.build(logger_cfg, run_dir, config)  # an external run (wandb) or None

    def log_step(self, step: int, metrics: dict[str, float]) -> None:
        if not self.enabled:
            return
        with self.metrics_path.open("a") as handle:
            handle.write(json.dumps({"step": step, **metrics}) + "\n")
        if self.wandb:
            self.wandb.log(metrics, step=step)

    def log_eval(self, step: int, result: dict[str, float], generations: Sequence[dict] = ()) -> None:
        """eval.json's history gains this evaluation; its held-out generations go to heldout.jsonl."""
        if not self.enabled:
            return
        with self.heldout_path.open("a") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in generations)
        self.evals.append({"step": step, **result})
        summary = {"judge": self.eval_judge, "start": self.evals[0], "latest": self.evals[-1], "history": self.evals}
        self.eval_path.write_text(json.dumps(summary, indent=1))
        if self.wandb:
            self.wandb.log({f"eval/{k}": v for k, v in result.items()}, step=step)
        self.plot()

    def log_samples(self, step: int, groups: Sequence[Group], rewards: np.ndarray) -> None:
        every = self.cfg.samples_every
        if not self.enabled or not every or step % every:
            return
        rows = [
            {
                "step": step,
                "prompt_id": g.prompt.id,
                "prompt": g.prompt.text,
                "completion": r.text,
                "reward": None if np.isnan(rewards[b, i]) else float(rewards[b, i]),
            }
            for b, g in enumerate(groups)
            for i, r in enumerate(g.rollouts)
        ]
        with self.samples_path.open("a") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in rows)
        if self.wandb:
            import wandb

            table = wandb.Table(
                columns=["step", "prompt", "completion", "reward"],
                data=[[r["step"], r["prompt"], r["completion"], r["reward"]] for r in rows],
            )
            self.wandb.log({"samples": table}, step=step)

    def plot(self) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        steps, rewards = [], []
        if self.metrics_path.is_file():
            for line in self.metrics_path.read_text().splitlines():
                row = json.loads(line)
                steps.append(row["step"])
                rewards.append(row["reward/mean"])
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
        left.plot(steps, rewards, color="tab:blue")
        left.set(title="train reward (win-rate over ladder anchors)", xlabel="step", ylabel="reward")
        key = "pass_ratio" if self.evals and "pass_ratio" in self.evals[0] else "winrate"
        right.plot([e["step"] for e in self.evals], [e[key] for e in self.evals], "o-", color="tab:red")
        title = "held-out pass ratio@n (verifier)" if key == "pass_ratio" else "held-out win-rate vs reference anchors"
        right.set(title=title, xlabel="step", ylabel=f"{key.replace('_', ' ')} (%)")
        for ax in (left, right):
            ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(self.run_dir / "plot.png", dpi=110)
        plt.close(fig)

    def close(self) -> None:
        if self.enabled:
            self.plot()
        if self.wandb:
            self.wandb.finish()


def _start_wandb(cfg: Any, run_dir: Path, config: dict):
    import wandb

    return wandb.init(
        project=cfg.project,
        entity=cfg.entity or None,
        mode=cfg.mode,
        dir=str(run_dir),
        config=config,
        name=run_dir.name,
        group=sweep_group(),
        reinit="finish_previous",
    )


def sweep_group() -> str | None:
    """The wandb group of a multirun's runs: its sweep folder's name (hydra.sweep.dir); None for a single run."""
    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return None
    return Path(HydraConfig.get().sweep.dir).name


LOGGERS.register("jsonl", JsonlLoggerConfig, lambda cfg, run_dir, config: None)
LOGGERS.register("wandb", WandbLoggerConfig, _start_wandb)
