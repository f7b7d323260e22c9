"""Benchmark: trainer.pipeline=stream and overlap against sync, side by side in one process, per judge latency and
policy size. Targets: an overlapped step ≤ 1.1 × max(generate + update, score), and ≥ 1.3× the sync step rate where
the judge's time is about the rest of the step's. Stream has no target; it is reported as sync / stream.

    python benchmarks/pipeline_bench.py [--sizes tiny 27m] [--latencies L ...] [--blocks 2] [--block-steps 5]
        [--out runs/pipeline_bench]

The judge is tsrl.testing's loopback OpenAI-compatible server in a process of its own, answering every request
after a fixed latency L (judge=openai, concurrency 64, one verdict per comparison in a random order): a step's
8 prompts × 8 completions × k = 4 anchors = 256 verdicts take ⌈256/64⌉·L = 4L of waiting. The policy is
trainer_bench.py's (`tiny`: tsrl's 1.3M tiny policy; `27m`: a 26.7M Llama from config), 48 new tokens, one torch
thread, the ladder built before the first step on 8 humor prompts (task.max_prompts=8). Sync and overlap generate
all 8 prompts in one call; streaming needs the batch in parts, so stream generates 2 prompts per call
(generator.prompts_per_call=2: 4 arrivals of 64 verdicts, each one L of waiting) and is compared with a sync
block generating the same way (sync-2), which costs more than one call for 8 on this machine.

One run per (size, L): after the ladder, blocks of `--block-steps` steps alternate sync, overlap, sync-2, stream,
sync, … (`--blocks` of each), so every pipeline sees the same machine load. A sync step's parts come from its own
metrics
(time/generate_s, time/score_s, time/update_s + time/sync_s); its bound is max(generate + update + sync, score). An
overlap block starts with nothing scored ahead and ends with nothing handed on, so its first and last steps are
not steady and are left out. Reported per (size, L): medians of the sync step, its parts, the overlapped step,
overlapped / bound, and sync / overlapped (the speed-up); the sync-2 and streamed steps, the judging the
streamed step still waited for after generation (time/score_wait_s), and sync-2 / stream. The pipelines train the
same run, so the policy keeps
learning across blocks; what is compared is time, not learning.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))  # trainer_bench, the sibling benchmark
sys.path.insert(0, str(ROOT))

BOUND_TARGET, SPEEDUP_TARGET = 1.1, 1.3
STREAM_CHUNK = 2  # prompts per generation call in the sync-2 and stream blocks
LATENCIES = {"tiny": (0.05, 0.3, 1.0), "27m": (0.05, 1.0, 2.2)}
"""Per size: a judge far faster than the rest of the step, one about as fast (4L ≈ generate + update: 0.3 s for
the tiny policy's ≈ 1.1 s, 2.2 s for the 26.7M policy's ≈ 8.7 s), and one slower or in between."""
SERVER = (
    "import sys, time\nfrom tsrl.testing.judge_server import JudgeServer\n"
    "with JudgeServer(latency_s=float(sys.argv[1])) as server:\n"
    "    print(server.url, flush=True)\n    sys.stdin.read()\n"
)


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(latency)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    return server, server.stdout.readline().strip()


def build_run(folder: Path, url: str, run_dir: Path):
    from tsrl.integrations.scoring import compose_run_config
    from tsrl.tasks import build_task
    from tsrl.training.setup import open_judges, quiet_libraries, setup

    quiet_libraries()
    overrides = [
        "model=hf",
        f"model.path={folder}",
        "algo=grpo",
        "algo.kl_beta=0",
        "trainer.prompts_per_step=8",
        "trainer.group_size=8",
        "trainer.micro_batch_size=32",
        "trainer.lr=5e-4",
        "trainer.max_steps=1000",
        "generator.max_new_tokens=48",
        "generator.prompts_per_call=8",
        "task.max_prompts=8",
        f"judge.base_urls=[{url}]",
        "judge.model=judge",
        "judge.api_key_env=",
        "judge.concurrency=64",
        "judge.constrain=off",
        "seed=0",
    ]
    cfg = compose_run_config("ladder", "openai", "humor", str(run_dir), overrides, {"k": 4})
    task = build_task(cfg.task)
    judge, eval_judge = open_judges(cfg, task)
    return setup(cfg, task, judge, eval_judge), (judge, eval_judge)


def sync_block(run, first: int, n: int) -> list[dict]:
    from tsrl.training.loop import train_step

    out = []
    for step in range(first, first + n):
        start = time.perf_counter()
        metrics = train_step(run, step)[0]
        out.append({"wall": time.perf_counter() - start, **{k: v for k, v in metrics.items() if k.startswith("time/")}})
    return out


def chunked_block(run, first: int, n: int, stream: bool) -> list[dict]:
    """Steps generating STREAM_CHUNK prompts per call: sync-2 (stream False) or streamed."""
    from tsrl.training.pipeline import Streamer

    run.generator.cfg.prompts_per_call = STREAM_CHUNK
    run.streamer = Streamer(run.regime) if stream else None
    try:
        return sync_block(run, first, n)
    finally:
        if run.streamer is not None:
            run.streamer.close()
        run.streamer, run.generator.cfg.prompts_per_call = None, 8


def overlap_block(run, first: int, n: int) -> list[dict]:
    from tsrl.training.loop import overlap_step
    from tsrl.training.pipeline import Overlap

    run.pipeline, out = Overlap(run.regime.score, run.judge.drain_metrics), []
    run.cfg.trainer.max_steps = first + n - 1  # the block's last step hands nothing on
    try:
        for step in range(first, first + n):
            start = time.perf_counter()
            metrics = overlap_step(run, step)[0]
            out.append(
                {"wall": time.perf_counter() - start, **{k: v for k, v in metrics.items() if k.startswith("time/")}}
            )
    finally:
        run.pipeline.close()
        run.pipeline = None
    return out[1:-1]  # steady steps only


def measure(size: str, latency: float, blocks: int, block_steps: int, out_dir: Path) -> dict:
    from trainer_bench import model_folder

    from tsrl.judging import close_judge

    folder = model_folder(size, out_dir)
    server, url = start_server(latency)
    sync, overlap, chunked, stream = [], [], [], []
    try:
        with tempfile.TemporaryDirectory(prefix="tsrl-pipeline-bench-") as run_dir:
            run, judges = build_run(folder, url, Path(run_dir))
            try:
                step = 1
                for _ in range(blocks):
                    sync += sync_block(run, step, block_steps)
                    overlap += overlap_block(run, step + block_steps, block_steps)
                    chunked += chunked_block(run, step + 2 * block_steps, block_steps, stream=False)
                    stream += chunked_block(run, step + 3 * block_steps, block_steps, stream=True)
                    step += 4 * block_steps
            finally:
                for judge in judges:
                    close_judge(judge)
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    med = lambda rows, key: statistics.median(r[key] for r in rows)  # noqa: E731
    rest = statistics.median(r["time/generate_s"] + r["time/update_s"] + r["time/sync_s"] for r in sync)
    score = med(sync, "time/score_s")
    step_sync, step_overlap = med(sync, "wall"), med(overlap, "wall")
    bound = max(rest, score)
    return {
        "size": size,
        "latency_s": latency,
        "sync_steps": len(sync),
        "overlap_steps": len(overlap),
        "sync_step_s": step_sync,
        "generate_update_s": rest,
        "score_s": score,
        "overlap_step_s": step_overlap,
        "bound_s": bound,
        "overlap_over_bound": step_overlap / bound,
        "speedup": step_sync / step_overlap,
        "score_wait_s": med(overlap, "time/score_wait_s"),
        "stream_steps": len(stream),
        "sync2_step_s": med(chunked, "wall"),
        "stream_step_s": med(stream, "wall"),
        "stream_score_wait_s": med(stream, "time/score_wait_s"),
        "stream_speedup": med(chunked, "wall") / med(stream, "wall"),
    }


def markdown(rows: list[dict]) -> str:
    lines = [
        "| policy | judge latency | sync step | generate + update | score | overlapped step | overlapped / "
        f"bound (≤ {BOUND_TARGET}) | sync / overlapped | sync-2 step | streamed step (its wait for the judge) | "
        "sync-2 / streamed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['size']} | {r['latency_s']:g} s | {r['sync_step_s']:.2f} s | {r['generate_update_s']:.2f} s "
            f"| {r['score_s']:.2f} s | {r['overlap_step_s']:.2f} s | {r['overlap_over_bound']:.2f}× | "
            f"{r['speedup']:.2f}× | {r['sync2_step_s']:.2f} s | {r['stream_step_s']:.2f} s "
            f"({r['stream_score_wait_s']:.2f} s) | {r['stream_speedup']:.2f}× |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=list(LATENCIES))
    parser.add_argument(
        "--latencies",
        nargs="+",
        type=float,
        default=None,
        help="judge latencies in seconds for every size (default: LATENCIES per size)",
    )
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--block-steps", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "pipeline_bench")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for size in args.sizes:
        for latency in args.latencies or LATENCIES[size]:
            rows.append(measure(size, latency, args.blocks, args.block_steps, args.out))
            print(json.dumps(rows[-1]), flush=True)
            (args.out / "results.json").write_text(
                json.dumps({"rows": rows, "blocks": args.blocks, "block_steps": args.block_steps}, indent=1)
            )
    (args.out / "results.md").write_text(markdown(rows) + "\n")
    print(markdown(rows))


if __name__ == "__main__":
    main()
