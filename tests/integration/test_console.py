"""What tsrl-train prints: its own lines and no library's notes (those go to the run's log file, Hydra's
<output dir>/train.log), a progress bar that ends at its last step, --help without the typed schemas, and one line
on Ctrl-C — what was kept and the command that resumes — with exit status 130."""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import time

import pytest
import torch

from tsrl.errors import INTERRUPTED
from tsrl.testing.cli import TRAIN, cli_env, read_metrics, tiny_overrides

pytestmark = pytest.mark.slow

LIBRARY_NOTES = (  # what a run printed from DeepSpeed, accelerate and huggingface_hub
    "Setting accelerator to CPU",
    "Removed shared tensor",
    "Model weights successfully saved",
)


def test_a_run_prints_no_library_notes_and_its_log_file_keeps_them(tsrl, tmp_path):
    """The console script in a new interpreter, so that DeepSpeed is imported (and says its piece) in the run."""
    result = tsrl("trainer.max_steps=2", f"hydra.run.dir={tmp_path / 'hydra'}", new_process=True)
    assert result.returncode == 0, result.stderr[-3000:]
    printed = result.stdout + result.stderr
    assert not [note for note in LIBRARY_NOTES if note in printed], printed[-3000:]
    assert not re.search(r"\w+Warning\b|\]\[(?!tsrl\])[^\]]*\]\[WARNING\]", printed), printed[-3000:]
    log = (tmp_path / "hydra" / "train.log").read_text()
    kept = LIBRARY_NOTES if not torch.cuda.is_available() else LIBRARY_NOTES[1:]  # DeepSpeed's: without a GPU only
    assert all(note in log for note in kept), log[-3000:]
    assert "4 held-out prompts × 1 sample × their reference anchors" in result.stdout  # one sample, not "1 samples"
    assert "| 2/2 [" in result.stderr  # the bar ends at the last step, not at 1/2


def test_help_lists_the_options_of_each_group_without_their_schemas(cli, tmp_path):
    result = cli(["--help"], tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "\nalgo: cispo, dpo, dr_grpo, grpo, sft\n" in result.stdout and "trainer: default\n" in result.stdout
    assert "_schema" not in result.stdout


def test_ctrl_c_stops_a_run_with_one_line_that_names_its_checkpoint_and_the_command_that_resumes(
    cli, cache_dir, tmp_path
):
    """A real SIGINT to tsrl-train mid-run; then the printed command, with a step limit, resumes that run."""
    run = tmp_path / "run"
    args = [*tiny_overrides(cache_dir), "trainer.max_steps=500", "trainer.checkpoint.every=1", f"run_dir={run}"]
    proc = subprocess.Popen(
        [TRAIN, *args], env=cli_env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 300
    while not (run / "checkpoints" / "step_000001" / "trainer_state.json").is_file() and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == INTERRUPTED and "Traceback" not in stderr, stderr[-3000:]
    line = stderr.strip().splitlines()[-1]
    kept = rf"kept {re.escape(str(run))}/checkpoints/step_\d+ \(step (\d+)\)"
    found = re.fullmatch(rf"tsrl-train: stopped by Ctrl-C; {kept}; to resume: (.*)", line)
    assert found, stderr[-3000:]
    step, resume = int(found[1]), shlex.split(found[2])
    assert resume[0] == "tsrl-train" and resume[-2:] == [f"run_dir={run}", "trainer.checkpoint.resume=auto"]
    again = cli([*resume[1:], f"trainer.max_steps={step + 1}"], tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert [r["step"] for r in read_metrics(run)] == list(range(1, step + 2))  # steps 1..step kept, one more trained
