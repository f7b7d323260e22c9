"""TSRL's held-out metric: the win-rate against each task's reference set (human stories for stories, the
quality spectrum for humor), reported beside the all-tier and top-tier win-rates in every evaluation."""

from __future__ import annotations

import pytest

from tsrl.errors import ConfigError
from tsrl.evaluation import REFERENCE_SETS, check_references, evaluation_summary, evaluation_sums, headline
from tsrl.evaluation.report import markdown
from tsrl.tasks import build_task
from tsrl.tasks.counseling import CounselingConfig
from tsrl.tasks.humor import HumorConfig
from tsrl.tasks.stories import StoriesConfig
from tsrl.tasks.web import WebConfig
from tsrl.testing.fakes import ScriptedJudge
from tsrl.types import Anchor, Group, Prompt, Rollout

TIERS = ["top", "good", "okay", "weak", "low"]


class FixedGenerator:
    """Every completion reads q=2: it beats the anchors below 2 and loses to those above."""

    def generate(self, prompts, n):
        return [Group(p, [1], [Rollout("q=2 completion", [1, 2], [0.0, 0.0], False)] * n) for p in prompts]


class Named:
    """A judged task with nothing but a name (winrate metric by default)."""

    def __init__(self, name: str) -> None:
        self.name = name


def tiered_prompt(pid: str = "p") -> Prompt:
    qualities = [4, 3, 1, 0, -1]  # top and good beat the completion, okay/weak/low lose to it
    return Prompt(pid, "write", anchors=tuple(Anchor(f"q={q} anchor", t) for q, t in zip(qualities, TIERS)))


def summary(task_name: str, prompts: list[Prompt]) -> dict[str, float]:
    task = Named(task_name)
    return evaluation_summary(task, evaluation_sums(task, FixedGenerator(), ScriptedJudge(), prompts, 2), 2)


def test_stories_headline_is_against_the_top_tier_beside_all_tiers() -> None:
    """Stories: the paper's reference set is human-written; in the shipped tiers its stand-in is the top tier."""
    result = summary("stories", [tiered_prompt()])
    assert result["winrate"] == 0.0 and result["winrate_top"] == 0.0
    assert result["winrate_all"] == pytest.approx(60.0)  # beats okay, weak, low of five
    assert result["winrate/good"] == 0.0 and result["winrate/low"] == 100.0


def test_humor_headline_is_against_the_whole_spectrum() -> None:
    result = summary("humor", [tiered_prompt()])
    assert result["winrate"] == result["winrate_all"] == pytest.approx(60.0) and result["winrate_top"] == 0.0


def test_untiered_real_references_form_the_set_and_have_no_top_tier() -> None:
    """A real dataset's references (WritingPrompts' human stories) carry no tier: all of them are the set."""
    prompt = Prompt("p", "write", anchors=(Anchor("q=1 human", ""), Anchor("q=3 human", "")))
    result = summary("stories", [prompt])
    assert result["winrate"] == result["winrate_all"] == pytest.approx(50.0) and "winrate_top" not in result


def test_a_held_out_prompt_without_a_reference_anchor_is_refused() -> None:
    prompt = Prompt("p7", "write", anchors=(Anchor("q=1 x", "good"), Anchor("q=0 y", "low")))
    with pytest.raises(
        ConfigError,
        match="held-out prompt 'p7' .* has no such anchor; give every held-out prompt an anchor of tier 'top' or ''",
    ):
        summary("stories", [prompt])
    check_references("humor", [prompt], REFERENCE_SETS["humor"])  # every anchor counts there


@pytest.mark.parametrize(
    "name, config",
    [("stories", StoriesConfig), ("humor", HumorConfig), ("web", WebConfig), ("counseling", CounselingConfig)],
)
def test_every_shipped_held_out_set_has_its_reference_and_top_tier(name, config) -> None:
    task = build_task(config())
    prompts = task.prompts("eval")
    check_references(name, prompts, REFERENCE_SETS[name])
    assert all(sum(a.tier == "top" for a in p.anchors) == 1 for p in prompts)
    key, label = headline(task)
    assert key == "winrate" and label == f"held-out win-rate vs reference anchors ({REFERENCE_SETS[name].name})"


def test_tsrl_eval_table_puts_all_tier_and_top_tier_beside_the_headline() -> None:
    stat = {"mean": 10.0, "std": 0.0}
    report = {
        "headline": "winrate",
        "headline_label": "held-out win-rate vs reference anchors (all tiers)",
        "task": "humor",
        "split": "eval",
        "prompts": 2,
        "samples": 1,
        "seeds": [0],
        "judge": {"kind": "sim", "model": "m"},
        "reference_set": {"here": "every anchor", "paper": "the Gemini quality spectrum"},
        "policies": [
            {
                "policy": "a",
                "summary": {
                    "winrate": stat,
                    "winrate_all": stat,
                    "winrate_top": stat,
                    "winrate/low": stat,
                    "mean_length": stat,
                },
            }
        ],
    }
    text = markdown(report)
    assert "| policy | winrate | winrate_all | winrate_top | winrate/low | mean_length |" in text
    assert "Reference set: every anchor (paper: the Gemini quality spectrum)." in text
