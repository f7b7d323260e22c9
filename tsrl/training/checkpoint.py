"""Checkpoints: accelerate state (model, optimizer, scheduler, every process's RNG; under DeepSpeed the engine's
own checkpoint, each process writing its partitions) + the policy as one consolidated Hugging Face folder
(`policy/`, merged under LoRA, with the adapter alone in `policy/adapter/`) + the trainer's own position (step,
data sampler). `trainer_state.json` is written
last, so a checkpoint without it is incomplete and never resumed from. Also the run's `done.json` (it reached its
end under these limits) and the process RNG states a stopped step restores."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from tsrl.errors import ConfigError, DataError, read_json

if TYPE_CHECKING:
    from tsrl.config import TrainerConfig

STATE_FILE = "trainer_state.json"


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    return run_dir / "checkpoints" / f"step_{step:06d}"


def complete_checkpoints(run_dir: Path) -> list[Path]:
    root = run_dir / "checkpoints"
    return sorted(p for p in root.glob("step_*") if (p / STATE_FILE).is_file()) if root.is_dir() else []


def find_resume(run_dir: Path, resume: str) -> Path | None:
    """The checkpoint to resume from: none, the newest complete one (auto), or an explicit directory."""
    if resume == "never":
        return None
    if resume == "auto":
        found = complete_checkpoints(run_dir)
        return found[-1] if found else None
    path = Path(resume).expanduser()
    if not (path / STATE_FILE).is_file():
        raise ConfigError(
            f"trainer.checkpoint.resume={resume!r} is not a complete checkpoint directory "
            f"(no {STATE_FILE}); use 'auto', 'never' or a path under <run_dir>/checkpoints/."
        )
    return path


def save_checkpoint(accelerator, learner, path: Path, trainer_state: dict, keep: int) -> None:
    """Collective: every process calls it."""
    accelerator.save_state(str(path))
    learner.save_pretrained(path / "policy")
    if accelerator.is_main_process:
        (path / STATE_FILE).write_text(json.dumps(trainer_state, indent=1))
        for old in complete_checkpoints(path.parent.parent)[:-keep] if keep > 0 else []:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()


def load_checkpoint(accelerator, path: Path) -> dict:
    """The trainer state of the checkpoint at `path`, its weights, optimizer and RNG loaded into `accelerator`'s
    objects; an unusable checkpoint is one sentence naming it (the state is read first: a cheap check)."""
    fix = "delete that folder to resume from the one before it, or start afresh with trainer.checkpoint.resume=never."
    state = read_json(path / STATE_FILE, "checkpoint state", fix)
    try:
        accelerator.load_state(str(path))
    except (OSError, RuntimeError, ValueError, KeyError) as err:
        raise DataError(f"The checkpoint {path} could not be loaded ({type(err).__name__}: {err}); {fix}") from None
    return state


DONE_FILE = "done.json"


def mark_finished(run_dir: Path, tcfg: TrainerConfig, step: int, reason: str) -> None:
    """done.json: the run reached its end under these limits (see finished_run)."""
    (run_dir / DONE_FILE).write_text(
        json.dumps(
            {"step": step, "reason": reason, "max_steps": tcfg.max_steps, "max_judge_calls": tcfg.max_judge_calls}
        )
    )


def finished_run(run_dir: Path, tcfg: TrainerConfig) -> dict | None:
    """eval.json of a run that already reached its end under the same limits, when trainer.checkpoint.resume=auto
    (raising max_steps or max_judge_calls continues it instead); None otherwise."""
    done, evals = run_dir / DONE_FILE, run_dir / "eval.json"
    if tcfg.checkpoint.resume != "auto" or not done.is_file() or not evals.is_file():
        return None
    mark = read_json(done, "end-of-run mark", "delete it and run again (the run resumes from its checkpoints).")
    if (mark["max_steps"], mark["max_judge_calls"]) != (tcfg.max_steps, tcfg.max_judge_calls):
        return None
    summary = read_json(evals, "held-out summary", "delete it and its done.json, and run again.")
    return summary if summary["latest"]["step"] == mark["step"] else None


def capture_rng() -> tuple:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    return random.getstate(), np.random.get_state(), torch.get_rng_state(), cuda


def restore_rng(states: tuple) -> None:
    python, numpy_state, torch_state, cuda = states
    random.setstate(python)
    np.random.set_state(numpy_state)
    torch.set_rng_state(torch_state)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)
