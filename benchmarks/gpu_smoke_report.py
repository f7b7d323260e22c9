"""The report of scripts/gpu_smoke.sh: from the jobs' folders under SCRATCH (benchmarks/gpu_smoke.py), three
tables in OUT/report.md — training steps, weight sync, a 128k-vocabulary log-prob step — and every number in
OUT/numbers.json. Every job has its row, with its result: ok, failed (exit n), timed out, or not run.

    python benchmarks/gpu_smoke_report.py SCRATCH OUT      # exit status 1 unless every job ran ok

The numbers:
- generation tokens/s: a step's completion tokens (every process) ÷ its generate seconds;
- update MFU: F·N·tokens ÷ update seconds ÷ (processes × the card's peak dense bf16 FLOP/s), N the policy's
  parameters, tokens the non-padding tokens of the update's rows (`throughput/update_tokens`: prompt and completion,
  as TRL and verl count them, although trainer.share_prompt runs a group's prompt once), F = 6 (forward, backward to
  activations and to weights), 4 under LoRA (the frozen base gets no weight gradient). GRPO on-policy runs one
  forward and one backward per row; gradient checkpointing's recomputation is not counted (model FLOPs, not
  hardware FLOPs);
- steps: the median over the steps after the first (the first compiles, allocates and warms up);
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
LOGITS_JOBS = ("logits-128k",)
JOBS = (*TRAIN_JOBS, *SYNC_JOBS, *LOGITS_JOBS)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def outcome(status: dict | None) -> str:
    if status is None:
        return "not run"
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


def train_numbers(folder: Path, processes: int, model: dict, peak: float | None, lora: bool) -> dict[str, Any]:
    """The steady state (steps after the first: no warm-up) of a train job's metrics.jsonl."""
    rows = [json.loads(line) for line in (folder / "run" / "metrics.jsonl").read_text().splitlines() if line]
    steady = rows[1:] or rows
    trainer = read_json(folder / "run" / "config.json")["trainer"]

    def median(key: str) -> float:
        return statistics.median(r[key] for r in steady)

    completions = median("completion/length_mean") * trainer["prompts_per_step"] * trainer["group_size"] * processes
    numbers = {
        "steps": len(rows),
        "step_s": median("time/step_s"),
        "generate_s": median("time/generate_s"),
        "generation_tokens_per_s": completions / median("time/generate_s"),
        "update_s": median("time/update_s"),
    }
    if all("throughput/update_tokens" in r for r in steady):
        tokens = median("throughput/update_tokens")
        flops = (4 if lora else 6) * model["params"] * tokens
        numbers |= {"update_tokens": tokens, "update_tflops": flops / numbers["update_s"] / 1e12}
        if peak:
            numbers["mfu"] = numbers["update_tflops"] / (processes * peak)
    return numbers


def job_numbers(scratch: Path, job: str, model: dict, peak: float | None) -> dict[str, Any]:
    folder = scratch / "jobs" / job
    status = read_json(folder / "status.json")
    numbers: dict[str, Any] = {"result": outcome(status), **(status or {}), "memory": memory_of(folder)}
    try:
        if job in TRAIN_JOBS and (folder / "run" / "metrics.jsonl").is_file():
            numbers |= train_numbers(folder, status["processes"], model, peak, lora=job == "train-lora")
        elif (folder / "result.json").is_file():
            numbers |= read_json(folder / "result.json")
    except (KeyError, ValueError, statistics.StatisticsError) as err:
        numbers["result"] += f"; unreadable numbers ({type(err).__name__}: {err})"
    return numbers


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
    header += ["update TFLOP/s", "MFU", "allocated GiB", "reserved GiB", "device GiB", "RSS GiB"]
    rows = []
    for job in TRAIN_JOBS:
        n, m = numbers[job], numbers[job]["memory"]
        mfu = f"{100 * n['mfu']:.1f} %" if "mfu" in n else None
        device = m.get("device_peak_gib", m.get("device_used_end_gib"))
        rows.append(
            [job, n["result"], n.get("wall_s"), n.get("step_s"), n.get("generate_s"), n.get("generation_tokens_per_s")]
            + [n.get("update_s"), n.get("update_tokens"), n.get("update_tflops"), mfu, m.get("allocated_peak_gib")]
            + [m.get("reserved_peak_gib"), device, m.get("rss_peak_gib")]
        )
    return table(header, rows)


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
    """report.md (versions, nvidia-smi, the three tables) and numbers.json in `out`; whether every job ran ok."""
    model = read_json(scratch / "jobs" / "model" / "model.json") or {}
    peak = read_json(scratch / "peak.json") or {"tflops": None, "source": "unknown"}
    numbers = {job: job_numbers(scratch, job, model, peak["tflops"]) for job in JOBS}
    sizes = read_json(scratch / "sizes.json") or {}
    lines = ["# tsrl GPU smoke", "", "```", *read_text(scratch / "versions.txt"), "```", ""]
    lines += [model_line(model, outcome(read_json(scratch / "jobs" / "model" / "status.json"))), sizes_line(sizes)]
    lines += [f"Peak for MFU: {peak['tflops']} TFLOP/s ({peak['source']}).", ""]
    lines += ["## Training steps (median over the steps after the first)", "", *train_table(numbers), ""]
    lines += ["## Weight sync into engine-shaped buffers", "", *sync_table(numbers), ""]
    lines += ["## A log-prob step over a 128k vocabulary", "", *logits_table(numbers), ""]
    lines += ["## nvidia-smi", "", "```", *read_text(scratch / "nvidia-smi.txt"), "```"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text("\n".join(lines) + "\n")
    everything = {"model": model, "peak": peak, "sizes": sizes, "jobs": numbers}
    (out / "numbers.json").write_text(json.dumps(everything, indent=1) + "\n")
    print("\n".join(lines))
    return all(n["result"] == "ok" for n in numbers.values())


def read_text(path: Path) -> list[str]:
    return path.read_text().rstrip().splitlines() if path.is_file() else [f"({path.name} missing)"]


def model_line(model: dict, built: str) -> str:
    if not model:
        return f"Model of the train and sync jobs: {built}."
    shape = f"hidden {model['hidden']}, {model['layers']} layers, vocabulary {model['vocab']}"
    return f"Model of the train and sync jobs: a Llama of {model['params']:,} parameters ({shape}) in bf16."


def sizes_line(sizes: dict) -> str:
    return "Sizes: " + (", ".join(f"{key} {value}" for key, value in sizes.items()) or "unknown") + "."


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    return 0 if report(Path(argv[0]), Path(argv[1])) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
