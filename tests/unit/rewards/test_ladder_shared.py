"""A ladder's round-robin shared between processes: each judges its part, every one gathers the whole, and the
ladder equals the one a single process builds — injected noise included, each judgment drawing what it draws in
one process. Two processes are two threads here, agreeing through a barrier (ThreadCollective)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tsrl.anchors.build import BuildSettings
from tsrl.anchors.step import policy_share
from tsrl.judging import Noise, set_noise_stream
from tsrl.rewards import LadderConfig, LadderRegime, RegimeContext
from tsrl.rewards.base import SingleProcess, share
from tsrl.rewards.ladder import ladder_digest
from tsrl.testing.fakes import NumberTask, ScriptedJudge, number_prompt
from tsrl.types import Group, Rollout


class ThreadCollective:
    """One of `world_size` threads acting as processes: gather and from_main meet at a barrier."""

    def __init__(self, rank: int, world_size: int, board: list[Any], barrier: threading.Barrier) -> None:
        self.rank, self.world_size, self.board, self.barrier = rank, world_size, board, barrier
        self.is_main = rank == 0

    def gather(self, value: Any) -> list[Any]:
        self.board[self.rank] = value
        self.barrier.wait()
        every = list(self.board)
        self.barrier.wait()  # nobody writes the next value before everyone has read this one
        return every

    def from_main(self, value: Any) -> Any:
        return self.gather(value)[0]

    def mean(self, value: float) -> float:
        every = self.gather(value)
        return sum(every) / len(every)


def task() -> NumberTask:
    qualities = [[5, 1, 4, 0, 3, 2], [0, 2, 5, 1, 4, 3], [3, 4, 0, 5, 1, 2]]
    return NumberTask([number_prompt(f"p{i}", q) for i, q in enumerate(qualities)])


def build(collective: Any, ladder_dir: str, run_dir: Path) -> tuple[LadderRegime, ScriptedJudge]:
    """A ladder over task() judged through a noisy judge (a flip in 3 of 10 judgments)."""
    inner = ScriptedJudge()
    judge = Noise(inner, flip_prob=0.3, seed=7)
    set_noise_stream(judge, "setup")
    ctx = RegimeContext(task(), judge, "scripted", run_dir, collective=collective)
    return LadderRegime(LadderConfig(k=4, ladder_dir=ladder_dir), ctx), inner


@pytest.mark.parametrize("world_size", [2, 4])
def test_processes_share_the_round_robin_and_hold_the_ladder_one_process_builds(tmp_path, world_size):
    one, one_judge = build(SingleProcess(), str(tmp_path / "one"), tmp_path / "run1")
    assert len(one_judge.requests) == 3 * 15  # 3 prompts × 6·5/2 pairs

    board, barrier = [None] * world_size, threading.Barrier(world_size)
    built: list[tuple[LadderRegime, ScriptedJudge] | None] = [None] * world_size

    def process(rank: int) -> None:
        built[rank] = build(ThreadCollective(rank, world_size, board, barrier), str(tmp_path / "n"), tmp_path)

    threads = [threading.Thread(target=process, args=(rank,)) for rank in range(world_size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert all(b is not None for b in built)
    asked = [len(judge.requests) for _, judge in built]
    assert sum(asked) == 45 and max(asked) - min(asked) <= 1  # each judged its part, nothing twice
    assert [regime.build_calls for regime, _ in built] == asked
    for regime, _ in built:  # the same ladder on every process, and the one a single process builds
        assert ladder_digest(regime.ladders) == ladder_digest(one.ladders)
    flipped = [r.anchor.text.split()[0] for r in one.ladders["p0"]]
    assert flipped != sorted(flipped, reverse=True)  # the noise did reorder a ladder: the draws were compared


def test_a_stored_ladder_is_read_by_the_main_process_and_handed_to_the_others(tmp_path):
    build(SingleProcess(), str(tmp_path / "ladders"), tmp_path / "run")
    board, barrier = [None, None], threading.Barrier(2)
    built: list[Any] = [None, None]

    def process(rank: int) -> None:
        built[rank] = build(ThreadCollective(rank, 2, board, barrier), str(tmp_path / "ladders"), tmp_path)

    threads = [threading.Thread(target=process, args=(rank,)) for rank in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert [len(judge.requests) for _, judge in built] == [0, 0]
    assert ladder_digest(built[0][0].ladders) == ladder_digest(built[1][0].ladders)


@pytest.mark.parametrize("n,world", [(45, 2), (45, 4), (3, 4), (0, 2), (8, 8)])
def test_shares_cover_every_item_once_and_differ_by_one_at_most(n, world):
    parts = [share(n, ThreadCollective(rank, world, [], threading.Barrier(1))) for rank in range(world)]
    assert parts[0][0] == 0 and parts[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
    sizes = [hi - lo for lo, hi in parts]
    assert max(sizes) - min(sizes) <= 1


class EchoGenerator:
    """A Generator whose every completion names its prompt and seed; counts the prompts of each call."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def generate(self, prompts, n, max_new_tokens=None, greedy_first=False, emit=None, seeds=None):
        self.calls.append(len(prompts))
        return [
            Group(p, [1], [Rollout(f"{p.id} {seed + j}", [1], [0.0], False) for j in range(n)])
            for p, seed in zip(prompts, seeds)
        ]


@pytest.mark.parametrize("world_size", [2, 3])
def test_the_ladder_steps_anchors_do_not_depend_on_the_process_count(world_size):
    """Each process samples its part of the short prompts under seeds of the prompt's place: the parts put
    together are what one process writes. Every process asks as many prompts as the largest part (padding), so a
    collective generator stays in step."""
    short = [number_prompt(f"p{i}", [1]) for i in range(5)]
    build = BuildSettings(source="policy", tiers={"top": "Write your best.", "low": "Write badly."}, samples=2)
    one = policy_share(EchoGenerator(), build, short, (0, 5), (7, 1))
    parts, asked = [], []
    for rank in range(world_size):
        generator = EchoGenerator()
        lo, hi = share(5, ThreadCollective(rank, world_size, [], threading.Barrier(1)))
        parts += policy_share(generator, build, short, (lo, hi), (7, world_size))
        asked.append(generator.calls)
    assert [[a.text for a in p.anchors] for p in parts] == [[a.text for a in p.anchors] for p in one]
    assert [p.id for p in parts] == [p.id for p in short]
    assert len({a.text.split()[1] for p in one for a in p.anchors}) == 5 * 2 * 2  # no two samples share a seed
    assert len({tuple(calls) for calls in asked}) == 1  # the same number of prompts on every process
