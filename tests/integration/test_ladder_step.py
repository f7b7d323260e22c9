"""tsrl-train's ladder step: on prompts with fewer anchors than reward.k needs (WebSight and MentalChat16K give
one reference per prompt, MWAHAHA none), the run writes the missing anchors first — here from the tiny policy,
ranked by the simulated judge — into the run directory, trains on them, and a resumed run reuses the file."""

from __future__ import annotations

import json

import pytest

from tsrl.tasks.base import DATA_DIR
from tsrl.testing.cli import TINY, printed_spend, read_metrics

pytestmark = pytest.mark.slow


def one_reference_copy(tmp_path):
    """The first four shipped humor prompts, each with its top anchor only: the shape of WebSight's data."""
    rows = [json.loads(line) for line in (DATA_DIR / "humor" / "train.jsonl").read_text().splitlines()[:4]]
    path = tmp_path / "one_ref.jsonl"
    path.write_text("".join(json.dumps({**row, "anchors": row["anchors"][:1]}) + "\n" for row in rows))
    return path


def test_a_run_on_one_reference_per_prompt_builds_its_ladder_trains_and_reuses_it(cli, cache_dir, tmp_path):
    run = tmp_path / "run"
    base = [
        f"model.cache_dir={cache_dir / 'models'}",
        *TINY,
        f"run_dir={run}",
        "task=humor",
        f"task.train_file={one_reference_copy(tmp_path)}",
        "reward.k=4",
        f"reward.ladder_dir={tmp_path / 'ladders'}",
        "trainer.eval.max_prompts=2",
        "trainer.eval.every=0",
    ]
    off = cli([*base, "ladder.build=off", "trainer.max_steps=1"], tmp_path)
    assert off.returncode == 2 and "(ladder.build=auto: the data" in off.stderr and "has 1" in off.stderr, off.stderr

    first = cli([*base, "trainer.max_steps=2"], tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    said = first.stdout + first.stderr
    assert "4 training prompts have fewer than the 4 anchors the reward needs" in said
    assert "with the policy into" in said and "ladder: wrote" in said and " s" in said.split("ladder: wrote")[1]
    built = run / "ladder_anchors.jsonl"
    rows = [json.loads(line) for line in built.read_text().splitlines()]
    assert [len(r["anchors"]) for r in rows] == [5, 5, 5, 5]  # the reference + one anchor per tier (4 tiers)
    assert [a["tier"] for a in rows[0]["anchors"]] == ["top", "low", "okay", "good", "top"]
    assert [r["step"] for r in read_metrics(run)] == [1, 2]
    setup = json.loads((run / "setup.json").read_text())["judge_calls_setup"]
    assert setup == 4 * 10  # the new ladder was ranked: 4 prompts × 5 anchors' 10 pairs
    assert printed_spend(first.stdout)["setup"] == (setup, setup)  # as said before the anchors were written
    assert "ladder anchors: the policy writes 4 anchors for each of 4 training prompts" in first.stdout
    assert json.loads((run / "config.json").read_text())["task"]["anchors_file"] == str(built)  # what it trained on

    before = built.read_text()
    resumed = cli([*base, "trainer.max_steps=3", "trainer.checkpoint.resume=auto"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "ladder: reusing" in resumed.stdout + resumed.stderr and built.read_text() == before
    assert [r["step"] for r in read_metrics(run)] == [1, 2, 3]
    # what the resumed run said it would still ask: step 3 and its evaluation at the end
    evals = json.loads((run / "eval.json").read_text())["history"]
    assert "rest of the run from step 2:" in resumed.stdout
    assert printed_spend(resumed.stdout)["run"][0] == read_metrics(run)[-1]["judge/calls"] + evals[-1]["judge_calls"]
    assert json.loads((run / "setup.json").read_text())["judge_calls_setup"] == 0  # its stored ranking reused
