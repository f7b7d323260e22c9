"""Scale-out on CPU for real: 2 processes under DDP (gloo) and under DeepSpeed ZeRO-3, launched by
`accelerate launch` with the shipped configs/accelerate files, against one process.

- The same update: one process with every group, or two with half each, end with the same weights (full
  fine-tuning and LoRA; measured max |Δw| ≈ 3e-6 after 6 Adam steps at lr 5e-3, float32 round-off), and
  with 2 more updates taken as trainer.pipeline=overlap takes them (the ratio against the rollouts' sampling
  log-probs) the bound of 2e-5 still holds.
- The judge is paid once: the self-bootstrapped ladder (built at start and rebuilt every step here) costs a
  2-process run the judge calls it costs one process.
- A ZeRO-3 checkpoint resumes the same trajectory, and its consolidated policy folder loads with from_pretrained.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from tsrl.testing.cli import launch as launch_processes
from tsrl.testing.cli import printed_spend, read_metrics, tiny_overrides

UPDATE_SCRIPT = str(Path(__file__).with_name("dist_update.py"))

pytestmark = pytest.mark.slow


def launch(kind: str | None, args: list[str], cache_dir: Path) -> subprocess.CompletedProcess:
    """`args` (a script or `-m tsrl.commands.train` with overrides) on one process (kind None) or two (ddp | zero3)."""
    result = launch_processes(kind, args, cache_dir)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def update(kind: str | None, lora: bool, cache_dir: Path, out: Path, checkpointing: bool = False) -> dict:
    launch(
        kind, [UPDATE_SCRIPT, str(out), *(["lora"] if lora else []), *(["checkpointing"] * checkpointing)], cache_dir
    )
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def one_process(cache_dir, tmp_path_factory):
    """dist_update.py on one process, full fine-tuning and LoRA (computed once)."""
    folder = tmp_path_factory.mktemp("one")
    return {lora: update(None, lora, cache_dir, folder / f"{lora}.json") for lora in (False, True)}


@pytest.mark.parametrize(
    "kind,lora,checkpointing",
    [("ddp", False, False), ("zero3", False, False), ("zero3", True, False), ("zero3", True, True)],
    ids=["ddp", "zero3", "zero3_lora", "zero3_lora_checkpointing"],
)
def test_two_processes_take_the_update_one_process_takes(one_process, cache_dir, tmp_path, kind, lora, checkpointing):
    """Last case: gradient checkpointing under ZeRO-3 with frozen base weights (LoRA), whose recompute must gather
    them again, takes the update one process takes without checkpointing."""
    two = update(kind, lora, cache_dir, tmp_path / "two.json", checkpointing)
    one = one_process[lora]
    assert two["processes"] == 2 and one["processes"] == 1
    assert two["checkpointing"] == checkpointing and not one["checkpointing"]
    assert two["zero_stage"] == two["partitioned_on_load"] * 3 == (3 if kind == "zero3" else 0)
    assert two["losses"] == pytest.approx(one["losses"], rel=1e-4, abs=1e-7)
    assert sorted(two["weights"]) == sorted(one["weights"])  # merged under LoRA: the base model's names
    for name, values in one["weights"].items():
        assert torch.allclose(torch.tensor(two["weights"][name]), torch.tensor(values), atol=2e-5), name
    moved = max(abs(a - b) for name in one["weights"] for a, b in zip(one["weights"][name], two["weights"][name]))
    assert moved < 2e-5


def train_overrides(cache_dir: Path, run_dir: Path, *extra: str) -> list[str]:
    """`-m tsrl.commands.train` with the tiny policy (regimes with a ladder of their own drop the shared
    reward.ladder_dir)."""
    small = tiny_overrides(cache_dir)
    if any(o.startswith("reward=") for o in extra):
        small = [o for o in small if not o.startswith("reward.ladder_dir=")]
    return ["-m", "tsrl.commands.train", *small, f"run_dir={run_dir}", *extra]


HELD_OUT = [
    "trainer.max_steps=1",
    "trainer.eval.max_prompts=5",
    "trainer.eval.samples=2",
    "generator.prompts_per_call=2",
]


def step_zero_evaluation(run_dir: Path) -> tuple[list[tuple], dict]:
    """The run's step-0 held-out samples (prompt, sample, completion) in file order, and its step-0 numbers."""
    rows = [json.loads(line) for line in (run_dir / "heldout.jsonl").read_text().splitlines()]
    samples = [(r["prompt_id"], r["sample"], r["completion"]) for r in rows if r["step"] == 0]
    return samples, json.loads((run_dir / "eval.json").read_text())["start"]


