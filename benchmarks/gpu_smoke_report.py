"""The report of scripts/gpu_smoke.sh: from the jobs' folders under SCRATCH (benchmarks/gpu_smoke.py), four
tables in OUT/report.md — training steps, weight sync (generator=vllm's engine, or engine-shaped buffers where the
image has no vLLM), a 128k-vocabulary log-prob step — and every number in OUT/numbers.json. Every job has its row,
with its result: ok, failed (exit n), timed out, not run (a selected job that never started), not selected, or
not run for want of vLLM.

    python benchmarks/gpu_smoke_report.py SCRATCH OUT      # exit status 1 unless every selected job ran ok

The numbers:
- generation tokens/s: a step's completion tokens (every process's: train/samples_in_update rows of
  completion/length_mean tokens) ÷ its generate seconds;
- update MFU: F·N·tokens ÷ update seconds ÷ (processes × the card's peak dense bf16 FLOP/s), the 6·N·D convention
  of Kaplan et al. (2020): N the policy's non-embedding parameters (neither the embedding table, a lookup, nor the
  output head is counted; the head's 2·V·h FLOPs per predicted token are <1 % of the smoke's 1.1B Llama, whose
  vocabulary has 2,048 tokens), F = 6 (forward, backward to activations and to weights), 4 under LoRA (the frozen
  base gets no weight gradient; the adapter's own FLOPs are left out). tokens (`flop_tokens`): every completion
  token of the update's rows, and each group's prompt once per micro-batch its rows span — trainer.share_prompt
  runs a group's prompt once and continues its G completions from that cache — or once per row when prompts are not
  shared (share_prompt off, or model.gradient_checkpointing, whose layers keep no cache in the pass with gradient).
  From the metrics: completion tokens = completion/length_mean × train/samples_in_update (exact when no group was
  dropped), prompt tokens of every row = throughput/update_tokens − that. GRPO on-policy (one epoch, one minibatch,
  no KL term, as the smoke runs it) makes one forward and one backward per row; gradient checkpointing's
  recomputation is not counted (model FLOPs, not hardware FLOPs);
- steps: the median over the steps after the first (the first compiles, allocates and warms up);
- checkpoint: the end-of-run checkpoint's seconds and size where the job wrote it (the LoRA job), "skipped" where
  it did not (the full-weight jobs: 15–17 GB of float32 masters, moments and policy would fill their timeouts);
- vLLM: the engine's start, its first sync (ZeRO-3 gathers included) and GiB synced, generation tokens/s (the median
  over the repeats after the first), the update, the sync after it (wake the weights, load, wake the KV cache), and
  the mean |sampler − learner| log-prob of the engine's samples: right after a sync before the update, of the
  samples drawn before the update against the updated learner (stale), and after the update's sync;
- memory: torch's max allocated and max reserved, the largest over processes; the device's used memory, the peak of
  nvidia-smi's samples taken while the job ran (every process on the card, CUDA contexts and NCCL included), else
  mem_get_info at the job's end; the peak resident set.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

GIB = 2**30
TRAIN_JOBS = ("train-bf16", "train-zero3", "train-lora")
SYNC_JOBS = ("sync-zero3", "sync-lora")
VLLM_JOBS = ("vllm-zero3", "vllm-lora")
LOGITS_JOBS = ("logits-128k",)
JOBS = (*TRAIN_JOBS, *SYNC_JOBS, *VLLM_JOBS, *LOGITS_JOBS)
NO_VLLM = "vLLM not in this image: the vLLM jobs did not run."


def read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def outcome(status: dict | None, planned: bool = True) -> str:
    """A job's result from its status.json (None: it never started); `planned`: the script selected it."""
    if status is None:
        return "not run" if planned else "not selected"
    if status["rc"] == 0:
        return "ok"
    if status["rc"] in (124, 137):
        return f"timed out ({status['timeout_s']} s)"
    return f"failed (exit {status['rc']})"


def memory_of(folder: Path) -> dict[str, float]:
    """Every process's memory record, the largest value of each; the device's peak from nvidia-smi's samples."""
    records = [read_json(p) for p in sorted(folder.glob("memory-*.json"))]
    out = {key: max(r[key] for r in records if key in r) for key in {k for r in records for k in r}}
    samples = folder / "nvsmi.csv"
    if samples.is_file():
        used = [int(v) for v in samples.read_text().split() if v.strip().isdigit()]  # MiB
        if used:
            out["device_peak_gib"] = max(used) / 1024
    return out


