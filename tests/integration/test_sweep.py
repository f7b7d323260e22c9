"""A multirun's sweep table (tsrl/reproduce/sweep.py): a real 2 × 2 `tsrl-train -m` at the tiniest size (1 step, a
2-prompt evaluation, the wandb logger offline) names its run folders by their swept settings, ends with sweep.md (a
matrix of 4 cells) and sweep.png in its sweep folder and groups its wandb runs under the folder's name; `tsrl-sweep`
writes the same table again; a multirun that a failed cell stopped says which; `tsrl-reproduce --aggregate-only`
refuses the multirun's folder in one sentence."""

from __future__ import annotations

import json
import re
import shutil
import struct
from pathlib import Path

import pytest
from scipy import stats

from tsrl.commands.sweep import main as sweep_main
from tsrl.reproduce.sweep import STOPPED
from tsrl.testing.cli import run_cli, tiny_overrides

pytestmark = pytest.mark.slow
CELLS = {(k, p): f"reward.k={k},judge.flip_prob={p}" for k in ("1", "2") for p in ("0", "0.2")}
SMALL = ["trainer.max_steps=1", "trainer.eval.max_prompts=2"]
WANDB_BLOCK = 32768  # a .wandb file: LevelDB's log format, records in blocks of 32 KiB


@pytest.fixture(scope="module")
def sweep(cache_dir, tmp_path_factory):
    """The 2 × 2 multirun (a new process: wandb starts its service), its sweep folder and its output."""
    root = tmp_path_factory.mktemp("sweep")
    folder = root / "k_noise"
    args = ["-m", *tiny_overrides(cache_dir), *SMALL, "logger=wandb", "reward.k=1,2", "judge.flip_prob=0,0.2"]
    done = run_cli([*args, f"hydra.sweep.dir={folder}"], root)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder, done


def test_a_2x2_multirun_ends_with_a_matrix_of_its_4_cells_and_a_plot(sweep):
    folder, done = sweep
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == sorted(CELLS.values())
    assert f"sweep table: {folder / 'sweep.md'} and sweep.png (4 of 4 runs finished)" in done.stdout
    table = (folder / "sweep.md").read_text()
    assert "| reward.k \\ judge.flip_prob | 0 | 0.2 |" in table and "Not finished" not in table
    rows = {line[2]: line.strip("| ").split(" | ")[1:] for line in table.splitlines() if re.match(r"\| [12] \|", line)}
    for (k, p), name in CELLS.items():
        run = folder / name
        evals = json.loads((run / "eval.json").read_text())
        steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        calls = sum(r["judge/calls"] for r in steps) + sum(e["judge_calls"] for e in evals["history"])
        cell = rows[k][["0", "0.2"].index(p)]
        assert re.fullmatch(rf"{evals['latest']['winrate']:.1f} \(n=1\) · {calls:,.0f} calls · \d+ s", cell), cell
    assert (folder / "sweep.png").stat().st_size > 10_000


def test_tsrl_sweep_writes_the_same_table_and_plot(sweep, capsys):
    folder, _ = sweep
    written = (folder / "sweep.md").read_text()
    (folder / "sweep.md").unlink()
    (folder / "sweep.png").unlink()
    sweep_main([str(folder)])
    assert (folder / "sweep.md").read_text() == written
    assert (folder / "sweep.png").stat().st_size > 10_000
    assert written in capsys.readouterr().out


def test_tsrl_sweep_pools_a_cells_seeds_with_a_t_interval(sweep, tmp_path, capsys):
    """The 2 × 2 folder with judge.flip_prob recast as the seed (and known finals): two cells of two seeds."""
    folder = tmp_path / "seeds"
    shutil.copytree(sweep[0], folder, ignore=shutil.ignore_patterns("checkpoints", "wandb", "sweep.*"))
    seeds, finals = {"0": "0", "0.2": "1"}, {"0": 20.0, "0.2": 30.0}
    for (_, p), name in CELLS.items():
        overrides = folder / name / ".hydra" / "overrides.yaml"
        overrides.write_text(overrides.read_text().replace(f"- judge.flip_prob={p}\n", f"- seed={seeds[p]}\n"))
        evals = json.loads((folder / name / "eval.json").read_text())
        evals["latest"]["winrate"] = finals[p]
        (folder / name / "eval.json").write_text(json.dumps(evals))
    sweep_main([str(folder)])
    capsys.readouterr()
    low, high = stats.t.interval(0.95, 1, loc=25.0, scale=stats.sem(list(finals.values())))
    table = (folder / "sweep.md").read_text()
    assert "Varied: reward.k; seeds 0, 1 pooled per cell." in table
    for k in ("1", "2"):
        assert re.search(rf"^\| {k} \| 25\.0 \[{low:.1f}, {high:.1f}\] \| 2 \| [\d,]+ \| \d+ s \|$", table, re.M), table


