"""Long work is never silent: a tiny-policy build says what it builds, why and where, then reports its progress;
a judge batch that runs long reports how many requests are answered."""

import logging

import pytest

from tsrl.models import tiny
from tsrl.models.tiny import TinyModelConfig, tiny_source
from tsrl.tasks import HumorConfig, build_task


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
    assert str(source.path) in lines[0] and "3 warm-start steps" in lines[0]
    assert [line.split(",")[0] for line in lines[1:4]] == [
        f"tiny policy for task=humor: warm-start step {i}/3" for i in (1, 2, 3)
    ]
    assert lines[-1].startswith("tiny policy for task=humor built in")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tsrl"):
        assert tiny_source(cfg, task).path == source.path  # cached: nothing to say
    assert not [r for r in caplog.records if r.name == "tsrl"]


@pytest.mark.parametrize("seconds, text", [(12, "12 s"), (600, "10 min"), (9000, "2.5 h")])
def test_durations_read_as_a_person_would_say_them(seconds, text):
    assert tiny.duration(seconds) == text
