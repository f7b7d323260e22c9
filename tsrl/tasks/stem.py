"""One STEM training mix, several held-out benchmarks: Reasoning Arena's Table 1 setup as one task.

Reasoning Arena trains one policy on a STEM RL data mixture from which coding and visual-reasoning data were
filtered out, and evaluates it on six benchmarks (our translation of the Chinese summary): AIME 2024, AIME 2025,
AIME 2026, Beyond AIME and GPQA-Diamond by pass ratio@16, LiveCodeBench v6 by pass@5. Task `stem` is that shape:
- training prompts: the union of the training prompts of its component tasks (`task.mix`: aime = math, gpqa =
  science; no code), each prompt keeping its own task — its verifier, its answer reader, its simulated quality
  and its judge criteria (`fields["rubric"]`, which the generic judge templates read as `$criteria`);
- held-out prompts: one set per benchmark (`task.heldout`), each read by the task that checks it; every
  prompt carries its benchmark (`fields["benchmark"]`), so evaluation reports each benchmark's numbers under
  `<benchmark>/pass_ratio`, `<benchmark>/pass@k` beside the pooled ones (tsrl/evaluation/passk.py);
- a held-out prompt that is also a training prompt is refused (GPQA-Diamond is never trained on); a science
  source that is GPQA-Diamond itself is refused at config time.

The shipped stand-ins (no benchmark data is shipped): the four math benchmarks are disjoint quarters of the aime
task's 16 held-out problems, written for tsrl (`rows`), GPQA-Diamond is the gpqa task's 16 held-out questions,
LiveCodeBench v6 the code task's 8 held-out problems. The training mix is the aime and gpqa tasks' training
samples (48 + 48). The real sets are set per benchmark on the command line, e.g.
`task.heldout.aime_2026.dataset=MathArena/aime_2026` (docs/tasks.md lists all six).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from tsrl.errors import ConfigError
from tsrl.judging.prompting import criteria_text
from tsrl.registry import TASKS
from tsrl.tasks.aime import AimeConfig, AimeTask
from tsrl.tasks.base import DataError
from tsrl.tasks.code import CodeConfig, CodeTask
from tsrl.tasks.gpqa import GpqaConfig, GpqaTask
from tsrl.types import Prompt

COMPONENTS: dict[str, tuple[type, type, str]] = {
    "aime": (AimeConfig, AimeTask, "aime_criteria_v1"),
    "gpqa": (GpqaConfig, GpqaTask, "gpqa_criteria_v1"),
    "code": (CodeConfig, CodeTask, ""),  # its prompts carry their criteria already
}
"""Task name → (config class, task class, judge criteria file): the tasks a mix or a benchmark can name."""
METRICS = ("pass_ratio", "pass@1", "pass@2", "pass@4", "pass@5", "pass@8", "pass@16")


@dataclass
class BenchmarkConfig:
    """One held-out benchmark of task `stem`: the task that reads and checks it, where its problems come from,
    and the number a table reports for it."""

    label: str = ""
    """Its name in tables (Reasoning Arena's Table 1 column), e.g. "AIME 2024"."""
    task: str = "aime"
    """The task whose prompt format, verifier and judge criteria it uses: aime, gpqa or code."""
    dataset: str = ""
    """The real benchmark: a Hugging Face name or a local file/folder, held out only (its rows are never trained
    on); empty = the task's shipped held-out sample."""
    subset: str = ""
    """The dataset's configuration name, if it has several (GPQA: gpqa_diamond)."""
    split: str = "train"
    """The dataset's split holding the benchmark (slicing allowed)."""
    columns: dict[str, str] = field(default_factory=dict)
    """Task field → dataset column where they differ from the task's defaults."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Other settings of the task's config, e.g. {release: release_v6, min_date: 2025-02-01} for code."""
    rows: str = ""
    """A slice start:stop of those held-out prompts (empty = all): the shipped math stand-ins are quarters of one
    sample."""
    metric: str = "pass_ratio"
    """The number reported for it: pass_ratio (pass ratio@n) or pass@k (k ≤ trainer.eval.samples)."""


def reasoning_arena_benchmarks() -> dict[str, BenchmarkConfig]:
    """Reasoning Arena's six Table 1 benchmarks on the shipped stand-ins (the real ones: docs/tasks.md)."""
    math = {f"aime_{year}": f"AIME {year}" for year in (2024, 2025, 2026)} | {"beyond_aime": "Beyond AIME"}
    benchmarks = {
        key: BenchmarkConfig(label, "aime", rows=f"{4 * i}:{4 * i + 4}") for i, (key, label) in enumerate(math.items())
    }
    benchmarks["gpqa_diamond"] = BenchmarkConfig("GPQA-Diamond", "gpqa")
    code = {"release": "release_v6", "min_date": "", "max_date": ""}  # the paper's contest-date window: not stated
    benchmarks["livecodebench_v6"] = BenchmarkConfig("LiveCodeBench v6", "code", settings=code, metric="pass@5")
    return benchmarks


@dataclass
class StemConfig:
    """Task `stem`: one training mix of verifiable tasks, several held-out benchmarks (Reasoning Arena Table 1)."""

    mix: list[str] = field(default_factory=lambda: ["aime", "gpqa"])
    """Tasks whose training prompts form the mix (math and science; code is filtered out as the paper does)."""
    math: AimeConfig = field(default_factory=AimeConfig)
    """Where the mix's math problems come from (the aime task's settings; its held-out split is not used)."""
    science: GpqaConfig = field(default_factory=GpqaConfig)
    """Where the mix's science questions come from (never GPQA-Diamond: it is a held-out benchmark)."""
    code: CodeConfig = field(default_factory=CodeConfig)
    """Where the mix's programming problems come from, if `mix` names code."""
    heldout: dict[str, BenchmarkConfig] = field(default_factory=reasoning_arena_benchmarks)
    """Held-out benchmarks by key, in table order."""
    max_prompts: int = 0
    """Use only the first N training prompts of the mix (0 = all)."""

    def __post_init__(self) -> None:
        unknown = [name for name in [*self.mix, *(b.task for b in self.heldout.values())] if name not in COMPONENTS]
        if unknown or not self.mix or not self.heldout:
            raise ConfigError(
                f"task.mix={self.mix} and the tasks of task.heldout must name some of {', '.join(COMPONENTS)} "
                f"(unknown: {unknown}), and neither may be empty."
            )
        for key, bench in self.heldout.items():
            if bench.metric not in METRICS:
                raise ConfigError(f"task.heldout.{key}.metric={bench.metric!r}: use one of {', '.join(METRICS)}.")
            if bench.rows and not _is_slice(bench.rows):
                raise ConfigError(f"task.heldout.{key}.rows={bench.rows!r}: write a slice start:stop, e.g. 0:4.")
        if "gpqa" in self.mix and "gpqa" in self.science.dataset.lower() and "diamond" in self.science.subset.lower():
            raise ConfigError(
                f"task.science trains on {self.science.dataset} {self.science.subset}, which is GPQA-Diamond, a "
                "held-out benchmark; point task.science.dataset at other science problems."
            )


def _is_slice(text: str) -> bool:
    start, sep, stop = text.partition(":")
    return bool(sep) and all(part.strip().lstrip("-").isdigit() or not part.strip() for part in (start, stop))


def _rows(prompts: list[Prompt], rows: str) -> list[Prompt]:
    start, _, stop = rows.partition(":")
    return prompts[int(start) if start.strip() else None : int(stop) if stop.strip() else None]


def _criteria(name: str) -> str:
    return criteria_text(COMPONENTS[name][2]) if COMPONENTS[name][2] else ""


def _tagged(prompt: Prompt, name: str, prefix: str, extra: dict[str, Any]) -> Prompt:
    """The prompt under an id unique in the mix, carrying its task and its judge criteria."""
    rubric = prompt.fields.get("rubric") or _criteria(name)
    return replace(
        prompt, id=f"{prefix}/{prompt.id}", fields={**prompt.fields, "task": name, "rubric": rubric, **extra}
    )


def heldout_config(bench: BenchmarkConfig) -> Any:
    """The config of the task that reads a benchmark: its settings, and its dataset as the held-out table."""
    config_class = COMPONENTS[bench.task][0]
    known = {f.name for f in fields(config_class)}
    wrong = sorted(set(bench.settings) - known)
    if wrong:
        raise ConfigError(
            f"A {bench.task} benchmark's settings name {wrong}, which task {bench.task} does not have; "
            f"its settings are: {', '.join(sorted(known))}."
        )
    cfg = config_class(**bench.settings)
    if not bench.dataset:
        return cfg
    return replace(
        cfg,
        dataset=bench.dataset,
        eval_dataset=bench.dataset,  # held out only: the training split is never read
        subset=bench.subset,
        eval_split=bench.split,
        eval_columns=dict(bench.columns),
    )


class StemTask:
    name = "stem"
    metric = "pass"

    def __init__(self, cfg: StemConfig) -> None:
        self.cfg = cfg
        self.tasks = {name: COMPONENTS[name][1](getattr(cfg, role)) for name, role in _ROLES.items()}
        self.report_k = tuple(
            sorted(
                {*self.tasks["code"].report_k, *(int(b.metric[5:]) for b in cfg.heldout.values() if "@" in b.metric)}
            )
        )
        self.benchmarks = {key: COMPONENTS[b.task][1](heldout_config(b)) for key, b in cfg.heldout.items()}
        self._cache: dict[str, list[Prompt]] = {}

    def prompts(self, split: str) -> list[Prompt]:
        if split not in ("train", "eval"):
            raise ConfigError(f"Unknown split {split!r}; task stem has ['eval', 'train'].")
        if split not in self._cache:
            self._cache[split] = self._train() if split == "train" else self._heldout()
        return self._cache[split]

    def _train(self) -> list[Prompt]:
        mixed = [_tagged(p, name, name, {}) for name in self.cfg.mix for p in self.tasks[name].prompts("train")]
        return mixed[: self.cfg.max_prompts] if self.cfg.max_prompts else mixed

    def _heldout(self) -> list[Prompt]:
        seen = {p.text for p in self.prompts("train")}
        prompts = []
        for key, bench in self.cfg.heldout.items():
            own = _rows(self.benchmarks[key].prompts("eval"), bench.rows)
            if not own:
                raise DataError(f"Benchmark {key} has no held-out prompt (rows {bench.rows!r}); check its source.")
            trained = [p.id for p in own if p.text in seen]
            if trained:
                raise DataError(
                    f"Benchmark {key}: {len(trained)} held-out prompt(s) (first {trained[0]!r}) are also training "
                    "prompts of the mix; a held-out benchmark is never trained on — change task.math/science."
                )
            prompts += [_tagged(p, bench.task, key, {"benchmark": key}) for p in own]
        return prompts

    def _task(self, prompt: Prompt) -> Any:
        """The task that reads this prompt: its benchmark's (held-out) or its mix component's (training)."""
        key = prompt.fields.get("benchmark")
        return self.benchmarks[key] if key else self.tasks[prompt.fields["task"]]

    def verify(self, prompt: Prompt, text: str) -> float:
        return self._task(prompt).verify(prompt, text)

    def verify_many(self, items: Sequence[tuple[Prompt, str]]) -> list[float]:
        """Each task checks its own prompts (task=code: programs in parallel sandboxes); scores in the given order."""
        scores: list[float] = [0.0] * len(items)
        by_task: dict[int, tuple[Any, list[int]]] = {}
        for i, (prompt, _) in enumerate(items):
            task = self._task(prompt)
            by_task.setdefault(id(task), (task, []))[1].append(i)
        for task, mine in by_task.values():
            many = getattr(task, "verify_many", None)
            found = many([items[i] for i in mine]) if many else [task.verify(*items[i]) for i in mine]
            for i, score in zip(mine, found):
                scores[i] = score
        return scores

    def quality(self, prompt: Prompt, text: str) -> float:
        return self._task(prompt).quality(prompt, text)  # the trace only, as each task reads it

    def answer(self, prompt: Prompt, text: str) -> Any:
        """The answer a completion gives, read as the prompt's task reads it (None when it gives none)."""
        return self._task(prompt).extract(text)


_ROLES = {"aime": "math", "gpqa": "science", "code": "code"}
"""Component task → the StemConfig field that configures its training prompts."""

TASKS.register("stem", StemConfig, StemTask)
