"""End-to-end: the real CLI trains, logs, evaluates, checkpoints, resumes and rejects bad input."""

import json

import pytest

from tsrl.testing.cli import read_metrics

pytestmark = pytest.mark.slow

STEP_KEYS = {
    "step",
    "reward/mean",
    "reward/std",
    "reward/zero_var_frac",
    "completion/length_mean",
    "completion/truncated_frac",
    "train/clip_frac",
    "train/entropy",
    "train/loss",
    "train/grad_norm",
    "train/lr",
    "judge/calls",
    "judge/calls_per_sample",
    "time/step_s",
    "throughput/tokens_per_s",
}


def test_training_run_writes_metrics_eval_plot_and_checkpoint(tsrl, tmp_path):
    result = tsrl("algo.kl_beta=0.05", new_process=True)  # the console script itself, in a new interpreter
    assert result.returncode == 0, result.stderr[-3000:]
    run = tmp_path / "run"
    rows = read_metrics(run)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert STEP_KEYS | {"train/kl"} <= set(rows[0])
    # 2 prompts x 4 samples x 4 anchors, one call each (order=random, TSRL's accounting) = 32 judge calls, 4 per sample
    assert rows[0]["judge/calls"] == 32 and rows[0]["judge/calls_per_sample"] == 4
    assert rows[0]["judge/calls_per_comparison"] == 1  # one binary verdict per comparison
    setup = json.loads((run / "setup.json").read_text())["judge_calls_setup"]
    assert setup in (0, 64 * 45)  # ladder round-robin: 64 prompts x C(10,2) pairs, one call each, or reused
    assert rows[-1]["judge/calls_total"] == setup + 3 * 32
    assert all(0.0 <= r["reward/mean"] <= 1.0 for r in rows)
    evals = json.loads((run / "eval.json").read_text())
    assert [e["step"] for e in evals["history"]] == [0, 3]
    assert 0.0 <= evals["latest"]["winrate"] <= 100.0 and "winrate/top" in evals["latest"]
    heldout = [json.loads(line) for line in (run / "heldout.jsonl").read_text().splitlines()]
    assert sorted({r["step"] for r in heldout}) == [0, 3]  # every evaluation's generations, for tsrl-human-study
    assert {"prompt_id", "prompt", "sample", "completion"} <= set(heldout[-1])
    assert (run / "plot.png").stat().st_size > 10_000
    policy = run / "checkpoints" / "step_000003" / "policy"
    assert (policy / "config.json").is_file() and (policy / "tokenizer.json").is_file()
    assert "held-out win-rate vs reference anchors" in result.stdout
    start, end = (evals["history"][i]["repeated_bigrams"] for i in (0, -1))
    assert f"held-out samples' repeated word bigrams: {start:.1f}% -> {end:.1f}%" in result.stdout


def test_other_losses_train(tsrl, tmp_path):
    """dr_grpo and cispo, 2 epochs of 2 minibatches, as one multirun (one process)."""
    sweep = tmp_path / "sweep"
    result = tsrl(
        "algo=dr_grpo,cispo",
        "algo.epochs=2",
        "algo.minibatches=2",
        "trainer.max_steps=2",
        f"hydra.sweep.dir={sweep}",
        multirun=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for algo in ("dr_grpo", "cispo"):
        assert f"- algo={algo}\n" in (sweep / f"algo={algo}" / ".hydra" / "overrides.yaml").read_text()
        rows = read_metrics(sweep / f"algo={algo}")  # a multirun's run folder is named by its swept settings
        assert [r["step"] for r in rows] == [1, 2] and all(r["train/approx_kl_old"] >= 0 for r in rows)


def test_resumed_run_continues_the_same_trajectory(tsrl, tmp_path):
    """4 steps in one go vs 2 steps, stop, resume=auto for the other 2: identical metrics, with judge noise
    injected (a fresh draw per judgment, from streams the resumed steps name again)."""
    whole, split = tmp_path / "whole", tmp_path / "split"
    noise = "judge.flip_prob=0.3"
    assert tsrl(noise, "trainer.max_steps=4", "trainer.checkpoint.every=2", run_dir=whole).returncode == 0
    assert tsrl(noise, "trainer.max_steps=2", run_dir=split).returncode == 0
    resumed = tsrl(noise, "trainer.max_steps=4", "trainer.checkpoint.resume=auto", run_dir=split)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    a, b = read_metrics(whole), read_metrics(split)
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    assert all(r["judge/noise_flips"] > 0 for r in a)
    for key in ("reward/mean", "train/loss", "completion/length_mean", "train/grad_norm", "judge/noise_flips"):
        assert [r[key] for r in a] == pytest.approx([r[key] for r in b], rel=1e-6), key
    final = [json.loads((d / "eval.json").read_text())["latest"] for d in (whole, split)]
    assert final[0]["step"] == final[1]["step"] == 4
    assert final[0]["winrate"] == pytest.approx(final[1]["winrate"])
    heldout = [[json.loads(line) for line in (d / "heldout.jsonl").read_text().splitlines()] for d in (whole, split)]
    assert [r["step"] for r in heldout[1]] == sorted(r["step"] for r in heldout[1])  # appended, never rewritten
    assert [r for r in heldout[0] if r["step"] == 4] == [r for r in heldout[1] if r["step"] == 4]


def test_multirun_sweeps_k(tsrl, tmp_path):
    result = tsrl("reward.k=1,2", "trainer.max_steps=1", f"hydra.sweep.dir={tmp_path / 'sweep'}", multirun=True)
    assert result.returncode == 0, result.stderr[-3000:]
    calls = [read_metrics(tmp_path / "sweep" / f"reward.k={k}")[0]["judge/calls_per_sample"] for k in (1, 2)]
    assert calls == [1.0, 2.0]  # k anchors, one call each


def test_wandb_logger_writes_an_offline_run(tsrl, tmp_path):
    result = tsrl("logger=wandb", "trainer.max_steps=2", "logger.samples_every=1", new_process=True)  # wandb's service
    assert result.returncode == 0, result.stderr[-3000:]
    assert list((tmp_path / "run" / "wandb").glob("offline-run-*"))
    assert (tmp_path / "run" / "samples.jsonl").is_file()


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "reward.k=11 ladder.build=off",
            "reward.k=11 needs 11 anchors per training prompt, but prompt 'train-001' of "
            "task humor has 10 (64 of 64 prompts short; ladder.build=off): lower reward.k to at most 10",
        ),
        ("trainer.group_size=1", "trainer.group_size=1 but group-relative advantages need at least 2"),
        ("task.train_file=/nowhere/train.jsonl", "/nowhere/train.jsonl does not exist"),
    ],
)
def test_bad_settings_fail_with_one_sentence(tsrl, override, message):
    result = tsrl(*override.split())
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_malformed_data_file_names_file_and_line(tsrl, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "words": ["x", "y"]}\n{"id": "b", "words": "xy"}\n')
    result = tsrl(f"task.train_file={bad}")
    assert result.returncode == 2
    assert f"{bad}:2: 'words' must be a list of two non-empty strings" in result.stderr


def test_unknown_option_is_rejected_naming_it(tsrl):
    result = tsrl("trainer.max_stpes=3")
    assert result.returncode != 0
    assert "max_stpes" in result.stderr
    assert "Traceback" not in result.stderr
