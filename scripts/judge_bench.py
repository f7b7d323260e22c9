"""Judge throughput benchmark: 2,048 comparisons at concurrency 64 against a local OpenAI-compatible server with
a fixed 50 ms latency (run in its own process, so client CPU is measured alone), per fault scenario and
transport, side by side:

- fault-free: every request answered after 50 ms;
- mixed-20%: 20 % of requests fault, uniformly over 429 (Retry-After 50 ms), 500, a dropped connection, a
  malformed body, an empty answer, an answer without a verdict line, an echo of the prompt and a hang of 8 s
  before answering (1 request in 40);
- blackhole-1%: 1 % of requests are taken and never answered (the connection stays open).

    .venv/bin/python scripts/judge_bench.py [--n 2048] [--concurrency 64] [--latency 0.05] [--repeats 3]
        [--scenarios fault-free mixed-20% blackhole-1%] [--transport aiohttp openai] [--hedge on off]
        [--out results.json]

Every run uses the judge's default retry settings (timeout 60 s). Reports, per row, the median over repeats
of the wall time, its ratio to the latency bound ⌈n/concurrency⌉ × latency and to the fault-free run of the
same transport (and hedging), the verdicts that arrived, hedges and hedges that answered first, re-asks,
retries, client CPU per call (both of the client's threads), server CPU per call and the per-call latency
percentiles. With --out, also writes the bound and those medians per row as JSON (scripts/bench.py reads them).
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

from tests.conftest import NumberTask  # noqa: E402
from tsrl.judging import HedgeConfig, OpenAIJudgeConfig, build_judge, close_judge  # noqa: E402
from tsrl.judging.transport import TRANSPORTS  # noqa: E402
from tsrl.types import PairRequest, Prompt  # noqa: E402

SCENARIOS = {  # judge_server.py arguments
    "fault-free": [],
    "mixed-20%": ["--fault-rate", "0.2", "--hang", "8"],
    "blackhole-1%": ["--fault-rate", "0.01", "--fault-kinds", "blackhole"],
}


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of another process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(server: tuple[subprocess.Popen, str], transport: str, hedge: bool,
             args: argparse.Namespace) -> dict[str, float]:
    process, url = server
    cfg = OpenAIJudgeConfig(base_urls=[url], api_key_env="", order="fixed", concurrency=args.concurrency,
                            transport=transport, hedge=HedgeConfig(enabled=hedge))
    judge = build_judge(cfg, NumberTask())
    try:
        prompt = Prompt("bench", "Say something.")
        judge.compare([PairRequest(prompt, "warm up", "x")] * 4)  # imports and a first connection
        judge.drain_metrics()
        requests = [PairRequest(prompt, f"answer {i} " * (i % 4 + 1), f"reply {i} " * (i % 3 + 1))
                    for i in range(args.n)]
        server_cpu0 = process_cpu(process.pid)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        verdicts = judge.compare(requests)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        server_cpu = process_cpu(process.pid) - server_cpu0
        metrics = judge.drain_metrics()
    finally:
        close_judge(judge)
    counts = {key: metrics.get(key, 0.0) for key in ("hedges", "hedge_wins", "reasks", "retries")}
    return {"wall": wall, "verdicts": sum(v.p_first is not None for v in verdicts), **counts,
            "cpu_ms": cpu / args.n * 1e3, "server_cpu_ms": server_cpu / args.n * 1e3,
            "p50_ms": metrics["latency_p50_s"] * 1e3,
            "p95_ms": metrics["latency_p95_s"] * 1e3}


def start_server(scenario: str, args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    port_file = Path(tempfile.mkdtemp()) / "url"
    server = subprocess.Popen([sys.executable, str(ROOT / "tests/integration/judge_server.py"), "--port-file",
                               str(port_file), "--latency", str(args.latency), *SCENARIOS[scenario]],
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    while not port_file.is_file() or not port_file.read_text():
        time.sleep(0.05)
    return server, port_file.read_text()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2048)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    parser.add_argument("--transport", nargs="+", default=list(TRANSPORTS), choices=TRANSPORTS)
    parser.add_argument("--hedge", nargs="+", default=["on"], choices=["on", "off"])
    parser.add_argument("--out", type=Path, default=None, help="also write the medians per row to this JSON file")
    args = parser.parse_args()
    rows = [(s, t, h) for s in args.scenarios for t in args.transport for h in args.hedge]
    servers = {scenario: start_server(scenario, args) for scenario in args.scenarios}
    results: dict[tuple[str, str, str], list[dict[str, float]]] = {row: [] for row in rows}
    try:
        for _ in range(args.repeats):  # rows interleaved, so drift in the machine hits all of them alike
            for scenario, transport, hedge in rows:
                run = run_once(servers[scenario], transport, hedge == "on", args)
                results[(scenario, transport, hedge)].append(run)
    finally:
        for server, _ in servers.values():
            server.terminate()
            server.wait()
    medians = report(results, args)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({
            "n": args.n, "concurrency": args.concurrency, "latency_s": args.latency, "repeats": args.repeats,
            "bound_s": math.ceil(args.n / args.concurrency) * args.latency,
            "rows": [{"scenario": s, "transport": t, "hedge": h, **m} for (s, t, h), m in medians.items()]}, indent=1))


def report(results: dict[tuple[str, str, str], list[dict[str, float]]],
           args: argparse.Namespace) -> dict[tuple[str, str, str], dict[str, float]]:
    """Prints the table of medians over repeats, per row; returns those medians."""
    bound = math.ceil(args.n / args.concurrency) * args.latency
    medians = {row: {key: statistics.median(r[key] for r in runs) for key in runs[0]} for row, runs in results.items()}
    print(f"{args.n} comparisons, concurrency {args.concurrency}, {args.latency * 1000:.0f} ms server latency, "
          f"bound {bound:.3f} s; medians of {args.repeats} runs")
    print(f"{'scenario':<13} {'transport':<9} {'hedge':<5} {'wall s':>7} {'x bound':>7} {'x fault-free':>12} "
          f"{'verdicts':>9} {'hedges':>6} {'wins':>5} {'reasks':>6} {'retries':>7} {'CPU ms/call':>11} "
          f"{'server CPU':>10} {'p50/p95 ms':>12}")
    for (scenario, transport, hedge), m in medians.items():
        clean = medians.get(("fault-free", transport, hedge)) or medians.get(("fault-free", transport, "on"))
        ratio = f"{m['wall'] / clean['wall']:.2f}" if clean else "-"
        print(f"{scenario:<13} {transport:<9} {hedge:<5} {m['wall']:>7.3f} {m['wall'] / bound:>7.2f} {ratio:>12} "
              f"{m['verdicts']:>9.0f} {m['hedges']:>6.0f} {m['hedge_wins']:>5.0f} {m['reasks']:>6.0f} "
              f"{m['retries']:>7.0f} {m['cpu_ms']:>11.3f} {m['server_cpu_ms']:>10.3f} "
              f"{m['p50_ms']:>6.1f}/{m['p95_ms']:.1f}")
    return medians


if __name__ == "__main__":
    main()
