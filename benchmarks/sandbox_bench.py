"""Benchmark: what bubblewrap isolation (task.sandbox=bwrap, tsrl/tasks/isolation.py) adds to each program the code
task runs, against the audit hook alone (task.sandbox=hook).

    python benchmarks/sandbox_bench.py [--programs 200] [--workers 1] [--out FILE.json]

Each program is a whole sandboxed run as the verifier makes it (tsrl.tasks.sandbox.run_test: temporary folder,
process start, limits, audit hook, the program reading two integers and printing their sum, kill of the process
group, clean-up), timed from the caller's side. The two sandboxes take turns program by program, the order swapped
every round, so both see the same load of the machine; --workers runs that many rounds at once (threads, as
task.workers does). Reported per sandbox: median, mean and 90th percentile milliseconds per program; then
bwrap / hook of the medians and of the means, and the milliseconds bwrap adds per program. Every run must pass,
or the benchmark stops.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tsrl.tasks import isolation
from tsrl.tasks.sandbox import Limits, run_test

PROGRAM = "a, b = map(int, input().split())\nprint(a + b)\n"
MODES = ("hook", "bwrap")


def one_round(index: int) -> dict[str, float]:
    """Seconds of one program under each sandbox, in an order that alternates with `index`."""
    seconds = {}
    for mode in MODES if index % 2 == 0 else MODES[::-1]:
        start = time.perf_counter()
        result = run_test(PROGRAM, f"{index} 1\n", f"{index + 1}\n", Limits(isolation=mode))
        seconds[mode] = time.perf_counter() - start
        if result.status != "passed":
            sys.exit(f"sandbox_bench: a run under {mode} ended {result.status}: {result.stderr_tail[-500:]}")
    return seconds


def summary(times: list[float]) -> dict[str, float]:
    ms = sorted(t * 1000 for t in times)
    return {"median_ms": statistics.median(ms), "mean_ms": statistics.fmean(ms), "p90_ms": ms[int(0.9 * (len(ms) - 1))]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=200, help="programs per sandbox")
    parser.add_argument("--workers", type=int, default=1, help="rounds at once (threads)")
    parser.add_argument("--out", type=Path, help="write the numbers as JSON here")
    args = parser.parse_args()
    problem = isolation.bwrap_problem()
    if problem:
        sys.exit(f"sandbox_bench: bubblewrap isolation is unavailable here ({problem})")
    one_round(0)  # warm the page cache and the probe before timing
    with ThreadPoolExecutor(args.workers) as pool:
        rounds = list(pool.map(one_round, range(1, args.programs + 1)))
    stats = {mode: summary([r[mode] for r in rounds]) for mode in MODES}
    hook, bwrap = stats["hook"], stats["bwrap"]
    report = {
        **stats,
        "ratio_median": bwrap["median_ms"] / hook["median_ms"],
        "ratio_mean": bwrap["mean_ms"] / hook["mean_ms"],
        "added_ms_median": bwrap["median_ms"] - hook["median_ms"],
        "programs": args.programs,
        "workers": args.workers,
    }
    for mode, numbers in stats.items():
        print(
            f"{mode:>5}: median {numbers['median_ms']:.1f} ms, mean {numbers['mean_ms']:.1f} ms, "
            f"p90 {numbers['p90_ms']:.1f} ms per program"
        )
    print(
        f"bwrap / hook: {report['ratio_median']:.2f}x (medians), {report['ratio_mean']:.2f}x (means); "
        f"bwrap adds {report['added_ms_median']:.1f} ms per program ({args.programs} programs each, "
        f"{args.workers} at a time)"
    )
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