def prompt_runs(rows: int, group: int, micro: int) -> float:
    """How many times, on average, each group's prompt runs when a process's `rows` (whole groups of `group` rows,
    in order) are cut into micro-batches of `micro` rows and each micro-batch runs each of its prompts once: one
    per micro-batch a group's rows fall in."""
    groups = rows // group
    spans = [((g + 1) * group - 1) // micro - (g * group) // micro + 1 for g in range(groups)]
    return sum(spans) / groups if groups else 1.0


def flop_tokens(row_tokens: float, completion_tokens: float, group: int, runs: float) -> float:
    """The tokens the update computes: every completion token, and of the prompt tokens of every row
    (row_tokens − completion_tokens, G copies of each group's prompt) the share `runs` / G of them."""
    return completion_tokens + (row_tokens - completion_tokens) * runs / group


def train_numbers(folder: Path, processes: int, model: dict, peak: float | None, lora: bool) -> dict[str, Any]:
    """The steady state (steps after the first: no warm-up) of a train job's metrics.jsonl."""
    rows = [json.loads(line) for line in (folder / "run" / "metrics.jsonl").read_text().splitlines() if line]
    steady = rows[1:] or rows
    config = read_json(folder / "run" / "config.json")
    trainer = config["trainer"]

    def median(key: str) -> float:
        return statistics.median(r[key] for r in steady)

    samples = median("train/samples_in_update")  # every process's rows
    completions = median("completion/length_mean") * samples
    numbers = {
        "steps": len(rows),
        "step_s": median("time/step_s"),
        "generate_s": median("time/generate_s"),
        "generation_tokens_per_s": completions / median("time/generate_s"),
        "update_s": median("time/update_s"),
    }
    if all("throughput/update_tokens" in r for r in steady):
        group = trainer["group_size"]
        shared = trainer.get("share_prompt", True) and not config["model"].get("gradient_checkpointing", False)
        runs = prompt_runs(round(samples / processes), group, trainer["micro_batch_size"]) if shared else group
        tokens = median("throughput/update_tokens")
        counted = flop_tokens(tokens, completions, group, runs)
        flops = (4 if lora else 6) * model["non_embedding_params"] * counted
        numbers |= {
            "update_tokens": tokens,
            "prompt_runs_per_group": runs,
            "flop_tokens": counted,
            "update_tflops": flops / numbers["update_s"] / 1e12,
        }
        if peak:
            numbers["mfu"] = numbers["update_tflops"] / (processes * peak)
    return numbers


def job_numbers(scratch: Path, job: str, model: dict, peak: float | None, plan: dict) -> dict[str, Any]:
    """A job's result and numbers; `plan`: the script's plan.json (the selected jobs, whether vLLM is there)."""
    folder = scratch / "jobs" / job
    status = read_json(folder / "status.json")
    result = outcome(status, job in plan["jobs"])
    if status is None and job in VLLM_JOBS and not plan["vllm"]:
        result = "not run: no vLLM in this image"
    numbers: dict[str, Any] = {"result": result, **(status or {}), "memory": memory_of(folder)}
    try:
        if job in TRAIN_JOBS and (folder / "run" / "metrics.jsonl").is_file():
            numbers |= train_numbers(folder, status["processes"], model, peak, lora=job == "train-lora")
            numbers["checkpoint"] = read_json(folder / "checkpoint.json")
        elif (folder / "result.json").is_file():
            numbers |= read_json(folder / "result.json")
    except (KeyError, ValueError, statistics.StatisticsError) as err:
        numbers["result"] += f"; unreadable numbers ({type(err).__name__}: {err})"
    return numbers


def must_pass(job: str, plan: dict) -> bool:
    """A job the run must have run ok: selected, and for a vLLM job, vLLM in the image."""
    return job in plan["jobs"] and (plan["vllm"] or job not in VLLM_JOBS)


def cell(value: Any) -> str:
    """A table cell: whole numbers and numbers from 100 up without decimals, others with 2 (3 significant digits
    below 0.01)."""
    if value is None:
        return "–"
    if isinstance(value, float):
        if value.is_integer() or abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.2g}" if abs(value) < 0.01 else f"{value:.2f}"
    return str(value)


