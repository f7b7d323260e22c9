"""Every benchmark side by side in one run, as one markdown table of ratios (`make bench`).

    .venv/bin/python benchmarks/bench.py [--quick] [--out runs/bench]
        [--only trainer judge bt topology judge_cost pipeline judge_path]

Runs each benchmark script in its own process (this interpreter), in the order below. Each script writes its
JSON results under --out/NAME/, with its output in stdout.txt and stderr.txt beside them. This script then reads
those files and rewrites --out/bench.md and --out/bench.json after every benchmark, so a later failure loses
nothing already measured. A benchmark that fails shows as failed, with the last line of its stderr, and the
others still run. Columns: benchmark | measured | peer / bound | ratio | target | command to reproduce; a
row's note (what its numbers do and do not show) goes under the table.

- trainer: benchmarks/trainer_bench.py, tsrl's RL step against TRL's GRPOTrainer at equal work, per model size.
  Rows: wall and CPU s/step (target ≤ 0.8× TRL; the ratio is the script's median of paired steps), peak RSS,
  and tsrl's overhead over its own lower bound: step time / (generate + update), from tsrl's time/generate_s
  and time/update_s (the update holds advantages, batching, forward/backward and the optimizer step), median
  over steady steps. What the ratio counts above 1 is scoring, weight sync and the step's bookkeeping.
- judge: benchmarks/judge_bench.py, wall time of n comparisons against the local fake server's latency bound
  ⌈n/concurrency⌉ × latency, per scenario and transport. Target ≤ 1.15× for fault-free aiohttp (docs/judges.md). Then
  the direct answer form against the reasoning form (judge.form), both constrained by the same server: judge
  calls/s, tokens per verdict (prompt + completion, and completion alone) and client CPU per call, as direct /
  reasoning. The server's answers take a fixed latency plus a modelled decode time per completion token; the
  row's note says what that means for the ratios.
- bt: benchmarks/bt_bench.py, batched Bradley–Terry against the per-group scipy loop: speed-up. Target: batched
  ≤ 0.5 s.
- topology: benchmarks/topology_fidelity.py, Kendall τ with the latent order per judge match (per sample), one
  row per topology, at the largest N and the middle τ that were run (N = 16, τ = 1 by default).
- judge_cost: benchmarks/judge_cost.py, per reward regime, judge calls, tokens and dollars per group (tokens from the
  loopback judge server) against the pairwise ordering accuracy of its rewards with the simulated judge: one row per
  regime, accuracy under the first profile (ideal) per 1000 judge tokens per group.
- pipeline: benchmarks/pipeline_bench.py, trainer.pipeline=stream and overlap against sync in one run per policy
  size and judge latency (loopback judge): the overlapped step over its bound max(generate + update, score),
  target ≤ 1.1×, and the speed-up over sync, target ≥ 1.3× where score and generate + update are within 25 %;
  the streamed step's speed-up over sync generating the same 2 prompts per call (no target: it stays
  on-policy, so it can hide at most the judging of all but the last arrival).
- judge_path: benchmarks/judge_path_bench.py, tsrl's pipelines (sync, stream, overlap) against TRL's GRPOTrainer
  (an async reward function) with the same remote judge answering after L seconds, in one run: each pipeline's
  seconds per step over TRL's (paired steps). Target: stream ≤ 0.6× TRL at L = 1 s on the 26.7M policy, overlap
  below it.

Run time, on the idle 2-core machine: ≈ 12 min without the pipeline benchmark (trainer ≈ 6, judge ≈ 2.5, judge_cost
≈ 2.5, topology 16 s, bt a few seconds); the pipeline benchmark adds about 15 min (mostly the 26.7M policy), the
judge_path benchmark about 15 min more (25 min under a load average of 4–6; --quick: 2–4 min).
`--quick` gives each script its smallest sensible sizes. It is a smoke run of the whole chain; its numbers
mean little. Not run here: benchmarks/generation_bench.py (hf against vLLM generation; it needs vLLM, so run it with
.venv-vllm/bin/python), trainer_bench.py's vLLM rows (`.venv-vllm/bin/python benchmarks/trainer_bench.py --generator
vllm`: this interpreter has no vLLM, and six engine starts per size add tens of minutes) and
benchmarks/scale_memory.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TRAINER_TARGET = 0.8  # tsrl ≤ 0.8× TRL's seconds per step (trainer_bench.py)
PIPELINE_BOUND, PIPELINE_SPEEDUP = 1.1, 1.3  # pipeline_bench.py's targets
JUDGE_PATH_TARGET = 0.6  # judge_path_bench.py: tsrl stream ≤ 0.6× TRL at L = 1 s on the 26.7M policy
JUDGE_TARGET = 1.15  # fault-free aiohttp ≤ 1.15× the latency bound (docs/judges.md, "Throughput, and under faults")
FORM_METRICS = (  # judge_bench.py's form rows: (what, key, format), each as direct / reasoning
    ("judge calls/s", "calls_per_s", "{:.0f}/s"),
    ("tokens/verdict (prompt + completion)", "tokens", "{:.1f}"),
    ("completion tokens/verdict", "completion_tokens", "{:.1f}"),
    ("client CPU/call", "cpu_ms", "{:.3f} ms"),
)


@dataclass
class Row:
    """One line of the table."""

    benchmark: str
    measured: str
    peer: str = "—"
    """The peer or bound the measurement is compared with."""
    ratio: float | None = None
    ratio_label: str = ""
    """What the ratio is, after the number: "× TRL", "× faster", …"""
    target: str = "—"
    met: bool | None = None
    """Whether the target is met; None when there is none."""
    command: str = ""
    note: str = ""
    """What the numbers do and do not show, printed under the table."""


# ----- each script's JSON → rows (pure) -----------------------------------------------------------------------------


def trainer_rows(results: dict[str, Any], command: str) -> list[Row]:
    """Per size: wall and CPU s/step against TRL, peak RSS against TRL, and tsrl's overhead over its lower bound."""
    rows, target = [], f"≤ {TRAINER_TARGET}× TRL"
    for size, res in results["sizes"].items():
        tsrl, trl, name = res["tsrl"], res["trl"], f"trainer {size} ({res['params'] / 1e6:.1f}M)"
        for key, clock in (("step_s", "wall"), ("cpu_s", "cpu")):
            ratio = res[f"ratio_{clock}"]
            rows.append(
                Row(
                    f"{name}: {clock} s/step",
                    f"tsrl {tsrl[key]:.2f} s",
                    f"TRL {trl[key]:.2f} s",
                    ratio,
                    "× TRL (paired steps)",
                    target,
                    ratio <= TRAINER_TARGET,
                    command,
                )
            )
        rows.append(
            Row(
                f"{name}: peak RSS",
                f"tsrl {tsrl['peak_rss_mb']:.0f} MB",
                f"TRL {trl['peak_rss_mb']:.0f} MB",
                tsrl["peak_rss_mb"] / trl["peak_rss_mb"],
                "× TRL",
                command=command,
            )
        )
        steady = [s for rep in res["repeats"] for s in rep["tsrl"]["steps"][results["warmup"] :]]
        bounds = [s["metrics"]["time/generate_s"] + s["metrics"]["time/update_s"] for s in steady]
        rows.append(
            Row(
                f"{name}: tsrl overhead",
                f"step {statistics.median(s['step_s'] for s in steady):.2f} s",
                f"generate + update {statistics.median(bounds):.2f} s",
                statistics.median(s["step_s"] / b for s, b in zip(steady, bounds)),
                "× bound (per step)",
                command=command,
            )
        )
    return rows


