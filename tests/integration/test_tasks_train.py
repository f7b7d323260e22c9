"""Every task trains a few steps on its shipped sample through the real CLI (web with real Chromium and a vision
judge that receives the screenshots; aime with the verifier through reward=verifier and reward=adaptive), and
tsrl-eval / tsrl-ladder run end to end."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tsrl.testing.cli import TINY, cli_env, read_metrics
from tsrl.testing.judge_server import JudgeServer

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
SMALL = ["trainer.max_steps=2", "task.max_prompts=4", "trainer.eval.max_prompts=2"]
LADDERS = ("ladder", "one_anchor", "self_bootstrap")


def model_args(cache_dir: Path) -> list[str]:
    """The tests' tiny policy (built once per session) and its generation length, for tsrl-eval and tsrl-ladder."""
    return [f"model.cache_dir={cache_dir / 'models'}", *(a for a in TINY if not a.startswith("trainer."))]


@pytest.fixture
def train(cli, cache_dir, tmp_path):
    """tsrl-train (through the `cli` fixture) with the tiny policy into tmp_path/run; reward.ladder_dir goes to the
    session cache when the regime has one."""

    def call(*overrides: str) -> subprocess.CompletedProcess:
        regime = next((o.split("=", 1)[1] for o in overrides if o.startswith("reward=")), "ladder")
        ladder = [f"reward.ladder_dir={cache_dir / 'ladders'}"] if regime in LADDERS else []
        return cli(
            [f"model.cache_dir={cache_dir / 'models'}", *TINY, f"run_dir={tmp_path / 'run'}", *ladder, *overrides],
            tmp_path,
        )

    return call


@pytest.mark.parametrize(
    "task, extra",
    [
        ("stories", ["reward.k=10"]),
        ("counseling", []),
        ("gpqa", ["reward=verifier"]),
        ("aime", ["reward=verifier"]),
        ("aime", ["reward=adaptive", "algo=cispo"]),
    ],
)
def test_task_trains_on_its_shipped_sample(train, tmp_path, task, extra):
    result = train(f"task={task}", *SMALL, *extra)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == [1, 2]
    latest = json.loads((tmp_path / "run" / "eval.json").read_text())["latest"]
    if task in ("aime", "gpqa"):
        assert "held-out pass ratio@n (mean accuracy over n samples)" in result.stdout
        assert 0.0 <= latest["pass_ratio"] <= 100.0 and "pass@1" in latest and "answered" in latest
        assert rows[0]["judge/calls"] == 0 or extra[0] == "reward=adaptive"  # the verifier needs no judge
    else:
        assert "held-out win-rate vs reference anchors" in result.stdout and 0.0 <= latest["winrate"] <= 100.0


@pytest.mark.chromium
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Chromium (make test installs it)")
def test_web_trains_with_a_vision_judge_that_receives_the_screenshots(train, tmp_path):
    """The openai judge with vision=true gets both pages as PNG image parts; a page that cannot render (the
    tiny policy mostly writes text, not HTML) loses without a judge call, and the reasons are counted."""
    with JudgeServer(keep_bodies=True, model="vision-judge") as server:
        result = train(
            "task=web",
            *SMALL,
            "reward.k=2",
            "judge=openai",
            f"judge.base_urls=[{server.url}]",
            "judge.api_key_env=",
            "judge.vision=true",
            "judge.model=vision-judge",
            f"judge.render.cache_dir={tmp_path / 'shots'}",
            "judge.render.timeout_s=30",
        )
        bodies = list(server.bodies)
    assert result.returncode == 0, result.stderr[-3000:]
    images = [
        part["image_url"]["url"]
        for body in bodies
        for part in body["messages"][-1]["content"]
        if isinstance(part, dict) and part.get("type") == "image_url"
    ]
    assert images and all(url.startswith("data:image/png;base64,") for url in images)
    png = base64.b64decode(images[0].split(",", 1)[1])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == 1024  # IHDR width
    rows = read_metrics(tmp_path / "run")
    assert all(r["judge/render/pages"] > 0 for r in rows)
    assert sum(r.get("judge/render/failures", 0) for r in rows) == sum(
        v for r in rows for k, v in r.items() if k.startswith("judge/render/failures/")
    )


