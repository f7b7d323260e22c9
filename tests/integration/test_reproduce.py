"""tsrl-reproduce: every paper recipe composes for every method of its grid; a CPU smoke grid runs through Hydra
multirun, is interrupted, resumes without re-running its finished run, and aggregates into the tables; the
shipped launcher configs select Hydra's joblib and submitit launchers; trainer.max_judge_calls ends a run at an
equal judge budget."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from tsrl.config import register_configs
from tsrl.errors import INTERRUPTED
from tsrl.reproduce import SEED, SMOKE, SMOKE_DROPS, aggregate, grid_of, method_grids, smoke_grid, split_overrides
from tsrl.testing.cli import TINY, cli_env, read_metrics

ROOT = Path(__file__).resolve().parents[2]
PAPER = sorted(p.stem for p in (ROOT / "recipes" / "paper").glob("*.yaml"))
REPRODUCE = str(Path(sys.executable).parent / "tsrl-reproduce")


def composed(overrides: list[str], hydra: bool = False):
    register_configs()
    with initialize_config_module("tsrl.configs", version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=hydra)


def test_the_paper_recipes_are_the_ones_the_papers_describe():
    assert set(PAPER) >= {
        "arenarl_topologies",
        "reasoning_arena_table1",
        "tsrl_anchor_source",
        "tsrl_diversity",
        "tsrl_dpo",
        "tsrl_equal_budget",
        "tsrl_k_sweep",
        "tsrl_noise",
        "tsrl_self_bootstrap",
        "tsrl_table1",
        "tsrl_table2_weak_judge",
    }
    for name in PAPER:
        head = (ROOT / "recipes" / "paper" / f"{name}.yaml").read_text().splitlines()
        assert head[0] == "# @package _global_"
        assert any(line.startswith("#   launch:") for line in head) and any("paper:" in line for line in head), name


@pytest.mark.parametrize("recipe", PAPER)
def test_every_method_of_a_paper_recipe_composes_and_builds_on_cpu(recipe):
    """Each method of the grid, with the other axes at their first value and the --smoke CPU stand-ins: the typed
    config validates (every __post_init__) and the task loads. The GPU settings compose too (model, judge)."""
    gpu = composed([f"recipes=paper/{recipe}"])
    assert gpu.model.path and gpu.judge.base_urls  # a real policy and an endpoint judge on GPU
    grid = grid_of(f"paper/{recipe}", SMOKE)
    assert grid[SEED] == ["0", "1", "2"]
    for sub in method_grids(f"paper/{recipe}", grid, SMOKE):  # a method gets only the axes it has (rubric: no k)
        first = {a: v[0] for a, v in sub.items() if a not in ("method", SEED) and not a.startswith(SMOKE_DROPS)}
        for method in sub["method"]:
            check_method(recipe, grid, method, first)


def check_method(recipe: str, grid: dict[str, list[str]], method: str, first: dict[str, str]) -> None:
    """The typed config of one method of a recipe validates, its task loads, and the method's own settings survive
    the recipe (not the grid's axes)."""
    from tsrl.commands.base import to_run_config
    from tsrl.tasks import build_task

    cfg = composed(
        [
            f"recipes=paper/{recipe}",
            *SMOKE,
            f"method={method}",
            *(f"{a}={v}" for a, v in first.items()),
            "run_dir=unused",
        ]
    )
    assert build_task(to_run_config(cfg).task).prompts("train")
    expected = OmegaConf.load(ROOT / "configs" / "method" / f"{method}.yaml")
    for key, value in expected.items():
        if not OmegaConf.is_dict(value) and key != "defaults":  # a root setting (distinct_judges)
            assert key in grid or cfg[key] == value, (recipe, method, key)
            continue
        for leaf, setting in ({} if key == "defaults" else dict(value)).items():
            if f"{key}.{leaf}" not in grid:
                assert cfg[key][leaf] == setting, (recipe, method, key, leaf)


def test_the_shipped_launchers_are_hydras_joblib_and_submitit_slurm():
    targets = {
        name: composed(["recipes=paper/tsrl_k_sweep", f"hydra/launcher={name}"], hydra=True).hydra.launcher
        for name in ("local_parallel", "slurm")
    }
    assert targets["local_parallel"]._target_.endswith("JoblibLauncher") and targets["local_parallel"].n_jobs == 2
    assert targets["slurm"]._target_.endswith("SlurmLauncher") and targets["slurm"].gpus_per_node == 1


def test_smoke_narrows_the_grid():
    grid = {
        "method": ["a", "b", "c"],
        "model": ["x", "y"],
        "judge.model": ["w"],
        "reward.k": ["1", "2", "4"],
        SEED: ["0", "1", "2"],
    }
    assert smoke_grid(grid) == {"method": ["a", "b"], "reward.k": ["1", "2"], SEED: ["0"]}


def fake_run(root: Path, values: dict[str, str], start: float, final: float, flip_calls: float = 10.0) -> None:
    run = root / ",".join(f"{k}={v}" for k, v in values.items())
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("".join(f"- {k}={v}\n" for k, v in values.items()))
    history = [{"step": 0, "winrate": start}, {"step": 5, "winrate": final}]
    (run / "eval.json").write_text(
        json.dumps(
            {
                "judge": {"kind": "rubric_sim", "model": "simulated"},
                "start": history[0],
                "latest": history[-1],
                "history": history,
            }
        )
    )
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "judge/calls": flip_calls}) + "\n" for s in range(1, 6))
    )
    (run / "done.json").write_text(json.dumps({"step": 5, "reason": "max_steps"}))


