"""`tsrl-judge-check`: the judge measured on the task's reference anchors, end to end through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tsrl.testing.cli import cli_env, tiny_overrides
from tsrl.testing.judge_server import JudgeServer

CHECK = str(Path(sys.executable).parent / "tsrl-judge-check")


@pytest.fixture
def check(cli):
    """check(folder, *overrides) -> (CompletedProcess, report): tsrl-judge-check on 6 prompts into folder/check, its
    main() in a forked child (the `cli` fixture, tests/integration/conftest.py); the report is judge_check.json, {}
    where none was written."""

    def run(folder: Path, *overrides: str) -> tuple[subprocess.CompletedProcess, dict]:
        done = cli([f"run_dir={folder / 'check'}", "check.prompts=6", *overrides], folder, "tsrl-judge-check")
        report_file = folder / "check" / "judge_check.json"
        return done, json.loads(report_file.read_text()) if report_file.is_file() else {}

    return run


def test_the_simulated_judge_ranks_the_anchors_and_its_position_bias_shows(check, tmp_path):
    done, fair = check(tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert fair["questions"] == fair["answered"] == 6 * 10 * 2  # 5 anchors: 10 pairs, both orders
    assert fair["accuracy"] > 0.75 and fair["accuracy_by_gap"]["4"] > fair["accuracy_by_gap"]["1"]
    assert abs(fair["position_bias_p_first"] - 0.5) < 0.1 and fair["swap_consistency"] > 0.7
    assert "accuracy (P to the better anchor)" in done.stdout and "rubric_sim" in done.stdout
    assert "judge spend: 120 calls — 6 prompts' anchor pairs in both orders" in done.stdout  # said before asking

    done, biased = check(tmp_path, "judge.position_bias=3.0")
    assert done.returncode == 0, done.stderr[-2000:]
    assert biased["position_bias_p_first"] > 0.65  # the first shown wins far more often ...
    assert biased["swap_consistency"] < fair["swap_consistency"] - 0.2  # ... whatever the content

    done, noisy = check(tmp_path, "judge.flip_prob=0.4")  # noise injection is off in the check
    assert done.returncode == 0 and noisy["accuracy"] == fair["accuracy"]


def test_min_accuracy_gates_the_exit_status(check, tmp_path):
    done, report = check(tmp_path, "check.min_accuracy=0.999")
    assert done.returncode == 1 and report["accuracy"] < 0.999
    assert "below check.min_accuracy=0.999" in done.stderr


def test_an_openai_compatible_judge_reports_latency_and_tokens(check, tmp_path):
    with JudgeServer(latency_s=0.01, dialect="structured_outputs") as server:  # as vLLM: constraints honoured
        done, report = check(
            tmp_path,
            "judge=openai",
            f"judge.base_urls=[{server.url}]",
            "judge.api_key_env=",
            "judge.price_in_per_m=1.0",
            "judge.order=both",
            "judge.flip_prob=0.5",
        )
    assert done.returncode == 0, done.stderr[-2000:]
    # one probe (judge.constrain=auto), then the questions: fixed order, no doubling, no noise, every one constrained
    assert server.stats["requests"] - 1 == report["questions"] == server.stats["constrained/regex"] - 1 == 120
    assert report["answered"] == 120 and report["latency_p50_s"] >= 0.01
    assert report["tokens_per_1k"] > 0 and report["cost_usd_per_1k"] > 0
    assert report["judge"] == "openai (model judge)"


def test_an_unknown_split_is_a_one_line_error(tmp_path):
    done = subprocess.run(  # the console script itself, in a new interpreter
        [CHECK, f"run_dir={tmp_path / 'check'}", "check.split=nope"],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == "tsrl: error: Unknown split 'nope'; task humor has ['eval', 'train']."


@pytest.mark.slow
def test_a_check_on_the_train_split_pays_for_the_ladder_of_the_run_that_follows(check, cli, cache_dir, tmp_path):
    """check.split=train asks every anchor pair of the ladder round-robin in both orders: with the run's verdict
    cache the ladder build (one call per pair in a random order, the default) then costs no model call, so a run
    whose judge budget (200 calls per step; the ladder build counts as one step) is far below its 2,880
    questions still starts."""
    with JudgeServer() as server:
        judge = ["judge=openai", f"judge.base_urls=[{server.url}]", "judge.api_key_env="]
        cache = f"judge.cache_path={tmp_path / 'verdicts.sqlite'}"
        train = [
            *tiny_overrides(cache_dir),
            *judge,
            f"reward.ladder_dir={tmp_path / 'ladders'}",
            "judge.budget.max_calls_per_step=200",
            "trainer.max_steps=1",
        ]
        refused = cli([*train, f"judge.cache_path={tmp_path / 'other.sqlite'}", f"run_dir={tmp_path / 'a'}"], tmp_path)
        assert refused.returncode == 2 and "judge.budget.max_calls_per_step=200" in refused.stderr
        done, report = check(tmp_path, *judge, cache, "check.split=train", "check.prompts=0")
        assert done.returncode == 0, done.stderr[-2000:]
        assert report["questions"] == 64 * 45 * 2
        run = cli([*train, cache, f"run_dir={tmp_path / 'b'}"], tmp_path)
        assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads((tmp_path / "b" / "setup.json").read_text())["judge_calls_setup"] == 64 * 45


def test_a_fit_writes_a_profile_that_the_simulated_judge_then_answers_with(check, tmp_path):
    """check.fit=true on a judge with a known position bias: the report and the written profile carry it with an
    interval that excludes none, and judge.profile=<that file> makes the simulated judge show it again."""
    done, report = check(tmp_path, "check.split=train", "check.prompts=24", "check.fit=true", "judge.position_bias=1.5")
    assert done.returncode == 0, done.stderr[-2000:]
    fit = report["fit"]
    assert fit["data"]["verdicts"] == 24 * 45 * 2 and fit["data"]["grades"] == 24 * 10  # 10 anchors per prompt
    assert f"judge spend: {24 * 45 * 2 + 24 * 10:,} calls" in done.stdout  # what it then asked, said first
    low, high = fit["estimates"]["position_bias"]["ci95"]
    assert 0.5 < low <= 1.5 <= high and fit["signal_test"]["p_value"] < 1e-6
    assert "perception model fit" in done.stdout and "judge.profile=<this path>" in done.stdout
    profile = Path(fit["profile"])
    assert profile.is_file() and "position_bias" in profile.read_text()

    replay_dir = tmp_path / "replay"
    replay_dir.mkdir()
    done, replay = check(replay_dir, "check.split=train", "check.prompts=24", f"judge.profile={profile}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert replay["position_bias_p_first"] > 0.6  # the bias travelled through the profile: the same questions
    assert abs(replay["accuracy"] - report["accuracy"]) < 0.03  # get the first position's and quality's shares
    assert abs(replay["position_bias_p_first"] - report["position_bias_p_first"]) < 0.03

    refit_dir = tmp_path / "refit"
    refit_dir.mkdir()
    done, again = check(refit_dir, f"check.refit={tmp_path / 'check'}")  # the saved answers, no judge asked
    assert done.returncode == 0, done.stderr[-2000:]
    assert again["fit"]["estimates"] == fit["estimates"] and again["questions"] == report["questions"]


def test_refit_of_a_folder_without_usable_answers_is_one_sentence(check, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    done, _ = check(tmp_path, f"check.refit={empty}")
    assert done.returncode != 0 and "missing; refit needs the run_dir" in done.stderr, done.stderr[-1000:]
    (empty / "judge_check.json").write_text("{}")
    (empty / "judge_answers.json").write_text('{"judge": "x"}')
    done, _ = check(tmp_path, f"check.refit={empty}")
    assert done.returncode != 0 and "judge_answers.json lacks" in done.stderr and "Traceback" not in done.stderr


def test_lists_separate_a_frame_from_the_item_noise_and_the_profile_carries_them(check, tmp_path):
    """check.lists=4 on a judge whose lists carry a frame σ_η = 1, item noise 0.5 and a primacy effect π = 1: the
    list fit's intervals hold them, the profile answers lists with them, and a refit of the saved answers agrees."""
    truth = {"frame_noise": 1.0, "list_noise": 0.5, "list_position": 1.0}
    judge = ["judge.taste=0", *(f"judge.{k}={v}" for k, v in truth.items())]
    done, report = check(tmp_path, "check.split=train", "check.prompts=16", "check.fit=true", "check.lists=4", *judge)
    assert done.returncode == 0, done.stderr[-2000:]
    lists = report["fit"]["lists"]
    assert lists["data"]["lists"] == 16 * 4 and lists["data"]["grades"] == 16 * 4 * 10
    assert f"judge spend: {16 * 90 + 16 * 10 + 16 * 4:,} calls" in done.stdout  # pairs, grades and lists, said first
    for name, value in truth.items():
        low, high = lists["estimates"][name]["ci95"]
        assert low <= value <= high, (name, low, high)
    assert lists["frame_test"]["p_value"] < 1e-6
    assert "list fit" in done.stdout and "against σ_η = 0" in done.stdout
    parameters = report["fit"]["parameters"]
    assert parameters["frame_noise"] == lists["estimates"]["frame_noise"]["value"]
    assert parameters["list_position"] == lists["estimates"]["list_position"]["value"]
    assert "check.lists=4" in Path(report["fit"]["profile"]).read_text()

    refit_dir = tmp_path / "refit"
    refit_dir.mkdir()
    done, again = check(refit_dir, f"check.refit={tmp_path / 'check'}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert again["fit"]["lists"]["estimates"] == lists["estimates"]


def test_lists_without_the_fit_is_one_sentence(check, tmp_path):
    done, _ = check(tmp_path, "check.lists=4")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "check.lists=4: lists are asked for the fit; set check.fit=true" in done.stderr
