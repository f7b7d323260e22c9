"""The plain scoring API and the TRL adapter's whole-group logic (no TRL needed here)."""

from __future__ import annotations

import pytest

import tsrl
from tsrl.errors import ConfigError, UserError
from tsrl.integrations.scoring import hydra_value
from tsrl.integrations.trl import GroupSplitError, TournamentReward, message_text, whole_groups
from tsrl.tasks import HumorConfig, HumorTask


@pytest.fixture(scope="module")
def humor_prompts():
    return HumorTask(HumorConfig()).prompts("train")[:2]


def test_import_tsrl_stays_light():
    import subprocess
    import sys

    code = "import sys, tsrl; print(sorted(m for m in ('torch', 'hydra', 'transformers', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_score_groups_ranks_the_task_anchors_like_the_ladder(humor_prompts, tmp_path):
    """Each group is a prompt's own top, okay and low anchors; the simulated judge orders anchors by tier, so the
    reward is non-increasing down the tiers. Calls: B·G·k (one per comparison, order=random)."""
    completions = [[p.anchors[0].text, p.anchors[4].text, p.anchors[8].text] for p in humor_prompts]
    batch = tsrl.score_groups(
        [p.text for p in humor_prompts], completions, regime="ladder", k=4, ladder_dir=str(tmp_path)
    )
    assert batch.rewards.shape == (2, 3)
    assert (batch.rewards[:, 0] >= batch.rewards[:, 2]).all() and batch.rewards[:, 0].min() > batch.rewards[:, 2].max()
    assert batch.metrics["reward/comparisons_per_sample"] == 4 and batch.metrics["judge/calls"] == 2 * 3 * 4
    assert batch.metrics["judge/setup_calls"] in (0.0, 2 * 45)  # the two prompts' round-robins, or reused
    one_order = tsrl.score_groups(
        [p.text for p in humor_prompts], completions, k=4, ladder_dir=str(tmp_path), overrides=["judge.order=both"]
    )
    assert one_order.metrics["judge/calls"] == 2 * 3 * 4 * 2  # any option is reachable through overrides


def test_scorer_builds_once_and_scores_many_batches(humor_prompts, tmp_path):
    scorer = tsrl.build_scorer(
        "ladder", prompts=[p.text for p in humor_prompts], ladder_dir=str(tmp_path), k=4, run_dir=tmp_path / "run"
    )
    assert (tmp_path / "run" / "ladder.jsonl").is_file()
    for prompt in humor_prompts:
        batch = scorer.score([prompt.text], [[prompt.anchors[0].text, "no joke"]])
        assert batch.rewards[0, 0] > batch.rewards[0, 1] and batch.metrics["judge/calls"] == 2 * 4


def test_policy_regimes_need_a_policy_in_the_plain_api(humor_prompts):
    with pytest.raises(ConfigError, match=r"reward=intuitor needs the policy's model and tokenizer.*policy=\(model"):
        tsrl.score_groups([humor_prompts[0].text], [["a", "b"]], regime="intuitor")


def test_groups_must_be_whole_and_equal_sized(humor_prompts, tmp_path):
    scorer = tsrl.build_scorer("ladder", prompts=[humor_prompts[0]], ladder_dir=str(tmp_path), k=1)
    with pytest.raises(UserError, match="one list of completions per prompt, all of the same length G"):
        scorer.score([humor_prompts[0], humor_prompts[0]], [["a", "b"], ["c"]])


def test_hydra_values_round_trip_through_the_override_grammar():
    assert hydra_value(True) == "true" and hydra_value(3) == "3" and hydra_value(0.5) == "0.5"
    assert hydra_value("it's a/b") == "'it\\'s a/b'"
    assert hydra_value({"a": [1, "x"]}) == "{a:[1,'x']}"


# ---- TRL calling convention -----------------------------------------------------------------------------------


def test_whole_groups_accepts_consecutive_groups_and_names_the_fix_for_split_ones():
    assert whole_groups(["a", "a", "b", "b", "a", "a"], 2) == ["a", "b", "a"]
    # TRL's layout for per_device_train_batch_size=3, num_generations=2 on 2 processes: rank 1 sees "1 2 2"
    with pytest.raises(
        GroupSplitError,
        match=r"received 3 completions, not a multiple of num_generations=2.*"
        r"per_device_train_batch_size × steps_per_generation",
    ):
        whole_groups(["p1", "p2", "p2"], 2)
    with pytest.raises(GroupSplitError, match=r"Completions 0..1 of this batch belong to different prompts"):
        whole_groups(["p1", "p2", "p2", "p3"], 2)


def test_message_text_reads_plain_and_conversational_values():
    assert message_text("hi") == "hi"
    assert message_text([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]) == "u"
    assert message_text([{"role": "assistant", "content": [{"type": "text", "text": "t"}]}]) == "t"
    with pytest.raises(UserError, match="expected a string or a list of chat messages"):
        message_text(3)


def test_tournament_reward_follows_trls_calling_convention(humor_prompts, tmp_path):
    """Called the way GRPOTrainer calls a reward function: keyword lists of length B·G with repeated prompts,
    conversational here, plus trainer_state/log_metric; returns one float per completion."""
    reward = TournamentReward(num_generations=2, ladder_dir=str(tmp_path), k=4)
    assert reward.__name__ == "tsrl_ladder"
    logged = {}
    prompts = [[{"role": "user", "content": p.text}] for p in humor_prompts for _ in range(2)]
    completions = [
        [{"role": "assistant", "content": t}] for p in humor_prompts for t in (p.anchors[0].text, p.anchors[8].text)
    ]
    out = reward(
        prompts=prompts,
        completions=completions,
        completion_ids=[[1]] * 4,
        trainer_state=None,
        log_metric=logged.__setitem__,
    )
    assert len(out) == 4 and all(isinstance(r, float) for r in out)
    assert out[0] > out[1] and out[2] > out[3]
    assert logged["tsrl/reward/comparisons_per_sample"] == 4.0
    with pytest.raises(GroupSplitError):
        reward(prompts=prompts[1:], completions=completions[1:], completion_ids=None)


def test_an_option_the_regime_lacks_is_one_clear_error(humor_prompts):
    with pytest.raises(UserError, match=r"Cannot configure reward=intuitor judge=rubric_sim task=humor: .*ladder_dir"):
        tsrl.score_groups([humor_prompts[0].text], [["a", "b"]], regime="intuitor", ladder_dir="/tmp/x")
