"""The human study's math (Kendall's W, τ_b, bootstrap intervals) against hand-computed values and scipy, and its
sheets: blinded ids, the checks of a filled sheet (file, row and fix named), an import that keeps what it had."""

from __future__ import annotations

import csv
import json
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from tsrl.commands.human_study import export, import_sheets
from tsrl.evaluation.human_study import (
    ANCHOR,
    STUDY_FILE,
    StudyError,
    StudyRun,
    build_study,
    item_ids,
    markdown,
    read_sheet,
    summarise,
)
from tsrl.ranking.agreement import (
    average_ranks,
    bootstrap_mean_ci,
    kendall_tau_b,
    kendalls_w,
    pairwise_win_rate,
    spearman_rho,
    tie_term,
)
from tsrl.types import Anchor, Prompt


def test_average_ranks_share_ties():
    assert average_ranks(np.array([10, 20, 20, 30])).tolist() == [1, 2.5, 2.5, 4]
    assert average_ranks(np.array([3.0, 1.0, 2.0])).tolist() == [3, 1, 2]
    assert tie_term(np.array([1, 2.5, 2.5, 4])) == 6  # one pair tied: 2³ − 2


def test_kendalls_w_is_one_for_identical_rankings_and_zero_for_two_reversed():
    assert kendalls_w(np.array([[1, 2, 3, 4]] * 5)) == pytest.approx(1.0)
    assert kendalls_w(np.array([[1, 2, 3, 4], [4, 3, 2, 1]])) == pytest.approx(0.0)


def test_kendalls_w_hand_computed():
    """3 raters, 3 items: rank sums R = (4, 6, 8), R̄ = 6, S = 8; W = 12·8 / (3²·(27 − 3)) = 96/216 = 4/9."""
    assert kendalls_w(np.array([[1, 2, 3], [1, 3, 2], [2, 1, 3]])) == pytest.approx(4 / 9)


def test_kendalls_w_tie_correction_hand_computed():
    """Rater 2 ties items 2 and 3 (ranks 2.5): R = (4, 5.5, 9.5, 11), R̄ = 7.5, S = 32.5, Σ T = 2³ − 2 = 6;
    W = 12·32.5 / (9·60 − 3·6) = 390/522 (uncorrected 390/540)."""
    rankings = np.array([[1, 2, 3, 4], [1, 2.5, 2.5, 4], [2, 1, 4, 3]])
    assert kendalls_w(rankings) == pytest.approx(390 / 522)