def judge_rows(results: dict[str, Any], command: str) -> list[Row]:
    """Per scenario, transport and hedging: median wall time over the latency bound."""
    rows, bound = [], results["bound_s"]
    for r in results["rows"]:
        ratio = r["wall"] / bound
        targeted = r["scenario"] == "fault-free" and r["transport"] == "aiohttp"
        rows.append(
            Row(
                f"judge {r['scenario']}, {r['transport']}, hedge {r['hedge']}",
                f"{r['wall']:.3f} s, {r['verdicts']:.0f}/{results['n']} verdicts",
                f"bound ⌈{results['n']}/{results['concurrency']}⌉ × {results['latency_s'] * 1e3:.0f} ms "
                f"= {bound:.3f} s",
                ratio,
                "× bound",
                f"≤ {JUDGE_TARGET}× bound" if targeted else "—",
                ratio <= JUDGE_TARGET if targeted else None,
                command,
            )
        )
    return rows + judge_form_rows(results, command)


def judge_form_rows(results: dict[str, Any], command: str) -> list[Row]:
    """The direct form against the reasoning form on the same server, per FORM_METRICS, as direct / reasoning;
    none when the run compared no forms."""
    forms = results.get("forms") or {}
    by_form = {r["form"]: r for r in forms.get("rows", [])}
    if not {"direct", "reasoning"} <= by_form.keys():
        return []
    direct, reasoning = by_form["direct"], by_form["reasoning"]
    rows = [
        Row(
            f"judge form direct vs reasoning: {what}",
            f"direct ({direct['asked_as']}) {fmt.format(direct[key])}",
            f"reasoning ({reasoning['asked_as']}) {fmt.format(reasoning[key])}",
            direct[key] / reasoning[key],
            "× reasoning",
            command=command,
        )
        for what, key, fmt in FORM_METRICS
    ]
    rows[0].note = (
        f"{results['n']} comparisons, fault-free, concurrency {results['concurrency']}, against the loopback server "
        f"({forms['dialect']}, so judge.constrain=auto constrains both forms), which answers after "
        f"{results['latency_s'] * 1e3:.0f} ms + {forms['latency_per_token_s'] * 1e3:g} ms per completion token "
        "(a model's decode time). With a fixed latency alone, calls/s is bounded by concurrency / latency for both "
        "forms alike, so the calls/s ratio is the modelled decode time saved. Tokens/verdict is what a real server "
        "spends; CPU/call what the client spends, though part of it grows with the wall time (the client's loop "
        "waits longer for reasoning answers): for the cost per answer alone, compare CPU/call with judge_bench.py "
        "--latency-per-token 0. The loopback's reasoning is one short line "
        f"({reasoning['completion_tokens']:.0f} tokens); a real judge's usually runs longer (up to judge.max_tokens), "
        "so the real gap in completion tokens and time is larger."
    )
    return rows


