"""Setup on several processes, as an 8-GPU launch with a hosted judge runs it, rehearsed on 2 CPU processes:

- a ladder's round-robin that takes one process longer than the process group's timeout is shared: each process
  judges its part, every one ends with the same ladder (the one a single process builds), and the run goes on;
- the ladder step's anchors are written by the run's own generator on every process (its share), under ZeRO-3
  too, where loading a second policy on the main process alone would wait for the others forever.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tsrl.tasks.base import DATA_DIR
from tsrl.testing.cli import launch, read_metrics, tiny_overrides
from tsrl.testing.judge_server import JudgeServer

pytestmark = pytest.mark.slow


def train(cache_dir: Path, run_dir: Path, *extra: str) -> list[str]:
    return ["-m", "tsrl.commands.train", *tiny_overrides(cache_dir), f"run_dir={run_dir}", *extra]


def digests(output: str) -> list[str]:
    """The ladder digests the processes logged (one line per process and ladder)."""
    return re.findall(r"ladder: \d+ prompts ranked \(judged now; ladder ([0-9a-f]+)\)", output)


def test_a_ladder_judged_longer_than_the_collective_timeout_is_shared_and_the_run_goes_on(cache_dir, tmp_path):
    """4 humor prompts × 45 anchor pairs at 0.6 s a verdict, 4 at a time: 27 s for one process, past the 12 s the
    processes may wait for each other here. Two DDP processes judge 90 each and both hold the ladder one process
    builds; the calls are the same 180."""
    with JudgeServer(latency_s=0.6) as server:
        judge = ["judge=openai", f"judge.base_urls=[{server.url}]", "judge.api_key_env=", "judge.concurrency=4"]
        common = [*judge, "task.max_prompts=4", "trainer.max_steps=1", "trainer.eval.every=0"]
        common += ["trainer.eval.max_prompts=2", "trainer.checkpoint.every=0"]
        one = launch(
            None, train(cache_dir, tmp_path / "one", *common, f"reward.ladder_dir={tmp_path / 'l1'}"), cache_dir
        )
        assert one.returncode == 0, one.stderr[-3000:]
        two = launch(
            "ddp",
            train(
                cache_dir,
                tmp_path / "two",
                *common,
                f"reward.ladder_dir={tmp_path / 'l2'}",
                "trainer.collective_timeout_s=12",
            ),
            cache_dir,
        )
    assert two.returncode == 0, two.stderr[-4000:]
    said = two.stdout + two.stderr
    assert "each waits up to 12 s for the others at a collective (trainer.collective_timeout_s)" in said
    assert said.count("90 of them on this process of 2") == 2
    assert len(digests(said)) == 2 and set(digests(said)) == set(digests(one.stdout + one.stderr))
    ladder = [(tmp_path / run / "ladder.jsonl").read_text() for run in ("one", "two")]
    assert ladder[0] == ladder[1]
    calls = [json.loads((tmp_path / run / "setup.json").read_text())["judge_calls_setup"] for run in ("one", "two")]
    assert calls == [180, 180]
    assert len(read_metrics(tmp_path / "two")) == 1


def one_reference_copy(tmp_path: Path) -> Path:
    """The first four shipped humor prompts, each with its top anchor only: the shape of WebSight's data."""
    rows = [json.loads(line) for line in (DATA_DIR / "humor" / "train.jsonl").read_text().splitlines()[:4]]
    path = tmp_path / "one_ref.jsonl"
    path.write_text("".join(json.dumps({**row, "anchors": row["anchors"][:1]}) + "\n" for row in rows))
    return path


def test_the_ladder_step_writes_policy_anchors_on_every_zero3_process(cache_dir, tmp_path):
    """ladder.build=policy with reward.k=11 on humor (10 anchors a prompt) under 2 ZeRO-3 processes: each writes
    its half of the prompts' anchors with the run's generator (the main process alone, loading a policy of its own
    inside zero.Init, waited for the others forever), and the run trains its step."""
    run = tmp_path / "run"
    result = launch(
        "zero3",
        train(
            cache_dir,
            run,
            "reward.k=11",
            "ladder.build=policy",
            "task.max_prompts=4",
            "trainer.max_steps=1",
            "trainer.eval.every=0",
            "trainer.eval.max_prompts=2",
            f"reward.ladder_dir={tmp_path / 'ladders'}",
            "trainer.collective_timeout_s=120",
        ),
        cache_dir,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    said = result.stdout + result.stderr
    assert "writing 4 more per prompt" in said and "2 processes share the prompts" in said
    rows = [json.loads(line) for line in (run / "ladder_anchors.jsonl").read_text().splitlines()]
    assert [len(r["anchors"]) for r in rows] == [14] * 4  # 10 of the data's + one per tier
    assert len(read_metrics(run)) == 1
