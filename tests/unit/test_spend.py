"""The judge calls a run says it will make, worked out by hand; the ladder step's decision to write anchors."""

from dataclasses import dataclass, field

import pytest
from hydra import compose, initialize_config_module

from tsrl.anchors.step import short_prompts
from tsrl.commands.base import to_run_config
from tsrl.config import EndpointConfig, LadderStepConfig, register_configs
from tsrl.errors import ConfigError, UserError
from tsrl.rewards.intragroup import ArenaConfig
from tsrl.rewards.ladder import LadderConfig
from tsrl.rewards.listwise import ListwiseConfig
from tsrl.spend import Calls, Spend, check_setup, estimate, evaluations, group_calls, schedule_matches
from tsrl.tasks import build_task
from tsrl.types import Anchor, Prompt


@pytest.mark.parametrize(
    "topology, size, matches",
    [
        ("round_robin", 8, 28),  # G(G−1)/2
        ("circular", 8, 8),
        ("anchor", 8, 7),
        ("single_elimination", 8, 7 + 7),  # the seeding pass against the anchor, then the bracket
        ("double_elimination", 4, 3 + 6),  # the seeding pass, then 2G − 2
        ("swiss", 8, 4 * 3),  # G/2 matches a round, ⌈log2 G⌉ rounds
        ("swiss", 5, 2 * 3),  # one bye a round
    ],
)
def test_a_tournament_is_played_on_paper_to_count_its_matches(topology, size, matches):
    calls, _ = group_calls("arena", ArenaConfig(topology=topology), size, both=False)
    assert calls == Calls(matches, matches)
    assert group_calls("arena", ArenaConfig(topology=topology), size, both=True)[0] == Calls(2 * matches, 2 * matches)


def test_calls_per_group_of_the_other_regimes():
    assert group_calls("ladder", LadderConfig(k=4), 8, both=False)[0] == Calls(32, 32)
    assert group_calls("in_batch", None, 6, both=False)[0] == Calls(15, 15)
    assert group_calls("rubric", None, 8, both=True)[0] == Calls(8, 8)  # a grade is one call in any order
    # a list: one call per order and chunk; with 3 anchors and 5 items a call, 2 completions a call → 4 chunks
    assert group_calls("listwise", ListwiseConfig(orders=2), 8, both=True)[0] == Calls(2, 2)
    assert group_calls("listwise", ListwiseConfig(anchors=3, max_items=5), 8, both=False)[0] == Calls(4, 4)
    # Reasoning Arena: nothing when the verifier separates the group, else the live tournament's 3G − 6
    calls, how = group_calls("adaptive", type("A", (), {"tournament": "live"})(), 8, both=False)
    assert calls == Calls(0, 18) and how.startswith("0 when the verifier separates the group")


def test_a_schedule_whose_length_depends_on_the_answers_gives_a_range():
    class FirstWinnerPlaysOn:
        """One match, then a second one only when the first player won."""

        def __init__(self) -> None:
            self.played, self.won = 0, False

        def next_round(self):
            return ["match"] if self.played == 0 or (self.played == 1 and self.won) else []

        def record(self, outcomes):
            self.won, self.played = outcomes[0] == 1.0, self.played + 1

    assert schedule_matches(lambda seed: FirstWinnerPlaysOn(), seeds=16) == Calls(1, 2)


@pytest.mark.parametrize("steps, every, expected", [(100, 20, 6), (3, 0, 2), (3, 20, 2), (40, 20, 3), (0, 20, 1)])
def test_evaluations_at_the_start_every_n_steps_and_at_the_end(steps, every, expected):
    assert evaluations(steps, every) == expected


def test_the_whole_run_and_its_dollars():
    spend = Spend(judge="judge=openai m", setup=[("ladders", 2880)], per_step=Calls(256, 256), steps=100)
    spend.per_eval, spend.evaluations = 960, 6
    assert spend.total == Calls(2880 + 25_600 + 5760, 2880 + 25_600 + 5760)
    spend.max_training_calls = 1000
    assert spend.total.high == 2880 + 1000 + 5760
    spend.prices, spend.tokens = (0.15, 0.6), (1000, 100)  # $0.00015 + $0.00006 a call
    assert spend.dollars(spend.total) == pytest.approx((9640 * 0.00021,) * 2)
    assert any("at most $2.02" in line for line in spend.lines())