def test_aggregate_writes_the_table_the_noise_kept_fraction_and_the_csv(tmp_path):
    grid = {"method": ["tsrl", "rubric"], "judge.flip_prob": ["0.0", "0.3"], SEED: ["0", "1", "2"]}
    gains = {
        ("tsrl", "0.0"): (20, 22),
        ("tsrl", "0.3"): (16, 18),
        ("rubric", "0.0"): (10, 10),
        ("rubric", "0.3"): (4, 6),
    }
    for (method, p), per_seed in gains.items():
        for seed, gain in zip("01", per_seed):
            fake_run(tmp_path, {"method": method, "judge.flip_prob": p, SEED: seed}, 40.0, 40.0 + gain)
    fake_run(tmp_path, {"method": "other", "judge.flip_prob": "0.0", SEED: "0"}, 40.0, 90.0)  # not in the grid
    fake_run(tmp_path, {"method": "tsrl", "judge.flip_prob": "0.3", SEED: "2"}, 40.0, 99.0)
    (tmp_path / "method=tsrl,judge.flip_prob=0.3,seed=2" / "done.json").unlink()  # still running: left out
    text = aggregate(tmp_path, grid)
    assert "1 unfinished run(s) left out" in text and "99" not in text
    assert "| tsrl | 61.0 (1.4) | 57.0 (1.4) | 50 | 4 |" in text
    assert "| rubric | 50.0 (0.0) | 45.0 (1.4) | 50 | 4 |" in text
    assert "| Base (step 0) | 40.0 | 40.0 | 0 | — |" in text
    retained = text.index("Performance retained (TSRL's measure for TSRL, §4.4/§4.5)")
    kept = text.index("Gain kept (TSRL's measure for the baselines, §4.5)")
    assert "| tsrl | 100 % | 93 % |" in text[retained:kept] and "| rubric | 100 % | 90 % |" in text[retained:kept]
    assert "| tsrl | 100 % | 81 % |" in text[kept:] and "| rubric | 100 % | 50 % |" in text[kept:]  # 17/21, 5/10
    assert "other" not in text
    rows = list(csv.DictReader((tmp_path / "table.csv").open()))
    assert len(rows) == 8 and {r["method"] for r in rows} == {"tsrl", "rubric"}
    assert {
        (r["method"], r["judge.flip_prob"], round(float(r["performance_retained"]), 3), round(float(r["gain_kept"]), 3))
        for r in rows
    } >= {("tsrl", "0.3", round(57 / 61, 3), round(17 / 21, 3))}
    noise = json.loads((tmp_path / "results.json").read_text())["noise"]
    assert (
        noise["performance_retained"]["rubric"]["0.3"] == pytest.approx(0.9)
        and noise["gain_kept"]["rubric"]["0.3"] == 0.5
    )
    assert (tmp_path / "curves.png").stat().st_size > 0 and (tmp_path / "axis_judge_flip_prob.png").is_file()
    assert (tmp_path / "noise_kept.png").is_file()


