"""What `tsrl-train` prints when a run ends (tsrl/commands/train.py end_lines)."""

from __future__ import annotations

from tsrl.commands.train import LOOPING, end_lines

RUN = {"run_dir": "runs/x", "headline": "held-out win-rate vs reference anchors (all tiers)"}


def test_a_healthy_run_says_how_the_headline_and_the_repetition_moved() -> None:
    summary = {**RUN, "heldout_start": 24.9, "heldout_end": 32.26, "repeated_start": 0.7, "repeated_end": 1.5}
    assert end_lines(summary) == [
        "held-out win-rate vs reference anchors (all tiers): 24.9% -> 32.3% (+7.4 points)",
        "held-out samples' repeated word bigrams: 0.7% -> 1.5%",
        "run directory: runs/x (metrics.jsonl, eval.json, plot.png, checkpoints/)",
    ]


def test_a_policy_stuck_in_loops_is_flagged_past_the_threshold_only() -> None:
    summary = {**RUN, "heldout_start": 24.9, "heldout_end": 34.7, "repeated_start": 0.7}
    at = end_lines({**summary, "repeated_end": LOOPING})[1]
    past = end_lines({**summary, "repeated_end": 36.1})[1]
    assert at == f"held-out samples' repeated word bigrams: 0.7% -> {LOOPING:.1f}%"
    assert past == (
        "held-out samples' repeated word bigrams: 0.7% -> 36.1% (over 10%: samples repeat themselves; read "
        "heldout.jsonl)"
    )


def test_a_verifier_task_has_no_repetition_line_and_a_finished_run_says_so() -> None:
    summary = {**RUN, "heldout_start": 10.0, "heldout_end": 12.0, "already_done": True}
    lines = end_lines(summary)
    assert lines[0].startswith("runs/x already finished (done.json)") and len(lines) == 3
    assert not any("repeated" in line for line in lines)
    assert end_lines({**RUN, "heldout_start": None}) == [
        "run directory: runs/x (metrics.jsonl, eval.json, plot.png, checkpoints/)"
    ]
