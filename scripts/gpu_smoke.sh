#!/usr/bin/env bash
# Real ZeRO-3 and LoRA steps of tsrl on one GPU, with timings and peak memory: the one prepared check for a
# single-GPU machine with no internet (torch, transformers, accelerate and peft installed; vLLM absent).
#
#   scripts/gpu_smoke.sh prepare     # here, with the package index: wheels for what the GPU machine lacks
#   scripts/gpu_smoke.sh run         # there: installs the wheels offline, builds a model, runs 3 jobs
#   SMOKE_CPU=1 scripts/gpu_smoke.sh run   # the same jobs on CPU (2 processes, small model): checks the script
#
# Jobs (each `trainer.max_steps` steps of B 8 prompts × G 8 completions, generator=hf, judge=rubric_sim):
#   ddp    accelerate, one process, no DeepSpeed            (the baseline)
#   zero3  DeepSpeed ZeRO-3 (configs/accelerate/gpu1_zero3.yaml, bf16)
#   lora   ZeRO-3 + LoRA r=16 on every linear layer
# Prints per job: median step time (first step left out), its split (generate / score / update / sync),
# completion tokens per second and peak memory (GPU: max allocated; CPU: max RSS), from metrics.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-run}"
WHEELS="${WHEELS:-wheels}"
OUT="${OUT:-/tmp/tsrl_gpu_smoke}"
PY="${PYTHON:-python3}"

if [[ "$MODE" == "prepare" ]]; then
  mkdir -p "$WHEELS"
  # DeepSpeed ships as a source archive; build a pure-Python wheel (its ops compile at run time if needed). The GPU
  # machine's image (Python 3.12) has torch, transformers, accelerate, peft, numpy, psutil, msgpack, ninja, einops
  # and py-cpuinfo; it lacks DeepSpeed's pydantic and Hydra with its parser runtime (a source archive: built here).
  DS_BUILD_OPS=0 "$PY" -m pip wheel -q --no-deps -w "$WHEELS" deepspeed==0.19.8 antlr4-python3-runtime==4.9.3
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$WHEELS" \
    pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 hjson==3.1.0 \
    hydra-core==1.3.8 omegaconf==2.3.1
  ls -la "$WHEELS"
  exit 0
fi

if [[ -n "${SMOKE_CPU:-}" ]]; then
  LAUNCH="configs/accelerate/cpu_zero3.yaml"; HIDDEN=64; LAYERS=2; TOKENS=16; STEPS="${STEPS:-3}"; EXTRA=()
else
  LAUNCH="configs/accelerate/gpu1_zero3.yaml"; HIDDEN="${HIDDEN:-1024}"; LAYERS="${LAYERS:-16}"; TOKENS=128
  STEPS="${STEPS:-6}"; EXTRA=()
  if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --find-links "$WHEELS" --no-deps "$WHEELS"/*.whl
  fi
  "$PY" -m pip install -q --no-deps --no-build-isolation -e . 2>/dev/null || "$PY" -m pip install -q --no-deps -e .
  "$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0))"
fi
mkdir -p "$OUT"

# A Llama from config (random weights: timing and memory only) with the tiny policy's locally trained tokenizer.
MODEL="$OUT/model-h$HIDDEN-l$LAYERS"
"$PY" - "$MODEL" "$HIDDEN" "$LAYERS" <<'EOF'
import sys
from pathlib import Path

sys.path.insert(0, "benchmarks")
from scale_memory import build_model

target = Path(sys.argv[1])
if not (target / "config.json").is_file():
    params = build_model(target, int(sys.argv[2]), int(sys.argv[3]), positions=1024)
    print(f"model: {params / 1e6:.1f}M parameters at {target}")
EOF

COMMON=(model=hf "model.path=$MODEL" trainer.prompts_per_step=8 trainer.group_size=8 "trainer.max_steps=$STEPS"
        trainer.micro_batch_size=16 "generator.max_new_tokens=$TOKENS" generator.prompts_per_call=8
        trainer.eval.every=0 trainer.eval.max_prompts=8 trainer.eval.samples=1 trainer.checkpoint.every=0
        "reward.ladder_dir=$OUT/ladders")

run_job() {  # name, launcher config (or "none"), extra overrides...
  local name="$1" config="$2"; shift 2
  local dir="$OUT/$name"; rm -rf "$dir"
  local start; start=$(date +%s)
  if [[ "$config" == "none" ]]; then
    "$PY" -m tsrl.commands.train "${COMMON[@]}" "run_dir=$dir" "$@" > "$OUT/$name.log" 2>&1
  else
    accelerate launch --config_file "$config" -m tsrl.commands.train "${COMMON[@]}" "run_dir=$dir" "$@" \
        > "$OUT/$name.log" 2>&1
  fi || { echo "job $name failed, log: $OUT/$name.log"; tail -30 "$OUT/$name.log"; return 1; }
  echo "job $name: $(( $(date +%s) - start )) s wall"
}

run_job ddp none
run_job zero3 "$LAUNCH"
run_job lora "$LAUNCH" model.lora.r=16 model.lora.alpha=32 trainer.lr=1e-4

"$PY" - "$OUT" <<'EOF'
import json, statistics, sys
from pathlib import Path

out = Path(sys.argv[1])
print(f"\n| job | s/step | generate | score | update | sync | tokens/s | peak GiB |\n|---|---|---|---|---|---|---|---|")
for job in ("ddp", "zero3", "lora"):
    rows = [json.loads(line) for line in (out / job / "metrics.jsonl").read_text().splitlines()][1:] or []
    if not rows:
        print(f"| {job} | (no steady-state steps) |"); continue
    med = lambda key: statistics.median(r[key] for r in rows)
    print(f"| {job} | {med('time/step_s'):.2f} | {med('time/generate_s'):.2f} | {med('time/score_s'):.2f} | "
          f"{med('time/update_s'):.2f} | {med('time/sync_s'):.3f} | {med('throughput/tokens_per_s'):.0f} | "
          f"{max(r['memory/peak_gib'] for r in rows):.2f} |")
EOF
