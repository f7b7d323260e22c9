"""A file tsrl reads back that is unusable or corrupt ends in one sentence naming the file and the fix (a
DataError, which the command line prints without a traceback), never in a parser's traceback."""

import json
from types import SimpleNamespace

import pytest

from tsrl.config import TrainerConfig
from tsrl.errors import DataError, read_json
from tsrl.judging.cache import VerdictCache
from tsrl.rewards.ladder import load_matches
from tsrl.testing.fakes import NeverAsked
from tsrl.training.checkpoint import STATE_FILE, finished_run, load_checkpoint


def test_read_json_names_the_file_what_is_wrong_and_the_fix(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{not json")
    with pytest.raises(DataError, match=rf"The summary {path} is unusable \(JSONDecodeError: .*\); delete it\.$"):
        read_json(path, "summary", "delete it.")
    with pytest.raises(DataError, match="FileNotFoundError"):
        read_json(tmp_path / "absent.json", "summary", "delete it.")


def test_a_corrupt_verdict_cache_is_named_with_the_way_out(tmp_path):
    path = tmp_path / "verdicts.sqlite"
    path.write_bytes(b"this is not a database, just bytes " * 100)
    with pytest.raises(DataError, match=rf"verdict cache {path} is not a usable SQLite database .*judge.cache_path"):
        VerdictCache(NeverAsked(), path, "judge")


def test_a_corrupt_stored_ladder_says_how_to_rebuild_it(tmp_path):
    path = tmp_path / "ladder.jsonl"
    path.write_text('{"prompt_id": "p", "matches": [[0, 1, 1.0]]}\n{"prompt_id": "q", "matches": [[0, 1\n')
    with pytest.raises(DataError, match=rf"stored ladder {path} is unusable .*reward.rebuild=true"):
        load_matches(path)
    path.write_text('{"prompt_id": "p", "matches": [[0, 1]]}\n')  # valid JSON, wrong shape
    with pytest.raises(DataError, match="stored ladder"):
        load_matches(path)


def test_an_unusable_checkpoint_is_named_before_and_while_loading(tmp_path):
    ckpt = tmp_path / "checkpoints" / "step_000002"
    ckpt.mkdir(parents=True)
    (ckpt / STATE_FILE).write_text('{"step": 2, ')
    untouched = SimpleNamespace(load_state=lambda path: pytest.fail("the weights were read before the state"))
    with pytest.raises(DataError, match=rf"checkpoint state {ckpt / STATE_FILE} is unusable .*resume=never"):
        load_checkpoint(untouched, ckpt)
    (ckpt / STATE_FILE).write_text(json.dumps({"step": 2}))

    def broken(path):
        raise RuntimeError("Error(s) in loading state_dict: size mismatch")

    with pytest.raises(DataError, match=rf"checkpoint {ckpt} could not be loaded \(RuntimeError: .*size mismatch\)"):
        load_checkpoint(SimpleNamespace(load_state=broken), ckpt)
    assert load_checkpoint(SimpleNamespace(load_state=lambda path: None), ckpt) == {"step": 2}


def test_a_corrupt_end_of_run_mark_is_named(tmp_path):
    (tmp_path / "done.json").write_text("garbage")
    (tmp_path / "eval.json").write_text("{}")
    tcfg = TrainerConfig()
    tcfg.checkpoint.resume = "auto"
    with pytest.raises(DataError, match=rf"end-of-run mark {tmp_path / 'done.json'} is unusable"):
        finished_run(tmp_path, tcfg)
