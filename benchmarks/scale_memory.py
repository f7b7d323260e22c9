"""Peak memory per process and step time of the same model and batch under one process, 2-process DDP and
2-process DeepSpeed ZeRO-3 on CPU (gloo), each launched with the shipped configs/accelerate files.

    python benchmarks/scale_memory.py                      # a ~85M-parameter Llama (hidden 768, 12 layers)
    python benchmarks/scale_memory.py --hidden 256 --layers 4 --steps 2

The model is a Llama from config with random weights and the tiny policy's tokenizer (memory and time do not
depend on what the weights say). Every run: 2 prompts per process (trainer.prompts_per_step=2 on one, 4 on
two), group 4, 16 new tokens, AdamW, no KL; peak = the largest resident set of a process (`memory/peak_gib`,
averaged over processes) at the last step. ZeRO-3 splits parameters, gradients and Adam's two moments between
the processes, so its per-process peak should approach (1/W) of DDP's model-and-optimizer share.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def build_model(
    folder: Path, hidden: int, layers: int, positions: int = 512, dtype: str = "float32", device: str = "cpu"
) -> int:
    """A Llama from config (random weights, initialised on `device`, stored in `dtype`) with the tiny policy's
    tokenizer, saved to `folder`; its parameter count. Also used by benchmarks/gpu_smoke.py."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tsrl.models import TinyModelConfig, policy_source
    from tsrl.models.source import load_tokenizer
    from tsrl.registry import load_components
    from tsrl.tasks.humor import HumorConfig

    load_components()
    tiny = policy_source(TinyModelConfig(warmstart_steps=0), HumorConfig())
    tokenizer = load_tokenizer(tiny)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 64),
        num_key_value_heads=max(1, hidden // 64),
        max_position_embeddings=positions,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    with torch.device(device):
        model = LlamaForCausalLM(config).to(getattr(torch, dtype))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


def run(kind: str, model: Path, run_dir: Path, steps: int) -> dict:
    overrides = [
        "model=hf",
        f"model.path={model}",
        f"trainer.prompts_per_step={2 if kind == 'one' else 4}",  # the step's batch over every process: 2 each
        "trainer.group_size=4",
        f"trainer.max_steps={steps}",
        "generator.max_new_tokens=16",
        "trainer.eval.every=0",
        "trainer.eval.max_prompts=2",
        "trainer.eval.samples=1",
        "trainer.checkpoint.every=0",
        f"reward.ladder_dir={run_dir.parent / 'ladders'}",
        f"run_dir={run_dir}",
    ]
    env = dict(os.environ)
    if kind == "one":
        command = [sys.executable, "-m", "tsrl.commands.train", *overrides]
    else:
        config = {"ddp": "cpu_ddp.yaml", "zero3": "cpu_zero3.yaml"}[kind]
        if kind == "ddp":
            env["ACCELERATE_USE_CPU"] = "true"
        else:
            env.pop("ACCELERATE_USE_CPU", None)
        command = [
            str(BIN / "accelerate"),
            "launch",
            "--config_file",
            str(ROOT / "configs/accelerate" / config),
            "-m",
            "tsrl.commands.train",
            *overrides,
        ]
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    if result.returncode != 0:
        sys.exit(f"{kind} failed:\n{result.stderr[-3000:]}")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {
        "peak_gib": rows[-1]["memory/peak_gib"],
        "s_per_step": rows[-1]["time/step_s"],
        "update_s": rows[-1]["time/update_s"],
        "wall_s": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tsrl-scale-") as scratch:
        model = Path(scratch) / "model"
        params = build_model(model, args.hidden, args.layers)
        print(
            f"model: {params / 1e6:.1f}M parameters (float32: {params * 4 / 2**30:.2f} GiB of weights; "
            f"with gradients and AdamW's two moments {params * 16 / 2**30:.2f} GiB)"
        )
        print(
            "\n| launch | processes | peak memory per process | s/step (last) | update s | wall |"
            "\n|---|---|---|---|---|---|"
        )
        for kind, processes in (("one", 1), ("ddp", 2), ("zero3", 2)):
            r = run(kind, model, Path(scratch) / kind, args.steps)
            print(
                f"| {kind} | {processes} | {r['peak_gib']:.2f} GiB | {r['s_per_step']:.2f} | {r['update_s']:.2f} | "
                f"{r['wall_s']:.0f} s |",
                flush=True,
            )


if __name__ == "__main__":
    main()
