"""The wall-clock a run or a tsrl-reproduce grid is said to take before it starts, from the step and evaluation times
of earlier runs with the same settings (tsrl/wallclock.py), and what it must build first."""

from __future__ import annotations

import json
from pathlib import Path

from hydra import compose, initialize_config_module

from tsrl.commands.base import to_run_config
from tsrl.config import register_configs
from tsrl.models import pending_build
from tsrl.models.tiny import tiny_folder
from tsrl.reproduce.spend import GridSpend, grid_spend
from tsrl.tasks import build_task
from tsrl.wallclock import Pace, as_config, measured, wallclock_line

SMALL = ["trainer.max_steps=10", "trainer.eval.every=5"]


def run_config(tmp: Path, *overrides: str):
    register_configs()
    with initialize_config_module("tsrl.configs", version_base="1.3"):
        settings = [f"run_dir={tmp / 'new'}", f"model.cache_dir={tmp / 'models'}", *SMALL, *overrides]
        return to_run_config(compose("config", overrides=settings))


def earlier_run(folder: Path, config: dict, steps: list[float], evals: list[float]) -> None:
    """A finished run's records: config.json, its steps' times, its evaluations' times."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": i, "time/step_s": t}) + "\n" for i, t in enumerate(steps))
    )
    history = [{"step": i, "winrate": 50.0, "time_s": t} for i, t in enumerate(evals)]
    (folder / "eval.json").write_text(json.dumps({"history": history}))


def test_earlier_runs_with_the_same_settings_time_the_run_and_others_do_not(tmp_path):
    cfg = run_config(tmp_path)
    assert measured(tmp_path, cfg) is None
    line = wallclock_line(None, 10, 3, tmp_path)
    assert "not known yet" in line and str(tmp_path) in line
    other_seed = as_config(run_config(tmp_path, "seed=3", "trainer.max_steps=100", f"run_dir={tmp_path / 'a'}"))
    earlier_run(tmp_path / "a", other_seed, [1.0, 2.0, 9.0], [10.0, 12.0])
    earlier_run(tmp_path / "sweep" / "k8", as_config(run_config(tmp_path, "reward.k=8")), [100.0] * 5, [500.0])
    earlier_run(tmp_path / "sweep" / "k4", other_seed, [3.0], [])
    pace = measured(tmp_path, cfg)
    assert pace == Pace(step_s=2.5, eval_s=11.0, steps=4, runs=2)  # reward.k=8 changes a step: not counted
    line = wallclock_line(pace, 10, 3, tmp_path)  # 10 × 2.5 s + 3 × 11 s
    assert "about 58 s for 10 steps and 3 evaluations, measured by 2 earlier runs" in line and str(tmp_path) in line
    assert "median 2.50 s a step over 4 steps, 11.0 s an evaluation" in line


def test_the_tiny_policy_to_be_built_is_named_with_the_build_times_measured_beside_it(tmp_path):
    cfg = run_config(tmp_path)
    note = pending_build(cfg.model, cfg.task)
    assert note.startswith("the tiny policy for task=humor, once") and "a few minutes on 2 CPU cores" in note
    sibling = tmp_path / "models" / "tiny-other-0"
    sibling.mkdir(parents=True)
    (sibling / "warmstart.json").write_text(json.dumps({"losses": [], "build_s": 42.0}))
    assert "earlier builds there took 42 s (median of 1)" in pending_build(cfg.model, cfg.task)
    tiny_folder(cfg.model, build_task(cfg.task)).mkdir(parents=True)
    assert pending_build(cfg.model, cfg.task) == ""


def test_a_grid_is_timed_by_the_earlier_runs_in_its_output_folder(tmp_path):
    fixed = [f"model.cache_dir={tmp_path / 'models'}", f"reward.ladder_dir={tmp_path / 'ladders'}", *SMALL]
    out = tmp_path / "grid"
    fresh = grid_spend("cpu_demo", [{"seed": ["0", "1"], "reward.k": ["2", "4"]}], fixed, out=out)
    text = "\n".join(fresh.lines())
    assert f"wall-clock: not known yet: no earlier run with these runs' settings in {out}" in text
    assert "to build first: the tiny policy for task=humor, once" in text
    register_configs()
    with initialize_config_module("tsrl.configs", version_base="1.3"):
        k4 = to_run_config(compose("config", overrides=["recipes=cpu_demo", *fixed, "reward.k=4", "seed=0"]))
    earlier_run(out / "reward.k=4,seed=0", as_config(k4), [2.0, 2.0], [6.0])
    timed = grid_spend("cpu_demo", [{"seed": ["0", "1"], "reward.k": ["2", "4"]}], fixed, out=out)
    assert timed.timed == 2 and timed.runs == 4  # both seeds of k = 4; k = 2 has no run to time it by
    wall = next(line for line in timed.lines() if "wall-clock" in line)
    assert (
        "about 76 s for 2 of 4 runs" in wall and "2 runs have no such run to measure by" in wall
    )  # 2 × (10 × 2 + 3 × 6)
    assert GridSpend(folder=None).time_lines() == []
