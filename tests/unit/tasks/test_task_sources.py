"""tsrl.tasks.sources.load_rows: local files, dataset folders and hub names read into rows keyed by task
fields.

Everything is local (files written in tmp_path); the hub is never contacted: its failure is simulated by
replacing datasets.load_dataset."""

import json
import logging
import sys

import pytest

from tsrl.errors import ConfigError, DataError
from tsrl.tasks import build_task
from tsrl.tasks.sources import load_rows, split_name, split_range
from tsrl.tasks.stories import StoriesConfig

COLUMNS = {"premise": "prompt", "anchors": "story"}
REQUIRED = ("premise", "anchors")
ROWS = [{"prompt": f"p{i}", "story": f"s{i}", "extra": i} for i in range(10)]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


@pytest.fixture
def jsonl(tmp_path):
    return write_jsonl(tmp_path / "stories.jsonl", ROWS)


def test_jsonl_rows_are_keyed_by_task_fields_with_the_mapped_values(jsonl):
    rows = load_rows(jsonl, "train", COLUMNS, REQUIRED)
    assert rows == [{"premise": f"p{i}", "anchors": f"s{i}"} for i in range(10)]


def test_json_list_and_data_object_read_the_same_rows(tmp_path, jsonl):
    listed, wrapped = tmp_path / "listed.json", tmp_path / "wrapped.json"
    listed.write_text(json.dumps(ROWS), encoding="utf-8")
    wrapped.write_text(json.dumps({"data": ROWS}), encoding="utf-8")
    expected = load_rows(jsonl, "train", COLUMNS, REQUIRED)
    assert load_rows(str(listed), "train", COLUMNS, REQUIRED) == expected
    assert load_rows(str(wrapped), "train", COLUMNS, REQUIRED) == expected


def test_json_that_is_not_a_list_of_objects_is_a_data_error(tmp_path):
    scalar, mixed = tmp_path / "scalar.json", tmp_path / "mixed.json"
    scalar.write_text(json.dumps({"rows": ROWS}), encoding="utf-8")
    mixed.write_text(json.dumps([ROWS[0], "oops"]), encoding="utf-8")
    with pytest.raises(DataError, match="list of objects"):
        load_rows(str(scalar), "train", COLUMNS, REQUIRED)
    with pytest.raises(DataError, match="row 1 is a str"):
        load_rows(str(mixed), "train", COLUMNS, REQUIRED)


