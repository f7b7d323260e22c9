"""benchmarks/bench.py's table: each script's JSON (hand-made here, in the shape the script writes) → rows → markdown.
Pure functions only, no subprocess."""

import importlib.util
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("bench", Path(__file__).resolve().parents[2] / "benchmarks" / "bench.py")
bench = sys.modules["bench"] = importlib.util.module_from_spec(_spec)  # registered: its dataclasses look it up
_spec.loader.exec_module(bench)


def trainer_step(step_s: float, generate_s: float, update_s: float) -> dict:
    return {"step_s": step_s, "metrics": {"time/generate_s": generate_s, "time/update_s": update_s}}


def trainer_results(ratio_wall: float) -> dict:
    """trainer_bench.py's results.json for one size, one repeat of three steps (the first is warm-up)."""
    side = {"step_s": 1.0, "cpu_s": 0.9, "peak_rss_mb": 700.0}
    steps = [trainer_step(9.0, 1.0, 1.0), trainer_step(1.0, 0.3, 0.5), trainer_step(1.2, 0.4, 0.6)]
    return {
        "warmup": 1,
        "sizes": {
            "tiny": {
                "params": 1.3e6,
                "ratio_wall": ratio_wall,
                "ratio_cpu": 0.9,
                "tsrl": side,
                "trl": {**side, "step_s": 1.25, "cpu_s": 1.0, "peak_rss_mb": 1000.0},
                "repeats": [{"tsrl": {"steps": steps}, "trl": {"steps": steps}}],
            }
        },
    }


def test_trainer_rows_take_the_paired_ratio_and_mark_the_target():
    rows = {r.benchmark.split(": ")[1]: r for r in bench.trainer_rows(trainer_results(0.76), "cmd")}
    assert rows["wall s/step"].ratio == 0.76 and rows["wall s/step"].met is True
    assert rows["cpu s/step"].ratio == 0.9 and rows["cpu s/step"].met is False
    assert rows["peak RSS"].ratio == pytest.approx(0.7) and rows["peak RSS"].met is None
    assert all(r.command == "cmd" for r in rows.values())


def test_trainer_overhead_is_the_median_step_over_generate_plus_update_after_warmup():
    """Steady steps: 1.0 / (0.3 + 0.5) = 1.25 and 1.2 / (0.4 + 0.6) = 1.2; the warm-up step (9.0 / 2) is left out."""
    overhead = bench.trainer_rows(trainer_results(0.76), "cmd")[-1]
    assert overhead.benchmark.endswith("tsrl overhead")
    assert overhead.ratio == pytest.approx((1.25 + 1.2) / 2)


def test_judge_ratio_is_wall_over_bound_and_only_fault_free_aiohttp_has_the_target():
    row = {"verdicts": 256, "hedge": "on"}
    results = {
        "n": 256,
        "concurrency": 64,
        "latency_s": 0.05,
        "bound_s": 0.2,
        "rows": [
            {**row, "scenario": "fault-free", "transport": "aiohttp", "wall": 0.22},
            {**row, "scenario": "fault-free", "transport": "openai", "wall": 0.4},
            {**row, "scenario": "mixed-20%", "transport": "aiohttp", "wall": 1.0},
        ],
    }
    aiohttp, openai, mixed = bench.judge_rows(results, "cmd")
    assert aiohttp.ratio == pytest.approx(1.1) and aiohttp.met is True
    assert openai.ratio == pytest.approx(2.0) and openai.met is None
    assert mixed.ratio == pytest.approx(5.0) and mixed.met is None


def form_row(form: str, asked_as: str, calls_per_s: float, tokens: float, completion: float, cpu_ms: float) -> dict:
    return {
        "form": form,
        "asked_as": asked_as,
        "calls_per_s": calls_per_s,
        "tokens": tokens,
        "completion_tokens": completion,
        "cpu_ms": cpu_ms,
    }


