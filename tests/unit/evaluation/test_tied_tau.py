"""report.md says why Kendall's τ_b is missing instead of printing "nan": τ_b divides by the pairs that each order
leaves untied, so it is undefined when every method's held-out win-rate (or every human mean rank) is the same."""

from __future__ import annotations

import numpy as np

from tsrl.evaluation.study_report import markdown, summarise


def two_method_study(tsrl_value: float, rubric_value: float) -> dict:
    """One prompt, two items (one per method), two annotators who agree: tsrl's item ranked first."""
    study = {"prompts": [{"id": "e1", "items": ["a", "b"]}], "seed": 0, "task": "stories"}
    key = {
        "runs": {
            "tsrl": {"metric": "winrate", "value": tsrl_value},
            "rubric": {"metric": "winrate", "value": rubric_value},
        },
        "items": {"a": "tsrl", "b": "rubric"},
    }
    rankings = [{"annotator": name, "ranks": {"e1": {"a": 1, "b": 2}}} for name in ("annotator_01", "annotator_02")]
    return summarise(study, key, rankings, None, samples=50)


def test_a_tied_win_rate_gives_the_reason_not_nan():
    report = two_method_study(50.0, 50.0)
    assert np.isnan(report["vs_winrate"]["tau_b"])
    text = markdown(report)
    assert "Kendall's τ_b undefined (every method's winrate is tied) over 2 methods." in text
    assert "nan" not in text


def test_an_untied_win_rate_still_prints_its_tau():
    assert "Kendall's τ_b 1.000 over 2 methods." in markdown(two_method_study(70.0, 40.0))