def bt_rows(results: dict[str, Any], command: str) -> list[Row]:
    """Batched Bradley–Terry (best run) against the scipy loop: speed-up; the target is on the batched time."""
    best = results["batched_s_best"]
    return [
        Row(
            f"bt: {results['groups']} groups of N = {results['n']}",
            f"batched {best:.3f} s",
            f"scipy loop {results['scipy_loop_s']:.3f} s",
            results["scipy_loop_s"] / best,
            "× faster",
            f"batched ≤ {results['target_s']} s",
            best <= results["target_s"],
            command,
        )
    ]


def topology_rows(results: dict[str, Any], command: str) -> list[Row]:
    """One row per topology, at the largest N and the middle τ: Kendall τ per judge match per sample."""
    cells = results["rows"]
    n = max(c["n"] for c in cells)
    taus = sorted({c["tau"] for c in cells if c["n"] == n})
    tau = taus[len(taus) // 2]
    return [
        Row(
            f"topology {c['topology']} (N = {n}, τ = {tau})",
            f"Kendall τ {c['kendall']:.3f}",
            f"{c['calls_per_sample']:.2f} matches/sample",
            c["kendall"] / c["calls_per_sample"],
            "Kendall τ per match",
            command=command,
        )
        for c in cells
        if c["n"] == n and c["tau"] == tau
    ]


def judge_cost_rows(results: dict[str, Any], command: str) -> list[Row]:
    """One row per regime: accuracy under the run's first profile (ideal by default) per 1000 judge tokens per group."""
    rows = []
    for r in results["rows"]:
        profile, accuracy = next(iter(r["accuracy"].items()))
        cost = f"{r['calls']:g} calls, {r['tokens']:.0f} tokens, ${r['usd_per_1k_groups']:.2f} per 1000 groups"
        ratio = accuracy["mean"] / (r["tokens"] / 1000)
        rows.append(
            Row(
                f"judge cost {r['regime']} ({profile} judge)",
                f"accuracy {accuracy['mean']:.3f}",
                cost,
                ratio,
                "accuracy per 1k tokens/group",
                command=command,
            )
        )
    rows[0].note = (
        f"{results['groups']} humor groups of {results['group_size']}, {results['seeds']} seed(s); every profile, the "
        "token split and the Pareto plot are in table.md and frontier.png beside results.json."
    )
    return rows


def pipeline_rows(results: dict[str, Any], command: str) -> list[Row]:
    """Per (policy, judge latency): the overlapped step against its bound max(generate + update, score), and the
    speed-up over sync; the speed-up's target applies where score and generate + update are within 25 %."""
    rows = []
    for r in results["rows"]:
        name = f"pipeline overlap, {r['size']}, judge latency {r['latency_s']:g} s"
        rows.append(
            Row(
                f"{name}: step / bound",
                f"{r['overlap_step_s']:.2f} s",
                f"max(gen + update {r['generate_update_s']:.2f}, score {r['score_s']:.2f}) s",
                r["overlap_over_bound"],
                "× bound",
                f"≤ {PIPELINE_BOUND}×",
                r["overlap_over_bound"] <= PIPELINE_BOUND,
                command,
            )
        )
        balanced = abs(r["score_s"] - r["generate_update_s"]) <= 0.25 * max(r["score_s"], r["generate_update_s"])
        rows.append(
            Row(
                f"{name}: speed-up",
                f"sync {r['sync_step_s']:.2f} s/step",
                f"overlap {r['overlap_step_s']:.2f}",
                r["speedup"],
                "× faster",
                f"≥ {PIPELINE_SPEEDUP}× (score ≈ gen + update)" if balanced else "—",
                (r["speedup"] >= PIPELINE_SPEEDUP) if balanced else None,
                command,
            )
        )
        rows.append(
            Row(
                f"pipeline stream, {r['size']}, judge latency {r['latency_s']:g} s: speed-up",
                f"sync-2 {r['sync2_step_s']:.2f} s/step",
                f"stream {r['stream_step_s']:.2f} (waits {r['stream_score_wait_s']:.2f} for the judge)",
                r["stream_speedup"],
                "× faster",
                command=command,
            )
        )
    return rows


def judge_path_rows(results: dict[str, Any], command: str) -> list[Row]:
    """Per judge latency and tsrl pipeline: seconds per step against TRL's (median of paired steps); the target
    applies to stream (≤ 0.6×, overlap below it) at L = 1 s on the 26.7M policy."""
    rows = []
    for latency, phase in sorted(results["latencies"].items(), key=lambda item: float(item[0])):
        sides, targeted = phase["summary"], results["size"] == "27m" and float(latency) == 1.0
        for pipeline, goal in (("sync", None), ("stream", JUDGE_PATH_TARGET), ("overlap", sides["stream"]["ratio"])):
            s, aimed = sides[pipeline], targeted and goal is not None
            rows.append(
                Row(
                    f"judge path, {results['size']}, judge latency {float(latency):g} s: tsrl {pipeline}",
                    f"{s['step_s']:.2f} s/step (judge wait {s['wait_s']:.2f})",
                    f"TRL {sides['trl']['step_s']:.2f} s/step (judge wait {sides['trl']['wait_s']:.2f})",
                    s["ratio"],
                    "× TRL (paired steps)",
                    (f"≤ {JUDGE_PATH_TARGET}× TRL" if pipeline == "stream" else "< stream") if aimed else "—",
                    s["ratio"] <= goal if aimed else None,
                    command,
                )
            )
    rows[0].note = (
        "TRL's GRPOTrainer with an async reward function against the same loopback judge (256 verdicts a step at "
        "concurrency 64, so ≈ 4L of judging); overlap's step is charged the judging a run alone would wait for "
        "(benchmarks/judge_path_bench.py's docstring)."
    )
    return rows


def failed_row(name: str, returncode: int, stderr: str, command: str) -> Row:
    """A benchmark that failed: its exit status and the last line of its stderr."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    last = lines[-1] if lines else "no output on stderr"
    return Row(name, f"**failed** (exit {returncode}): {last}", command=command)


# ----- the table (pure) ---------------------------------------------------------------------------------------------


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def target_cell(row: Row) -> str:
    if row.met is None:
        return row.target
    return f"{row.target}: {'met' if row.met else '**not met**'}"


def table(rows: list[Row]) -> str:
    """The markdown table of every row."""
    lines = ["| benchmark | measured | peer / bound | ratio | target | command |", "|---|---|---|---|---|---|"]
    for r in rows:
        ratio = "—" if r.ratio is None else f"**{r.ratio:.3g}** {r.ratio_label}"
        lines.append(
            f"| {cell(r.benchmark)} | {cell(r.measured)} | {cell(r.peer)} | {cell(ratio)} | "
            f"{cell(target_cell(r))} | `{cell(r.command)}` |"
        )
    return "\n".join(lines)


def report(rows: list[Row], quick: bool) -> str:
    """bench.md: a heading, the table, the rows' notes, and what was not run."""
    note = (
        "\n_Quick mode: every script at its smallest sizes, a smoke run; the numbers mean little._\n" if quick else ""
    )
    notes = "".join(f"- {r.benchmark}: {r.note}\n" for r in rows if r.note)
    return (
        f"# Benchmarks\n{note}\n{table(rows)}\n\n"
        + (f"Notes:\n\n{notes}\n" if notes else "")
        + "Not run here: `benchmarks/generation_bench.py` (hf against vLLM; run it with `.venv-vllm/bin/python`), "
        "the trainer's vLLM rows (`.venv-vllm/bin/python benchmarks/trainer_bench.py --generator vllm`) "
        "and `benchmarks/scale_memory.py`.\n"
    )


# ----- running the scripts ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Benchmark:
    """One benchmark script, its quick arguments and how its JSON becomes rows."""

    script: str
    quick: tuple[str, ...]
    """Its smallest sensible arguments, for --quick."""
    rows: Callable[[dict[str, Any], str], list[Row]]
    out_is_folder: bool = False
    """Its --out is a folder it writes results.json into (else the JSON file itself)."""


BENCHMARKS = {
    "trainer": Benchmark("trainer_bench.py", ("--sizes", "tiny", "--repeats", "1", "--steps", "2"), trainer_rows),
    "judge": Benchmark("judge_bench.py", ("--n", "256", "--repeats", "1", "--scenarios", "fault-free"), judge_rows),
    "bt": Benchmark("bt_bench.py", ("--groups", "64", "--repeats", "1"), bt_rows),
    "topology": Benchmark(
        "topology_fidelity.py", ("--groups", "20", "--sizes", "8", "--taus", "1.0"), topology_rows, out_is_folder=True
    ),
    "judge_cost": Benchmark("judge_cost.py", ("--quick",), judge_cost_rows, out_is_folder=True),
    "pipeline": Benchmark(
        "pipeline_bench.py",
        ("--sizes", "tiny", "--latencies", "0.3", "--blocks", "1", "--block-steps", "3"),
        pipeline_rows,
        out_is_folder=True,
    ),
    "judge_path": Benchmark("judge_path_bench.py", ("--quick",), judge_path_rows, out_is_folder=True),
}


def shown(path: Path | str) -> str:
    """A path as the command column shows it: relative to the repository when inside it."""
    return os.path.relpath(path, ROOT) if Path(os.path.abspath(path)).is_relative_to(ROOT) else str(path)


def run_benchmark(name: str, folder: Path, quick: bool) -> list[Row]:
    """Run one script into `folder`; its rows, or one failed row."""
    bench, results = BENCHMARKS[name], folder / "results.json"
    folder.mkdir(parents=True, exist_ok=True)
    results.unlink(missing_ok=True)  # a file left by an earlier run must not pass for this one's
    args = [
        f"benchmarks/{bench.script}",
        *(bench.quick if quick else ()),
        "--out",
        shown(folder if bench.out_is_folder else results),
    ]
    command = shlex.join([shown(sys.executable), *args])
    print(f"bench: {name}: {command}", flush=True)
    t0 = time.perf_counter()
    with open(folder / "stdout.txt", "w") as stdout, open(folder / "stderr.txt", "w") as stderr:
        done = subprocess.run([sys.executable, *args], check=False, cwd=ROOT, stdout=stdout, stderr=stderr)
    print(f"bench: {name}: exit {done.returncode} after {time.perf_counter() - t0:.0f} s", flush=True)
    if done.returncode != 0 or not results.is_file():
        return [failed_row(name, done.returncode, (folder / "stderr.txt").read_text(), command)]
    return bench.rows(json.loads(results.read_text()), command)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smallest sizes of every script (a smoke run)")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=list(BENCHMARKS),
        default=list(BENCHMARKS),
        metavar="NAME",
        help=f"run only these, of {', '.join(BENCHMARKS)}",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench", help="folder of bench.md and bench.json")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    for name in (n for n in BENCHMARKS if n in args.only):
        rows += run_benchmark(name, out / name, args.quick)
        (out / "bench.md").write_text(report(rows, args.quick))
        (out / "bench.json").write_text(
            json.dumps({"quick": args.quick, "rows": [asdict(r) for r in rows]}, indent=1, ensure_ascii=False)
        )
    print(report(rows, args.quick))
    print(f"written to {shown(out / 'bench.md')} and bench.json")


if __name__ == "__main__":
    main()