def test_a_count_of_one_is_said_in_the_singular():
    assert group_calls("ladder", LadderConfig(k=1), 1, both=False)[1] == "1 completion × 1 anchor"
    assert group_calls("ladder", LadderConfig(k=4), 8, both=False)[1] == "8 completions × 4 anchors"
    spend = Spend(judge="judge=rubric_sim", per_step=Calls(4, 4), steps=1)
    spend.per_eval, spend.evaluations = 40, 1
    said = "\n".join(spend.lines())
    assert "40 calls × 1 evaluation = 40" in said and "+ 1 step × 4" in said, said


def test_a_setup_over_the_cap_is_one_sentence_with_the_override():
    spend = Spend(judge="judge=rubric_sim", setup=[("rank the anchors", 81_600)])
    check_setup(spend, 0)  # 0 = no limit
    check_setup(spend, 81_600)
    with pytest.raises(UserError, match=r"81,600 judge calls .* judge.max_setup_calls=50,000; nothing was asked"):
        check_setup(spend, 50_000)


@dataclass
class Data:
    """A task's data: prompts with the given numbers of anchors."""

    anchors: list[int]
    name: str = "humor"

    def prompts(self, split):
        return [Prompt(f"p{i}", "text", tuple(Anchor(f"a{j}") for j in range(n))) for i, n in enumerate(self.anchors)]


@dataclass
class TaskSettings:
    anchors_file: str = ""


@dataclass
class Run:
    reward: object
    ladder: LadderStepConfig = field(default_factory=LadderStepConfig)
    task: TaskSettings = field(default_factory=TaskSettings)


def test_auto_writes_anchors_only_for_data_with_one_reference_per_prompt():
    assert short_prompts(Run(LadderConfig(k=4)), Data([10, 10]))[1] == []
    needed, short = short_prompts(Run(LadderConfig(k=4)), Data([1, 1, 0]))  # WebSight-like: one reference or none
    assert needed == 4 and [p.id for p in short] == ["p0", "p1", "p2"]
    with pytest.raises(UserError) as stop:  # humor-like: the data has its own ladders
        short_prompts(Run(LadderConfig(k=50)), Data([10, 10]))
    message = str(stop.value)
    assert "reward.k=50 needs 50 anchors per training prompt, but prompt 'p0' of task humor has 10" in message
    assert "lower reward.k to at most 10" in message and "ladder.build=policy" in message
    for build in ("policy", "endpoint"):  # asked for: written whatever the data
        run = Run(LadderConfig(k=50), LadderStepConfig(build=build, endpoint=EndpointConfig(base_url="http://x")))
        assert len(short_prompts(run, Data([10, 10]))[1]) == 2
    with pytest.raises(UserError, match=r"ladder.build=off\): lower reward.k to at most 1, .*ladder.build=auto: "):
        short_prompts(Run(LadderConfig(k=4), LadderStepConfig(build="off")), Data([1, 1]))
    with pytest.raises(UserError, match="reward.anchors=3 needs 3 anchors"):  # the listwise ladder asks too
        short_prompts(Run(ListwiseConfig(anchors=3)), Data([2, 2]))


def test_a_grid_asks_for_yes_with_a_paid_judge_above_the_threshold_or_with_runs_it_could_not_estimate():
    from tsrl.reproduce.spend import CONFIRM_ABOVE, GridSpend

    assert not GridSpend(simulated=False).needs_yes()  # nothing to pay
    assert GridSpend(simulated=False, training=Calls(0, CONFIRM_ABOVE + 1)).needs_yes()
    assert not GridSpend(simulated=True, training=Calls(0, 10 * CONFIRM_ABOVE)).needs_yes()  # the simulator is free
    assert GridSpend(simulated=False, failed=[("seed=0", "its anchors file does not exist")]).needs_yes()


def test_a_step_asks_for_the_global_batch_on_any_number_of_processes():
    """trainer.prompts_per_step is the step's batch over every process: 16 groups × k = 4 ladder calls a step on
    one process and on eight (not 8 × 16 groups); 3 processes cannot share 16 prompts and the estimate says so, as
    the run would at start."""
    register_configs()
    with initialize_config_module("tsrl.configs", version_base="1.3"):
        cfg = to_run_config(compose("config", overrides=["trainer.prompts_per_step=16", "reward.k=4"]))
    task = build_task(cfg.task)
    one, eight = estimate(cfg, task, world=1), estimate(cfg, task, world=8)
    assert one.per_step == eight.per_step == Calls(16 * cfg.trainer.group_size * 4, 16 * cfg.trainer.group_size * 4)
    assert one.step_what == eight.step_what and one.step_what.startswith("16 groups")
    with pytest.raises(ConfigError, match="prompts_per_step=16 does not split over 3 processes; use 15 or 18"):
        estimate(cfg, task, world=3)
