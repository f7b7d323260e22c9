"""Persistent verdict cache: a judge around a judge that never pays twice for the same question.

Key = sha256 of (judge identity = model + template name + template hash (+ for judge=openai a hash of the
generation settings and the vision switch; for hf_local the method), prompt text, the prompt's rubric (the
criteria the judge is shown), the pair in canonical order (sorted), which of the two was shown first,
image digests). Keeping the presented order in the key means position-bias cancellation still sees two
independent answers: (a, b) and (b, a) are two rows. The verdict is stored for the canonical orientation
and mapped back to the shown one on a hit.

Pointwise rubric grades (`score`) are cached alike in their own table, keyed by the judge's score identity
(model + pointwise template), prompt, rubric and response. Lists (`score_lists`) too, in the table `lists`: key =
the judge's list identity (model + list template; default: the judge identity + "|list"), prompt, rubric, the
responses in the order shown and their image digests (the same responses in another order are another question,
as the shown order of a pair is); the row holds the scores in shown order (JSON).

Storage is SQLite in WAL mode. Misses go to the inner judge in chunks; each chunk's verdicts are committed
in one transaction as soon as they arrive, so a process killed mid-judging loses at most the chunk in
flight and a restart re-uses everything committed. Only real verdicts are stored, never failures.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tsrl.errors import DataError
from tsrl.judging.base import Judge, JudgeCounters, merge_metrics
from tsrl.types import ListRequest, ListScores, PairRequest, Score, ScoreRequest, Verdict

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, p REAL NOT NULL, raw TEXT, tokens INTEGER)",
    "CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, value REAL NOT NULL, raw TEXT, tokens INTEGER)",
    "CREATE TABLE IF NOT EXISTS lists (key TEXT PRIMARY KEY, value TEXT NOT NULL, raw TEXT, tokens INTEGER)",
)


@dataclass(frozen=True)
class Table:
    """Where one kind of answer is stored: its table, its answer class and the field holding the value; `store` and
    `load` convert the value to and from its column (a list's scores are kept as JSON text)."""

    name: str
    kind: type
    field: str
    store: Callable[[Any], Any] = lambda value: value
    load: Callable[[Any], Any] = lambda column: column


VERDICTS = Table("verdicts", Verdict, "p_first")
SCORES = Table("scores", Score, "value")
LISTS = Table("lists", ListScores, "values", json.dumps, json.loads)


def image_digest(path: str | None) -> str:
    if not path:
        return ""
    source = Path(path)
    blob = source.read_bytes() if source.is_file() else path.encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def cache_key(identity: str, request: PairRequest) -> tuple[str, bool]:
    """(key, flipped): flipped is True when the request's first response is the canonical second."""
    first = (request.first, image_digest(request.first_image))
    second = (request.second, image_digest(request.second_image))
    flipped = second < first
    canonical = (second, first) if flipped else (first, second)
    rubric = request.prompt.fields.get("rubric", "")  # rendered as the criteria of the question
    blob = json.dumps(
        [identity, request.prompt.text, rubric, canonical, "shown-flipped" if flipped else "shown-canonical"]
    )
    return hashlib.sha256(blob.encode()).hexdigest(), flipped


def list_key(identity: str, request: ListRequest) -> str:
    """The key of a list question: identity, prompt text, rubric, (response, image digest) in the order shown."""
    images = request.images or (None,) * len(request.responses)
    shown = [(text, image_digest(image)) for text, image in zip(request.responses, images)]
    blob = json.dumps([identity, request.prompt.text, request.prompt.fields.get("rubric", ""), shown])
    return hashlib.sha256(blob.encode()).hexdigest()


def open_database(path: Path) -> sqlite3.Connection:
    """A connection to the SQLite file at `path` (its folder made), or a DataError naming judge.cache_path when the
    path is a folder or the file cannot be created there (sqlite3 alone says only "unable to open database file")."""
    fix = "point judge.cache_path at a file in a folder this process can write"
    if path.is_dir():
        raise DataError(f"judge.cache_path={path} is a folder, not a file; {fix} (e.g. {path / 'verdicts.sqlite'}).")
    blocking = next((p for p in path.parents if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise DataError(f"judge.cache_path={path} lies under {blocking}, which is a file; {fix}.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except (OSError, sqlite3.Error) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise DataError(f"judge.cache_path={path} cannot be opened ({reason}); {fix}.") from None


class VerdictCache:
    """See the module docstring. `chunk` = misses sent to the inner judge per committed transaction."""

    def __init__(
        self,
        inner: Judge,
        path: str | Path,
        identity: str,
        chunk: int = 256,
        score_identity: str = "",
        *,
        list_identity: str = "",
    ) -> None:
        self.inner, self.identity, self.chunk = inner, identity, max(1, chunk)
        self.score_identity = score_identity or f"{identity}|pointwise"
        self.list_identity = list_identity or f"{identity}|list"
        self.path = Path(path).expanduser()
        self.db = open_database(self.path)
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a killed process never corrupts the file
            for table in SCHEMA:
                self.db.execute(table)
        except sqlite3.DatabaseError as err:
            self.db.close()
            raise DataError(
                f"The verdict cache {self.path} is not a usable SQLite database ({err}); move it aside (its "
                "verdicts are lost, the judge is asked again) or point judge.cache_path at another file."
            ) from None
        self.counters = JudgeCounters()

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        keys = [cache_key(self.identity, r) for r in requests]
        return self._answer(VERDICTS, keys, requests, self.inner.compare)

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        """Pointwise grades, cached the same way: key = score identity + prompt + rubric + response."""
        keys = [
            (
                hashlib.sha256(
                    json.dumps(
                        [self.score_identity, r.prompt.text, r.prompt.fields.get("rubric", ""), r.response]
                    ).encode()
                ).hexdigest(),
                False,
            )
            for r in requests
        ]
        return self._answer(SCORES, keys, requests, self.inner.score)

    def score_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]:
        """Lists, cached the same way: key = list identity + prompt + rubric + responses and images as shown."""
        keys = [(list_key(self.list_identity, r), False) for r in requests]
        return self._answer(LISTS, keys, requests, self.inner.score_lists)

    def _answer(
        self, table: Table, keys: list[tuple[str, bool]], requests: Sequence, ask: Callable[[list], list]
    ) -> list:
        """Answers (Verdict, Score or ListScores) stored in `table` where present; the rest asked of the inner judge
        once per distinct key, in chunks committed one transaction each (only real answers are stored). A key's
        flag says the stored value belongs to the mirrored question: 1 − value."""
        out: list = [None] * len(requests)
        misses: dict[str, list[int]] = {}
        for i, (key, flipped) in enumerate(keys):
            row = self.db.execute(f"SELECT * FROM {table.name} WHERE key = ?", (key,)).fetchone()  # key, value, raw, …
            if row is None:
                misses.setdefault(key, []).append(i)  # duplicates inside a batch are asked once
            else:
                value = table.load(row[1])
                out[i] = table.kind(1.0 - value if flipped else value, row[2], tokens=0, cached=True)
        self.counters.record([a for a in out if a is not None])
        pending = list(misses.values())
        for start in range(0, len(pending), self.chunk):
            batch = pending[start : start + self.chunk]
            answers = ask([requests[idx[0]] for idx in batch])
            rows = []
            for idx, answer in zip(batch, answers):
                (key, flipped), value = keys[idx[0]], getattr(answer, table.field)
                if value is not None:
                    rows.append((key, table.store(1.0 - value if flipped else value), answer.raw, answer.tokens))
            with self.db:  # one transaction per chunk
                self.db.execute("BEGIN")
                self.db.executemany(f"INSERT OR REPLACE INTO {table.name} VALUES (?, ?, ?, ?)", rows)
            for idx, answer in zip(batch, answers):
                value = getattr(answer, table.field)
                out[idx[0]] = answer
                for dup in idx[1:]:
                    out[dup] = table.kind(value, answer.raw, answer.error, cached=value is not None)
                self.counters.record([out[d] for d in idx[1:]])
        return out

    def drain_metrics(self) -> dict[str, float]:
        metrics = merge_metrics(self.counters.drain(), self.inner.drain_metrics())
        metrics["cache_hit_rate"] = metrics.get("cache_hits", 0.0) / metrics["calls"] if metrics.get("calls") else 0.0
        return metrics

    def close(self) -> None:
        self.db.close()

    def __len__(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