@pytest.mark.slow
def test_an_interrupted_smoke_grid_resumes_without_rerunning_finished_runs(cache_dir, tmp_path):
    """paper/tsrl_noise --smoke is 4 runs (tsrl, one_anchor × p = 0, 0.1). Stopped (a real SIGINT to
    tsrl-reproduce's process group, as Ctrl-C sends it; its multirun runs in a group of its own and gets the signal
    through it) once the first run is done, it says in one line what it kept and how to resume, with exit status
    130; the same command again skips that run — its metrics untouched — and trains the rest."""
    out = tmp_path / "grid"
    args = [
        REPRODUCE,
        "paper/tsrl_noise",
        "--smoke",
        "--out",
        str(out),
        f"model.cache_dir={cache_dir / 'models'}",
        *TINY,
        f"reward.ladder_dir={cache_dir / 'ladders'}",
    ]
    env = {**cli_env(), "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen(
        args, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    deadline = time.time() + 600
    while not list(out.glob("*/done.json")) and time.time() < deadline and first.poll() is None:
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGINT)
    printed, _ = first.communicate(timeout=120)
    done = list(out.glob("*/done.json"))
    assert len(done) == 1, "the sweep should have been stopped after its first run"
    assert first.returncode == INTERRUPTED and "Traceback" not in printed, printed[-3000:]
    stopped = f"tsrl-reproduce: stopped by Ctrl-C; kept 1 finished run in {out} and each unfinished run's newest"
    assert stopped in printed and "tsrl-train: stopped" not in printed, printed[-3000:]  # one line, the grid's
    finished = done[0].parent
    before = (finished / "metrics.jsonl").stat().st_mtime_ns, (finished / "eval.json").read_text()
    second = subprocess.run(args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert f"{finished} already finished" in second.stdout
    assert ((finished / "metrics.jsonl").stat().st_mtime_ns, (finished / "eval.json").read_text()) == before
    assert len(list(out.glob("*/done.json"))) == 4
    table = (out / "table.md").read_text()
    assert (
        "| tsrl |" in table and "| one_anchor |" in table and "Performance retained" in table and "Gain kept" in table
    )
    assert len(list(csv.DictReader((out / "table.csv").open()))) == 4


@pytest.mark.slow
def test_max_judge_calls_ends_the_run_at_the_budget_and_resume_skips_it(cli, cache_dir, tmp_path):
    """Ladder k = 2, 2 prompts × 4 samples × 2 anchors, one call each (the default order=random) = 16 calls a step:
    a budget of 35 ends the run after step 3 (the step that reaches it), evaluated and checkpointed there;
    resume=auto then trains nothing."""
    args = [
        f"model.cache_dir={cache_dir / 'models'}",
        *TINY,
        f"reward.ladder_dir={cache_dir / 'ladders'}",
        "reward.k=2",
        "trainer.max_steps=50",
        "trainer.max_judge_calls=35",
        "trainer.eval.max_prompts=2",
        "trainer.checkpoint.resume=auto",
        f"run_dir={tmp_path / 'run'}",
    ]
    result = cli(args, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_metrics(tmp_path / "run")
    assert [r["judge/calls"] for r in rows] == [16, 16, 16]
    assert json.loads((tmp_path / "run" / "done.json").read_text())["reason"] == "max_judge_calls"
    assert json.loads((tmp_path / "run" / "eval.json").read_text())["latest"]["step"] == 3
    assert (tmp_path / "run" / "checkpoints" / "step_000003").is_dir()
    again = cli(args, tmp_path)
    assert again.returncode == 0 and "already finished" in again.stdout
    assert len(read_metrics(tmp_path / "run")) == 3


def test_an_override_of_a_grid_axis_replaces_the_axis():
    grid = {"method": ["tsrl"], "reward.k": ["1", "2", "4", "8"], SEED: ["0", "1", "2"]}
    new, rest = split_overrides(grid, ["reward.k=1,2,3", "seed=0", "task=humor", "judge.flip_prob=0.1"])
    assert new == {"method": ["tsrl"], "reward.k": ["1", "2", "3"], SEED: ["0"]}
    assert rest == ["task=humor", "judge.flip_prob=0.1"] and grid["reward.k"] == ["1", "2", "4", "8"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "recipe, methods, task",
    [
        ("tsrl_table1", "sft,one_anchor,rubric,in_batch,reward_model,intuitor,tsrl", "humor"),
        (
            "reasoning_arena_table1",
            "rlvr,rlaif,arenarl,adaptive_pointwise,reasoning_arena,reasoning_arena_live",
            "stem",
        ),
    ],
)
def test_every_method_of_the_main_tables_trains_in_a_smoke_grid(cache_dir, tmp_path, recipe, methods, task):
    """Every method of TSRL Table 1 and Reasoning Arena Table 1 builds its components and trains 2 steps with the
    CPU stand-ins, in one multirun; the table has a row for each."""
    out = tmp_path / "grid"
    result = subprocess.run(
        [
            REPRODUCE,
            f"paper/{recipe}",
            "--smoke",
            "--out",
            str(out),
            f"method={methods}",
            f"task={task}",
            f"model.cache_dir={cache_dir / 'models'}",
            *TINY,
        ],
        env={**cli_env(), "OMP_NUM_THREADS": "1"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    table = (out / "table.md").read_text()
    for method in methods.split(","):
        assert f"\n| {method} | " in table, method
    assert len(list(out.glob("*/done.json"))) == len(methods.split(","))
    # the grid's judge calls, printed before its first run, against those its runs made
    said = re.search(r"free\): ([\d,]+)(?:–([\d,]+))? calls over (\d+) runs", result.stdout)
    low, high = (int((said.group(i) or said.group(1)).replace(",", "")) for i in (1, 2))
    made = 0.0
    for run in out.glob("*/done.json"):
        made += read_metrics(run.parent)[-1]["judge/calls_total"]
        made += sum(e["judge_calls"] for e in json.loads((run.parent / "eval.json").read_text())["history"])
    assert int(said.group(3)) == len(methods.split(",")) and low <= made <= high, (low, made, high)
    assert low == high or recipe == "reasoning_arena_table1"  # only routed rewards depend on the answers


def test_a_grid_with_a_judge_that_is_not_simulated_runs_only_with_yes(tmp_path):
    """TSRL's k sweep at full scale against a priced hosted judge: the grid's calls and dollars are printed, and
    nothing runs without --yes."""
    out = tmp_path / "grid"
    judge = ["judge.model=judge", "judge.base_urls=[http://127.0.0.1:9/v1]", "judge.price_in_per_m=0.15"]
    result = subprocess.run(
        [REPRODUCE, "paper/tsrl_k_sweep", "--out", str(out), *judge, "judge.price_out_per_m=0.6"],
        env=cli_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    assert re.search(r"judge spend of the grid \(judge=openai judge; .*\): [\d,]+ calls over 24 runs", result.stdout)
    assert re.search(r"at the judge's prices: at most \$[\d,]+\.\d\d", result.stdout)
    assert "add --yes to run it" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


def test_aggregate_reports_routing_beside_plain_rlvr(tmp_path):
    grid = {"method": ["rlvr", "reasoning_arena_live"], SEED: ["0"]}
    for method, extra in (
        ("rlvr", {"reward/zero_var_frac": 0.5}),
        ("reasoning_arena_live", {"reward/zero_var_frac": 0.1, "route/verifier_frac": 0.25, "route/tournament": 6.0}),
    ):
        fake_run(tmp_path, {"method": method, SEED: "0"}, 10.0, 12.0)
        run = tmp_path / f"method={method},seed=0"
        (run / "config.json").write_text(json.dumps({"trainer": {"group_size": 8}}))
        (run / "metrics.jsonl").write_text(
            "".join(json.dumps({"step": s, "judge/calls": 4.0, **extra}) + "\n" for s in range(1, 6))
        )
    text = aggregate(tmp_path, grid)
    assert "| rlvr | 50 % | — | — | 20 |" in text
    assert "| reasoning_arena_live | 10 % | 25 % | 48.0 | 20 |" in text
    assert (tmp_path / "zero_variance.png").is_file()


def test_aggregate_lays_out_reasoning_arenas_table1(tmp_path):
    """Runs of task=stem (several held-out benchmarks): one row per method, a column per benchmark of Table 1 in the
    config's order (pass ratio@n, LiveCodeBench v6 by pass@5 where the samples allow it, else its pass ratio@n,
    said below the table), their average, and the generations a step drew (mean over steps, then seeds)."""
    benchmarks = {
        "aime_2024": {"label": "AIME 2024", "metric": "pass_ratio"},
        "gpqa_diamond": {"label": "GPQA-Diamond", "metric": "pass_ratio"},
        "livecodebench_v6": {"label": "LiveCodeBench v6", "metric": "pass@5"},
    }
    grid = {"method": ["rlvr", "reasoning_arena_live"], SEED: ["0", "1"]}
    finals = {"rlvr": (30.0, 50.0, 40.0), "reasoning_arena_live": (45.0, 60.0, 51.0)}
    for method, (aime, gpqa, code) in finals.items():
        for seed, shift, drawn in (("0", 0.0, (128.0, 192.0)), ("1", 2.0, (64.0, 64.0))):
            fake_run(tmp_path, {"method": method, SEED: seed}, 10.0, 12.0)
            run = tmp_path / f"method={method},seed={seed}"
            start = {"step": 0, "pass_ratio": 10.0, **{f"{k}/pass_ratio": 10.0 for k in benchmarks}}
            latest = {
                "step": 5,
                "pass_ratio": 44.0,
                "aime_2024/pass_ratio": aime + shift,
                "gpqa_diamond/pass_ratio": gpqa + shift,
                "livecodebench_v6/pass_ratio": 1.0,
                "livecodebench_v6/pass@5": code + shift,
            }
            evals = {"judge": {"kind": "rubric_sim"}, "start": start, "latest": latest, "history": [start, latest]}
            (run / "eval.json").write_text(json.dumps(evals))
            (run / "config.json").write_text(
                json.dumps({"trainer": {"group_size": 8, "eval": {"samples": 16}}, "task": {"heldout": benchmarks}})
            )
            (run / "metrics.jsonl").write_text(
                "".join(json.dumps({"step": s, "fill/generations_per_step": g}) + "\n" for s, g in enumerate(drawn, 1))
            )
    text = aggregate(tmp_path, grid)
    table = text[text.index("Table 1 layout") :]
    assert "| method | AIME 2024 | GPQA-Diamond | LiveCodeBench v6 | average | generations per step |" in table
    assert "| Base (step 0) | 10.0 | 10.0 | 10.0 | 10.0 | — |" in table
    assert "| rlvr | 31.0 (1.4) | 51.0 (1.4) | 41.0 (1.4) | 41.0 (1.4) | 112 |" in table  # (160 + 64) / 2
    assert "| reasoning_arena_live | 46.0 (1.4) | 61.0 (1.4) | 52.0 (1.4) | 53.0 (1.4) | 112 |" in table
    assert "LiveCodeBench v6: pass@5." in table
    rows = list(csv.DictReader((tmp_path / "table.csv").open()))
    assert {float(r["average"]) for r in rows if r["method"] == "rlvr"} == {40.0, 42.0}
    for run in tmp_path.glob("*/config.json"):  # four samples cannot estimate pass@5: its pass ratio@4, said so
        run.write_text(run.read_text().replace('"samples": 16', '"samples": 4'))
        (run.parent / "eval.json").write_text(
            (run.parent / "eval.json").read_text().replace('"livecodebench_v6/pass@5"', '"x"')
        )
    text = aggregate(tmp_path, grid)
    assert "| rlvr | 31.0 (1.4) | 51.0 (1.4) | 1.0 (0.0) |" in text
    assert "LiveCodeBench v6: pass@5 needs 5 samples, pass ratio@4 shown" in text
