import json

import numpy as np
import pytest

from tsrl.errors import DataError
from tsrl.tasks import HumorConfig, HumorTask
from tsrl.tasks.humor import humor_quality

WORDS = ("penguin", "tax")


def test_shipped_data_loads_with_tiered_anchors_enough_for_the_papers_k_sweep():
    """TSRL sweeps k ∈ {1, 2, 4, 6, 8, 10}: every training prompt ships ≥ 10 distinct anchors, two per tier,
    best first; the held-out prompts keep their five reference anchors, one per tier."""
    task = HumorTask(HumorConfig())
    train, held_out = task.prompts("train"), task.prompts("eval")
    assert len(train) >= 60 and len(held_out) >= 20
    tiers = ["top", "good", "okay", "weak", "low"]
    assert all([a.tier for a in p.anchors] == [t for t in tiers for _ in (0, 1)] for p in train)
    assert all(len({a.text for a in p.anchors}) == len(p.anchors) >= 10 for p in train)
    assert all([a.tier for a in p.anchors] == tiers for p in held_out)
    assert not {w for p in train for w in p.fields["words"]} & {w for p in held_out for w in p.fields["words"]}
    assert "penguin" in train[0].text and "tax" in train[0].text


def test_latent_quality_orders_the_shipped_tiers_on_average():
    task = HumorTask(HumorConfig())
    prompts = task.prompts("train")
    mean = {
        tier: np.mean([task.quality(p, a.text) for p in prompts for a in p.anchors if a.tier == tier])
        for tier in ("top", "okay", "weak", "low")
    }
    assert mean["top"] > mean["okay"] > mean["weak"] > mean["low"]


def test_latent_quality_features():
    joke = "Why did the penguin hate tax season? Every form asked about income, and he only had frozen assets."
    assert humor_quality(joke, WORDS) > humor_quality(joke.replace("penguin", "bird"), WORDS) + 1.5
    assert humor_quality("tax tax tax tax lol", WORDS) < humor_quality("A penguin pays tax.", WORDS)
    assert humor_quality("", WORDS) == -5.0
    assert humor_quality(joke, WORDS) > humor_quality(joke.rstrip("."), WORDS)


def write(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


def test_missing_file_names_the_file_and_the_setting(tmp_path):
    task = HumorTask(HumorConfig(train_file=str(tmp_path / "nope.jsonl")))
    with pytest.raises(DataError, match=r"nope.jsonl does not exist; check the task's train_file"):
        task.prompts("train")


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ('{"id": "a", "words": ["x", "y"]', "not valid JSON"),
        ('["a"]', "must be a JSON object"),
        ('{"id": "a", "words": ["x"]}', "'words' must be a list of two"),
        ('{"words": ["x", "y"]}', "malformed row"),
        ('{"id": "a", "words": ["x", "y"], "anchors": [{"txt": 1}]}', "'anchors' must be a list"),
    ],
)
def test_malformed_rows_name_file_and_line(tmp_path, bad_line, message):
    good = json.dumps({"id": "ok", "words": ["a", "b"], "anchors": [{"text": "t"}]})
    path = write(tmp_path / "data.jsonl", [good, bad_line])
    with pytest.raises(DataError, match=rf"data.jsonl:2: .*{message}"):
        HumorTask(HumorConfig(train_file=str(path))).prompts("train")


def test_duplicate_ids_are_rejected(tmp_path):
    row = json.dumps({"id": "same", "words": ["a", "b"]})
    with pytest.raises(DataError, match="duplicate id 'same'"):
        HumorTask(HumorConfig(eval_file=str(write(tmp_path / "d.jsonl", [row, row])))).prompts("eval")
