"""benchmarks/trainer_bench.py's vLLM rows (--generator vllm): per-step records in the shape its trainer processes
send (hand-made here, no vLLM, no TRL) → the phase split, the summary, the table and the target lines.
Pure functions only, no subprocess."""

import importlib.util
import sys
from pathlib import Path

import pytest

_path = Path(__file__).resolve().parents[2] / "benchmarks" / "trainer_bench.py"
_spec = importlib.util.spec_from_file_location("trainer_bench", _path)
trainer_bench = sys.modules["trainer_bench"] = importlib.util.module_from_spec(_spec)  # its dataclasses look it up
_spec.loader.exec_module(trainer_bench)


def test_a_phase_timed_inside_another_is_not_counted_twice():
    """TRL's _generate runs the weight sync: generate is reported without it, and update is what is left."""
    clock = trainer_bench.PhaseClock(inside={"sync": "generate"})
    clock.spent.update({"generate": 3.0, "sync": 0.5, "score": 0.25})
    clock.spent_wall.update({"generate": 3.5, "sync": 0.6, "score": 0.3})
    record = clock.record(wall=10.0, cpu=9.0)
    assert record["generate"] == 2.5 and record["sync"] == 0.5 and record["sleep"] == 0.0
    assert record["update"] == pytest.approx(9.0 - 2.5 - 0.5 - 0.25)
    assert record["wall_generate"] == pytest.approx(2.9) and record["wall_update"] == pytest.approx(6.2)


def tsrl_step(step_s: float, tokens: int, sync_s: float = 0.2) -> dict:
    """A tsrl step's record: the clock's phases (CPU and wall) and tsrl's own time/* metrics (wall)."""
    generate, update = 0.4 * step_s, step_s - 0.4 * step_s - sync_s - 0.05
    return {
        "step_s": step_s,
        "cpu_s": step_s,
        "generate": generate,
        "score": 0.05,
        "sync": sync_s,
        "sleep": 0.001,
        "update": update,
        "wall_sleep": 0.001,
        "tokens": tokens,
        "completions": 64,
        "metrics": {
            "time/generate_s": generate,
            "time/score_s": 0.05,
            "time/update_s": update,
            "time/sync_s": sync_s,
            "time/step_s": step_s,
        },
    }


def trl_step(step_s: float, tokens: int) -> dict:
    return {
        "step_s": step_s,
        "cpu_s": step_s,
        "generate": 1.0,
        "score": 0.05,
        "sync": 0.3,
        "sleep": 0.0,
        "update": step_s - 1.35,
        "tokens": tokens,
        "completions": 64,
    }


def repeat(pairs: list[tuple[float, float]]) -> dict:
    """One repeat: a warm-up pair of steps, then `pairs` of (tsrl s/step, TRL s/step); TRL's completions are half
    as long in the second steady pair."""
    tsrl = [tsrl_step(30.0, 3072)] + [tsrl_step(a, 3072) for a, _ in pairs]
    trl = [trl_step(40.0, 3072)] + [trl_step(b, 3072 if i != 1 else 1536) for i, (_, b) in enumerate(pairs)]
    return {
        "tsrl": {"steps": tsrl, "peak_rss_mb": 2000.0, "setup_rss_mb": 900.0},
        "trl": {"steps": trl, "peak_rss_mb": 2500.0, "setup_rss_mb": 1000.0},
    }


def results() -> dict:
    repeats = [repeat([(6.0, 10.0), (6.0, 10.0), (7.0, 10.0)]), repeat([(5.0, 10.0), (6.0, 12.0), (8.0, 10.0)])]
    summary = trainer_bench.size_summary(repeats, warmup=1)
    return {"generator": "vllm", "sizes": {"27m": {"params": 26.7e6, **summary, "repeats": repeats}}}


def test_the_summary_pairs_steps_per_step_and_per_token_and_bounds_tsrl_by_its_own_phases():
    res = results()["sizes"]["27m"]
    assert res["ratio_wall"] == pytest.approx(0.6)  # 0.6 0.6 0.7 0.5 0.5 0.8
    assert res["ratio_wall_per_repeat"] == pytest.approx([0.6, 0.5])
    # per token: the pairs where TRL's completions were half as long count TRL's step twice as dear per token
    assert res["ratio_wall_per_token"] == pytest.approx(0.55)  # 0.6 0.3 0.7 0.5 0.25 0.8
    bound = res["tsrl_bound"]
    assert bound["step_over_bound"] == pytest.approx(6.0 / 5.95)  # score (0.05 s) is outside the bound
    assert bound["sync_share"] == pytest.approx(0.2 / 6.0) and bound["sleep_share"] == pytest.approx(0.001 / 6.0)
    assert res["trl"]["sync"] == 0.3 and res["trl"]["generate"] == 1.0


def test_the_vllm_table_shows_both_sides_phases_and_tsrls_bound():
    table = trainer_bench.vllm_markdown(results())
    head, *lines = table.splitlines()
    assert "tsrl/TRL wall per token" in head and "| sync | sleep/wake |" in head
    tsrl = next(line for line in lines if "tsrl generator=vllm" in line)
    trl = next(line for line in lines if "TRL GRPOTrainer, colocated vLLM" in line)
    assert "| 27m (26.7M) |" in tsrl and "**0.60** (0.50–0.60)" in tsrl and "| 0.55 |" in tsrl
    assert "| off |" in trl and "| 0.300 |" in trl  # TRL: its own sync, its sleep mode off
    bound = next(line for line in lines if line.startswith("| 27m") and "%" in line)
    assert f"**{6.0 / 5.95:.3f}**" in bound and "3.3 %" in bound


def test_the_target_lines_use_the_vllm_targets():
    lines = trainer_bench.target_lines(results())
    assert any("tsrl/TRL wall = 0.60" in line and "target ≤ 0.7: met" in line for line in lines)
    assert any("(generate + sync + update) = 1.008; target ≤ 1.05: met" in line for line in lines)


def test_vllm_defaults_and_quick(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["trainer_bench.py", "--generator", "vllm"])
    args = trainer_bench.parse_args()
    assert args.sizes == ["27m", "35m", "smollm2"] and args.repeats == 3
    assert args.out.parent.name == "trainer_bench_vllm" and args.engine_dtype == "bfloat16"
    monkeypatch.setattr(sys, "argv", ["trainer_bench.py", "--generator", "vllm", "--quick"])
    args = trainer_bench.parse_args()
    assert (args.sizes, args.repeats, args.steps) == (["27m"], 1, 2)
    monkeypatch.setattr(sys, "argv", ["trainer_bench.py"])
    args = trainer_bench.parse_args()
    assert args.sizes == ["tiny", "27m"] and args.out.parent.name == "trainer_bench"