@pytest.fixture(scope="module")
def one_process_evaluation(cache_dir, tmp_path_factory):
    """The step-0 evaluation of one process (5 held-out prompts in chunks of 2: 3 chunks)."""
    run_dir = tmp_path_factory.mktemp("eval_one") / "run"
    launch(None, train_overrides(cache_dir, run_dir, *HELD_OUT), cache_dir)
    return step_zero_evaluation(run_dir)


@pytest.mark.parametrize("kind", ["ddp", "zero3"])
def test_held_out_samples_and_numbers_do_not_depend_on_the_process_count(
    one_process_evaluation, cache_dir, tmp_path, kind
):
    """Two processes share the 3 chunks round-robin (the second generates a throwaway group in the second round,
    which ZeRO-3's collective forward needs) and write the samples and the win-rate one process writes."""
    launch(kind, train_overrides(cache_dir, tmp_path / "run", *HELD_OUT), cache_dir)
    samples, numbers = step_zero_evaluation(tmp_path / "run")
    one_samples, one_numbers = one_process_evaluation
    assert len(one_samples) == 10 and len({text for _, _, text in one_samples}) > 1
    assert samples == one_samples
    for key in ("winrate", "winrate_all", "mean_length", "repeated_bigrams", "judge_calls"):
        assert numbers[key] == one_numbers[key], key


def test_two_processes_sample_what_one_process_samples_and_state_the_global_batch(cache_dir, tmp_path):
    """trainer.prompts_per_step=4 is the step's batch on any number of processes: one process generates the 4
    groups, two DDP processes 2 each, and both runs print 4 groups per step. Every completion is drawn under its own
    seed (run seed, place of its prompt in the run's prompt stream, sample index), so step 1 — the same weights
    everywhere — has the same completions for the same prompts: process 0's two groups (samples.jsonl is the main
    process's) are the one-process run's first two, and process 1's show in the step's averages."""
    common = [
        "trainer.prompts_per_step=4",
        "trainer.max_steps=1",
        "logger.samples_every=1",
        "trainer.eval.max_prompts=2",
    ]
    runs = {}
    for kind in (None, "ddp"):
        run_dir = tmp_path / str(kind)
        printed = launch(kind, train_overrides(cache_dir, run_dir, *common), cache_dir).stdout
        rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
        runs[kind] = (printed_spend(printed)["step"], rows, read_metrics(run_dir)[0])
        assert "per step: " in printed and " 4 groups × " in printed, printed[-2000:]
    (one_step, one_rows, one), (two_step, two_rows, two) = runs[None], runs["ddp"]
    assert one_step == two_step
    assert len(one_rows) == 4 * 4 and len(two_rows) == 2 * 4  # G = 4; process 0 logs its own 2 groups
    fields = ("step", "prompt_id", "completion", "reward")
    assert [[r[f] for f in fields] for r in two_rows] == [[r[f] for f in fields] for r in one_rows[:8]]
    assert len({r["completion"] for r in one_rows}) > 4  # sampled, not one text
    for key in ("completion/length_mean", "completion/truncated_frac", "reward/mean", "judge/calls"):
        assert two[key] == pytest.approx(one[key], rel=1e-6), key


def test_self_bootstrap_ladders_are_judged_once_for_every_process(cache_dir, tmp_path):
    """reward=self_bootstrap rebuilds its ladder from policy samples at start and every step (period=1). With
    two processes the main one judges each round-robin and the other loads it: the same calls as one process."""
    common = [
        "reward=self_bootstrap",
        "reward.ladder.k=3",
        "reward.period=1",
        "task.max_prompts=4",
        "trainer.max_steps=2",
        "trainer.checkpoint.every=0",
    ]
    runs = {}
    for kind in (None, "ddp"):
        run_dir = tmp_path / str(kind)
        launch(kind, train_overrides(cache_dir, run_dir, *common), cache_dir)
        setup = json.loads((run_dir / "setup.json").read_text())["judge_calls_setup"]
        rows = read_metrics(run_dir)
        runs[kind] = (setup, [r["bootstrap/refresh_calls"] for r in rows], [r["bootstrap/refreshes"] for r in rows])
    assert runs[None][0] > 0 and runs[None][1][0] > 0
    assert runs["ddp"] == runs[None]


