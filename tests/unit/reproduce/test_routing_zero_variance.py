"""The routing table of tsrl-reproduce reports the zero-variance share both among the groups a step drew and
among those the update kept: with trainer.fill=resample the second is ~0 by construction, so it alone hides
how many groups plain RLVR wasted."""

from __future__ import annotations

import json
from pathlib import Path

from tsrl.reproduce import SEED, aggregate


def fake_run(root: Path, method: str, metrics: dict[str, float]) -> None:
    run = root / f"method={method},{SEED}=0"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(f"- method={method}\n- {SEED}=0\n")
    history = [{"step": 0, "winrate": 10.0}, {"step": 5, "winrate": 12.0}]
    evals = {"judge": {"kind": "rubric_sim", "model": "simulated"}, "start": history[0], "latest": history[-1]}
    (run / "eval.json").write_text(json.dumps({**evals, "history": history}))
    (run / "config.json").write_text(json.dumps({"trainer": {"group_size": 8}}))
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "judge/calls": 4.0, **metrics}) + "\n" for s in range(1, 6))
    )
    (run / "done.json").write_text(json.dumps({"step": 5, "reason": "max_steps"}))


def test_the_routing_table_reports_zero_variance_before_and_after_filling(tmp_path):
    fake_run(tmp_path, "rlvr", {"fill/zero_var_frac": 0.75, "reward/zero_var_frac": 0.0})
    live = {"fill/zero_var_frac": 0.2, "reward/zero_var_frac": 0.0, "route/verifier_frac": 0.25, "route/tournament": 6}
    fake_run(tmp_path, "reasoning_arena_live", live)
    text = aggregate(tmp_path, {"method": ["rlvr", "reasoning_arena_live"], SEED: ["0"]})
    assert "| method | zero-variance groups, drawn / after filling | settled by the verifier |" in text
    assert "| rlvr | 75 % / 0 % | — | — | 20 |" in text
    assert "| reasoning_arena_live | 20 % / 0 % | 25 % | 48.0 | 20 |" in text
