"""Programming problems checked by running the program against the problem's tests (LiveCodeBench v6 in
Reasoning Arena, reported there as pass@5).

Data rows (JSONL): {"id": str, "title": str, "question": str, "tests": [{"input": str, "output": str}, ...],
"solution": str (a reference program; optional), "approach": str (optional), "starter_code": str (optional),
"func_name": str (optional: LeetCode-style tests call Solution().<func_name>(*args), one JSON argument per input
line, and compare the JSON result), "difficulty", "platform", "contest_date" (optional)}.
The shipped sample (tsrl/tasks/data/code/) was written for tsrl: 16 training and 8 held-out stdin/stdout problems,
each with 4–5 tests and a reference solution; tests/unit/tasks/test_code_task.py runs every reference (it passes) and a
wrong program (it fails) in the sandbox.

Verifier: the program is the last fenced code block of the completion (```python, ```py or a bare ```); it runs
once per test in tsrl/tasks/sandbox.py (a fresh process and folder per test, CPU/memory/file/wall limits, an audit
hook, and bubblewrap's namespaces around it as task.sandbox says: tsrl/tasks/isolation.py; the setting is resolved
when the task is built, so task.sandbox=bwrap refuses to start without bubblewrap and auto warns there) and scores
1 when it passes every test, else 0 — the LiveCodeBench rule; it stops at the first failing test. No code block: 0
without running anything. The reference solution (when the row has one) is the prompt's one anchor (the tiny
policy's warm start uses it).

The real dataset: LiveCodeBench `livecodebench/code_generation_lite` (columns question_content, starter_code,
public_test_cases and private_test_cases, metadata with func_name, platform, difficulty, contest_date). Its loading
script does not run under datasets ≥ 4, so for that hub name tsrl downloads the release's JSONL files
(`task.release`: release_v6 = test.jsonl … test6.jsonl) with huggingface_hub into its cache and reads them as local
files; a local copy works too (`task.eval_dataset=/data/lcb/test6.jsonl`). `task.min_date`/`task.max_date` keep
a contest-date window. Private tests are stored base64(zlib(pickle(JSON string))); tsrl never unpickles them: the
pickle is walked opcode by opcode (pickletools) and accepted only when it is one plain string, which is then read
as JSON — a pickle that would build anything else is refused (unpickling runs arbitrary code).

Latent quality for the simulated judge (judge=rubric_sim), from the trace alone — it never runs the program, never
reads the tests or the reference solution (a judge of reasoning traces sees neither):
    q = 0.5·[exactly one code block] + 0.5·[it parses as Python] + 0.25·[reads input] + 0.25·[writes output]
        + 0.5·[explains: ≥ 20 words outside the code] − 3·(1 − distinct-line ratio)
        − 0.005·(words beyond 600)
Empty text scores −5. A stand-in for a judge's view of a solution, not a model of it.
"""

from __future__ import annotations

import ast
import base64
import json
import pickletools
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tsrl.errors import ConfigError
from tsrl.registry import TASKS
from tsrl.tasks.base import DataError, DatasetConfig, DatasetSchema, PromptSource
from tsrl.tasks.isolation import SETTINGS
from tsrl.tasks.isolation import resolve as resolve_isolation
from tsrl.tasks.sandbox import Limits, run_test
from tsrl.tasks.sources import load_rows
from tsrl.types import Anchor, Prompt

HUB = "livecodebench/code_generation_lite"
RELEASES = {f"release_v{v}": ["test.jsonl"] + [f"test{i}.jsonl" for i in range(2, v + 1)] for v in range(1, 7)}
RELEASES.update({f"v{v}": ["test.jsonl" if v == 1 else f"test{v}.jsonl"] for v in range(1, 7)})
FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
WORDS = re.compile(r"\S+")
READS = re.compile(r"\binput\s*\(|sys\.stdin|open\(\s*0")
WRITES = re.compile(r"\bprint\s*\(|sys\.stdout|\breturn\b")
CRITERIA = (
    "1. Correctness of the reasoning: the approach solves the problem as stated, every case in the "
    "constraints is handled, and the program does what the reasoning says.\n2. Efficiency: the algorithm "
    "fits the constraints.\n3. Clarity: the reasoning and the program are organised and easy to follow.\n"
    "Judge the reasoning and the program, not test results: no tests are given, and a confident claim that "
    "the program is correct is no evidence that it is."
)


