"""Judge throughput benchmark: 2,048 comparisons at concurrency 64 against a local OpenAI-compatible server
with a fixed 50 ms latency (run in its own process, so client CPU is measured alone), once per transport:
the lean aiohttp client (default) and the openai SDK's AsyncOpenAI, side by side on the same server.

    .venv/bin/python scripts/judge_bench.py [--n 2048] [--concurrency 64] [--latency 0.05] [--repeats 3]

Reports, per transport, the median over repeats of wall time / (⌈n/concurrency⌉ × latency) (target ≤ 1.15),
client CPU per call (both of the client's threads), server CPU per call and the per-call latency percentiles.
"""

from __future__ import annotations

import argparse
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
from tsrl.judging import OpenAIJudgeConfig, build_judge, close_judge  # noqa: E402
from tsrl.judging.transport import TRANSPORTS  # noqa: E402
from tsrl.types import PairRequest, Prompt  # noqa: E402


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of another process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(url: str, transport: str, args: argparse.Namespace, server_pid: int) -> dict[str, float]:
    cfg = OpenAIJudgeConfig(base_urls=[url], api_key_env="", order="fixed", concurrency=args.concurrency,
                            transport=transport)
    judge = build_judge(cfg, NumberTask())
    try:
        prompt = Prompt("bench", "Say something.")
        judge.compare([PairRequest(prompt, "warm up", "x")] * 4)  # imports and a first connection
        judge.drain_metrics()
        requests = [PairRequest(prompt, f"answer {i} " * (i % 4 + 1), f"reply {i} " * (i % 3 + 1))
                    for i in range(args.n)]
        server_cpu0 = process_cpu(server_pid)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        verdicts = judge.compare(requests)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        server_cpu = process_cpu(server_pid) - server_cpu0
        metrics = judge.drain_metrics()
    finally:
        close_judge(judge)
    missing = sum(v.p_first is None for v in verdicts)
    if missing:
        raise SystemExit(f"{missing} of {args.n} comparisons got no verdict; the benchmark is void.")
    return {"wall": wall, "cpu_ms": cpu / args.n * 1e3, "server_cpu_ms": server_cpu / args.n * 1e3,
            "p50_ms": metrics["latency_p50_s"] * 1e3, "p95_ms": metrics["latency_p95_s"] * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2048)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--transport", nargs="+", default=list(TRANSPORTS), choices=TRANSPORTS)
    args = parser.parse_args()
    port_file = Path(tempfile.mkdtemp()) / "url"
    server = subprocess.Popen([sys.executable, str(ROOT / "tests/integration/judge_server.py"), "--port-file",
                               str(port_file), "--latency", str(args.latency)],
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    results: dict[str, list[dict[str, float]]] = {}
    try:
        while not port_file.is_file() or not port_file.read_text():
            time.sleep(0.05)
        for _ in range(args.repeats):  # transports interleaved, so drift in the machine hits both alike
            for transport in args.transport:
                results.setdefault(transport, []).append(run_once(port_file.read_text(), transport, args, server.pid))
    finally:
        server.terminate()
        server.wait()
    bound = math.ceil(args.n / args.concurrency) * args.latency
    print(f"{args.n} comparisons, concurrency {args.concurrency}, {args.latency * 1000:.0f} ms server latency, "
          f"bound {bound:.3f} s; medians of {args.repeats} runs (target ratio <= 1.15)")
    print(f"{'transport':<10} {'wall s':>7} {'ratio':>6} {'client CPU ms/call':>19} {'server CPU ms/call':>19} "
          f"{'latency p50/p95 ms':>19}")
    for transport, runs in results.items():
        m = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        print(f"{transport:<10} {m['wall']:>7.3f} {m['wall'] / bound:>6.3f} {m['cpu_ms']:>19.3f} "
              f"{m['server_cpu_ms']:>19.3f} {m['p50_ms']:>10.1f}/{m['p95_ms']:.1f}")


if __name__ == "__main__":
    main()
