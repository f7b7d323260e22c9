"""TSRL Paper §3's anchors for web are "Reference pages" and for counseling "Human counselor responses", and its
held-out metric is the win-rate "against the reference anchors": the held-out reference set of web is the
dataset's reference pages, of counseling the dataset's counselor replies (both untiered, as a real dataset's
references are); the shipped samples have neither, so their top tier stands in (ours), as for stories."""

from __future__ import annotations

import json

import pytest

from tsrl.evaluation import REFERENCE_SETS, evaluation_summary, evaluation_sums
from tsrl.tasks import build_task
from tsrl.tasks.counseling import CounselingConfig
from tsrl.tasks.web import WebConfig
from tsrl.testing.fakes import ScriptedJudge
from tsrl.types import Anchor, Group, Rollout


class FixedGenerator:
    """Every completion reads q=2: it beats the anchors below 2 and loses to those above."""

    def generate(self, prompts, n):
        return [Group(p, [1], [Rollout("q=2 completion", [1, 2], [0.0, 0.0], False)] * n) for p in prompts]


def headline(task, prompts) -> dict[str, float]:
    return evaluation_summary(task, evaluation_sums(task, FixedGenerator(), ScriptedJudge(), prompts, 1), 1)


def write(path, rows) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("name", ["web", "counseling"])
def test_the_reference_set_is_the_datasets_references_and_not_a_quality_spectrum(name):
    reference = REFERENCE_SETS[name]
    assert reference.holds(Anchor("the dataset's reference", ""))
    assert not any(reference.holds(Anchor("a tier", tier)) for tier in ("good", "okay", "weak", "low"))


@pytest.mark.parametrize(
    "config, columns",
    [
        (WebConfig, {"llm_generated_idea": "A page for a bakery.", "text": "<html>q=3 page</html>"}),
        (CounselingConfig, {"input": "I feel alone.", "output": "q=3 reply"}),
    ],
)
def test_a_real_datasets_held_out_references_are_the_whole_set(tmp_path, config, columns):
    """WebSight / MentalChat16K rows (their own column names) load as untiered references: all of them count."""
    other = {key: value.replace("q=3", "q=1") for key, value in columns.items()}
    held_out = write(tmp_path / "eval.jsonl", [columns, other])
    train = write(tmp_path / "train.jsonl", [columns])
    task = build_task(config(dataset=train, eval_dataset=held_out, train_split="train", eval_split="train"))
    prompts = task.prompts("eval")
    assert all(a.tier == "" for p in prompts for a in p.anchors)
    result = headline(task, prompts)
    assert result["winrate"] == result["winrate_all"] == pytest.approx(50.0) and "winrate_top" not in result


@pytest.mark.parametrize("config", [WebConfig, CounselingConfig])
def test_the_shipped_samples_top_tier_stands_in_for_the_references(config):
    task = build_task(config())
    reference = REFERENCE_SETS[task.name]
    for prompt in task.prompts("eval"):
        assert [a.tier for a in prompt.anchors if reference.holds(a)] == ["top"] and len(prompt.anchors) == 5