def test_the_runs_of_a_multirun_share_a_wandb_group_named_after_its_folder(sweep):
    folder, _ = sweep
    groups = {name: run_groups(folder / name) for name in CELLS.values()}
    assert groups == {name: ["k_noise"] for name in CELLS.values()}


def run_groups(run_dir: Path) -> list[str]:
    """The group of each run record in a run's offline wandb files: a .wandb file is a 7-byte header, then blocks
    of records (4-byte checksum, 2-byte length, 1-byte type: full, or first/middle/last part of a wandb Record)."""
    from wandb.proto import wandb_internal_pb2  # deferred: wandb is an optional extra

    groups = []
    for path in run_dir.glob("wandb/offline-run-*/run-*.wandb"):
        data, pos, pending = path.read_bytes(), 7, b""
        while pos + 7 <= len(data):
            if WANDB_BLOCK - pos % WANDB_BLOCK < 7:  # a block's tail too short for a header is padding
                pos += WANDB_BLOCK - pos % WANDB_BLOCK
                continue
            length, kind = struct.unpack_from("<HB", data, pos + 4)
            pending, pos = pending + data[pos + 7 : pos + 7 + length], pos + 7 + length
            if kind in (1, 4):  # full, or the last part
                record = wandb_internal_pb2.Record()
                record.ParseFromString(pending)
                pending = b""
                groups += [record.run.run_group] if record.WhichOneof("record_type") == "run" else []
    return groups


def test_aggregate_only_refuses_a_multirun_folder_in_one_sentence(sweep, cli, tmp_path):
    folder, _ = sweep
    done = cli(["paper/tsrl_noise", "--aggregate-only", "--out", str(folder)], tmp_path, "tsrl-reproduce")
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        f"tsrl-reproduce: error: {folder} holds no run of this grid (no run folder's .hydra/overrides.yaml sets "
        "method to one of tsrl, one_anchor, rubric); --aggregate-only reads the folder the recipe's grid ran into, "
        f"and `tsrl-sweep {folder}` compares the runs of any tsrl-train multirun."
    ]
    assert not (folder / "table.md").exists() and not (folder / "table.csv").exists()


def test_a_multirun_stopped_by_a_failed_cell_names_it_in_its_table(tsrl, tmp_path):
    """reward.k=11 asks for more anchors than a humor prompt has: that cell exits 2 (ending the multirun) after the
    k = 1 cell finished."""
    folder = tmp_path / "partial"
    done = tsrl("reward.k=1,11", *SMALL, f"hydra.sweep.dir={folder}", multirun=True)
    assert done.returncode == 2 and "reward.k=11 needs 11 anchors" in done.stderr, done.stderr[-2000:]
    assert "(1 of 2 runs finished; not finished: reward.k=11; the multirun stopped early" in done.stdout
    table = (folder / "sweep.md").read_text()
    assert re.search(r"^\| 1 \| \d+\.\d \(n=1\) \| 1 \| [\d,]+ \| \d+ s \| 0 \|$", table, re.M), table
    assert "| 11 | not finished | 0 | — | — | 1 |" in table
    assert "Not finished (failed, stopped or still running; no done.json): reward.k=11." in table
    assert STOPPED in table and (folder / "sweep.png").is_file()


def test_tsrl_sweep_names_a_folder_without_runs(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        sweep_main([str(tmp_path)])
    assert stop.value.code == 2
    assert capsys.readouterr().err == (
        f"tsrl-sweep: error: {tmp_path} holds no run folder (one with a .hydra/overrides.yaml, as each run of a "
        "multirun has); give the sweep folder, hydra.sweep.dir (multirun/<date>/<time> unless set).\n"
    )
