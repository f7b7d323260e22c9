"""trainer.pipeline=overlap (tsrl/training/pipeline.py) end to end: samples never more than one policy version
stale, a run killed after a checkpoint resumes onto the uninterrupted trajectory (groups in flight included),
the judge budget holds, and the regimes that read the live policy are refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tsrl.testing.cli import TINY, read_metrics, tiny_overrides

TRAJECTORY = (
    "reward/mean",
    "train/loss",
    "train/grad_norm",
    "completion/length_mean",
    "judge/calls",
    "judge/noise_flips",
)
"""What two runs on the same trajectory log alike, step for step."""
KEYS = (*TRAJECTORY, "pipeline/staleness", "train/clip_frac")


OVERLAPPED = ["judge.flip_prob=0.3", "trainer.pipeline=overlap", "trainer.max_steps=4"]


@pytest.fixture(scope="module")
def overlapped(cli, cache_dir, tmp_path_factory) -> Path:
    """The run directory of 4 overlapped steps with judge noise and a checkpoint at step 2 (both kept): the
    uninterrupted run the next two tests read."""
    root = tmp_path_factory.mktemp("overlapped")
    checkpoints = ["trainer.checkpoint.every=2", "trainer.checkpoint.keep=2"]
    done = cli([*tiny_overrides(cache_dir), *OVERLAPPED, *checkpoints, f"run_dir={root / 'run'}"], root)
    assert done.returncode == 0, done.stderr[-3000:]
    return root / "run"


def test_overlapped_samples_are_at_most_one_version_stale_and_the_ratio_sees_it(overlapped):
    rows = read_metrics(overlapped)
    assert [r["pipeline/staleness"] for r in rows] == [0.0, 1.0, 1.0, 1.0]  # step 1 trains on fresh samples
    assert rows[0]["train/approx_kl_old"] == pytest.approx(0.0, abs=1e-6)  # fresh: ratio 1 up to rounding
    assert all(r["train/approx_kl_old"] > 1e-6 for r in rows[1:])  # stale: π_θ / π_sample moves
    assert all(r["judge/calls"] > 0 and "time/score_wait_s" in r for r in rows)


def test_a_killed_overlapped_run_resumes_onto_the_same_trajectory(overlapped, tsrl, tmp_path):
    """4 overlapped steps with a checkpoint at step 2; a second run directory that holds only that checkpoint
    (as if the run had been killed during step 3) resumes: steps 3 and 4 equal the uninterrupted run's, with
    judge noise injected (the groups in flight draw from the stream of the step they are trained at)."""
    whole, killed = overlapped, tmp_path / "killed"
    state = json.loads((whole / "checkpoints" / "step_000002" / "trainer_state.json").read_text())
    assert state["pending"]["version"] == 1 and len(state["pending"]["groups"]) == 2  # step 3's groups in flight
    shutil.copytree(whole / "checkpoints" / "step_000002", killed / "checkpoints" / "step_000002")
    resumed = tsrl(*OVERLAPPED, "trainer.checkpoint.resume=auto", run_dir=killed)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    a, b = read_metrics(whole)[2:], read_metrics(killed)
    assert [r["step"] for r in b] == [3, 4]
    for key in KEYS:
        assert [r[key] for r in a] == pytest.approx([r[key] for r in b], rel=1e-6), key
    whole_eval, killed_eval = (json.loads((run / "eval.json").read_text())["latest"] for run in (whole, killed))
    assert whole_eval.pop("time_s") > 0 and killed_eval.pop("time_s") > 0  # each evaluation's own wall-clock
    assert whole_eval == killed_eval


def test_the_judge_budget_stops_an_overlapped_run_where_it_stops_a_sync_one(tsrl, tmp_path):
    """trainer.max_judge_calls: the same last step and the same total of training calls (both runs in one
    multirun: one process; the first builds the shared ladder, whose calls are setup's, not training's)."""
    sweep = tmp_path / "sweep"
    done = tsrl(
        "trainer.pipeline=sync,overlap",
        "trainer.max_steps=10",
        "trainer.max_judge_calls=70",
        f"hydra.sweep.dir={sweep}",
        multirun=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    totals = {}
    for pipeline in ("sync", "overlap"):
        run = sweep / f"trainer.pipeline={pipeline}"  # a multirun's run folder is named by its swept settings
        rows = read_metrics(run)
        assert json.loads((run / "config.json").read_text())["trainer"]["pipeline"] == pipeline
        setup = json.loads((run / "setup.json").read_text())["judge_calls_setup"]
        totals[pipeline] = (rows[-1]["step"], rows[-1]["judge/calls_total"] - setup)
    assert totals["sync"] == totals["overlap"] and totals["sync"][0] < 10


@pytest.mark.parametrize(
    "override, message",
    [
        ("method=sft", "nothing to take off the critical path"),
        ("trainer.pipeline=async", "trainer.pipeline='async' is unknown"),
    ],
)
def test_what_cannot_overlap_is_refused_in_one_sentence(tsrl, override, message):
    done = tsrl("trainer.pipeline=overlap", override)
    assert done.returncode != 0 and message in done.stderr, done.stderr[-2000:]


def test_a_regime_that_reads_the_live_policy_is_refused(cli, cache_dir, tmp_path):
    done = cli(
        [
            f"model.cache_dir={cache_dir / 'models'}",
            *TINY,
            f"run_dir={tmp_path / 'run'}",
            "reward=intuitor",
            "trainer.pipeline=overlap",
        ],
        tmp_path,
    )
    assert done.returncode != 0 and "reads the live policy while scoring" in done.stderr, done.stderr[-2000:]


def test_resampling_fills_each_step_with_groups_that_carry_a_signal(tsrl, tmp_path):
    """trainer.fill=resample: a group whose rewards are all equal is set aside and further batches are drawn;
    the update sees prompts_per_step groups with a signal, and every batch drawn is counted and paid for."""
    done = tsrl(
        "trainer.fill=resample",
        "trainer.fill_max_batches=6",
        "trainer.max_steps=3",
        "reward.k=1",
        run_dir=tmp_path / "run",
    )  # one anchor: win-rates of 0 or 1, many flat groups
    assert done.returncode == 0, done.stderr[-3000:]
    for r in read_metrics(tmp_path / "run"):
        batches = r["fill/batches"]
        assert r["fill/generations_per_step"] == batches * 2 * 4  # 2 prompts x 4 completions per batch
        assert r["judge/calls"] == batches * 2 * 4 * 1  # k = 1 verdict per completion, every batch scored
        assert (r["fill/zero_var_frac"] > 0) == (batches > 1)  # drawn again only when a drawn group was flat
        if r["fill/kept_groups"] == 2:
            assert r["reward/zero_var_frac"] == 0.0  # only groups with a signal reach the update
        else:
            assert batches == 6  # gave up at the cap, trained on what it had


def test_resampling_and_overlap_do_not_combine_yet(tsrl):
    done = tsrl("trainer.fill=resample", "trainer.pipeline=overlap")
    assert done.returncode != 0 and "runs with trainer.pipeline=sync or stream, not overlap" in done.stderr


@pytest.mark.parametrize("reward", ["ladder", "arena"])
def test_a_streamed_run_follows_the_sync_trajectory(cli, cache_dir, tmp_path, reward):
    """trainer.pipeline=stream judges each group while the next is generated (one prompt per generation call):
    the same questions, the same rewards, the same updates as sync, step for step — for the ladder and for a
    Swiss tournament, whose rounds then start as groups arrive — with judge noise injected: each draw is keyed by
    the judgment, not by when it was asked. The streamed run, killed after its step-2 checkpoint, resumes onto the
    same step 3. Both runs are one multirun (one process), as a sweep runs them."""
    extra = [f"reward.ladder_dir={cache_dir / 'ladders'}"] if reward == "ladder" else ["reward.topology=swiss"]
    common = [
        f"model.cache_dir={cache_dir / 'models'}",
        *TINY,
        f"reward={reward}",
        *extra,
        "judge.flip_prob=0.3",
        "trainer.max_steps=3",
        "trainer.eval.max_prompts=4",
        "generator.prompts_per_call=1",
        "trainer.checkpoint.every=2",
    ]
    sweep = tmp_path / "sweep"
    done = cli(["-m", *common, "trainer.pipeline=sync,stream", f"hydra.sweep.dir={sweep}"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {}
    for pipeline in ("sync", "stream"):
        run = sweep / f"trainer.pipeline={pipeline}"
        assert json.loads((run / "config.json").read_text())["trainer"]["pipeline"] == pipeline
        rows[pipeline] = read_metrics(run)
    for key in TRAJECTORY:
        assert [r[key] for r in rows["sync"]] == [r[key] for r in rows["stream"]], key
    assert all(r["judge/noise_flips"] > 0 for r in rows["stream"])
    assert all("time/score_wait_s" in r and r["time/score_wait_s"] <= r["time/score_s"] for r in rows["stream"])
    killed = tmp_path / "killed"
    step = Path("checkpoints") / "step_000002"
    shutil.copytree(sweep / "trainer.pipeline=stream" / step, killed / step)
    resumed = cli([*common, "trainer.pipeline=stream", "trainer.checkpoint.resume=auto", f"run_dir={killed}"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    (again,) = read_metrics(killed)
    assert again["step"] == 3
    for key in TRAJECTORY:
        assert again[key] == pytest.approx(rows["stream"][2][key], rel=1e-6), key


def test_streaming_fills_batches_and_refuses_what_cannot_stream(cli, tsrl, cache_dir, tmp_path):
    done = tsrl(
        "trainer.pipeline=stream",
        "trainer.fill=resample",
        "trainer.fill_max_batches=3",
        "reward.k=1",
        "trainer.max_steps=2",
        run_dir=tmp_path / "fill",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert all(r["fill/generations_per_step"] == r["fill/batches"] * 8 for r in read_metrics(tmp_path / "fill"))
    done = cli(
        [
            f"model.cache_dir={cache_dir / 'models'}",
            *TINY,
            f"run_dir={tmp_path / 'run'}",
            "reward=intuitor",
            "trainer.pipeline=stream",
        ],
        tmp_path,
    )
    assert done.returncode != 0 and "trainer.pipeline=stream cannot run reward=intuitor" in done.stderr, done.stderr[
        -2000:
    ]