def test_judge_form_rows_are_direct_over_reasoning_with_a_note_under_the_table():
    results = {
        "n": 256,
        "concurrency": 64,
        "latency_s": 0.05,
        "bound_s": 0.2,
        "rows": [],
        "forms": {
            "dialect": "structured_outputs",
            "latency_per_token_s": 0.01,
            "rows": [
                form_row("reasoning", "reasoning/regex", 250.0, 240.0, 16.0, 0.30),
                form_row("direct", "direct/choice", 800.0, 216.0, 1.0, 0.24),
            ],
        },
    }
    rows = bench.judge_rows(results, "cmd")
    calls, tokens, completion, cpu = rows
    assert calls.ratio == pytest.approx(3.2) and calls.met is None
    assert "direct (direct/choice) 800/s" in calls.measured and "reasoning (reasoning/regex)" in calls.peer
    assert tokens.ratio == pytest.approx(0.9)
    assert completion.ratio == pytest.approx(1 / 16)
    assert cpu.ratio == pytest.approx(0.8)
    assert all(r.command == "cmd" for r in rows)
    assert "50 ms + 10 ms per completion token" in calls.note and "bounded" in calls.note
    text = bench.report(rows, quick=False)
    assert text.count(calls.note) == 1 and text.index(calls.note) > text.index(bench.table(rows))


def test_judge_form_rows_need_both_forms():
    results = {
        "n": 256,
        "concurrency": 64,
        "latency_s": 0.05,
        "bound_s": 0.2,
        "rows": [],
        "forms": {
            "dialect": "structured_outputs",
            "latency_per_token_s": 0.0,
            "rows": [form_row("direct", "direct/choice", 800.0, 216.0, 1.0, 0.24)],
        },
    }
    assert bench.judge_rows(results, "cmd") == []
    assert "Notes:" not in bench.report([bench.Row("a", "1 s")], quick=False)


@pytest.mark.parametrize("batched, met", [(0.05, True), (0.6, False)])
def test_bt_ratio_is_the_speed_up_and_the_target_is_on_the_batched_time(batched, met):
    results = {"groups": 1024, "n": 16, "batched_s_best": batched, "scipy_loop_s": 1.2, "target_s": 0.5}
    (row,) = bench.bt_rows(results, "cmd")
    assert row.ratio == pytest.approx(1.2 / batched)
    assert row.met is met
    assert ("**not met**" in bench.table([row])) is not met


def test_topology_keeps_one_row_per_topology_at_the_largest_n_and_middle_tau():
    cells = [
        {"topology": t, "n": n, "tau": tau, "kendall": k, "calls_per_sample": c}
        for t, k, c in (("round_robin", 0.7, 7.5), ("swiss", 0.45, 2.0))
        for n in (4, 16)
        for tau in (0.25, 1.0, 2.0)
    ]
    rows = bench.topology_rows({"rows": cells}, "cmd")
    assert [r.benchmark for r in rows] == ["topology round_robin (N = 16, τ = 1.0)", "topology swiss (N = 16, τ = 1.0)"]
    assert [r.ratio for r in rows] == pytest.approx([0.7 / 7.5, 0.45 / 2.0])


def test_a_failed_benchmark_shows_as_failed_with_its_last_stderr_line():
    row = bench.failed_row("trainer", 1, "Traceback ...\n  ...\nRuntimeError: out of memory | oops\n\n", "cmd")
    text = bench.table([row])
    assert "**failed** (exit 1): RuntimeError: out of memory \\| oops" in text
    assert row.ratio is None and row.met is None
    assert "no output on stderr" in bench.failed_row("bt", -9, "", "cmd").measured


def test_table_marks_targets_met_and_not_met_and_quotes_the_command():
    rows = [
        bench.Row("a", "1 s", "2 s", 0.5, "× b", "≤ 0.8× b", True, "python a.py"),
        bench.Row("c", "3 s", "2 s", 1.5, "× d", "≤ 0.8× d", False, "python c.py"),
        bench.Row("e", "x", command="python e.py"),
    ]
    lines = bench.table(rows).splitlines()
    assert len(lines) == 2 + len(rows)
    assert "| **0.5** × b | ≤ 0.8× b: met | `python a.py` |" in lines[2]
    assert "| **1.5** × d | ≤ 0.8× d: **not met** |" in lines[3]
    assert "| — | — | `python e.py` |" in lines[4]
