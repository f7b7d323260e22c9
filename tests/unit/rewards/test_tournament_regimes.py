"""The ranking-core regimes on real fakes: NumberTask (quality = the q number in the text) and
ScriptedJudge (the larger q wins; a table can make a verdict fail)."""

import json

import numpy as np
import pytest

from tsrl.errors import ConfigError
from tsrl.judging import Fallback
from tsrl.rewards import (
    AdaptiveConfig,
    ArenaConfig,
    ConstitutionalConfig,
    InBatchConfig,
    LadderConfig,
    OneAnchorConfig,
    RegimeContext,
    RubricConfig,
    VerifierConfig,
    build_regime,
)
from tsrl.tasks import HumorConfig, HumorTask
from tsrl.testing.fakes import NumberTask, ScriptedJudge, VerifiedNumberTask, number_prompt
from tsrl.types import Group, Rollout, Score


class GradingJudge(ScriptedJudge):
    """ScriptedJudge that also grades pointwise: the q number, or no grade for texts in `ungraded`."""

    def __init__(self, ungraded=()):
        super().__init__()
        self.ungraded = set(ungraded)

    def score(self, requests):
        return [
            Score(None, error="scripted failure")
            if r.response in self.ungraded
            else Score(NumberTask().quality(r.prompt, r.response))
            for r in requests
        ]


def group(prompt, qualities):
    return Group(prompt, [1], [Rollout(f"q={q} sample {k}", [1], [0.0], False) for k, q in enumerate(qualities)])


def make(cfg, tmp_path, judge=None, task=None):
    judge = judge or ScriptedJudge()
    task = task or VerifiedNumberTask([number_prompt("p0", [3, 1, 2, 0])])
    return build_regime(cfg, RegimeContext(task, judge, "scripted", tmp_path / "run")), judge, task


def test_rubric_reward_is_grade_over_ten_and_ungraded_drops_the_group(tmp_path):
    judge = GradingJudge(ungraded={"q=9 sample 1"})
    regime, _, task = make(RubricConfig(), tmp_path, judge)
    p = task.prompts("train")[0]
    batch = regime.score([group(p, [4, 7]), group(p, [1, 9])])
    assert batch.rewards[0].tolist() == [0.4, 0.7]
    assert np.isnan(batch.rewards[1]).all() and batch.metrics["reward/dropped_groups"] == 1
    assert batch.metrics["reward/comparisons_per_sample"] == 1


@pytest.mark.parametrize("output", ["rank", "winrate"])
def test_in_batch_plays_a_round_robin_and_a_transitive_judge_makes_rank_equal_win_rate(tmp_path, output):
    """Hard, transitive verdicts: win-rate = (beaten + ½·tied)/(G−1) = 1 − rank/(G−1), so both outputs agree."""
    regime, judge, task = make(InBatchConfig(output=output), tmp_path)
    batch = regime.score([group(task.prompts("train")[0], [1, 3, 2, 2])])
    assert batch.rewards[0].tolist() == pytest.approx([0.0, 1.0, 0.5, 0.5])
    assert len(judge.requests) == 6 and batch.metrics["tournament/tie_rate"] == pytest.approx(1 / 6)


@pytest.mark.parametrize("topology", ["round_robin", "single_elimination", "double_elimination", "swiss"])
def test_arena_rewards_are_standardised_ranks(tmp_path, topology):
    regime, _, task = make(ArenaConfig(topology=topology), tmp_path)
    batch = regime.score([group(task.prompts("train")[0], [0.5, 5, 1, 4, 2, 3, 7, 6])])
    r = batch.rewards[0]
    assert abs(r.mean()) < 1e-9 and r.std() == pytest.approx(1.0)
    assert np.argmax(r) == 6


def test_arena_failed_match_drops_group_or_falls_back(tmp_path):
    failing = {("q=1 sample 0", "q=2 sample 1"): None, ("q=2 sample 1", "q=1 sample 0"): None}
    regime, _, task = make(ArenaConfig(), tmp_path, ScriptedJudge(dict(failing)))
    batch = regime.score([group(task.prompts("train")[0], [1, 2, 3])])
    assert np.isnan(batch.rewards).all() and batch.metrics["reward/missing_verdicts"] == 1
    # one failure policy, the judge's: judge.failure=tie answers the failed match before the regime sees it
    regime, _, _ = make(ArenaConfig(), tmp_path, Fallback(ScriptedJudge(dict(failing)), "tie", 0))
    batch = regime.score([group(task.prompts("train")[0], [1, 2, 3])])
    assert np.isfinite(batch.rewards).all() and batch.metrics["reward/dropped_groups"] == 0
    with pytest.raises(ConfigError, match="reward.topology='knockout' is unknown"):
        ArenaConfig(topology="knockout")


