"""Every run says what it will ask its judge before the first call, and then asks exactly that."""

import json

import pytest

from tsrl.testing.cli import TINY, printed_spend, read_metrics

pytestmark = pytest.mark.slow


def spent(run) -> dict[str, float]:
    rows = read_metrics(run)
    evals = json.loads((run / "eval.json").read_text())["history"]
    setup = json.loads((run / "setup.json").read_text())["judge_calls_setup"]
    return {
        "setup": setup,
        "steps": [r["judge/calls"] for r in rows],
        "evals": [e["judge_calls"] for e in evals],
        "run": rows[-1]["judge/calls_total"] + sum(e["judge_calls"] for e in evals),
    }


def test_a_ladder_run_makes_the_calls_it_printed(tsrl, tmp_path):
    """A fresh ladder store: the setup round-robin (64 prompts × 45 pairs), 2 × 4 × 4 calls per step, 4 held-out
    prompts × their anchors per evaluation, as printed before the first call."""
    result = tsrl(f"reward.ladder_dir={tmp_path / 'fresh'}")
    assert result.returncode == 0, result.stderr[-3000:]
    said, did = printed_spend(result.stdout), spent(tmp_path / "run")
    assert said["setup"] == (did["setup"],) * 2 and did["setup"] == 64 * 45
    assert said["step"] == (32, 32) and did["steps"] == [32] * 3  # 2 groups × 4 completions × 4 anchors
    assert said["evaluations"] == (2, 2) and did["evals"] == [said["eval"][0]] * 2
    assert said["run"] == (did["run"],) * 2
    assert result.stdout.index("judge spend") < result.stdout.index("held-out")


def test_a_tournament_run_makes_the_calls_it_printed(cli, cache_dir, tmp_path):
    """ArenaRL's method (seeded single elimination, both orders asked: two calls a match) on groups of 5: what the
    run printed per step is what each step asked."""
    run = tmp_path / "run"
    small = [*TINY, f"model.cache_dir={cache_dir / 'models'}", "trainer.max_steps=2", "trainer.eval.max_prompts=2"]
    result = cli([*small, f"run_dir={run}", "method=arenarl", "trainer.group_size=5"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    said, did = printed_spend(result.stdout), spent(run)
    # 2 groups × (4 seeding matches against the greedy anchor + 4 bracket matches) × 2 orders
    assert said["step"] == (32, 32) and did["steps"] == [32] * 2
    assert said["setup"] == (0, 0) == (did["setup"],) * 2 and said["run"] == (did["run"],) * 2


def test_a_setup_over_the_cap_stops_before_asking(tsrl, tmp_path):
    result = tsrl(f"reward.ladder_dir={tmp_path / 'fresh'}", "judge.max_setup_calls=1000")
    assert result.returncode == 2
    assert "setup would make 2,880 judge calls" in result.stderr and "judge.max_setup_calls=1,000" in result.stderr
    assert "judge.max_setup_calls=2880" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "fresh").exists() and not (tmp_path / "run" / "setup.json").exists()


def test_k_above_the_anchors_of_the_data_stops_before_any_call(tsrl, tmp_path):
    """Humor's prompts carry 10 anchors: k = 50 writes none with ladder.build=auto and stops, in one sentence."""
    result = tsrl("reward.k=50")
    assert result.returncode == 2 and "judge spend" not in result.stdout
    message = result.stderr.strip().splitlines()[-1]
    assert "reward.k=50 needs 50 anchors per training prompt" in message and "has 10" in message
    assert "lower reward.k to at most 10" in message and "ladder.build=policy" in message
    assert not (tmp_path / "run" / "ladder_anchors.jsonl").exists()
