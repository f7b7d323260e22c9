"""Benchmark: the judge path. tsrl's trainer.pipeline=sync, stream and overlap against TRL's `GRPOTrainer` with a
remote judge that answers after L seconds, side by side in one run.
Target: tsrl `stream` ≤ 0.6× TRL's seconds per step at L = 1 s on the 26.7M policy; `overlap` lower still.

    python benchmarks/judge_path_bench.py [--size 27m] [--latencies 0.3 1 2.2] [--steps 4] [--warmup 1]
        [--quick] [--out runs/judge_path_bench]
    .venv-vllm/bin/python benchmarks/judge_path_bench.py --generator vllm [...]   # runs/judge_path_bench_vllm

The same work on every side is trainer_bench.py's (its docstring is the spec): its model folder (`27m`, a 26.7M
Llama; `tiny`, tsrl's 1.3M policy), the humor task's 64 training prompts, B = 8 prompts × G = 8 completions of at
most 48 tokens, the ladder regime with k = 4 anchors, GRPO with token-level aggregation, no KL, AdamW at 5e-4,
micro-batches of 32, one torch thread per trainer. Only the judge differs: every side asks `judge=openai` at
tsrl.testing's loopback OpenAI-compatible server (in this process, on its own thread), which answers each request
L seconds after it arrives. Both sides use the same judge settings (judge_overrides: concurrency 64, no server-side
constraint, no hedging: with a fixed latency a duplicate cannot come back sooner), so a step's 8 × 8 × 4 = 256
verdicts take ⌈256/64⌉·L = 4L wherever they are waited for. The ladders are built before step 1 while the server
answers at once, and stored under --out/ladders.

TRL 1.16's GRPOTrainer calls its reward functions in `_calculate_rewards`
(.venv/lib/python3.11/site-packages/trl/trainer/grpo_trainer.py, lines 1579–1662) from
`_generate_and_score_completions` (line 2753), after `_generate` (line 2436) and before the update. Its fastest form
for a remote judge is an async reward function: `is_async_callable` (trl/trainer/utils.py, lines 247–258:
`inspect.iscoroutinefunction` of the function or its `__call__`) routes it to a daemon event loop (grpo_trainer.py,
lines 749–758), where every async reward function of the batch is awaited together with `asyncio.gather` (lines
1621–1662) while the main thread blocks on the result (line 1660): the wait overlaps other reward functions, not
generation or the update. `AsyncJudgeReward` is that function: it awaits `tsrl.integrations.trl.TournamentReward`
(the ladder regime with the judge config of tsrl's side: the same rewards for the same completions) in a worker
thread, and the openai judge sends the batch's requests concurrently from its own event loop, 64 in flight, as on
tsrl's side. (TRL's experimental AsyncGRPOTrainer, trl/experimental/async_grpo, overlaps generation with training
but generates on a vLLM server; it is not the trainer measured here.)

tsrl runs three processes, composed as tsrl-train would be: `sync` (generate → score → update), `stream`
(generator.prompts_per_call = 2: the judge gets each 2 prompts' 64 verdicts while the rest are generated; still
on-policy) and `overlap` (the next step's groups are scored while this step generates and updates; one version stale).

Timing: the four trainers start together, each in its own process, then take turns one step at a time (TRL, sync,
stream, overlap, TRL, …); the one stepping is alone, the others wait idle. The latencies run one after the other in
the same processes, `--steps` rounds each; the first `--warmup` rounds of each are left out. Overlap needs one
correction: the batch it hands the judge at the end of its step would be scored during the others' turns, time a
run alone does not have. So after each overlap step the process waits, idle, until that batch is scored, and its
next step is charged what a run alone would have waited at its collect: max(0, that wait − the step's generation).
Reported per latency and trainer, medians of the wall seconds of the step and its parts: generate; judge wait (what
the step waited for the judge: sync and TRL the whole scoring, stream the judging left after generation, overlap
the charged wait); update (tsrl: update and weight sync; TRL: the rest of the step); the step's CPU seconds (the
trainer's process, every thread); and trainer / TRL, the median over rounds of each step over the same round's TRL
step. Every step must hold 64 completions and, per round, the same number of judge calls on every side.

`--generator vllm` (run under .venv-vllm, where vLLM's CPU build and TRL are installed) generates with vLLM on
every side: tsrl with generator=vllm (one engine in each trainer's process, synced after every update), stream
without prompts_per_call (the engine takes the whole batch and tsrl/generation/vllm.py hands each group to the judge
the moment its last request finishes); TRL with colocated vLLM, benchmarks/trl_vllm.py's TRL_VLLM_ARGS and
patch_trainer (its weight sync replaced by the vLLM reload tsrl makes; read that module's docstring for why). TRL
starts its engine without a dtype, so vLLM's auto rule runs it in bfloat16 for the float32 model folder; tsrl's
engine would follow the policy (float32, 2-2.5× slower to generate here), so it is given generator.dtype=bfloat16:
both sample in bfloat16 and learn in float32. The
weight sync is reported apart (tsrl: time/sync_s; TRL: its sync_weights, timed inside its generation) and counted in
update; stream's steps also report when its first and last group reached the judge (seconds after generation
began). Targets with vLLM: stream ≤ 0.6× TRL, overlap ≤ 0.5× at L = 1 s on 27m.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))  # trainer_bench, the sibling benchmark
sys.path.insert(0, str(ROOT))

import trainer_bench  # noqa: E402
from trainer_bench import ENGINE_DTYPE, MAX_NEW_TOKENS, B, G, K, RunSpec, Turns  # noqa: E402

SIDES = ("trl", "sync", "stream", "overlap")
GENERATORS = ("hf", "vllm")
CONCURRENCY, STREAM_CHUNK = 64, 2
STREAM_TARGET = 0.6  # tsrl stream ≤ 0.6× TRL at TARGET_LATENCY on the 26.7M policy
TARGET_LATENCY = 1.0
OVERLAP_TARGET_VLLM = 0.5  # with --generator vllm: overlap ≤ 0.5× TRL (with hf: below stream)


def judge_overrides(url: str) -> list[str]:
    """The judge both sides ask: the loopback server at `url`."""
    fixed = "judge.model=judge judge.api_key_env= judge.constrain=off judge.hedge.enabled=false"
    return [f"judge.base_urls=[{url}]", f"judge.concurrency={CONCURRENCY}", *fixed.split()]


def reward_options(ladders: Path) -> dict[str, Any]:
    """reward.* of both sides: the ladder with k anchors, stored under `ladders`."""
    return {"k": K, "ladder_dir": str(ladders)}


def tsrl_overrides(spec: RunSpec, pipeline: str, url: str, generator: str = "hf") -> list[str]:
    """trainer_bench.py's tsrl overrides, the judge's, and the pipeline's; with generator=vllm the engine takes the
    whole batch on every pipeline (stream hands groups over as they finish, not in calls of STREAM_CHUNK)."""
    fixed = "model=hf algo=grpo algo.kl_beta=0 trainer.micro_batch_size=32 trainer.lr=5e-4 trainer.lr_schedule=constant"
    sampling = f"generator.max_new_tokens={MAX_NEW_TOKENS} generator.temperature=1.0 generator.top_p=1.0"
    steps = spec.steps + (pipeline == "overlap")  # overlap: the last measured step still hands a batch on
    calls = STREAM_CHUNK if pipeline == "stream" else B
    chunking = f"generator.prompts_per_call={calls}" if generator == "hf" else ""
    pipe = f"trainer.pipeline={pipeline} {chunking} trainer.max_steps={steps} seed={spec.seed}"
    fixed = f"generator=vllm generator.dtype={ENGINE_DTYPE} {fixed}" if generator == "vllm" else fixed
    batch = f"trainer.prompts_per_step={B} trainer.group_size={G}"
    model = f"model.path={spec.folder}"  # one item: a path may hold spaces
    return [*fixed.split(), *sampling.split(), model, *batch.split(), *pipe.split(), *judge_overrides(url)]


class AsyncJudgeReward:
    """TRL's fastest form of a remote-judge reward (see the module docstring): an async reward function awaiting
    TournamentReward in a worker thread, while the judge's own loop sends every request of the batch concurrently.
    `prompts`: those its ladders are built for (default: the task's training prompts); `group`: G. Records, per
    call, its wall seconds, the completions and their tokens, and the judge calls it made."""

    def __init__(
        self, url: str, ladders: Path, run_dir: Path, prompts: list[str] | None = None, group: int = G
    ) -> None:
        from tsrl.integrations.trl import TournamentReward

        self.reward = TournamentReward(
            num_generations=group,
            regime="ladder",
            judge="openai",
            task="humor",
            overrides=judge_overrides(url),
            run_dir=run_dir,
            **({"prompts": prompts} if prompts is not None else {}),
            **reward_options(ladders),
        )
        self.__name__ = self.reward.__name__
        self.calls: list[dict[str, float]] = []

    async def __call__(self, prompts: list, completions: list, **kwargs: Any) -> list[float | None]:
        start, logged, log_metric = time.perf_counter(), {}, kwargs.pop("log_metric", None)

        def keep(name: str, value: float) -> None:  # TRL's log_metric, and what the judge's calls were
            logged[name] = value
            if log_metric is not None:
                log_metric(name, value)

        rewards = await asyncio.to_thread(self.reward, prompts, completions, log_metric=keep, **kwargs)
        tokens = sum(len(ids) for ids in kwargs.get("completion_ids") or [])
        call = {"score_s": time.perf_counter() - start, "completions": len(completions), "tokens": tokens}
        self.calls.append({**call, "judge_calls": logged.get("tsrl/judge/calls", 0.0)})
        return rewards


# ----- each trainer in its own process ------------------------------------------------------------------------------


class OverlapWatch:
    """trainer.pipeline=overlap between turns (the module docstring's correction): counts the batches handed to the
    scoring worker and those it finished; `settle` charges a step the wait a run alone would have had, then waits
    for the batch in flight."""

    def __init__(self, run: Any) -> None:
        from tsrl.judging import set_noise_stream
        from tsrl.training.pipeline import Overlap

        self.done, self.handed, self.scored, self.carried = threading.Condition(), 0, 0, 0.0
        run.pipeline.close()  # the same worker as setup's, its scoring counted
        noise = lambda stream: set_noise_stream(run.judge, *stream)  # noqa: E731
        run.pipeline = Overlap(self._scored(run.regime.score), run.judge.drain_metrics, noise)
        submit = run.pipeline.submit

        def handed(*args: Any, **kwargs: Any) -> None:
            with self.done:
                self.handed += 1
            submit(*args, **kwargs)

        run.pipeline.submit = handed

    def _scored(self, score: Any) -> Any:
        def counted(groups: Any) -> Any:
            try:
                return score(groups)
            finally:
                with self.done:
                    self.scored += 1
                    self.done.notify_all()

        return counted

    def settle(self, wall: float, generate: float, waited: float) -> dict[str, float]:
        """The step as a run alone would have taken it (its wait: max(what it waited, last turn's carried wait −
        its generation)); then wait, idle, for the batch it handed on, and carry that wait to the next step."""
        wait = max(waited, self.carried - generate)
        start = time.perf_counter()
        with self.done:
            self.done.wait_for(lambda: self.scored >= self.handed)
        self.carried = time.perf_counter() - start
        return {"step_s": wall - waited + wait, "wait_s": wait, "wall_s": wall, "carried_s": self.carried}


class Arrivals:
    """When each group of a streamed step reached the judge: wraps the generator's `generate` so that every `emit`
    is timed from the call's start. `take()` gives the step's first and last arrival (s) and forgets them."""

    def __init__(self, generator: Any) -> None:
        self.times: list[float] = []
        generate = generator.generate

        def generate_timed(*args: Any, emit: Any = None, **kwargs: Any) -> Any:
            start = time.perf_counter()

            def emit_timed(items: Any) -> None:
                self.times.extend([time.perf_counter() - start] * len(items))
                emit(items)

            return generate(*args, **({} if emit is None else {"emit": emit_timed}), **kwargs)

        generator.generate = generate_timed

    def take(self) -> dict[str, float]:
        times, self.times = self.times, []
        return {"first_arrival_s": min(times), "last_arrival_s": max(times)} if times else {}


def run_tsrl(
    pipeline: str, spec: RunSpec, url: str, ladders: Path, run_dir: Path, turns: Turns, generator: str = "hf"
) -> None:
    """tsrl's loop with `pipeline`, built as tsrl-train builds it (no evaluation, no logging), one step per turn."""
    from tsrl.integrations.scoring import compose_run_config
    from tsrl.judging import close_judge
    from tsrl.tasks import build_task
    from tsrl.training.loop import overlap_step, train_step
    from tsrl.training.setup import open_judges, quiet_libraries, setup

    quiet_libraries()
    overrides = tsrl_overrides(spec, pipeline, url, generator)
    cfg = compose_run_config("ladder", "openai", "humor", str(run_dir), overrides, reward_options(ladders))
    task = build_task(cfg.task)
    judge, eval_judge = open_judges(cfg, task)
    run = None
    try:
        run = setup(cfg, task, judge, eval_judge)
        watch = OverlapWatch(run) if pipeline == "overlap" else None
        arrivals = Arrivals(run.generator) if pipeline == "stream" else None
        turns.say("ready")
        for step in range(1, spec.steps + 1):
            turns.wait()
            start, cpu = time.perf_counter(), time.process_time()
            metrics, groups, _ = (overlap_step if watch else train_step)(run, step)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            waited = metrics["time/score_s" if pipeline == "sync" else "time/score_wait_s"]
            record = {"step_s": wall, "wait_s": waited}
            if watch is not None:
                record = watch.settle(wall, metrics["time/generate_s"], waited)
            if arrivals is not None:
                record.update(arrivals.take())
            turns.say(
                "step",
                **record,
                cpu_s=cpu,
                generate_s=metrics["time/generate_s"],
                update_s=metrics["time/update_s"] + metrics["time/sync_s"],
                sync_s=metrics["time/sync_s"],
                score_s=metrics["time/score_s"],
                judge_calls=metrics["judge/calls"],
                completions=sum(len(g.rollouts) for g in groups),
                tokens=sum(len(r.token_ids) for g in groups for r in g.rollouts),
            )
        turns.wait()  # the parent's go to finish
    finally:
        for worker in (run.pipeline, run.streamer) if run is not None else ():
            if worker is not None:
                worker.close()
        close_judge(judge)
        close_judge(eval_judge)


def timed(function: Callable, spent: list[float]) -> Callable:
    """`function`, appending the wall seconds of each call to `spent`."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    return wrapper


def run_trl(spec: RunSpec, url: str, ladders: Path, run_dir: Path, turns: Turns, generator: str = "hf") -> None:
    """TRL's GRPOTrainer (trainer_bench.py's config; with generator=vllm, colocated vLLM) with AsyncJudgeReward;
    one optimizer step per turn. With vLLM its weight sync runs inside its generation: timed apart, counted in
    update."""
    from transformers import TrainerCallback
    from transformers.utils import logging as hf_logging

    from tsrl.tasks import HumorConfig, HumorTask

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    prompts = [[{"role": "user", "content": p.text}] for p in HumorTask(HumorConfig()).prompts("train")]
    reward = AsyncJudgeReward(url, ladders, run_dir / "reward")
    generated: list[float] = []
    synced: list[float] = []
    started = [0.0, 0.0]  # the step's wall and CPU clocks at its start

    class Turn(TrainerCallback):
        def on_train_begin(self, *_: Any, **__: Any) -> None:
            turns.say("ready")
            turns.wait()
            started[:] = time.perf_counter(), time.process_time()

        def on_step_end(self, *_: Any, **__: Any) -> None:
            step, cpu = time.perf_counter() - started[0], time.process_time() - started[1]
            call, sync = reward.calls[-1], sum(synced)
            generate = sum(generated) - sync
            generated.clear()
            synced.clear()
            rest = {key: call[key] for key in ("completions", "tokens", "judge_calls")}
            parts = {"generate_s": generate, "wait_s": call["score_s"], "update_s": step - generate - call["score_s"]}
            turns.say("step", step_s=step, cpu_s=cpu, sync_s=sync, **parts, **rest)
            turns.wait()  # after the last step: the parent's go to finish
            started[:] = time.perf_counter(), time.process_time()

    side = dataclasses.replace(spec, generator=generator)  # with vllm: colocated, its sync patched (trl_vllm.py)
    trainer = trainer_bench.trl_trainer(side, run_dir, reward, prompts, Turn())
    trainer._generate = timed(trainer._generate, generated)
    if generator == "vllm":
        engine = trainer.vllm_generation
        engine.sync_weights = timed(engine.sync_weights, synced)
    trainer.train()


def child(side: str, spec: RunSpec, url: str, ladders: Path, generator: str = "hf") -> None:
    import torch

    torch.set_num_threads(spec.threads)
    turns = Turns()
    with tempfile.TemporaryDirectory(prefix=f"judge-path-bench-{side}-") as run_dir:
        if side == "trl":
            run_trl(spec, url, ladders, Path(run_dir), turns, generator)
        else:
            run_tsrl(side, spec, url, ladders, Path(run_dir), turns, generator)
    turns.say("done")


# ----- the parent: the judge server, four trainers taking turns, the summary ---------------------------------------


class SideProcess(trainer_bench.TrainerProcess):
    """trainer_bench.py's trainer process (`expect` a report, `go`, `close`), running one side of this benchmark."""

    def __init__(self, side: str, spec: RunSpec, url: str, ladders: Path, generator: str = "hf") -> None:
        self.side, self.log = side, tempfile.TemporaryFile("w+")
        command = [sys.executable, __file__, "--child", side, "--folder", str(spec.folder), "--url", url]
        command += ["--steps", str(spec.steps), "--seed", str(spec.seed), "--ladders", str(ladders)]
        command += ["--generator", generator]
        threads = str(spec.threads)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": threads}
        self.proc = subprocess.Popen(
            command, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True
        )


def paired_run(
    spec: RunSpec, latencies: list[float], rounds: int, ladders: Path, write: Callable, generator: str = "hf"
) -> None:
    """The server (latency 0 while the trainers set up and build ladders), the four trainers, then per latency
    `rounds` rounds of one step each, in SIDES order; after each latency `write(phases, loads)`: per latency so
    far its rounds ({side: step report}) and the 1-minute load average at its end."""
    from tsrl.testing.judge_server import JudgeServer

    phases: dict[float, list[dict]] = {}
    loads: dict[float, float] = {}
    with JudgeServer(latency_s=0.0) as server:
        procs = {side: SideProcess(side, spec, server.url, ladders, generator) for side in SIDES}
        try:
            for proc in procs.values():
                proc.expect("ready")
            for latency in latencies:
                server.latency_s = latency  # every trainer is idle between rounds
                phases[latency] = []
                for _ in range(rounds):
                    phases[latency].append({})
                    for side, proc in procs.items():
                        proc.go()
                        phases[latency][-1][side] = proc.expect("step")
                loads[latency] = os.getloadavg()[0]
                write(phases, loads)
            for proc in procs.values():  # one at a time, so no teardown overlaps another's step
                proc.go()
                proc.expect("done")
        finally:
            for proc in procs.values():
                proc.close()


def check_work(phases: dict[float, list[dict]]) -> None:
    """Every step of every side: B·G completions, and per round the same judge calls on every side."""
    for latency, rounds in phases.items():
        for i, steps in enumerate(rounds):
            completions = {side: s["completions"] for side, s in steps.items()}
            calls = {side: s["judge_calls"] for side, s in steps.items()}
            if set(completions.values()) != {B * G} or len(set(calls.values())) > 1:
                sys.exit(
                    f"Unequal work at L = {latency:g} s, round {i + 1}: completions {completions}, judge calls {calls}."
                )


def summarise(rounds: list[dict], warmup: int) -> dict[str, dict[str, float]]:
    """Per side, medians over the steady rounds of each part, and the median of its step over TRL's."""
    steady = rounds[warmup:]
    out = {}
    for side in SIDES:
        steps = [r[side] for r in steady]
        parts = ("step_s", "cpu_s", "generate_s", "wait_s", "update_s")
        row = {key: statistics.median(s[key] for s in steps) for key in parts}
        row["ratio"] = statistics.median(r[side]["step_s"] / r["trl"]["step_s"] for r in steady)
        row["judge_calls"] = statistics.mean(s["judge_calls"] for s in steps)
        row["tokens"] = statistics.mean(s["tokens"] for s in steps)
        for key in ("sync_s", "first_arrival_s", "last_arrival_s"):  # vLLM runs' weight sync; stream's arrivals
            if all(key in s for s in steps):
                row[key] = statistics.median(s[key] for s in steps)
        out[side] = row
    return out


NAMES = {"trl": "TRL GRPOTrainer (async reward)", "sync": "tsrl sync", "stream": "tsrl stream"}
NAMES["overlap"] = "tsrl overlap"


def markdown(results: dict[str, Any]) -> str:
    """One row per latency and trainer: s/step, × TRL, and the step's parts; with --generator vllm also the weight
    sync (part of update) and when stream's first and last group reached the judge."""
    vllm = results.get("generator") == "vllm"
    extra = " weight sync | first–last arrival |" if vllm else ""
    rows = [
        "| judge latency L | trainer | s/step | × TRL | CPU s/step | generate | judge wait | update |"
        f"{extra} judge calls/step | tokens/step |",
        "|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if vllm else ""),
    ]
    for latency, sides in sorted(results["latencies"].items(), key=lambda item: float(item[0])):
        for side, s in sides["summary"].items():
            ratio = "1" if side == "trl" else f"**{s['ratio']:.2f}**"
            arrivals = f"{s['first_arrival_s']:.2f}–{s['last_arrival_s']:.2f}" if "last_arrival_s" in s else "—"
            columns = f" {s['sync_s']:.2f} | {arrivals} |" if vllm else ""
            rows.append(
                f"| {float(latency):g} s | {NAMES[side]} | {s['step_s']:.2f} | {ratio} | {s['cpu_s']:.2f} | "
                f"{s['generate_s']:.2f} | {s['wait_s']:.2f} | {s['update_s']:.2f} |{columns} {s['judge_calls']:.0f} | "
                f"{s['tokens']:.0f} |"
            )
    return "\n".join(rows)


def verdict(results: dict[str, Any]) -> str:
    """The target's line: stream ≤ 0.6× TRL at L = 1 s (27m), overlap lower still (with --generator vllm:
    ≤ 0.5×); or why it was not measured."""
    vllm = results.get("generator") == "vllm"
    goal = f" (≤ {OVERLAP_TARGET_VLLM})" if vllm else ""
    at = results["latencies"].get(str(TARGET_LATENCY))
    if at is None or results["size"] != "27m":
        return f"target (stream ≤ {STREAM_TARGET}× TRL at L = {TARGET_LATENCY:g} s, 27m): not measured in this run"
    stream, overlap = at["summary"]["stream"]["ratio"], at["summary"]["overlap"]["ratio"]
    met = stream <= STREAM_TARGET and (overlap <= OVERLAP_TARGET_VLLM if vllm else overlap < stream)
    return (
        f"target at L = {TARGET_LATENCY:g} s, 27m{', vLLM' if vllm else ''}: stream {stream:.2f}× TRL "
        f"(≤ {STREAM_TARGET}), overlap {overlap:.2f}×{goal}: {'met' if met else 'MISSED'}"
    )


def check_generator(generator: str) -> None:
    """--generator vllm needs vLLM and TRL in this interpreter; refuse in one sentence where they are missing."""
    missing = [name for name in ("vllm", "trl") if generator == "vllm" and importlib.util.find_spec(name) is None]
    if missing:
        sys.exit(
            f"--generator vllm needs {' and '.join(missing)} in this Python ({sys.executable}); run it with "
            ".venv-vllm/bin/python."
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="27m", choices=["tiny", "27m"])
    parser.add_argument("--latencies", nargs="+", type=float, default=[0.3, 1.0, 2.2], help="judge latencies, s")
    parser.add_argument("--steps", type=int, default=4, help="rounds per latency, warm-up included")
    parser.add_argument("--warmup", type=int, default=1, help="first rounds of each latency left out")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per trainer")
    parser.add_argument("--quick", action="store_true", help="tiny policy, L = 0.3 s, 3 rounds (a smoke run)")
    parser.add_argument("--generator", choices=GENERATORS, default="hf", help="generation, both sides")
    parser.add_argument("--out", type=Path, help="default runs/judge_path_bench, with vllm runs/judge_path_bench_vllm")
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--ladders", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        spec = RunSpec(args.folder, args.steps, args.seed, args.threads)
        return child(args.child, spec, args.url, args.ladders, args.generator)
    check_generator(args.generator)
    args.out = args.out or ROOT / "runs" / ("judge_path_bench" + ("_vllm" if args.generator == "vllm" else ""))
    if args.quick:
        args.size, args.latencies, args.steps = "tiny", [0.3], 3
    if args.steps <= args.warmup:
        sys.exit(f"--steps {args.steps} leaves nothing after --warmup {args.warmup}; raise --steps.")
    args.out.mkdir(parents=True, exist_ok=True)
    folder = trainer_bench.model_folder(args.size, args.out)
    spec = RunSpec(folder, args.steps * len(args.latencies), 0, args.threads)
    work = dict(B=B, G=G, k=K, max_new_tokens=MAX_NEW_TOKENS, concurrency=CONCURRENCY, stream_call=STREAM_CHUNK)
    timing = dict(steps=args.steps, warmup=args.warmup, threads=args.threads, cpu_count=os.cpu_count())
    timing.update(load_1min_start=os.getloadavg()[0], nice=os.nice(0))
    results: dict[str, Any] = {"size": args.size, "params": trainer_bench.parameter_count(folder), **work, **timing}
    results["generator"] = args.generator
    t0 = time.perf_counter()

    def write(phases: dict[float, list[dict]], loads: dict[float, float]) -> None:
        check_work(phases)
        results["latencies"] = {
            str(L): {"summary": summarise(r, args.warmup), "load_1min": loads[L], "rounds": r}
            for L, r in phases.items()
        }
        results["wall_s"] = time.perf_counter() - t0
        results["table"], results["verdict"] = markdown(results), verdict(results)
        (args.out / "results.json").write_text(json.dumps(results, indent=1))
        (args.out / "table.md").write_text(f"{results['table']}\n\n{results['verdict']}\n")
        print(f"{results['table']}\n{results['verdict']}\n{results['wall_s'] / 60:.1f} min; in {args.out}", flush=True)

    paired_run(spec, args.latencies, args.steps, args.out / "ladders", write, args.generator)


if __name__ == "__main__":
    main()
