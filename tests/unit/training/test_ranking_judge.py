"""Who ranks the anchor ladders (ladder.judge) and whose seed the injected noise draws under (judge.noise_seed).

TSRL §2.2 freezes the ranked ladder as "a stable reference frame", §4.5 varies the noise "keeping all other training
parameters fixed" and §4.4 swaps the judge "keeping anchors, prompts, and hyperparameters unchanged": a noise or
weak-judge cell must compare against the clean cell's anchors. Built here as tsrl-train builds them (open_judges,
regime_context, build_regime) on humor's 64 training prompts and their 10 shipped anchors, with the simulated judge.
"""

from __future__ import annotations

import logging
from pathlib import Path

from hydra import compose, initialize_config_module

from tsrl.commands.base import to_run_config
from tsrl.config import register_configs
from tsrl.judging import close_judge, set_noise_stream, step_stream
from tsrl.rewards import build_regime
from tsrl.spend import estimate
from tsrl.tasks import build_task
from tsrl.training.setup import open_judges, regime_context
from tsrl.types import PairRequest

CLEAN = ["model=tiny", "judge=rubric_sim", "judge@eval_judge=rubric_sim", "task=humor", "method=tsrl", "reward.k=4"]
WEAK = ["method=tsrl_bad_judge", "judge.profile=gpt35-mtbench"]  # the CPU stand-in of §4.4's weak judge


def run_config(tmp: Path, overrides: list[str]):
    register_configs()
    with initialize_config_module("tsrl.configs", version_base="1.3"):
        composed = compose("config", overrides=[*CLEAN, f"run_dir={tmp / 'run'}", *overrides])
    return to_run_config(composed)


def selected(tmp: Path, *overrides: str) -> tuple[dict[str, list[str]], float]:
    """Each prompt's k selected anchors, and the judge calls setup made."""
    cfg = run_config(tmp, [f"reward.ladder_dir={tmp / 'ladders'}", *overrides])
    task = build_task(cfg.task)
    judge, eval_judge = open_judges(cfg, task)
    try:
        regime = build_regime(cfg.reward, regime_context(cfg, task, judge))
        calls = judge.drain_metrics().get("calls", 0.0)
    finally:
        close_judge(judge)
        close_judge(eval_judge)
    return {pid: [r.anchor.text for r in rungs] for pid, rungs in regime.selected.items()}, calls


def moved(a: dict[str, list[str]], b: dict[str, list[str]]) -> int:
    return sum(a[pid] != b[pid] for pid in a)


def test_noise_and_weak_judge_cells_compare_against_the_clean_cells_anchors(tmp_path):
    """The anchors selected at p = 0.3 and with the weak judge are those at p = 0, and the ladder the clean cell
    stored is read again (no judge call); ladder.judge=train ranks with the training judge as it is, and the
    anchors move (the behaviour before ladder.judge existed, which this test would catch)."""
    clean, clean_calls = selected(tmp_path)
    assert len(clean) == 64 and clean_calls == 64 * 45  # the round-robin, one order per pair
    noisy, noisy_calls = selected(tmp_path, "judge.flip_prob=0.3")
    weak, weak_calls = selected(tmp_path, *WEAK)
    assert noisy == clean and weak == clean
    assert noisy_calls == weak_calls == 0  # the clean cell's stored ladder: the same judge ranked it
    noisy_ladder, calls = selected(tmp_path, "judge.flip_prob=0.3", "ladder.judge=train")
    assert calls == 64 * 45 and moved(noisy_ladder, clean) > 32
    weak_ladder, _ = selected(tmp_path, *WEAK, "ladder.judge=train")
    assert moved(weak_ladder, clean) > 32


def test_a_run_that_ranks_with_its_noisy_or_weak_judge_says_so_and_names_the_switch(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="tsrl")
    selected(tmp_path, "judge.flip_prob=0.3")
    assert "ranked by the training judge without its injected noise" in caplog.text
    caplog.clear()
    selected(tmp_path, *WEAK)
    assert "ranked by the strong evaluation judge" in caplog.text
    caplog.clear()
    selected(tmp_path, "judge.flip_prob=0.3", "ladder.judge=train")
    assert "ladder.judge=train: the anchor ladders are ranked by the noisy training judge (judge.flip_prob=0.3)" in (
        caplog.text
    )
    assert "ladder.judge=clean ranks them with the clean judge" in caplog.text


def flips(tmp: Path, *overrides: str) -> list[bool]:
    """Which of 200 distinct comparisons the training judge's injected noise flips at step 1 (p = 0.5)."""
    cfg = run_config(tmp, ["judge.flip_prob=0.5", "judge.tau=0.001", *overrides])
    task = build_task(cfg.task)
    prompt = task.prompts("train")[0]
    judge, eval_judge = open_judges(cfg, task)
    clean = eval_judge.compare([PairRequest(prompt, f"joke {i}", f"pun {i}") for i in range(200)])
    try:
        set_noise_stream(judge, *step_stream(1))
        noisy = judge.compare([PairRequest(prompt, f"joke {i}", f"pun {i}") for i in range(200)])
    finally:
        close_judge(judge)
        close_judge(eval_judge)
    return [round(a.p_first) != round(b.p_first) for a, b in zip(noisy, clean)]


def test_each_run_seed_draws_its_own_noise_unless_judge_noise_seed_pins_it(tmp_path):
    """Seeds 0 and 1 flip different judgments (before judge.noise_seed, every seed flipped the same ones); a pinned
    judge.noise_seed gives every run seed one realisation."""
    seed0, seed1 = flips(tmp_path, "seed=0"), flips(tmp_path, "seed=1")
    assert 60 <= sum(seed0) <= 140 and seed0 != seed1
    assert sum(a != b for a, b in zip(seed0, seed1)) > 50  # independent draws: about 100 of 200 differ
    assert flips(tmp_path, "seed=0", "judge.noise_seed=7") == flips(tmp_path, "seed=1", "judge.noise_seed=7")


def test_the_spend_preview_counts_the_ladder_the_clean_judge_ranks(tmp_path):
    """What a noise or weak-judge cell prints before its first call: nothing to rank once the clean cell stored the
    ladder (the file its judge keys), and before that the round-robin, asked of the strong judge in a weak run."""
    ladders = f"reward.ladder_dir={tmp_path / 'ladders'}"
    weak = run_config(tmp_path, [ladders, *WEAK])
    task = build_task(weak.task)
    (what, calls), *_ = estimate(weak, task).setup
    assert calls == 64 * 45 and "asked of the strong evaluation judge" in what
    selected(tmp_path)  # the clean cell ranks and stores the ladder
    for overrides in (["judge.flip_prob=0.3"], WEAK):
        assert estimate(run_config(tmp_path, [ladders, *overrides]), task).setup_calls == 0
    assert estimate(run_config(tmp_path, [ladders, "judge.flip_prob=0.3", "ladder.judge=train"]), task).setup_calls
