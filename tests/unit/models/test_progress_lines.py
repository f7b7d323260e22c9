"""Long work is never silent: a tiny-policy build says what it builds, why and where, then reports its progress;
a judge batch that runs long reports how many requests are answered."""

import logging

import pytest

from tsrl.errors import ConfigError
from tsrl.models import policy_source, tiny
from tsrl.models.tiny import TinyModelConfig, tiny_source, train_tokenizer, warmstart_batches
from tsrl.progress import duration
from tsrl.tasks import HumorConfig, build_task
from tsrl.tasks.stories import StoriesConfig


def test_a_tiny_policy_build_says_what_why_and_where_then_reports_progress(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(tiny, "PROGRESS_EVERY_S", 0.0)  # every step reports
    cfg = TinyModelConfig(
        warmstart_steps=3, hidden_size=16, num_layers=1, num_heads=2, vocab_size=400, cache_dir=str(tmp_path)
    )
    task = build_task(HumorConfig(max_prompts=4))
    with caplog.at_level(logging.INFO, logger="tsrl"):
        source = tiny_source(cfg, task)
    lines = [r.getMessage() for r in caplog.records if r.name == "tsrl"]
    assert lines[0].startswith("no cached tiny policy for task=humor with these 4 training prompts")
    assert str(source.path) in lines[0] and "a warm start of at most 3 steps" in lines[0]
    assert [line.split(",")[0] for line in lines[1:4]] == [
        f"tiny policy for task=humor: warm-start step {i}/3" for i in (1, 2, 3)
    ]
    assert lines[-1].startswith("tiny policy for task=humor built in")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tsrl"):
        assert tiny_source(cfg, task).path == source.path  # cached: nothing to say
    assert not [r for r in caplog.records if r.name == "tsrl"]


def small(**kw) -> TinyModelConfig:
    return TinyModelConfig(hidden_size=16, num_layers=1, num_heads=2, vocab_size=400, **kw)


def padded(batch) -> int:
    return len(batch) * max(len(ids) for ids, _ in batch)


def test_a_warm_start_packs_batches_by_padded_tokens_and_stops_at_its_token_budget():
    task = build_task(StoriesConfig())
    tokenizer = train_tokenizer([a.text for p in task.prompts("train") for a in p.anchors], 400)
    cfg = small(warmstart_steps=10_000, warmstart_tokens=40_000, warmstart_batch_tokens=2_000)
    batches = warmstart_batches(tokenizer, task, cfg, cap=512)
    assert all(padded(b) <= 2_000 or len(b) == 1 for b in batches)
    assert all(len(ids) <= 512 for b in batches for ids, _ in b)
    spent = [padded(b) for b in batches]
    assert sum(spent[:-1]) < 40_000 <= sum(spent)  # it stops with the batch that spends the budget
    assert max(len(b) for b in batches) < 32  # stories are long: fewer than the fixed 32 examples a batch
    step_capped = warmstart_batches(tokenizer, task, small(warmstart_steps=3, warmstart_batch_tokens=2_000), cap=512)
    assert step_capped == batches[:3]  # the same stream of examples, cut by warmstart_steps
    v1 = small(warmstart_steps=4, warmstart_tokens=0, warmstart_batch_tokens=0)
    fixed = warmstart_batches(tokenizer, task, v1, cap=512)
    assert [len(b) for b in fixed] == [32, 32, 32, 32]  # no budget, no packing: the v1 recipe


def test_negative_warm_start_settings_are_one_sentence():
    with pytest.raises(ConfigError, match="model.warmstart_steps, model.warmstart_tokens"):
        TinyModelConfig(warmstart_tokens=-1)


def test_a_subset_of_prompts_shares_the_whole_splits_tiny_policy(tmp_path, caplog):
    cfg = small(warmstart_steps=1, cache_dir=str(tmp_path))
    whole = policy_source(cfg, HumorConfig())
    with caplog.at_level(logging.INFO, logger="tsrl"):
        subset = policy_source(cfg, HumorConfig(max_prompts=4))
    assert subset.path == whole.path
    assert not [r for r in caplog.records if r.name == "tsrl"]  # found in the cache, nothing rebuilt
    assert len(list(tmp_path.iterdir())) == 1


@pytest.mark.parametrize("seconds, text", [(12, "12 s"), (600, "10 min"), (9000, "2.5 h")])
def test_durations_read_as_a_person_would_say_them(seconds, text):
    assert duration(seconds) == text