def test_bad_jsonl_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n\n{not json\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.jsonl:3: not valid JSON"):
        load_rows(str(path), "train", COLUMNS, REQUIRED)


def test_parquet_reads_like_jsonl(tmp_path, jsonl):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "stories.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    expected = load_rows(jsonl, "train[2:5]", COLUMNS, REQUIRED)
    assert load_rows(str(path), "train[2:5]", COLUMNS, REQUIRED) == expected


def test_parquet_without_pyarrow_says_what_to_install(tmp_path, monkeypatch):
    path = tmp_path / "stories.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(DataError, match=r"pip install pyarrow"):
        load_rows(str(path), "train", COLUMNS, REQUIRED)


def test_missing_local_file_and_unsupported_format_are_data_errors(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_rows(str(tmp_path / "absent.jsonl"), "train", COLUMNS, REQUIRED)
    xml = tmp_path / "stories.xml"
    xml.write_text("<rows/>", encoding="utf-8")
    with pytest.raises(DataError, match=r"\.jsonl, \.json, \.parquet, \.tsv or \.csv"):
        load_rows(str(xml), "train", COLUMNS, REQUIRED)


def test_missing_column_names_dataset_split_column_field_available_columns_and_fix(jsonl):
    with pytest.raises(DataError) as err:
        load_rows(jsonl, "train[:50%]", {"premise": "title", "anchors": "story"}, REQUIRED)
    message = str(err.value)
    for part in (
        jsonl,
        "split train[:50%]",
        "'title' (for field premise)",
        "prompt, story, extra",
        "task.columns.premise=<column>",
    ):
        assert part in message
    assert "'story'" not in message


def test_an_optional_fields_missing_column_reads_none(jsonl):
    rows = load_rows(jsonl, "train[:2]", {**COLUMNS, "solution": "solution"}, REQUIRED)
    assert rows == [
        {"premise": "p0", "anchors": "s0", "solution": None},
        {"premise": "p1", "anchors": "s1", "solution": None},
    ]


SPECS = [
    "train",
    "test",
    "train[:95%]",
    "train[95%:]",
    "train[10:20]",
    "train[:50%]",
    "train[33%:67%]",
    "train[-30%:]",
    "train[:-3]",
    "train[-5:]",
    "train[10%:20]",
    "train[200:]",
    "train[-100%:1%]",
    "train[5:2]",
    "validation[99%:]",
]


@pytest.mark.parametrize("spec", SPECS)
def test_split_slices_match_datasets_read_instruction(spec):
    datasets = pytest.importorskip("datasets")
    for length in [*range(0, 42), 99, 100, 101, 199, 1001]:
        absolute = datasets.ReadInstruction.from_spec(spec).to_absolute({split_name(spec): length})[0]
        assert split_range(spec, length) == range(absolute.from_, max(absolute.from_, absolute.to)), length


def test_percent_bounds_round_to_the_closest_row_with_halves_to_even():
    assert split_range("train[:50%]", 5) == range(0, 2)  # 2.5 → 2
    assert split_range("train[:50%]", 7) == range(0, 4)  # 3.5 → 4
    assert split_range("train[95%:]", 30) == range(28, 30)  # 28.5 → 28


def test_bad_split_strings_are_config_errors():
    for spec in ("train[:95]%", "train[1:2:3]", "train[:101%]", ""):
        with pytest.raises(ConfigError):
            split_range(spec, 10)


def test_local_file_split_name_is_ignored_and_its_slice_applied(jsonl):
    head = load_rows(jsonl, "train[:70%]", COLUMNS, REQUIRED)
    tail = load_rows(jsonl, "test[70%:]", COLUMNS, REQUIRED)
    assert [r["premise"] for r in head] == [f"p{i}" for i in range(7)]
    assert [r["premise"] for r in tail] == ["p7", "p8", "p9"]
    assert load_rows(jsonl, "validation", COLUMNS, REQUIRED) == load_rows(jsonl, "train", COLUMNS, REQUIRED)


def test_local_file_slices_select_the_rows_datasets_selects(tmp_path, monkeypatch):
    """37 rows: 95 % is 35.15 → 35, 25 % is 9.25 → 9, 75 % is 27.75 → 28 (datasets refuses empty slices)."""
    datasets = pytest.importorskip("datasets")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")
    path = write_jsonl(tmp_path / "many.jsonl", [{"prompt": f"p{i}", "story": f"s{i}"} for i in range(37)])
    for spec in ("train[:95%]", "train[95%:]", "train[-3:]", "train[25%:75%]", "train[5:-30]"):
        theirs = datasets.load_dataset("json", data_files=path, split=spec, cache_dir=str(tmp_path / "cache"))
        assert [r["premise"] for r in load_rows(path, spec, COLUMNS, REQUIRED)] == theirs["prompt"], spec


def test_grouping_merges_rows_in_first_seen_order_and_collects_non_empty_values(tmp_path):
    rows = [
        {"prompt": "b", "story": "b1", "n": 1},
        {"prompt": "a", "story": "a1", "n": 2},
        {"prompt": "b", "story": "", "n": 3},
        {"prompt": "b", "story": "b2", "n": 4},
        {"prompt": "c", "story": None, "n": 5},
    ]
    path = write_jsonl(tmp_path / "grouped.jsonl", rows)
    columns = {**COLUMNS, "n": "n"}
    grouped = load_rows(path, "train", columns, ("premise",), group_by="premise", collect="anchors")
    assert grouped == [
        {"premise": "b", "anchors": ["b1", "b2"], "n": 1},
        {"premise": "a", "anchors": ["a1"], "n": 2},
        {"premise": "c", "anchors": [], "n": 5},
    ]
    merged = load_rows(path, "train", columns, ("premise",), group_by="premise")
    assert merged == [
        {"premise": "b", "anchors": "b1", "n": 1},
        {"premise": "a", "anchors": "a1", "n": 2},
        {"premise": "c", "anchors": None, "n": 5},
    ]


def test_grouping_by_or_requiring_an_unmapped_field_is_a_config_error(jsonl):
    with pytest.raises(ConfigError, match="'topic'"):
        load_rows(jsonl, "train", COLUMNS, REQUIRED, group_by="topic")
    with pytest.raises(ConfigError, match="'title'"):
        load_rows(jsonl, "train", COLUMNS, (*REQUIRED, "title"))


def test_rows_with_an_empty_required_field_are_skipped_and_counted(tmp_path, caplog):
    rows = [
        {"prompt": "ok", "story": "s"},
        {"prompt": None, "story": "s"},
        {"prompt": "  ", "story": "s"},
        {"story": "s"},
        {"prompt": "ok2", "story": ""},
        {"prompt": "ok3", "story": "t"},
    ]
    path = write_jsonl(tmp_path / "holes.jsonl", rows)
    with caplog.at_level(logging.WARNING, logger="tsrl"):
        kept = load_rows(path, "train", COLUMNS, REQUIRED)
    assert kept == [{"premise": "ok", "anchors": "s"}, {"premise": "ok3", "anchors": "t"}]
    assert "skipped 4 of 6 rows" in caplog.text


def test_all_rows_empty_is_a_data_error(tmp_path):
    rows = [{"prompt": "", "story": "s"}, {"prompt": "p", "story": None}]
    path = write_jsonl(tmp_path / "empty.jsonl", rows)
    with pytest.raises(DataError, match=r"all 2 rows have an empty premise or anchors"):
        load_rows(path, "train", COLUMNS, REQUIRED)


def test_an_empty_slice_returns_no_rows_and_still_checks_columns(jsonl):
    assert load_rows(jsonl, "train[20:]", COLUMNS, REQUIRED) == []
    with pytest.raises(DataError, match="its columns are prompt, story, extra"):
        load_rows(jsonl, "train[20:]", {**COLUMNS, "anchors": "text"}, REQUIRED)


def test_folder_saved_by_datasets_is_one_implicit_split_or_named_splits(tmp_path, jsonl):
    datasets = pytest.importorskip("datasets")
    single, named = tmp_path / "single", tmp_path / "named"
    datasets.Dataset.from_list(ROWS).save_to_disk(str(single))
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(ROWS[:6]), "test": datasets.Dataset.from_list(ROWS[6:])}
    ).save_to_disk(str(named))
    for spec in ("train", "train[:95%]", "train[95%:]", "train[2:4]"):
        assert load_rows(str(single), spec, COLUMNS, REQUIRED) == load_rows(jsonl, spec, COLUMNS, REQUIRED)
    assert [r["premise"] for r in load_rows(str(named), "test[:50%]", COLUMNS, REQUIRED)] == ["p6", "p7"]
    assert [r["premise"] for r in load_rows(str(named), "train[-1:]", COLUMNS, REQUIRED)] == ["p5"]
    with pytest.raises(DataError, match="no split 'validation'; choose one of train, test"):
        load_rows(str(named), "validation", COLUMNS, REQUIRED)
    with pytest.raises(DataError, match="'title' \\(for field premise\\)"):
        load_rows(str(single), "train", {**COLUMNS, "premise": "title"}, REQUIRED)


