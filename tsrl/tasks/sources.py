"""A real dataset's rows keyed by a task's fields: the one reader behind PromptSource._from_dataset.

Sources (`task.dataset`): a local .jsonl file (one object a line), .json file (a list of objects, or
{"data": [...]}), .parquet file (needs pyarrow) or .tsv/.csv file (a header row, then one row a line; every
cell a string, as MWAHAHA distributes its inputs); a local dataset folder (written by `save_to_disk`, or data
files that `datasets.load_dataset` reads); otherwise a Hugging Face dataset name, with `task.subset` as its
configuration. The `datasets` package is imported only for folders and hub names.

Splits follow Hugging Face's slicing: "train", "test", "train[:95%]", "train[95%:]", "train[10:20]", negative
bounds counted from the end. Percent bounds become row numbers as datasets' ReadInstruction does with its
default rounding "closest": round(pct · n / 100), Python's round (halves to even). A local file is one
implicit split: its name is ignored and only its slice applies ("train[:95%]" and "test[:95%]" both read the
file's first 95 %), so one file serves train_split=train[:95%] and eval_split=train[95%:]. A folder written
by `DatasetDict.save_to_disk` has named splits; one written by `Dataset.save_to_disk` is one implicit split.

Columns: `columns` maps task field → dataset column. A required field's column must exist; an optional
field whose column is missing reads None (the task's own defaults apply). Rows with an empty required field
(None, NaN, blank string, or one of `blanks`: MWAHAHA writes "-" for the constraint a row does not have) are
skipped and counted. With `group_by`, rows sharing that field's value merge
into one, in first-seen order: field `collect` lists the group's non-empty values, other fields keep the
first row's.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import re
import time
from pathlib import Path
from typing import Any

from tsrl.errors import ConfigError, DataError, not_a_file

FILES = (".jsonl", ".json", ".parquet", ".tsv", ".csv")
DELIMITERS = {".tsv": "\t", ".csv": ","}
SPLIT = re.compile(
    r"^(?P<name>\w+(?:\.\w+)*)(?:\[(?:(?P<start>-?[\d_]+)(?P<start_pct>%)?)?:"
    r"(?:(?P<stop>-?[\d_]+)(?P<stop_pct>%)?)?\])?$"
)  # datasets' own grammar, one slice
log = logging.getLogger("tsrl")


def load_rows(
    source: str,
    split: str,
    columns: dict[str, str],
    required: tuple[str, ...],
    subset: str = "",
    group_by: str = "",
    collect: str = "",
    blanks: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    """The rows of `source`'s `split` as dicts keyed by the fields of `columns` (field → dataset column); a cell
    whose stripped text is one of `blanks` reads None."""
    for name in (*required, group_by, collect):
        if name and name not in columns:
            raise ConfigError(f"Field {name!r} has no column in {sorted(columns)}; add it to the schema.")
    where = f"Dataset {source} (split {split})"
    log.info("%s: loading (a local file reads at once; a hub dataset may download first, then it is cached)", where)
    start = time.monotonic()
    table, available = _read(source, split, subset)
    log.info("%s: %d rows read in %.0f s", where, len(table), time.monotonic() - start)
    present = _present(available, columns, required, where)
    rows: list[dict[str, Any]] = []
    skipped = 0
    for record in _records(table, sorted(set(present.values()))):
        row = {
            field: _cell(record.get(column), blanks) if field in present else None for field, column in columns.items()
        }
        if any(_empty(row[field]) for field in required):
            skipped += 1
        else:
            rows.append(row)
    if skipped and not rows:
        raise DataError(
            f"{where}: all {skipped} rows have an empty {' or '.join(required)}; "
            "check task.columns or choose another split."
        )
    if skipped:
        log.warning(
            "%s: skipped %d of %d rows with an empty %s.", where, skipped, skipped + len(rows), " or ".join(required)
        )
    return _group(rows, group_by, collect) if group_by else rows


def split_range(split: str, length: int) -> range:
    """The row numbers `split` selects among `length` rows, as datasets' ReadInstruction computes them."""
    match = _split_match(split)
    percent = bool(match["start_pct"] or match["stop_pct"])
    start, stop = (None if match[key] is None else int(match[key]) for key in ("start", "stop"))
    if percent and any(b is not None and abs(b) > 100 for b in (start, stop)):
        raise ConfigError(f"Split {split!r} has a percent bound beyond 100%; use bounds from -100% to 100%.")
    start = 0 if start is None else _to_row(start, length, percent)
    stop = length if stop is None else _to_row(stop, length, percent)
    start, stop = (min(max(length + b, 0) if b < 0 else b, length) for b in (start, stop))
    return range(start, max(start, stop))


def split_name(split: str) -> str:
    """The split's name without its slice: "train[:95%]" → "train"."""
    return _split_match(split)["name"]


def _split_match(split: str) -> re.Match[str]:
    match = SPLIT.match(split.strip())
    if match is None:
        raise ConfigError(
            f"Split {split!r} is not understood; write a name with an optional slice, "
            "like train, train[:95%], train[95%:] or train[10:20]."
        )
    return match


def _to_row(bound: int, length: int, percent: bool) -> int:
    return int(round(bound * length / 100.0)) if percent else bound


def _read(source: str, split: str, subset: str) -> tuple[Any, list[str]]:
    """The split's rows, a list of dicts (local file) or a datasets.Dataset, and the source's column names."""
    path = Path(source).expanduser()
    if path.suffix.lower() in FILES or path.is_file():
        rows = _read_file(path)
        names = list(dict.fromkeys(key for row in rows for key in row))
        return [rows[i] for i in split_range(split, len(rows))], names
    table = _read_folder(path, split, subset) if path.is_dir() else _read_hub(source, split, subset)
    return table, list(table.column_names)