@dataclass
class SandboxLimits:
    """Limits of one sandboxed test run (tsrl/tasks/sandbox.py); the values are ours."""

    wall_s: float = 6.0
    """Wall-clock seconds per test before the process group is killed."""
    cpu_s: int = 4
    """CPU seconds per test (RLIMIT_CPU)."""
    memory_mb: int = 1024
    """Address space per test in MiB (RLIMIT_AS)."""
    file_mb: int = 16
    """Largest file the program may write, its captured output included, in MiB (RLIMIT_FSIZE)."""


@dataclass
class CodeConfig(DatasetConfig):
    """Task `code`: programming problems, verified by running the program against the problem's tests."""

    columns: dict[str, str] = field(default_factory=dict)
    """Task field → dataset column; defaults are LiveCodeBench's (question_content, public_test_cases, …)."""
    release: str = "release_v6"
    """LiveCodeBench release whose files are read for the hub name (release_v1…v6 cumulative, v1…v6 alone)."""
    min_date: str = ""
    """Keep problems whose contest_date is on or after this ISO date (empty = no bound)."""
    max_date: str = ""
    """Keep problems whose contest_date is before this ISO date (empty = no bound)."""
    max_tests: int = 0
    """Run at most this many tests per problem, in order (0 = all; public tests come first)."""
    workers: int = 0
    """Programs verified at once by verify_many (threads, each waiting on its sandbox process); 0 = CPU count."""
    report_k: list[int] = field(default_factory=lambda: [5])
    """pass@k reported beside k = 1, 2, 4, … n (Reasoning Arena reports LiveCodeBench v6 pass@5)."""
    sandbox: str = "auto"
    """How programs are held: bwrap (bubblewrap namespaces around each program, with the audit hook inside; refuses
    to run without it), hook (the in-process audit hook and limits alone: not a security boundary) or auto (bwrap
    where it works, else hook with a warning); see tsrl/tasks/isolation.py."""
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    """Per-test limits of the sandbox."""

    def __post_init__(self) -> None:
        if self.release not in RELEASES:
            raise ConfigError(
                f"task.release={self.release!r} is not a LiveCodeBench release; use one of "
                f"{', '.join(sorted(RELEASES))}."
            )
        if self.sandbox not in SETTINGS:
            raise ConfigError(f"task.sandbox={self.sandbox!r} is not a sandbox; use one of {', '.join(SETTINGS)}.")
        if self.max_tests < 0 or self.workers < 0 or any(k < 1 for k in self.report_k):
            raise ConfigError(
                f"task.max_tests and task.workers must be >= 0 and task.report_k values >= 1; got "
                f"{self.max_tests}, {self.workers}, {self.report_k}."
            )


SCHEMA = DatasetSchema(
    "LiveCodeBench",
    {
        "question": "question_content",
        "public_tests": "public_test_cases",
        "private_tests": "private_test_cases",
        "starter_code": "starter_code",
        "metadata": "metadata",
        "title": "question_title",
        "platform": "platform",
        "difficulty": "difficulty",
        "contest_date": "contest_date",
        "question_id": "question_id",
    },
    ("question", "public_tests"),
)


def code_prompt_text(question: str, starter_code: str) -> str:
    if starter_code.strip():
        how = (
            "Complete the starter code below; the tests call its method with the given arguments and compare "
            f"what it returns.\n\n```python\n{starter_code.rstrip()}\n```"
        )
    else:
        how = "The program reads the input from standard input and writes the answer to standard output."
    return (
        "Solve this programming problem in Python 3. Think it through, then give the complete program in one "
        f"```python fenced code block. {how}\n\n{question}"
    )