# 4 steps of 4 prompts (2 per process) with a checkpoint at step 2, one prompt per generation call (so that a
# streamed run streams two arrivals per process): the uninterrupted ZeRO-3 run the resume and streaming tests compare
# against.
ZERO3_RUN = [
    "trainer.max_steps=4",
    "trainer.prompts_per_step=4",
    "trainer.checkpoint.every=2",
    "generator.prompts_per_call=1",
]


@pytest.fixture(scope="module")
def zero3_whole(cache_dir, tmp_path_factory) -> Path:
    """The run directory of ZERO3_RUN on 2 ZeRO-3 processes (trainer.pipeline=sync)."""
    run_dir = tmp_path_factory.mktemp("zero3_whole") / "run"
    launch("zero3", train_overrides(cache_dir, run_dir, *ZERO3_RUN), cache_dir)
    return run_dir


def test_zero3_checkpoint_resumes_the_same_trajectory(zero3_whole, cache_dir, tmp_path):
    """2-process ZeRO-3: 4 steps in one go vs 2 steps, stop, resume=auto — identical metrics; the checkpoint
    holds DeepSpeed's partitioned state and one consolidated policy folder."""
    whole, split = zero3_whole, tmp_path / "split"
    launch("zero3", train_overrides(cache_dir, split, *ZERO3_RUN, "trainer.max_steps=2"), cache_dir)
    launch("zero3", train_overrides(cache_dir, split, *ZERO3_RUN, "trainer.checkpoint.resume=auto"), cache_dir)
    a, b = read_metrics(whole), read_metrics(split)
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for key in ("reward/mean", "train/loss", "completion/length_mean", "train/grad_norm", "judge/calls"):
        assert [r[key] for r in a] == pytest.approx([r[key] for r in b], rel=1e-5, abs=1e-9), key
    checkpoint = whole / "checkpoints" / "step_000004"
    assert (checkpoint / "pytorch_model").is_dir()  # DeepSpeed's own, one shard of the state per process
    from transformers import AutoModelForCausalLM

    policy = AutoModelForCausalLM.from_pretrained(checkpoint / "policy")
    assert sum(p.numel() for p in policy.parameters()) > 10_000  # whole tensors, not ZeRO-3's empty partitions


def test_lora_run_saves_the_adapter_and_a_merged_model(cache_dir, tmp_path):
    """model.lora.r=4 on one process: only the adapter trains, the reference is the base (KL on), and the
    checkpoint holds the adapter (peft) and a merged model equal to base + adapter."""
    run_dir = tmp_path / "lora"
    launch(
        None,
        train_overrides(
            cache_dir, run_dir, "model.lora.r=4", "algo.kl_beta=0.05", "trainer.max_steps=2", "trainer.lr=0.01"
        ),
        cache_dir,
    )
    rows = read_metrics(run_dir)
    assert rows[-1]["train/kl"] > 0  # the adapter moved the policy away from the base
    policy = run_dir / "checkpoints" / "step_000002" / "policy"
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    merged = AutoModelForCausalLM.from_pretrained(policy)
    base_path = json.loads((policy / "adapter" / "adapter_config.json").read_text())["base_model_name_or_path"]
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_path), policy / "adapter")
    ids = torch.tensor([[5, 17, 42, 99, 7]])
    assert torch.allclose(merged(ids).logits, adapted.merge_and_unload()(ids).logits, atol=1e-5)
    base = AutoModelForCausalLM.from_pretrained(base_path)
    assert not torch.allclose(merged(ids).logits, base(ids).logits, atol=1e-4)  # the adapter trained


@pytest.mark.parametrize("regime", ["reward_model", "intuitor"])
def test_regimes_that_read_the_policy_run_under_zero3(cache_dir, tmp_path, regime):
    """Under ZeRO-3 no process holds whole weights: the reward model's frozen initial policy is a DeepSpeed
    inference engine of its own and Intuitor reads the live policy, both through the Learner's PolicyView."""
    extra = {
        "reward_model": [f"reward.ladder.ladder_dir={cache_dir / 'ladders'}", f"reward.rm_dir={tmp_path / 'rm'}"],
        "intuitor": [],
    }[regime]
    run_dir = tmp_path / regime
    launch(
        "zero3",
        train_overrides(cache_dir, run_dir, f"reward={regime}", "task.max_prompts=4", "trainer.max_steps=1", *extra),
        cache_dir,
    )
    rows = read_metrics(run_dir)
    assert len(rows) == 1 and rows[0]["reward/std"] > 0


