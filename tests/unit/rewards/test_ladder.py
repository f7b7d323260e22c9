import json

import numpy as np
import pytest

from tsrl.errors import ConfigError
from tsrl.rewards import LadderConfig, LadderRegime, RegimeContext
from tsrl.rewards.ladder import Rung, select_rungs
from tsrl.testing.fakes import NumberTask, ScriptedJudge, number_prompt
from tsrl.types import Anchor, Group, Rollout


def group(prompt, texts):
    return Group(prompt=prompt, prompt_ids=[1], rollouts=[Rollout(t, [1], [0.0], False) for t in texts])


def regime(task, tmp_path, judge=None, **kw):
    judge = judge or ScriptedJudge()
    ctx = RegimeContext(task, judge, "scripted", tmp_path / "run")
    return LadderRegime(LadderConfig(ladder_dir=str(tmp_path / "ladders"), **kw), ctx), judge


def test_ladder_ranks_anchors_by_bradley_terry(number_task, tmp_path):
    ladder, judge = regime(number_task, tmp_path)
    assert len(judge.requests) == 2 * 6  # round-robin K(K-1)/2 = 6 pairs per prompt
    ranked = [r.anchor.text.split()[0] for r in ladder.ladders["p0"]]
    assert ranked == ["q=3", "q=2", "q=1", "q=0"]
    strengths = [r.strength for r in ladder.ladders["p0"]]
    assert strengths == sorted(strengths, reverse=True)


def test_reward_is_win_rate_over_k_anchors_with_half_for_ties(number_task, tmp_path):
    ladder, judge = regime(number_task, tmp_path, k=4)
    p0 = number_task.prompts("train")[0]
    batch = ladder.score([group(p0, ["q=2.5 a", "q=-1 b", "q=2 c"])])
    # vs anchors q = 3, 2, 1, 0: 2.5 beats 2,1,0 -> 3/4; -1 beats none -> 0; 2 ties 2, beats 1,0 -> 2.5/4
    assert np.allclose(batch.rewards, [[0.75, 0.0, 0.625]])
    assert batch.metrics["reward/comparisons_per_sample"] == 4.0


def test_spread_selects_evenly_spaced_rungs_including_the_best():
    rungs = [Rung(Anchor(str(i)), -i) for i in range(5)]
    assert [r.anchor.text for r in select_rungs(rungs, 1, "spread")] == ["0"]
    assert [r.anchor.text for r in select_rungs(rungs, 2, "spread")] == ["0", "4"]
    assert [r.anchor.text for r in select_rungs(rungs, 3, "spread")] == ["0", "2", "4"]
    assert len(select_rungs(rungs, 5, "spread")) == 5


def test_default_selection_is_nested_over_the_papers_k_sweep():
    """TSRL sweeps k ∈ {1, 2, 4, 5, 6, 8, 10} (§4.2). With the default rule every k-set contains the smaller ones,
    so the sweep varies the number of anchors only; `spread` is not nested (its k = 6 set drops rank 3 and rank 6 of
    its k = 4 set), `top` is nested and takes the strongest."""
    rungs = [Rung(Anchor(str(i)), -i) for i in range(10)]
    sweep = (1, 2, 4, 5, 6, 8, 10)
    for rule in ("nested", "top"):
        sets = [{r.anchor.text for r in select_rungs(rungs, k, rule)} for k in sweep]
        assert all(small < large for small, large in zip(sets, sets[1:])), rule
        assert [len(s) for s in sets] == list(sweep)
    spread = [{r.anchor.text for r in select_rungs(rungs, k, "spread")} for k in sweep]
    assert not all(small < large for small, large in zip(spread, spread[1:]))
    nested = [r.anchor.text for r in select_rungs(rungs, 4)]
    assert nested[0] == "0" and "9" in nested  # spans the ladder: best and worst from k = 2 on
    assert [r.anchor.text for r in select_rungs(rungs, 3, "top")] == ["0", "1", "2"]
    assert LadderConfig().select == "nested"
    with pytest.raises(ConfigError, match="reward.select"):
        LadderConfig(select="random")


def test_k_larger_than_available_anchors_is_a_clear_error(number_task, tmp_path):
    with pytest.raises(ValueError, match=r"reward.k=5 .* has only 4 anchors; set reward.k to at most 4"):
        regime(number_task, tmp_path, k=5)


def test_stored_ladder_is_reused_without_judging_again(number_task, tmp_path):
    first, _ = regime(number_task, tmp_path)
    stored = list((tmp_path / "ladders").glob("*.jsonl"))
    assert len(stored) == 1
    rows = [json.loads(line) for line in stored[0].read_text().splitlines()]
    assert {r["prompt_id"] for r in rows} == {"p0", "p1"}
    second, judge = regime(number_task, tmp_path)
    assert judge.requests == []
    assert second.ladders["p1"][0].anchor.text == first.ladders["p1"][0].anchor.text
    rebuilt, judge = regime(number_task, tmp_path, rebuild=True)
    assert len(judge.requests) == 12
    assert (tmp_path / "run" / "ladder.jsonl").is_file()


def test_a_stored_ladder_is_re_ranked_from_its_matches_and_an_old_file_is_rebuilt(number_task, tmp_path):
    """Stored strengths are only for reading: a later run fits them again from the stored matches (so a change
    in the fit can never leave stale strengths behind); a file without matches (an older format) is rebuilt."""
    first, _ = regime(number_task, tmp_path)
    stored = next((tmp_path / "ladders").glob("*.jsonl"))
    rows = [json.loads(line) for line in stored.read_text().splitlines()]
    assert all(len(r["matches"]) == 6 for r in rows)  # (i, j, p) per round-robin pair
    for row in rows:  # strengths from some other fit
        row["anchors"] = [dict(a, strength=0.0) for a in row["anchors"]]
    stored.write_text("".join(json.dumps(r) + "\n" for r in rows))
    again, judge = regime(number_task, tmp_path)
    assert judge.requests == [] and again.build_calls == 0
    assert [r.strength for r in again.ladders["p0"]] == pytest.approx([r.strength for r in first.ladders["p0"]])

    for row in rows:
        del row["matches"]
    stored.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rebuilt, judge = regime(number_task, tmp_path)
    assert len(judge.requests) == 12 and rebuilt.build_calls == 12
    assert all("matches" in json.loads(line) for line in stored.read_text().splitlines())


def test_missing_verdicts_are_excluded_and_empty_rows_drop_the_group(tmp_path):
    prompt = number_prompt("p", [1, 0])
    task = NumberTask([prompt])
    ladder, judge = regime(task, tmp_path, k=2)
    judge.table = {("q=5 x", "q=1 anchor 0"): None, ("q=5 y", "q=1 anchor 0"): None, ("q=5 y", "q=0 anchor 1"): None}
    batch = ladder.score([group(prompt, ["q=5 x", "q=-3 z"]), group(prompt, ["q=5 y", "q=-3 z"])])
    assert batch.rewards[0].tolist() == [1.0, 0.0]  # x: only the verdict vs anchor 1 counts
    assert np.isnan(batch.rewards[1]).all()  # y has no verdict at all: whole group dropped
    assert batch.metrics["reward/missing_verdicts"] == 3.0
    assert batch.metrics["reward/dropped_groups"] == 1.0


def test_scoring_a_prompt_without_a_ladder_says_so(number_task, tmp_path):
    ladder, _ = regime(number_task, tmp_path)
    with pytest.raises(ValueError, match="Prompt 'elsewhere' has no anchor ladder"):
        ladder.score([group(number_prompt("elsewhere", [1, 0]), ["q=1 a", "q=0 b"])])
