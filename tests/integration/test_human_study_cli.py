"""tsrl-human-study end to end, as subprocesses of the real entry point: export blinded sheets from hand-made run
directories (their heldout.jsonl and eval.json) on the shipped stories task, fill the sheets with simulated
annotators (a known order of the methods and anchor tiers plus noise), import them, judge the same items with the
simulated judge, and report: the mean ranks recover the known order, and agreement is high."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tomllib

from tsrl.evaluation import heldout_rows
from tsrl.evaluation.human_study import KEY_FILE

ROOT = Path(__file__).resolve().parents[2]
QUALITY = {
    "tsrl": 6.0,
    "anchor/top": 5.0,
    "anchor/good": 4.0,
    "one_anchor": 3.0,
    "anchor/okay": 2.0,
    "rubric": 1.0,
    "anchor/weak": 0.0,
    "anchor/low": -1.0,
}
"""The simulated annotators' latent quality of each method and anchor tier (higher = better)."""


def study_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tsrl.commands.human_study", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )


def make_run(root: Path, method: str, seed: int, winrate: float) -> None:
    """A finished stories run: overrides, an eval.json and the held-out generations of two evaluations."""
    from tsrl.tasks import build_task
    from tsrl.tasks.stories import StoriesConfig
    from tsrl.types import Group, Rollout

    run = root / f"method={method},seed={seed},task=stories"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(f"- method={method}\n- seed={seed}\n- task=stories\n")
    latest = {"step": 20, "winrate": winrate}
    (run / "eval.json").write_text(
        json.dumps(
            {
                "judge": {"kind": "rubric_sim"},
                "start": {"step": 0, "winrate": 10},
                "latest": latest,
                "history": [latest],
            }
        )
    )
    prompts = build_task(StoriesConfig()).prompts("eval")
    rows = []
    for step in (0, 20):
        groups = [
            Group(
                p,
                [],
                [
                    Rollout(f"story {len(method)} seed {seed} step {step} sample {i} on {p.id}", [], [], False)
                    for i in range(2)
                ],
            )
            for p in prompts
        ]
        rows += heldout_rows(step, groups)
    (run / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def fill(sheet: Path, key: dict, rng: np.random.Generator, out: Path) -> Path:
    """An annotator's sheet: each prompt's items ranked by QUALITY + N(0, 1) noise (no ties)."""
    rows = list(csv.DictReader(sheet.open()))
    by_prompt: dict[str, list[dict]] = {}
    for row in rows:
        by_prompt.setdefault(row["prompt_id"], []).append(row)
    for items in by_prompt.values():
        noisy = [QUALITY[key["items"][r["item_id"]]] + rng.normal() for r in items]
        for rank, index in enumerate(np.argsort(noisy)[::-1], start=1):
            items[index]["rank"] = str(rank)
    with out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return out


def test_export_import_judge_report_round_trip(tmp_path):
    runs = tmp_path / "runs"
    for method, winrate in (("tsrl", 70.0), ("one_anchor", 50.0), ("rubric", 30.0)):
        for seed in (0, 1):
            make_run(runs, method, seed, winrate + seed)
    study = tmp_path / "study"
    ambiguous = study_cli("export", "--runs", str(runs), "--out", str(study))
    assert ambiguous.returncode == 2 and "share the label" in ambiguous.stderr and "--where" in ambiguous.stderr
    done = study_cli(
        "export", "--runs", str(runs), "--where", "seed=0", "--out", str(study), "--prompts", "50", "--annotators", "6"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "16 held-out prompts, not the 50" in done.stdout  # the shipped sample has 16
    key = json.loads((study / KEY_FILE).read_text())
    assert set(key["items"].values()) == set(QUALITY) and len(key["items"]) == 16 * 8
    assert key["runs"]["tsrl"]["value"] == 70.0
    sheets = sorted((study / "sheets").glob("*.csv"))
    assert [s.stem for s in sheets] == [f"annotator_{i:02d}" for i in range(1, 7)]
    page = (study / "sheets" / "annotator_01.html").read_text()
    assert page.count("<section") == 16 and "http" not in page  # offline: nothing fetched
    assert not any(label in page for label in ("tsrl", "one_anchor", "rubric", "anchor/"))  # blinded
    assert "seed 0 step 20 sample 0" in page and "step 0 " not in page and "sample 1" not in page
    orders = [[r["item_id"] for r in csv.DictReader(s.open())] for s in sheets[:2]]
    assert sorted(orders[0]) == sorted(orders[1]) and orders[0] != orders[1]  # each annotator's own order

    rng = np.random.default_rng(0)
    filled = [fill(s, key, rng, tmp_path / s.name) for s in sheets]
    imported = study_cli("import", str(study), *map(str, filled))
    assert imported.returncode == 0, imported.stderr[-3000:]
    judged = study_cli("judge", str(study), "judge=rubric_sim")
    assert judged.returncode == 0, judged.stderr[-3000:]
    reported = study_cli("report", str(study), "--bootstrap", "500")
    assert reported.returncode == 0, reported.stderr[-3000:]

    report = json.loads((study / "report.json").read_text())
    assert [r["label"] for r in report["mean_rank"]] == sorted(QUALITY, key=QUALITY.get, reverse=True)
    assert all(r["low"] <= r["mean"] <= r["high"] for r in report["mean_rank"])
    assert report["kendalls_w"]["mean_over_prompts"] > 0.7 and len(report["annotators"]) == 6
    assert report["vs_winrate"]["tau_b"] == 1.0  # 70 > 50 > 30, as the humans rank the three methods
    assert (
        -1.0 <= report["vs_judge"]["tau_b_over_labels"] <= 1.0 and report["vs_judge"]["judge"]["kind"] == "rubric_sim"
    )
    text = (study / "report.md").read_text()
    assert "| tsrl |" in text and "Kendall's W" in text and "τ_b" in text


def test_the_entry_point_is_declared():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["tsrl-human-study"] == "tsrl.commands.human_study:main"


PAGE_DRIVER = r"""
const spec = JSON.parse(require("fs").readFileSync(0, "utf8")), store = {}, elements = {go: {}, status: {}};
let csv = null;
global.localStorage = {getItem: k => store[k] || null, setItem: (k, v) => { store[k] = v; }};
global.Blob = class { constructor(parts) { csv = parts.join(""); } };
global.URL = {createObjectURL: () => "blob:sheet"};
const sections = spec.sections.map(s => ({dataset: {prompt: s.prompt, number: s.number}, classList: {toggle() {}},
  selects: s.items.map(([item, value]) => ({dataset: {item}, value})), querySelectorAll() { return this.selects; }}));
global.document = {querySelectorAll: q => q === "select" ? sections.flatMap(s => s.selects) : sections,
  getElementById: id => elements[id], createElement: () => ({click() {}})};
eval(spec.script);
elements.go.onclick();
process.stdout.write(JSON.stringify({csv, status: elements.status.textContent}));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the sheet's script")
def test_the_html_sheets_download_is_a_csv_that_imports(tmp_path):
    """The exported page's own script (run by node over a minimal DOM of the page's selects): a tie is refused on
    the page; a full ranking downloads a CSV that `read_sheet` accepts with the same ranks."""
    from tsrl.evaluation.human_study import read_sheet

    make_run(tmp_path / "runs", "tsrl", 0, 60.0)
    assert study_cli("export", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "s")).returncode == 0
    page = (tmp_path / "s" / "sheets" / "annotator_01.html").read_text()
    script = page[page.index("<script>") + len("<script>") : page.index("</script>")]
    sections = [
        {
            "prompt": m.group(1),
            "number": m.group(2),
            "items": [[i, ""] for i in re.findall(r'data-item="([^"]+)"', m.group(3))],
        }
        for m in re.finditer(r'<section data-prompt="([^"]+)" data-number="(\d+)">(.*?)</section>', page, re.S)
    ]
    for section in sections:
        for rank, item in enumerate(section["items"], start=1):
            item[1] = str(rank)

    def drive() -> dict:
        out = subprocess.run(
            ["node", "-e", PAGE_DRIVER],
            input=json.dumps({"script": script, "sections": sections}),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    sections[0]["items"][1][1] = "1"  # a tie in prompt 1
    refused = drive()
    assert refused["csv"] is None and "prompt(s) 1" in refused["status"]
    sections[0]["items"][1][1] = "2"
    (tmp_path / "downloaded.csv").write_text(drive()["csv"])
    annotator, ranks = read_sheet(tmp_path / "downloaded.csv", json.loads((tmp_path / "s" / "study.json").read_text()))
    assert annotator == "annotator_01"
    assert ranks[sections[0]["prompt"]] == {item: int(rank) for item, rank in sections[0]["items"]}
