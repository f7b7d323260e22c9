"""The papers' tasks on their shipped samples: sizes and anchors as documented, the simulated quality orders
the written tiers, the verifiers accept the shipped solutions, anchors files replace training anchors, and
the held-out metrics (pass ratio@n, pass@k) are computed as Reasoning Arena defines them."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tsrl.errors import ConfigError, DataError
from tsrl.evaluation import headline
from tsrl.evaluation.passk import ks_for, pass_at_k, pass_summary
from tsrl.rendering import network_reference
from tsrl.tasks import build_task
from tsrl.tasks.aime import AimeConfig
from tsrl.tasks.base import Rendered, SimulatedQuality, Verifiable, task_metric
from tsrl.tasks.counseling import CounselingConfig
from tsrl.tasks.gpqa import GpqaConfig
from tsrl.tasks.humor import HumorConfig
from tsrl.tasks.stories import StoriesConfig
from tsrl.tasks.web import WebConfig

JUDGED = {
    "stories": (StoriesConfig, 10),
    "humor": (HumorConfig, 10),
    "web": (WebConfig, 5),
    "counseling": (CounselingConfig, 5),
}
VERIFIED = {"aime": AimeConfig, "gpqa": GpqaConfig}


@pytest.mark.parametrize("name", sorted(JUDGED))
def test_judged_tasks_ship_48_train_16_heldout_prompts_with_enough_anchors(name: str) -> None:
    config, train_anchors = JUDGED[name]
    task = build_task(config())
    train, heldout = task.prompts("train"), task.prompts("eval")
    assert len(train) >= 48 and len(heldout) >= 16
    assert min(len(p.anchors) for p in train) >= train_anchors
    assert min(len(p.anchors) for p in heldout) >= 5
    assert not {p.id for p in train} & {p.id for p in heldout}
    assert not {p.text for p in train} & {p.text for p in heldout}  # held-out prompts are new prompts
    assert task_metric(task) == "winrate" and isinstance(task, SimulatedQuality)


@pytest.mark.parametrize("name", sorted(JUDGED))
def test_simulated_quality_ranks_the_written_tiers_in_order(name: str) -> None:
    """Over every training prompt, the mean latent quality falls tier by tier: top and good (together: the
    stories quality does not separate the two, see stories.py) above okay, above weak, above low."""
    task = build_task(JUDGED[name][0]())
    by_tier: dict[str, list[float]] = {}
    for prompt in task.prompts("train"):
        for anchor in prompt.anchors:
            by_tier.setdefault(anchor.tier, []).append(task.quality(prompt, anchor.text))
    means = [statistics.fmean(by_tier["top"] + by_tier["good"])] + [
        statistics.fmean(by_tier[t]) for t in ("okay", "weak", "low")
    ]
    assert means == sorted(means, reverse=True) and means[0] > means[-1] + 1.0, means
    if name != "stories":
        assert statistics.fmean(by_tier["top"]) > statistics.fmean(by_tier["good"])


@pytest.mark.parametrize("name", sorted(VERIFIED))
def test_verified_tasks_accept_their_reference_solutions_and_reject_others(name: str) -> None:
    task = build_task(VERIFIED[name]())
    assert isinstance(task, Verifiable) and task_metric(task) == "pass" and headline(task)[0] == "pass_ratio"
    prompts = task.prompts("train") + task.prompts("eval")
    assert len(task.prompts("train")) >= 48 and len(task.prompts("eval")) >= 16
    for prompt in prompts:
        (reference,) = prompt.anchors
        assert task.verify(prompt, reference.text) == 1.0, prompt.id
        assert task.verify(prompt, "I am not sure.") == 0.0
        assert task.quality(prompt, reference.text) > task.quality(prompt, "I am not sure.")


DATA_CHECKS = Path(__file__).resolve().parents[2] / "data_checks"  # kept out of the wheel


@pytest.mark.parametrize("name", ["aime", "gpqa"])
def test_shipped_answers_are_rechecked_independently(name: str) -> None:
    """check.py recomputes every shipped answer from scratch (brute force or exact arithmetic)."""
    run = subprocess.run(
        [sys.executable, str(DATA_CHECKS / name / "check.py")], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]


def test_web_anchor_pages_are_small_self_contained_documents() -> None:
    task = build_task(WebConfig())
    assert isinstance(task, Rendered)
    for prompt in task.prompts("train") + task.prompts("eval"):
        for anchor in prompt.anchors:
            page = task.page(anchor.text)
            assert len(page.encode()) < 4096, (prompt.id, anchor.tier)
            assert network_reference(page) is None, (prompt.id, anchor.tier, network_reference(page))
            assert "<html" in page.lower() or anchor.tier == "low"


def test_counseling_prompts_carry_the_conversation_as_chat_turns() -> None:
    from tsrl.generation.hf import chat_prompt

    prompts = build_task(CounselingConfig()).prompts("train")
    multi = [p for p in prompts if len(p.messages) > 1]
    assert len(multi) >= 6
    assert all(p.messages[0][0] == "user" and p.messages[-1][0] == "user" for p in prompts)

    class Template:
        chat_template = "set"

        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            return json.dumps(messages)

    shown = json.loads(chat_prompt(Template(), multi[0]))
    assert [m["role"] for m in shown] == [r for r, _ in multi[0].messages]


def test_anchors_file_replaces_training_anchors_and_rejects_foreign_prompts(tmp_path: Path) -> None:
    base = build_task(StoriesConfig()).prompts("train")
    path = tmp_path / "anchors.jsonl"
    path.write_text(
        json.dumps({"prompt_id": base[0].id, "anchors": [{"text": "one", "tier": "a"}, {"text": "two"}]}) + "\n"
    )
    task = build_task(StoriesConfig(anchors_file=str(path)))
    train = task.prompts("train")
    assert [a.text for a in train[0].anchors] == ["one", "two"] and train[1].anchors == base[1].anchors
    assert task.prompts("eval") == build_task(StoriesConfig()).prompts("eval")  # references never replaced
    path.write_text(json.dumps({"prompt_id": "not-a-prompt", "anchors": []}) + "\n")
    with pytest.raises(DataError, match="not-a-prompt.*rebuild it with tsrl-ladder"):
        build_task(StoriesConfig(anchors_file=str(path))).prompts("train")
    with pytest.raises(DataError, match="does not exist"):
        build_task(HumorConfig(anchors_file=str(tmp_path / "missing.jsonl"))).prompts("train")


def test_a_real_dataset_without_a_heldout_split_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="held-out prompts would be training prompts"):
        build_task(AimeConfig(dataset=str(tmp_path / "aime.jsonl")))


def test_dataset_prompt_ids_carry_their_split(tmp_path: Path) -> None:
    rows = [{"prompt": f"[ WP ] premise {i // 2}", "story": f"story {i}"} for i in range(8)]
    path = tmp_path / "wp.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = build_task(StoriesConfig(dataset=str(path), train_split="train[:50%]", eval_split="train[50%:]"))
    train, heldout = task.prompts("train"), task.prompts("eval")
    assert [p.id for p in train] == ["train/wp-0", "train/wp-1"] and [p.id for p in heldout] == [
        "eval/wp-0",
        "eval/wp-1",
    ]
    assert [len(p.anchors) for p in train] == [2, 2] and "[ WP ]" not in train[0].text


def test_pass_at_k_is_the_unbiased_estimator() -> None:
    assert pass_at_k(16, 0, 1) == 0.0 and pass_at_k(16, 16, 1) == 1.0
    assert pass_at_k(16, 4, 1) == pytest.approx(4 / 16)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # C(3,2)/C(4,2)
    assert pass_at_k(4, 3, 2) == 1.0  # any two of four with one wrong include a right one
    assert ks_for(16) == [1, 2, 4, 8, 16] and ks_for(1) == [1] and ks_for(6) == [1, 2, 4, 6]


def test_pass_summary_turns_sums_into_percentages() -> None:
    # two problems, n = 4: 1 and 4 correct
    sums = {
        "problems": 2.0,
        "accuracy": 0.25 + 1.0,
        "pass@1": 0.25 + 1.0,
        "pass@4": 2.0,
        "answered": 1.5,
        "length_sum": 80.0,
        "samples": 8.0,
    }
    summary = pass_summary(sums, 4)
    assert summary["pass_ratio"] == pytest.approx(62.5) and summary["pass@1"] == pytest.approx(62.5)
    assert summary["pass@4"] == 100.0 and summary["answered"] == 75.0 and summary["mean_length"] == 10.0
