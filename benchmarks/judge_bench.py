"""Judge throughput benchmark: 2,048 comparisons at concurrency 64 against a local OpenAI-compatible server with
a fixed 50 ms latency (run in its own process, so client CPU is measured alone), per fault scenario and
transport, side by side:

- fault-free: every request answered after 50 ms;
- mixed-20%: 20 % of requests fault, uniformly over 429 (Retry-After 50 ms), 500, a dropped connection, a
  malformed body, an empty answer, an answer without a verdict line, an echo of the prompt and a hang of 8 s
  before answering (1 request in 40);
- blackhole-1%: 1 % of requests are taken and never answered (the connection stays open).

Then the two answer forms (judge.form) side by side, fault-free, aiohttp, against one server that obeys vLLM's
`structured_outputs`, so that judge.constrain=auto constrains both: reasoning → regex (one line of reasoning, then
`VERDICT: X`), direct → choice (`X` alone). Its answers take --latency plus --latency-per-token per completion
token (a model's decode time; without it calls/s is bounded by concurrency / latency for both forms alike).

    .venv/bin/python benchmarks/judge_bench.py [--n 2048] [--concurrency 64] [--latency 0.05] [--repeats 3]
        [--scenarios fault-free mixed-20% blackhole-1%] [--transport aiohttp openai] [--hedge on off]
        [--forms reasoning direct] [--latency-per-token 0.01] [--out results.json]

Every run uses the judge's default retry settings (timeout 60 s). Reports, per row, the median over repeats
of the wall time, its ratio to the latency bound ⌈n/concurrency⌉ × latency and to the fault-free run of the
same transport (and hedging), the verdicts that arrived, hedges and hedges that answered first, re-asks,
retries, client CPU per call (both of the client's threads), server CPU per call and the per-call latency
percentiles; per form also judge calls/s, tokens per verdict (prompt + completion, and completion alone) and the
ratios direct / reasoning. With --out, also writes the bounds and those medians per row as JSON (benchmarks/bench.py
reads them).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tsrl.judging import build_judge, close_judge  # noqa: E402
from tsrl.remote.constrain import FORMS  # noqa: E402
from tsrl.remote.hedging import HedgeConfig  # noqa: E402
from tsrl.remote.openai_config import OpenAIJudgeConfig  # noqa: E402
from tsrl.remote.transport import TRANSPORTS  # noqa: E402
from tsrl.testing.fakes import NumberTask  # noqa: E402
from tsrl.types import PairRequest, Prompt  # noqa: E402

SCENARIOS = {  # tsrl.testing.judge_server arguments
    "fault-free": [],
    "mixed-20%": ["--fault-rate", "0.2", "--hang", "8"],
    "blackhole-1%": ["--fault-rate", "0.01", "--fault-kinds", "blackhole"],
}
FORMS_DIALECT = "structured_outputs"  # the forms' server: constrain=auto asks reasoning → regex, direct → choice
FORM_KEYS = {
    "calls_per_s": "calls/s",
    "tokens": "tokens/verdict",
    "completion_tokens": "completion",
    "cpu_ms": "CPU ms/call",
    "wall": "wall s",
}  # the ratios direct / reasoning


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of another process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def judge_config(
    url: str, args: argparse.Namespace, transport: str = "aiohttp", hedge: bool = True, form: str = "reasoning"
) -> OpenAIJudgeConfig:
    """The judge under test; at $1 per completion token (price_out_per_m) its cost_usd counts completion tokens."""
    return OpenAIJudgeConfig(
        base_urls=[url],
        api_key_env="",
        order="fixed",
        concurrency=args.concurrency,
        transport=transport,
        hedge=HedgeConfig(enabled=hedge),
        form=form,
        price_out_per_m=1e6,
    )


def run_once(process: subprocess.Popen, cfg: OpenAIJudgeConfig, n: int) -> dict[str, float]:
    judge = build_judge(cfg, NumberTask())
    try:
        prompt = Prompt("bench", "Say something.")
        judge.compare([PairRequest(prompt, "warm up", "x")] * 4)  # imports and a first connection
        judge.drain_metrics()
        requests = [PairRequest(prompt, f"answer {i} " * (i % 4 + 1), f"reply {i} " * (i % 3 + 1)) for i in range(n)]
        server_cpu0 = process_cpu(process.pid)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        verdicts = judge.compare(requests)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        server_cpu = process_cpu(process.pid) - server_cpu0
        metrics = judge.drain_metrics()
    finally:
        close_judge(judge)
    counts = {key: metrics.get(key, 0.0) for key in ("hedges", "hedge_wins", "reasks", "retries")}
    arrived = sum(v.p_first is not None for v in verdicts)
    per_verdict = 1 / max(1, arrived)
    return {
        "wall": wall,
        "verdicts": arrived,
        **counts,
        "calls_per_s": n / wall,
        "tokens": metrics["tokens"] * per_verdict,
        "completion_tokens": metrics.get("cost_usd", 0.0) * per_verdict,
        "cpu_ms": cpu / n * 1e3,
        "server_cpu_ms": server_cpu / n * 1e3,
        "p50_ms": metrics["latency_p50_s"] * 1e3,
        "p95_ms": metrics["latency_p95_s"] * 1e3,
    }


def asked_as(url: str, form: str, args: argparse.Namespace) -> str:
    """How the judge asks in `form` at this server, '<form>/<constraint>' (one call, outside the timed runs)."""
    judge = build_judge(judge_config(url, args, form=form), NumberTask())
    try:
        return judge.compare([PairRequest(Prompt("bench", "Say something."), "one", "x")])[0].form.split("+")[0]
    finally:
        close_judge(judge)


def start_server(extra: list[str], args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    port_file = Path(tempfile.mkdtemp()) / "url"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tsrl.testing.judge_server",
            "--port-file",
            str(port_file),
            "--latency",
            str(args.latency),
            *extra,
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    while not port_file.is_file() or not port_file.read_text():
        time.sleep(0.05)
    return server, port_file.read_text()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2048)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scenarios", nargs="*", default=list(SCENARIOS), choices=list(SCENARIOS))
    parser.add_argument("--transport", nargs="+", default=list(TRANSPORTS), choices=TRANSPORTS)
    parser.add_argument("--hedge", nargs="+", default=["on"], choices=["on", "off"])
    parser.add_argument(
        "--forms",
        nargs="*",
        default=list(FORMS),
        choices=FORMS,
        help="answer forms to compare on a structured-outputs server (none: skip the comparison)",
    )
    parser.add_argument(
        "--latency-per-token",
        type=float,
        default=0.01,
        help="the forms' server: seconds added to --latency per completion token (decode time)",
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the medians per row to this JSON file")
    args = parser.parse_args()
    rows = [(s, t, h) for s in args.scenarios for t in args.transport for h in args.hedge]
    servers = {scenario: start_server(SCENARIOS[scenario], args) for scenario in args.scenarios}
    if args.forms:
        servers["forms"] = start_server(
            ["--dialect", FORMS_DIALECT, "--latency-per-token", str(args.latency_per_token)], args
        )
    results: dict[tuple[str, str, str], list[dict[str, float]]] = {row: [] for row in rows}
    form_results: dict[str, list[dict[str, float]]] = {form: [] for form in args.forms}
    try:
        asked = {form: asked_as(servers["forms"][1], form, args) for form in args.forms}
        for _ in range(args.repeats):  # rows interleaved, so drift in the machine hits all of them alike
            for scenario, transport, hedge in rows:
                process, url = servers[scenario]
                run = run_once(process, judge_config(url, args, transport, hedge == "on"), args.n)
                results[(scenario, transport, hedge)].append(run)
            for form in args.forms:
                process, url = servers["forms"]
                form_results[form].append(run_once(process, judge_config(url, args, form=form), args.n))
    finally:
        for server, _ in servers.values():
            server.terminate()
            server.wait()
    medians = report(results, args)
    form_medians = report_forms(form_results, asked, args)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(
                {
                    "n": args.n,
                    "concurrency": args.concurrency,
                    "latency_s": args.latency,
                    "repeats": args.repeats,
                    "bound_s": math.ceil(args.n / args.concurrency) * args.latency,
                    "rows": [{"scenario": s, "transport": t, "hedge": h, **m} for (s, t, h), m in medians.items()],
                    "forms": {
                        "dialect": FORMS_DIALECT,
                        "latency_per_token_s": args.latency_per_token,
                        "rows": [{"form": form, **m} for form, m in form_medians.items()],
                    },
                },
                indent=1,
            )
        )


def median_runs(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def report(
    results: dict[tuple[str, str, str], list[dict[str, float]]], args: argparse.Namespace
) -> dict[tuple[str, str, str], dict[str, float]]:
    """Prints the table of medians over repeats, per row; returns those medians."""
    if not results:
        return {}
    bound = math.ceil(args.n / args.concurrency) * args.latency
    medians = {row: median_runs(runs) for row, runs in results.items()}
    print(
        f"{args.n} comparisons, concurrency {args.concurrency}, {args.latency * 1000:.0f} ms server latency, "
        f"bound {bound:.3f} s; medians of {args.repeats} runs"
    )
    print(
        f"{'scenario':<13} {'transport':<9} {'hedge':<5} {'wall s':>7} {'x bound':>7} {'x fault-free':>12} "
        f"{'verdicts':>9} {'hedges':>6} {'wins':>5} {'reasks':>6} {'retries':>7} {'CPU ms/call':>11} "
        f"{'server CPU':>10} {'p50/p95 ms':>12}"
    )
    for (scenario, transport, hedge), m in medians.items():
        clean = medians.get(("fault-free", transport, hedge)) or medians.get(("fault-free", transport, "on"))
        ratio = f"{m['wall'] / clean['wall']:.2f}" if clean else "-"
        print(
            f"{scenario:<13} {transport:<9} {hedge:<5} {m['wall']:>7.3f} {m['wall'] / bound:>7.2f} {ratio:>12} "
            f"{m['verdicts']:>9.0f} {m['hedges']:>6.0f} {m['hedge_wins']:>5.0f} {m['reasks']:>6.0f} "
            f"{m['retries']:>7.0f} {m['cpu_ms']:>11.3f} {m['server_cpu_ms']:>10.3f} "
            f"{m['p50_ms']:>6.1f}/{m['p95_ms']:.1f}"
        )
    return medians


def report_forms(
    results: dict[str, list[dict[str, float]]], asked: dict[str, str], args: argparse.Namespace
) -> dict[str, dict]:
    """Prints the forms' table of medians over repeats and the ratios direct / reasoning; returns the medians, each
    with how it was asked and its bound ⌈n/concurrency⌉ × (latency + latency_per_token × completion tokens)."""
    if not results:
        return {}
    rounds = math.ceil(args.n / args.concurrency)
    medians = {form: median_runs(runs) for form, runs in results.items()}
    for form, m in medians.items():
        answer_s = args.latency + args.latency_per_token * m["completion_tokens"]
        m.update(asked_as=asked[form], bound_s=rounds * answer_s)
    print(
        f"\nforms: {args.n} comparisons, concurrency {args.concurrency}, {args.latency * 1000:.0f} ms + "
        f"{args.latency_per_token * 1000:g} ms per completion token, {FORMS_DIALECT} server; medians of "
        f"{args.repeats} runs"
    )
    print(
        f"{'form':<9} {'asked as':<16} {'wall s':>7} {'x bound':>7} {'verdicts':>9} {'calls/s':>8} "
        f"{'tokens/verdict':>14} {'completion':>10} {'CPU ms/call':>11} {'server CPU':>10} {'p50/p95 ms':>12}"
    )
    for form, m in medians.items():
        print(
            f"{form:<9} {m['asked_as']:<16} {m['wall']:>7.3f} {m['wall'] / m['bound_s']:>7.2f} "
            f"{m['verdicts']:>9.0f} {m['calls_per_s']:>8.0f} {m['tokens']:>14.1f} {m['completion_tokens']:>10.1f} "
            f"{m['cpu_ms']:>11.3f} {m['server_cpu_ms']:>10.3f} {m['p50_ms']:>6.1f}/{m['p95_ms']:.1f}"
        )
    if {"reasoning", "direct"} <= medians.keys():
        direct, reasoning = medians["direct"], medians["reasoning"]
        print(
            "direct / reasoning: "
            + ", ".join(f"{label} {direct[key] / reasoning[key]:.3g}×" for key, label in FORM_KEYS.items())
        )
    return medians


if __name__ == "__main__":
    main()