@pytest.mark.parametrize("algo", ["sft", "dpo"])
def test_offline_baselines_take_the_step_one_process_takes_under_zero3(cache_dir, tmp_path, algo):
    """algo=sft and algo=dpo go through the same Learner: two ZeRO-3 processes with 2 prompts each log the
    losses (and DPO's pair accuracy) one process logs with all 4 — the sampler shards one global batch of 4 and the
    losses are normalised over both processes. Evaluation runs on both and writes eval.json."""
    common = [
        f"algo={algo}",
        "trainer.prompts_per_step=4",
        "trainer.max_steps=3",
        "trainer.lr=5e-3",
        "trainer.eval.every=0",
        "trainer.eval.max_prompts=2",
        "task.max_prompts=8",
    ]
    runs = {}
    for kind in (None, "zero3"):
        run_dir = tmp_path / str(kind)
        launch(kind, train_overrides(cache_dir, run_dir, *common), cache_dir)
        runs[kind] = read_metrics(run_dir)
        assert [e["step"] for e in json.loads((run_dir / "eval.json").read_text())["history"]] == [0, 3]
    keys = ["train/loss"] + (["train/dpo/accuracy", "train/dpo/margin"] if algo == "dpo" else [])
    for key in keys:
        assert [r[key] for r in runs["zero3"]] == pytest.approx([r[key] for r in runs[None]], rel=1e-4, abs=1e-6), key
    assert all(r["judge/calls"] == 0 for rows in runs.values() for r in rows)
    assert runs[None][-1]["train/loss"] < runs[None][0]["train/loss"]


def test_an_overlapped_zero3_run_killed_after_a_checkpoint_resumes_onto_the_same_trajectory(cache_dir, tmp_path):
    """trainer.pipeline=overlap on 2 ZeRO-3 processes: each scores its own groups in its worker while the
    collectives of the update stay in step; a run directory holding only the step-2 checkpoint (its groups in
    flight included) resumes onto the uninterrupted run's steps 3 and 4."""
    import shutil

    whole, killed = tmp_path / "whole", tmp_path / "killed"
    common = ["trainer.pipeline=overlap", "trainer.max_steps=4"]
    launch("zero3", train_overrides(cache_dir, whole, *common, "trainer.checkpoint.every=2"), cache_dir)
    shutil.copytree(whole / "checkpoints" / "step_000002", killed / "checkpoints" / "step_000002")
    launch("zero3", train_overrides(cache_dir, killed, *common, "trainer.checkpoint.resume=auto"), cache_dir)
    a, b = read_metrics(whole), read_metrics(killed)
    assert [r["pipeline/staleness"] for r in a] == [0.0, 1.0, 1.0, 1.0] and [r["step"] for r in b] == [3, 4]
    for key in ("reward/mean", "train/loss", "completion/length_mean", "train/grad_norm", "judge/calls"):
        assert [r[key] for r in a[2:]] == pytest.approx([r[key] for r in b], rel=1e-5, abs=1e-9), key


def test_a_streamed_zero3_run_follows_its_sync_counterpart(zero3_whole, cache_dir, tmp_path):
    """trainer.pipeline=stream on 2 ZeRO-3 processes: each judges its own groups in its worker while generation's
    parameter gathers stay collective on the main thread; the trajectory is sync's (one prompt per generation
    call, so each process streams two arrivals), over the 4 steps of the sync run the resume test reads."""
    launch("zero3", train_overrides(cache_dir, tmp_path / "stream", *ZERO3_RUN, "trainer.pipeline=stream"), cache_dir)
    rows = {"sync": read_metrics(zero3_whole), "stream": read_metrics(tmp_path / "stream")}
    assert [r["step"] for r in rows["stream"]] == [1, 2, 3, 4]
    for key in ("reward/mean", "train/loss", "train/grad_norm", "completion/length_mean", "judge/calls"):
        assert [r[key] for r in rows["stream"]] == pytest.approx([r[key] for r in rows["sync"]], rel=1e-6), key
    assert all(r["time/score_wait_s"] <= r["time/score_s"] for r in rows["stream"])