def _read_file(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise DataError(f"Dataset file {path} {not_a_file(path)}; check task.dataset.")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise DataError(f"Reading {path} needs pyarrow; install it with `pip install pyarrow`.") from None
        return pq.read_table(path).to_pylist()
    if suffix == ".jsonl":
        lines = path.read_text(encoding="utf-8").splitlines()
        rows = [_json(line, f"{path}:{n}") for n, line in enumerate(lines, start=1) if line.strip()]
    elif suffix in DELIMITERS:
        rows = _read_table(path, DELIMITERS[suffix])
    elif suffix == ".json":
        loaded = _json(path.read_text(encoding="utf-8"), str(path))
        rows = loaded.get("data") if isinstance(loaded, dict) else loaded
        if not isinstance(rows, list):
            raise DataError(f'{path} must hold a list of objects or {{"data": [...]}}; rewrite it so.')
    else:
        raise DataError(
            f"Dataset file {path} is not .jsonl, .json, .parquet, .tsv or .csv; convert it to one of these."
        )
    for n, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DataError(f"{path}: row {n} is a {type(row).__name__}; every row must be a JSON object.")
    return rows


def _read_table(path: Path, delimiter: str) -> list[dict[str, Any]]:
    """A delimited text file's rows keyed by its header; quoting as Python's csv module reads it."""
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter=delimiter)
        if not reader.fieldnames:
            raise DataError(f"{path} has no header row; its first line must name the columns.")
        rows = []
        for row in reader:  # a short row reads None for the missing cells, a long one keeps the rest under None
            if None in row or None in row.values():
                raise DataError(
                    f"{path}:{reader.line_num}: its cells do not match the header's columns in number; fix that line."
                )
            rows.append(row)
    return rows


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"{where}: not valid JSON ({err.msg}); fix or remove it.") from None


def _datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise DataError(
            "Reading a dataset folder or a Hugging Face dataset needs the datasets package; "
            "install it with `pip install datasets`."
        ) from None
    return datasets


def _read_folder(path: Path, split: str, subset: str) -> Any:
    datasets = _datasets()
    if not ((path / "dataset_dict.json").is_file() or (path / "state.json").is_file()):
        try:
            return datasets.load_dataset(str(path), subset or None, split=split)
        except (ValueError, OSError) as err:
            raise DataError(
                f"Dataset folder {path} (split {split}) could not be read ({err}); "
                "check task.dataset, task.subset and the split."
            ) from None
    saved = datasets.load_from_disk(str(path))
    if isinstance(saved, datasets.DatasetDict):
        name = split_name(split)
        if name not in saved:
            raise DataError(f"Dataset folder {path} has no split {name!r}; choose one of {', '.join(saved)}.")
        saved = saved[name]
    rows = split_range(split, len(saved))
    return saved.select(rows if rows else [])  # datasets rejects an empty range that starts at the end


def _read_hub(name: str, split: str, subset: str) -> Any:
    datasets = _datasets()
    try:
        return datasets.load_dataset(name, subset or None, split=split)
    except ValueError as err:  # unknown split or configuration: datasets' message lists the choices
        raise DataError(
            f"Dataset {name} (split {split}) could not be loaded ({err}); "
            "check task.dataset, task.subset and the split."
        ) from None
    except OSError as err:  # offline or unreachable (ConnectionError), no such dataset (FileNotFoundError)
        local = "a local copy (a folder or a .jsonl/.json/.parquet file)"
        raise DataError(
            f"Dataset {name} could not be loaded from the Hugging Face Hub "
            f"({type(err).__name__}: {err}); this machine must be online with the name right, "
            f"or point task.dataset at {local}."
        ) from None


def _present(available: list[str], columns: dict[str, str], required: tuple[str, ...], where: str) -> dict[str, str]:
    """The fields whose column the source has; a required field's missing column raises DataError."""
    lost = [field for field in required if columns[field] not in available]
    if lost:
        missing = ", ".join(f"{columns[field]!r} (for field {field})" for field in lost)
        raise DataError(
            f"{where} has no column {missing}; its columns are {', '.join(available) or 'none'}, "
            f"so map each field to one of them with task.columns.{lost[0]}=<column>."
        )
    return {field: column for field, column in columns.items() if column in available}


def _records(table: Any, names: list[str]) -> list[dict[str, Any]]:
    return table if isinstance(table, list) else table.select_columns(names).to_list()


def _cell(value: Any, blanks: tuple[str, ...]) -> Any:
    return None if blanks and isinstance(value, str) and value.strip() in blanks else value


def _empty(value: Any) -> bool:
    return (
        value is None
        or (isinstance(value, str) and not value.strip())
        or (isinstance(value, float) and math.isnan(value))
    )


def _group(rows: list[dict[str, Any]], group_by: str, collect: str) -> list[dict[str, Any]]:
    """Merge rows sharing `group_by` (first-seen order); `collect` lists their non-empty values."""
    groups: dict[Any, dict[str, Any]] = {}
    for row in rows:
        merged = groups.setdefault(row[group_by], {**row, collect: []} if collect else dict(row))
        if collect:
            values = row[collect] if isinstance(row[collect], (list, tuple)) else [row[collect]]
            merged[collect].extend(v for v in values if not _empty(v))
    return list(groups.values())
