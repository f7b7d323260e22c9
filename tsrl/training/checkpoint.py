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

import numpy as np
import torch

from tsrl.config import TrainerConfig
from tsrl.errors import ConfigError, DataError, read_json
from tsrl.training.collective import gather

STATE_FILE = "trainer_state.json"


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    return run_dir / "checkpoints" / f"step_{step:06d}"


def complete_checkpoints(run_dir: Path) -> list[Path]:
    root = run_dir / "checkpoints"
    return sorted(p for p in root.glob("step_*") if (p / STATE_FILE).is_file()) if root.is_dir() else []


def kept_checkpoint(run_dir: Path) -> str:
    """What a run stopped mid-way (Ctrl-C) keeps: its newest complete checkpoint, or that it has none yet."""
    found = complete_checkpoints(run_dir)
    if not found:
        return f"no checkpoint in {run_dir} yet (trainer.checkpoint.every=N saves one every N steps)"
    return f"kept {found[-1]} (step {int(found[-1].name.removeprefix('step_'))})"


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
    """Collective: every process calls it. With several processes, `pending` (trainer.pipeline=overlap's groups in
    flight) becomes every process's, in process order: each scored its own, and each scores its own again on
    resume (`pending_groups`)."""
    if accelerator.num_processes > 1:
        every = gather(accelerator, trainer_state["pending"])
        trainer_state = {**trainer_state, "pending": every if any(every) else None}
    accelerator.save_state(str(path))
    learner.save_pretrained(path / "policy")
    if accelerator.is_main_process:
        (path / STATE_FILE).write_text(json.dumps(trainer_state, indent=1))
        for old in complete_checkpoints(path.parent.parent)[:-keep] if keep > 0 else []:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()


def pending_groups(state: dict, rank: int, processes: int) -> dict | None:
    """This process's groups in flight in a checkpoint's state (one process: the state's own; several: its entry
    of the per-process list), or a ConfigError when the checkpoint was written by another number of processes."""
    pending = state.get("pending")
    if not isinstance(pending, list):
        if pending and processes > 1:
            raise ConfigError(
                "This checkpoint holds the groups in flight of one process (trainer.pipeline=overlap); resume it on "
                "one process, or with trainer.checkpoint.resume=never."
            )
        return pending
    if len(pending) != processes:
        raise ConfigError(
            f"This checkpoint holds the groups in flight of {len(pending)} processes (trainer.pipeline=overlap), but "
            f"the run has {processes}; resume it on {len(pending)}, or with trainer.checkpoint.resume=never."
        )
    return pending[rank]


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
