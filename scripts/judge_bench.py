"""Judge throughput benchmark: 2,048 comparisons at concurrency 64 against a local OpenAI-compatible server
with a fixed 50 ms latency (run in its own process, so client CPU is measured alone).

    .venv/bin/python scripts/judge_bench.py [--n 2048] [--concurrency 64] [--latency 0.05]

Reports wall time / (⌈n/concurrency⌉ × latency) (target ≤ 1.15) and client CPU time per call.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import NumberTask  # noqa: E402
from tsrl.judging import OpenAIJudgeConfig, build_judge  # noqa: E402
from tsrl.types import PairRequest, Prompt  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2048)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    port_file = Path(tempfile.mkdtemp()) / "url"
    server = subprocess.Popen([sys.executable, str(ROOT / "tests/integration/judge_server.py"), "--port-file",
                               str(port_file), "--latency", str(args.latency)], env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        while not port_file.is_file() or not port_file.read_text():
            time.sleep(0.05)
        cfg = OpenAIJudgeConfig(base_urls=[port_file.read_text()], api_key_env="", order="fixed",
                                concurrency=args.concurrency)
        judge = build_judge(cfg, NumberTask())
        prompt = Prompt("bench", "Say something.")
        judge.compare([PairRequest(prompt, "warm up", "x")] * 4)  # connections and imports
        requests = [PairRequest(prompt, f"answer {i} " * (i % 4 + 1), f"reply {i} " * (i % 3 + 1)) for i in range(args.n)]
        cpu0, wall0 = time.process_time(), time.perf_counter()
        verdicts = judge.compare(requests)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    finally:
        server.terminate()
        server.wait()
    bound = math.ceil(args.n / args.concurrency) * args.latency
    print(f"{args.n} comparisons, concurrency {args.concurrency}, {args.latency * 1000:.0f} ms server latency")
    print(f"wall {wall:.3f} s; bound {bound:.3f} s; ratio {wall / bound:.3f} (target <= 1.15)")
    print(f"client CPU {cpu:.3f} s = {cpu / args.n * 1000:.3f} ms per call; "
          f"verdicts {sum(v.p_first is not None for v in verdicts)}/{args.n}")


if __name__ == "__main__":
    main()
