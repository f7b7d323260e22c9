"""The 8-GPU paper run in miniature, on 2 CPU processes: TSRL Table 1's recipe (`recipes=paper/tsrl_table1
method=tsrl`) launched as the GPU run launches it — `accelerate launch` with DeepSpeed ZeRO-3, `generator=vllm`
(one engine per process), LoRA, `judge=openai` at a loopback server that answers late and fails 5 % of requests
(429 and 500, retried) — at its smallest size: the tiny policy, 8 training prompts with one reference each (the
shape of WebSight's data), so `ladder.build=auto` writes the policy's anchors first (every process its share, with
the run's own engines), then the judge ranks the ladders, sharing a round-robin that would take one process longer
than the process group's timeout (shrunk here to 20 s). The batch is the recipe's global batch, split between the
processes. A checkpoint at step 2, the run killed (SIGKILL, the whole process group) once it is written, resumed:
the resumed run's steps equal those of the run that was never interrupted.

This is the GPU job's rehearsal: keep it green.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tsrl.tasks.base import DATA_DIR
from tsrl.testing.cli import ROOT, cli_env, read_metrics
from tsrl.testing.judge_server import JudgeServer

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

STEPS, CHECKPOINT = 4, 2
COMPARED = ("reward/mean", "reward/std", "train/loss", "train/grad_norm", "completion/length_mean")


def one_reference_data(tmp_path: Path) -> Path:
    """Humor's first 8 training prompts, each with its top anchor only."""
    rows = [json.loads(line) for line in (DATA_DIR / "humor" / "train.jsonl").read_text().splitlines()[:8]]
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "one_reference.jsonl"
    path.write_text("".join(json.dumps({**row, "anchors": row["anchors"][:1]}) + "\n" for row in rows))
    return path


def overrides(tmp_path: Path, judge_url: str, run_dir: Path) -> list[str]:
    return [
        "recipes=paper/tsrl_table1",
        "method=tsrl",
        "task=humor",
        f"task.train_file={one_reference_data(tmp_path)}",
        "trainer.eval.max_prompts=2",
        "trainer.eval.samples=1",
        f"trainer.eval.every={CHECKPOINT}",
        # the tiny policy in place of Llama-3.1-8B (head size 32, which vLLM's CPU attention needs)
        "model=tiny",
        f"model.cache_dir={tmp_path.parent / 'models'}",
        "model.warmstart_steps=30",
        "model.hidden_size=64",
        "model.num_layers=2",
        "model.num_heads=2",
        "model.vocab_size=600",
        "model.lora.r=8",
        "generator.max_new_tokens=12",
        "generator.enforce_eager=true",
        "judge.model=judge",
        f"judge.base_urls=[{judge_url}]",
        "judge.api_key_env=",
        "judge.concurrency=2",
        f"reward.ladder_dir={tmp_path / 'ladders'}",
        "trainer.prompts_per_step=4",
        "trainer.group_size=4",
        "trainer.micro_batch_size=8",
        f"trainer.max_steps={STEPS}",
        f"trainer.checkpoint.every={CHECKPOINT}",
        "trainer.collective_timeout_s=20",
        f"run_dir={run_dir}",
    ]


def launch_command(args: list[str]) -> tuple[list[str], dict[str, str]]:
    env = cli_env()
    env.pop("ACCELERATE_USE_CPU", None)  # with it accelerate would drop DeepSpeed
    accelerate = str(Path(sys.executable).parent / "accelerate")
    config = str(ROOT / "configs" / "accelerate" / "cpu_zero3.yaml")
    return [accelerate, "launch", "--config_file", config, "-m", "tsrl.commands.train", *args], env


def run_to_end(args: list[str]) -> subprocess.CompletedProcess:
    command, env = launch_command(args)
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1500)


def run_until_checkpoint(args: list[str], checkpoint: Path, log: Path) -> None:
    """Start the run and kill its whole process group (launcher and both ranks) once `checkpoint` is complete."""
    command, env = launch_command(args)
    with log.open("w") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True
        )
        deadline = time.monotonic() + 1500
        while not (checkpoint / "trainer_state.json").is_file():
            assert proc.poll() is None, (
                f"the run ended before its step-{CHECKPOINT} checkpoint:\n{log.read_text()[-4000:]}"
            )
            assert time.monotonic() < deadline, "no checkpoint in 25 minutes"
            time.sleep(0.5)
        # torch's launcher starts each rank in a session of its own, so killing the launcher's process group would
        # leave the ranks training on, beside the resumed run: every process the launch started is killed
        for pid in [*descendants(proc.pid), proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=60)


def descendants(root: int) -> list[int]:
    """Every process below `root` (children first found through /proc's parent ids), whatever their session."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            pid, rest = stat.read_text().split(" ", 1)
            parents.setdefault(int(rest.rsplit(")", 1)[1].split()[1]), []).append(int(pid))
    found, todo = [], [root]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def test_the_paper_recipe_on_two_zero3_processes_with_vllm_lora_and_a_slow_faulty_judge_resumes_exactly(tmp_path):
    with JudgeServer(latency_s=0.5, fault_rate=0.05, fault_kinds=("rate_limited", "server_error"), seed=1) as server:
        whole = run_to_end(overrides(tmp_path / "a", server.url, tmp_path / "whole"))
        assert whole.returncode == 0, whole.stderr[-4000:]
        split = tmp_path / "split"
        run_until_checkpoint(
            overrides(tmp_path / "b", server.url, split),
            split / "checkpoints" / f"step_{CHECKPOINT:06d}",
            tmp_path / "killed.log",
        )
        assert not (split / "checkpoints" / f"step_{STEPS:06d}").exists()
        resumed = run_to_end([*overrides(tmp_path / "b", server.url, split), "trainer.checkpoint.resume=auto"])
        assert resumed.returncode == 0, resumed.stderr[-4000:]
        # a rank that outlived the kill would have finished by now, beside the resumed run, and said so in its log
        assert "run directory:" not in (tmp_path / "killed.log").read_text()
        faults = server.stats["fault/rate_limited"] + server.stats["fault/server_error"]
    said = whole.stdout + whole.stderr
    assert "writing 4 more per prompt" in said and "2 processes share the prompts" in said  # the ladder step
    assert said.count("on this process of 2") == 2  # the round-robin, shared
    assert "each waits up to 20 s for the others" in said
    assert faults > 0  # the judge did fail, and the retries hid it
    a, b = read_metrics(tmp_path / "whole"), read_metrics(split)
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(1, STEPS + 1))
    for key in COMPARED:
        assert [r[key] for r in b] == pytest.approx([r[key] for r in a], rel=1e-5, abs=1e-7), key
    assert all(r["train/sampler_logprob_diff"] < 1e-4 for r in a + b)  # the engines sample from the learner's weights
    evals = [json.loads((run / "eval.json").read_text())["history"] for run in (tmp_path / "whole", split)]
    assert [e["winrate"] for e in evals[0]] == [e["winrate"] for e in evals[1]]