def test_kendalls_w_is_friedmans_statistic_over_m_times_n_minus_one():
    """scipy's Friedman χ² (tie-corrected) = M(N − 1)·W: checked on random rankings with ties."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        scores = rng.integers(0, 4, size=(5, 6)).astype(float)  # [M, N], ties likely
        rankings = np.array([average_ranks(row) for row in scores])
        chi2 = stats.friedmanchisquare(*rankings.T).statistic
        assert kendalls_w(rankings) == pytest.approx(chi2 / (5 * (6 - 1)))


def test_kendall_tau_b_hand_computed_and_against_scipy():
    assert kendall_tau_b([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)  # C = 2, D = 1
    assert kendall_tau_b([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(kendall_tau_b([1, 1, 1], [1, 2, 3]))
    rng = np.random.default_rng(1)
    for _ in range(30):
        x, y = rng.integers(0, 5, size=9), rng.integers(0, 5, size=9)  # ties in both
        assert kendall_tau_b(x, y) == pytest.approx(stats.kendalltau(x, y).statistic)


def test_pairwise_win_rate_hand_computed():
    """Two raters, three items: item 0 beats both others for rater 1 and one of two for rater 2: 3/4; item 1 the
    same the other way round: 3/4; item 2 loses all four: 0. A tie counts ½: ranks (1, 2.5, 2.5, 4) give item 1
    a loss, a tie and a win: 1.5/3."""
    assert pairwise_win_rate(np.array([[1, 2, 3], [2, 1, 3]])).tolist() == [0.75, 0.75, 0.0]
    assert pairwise_win_rate(np.array([[1, 2.5, 2.5, 4]])).tolist() == [1.0, 0.5, 0.5, 0.0]


def test_spearman_rho_hand_computed_with_its_p_value():
    """x = (1, 2, 3, 4), y = (1, 3, 2, 4): Σd² = 2, ρ = 1 − 6·2/(4·15) = 0.8; t = ρ·sqrt(2/(1 − ρ²)) with 2
    degrees of freedom, whose two-sided p is 1 − t/sqrt(2 + t²) = 1 − 0.8 = 0.2."""
    rho, p_value = spearman_rho(np.array([1, 2, 3, 4]), np.array([1, 3, 2, 4]))
    assert rho == pytest.approx(0.8) and p_value == pytest.approx(0.2)
    assert np.isnan(spearman_rho(np.array([1, 1, 1]), np.array([1, 2, 3]))[0])


def test_bootstrap_interval_of_a_mean_over_prompts():
    constant = np.full((10, 2), 3.0)
    mean, low, high = bootstrap_mean_ci(constant, samples=200)
    assert mean.tolist() == [3, 3] and low.tolist() == [3, 3] and high.tolist() == [3, 3]
    rng = np.random.default_rng(2)
    values = rng.normal(5.0, 1.0, size=(400, 1))
    mean, low, high = bootstrap_mean_ci(values, samples=2000, seed=3)
    half = 1.96 * values.std(ddof=1) / np.sqrt(400)  # the normal interval the percentile bootstrap approximates
    assert low[0] < mean[0] < high[0] and (high - low)[0] == pytest.approx(2 * half, rel=0.1)
    again = bootstrap_mean_ci(values, samples=2000, seed=3)
    assert again[1][0] == low[0]  # seeded
    with_gap = np.array([[1.0, np.nan], [3.0, 2.0]])  # label 2 absent from prompt 1: skipped, not a zero
    assert bootstrap_mean_ci(with_gap, samples=50)[0].tolist() == [2.0, 2.0]


def test_item_ids_are_blinded_codes_per_prompt():
    assert item_ids(7, 3) == ["P07-A", "P07-B", "P07-C"]
    assert len(set(item_ids(1, 30))) == 30


class TwoPromptTask:
    """A task with two held-out prompts of two tiered anchors each."""

    name = "stories"

    def prompts(self, split: str) -> list[Prompt]:
        return [Prompt(f"e{i}", f"premise {i}", (Anchor(f"top {i}", "top"), Anchor(f"low {i}", "low"))) for i in (1, 2)]


def small_study() -> tuple[dict, dict]:
    runs = [StudyRun(m, Path(m), {"e1": f"{m} one", "e2": f"{m} two"}) for m in ("tsrl", "rubric")]
    study, key = build_study(TwoPromptTask(), runs, prompts=50, seed=0)
    study.update(task="stories", task_overrides=["task=stories"], annotators=["annotator_01", "annotator_02"])
    key["runs"] = {"tsrl": {"metric": "winrate", "value": 70.0}, "rubric": {"metric": "winrate", "value": 40.0}}
    return study, key


def test_build_study_shuffles_every_generation_and_anchor_under_blinded_ids():
    study, key = small_study()
    assert [p["id"] for p in study["prompts"]] == ["e1", "e2"]
    for prompt in study["prompts"]:
        labels = sorted(key["items"][i] for i in prompt["items"])
        assert labels == sorted(["tsrl", "rubric", f"{ANCHOR}/top", f"{ANCHOR}/low"])
        assert all(i.startswith(f"P0{prompt['number']}-") for i in prompt["items"])
    assert all(set(item) == {"prompt_id", "text"} for item in study["items"].values())  # the labels: in the key only
    assert set(study) == {"prompts", "items", "seed", "requested_prompts", "task", "task_overrides", "annotators"}
    again, _ = small_study()
    assert again == study  # seeded


def sheet(path: Path, study: dict, order: dict[str, list[str]], annotator: str = "annotator_01") -> Path:
    """A filled sheet: each prompt's items ranked in `order` (a list of labels, best first)."""
    _, key = small_study()
    rows = [["annotator", "prompt_id", "item_id", "rank"]]
    for prompt in study["prompts"]:
        for item in prompt["items"]:
            rows.append([annotator, prompt["id"], item, str(order[prompt["id"]].index(key["items"][item]) + 1)])
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    return path


