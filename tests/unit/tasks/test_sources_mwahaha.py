"""The humor task on MWAHAHA's data (SemEval-2026 Task 1, Subtask A): its input files are TSV tables with
columns id, word1, word2, headline, where a row sets either the two words or the headline and writes "-" for
the other. The files here are written by the tests in that shape; nothing downloads."""

import json
import logging

import pytest

from tsrl.errors import ConfigError, DataError
from tsrl.tasks import build_task
from tsrl.tasks.base import DATA_DIR
from tsrl.tasks.humor import HumorConfig
from tsrl.tasks.sources import load_rows

HEADER = "id\tword1\tword2\theadline\n"
ROWS = [
    "en_1\tpenguin\ttax\t-",
    "en_2\t-\t-\tCity council bans umbrellas on sunny days",
    "en_3\tSubmarine\tCactus\t-",
    "en_4\tgiraffe\tpasta\t-",
    "en_5\t-\t-\tLocal cat elected mayor",
    "en_6\tpiano\tvolcano\t-",
]


@pytest.fixture
def tsv(tmp_path):
    path = tmp_path / "task-a-en.tsv"
    path.write_text(HEADER + "\n".join(ROWS) + "\n", encoding="utf-8")
    return path


def test_tsv_rows_are_keyed_by_the_header_and_blanks_read_as_empty(tsv, caplog):
    columns = {"id": "id", "word1": "word1", "word2": "word2"}
    with caplog.at_level(logging.WARNING, logger="tsrl"):
        rows = load_rows(str(tsv), "train", columns, ("word1", "word2"), blanks=("-",))
    assert [r["id"] for r in rows] == ["en_1", "en_3", "en_4", "en_6"]
    assert rows[1] == {"id": "en_3", "word1": "Submarine", "word2": "Cactus"}
    assert "skipped 2 of 6 rows with an empty word1 or word2" in caplog.text
    assert load_rows(str(tsv), "train", columns, ("word1",))[1]["word1"] == "-"  # no blanks: "-" is a value


def test_csv_reads_like_tsv_and_a_ragged_line_names_file_and_line(tmp_path, tsv):
    comma = tmp_path / "task.csv"
    comma.write_text(tsv.read_text().replace("\t", ","), encoding="utf-8")
    columns, required = {"word1": "word1", "word2": "word2"}, ("word1", "word2")
    assert load_rows(str(comma), "train", columns, required, blanks=("-",)) == load_rows(
        str(tsv), "train", columns, required, blanks=("-",)
    )
    ragged = tmp_path / "ragged.tsv"
    ragged.write_text(HEADER + ROWS[0] + "\nen_2\tonly\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"ragged\.tsv:3: its cells do not match the header"):
        load_rows(str(ragged), "train", columns, required)


def test_humor_reads_mwahaha_word_rows_as_prompts_with_split_ids(tsv):
    task = build_task(HumorConfig(dataset=str(tsv), train_split="train[:75%]", eval_split="train[75%:]"))
    train, heldout = task.prompts("train"), task.prompts("eval")
    assert [p.id for p in train] == ["train/en_1", "train/en_3", "train/en_4"]
    assert [p.id for p in heldout] == ["eval/en_6"]
    assert train[1].fields["words"] == ("submarine", "cactus") and "submarine, cactus" in train[1].text
    assert all(p.anchors == () for p in train + heldout)  # MWAHAHA's inputs carry no jokes
    assert task.verify(train[0], "A penguin walks into a tax office.") == 1.0


def test_held_out_prompts_with_references_come_from_eval_file(tsv):
    shipped = DATA_DIR / "humor" / "eval.jsonl"
    task = build_task(HumorConfig(dataset=str(tsv), train_split="train", eval_split="train", eval_file=str(shipped)))
    assert len(task.prompts("train")) == 4
    heldout = task.prompts("eval")
    assert len(heldout) == 24 and all(len(p.anchors) == 5 for p in heldout)
    with pytest.raises(ConfigError, match="held-out prompts would be training prompts"):
        build_task(HumorConfig(dataset=str(tsv), train_split="train", eval_split="train"))


def test_columns_are_mapped_by_task_columns_and_a_jokes_column_gives_anchors(tmp_path):
    rows = [
        {"pair_id": "a", "first": "moon", "second": "sock", "joke": ["Moon sock joke one.", "Two."]},
        {"pair_id": "b", "first": "owl", "second": "tuba", "joke": "An owl plays the tuba."},
    ]
    path = tmp_path / "jokes.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    columns = {"id": "pair_id", "word1": "first", "word2": "second"}
    task = build_task(
        HumorConfig(dataset=str(path), columns=columns, train_split="train[:50%]", eval_split="train[50%:]")
    )
    (first,) = task.prompts("train")
    assert first.id == "train/a" and [a.text for a in first.anchors] == ["Moon sock joke one.", "Two."]
    assert [a.text for a in task.prompts("eval")[0].anchors] == ["An owl plays the tuba."]


def test_a_missing_column_says_which_and_how_to_map_it(tsv):
    task = build_task(HumorConfig(dataset=str(tsv), columns={"word1": "w1"}))
    with pytest.raises(DataError) as err:
        task.prompts("train")
    for part in (str(tsv), "'w1' (for field word1)", "id, word1, word2, headline", "task.columns.word1=<column>"):
        assert part in str(err.value)


def test_a_run_refuses_held_out_prompts_without_references_and_sizes_the_ladder_it_builds(tsv):
    """MWAHAHA's prompts carry no jokes: held-out win-rates against nothing would all read 0, so the run's
    ladder step stops and names task.eval_file; the anchors it writes for the training prompts are the
    fewest tier samples that reach reward.k next to each prompt's own."""
    from dataclasses import replace
    from types import SimpleNamespace

    from tsrl.anchors.step import anchors_needed, prepare_ladder, step_settings
    from tsrl.config import EndpointConfig, LadderStepConfig
    from tsrl.errors import UserError
    from tsrl.rewards.ladder import LadderConfig
    from tsrl.rewards.self_bootstrap import SelfBootstrapConfig

    task_cfg = HumorConfig(dataset=str(tsv), train_split="train[:75%]", eval_split="train[75%:]")
    cfg = SimpleNamespace(task=task_cfg, reward=LadderConfig(k=4), ladder=LadderStepConfig(), run_dir=".", seed=0)
    with pytest.raises(UserError, match=r"Held-out prompt 'eval/en_6' .* no reference anchors.*task\.eval_file"):
        prepare_ladder(cfg, build_task(task_cfg))
    assert anchors_needed(LadderConfig(k=6)) == 6 and anchors_needed(SelfBootstrapConfig()) == 0
    prompts = build_task(HumorConfig()).prompts("train")[:2]
    one = [replace(p, anchors=p.anchors[:1]) for p in prompts]
    assert step_settings(LadderStepConfig(), 10, one).samples == 3  # 9 missing over 4 tiers
    assert step_settings(LadderStepConfig(styles=["a pun", "a riddle"]), 4, one).samples == 1
    resolved = step_settings(LadderStepConfig(endpoint=EndpointConfig(base_url="http://x")), 4, one)
    assert resolved.source == "endpoint" and step_settings(LadderStepConfig(), 4, one).source == "policy"