def run_tool(name: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """The console script `name` in a new interpreter (the tests below run tsrl-eval and tsrl-ladder once so)."""
    return subprocess.run([str(BIN / name), *args], capture_output=True, text=True, env=cli_env(), cwd=cwd, timeout=600)


def test_eval_reports_a_checkpoint_over_seeds(train, cache_dir, tmp_path):
    trained = train("task=aime", "reward=verifier", "trainer.max_steps=1", "task.max_prompts=2", "trainer.eval.every=0")
    assert trained.returncode == 0, trained.stderr[-3000:]
    checkpoint = tmp_path / "run" / "checkpoints" / "step_000001"
    model = model_args(cache_dir)
    result = run_tool(
        "tsrl-eval",
        [
            "task=aime",
            *model,
            f"eval.policies=[{checkpoint}]",
            "eval.samples=4",
            "eval.max_prompts=3",
            "eval.seeds=[0,1]",
            f"run_dir={tmp_path / 'eval'}",
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "eval" / "eval_report.json").read_text())
    (entry,) = report["policies"]
    assert entry["policy"] == str(checkpoint / "policy") and len(entry["runs"]) == 2
    assert report["headline"] == "pass_ratio" and {"pass@1", "pass@4"} <= set(entry["summary"])
    assert "| policy | pass_ratio |" in (tmp_path / "eval" / "eval_report.md").read_text()
    missing = run_tool(
        "tsrl-eval",
        ["task=aime", *model, f"eval.policies=[{tmp_path / 'nowhere'}]", f"run_dir={tmp_path / 'eval2'}"],
        tmp_path,
    )
    assert missing.returncode == 2 and "neither a model folder" in missing.stderr


def test_ladder_tool_builds_from_an_endpoint_and_training_reuses_the_stored_ladder(train, cache_dir, tmp_path):
    """Anchors from an OpenAI-compatible endpoint (here the scripted judge server: every anchor is the same
    text, so the tool must warn about near-duplicates), ranked and stored; a training run with the anchors
    file finds the stored ladder and spends no judge call on it."""
    ladders = cache_dir / "ladders"
    with JudgeServer() as server:
        result = run_tool(
            "tsrl-ladder",
            [
                "task=humor",
                "build.source=endpoint",
                f"endpoint.base_url={server.url}",
                "endpoint.model=writer",
                "build.max_prompts=64",
                "build.embeddings=false",
                f"ladder.ladder_dir={ladders}",
                f"run_dir={tmp_path / 'ladder'}",
            ],
            tmp_path,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "warning: near-duplicate anchors" in result.stdout
    report = json.loads((tmp_path / "ladder" / "ladder_report.json").read_text())
    assert report["anchors_per_prompt"] == [4] and report["judge_calls"] == 64 * 6  # C(4,2) pairs, one call each
    assert "ladder anchors: 256 requests to writer at" in result.stdout  # said before the writes: 64 × 4 tiers
    assert "judge spend: 384 calls — rank the 4 anchors of 64 training prompts" in result.stdout  # and the ranking
    anchors = tmp_path / "ladder" / "anchors.jsonl"
    assert len(anchors.read_text().splitlines()) == 64
    trained = train("task=humor", f"task.anchors_file={anchors}", "reward.k=4", "trainer.max_steps=1")
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert json.loads((tmp_path / "run" / "setup.json").read_text())["judge_calls_setup"] == 0


def test_ladder_tool_ranks_references_and_samples_the_policy(cli, cache_dir, tmp_path):
    model = model_args(cache_dir)
    refs = cli(
        [
            "task=stories",
            "build.max_prompts=3",
            "build.embeddings=true",
            f"ladder.ladder_dir={tmp_path / 'ladders'}",
            f"run_dir={tmp_path / 'refs'}",
        ],
        tmp_path,
        "tsrl-ladder",
    )
    assert refs.returncode == 0, refs.stderr[-3000:]
    report = json.loads((tmp_path / "refs" / "ladder_report.json").read_text())
    assert report["anchors_per_prompt"] == [10] and report["anchors_file"] == ""
    assert {"distinct_1", "distinct_2", "jaccard_distance"} <= set(report["diversity"])
    assert 0.0 < report["diversity"]["embedding_distance"] < 2.0  # MiniLM, from the offline package
    policy = cli(
        [
            "task=humor",
            "build.source=policy",
            "build.max_prompts=2",
            "build.samples=2",
            "build.embeddings=false",
            *model,
            f"ladder.ladder_dir={tmp_path / 'ladders'}",
            f"run_dir={tmp_path / 'policy'}",
        ],
        tmp_path,
        "tsrl-ladder",
    )
    assert policy.returncode == 0, policy.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "policy" / "anchors.jsonl").read_text().splitlines()]
    assert [len(r["anchors"]) for r in rows] == [8, 8]  # 4 tiers x 2 samples
    assert [a["tier"] for a in rows[0]["anchors"]] == ["low", "low", "okay", "okay", "good", "good", "top", "top"]
    bare = cli(["task=aime", "build.max_prompts=2", f"run_dir={tmp_path / 'bare'}"], tmp_path, "tsrl-ladder")
    assert bare.returncode == 2 and "needs at least 2 per prompt" in bare.stderr
    capped = [f"run_dir={tmp_path / 'capped'}", f"ladder.ladder_dir={tmp_path / 'fresh'}", "judge.max_setup_calls=50"]
    over = cli(["task=stories", "build.max_prompts=3", *capped], tmp_path, "tsrl-ladder")  # 3 × 45 pairs
    assert over.returncode == 2 and "setup would make 135 judge calls" in over.stderr, over.stderr[-2000:]
    assert not (tmp_path / "fresh").exists()  # nothing asked, nothing stored


def test_eval_of_the_initial_policy_gives_a_runs_step_zero_numbers(cli, train, cache_dir, tmp_path):
    """tsrl-eval samples as the training loop's evaluation does (fixed chunks, a seed per chunk): with the run's
    evaluation seed, prompts, samples and generator batch it measures the run's step-0 win-rate exactly."""
    held_out = ["generator.prompts_per_call=2"]
    trained = train("trainer.max_steps=1", "trainer.eval.max_prompts=5", "trainer.eval.samples=2", *held_out)
    assert trained.returncode == 0, trained.stderr[-3000:]
    start = json.loads((tmp_path / "run" / "eval.json").read_text())["start"]
    evaluated = cli(
        [*model_args(cache_dir), *held_out, "eval.samples=2", "eval.max_prompts=5", "eval.seeds=[1234]"]
        + [f"run_dir={tmp_path / 'eval'}"],
        tmp_path,
        "tsrl-eval",
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    (run,) = json.loads((tmp_path / "eval" / "eval_report.json").read_text())["policies"][0]["runs"]
    for key in ("winrate", "winrate_all", "mean_length", "judge_calls"):
        assert run[key] == start[key], key
    assert f"judge spend: {run['judge_calls']:,.0f} calls — 1 policies × 1 seeds × 5 prompts" in evaluated.stdout