BEST_FIRST = ["tsrl", f"{ANCHOR}/top", "rubric", f"{ANCHOR}/low"]


def write_rows(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    return path


def test_read_sheet_names_the_file_the_row_and_the_fix(tmp_path):
    study, _ = small_study()
    good = sheet(tmp_path / "a.csv", study, {"e1": BEST_FIRST, "e2": BEST_FIRST})
    annotator, ranks = read_sheet(good, study)
    assert annotator == "annotator_01" and sorted(ranks["e1"].values()) == [1, 2, 3, 4]
    rows = list(csv.reader(good.open()))  # rows[k] is spreadsheet row k + 1 (the header is row 1)
    cases = {
        "rank": (3, 3, "x", "row 3: rank 'x'"),
        "range": (3, 3, "9", "a whole number from 1 to 4"),
        "item": (2, 2, "P09-Z", "row 2: item 'P09-Z'"),
        "tie": (3, 3, rows[1][3], "rows 2, 3"),
        "header": (1, 3, "grade", "no rank column"),
    }  # (row, column index, new value, the message names)
    for case, (row, column, value, expected) in cases.items():
        bad = [list(r) for r in rows]
        bad[row - 1][column] = value
        with pytest.raises(StudyError) as err:
            read_sheet(write_rows(tmp_path / f"{case}.csv", bad), study)
        assert str(tmp_path / f"{case}.csv") in str(err.value) and expected in str(err.value), (case, str(err.value))
    assert "without ties" in str(pytest.raises(StudyError, read_sheet, tmp_path / "tie.csv", study).value)
    short = write_rows(tmp_path / "short.csv", rows[:-1])
    assert "has no rank for" in str(pytest.raises(StudyError, read_sheet, short, study).value)
    mixed = write_rows(tmp_path / "mixed.csv", [rows[0], *rows[1:-1], ["someone_else", *rows[-1][1:]]])
    assert "one annotator's" in str(pytest.raises(StudyError, read_sheet, mixed, study).value)


def test_a_bad_sheet_is_refused_and_nothing_imported_changes(tmp_path, capsys):
    study, _ = small_study()
    (tmp_path / STUDY_FILE).write_text(json.dumps(study))
    first = sheet(tmp_path / "first.csv", study, {"e1": BEST_FIRST, "e2": BEST_FIRST})
    import_sheets(Namespace(study=tmp_path, sheets=[first], replace=False))
    stored = (tmp_path / "rankings" / "annotator_01.json").read_text()
    rows = list(csv.reader(first.open()))
    rows[3][3] = rows[2][3]  # a tie
    bad = write_rows(tmp_path / "bad.csv", [[c.replace("annotator_01", "annotator_02") for c in r] for r in rows])
    other = sheet(tmp_path / "other.csv", study, {"e1": BEST_FIRST, "e2": BEST_FIRST}, "annotator_03")
    with pytest.raises(SystemExit) as exit_:
        import_sheets(Namespace(study=tmp_path, sheets=[bad, first, other], replace=False))
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "bad.csv" in err and "already imported" in err
    assert (tmp_path / "rankings" / "annotator_01.json").read_text() == stored
    assert not (tmp_path / "rankings" / "annotator_02.json").exists()
    assert (tmp_path / "rankings" / "annotator_03.json").is_file()  # the good sheet of the same call is in


def test_summary_mean_ranks_agreement_and_the_judge_by_hand(tmp_path):
    """Two annotators: one ranks tsrl > top > rubric > low on both prompts, the other swaps tsrl and top on e2.
    Mean ranks: tsrl (1+1+1+2)/4 = 1.25, top 1.75, rubric 3, low 4. W per prompt: e1 = 1; e2: R = (3, 3, 6, 8),
    R̄ = 5, S = 18, W = 12·18 / (2²·60) = 0.9. Over methods the annotators' mean ranks are (1, 2, 3, 4) and
    (1.5, 1.5, 3, 4) (a tie): R = (2.5, 3.5, 6, 8), S = 18.5, W = 12·18.5 / (240 − 2·6). The judge orders as
    annotator 1 does, and the run win-rates (tsrl 70 > rubric 40) as both: τ_b = 1, Spearman's ρ = 1. Human
    win-rates, 3 comparisons per ranking: tsrl wins 3, 3, 3, 2 of them → 11/12; top 2, 2, 2, 3 → 3/4; rubric 1
    each → 1/3; low 0."""
    study, key = small_study()
    (tmp_path / STUDY_FILE).write_text(json.dumps(study))
    swapped = [f"{ANCHOR}/top", "tsrl", "rubric", f"{ANCHOR}/low"]
    rankings = []
    for name, e2 in (("annotator_01", BEST_FIRST), ("annotator_02", swapped)):
        rankings.append(
            dict(
                zip(
                    ("annotator", "ranks"),
                    read_sheet(sheet(tmp_path / f"{name}.csv", study, {"e1": BEST_FIRST, "e2": e2}, name), study),
                )
            )
        )
    judge_scores = {
        p["id"]: {i: 1.0 - BEST_FIRST.index(key["items"][i]) / 3 for i in p["items"]} for p in study["prompts"]
    }
    report = summarise(
        study, key, rankings, {"judge": {"kind": "k", "model": "m"}, "scores": judge_scores}, samples=500
    )
    means = {r["label"]: r["mean"] for r in report["mean_rank"]}
    assert means == {"tsrl": 1.25, f"{ANCHOR}/top": 1.75, "rubric": 3.0, f"{ANCHOR}/low": 4.0}
    assert [r["label"] for r in report["mean_rank"]] == BEST_FIRST
    w = report["kendalls_w"]["per_prompt"]
    assert w["e1"] == pytest.approx(1.0)
    assert w["e2"] == pytest.approx(12 * 18 / (4 * 60))
    assert report["kendalls_w"]["over_labels"] == pytest.approx(12 * 18.5 / (240 - 12))
    assert report["vs_judge"]["tau_b_over_labels"] == pytest.approx(1.0)
    spearman = report["vs_judge"]["spearman_over_labels"]
    assert spearman["rho"] == pytest.approx(1.0) and spearman["p_value"] < 0.01 and spearman["n"] == 4
    assert report["human_win_rate"] == pytest.approx(
        {"tsrl": 11 / 12, f"{ANCHOR}/top": 0.75, "rubric": 1 / 3, f"{ANCHOR}/low": 0.0}
    )
    assert list(report["human_win_rate"]) == BEST_FIRST
    assert "| tsrl | 1.25 |" in markdown(report) and "91.7 %" in markdown(report)
    assert report["vs_winrate"]["tau_b"] == pytest.approx(1.0)


def test_export_refuses_a_folder_with_imported_rankings(tmp_path):
    (tmp_path / "rankings").mkdir()
    (tmp_path / "rankings" / "annotator_01.json").write_text("{}")
    with pytest.raises(StudyError, match="already holds imported rankings"):
        export(
            Namespace(
                out=tmp_path,
                runs=[tmp_path],
                where=[],
                label_by="method",
                prompts=50,
                seed=0,
                annotators=6,
                key=None,
                anchors="all",
                overrides=[],
            )
        )


def test_the_reference_option_keeps_only_the_tasks_reference_anchors():
    """Stories' held-out reference set is its human stories, the shipped sample's top tier standing in for them."""
    runs = [StudyRun("tsrl", Path("tsrl"), {"e1": "one", "e2": "two"})]
    _, key = build_study(TwoPromptTask(), runs, prompts=50, seed=0, anchors="reference")
    assert sorted(set(key["items"].values())) == ["anchor/top", "tsrl"]