def table(header: list[str], rows: Iterable[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]


def train_table(numbers: dict[str, dict]) -> list[str]:
    header = ["job", "result", "wall s", "s/step", "generate s", "generation tok/s", "update s", "update tokens"]
    header += ["tokens computed", "update TFLOP/s", "MFU", "checkpoint s", "checkpoint GiB", "allocated GiB"]
    header += ["reserved GiB", "device GiB", "RSS GiB"]
    rows = []
    for job in TRAIN_JOBS:
        n, m = numbers[job], numbers[job]["memory"]
        mfu = f"{100 * n['mfu']:.1f} %" if "mfu" in n else None
        device = m.get("device_peak_gib", m.get("device_used_end_gib"))
        rows.append(
            [job, n["result"], n.get("wall_s"), n.get("step_s"), n.get("generate_s"), n.get("generation_tokens_per_s")]
            + [n.get("update_s"), n.get("update_tokens"), n.get("flop_tokens"), n.get("update_tflops"), mfu]
            + checkpoint_cells(n.get("checkpoint"))
            + [m.get("allocated_peak_gib"), m.get("reserved_peak_gib"), device, m.get("rss_peak_gib")]
        )
    return table(header, rows)


def checkpoint_cells(checkpoint: dict | None) -> list[Any]:
    """A train job's checkpoint seconds and GiB; "skipped" where it wrote none; blanks where it did not say."""
    if checkpoint is None:
        return [None, None]
    return [checkpoint["seconds"], checkpoint["gib"]] if checkpoint["written"] else ["skipped", "skipped"]


def sync_table(numbers: dict[str, dict]) -> list[str]:
    header = ["job", "result", "wall s", "tensors", "GiB", "first drain s", "drain s (median)", "GB/s"]
    header += ["drain's extra GiB", "reserved GiB"]
    rows = []
    for job in SYNC_JOBS:
        n = numbers[job]
        drain = statistics.median(n["drain_s"]) if n.get("drain_s") else None
        rate = n["gib"] * GIB / drain / 1e9 if drain else None
        rows.append(
            [job, n["result"], n.get("wall_s"), n.get("tensors"), n.get("gib"), n.get("first_s"), drain, rate]
            + [n.get("extra_gib"), n["memory"].get("reserved_peak_gib")]
        )
    return table(header, rows)


def vllm_table(numbers: dict[str, dict]) -> list[str]:
    header = ["job", "result", "wall s", "engine start s", "first sync s", "GiB synced", "generation tok/s"]
    header += ["update s", "sync s", "gap: synced", "gap: stale", "gap: synced after update", "device GiB"]
    rows = []
    for job in VLLM_JOBS:
        n, m = numbers[job], numbers[job]["memory"]
        device = m.get("device_peak_gib", m.get("device_used_end_gib"))
        rows.append(
            [job, n["result"], n.get("wall_s"), n.get("engine_start_s"), n.get("first_sync_s"), n.get("sync_gib")]
            + [n.get("generation_tokens_per_s"), n.get("update_s"), n.get("sync_s"), n.get("gap_before")]
            + [n.get("gap_stale"), n.get("gap_after"), device]
        )
    return table(header, rows)


def logits_table(numbers: dict[str, dict]) -> list[str]:
    header = ["job", "result", "wall s", "rows × tokens × vocab", "logits bf16 GiB", "step peak: tsrl GiB"]
    header += ["step peak: float32 formula GiB", "measure", "reserved GiB"]
    rows = []
    for job in LOGITS_JOBS:
        n = numbers[job]
        shape = f"{n['rows']} × {n['tokens']} × {n['vocab']:,}" if "rows" in n else None
        rows.append(
            [job, n["result"], n.get("wall_s"), shape, n.get("logits_bf16_gib"), n.get("tsrl_gib")]
            + [n.get("float32_gib"), n.get("measure"), n["memory"].get("reserved_peak_gib")]
        )
    return table(header, rows)


def report(scratch: Path, out: Path) -> bool:
    """report.md (versions, nvidia-smi, the tables) and numbers.json in `out`; whether every job the run had to run
    ran ok (must_pass)."""
    model = read_json(scratch / "jobs" / "model" / "model.json") or {}
    peak = read_json(scratch / "peak.json") or {"tflops": None, "source": "unknown"}
    plan = read_json(scratch / "plan.json") or {"jobs": list(JOBS), "vllm": True}
    numbers = {job: job_numbers(scratch, job, model, peak["tflops"], plan) for job in JOBS}
    sizes = read_json(scratch / "sizes.json") or {}
    lines = ["# tsrl GPU smoke", "", "```", *read_text(scratch / "versions.txt"), "```", ""]
    lines += [model_line(model, outcome(read_json(scratch / "jobs" / "model" / "status.json"))), sizes_line(sizes)]
    lines += [f"Peak for MFU: {peak['tflops']} TFLOP/s ({peak['source']}).", ""]
    lines += [] if plan["vllm"] else [NO_VLLM, ""]
    lines += ["## Training steps (median over the steps after the first)", "", *train_table(numbers), ""]
    lines += ["## generator=vllm: engine, sync, generation, and a step checked", "", *vllm_table(numbers), ""]
    lines += ["## Weight sync into engine-shaped buffers", "", *sync_table(numbers), ""]
    lines += ["## A log-prob step over a 128k vocabulary", "", *logits_table(numbers), ""]
    lines += ["## nvidia-smi", "", "```", *read_text(scratch / "nvidia-smi.txt"), "```"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text("\n".join(lines) + "\n")
    everything = {"model": model, "peak": peak, "sizes": sizes, "plan": plan, "jobs": numbers}
    (out / "numbers.json").write_text(json.dumps(everything, indent=1) + "\n")
    print("\n".join(lines))
    return all(n["result"] == "ok" for job, n in numbers.items() if must_pass(job, plan))


def read_text(path: Path) -> list[str]:
    return path.read_text().rstrip().splitlines() if path.is_file() else [f"({path.name} missing)"]


def model_line(model: dict, built: str) -> str:
    if not model:
        return f"Model of the train and sync jobs: {built}."
    shape = f"hidden {model['hidden']}, {model['layers']} layers, vocabulary {model['vocab']}"
    inner = f"{model['non_embedding_params']:,} outside the embedding and the head"
    return f"Model of the train and sync jobs: a Llama of {model['params']:,} parameters ({inner}; {shape}) in bf16."


def sizes_line(sizes: dict) -> str:
    return "Sizes: " + (", ".join(f"{key} {value}" for key, value in sizes.items()) or "unknown") + "."


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    return 0 if report(Path(argv[0]), Path(argv[1])) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
