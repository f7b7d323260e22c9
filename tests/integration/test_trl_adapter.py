"""The TRL adapter inside a real `trl.GRPOTrainer` step on a tiny model (optional extra: pip install tsrl[trl])."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.trl]
trl = pytest.importorskip("trl", reason="the optional `trl` extra is not installed")


@pytest.fixture(scope="module")
def tiny_policy():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tsrl.models.tiny import train_tokenizer
    from tsrl.tasks import HumorConfig, HumorTask

    task = HumorTask(HumorConfig())
    corpus = [p.text for p in task.prompts("train")] + [a.text for p in task.prompts("train") for a in p.anchors]
    tokenizer = train_tokenizer(corpus, vocab_size=400)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    return LlamaForCausalLM(config), tokenizer, task


@pytest.mark.parametrize("regime, options", [("ladder", {"k": 2}), ("intuitor", {})])
def test_grpo_trainer_trains_on_tournament_rewards(tiny_policy, tmp_path, regime, options):
    options = {**options, "ladder_dir": str(tmp_path / "ladders")} if regime == "ladder" else options
    """One GRPOTrainer step with 2 prompts × 4 generations: TRL calls the adapter with whole groups, logs its
    reward under rewards/tsrl_<regime>, and the policy's weights change. intuitor reads the live policy."""
    import torch
    from datasets import Dataset

    from tsrl.integrations.trl import TournamentReward

    model, tokenizer, task = tiny_policy
    prompts = [p.text for p in task.prompts("train")[:4]]
    reward = TournamentReward(
        num_generations=4,
        regime=regime,
        prompts=prompts,
        run_dir=tmp_path / "run",
        policy=(model, tokenizer) if regime == "intuitor" else None,
        **options,
    )
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=8,
        max_steps=1,
        learning_rate=1e-2,
        use_cpu=True,
        bf16=False,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        seed=0,
        dataloader_num_workers=0,
    )
    before = [p.detach().clone() for p in model.parameters()]
    trainer = trl.GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[reward],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
    )
    trainer.train()
    logs = trainer.state.log_history[0]
    assert f"rewards/tsrl_{regime}/mean" in logs
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
