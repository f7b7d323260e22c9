"""Every command, every class of bad input: a misspelled setting, a value of the wrong type, a path that does not
exist, a folder where a file belongs and the reverse, an empty or malformed file. Each ends in one sentence naming
the thing and the fix, exit status 2, no traceback, before anything is built or run (each case takes about a
second in a forked child; none builds a policy, so the model cache stays empty).

The malformed JSONL line is tested in test_train_cli.py; what is here was a traceback, an exit status of 1 (Hydra's
paragraph for a misspelled key, with its advice to add the key with `+`), a run with the mistake ignored, or a
misleading sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from tsrl.testing.cli import TINY

NO_MODEL = "model.cache_dir={root}/models"  # a policy built by mistake would appear here (a tiny one, quickly)
TINY_MODEL = [o for o in TINY if o.startswith("model.")]


def expand(args: list[str], root: Path) -> list[str]:
    return [a.format(root=root) for a in args]


@pytest.mark.parametrize(
    "command, args, message",
    [
        # a folder where a file belongs
        ("tsrl-train", ["judge.cache_path={root}/folder"], "judge.cache_path={root}/folder is a folder, not a file"),
        ("tsrl-train", ["task.train_file={root}/folder"], "Data file {root}/folder is a folder, not a file"),
        ("tsrl-train", ["task.anchors_file={root}/folder"], "Anchors file {root}/folder is a folder, not a file"),
        # a file where a folder belongs
        ("tsrl-train", ["run_dir={root}/file"], "run_dir={root}/file must be a folder, but {root}/file is a file"),
        ("tsrl-train", ["reward.ladder_dir={root}/file/ladders"], "reward.ladder_dir={root}/file/ladders must be a"),
        ("tsrl-eval", ["run_dir={root}/file"], "run_dir={root}/file must be a folder"),
        ("tsrl-ladder", ["run_dir={root}/file"], "run_dir={root}/file must be a folder"),
        ("tsrl-judge-check", ["run_dir={root}/file"], "run_dir={root}/file must be a folder"),
        # a path that does not exist, handed to transformers
        (
            "tsrl-train",
            ["judge=hf_local", "judge.model_path={root}/nowhere"],
            "judge.model_path='{root}/nowhere' (gguf_file='') cannot be loaded (",
        ),
        # an empty file
        ("tsrl-train", ["task.train_file={root}/empty.jsonl"], "Data file {root}/empty.jsonl holds no rows"),
    ],
)
def test_hydra_commands_name_a_bad_path_in_one_sentence(cli, tmp_path, command, args, message):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("a file")
    (tmp_path / "empty.jsonl").write_text("")
    no_model = [] if command == "tsrl-judge-check" else [NO_MODEL, *TINY_MODEL]  # judge-check has no policy
    done = cli(expand([*no_model, *args], tmp_path), tmp_path, command)
    assert done.returncode == 2, done.stderr[-2000:]
    assert message.format(root=tmp_path) in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "models").exists()


MAX_STEPS = "trainer.max_stpes is not a setting of TrainerConfig; did you mean trainer.max_steps?"
FLIP_PROB = "judge.flip_prb is not a setting of RubricSimConfig; did you mean judge.flip_prob?"


@pytest.mark.parametrize(
    "command, args, message",
    [
        ("tsrl-train", ["trainer.max_stpes=3"], MAX_STEPS),
        ("tsrl-train", ["+trainer.max_stpes=3"], MAX_STEPS),  # Hydra's advice, followed: not a run without it
        ("tsrl-train", ["-m", "trainer.max_stpes=3,4"], MAX_STEPS),  # a swept key
        ("tsrl-train", ["-m", "seed=0,1", "trainer.eval.sampels=2"], "did you mean trainer.eval.samples?"),
        ("tsrl-train", ["--config-dir", "{root}/folder", "trainer.max_stpes=3"], MAX_STEPS),
        ("tsrl-train", ["task=code", "task.sandbox.wall_s=3"], "task.sandbox.wall_s has moved to task.limits.wall_s"),
        ("tsrl-eval", ["judge.flip_prb=0.1"], FLIP_PROB),
        ("tsrl-eval", ["-m", "judge.flip_prb=0.1,0.2"], FLIP_PROB),
        ("tsrl-ladder", ["judge.flip_prb=0.1"], FLIP_PROB),
        ("tsrl-judge-check", ["judge.flip_prb=0.1"], FLIP_PROB),
    ],
)
def test_hydra_commands_name_the_nearest_key_of_a_misspelled_one(cli, tmp_path, command, args, message):
    (tmp_path / "folder").mkdir()
    done = cli(expand([*args, NO_MODEL, "hydra.sweep.dir={root}/sweep"], tmp_path), tmp_path, command)
    assert done.returncode == 2, done.stderr[-2000:]
    assert message in done.stderr, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # one sentence, no "+key" advice, no traceback
    assert not (tmp_path / "models").exists() and not list(tmp_path.glob("sweep/*/.hydra"))  # no run started


@pytest.mark.parametrize(
    "args, message",
    [
        (["reward.kk=3"], "tsrl-reproduce: error: reward.kk is not a setting of LadderConfig; did you mean reward.k?"),
        (["trainer.max_steps=abc"], "trainer.max_steps: Value 'abc' of type 'str' could not be converted to Integer"),
        (["reward=nope"], "reward/nope is not a config; the options of reward are: adaptive, arena,"),
        (["trainer.max_steps=["], "an override is not in Hydra's override grammar"),
        (["--out", "{root}/file"], "--out {root}/file is a file; give a folder"),
        (["--accelerate", "{root}/nowhere.yaml"], "--accelerate {root}/nowhere.yaml does not exist"),
        (["--aggregate-only", "--out", "{root}/folder"], "no finished run under {root}/folder"),
    ],
)
def test_reproduce_refuses_bad_input_before_any_run(cli, tmp_path, args, message):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("a file")
    done = cli(["paper/tsrl_table1", "--cpu", *expand(args, tmp_path)], tmp_path, "tsrl-reproduce")
    assert done.returncode == 2, done.stderr[-2000:]
    assert message.format(root=tmp_path) in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # one sentence, not Hydra's paragraph


def test_reproduce_names_a_misspelled_recipe_with_exit_status_2(cli, tmp_path):
    done = cli(["paper/tsrl_tabel1", "--cpu"], tmp_path, "tsrl-reproduce")
    assert done.returncode == 2 and "paper/tsrl_tabel1 is not a recipe under" in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "{root}/nowhere"], "--model {root}/nowhere does not exist; give a local model folder"),
        (["--model", "{root}/file"], "--model {root}/file is a file, not a folder"),
        (["--model", "m", "--gpus", "abc"], "--gpus abc is not a list of GPU ids"),
        (["--model", "m", "--tensor-parallel", "0"], "--tensor-parallel must be at least 1, got 0"),
        (["--model", "m", "--log-dir", "{root}/file"], "--log-dir {root}/file is not a folder"),
        (["--model", "m", "--env-file", "{root}/folder"], "--env-file {root}/folder is not a file"),
    ],
)
def test_serve_judge_refuses_bad_options_before_starting_a_server(cli, tmp_path, args, message):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("a file")
    done = cli([*expand(args, tmp_path), "--wait-s", "1"], tmp_path, "tsrl-serve-judge")
    assert done.returncode == 2, done.stderr[-2000:]
    assert message.format(root=tmp_path) in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "starting" not in done.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["report", "{root}/study"], "{root}/study/study.json is unusable (JSONDecodeError"),
        (["report", "{root}/keyed", "--bootstrap", "0"], "--bootstrap 0: the intervals need at least 1 resample"),
        (["export", "--runs", "{root}/folder", "--out", "{root}/file"], "--out {root}/file is a file; give a folder"),
    ],
)
def test_human_study_names_a_malformed_file_and_a_bad_option(cli, tmp_path, args, message):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("a file")
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "study.json").write_text('{"prompts": [')  # cut short
    (tmp_path / "keyed").mkdir()
    (tmp_path / "keyed" / "study.json").write_text("{}")
    (tmp_path / "keyed" / "key").mkdir()
    (tmp_path / "keyed" / "key" / "KEY-item-to-method-DO-NOT-SHARE.json").write_text("{}")
    done = cli(expand(args, tmp_path), tmp_path, "tsrl-human-study")
    assert done.returncode == 2, done.stderr[-2000:]
    assert message.format(root=tmp_path) in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