def _tests(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    if (
        not isinstance(value, list)
        or not value
        or not all(
            isinstance(t, dict) and isinstance(t.get("input"), str) and isinstance(t.get("output"), str) for t in value
        )
    ):
        raise DataError(f'{where}: \'tests\' must be a non-empty list of {{"input": str, "output": str}}.')
    return tuple((t["input"], t["output"]) for t in value)


def _parse_row(row: dict[str, Any], where: str) -> Prompt:
    question = row["question"]
    if not isinstance(question, str) or not question.strip():
        raise DataError(f"{where}: 'question' must be a non-empty string.")
    tests = _tests(row["tests"], where)
    starter = str(row.get("starter_code") or "")
    solution = str(row.get("solution") or "").strip()
    approach = str(row.get("approach") or "").strip()
    anchors = (Anchor(f"{approach}\n\n```python\n{solution}\n```".strip(), "reference"),) if solution else ()
    fields = {
        "tests": tests,
        "func_name": str(row.get("func_name") or ""),
        "rubric": CRITERIA,
        **{k: str(row.get(k) or "") for k in ("title", "difficulty", "platform", "contest_date")},
    }
    return Prompt(id=str(row["id"]), text=code_prompt_text(question.strip(), starter), anchors=anchors, fields=fields)


def pickled_string(data: bytes) -> str:
    """The one string a pickle holds, read without unpickling; anything else in it raises DataError."""
    allowed = {
        "PROTO",
        "FRAME",
        "SHORT_BINUNICODE",
        "BINUNICODE",
        "BINUNICODE8",
        "UNICODE",
        "MEMOIZE",
        "BINPUT",
        "LONG_BINPUT",
        "PUT",
        "STOP",
    }
    strings = []
    try:
        for opcode, arg, _ in pickletools.genops(data):
            if opcode.name not in allowed:
                raise DataError(
                    f"private tests hold a pickle that builds more than a string (opcode {opcode.name}); "
                    "tsrl refuses to unpickle it (unpickling runs code). Convert them to JSON."
                )
            if isinstance(arg, str) and "UNICODE" in opcode.name:
                strings.append(arg)
    except ValueError as err:
        raise DataError(f"private tests are not a readable pickle ({err}).") from None
    if len(strings) != 1:
        raise DataError(f"private tests hold {len(strings)} strings in their pickle, expected one JSON string.")
    return strings[0]


def decode_tests(value: Any, where: str) -> list[dict[str, Any]]:
    """LiveCodeBench test cases: a JSON list, or base64(zlib(pickle(JSON string))) as its private tests are."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return []
    if isinstance(value, list):
        return value
    text = str(value).strip()
    if not text.startswith("["):
        try:
            text = pickled_string(zlib.decompress(base64.b64decode(text.encode("ascii"))))
        except (ValueError, zlib.error) as err:
            raise DataError(f"{where}: test cases are neither JSON nor base64+zlib+pickle ({err}).") from None
    try:
        tests = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"{where}: test cases are not valid JSON ({err.msg}).") from None
    if not isinstance(tests, list):
        raise DataError(f"{where}: test cases must be a JSON list of {{input, output, testtype}}.")
    return tests


def _native(row: dict[str, Any], index: int, cfg: DatasetConfig) -> dict[str, Any]:
    where = f"LiveCodeBench row {index}"
    tests = decode_tests(row["public_tests"], where) + decode_tests(row.get("private_tests"), where)
    metadata = row.get("metadata") or "{}"
    meta = json.loads(metadata) if isinstance(metadata, str) else dict(metadata)
    functional = any(t.get("testtype") == "functional" for t in tests)
    return {
        "id": str(row.get("question_id") or f"lcb-{index}"),
        "question": row["question"],
        "tests": [{"input": str(t["input"]), "output": str(t["output"])} for t in tests],
        "starter_code": row.get("starter_code") or "",
        "func_name": meta.get("func_name", "") if functional else "",
        "title": row.get("title") or "",
        "platform": row.get("platform") or "",
        "difficulty": row.get("difficulty") or "",
        "contest_date": str(row.get("contest_date") or ""),
    }


def livecodebench_file(release: str) -> str:
    """The release's JSONL files from the Hugging Face Hub (cached by huggingface_hub), joined into one file in
    tsrl's cache; its path."""
    import os

    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise DataError(
            "Loading LiveCodeBench needs huggingface_hub; install it or point task.eval_dataset at a "
            "local copy of its JSONL files."
        ) from None
    target = Path(os.environ.get("TSRL_CACHE", "~/.cache/tsrl")).expanduser() / "livecodebench" / f"{release}.jsonl"
    if target.is_file():
        return str(target)
    print(
        f"[tsrl] task code: downloading LiveCodeBench {release} ({', '.join(RELEASES[release])}) from {HUB}; "
        f"joined into {target}",
        flush=True,
    )
    try:
        parts = [Path(hf_hub_download(HUB, name, repo_type="dataset")) for name in RELEASES[release]]
    except OSError as err:
        raise DataError(
            f"LiveCodeBench {release} could not be downloaded ({type(err).__name__}: {err}); go online "
            "or point task.eval_dataset at local copies of its test*.jsonl files."
        ) from None
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    with partial.open("w", encoding="utf-8") as out:
        for part in parts:
            text = part.read_text(encoding="utf-8")
            out.write(text if text.endswith("\n") else text + "\n")
    partial.replace(target)
    return str(target)


def in_window(date: str, start: str, stop: str) -> bool:
    """Whether an ISO contest date (a time part is ignored) falls in [start, stop); no date = kept."""
    day = date[:10]
    return not day or ((not start or day >= start) and (not stop or day < stop))


def extract_program(text: str) -> str | None:
    """The last fenced code block of a completion (None when it has none)."""
    blocks = FENCE.findall(text)
    return blocks[-1] if blocks else None


def code_quality(text: str) -> float:
    """Latent quality of a solution trace from its own features (see the module docstring)."""
    n = len(WORDS.findall(text))
    if not n:
        return -5.0
    blocks = FENCE.findall(text)
    program = blocks[-1] if blocks else ""
    try:
        parses = bool(program.strip()) and ast.parse(program) is not None
    except (SyntaxError, ValueError):
        parses = False
    prose = len(WORDS.findall(FENCE.sub(" ", text)))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    distinct = len(set(lines)) / len(lines)
    return (
        0.5 * (len(blocks) == 1)
        + 0.5 * parses
        + 0.25 * bool(READS.search(program))
        + 0.25 * bool(WRITES.search(program))
        + 0.5 * (prose >= 20)
        - 3.0 * (1.0 - distinct)
        - 0.005 * max(0, n - 600)
    )


class CodeTask:
    name = "code"
    metric = "pass"

    def __init__(self, cfg: CodeConfig) -> None:
        self.cfg = cfg
        limits = cfg.limits
        isolation = resolve_isolation(cfg.sandbox)  # at start: an explicit bwrap refuses here, auto warns here
        self.limits = Limits(limits.wall_s, limits.cpu_s, limits.memory_mb, limits.file_mb, isolation=isolation)
        self.report_k = tuple(cfg.report_k)
        self._source: PromptSource | None = None
        self._eval: list[Prompt] | None = None

    def _prompt_source(self) -> PromptSource:
        if self._source is None:  # built on first use: the hub files download only when prompts are asked for
            cfg = self.cfg
            if cfg.dataset == HUB:
                cfg = replace(cfg, dataset=livecodebench_file(cfg.release))
            if cfg.dataset and cfg.eval_dataset == HUB:
                cfg = replace(cfg, eval_dataset=livecodebench_file(cfg.release))
            self._source = PromptSource(self.name, cfg, SCHEMA, _parse_row, _native)
        return self._source

    def prompts(self, split: str) -> list[Prompt]:
        if split == "eval" and self.cfg.eval_dataset and not self.cfg.dataset:
            return self._heldout_table()  # shipped training problems, held-out ones from a real dataset
        prompts = self._prompt_source().prompts(split)
        return [p for p in prompts if in_window(p.fields["contest_date"], self.cfg.min_date, self.cfg.max_date)]

    def _heldout_table(self) -> list[Prompt]:
        if self._eval is None:
            cfg = self.cfg
            name = livecodebench_file(cfg.release) if cfg.eval_dataset == HUB else cfg.eval_dataset
            columns = {**SCHEMA.columns, **cfg.columns, **cfg.eval_columns}
            rows = load_rows(name, cfg.eval_split, columns, SCHEMA.required, subset=cfg.subset)
            prompts = [
                replace(prompt, id=f"eval/{prompt.id}")
                for i, row in enumerate(rows)
                for prompt in [_parse_row(_native(row, i, cfg), f"{name} row {i}")]
            ]
            self._eval = [p for p in prompts if in_window(p.fields["contest_date"], cfg.min_date, cfg.max_date)]
            if not self._eval:
                raise DataError(
                    f"No held-out problem of {name} falls in the contest-date window "
                    f"[{cfg.min_date or '…'}, {cfg.max_date or '…'}); widen task.min_date/max_date."
                )
        return self._eval

    def verify(self, prompt: Prompt, text: str) -> float:
        program = extract_program(text)
        if program is None or not program.strip():
            return 0.0
        tests = prompt.fields["tests"]
        tests = tests[: self.cfg.max_tests] if self.cfg.max_tests else tests
        for stdin, expected in tests:
            if run_test(program, stdin, expected, self.limits, prompt.fields["func_name"]).status != "passed":
                return 0.0
        return 1.0

    def verify_many(self, items: Sequence[tuple[Prompt, str]]) -> list[float]:
        """verify() for many (prompt, completion) pairs, `workers` sandboxes at a time, in the given order."""
        import os
        from concurrent.futures import ThreadPoolExecutor

        workers = self.cfg.workers or os.cpu_count() or 1
        if workers == 1 or len(items) < 2:
            return [self.verify(prompt, text) for prompt, text in items]
        with ThreadPoolExecutor(min(workers, len(items))) as pool:
            return list(pool.map(lambda item: self.verify(*item), items))

    def quality(self, prompt: Prompt, text: str) -> float:
        return code_quality(text)  # the trace only: no tests, no reference solution

    def extract(self, text: str) -> Any:
        """The program a completion gives (None when it has no code block), for evaluation reports."""
        return extract_program(text)


TASKS.register("code", CodeConfig, CodeTask)