def test_adaptive_routes_by_verifier_variance(tmp_path):
    regime, judge, task = make(AdaptiveConfig(margin=0.9), tmp_path)
    p = task.prompts("train")[0]
    batch = regime.score([group(p, [0, 3, 1, 2, 0]), group(p, [0.1, 0.7, 0.5, 0.3, 1.5])])
    assert (batch.metrics["route/verifier"], batch.metrics["route/tournament"]) == (1, 1)
    assert batch.rewards[0].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]
    tournament = batch.rewards[1]
    assert tournament.min() == 0.0 and tournament.max() == 1.0 and np.argmax(tournament) == 4
    assert len(judge.requests) <= 3 * 5 and batch.metrics["route/tournament_frac"] == 0.5
    flat = regime.score([group(p, [1, 1, 1])])  # every verdict a tie: constant β → constant reward
    assert flat.rewards[0].tolist() == [0.5, 0.5, 0.5]


def test_verifier_regimes_need_a_task_with_a_verifier(tmp_path):
    with pytest.raises(ConfigError, match="reward=verifier needs a task with a verifier"):
        make(VerifierConfig(), tmp_path, task=NumberTask([number_prompt("p0", [1])]))
    regime, judge, task = make(VerifierConfig(), tmp_path)
    batch = regime.score([group(task.prompts("train")[0], [1, 2, 3])])
    assert batch.rewards[0].tolist() == [0.0, 1.0, 1.0] and judge.requests == []


def test_humor_verifier_needs_both_words():
    task = HumorTask(HumorConfig())
    p = task.prompts("train")[0]
    a, b = p.fields["words"]
    assert task.verify(p, f"The {a.upper()} met a {b}.") == 1.0
    assert task.verify(p, f"The {a} only.") == 0.0


def test_constitutional_samples_principles_vetoes_and_records_failures(tmp_path):
    constitution = tmp_path / "c.txt"
    constitution.write_text("# mine\nBe brief.\nBe kind.\n")
    cfg = ConstitutionalConfig(principles_file=str(constitution), coherence_min_distinct=0.5)
    regime, judge, task = make(cfg, tmp_path, ScriptedJudge({("q=4 b", "q=2 a"): None, ("q=2 a", "q=4 b"): None}))
    p = task.prompts("train")[0]
    texts = ["q=2 a", "q=4 b", "q=9 q=9 q=9 q=9", "q=1 c"]
    batch = regime.score([Group(p, [1], [Rollout(t, [1], [0.0], False) for t in texts])])
    assert batch.rewards[0][2] == 0.0  # vetoed by the repetition checker despite the highest q
    assert all("principle: Be " in r.prompt.text for r in judge.requests)
    assert set(batch.rewards[0]) <= {0.0, 0.5, 1.0}
    if batch.metrics["constitutional/random_fallbacks"]:
        rows = [json.loads(x) for x in (tmp_path / "run" / "constitutional_failures.jsonl").read_text().splitlines()]
        assert rows[0]["reason"] == "scripted failure" and rows[0]["fallback"] == "random winner"
    assert batch.metrics["constitutional/vetoed_frac"] == 0.25


def test_constitutional_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="Constitution file /nowhere.txt does not exist; set reward.principles_file"):
        make(ConstitutionalConfig(principles_file="/nowhere.txt"), tmp_path)


def test_elo_ladder_one_anchor_and_diversity_report(tmp_path, number_task):
    elo, _, _ = make(LadderConfig(ranking="elo", ladder_dir=str(tmp_path / "l")), tmp_path, task=number_task)
    assert [r.anchor.text.split()[0] for r in elo.ladders["p0"]] == ["q=3", "q=2", "q=1", "q=0"]
    report = json.loads((tmp_path / "run" / "ladder_diversity.json").read_text())
    assert 0 < report["distinct_1"] <= 1 and 0 <= report["jaccard_distance"] <= 1
    assert report["selected"]["jaccard_distance"] == report["jaccard_distance"]  # k = 4 of 4: all selected
    assert report["selected"]["bt_spread"] > 0
    one, judge, _ = make(OneAnchorConfig(ladder_dir=str(tmp_path / "l")), tmp_path, task=number_task)
    batch = one.score([group(number_task.prompts("train")[0], [4, 3, 1])])
    assert batch.rewards[0].tolist() == [1.0, 0.5, 0.0]
    assert "ladder/distinct_2" in batch.metrics
    assert batch.metrics["ladder/selected_jaccard_distance"] == 0.0 and batch.metrics["ladder/selected_bt_spread"] == 0
    with pytest.raises(ConfigError, match="exactly one anchor"):
        OneAnchorConfig(k=2)