def test_folder_of_data_files_is_read_by_load_dataset_with_its_splits(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")
    folder = tmp_path / "files"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", ROWS[:8])
    write_jsonl(folder / "test.jsonl", ROWS[8:])
    assert [r["premise"] for r in load_rows(str(folder), "train[75%:]", COLUMNS, REQUIRED)] == ["p6", "p7"]
    assert [r["premise"] for r in load_rows(str(folder), "test", COLUMNS, REQUIRED)] == ["p8", "p9"]
    with pytest.raises(DataError, match="files \\(split nope\\) could not be read"):
        load_rows(str(folder), "nope", COLUMNS, REQUIRED)


class Unreachable:
    """datasets.load_dataset as it behaves offline: it raises ConnectionError, and records its arguments."""

    def __init__(self):
        self.calls = []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        raise ConnectionError("Couldn't reach 'euclaise/writingprompts' on the Hub (LocalEntryNotFoundError)")


def test_hub_name_offline_is_a_data_error_saying_to_go_online_or_use_a_local_copy(monkeypatch):
    datasets = pytest.importorskip("datasets")
    fake = Unreachable()
    monkeypatch.setattr(datasets, "load_dataset", fake)
    with pytest.raises(DataError) as err:
        load_rows("euclaise/writingprompts", "train[:95%]", COLUMNS, REQUIRED)
    assert "euclaise/writingprompts" in str(err.value) and "online" in str(err.value)
    assert "point task.dataset at a local copy" in str(err.value)
    with pytest.raises(DataError):
        load_rows("HuggingFaceM4/WebSight", "train", COLUMNS, REQUIRED, subset="v0.2")
    assert fake.calls == [
        (("euclaise/writingprompts", None), {"split": "train[:95%]"}),
        (("HuggingFaceM4/WebSight", "v0.2"), {"split": "train"}),
    ]


def test_hub_name_with_an_unknown_split_is_a_data_error_keeping_datasets_message(monkeypatch):
    datasets = pytest.importorskip("datasets")

    def unknown_split(*args, **kwargs):
        raise ValueError("Unknown split \"dev\". Should be one of ['train', 'test'].")

    monkeypatch.setattr(datasets, "load_dataset", unknown_split)
    with pytest.raises(DataError, match=r"euclaise/writingprompts \(split dev\).*Should be one of"):
        load_rows("euclaise/writingprompts", "dev", COLUMNS, REQUIRED)


def test_hub_name_without_datasets_says_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(DataError, match=r"pip install datasets"):
        load_rows("euclaise/writingprompts", "train", COLUMNS, REQUIRED)


def test_stories_task_reads_local_writingprompts_files_into_premises_with_their_stories_as_anchors(tmp_path):
    """Rows sharing a prompt become one premise (the "[ WP ]" tag stripped) whose stories are its anchors; a
    blank story is skipped. Held-out prompts come from eval_dataset (PromptSource refuses equal splits of one
    dataset)."""
    rows = [
        {"prompt": "[ WP ] A lighthouse keeper finds a letter.", "story": "She opened it at dawn."},
        {"prompt": "[ WP ] The moon stops rising.", "story": "Nobody noticed at first."},
        {"prompt": "[ WP ] A lighthouse keeper finds a letter.", "story": "The seal was still warm."},
        {"prompt": "[ WP ] The moon stops rising.", "story": "   "},
    ]
    train = write_jsonl(tmp_path / "wp.jsonl", rows)
    held_out = write_jsonl(tmp_path / "wp_test.jsonl", [{"prompt": "[ WP ] Rain falls upward.", "story": "It began."}])
    cfg = StoriesConfig(dataset=train, eval_dataset=held_out, train_split="train", eval_split="train")
    task = build_task(cfg)
    prompts = task.prompts("train")
    assert [p.fields["premise"] for p in prompts] == ["A lighthouse keeper finds a letter.", "The moon stops rising."]
    assert [[a.text for a in p.anchors] for p in prompts] == [
        ["She opened it at dawn.", "The seal was still warm."],
        ["Nobody noticed at first."],
    ]
    assert "A lighthouse keeper finds a letter." in prompts[0].text and "[ WP ]" not in prompts[0].text
    evaluation = task.prompts("eval")
    assert [(p.fields["premise"], [a.text for a in p.anchors]) for p in evaluation] == [
        ("Rain falls upward.", ["It began."])
    ]
    assert len({p.id for p in prompts + evaluation}) == 3


def test_stories_task_splits_one_local_file_by_slices(tmp_path):
    rows = [{"prompt": f"Premise number {i}.", "story": f"Story {i}."} for i in range(20)]
    path = write_jsonl(tmp_path / "wp.jsonl", rows)
    task = build_task(StoriesConfig(dataset=path, train_split="train[:90%]", eval_split="train[90%:]"))
    assert [p.fields["premise"] for p in task.prompts("eval")] == ["Premise number 18.", "Premise number 19."]
    assert len(task.prompts("train")) == 18
