"""Performance retained and gain kept compare a noisy (or weak-judge) cell with its clean cell; runs of one recipe
from two machines may start from two policies (torch's CPU kernels differ, so the tiny policy's build does), and
then the ratio would compare those policies. tsrl-reproduce and scripts/seed_table.py withhold it and name the
cells, their Bases and their machines; cells that started from one policy keep their ratios."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

from tsrl.reproduce import NOISE_AXIS, SEED, aggregate
from tsrl.reproduce.tables import one_policy

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "seed_table.py"
spec = importlib.util.spec_from_file_location("seed_table", SCRIPT)
seed_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(seed_table)

XEON = {"cpu": "Intel Xeon", "cpu_capability": "AVX512", "torch": "2.13.0+cpu", "threads": 2, "platform": "x86_64"}
EPYC = {**XEON, "cpu": "AMD EPYC", "cpu_capability": "AVX2"}
GRID = {"method": ["tsrl", "rubric"], NOISE_AXIS: ["0.0", "0.3"], SEED: ["0", "1"]}


def fake_run(
    root: Path, method: str, p: str, seed: int, start: float, final: float, machine: dict, top: float = 11.5
) -> None:
    """A finished run folder as tsrl-train leaves it: overrides, eval.json, metrics, setup.json, done.json. `top`
    is the step-0 win-rate against the top tier, which the headline `start` does not show."""
    run = root / f"method={method},{NOISE_AXIS}={p},{SEED}={seed}"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(f"- method={method}\n- {NOISE_AXIS}={p}\n- {SEED}={seed}\n")
    history = [{"step": 0, "winrate": start, "winrate_top": top, "time_s": 0.5 + seed}, {"step": 5, "winrate": final}]
    (run / "eval.json").write_text(json.dumps({"start": history[0], "latest": history[-1], "history": history}))
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "judge/calls": 4.0, "train/entropy": 0.5}) + "\n")
    (run / "setup.json").write_text(json.dumps({"judge_calls_setup": 0, "resumed_from": None, "machine": machine}))
    (run / "done.json").write_text(json.dumps({"step": 5, "reason": "max_steps"}))


def fake_grid(root: Path, noisy_base: float, noisy_machine: dict, noisy_top: float = 11.5) -> None:
    """tsrl's clean runs from Base 32.3 on the Xeon, its noisy runs from `noisy_base` (top tier `noisy_top`) on
    `noisy_machine`; every rubric run from 32.3 on the Xeon. Clean finals 60 and 50, noisy 54 and 45."""
    for seed, (clean, noisy) in enumerate(((60.0, 54.0), (50.0, 45.0))):
        fake_run(root, "tsrl", "0.0", seed, 32.3, clean, XEON)
        fake_run(root, "tsrl", "0.3", seed, noisy_base, noisy, noisy_machine, noisy_top)
        fake_run(root, "rubric", "0.0", seed, 32.3, 40.0 + seed, XEON)
        fake_run(root, "rubric", "0.3", seed, 32.3, 36.0 + seed, XEON)


def test_tsrl_reproduce_withholds_the_ratios_of_cells_from_two_policies_and_names_them(tmp_path):
    fake_grid(tmp_path, 33.96, EPYC)
    text = aggregate(tmp_path, GRID)
    assert "| tsrl | 100 % | — |" in text and "| rubric | 100 % | 90 % |" in text  # 36.5 ÷ 40.5: one policy
    line = next(line for line in text.splitlines() if line.startswith("Not compared:"))
    assert f"method=tsrl, {NOISE_AXIS}=0.3: Base 33.96 on AMD EPYC (AVX2, torch 2.13.0+cpu" in line
    assert f"method=tsrl, {NOISE_AXIS}=0.0: Base 32.3 on Intel Xeon (AVX512" in line
    assert "re-run the cells on one machine (or from the same policy)" in line
    assert "rubric" not in line and text.count("Not compared:") == 1
    results = json.loads((tmp_path / "results.json").read_text())["noise"]
    assert "0.3" not in results["performance_retained"]["tsrl"] and "0.3" not in results["gain_kept"]["tsrl"]


def test_tsrl_reproduce_keeps_the_ratios_of_cells_from_one_policy_and_records_where_each_run_ran(tmp_path):
    fake_grid(tmp_path, 32.3, XEON)
    text = aggregate(tmp_path, GRID)
    assert "| tsrl | 100 % | 90 % |" in text  # (54 + 45) ÷ (60 + 50)
    assert "| tsrl | 100 % | 76 % |" in text  # (49.5 − 32.3) ÷ (55 − 32.3)
    assert "Not compared" not in text
    with (tmp_path / "table.csv").open() as handle:
        machines = {row["machine"] for row in csv.DictReader(handle)}
    assert machines == {"Intel Xeon (AVX512, torch 2.13.0+cpu, 2 threads, x86_64)"}


def test_seed_table_withholds_the_ratios_of_cells_from_two_policies_and_says_the_bases(tmp_path):
    fake_grid(tmp_path / "noise", 33.96, EPYC)
    fake_run(tmp_path / "weak", "rubric", "0.0", 0, 32.3, 39.0, XEON)
    fake_run(tmp_path / "weak", "tsrl", "0.0", 0, 33.96, 50.0, EPYC)
    noise = seed_table.cells(tmp_path / "noise")
    text = seed_table.table(noise, seed_table.cells(tmp_path / "weak"))
    assert "| tsrl, p = 0.3 | 49.5 [" in text and "| 0.50 | not compared (different Bases) | not compared |" in text
    assert "| tsrl, weak judge | 50.0 (n=1) | 50.0 | 0.50 | not compared (different Bases) | not compared |" in text
    assert "| rubric, p = 0.3 | 36.5 [" in text and "| rubric, weak judge | 39.0 (n=1) | 39.0 | 0.50 | 98 % (" in text
    notes = [line for line in text.splitlines() if line.startswith("Not compared:")]
    assert len(notes) == 2 and all("Base 33.96 on AMD EPYC" in n and "Base 32.3 on Intel Xeon" in n for n in notes)
    assert "tsrl, weak judge: Base 33.96" in notes[1]
    base = seed_table.base_line(noise)
    assert "did not start from one policy" in base and "32.3 (6 runs, on Intel Xeon" in base
    assert "33.96 (2 runs, on AMD EPYC" in base and "no mean" in base


def test_seed_table_keeps_the_ratios_and_the_mean_base_of_runs_from_one_policy(tmp_path):
    fake_grid(tmp_path, 32.3, XEON)
    noise = seed_table.cells(tmp_path)
    text = seed_table.table(noise, None)
    assert "| 0.50 | 90 % (90, 90; per-seed 90.0 [" in text and "| 76 % (" in text
    assert "Not compared" not in text
    assert seed_table.base_line(noise) == "Base (step 0, the untrained policy): 32.3 over 8 runs"


def test_runs_with_one_headline_base_but_other_step0_scores_started_from_two_policies(tmp_path):
    # measured: two CPU builds of the tiny policy both scored 32.3 against all tiers, 10.4 and 6.2 against the top
    fake_grid(tmp_path / "grid", 32.3, EPYC, noisy_top=6.2)
    text = aggregate(tmp_path / "grid", GRID)
    assert "| tsrl | 100 % | — |" in text and "| rubric | 100 % | 90 % |" in text
    line = next(line for line in text.splitlines() if line.startswith("Not compared:"))
    assert "step-0 winrate_top 11.5 against 6.2" in line and "rubric" not in line
    noise = seed_table.cells(tmp_path / "grid")
    assert "not compared (different Bases)" in seed_table.table(noise, None)
    base = seed_table.base_line(noise)
    assert "did not start from one policy" in base and "no mean" in base and "winrate_top" in base


def test_the_step0_wall_time_and_step_do_not_tell_policies_apart(tmp_path):
    fake_grid(tmp_path, 32.3, XEON)  # each seed's step-0 evaluation took its own time_s
    assert "Not compared" not in aggregate(tmp_path, GRID)
    assert seed_table.base_line(seed_table.cells(tmp_path)).endswith("32.3 over 8 runs")


def test_records_written_before_step0_scores_were_kept_are_compared_by_their_bases():
    old = {"start": 32.3}
    new = {"start": 32.3, "start_scores": '{"winrate": 32.3, "winrate_top": 11.5}'}
    other = {"start": 32.3, "start_scores": '{"winrate": 32.3, "winrate_top": 6.2}'}
    assert one_policy([old, new]) and not one_policy([old, new, other]) and not one_policy([old, {"start": 34.0}])
