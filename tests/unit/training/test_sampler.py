"""The global batch (trainer.prompts_per_step over every process) and the seeds of its groups: the same prompts and
the same seeds whichever process draws them and however many processes there are."""

import pytest

from tsrl.config import per_process_prompts
from tsrl.errors import ConfigError
from tsrl.generation.seeds import sample_seed
from tsrl.testing.fakes import number_prompt
from tsrl.training.sampler import PromptSampler

PROMPTS = [number_prompt(f"p{i}", [0]) for i in range(10)]
G = 4


def ids(share):
    return [p.id for p in share.prompts]


def steps(batch: int, world: int, count: int, seed: int = 0) -> list[list[tuple[str, int]]]:
    """`count` steps of the global batch as `world` processes draw it: each step's (prompt id, group seed) per slot,
    the processes' shares put back together in rank order."""
    samplers = [PromptSampler(PROMPTS, batch, seed, rank, world) for rank in range(world)]
    drawn = []
    for _ in range(count):
        shares = [s.next_batch() for s in samplers]
        drawn.append([(p.id, seed) for share in shares for p, seed in zip(share.prompts, share.seeds)])
    return drawn


def test_each_epoch_visits_every_prompt_once_in_a_seeded_order():
    sampler = PromptSampler(PROMPTS, batch=5, seed=3)
    first, second = ids(sampler.next_batch()), ids(sampler.next_batch())
    assert sorted(first + second) == sorted(ids(PromptSampler(PROMPTS, 10, seed=3).next_batch()))
    assert len(set(first + second)) == 10
    assert ids(PromptSampler(PROMPTS, 5, seed=3).next_batch()) == first
    assert ids(PromptSampler(PROMPTS, 5, seed=4).next_batch()) != first


def test_the_batch_is_global_and_split_in_contiguous_equal_shares():
    """prompts_per_step=6 on 3 processes: 2 prompts each, slots [0, 2), [2, 4), [4, 6) of the one-process batch."""
    whole = PromptSampler(PROMPTS, 6, seed=0).next_batch()
    shares = [PromptSampler(PROMPTS, 6, seed=0, rank=r, world=3).next_batch() for r in range(3)]
    assert [len(s.prompts) for s in shares] == [2, 2, 2]
    assert [i for share in shares for i in ids(share)] == ids(whole)
    assert [s for share in shares for s in share.seeds] == whole.seeds


def test_one_and_two_processes_draw_the_same_seed_for_the_same_step_slot_and_sample():
    """Over 7 steps of 4 prompts (crossing epochs: 28 > 10 prompts), slot by slot: the same prompt and the same group
    seed on 1, 2 and 4 processes, so sample j's seed (group seed + j) is the same too; within a step no two groups
    share a seed (nor a sample seed: their ranges [s, s + G) do not meet), and across the run no group repeats one,
    though every prompt comes back each epoch."""
    one, two, four = steps(4, 1, 7), steps(4, 2, 7), steps(4, 4, 7)
    assert one == two == four
    for step in one:
        samples = [sample_seed(seed, j) for _, seed in step for j in range(G)]
        assert len(set(samples)) == len(samples) == 4 * G
    every = [seed for step in one for _, seed in step]
    assert len(set(every)) == len(every) and len({i for step in one for i, _ in step}) == 10
    assert steps(4, 1, 1, seed=1)[0] != one[0]  # the run seed moves them


def test_a_prompt_twice_in_one_step_has_two_seeds():
    """A batch larger than the data (12 slots, 10 prompts) wraps into the next epoch: the prompts it holds twice are
    drawn under different seeds, as are resampled batches (trainer.fill=resample: the next batch, the next seeds)."""
    step = PromptSampler(PROMPTS, 12, seed=0).next_batch()
    assert len(set(ids(step))) < 12 and len(set(step.seeds)) == 12


def test_an_indivisible_batch_is_refused_naming_the_nearest_valid_ones():
    assert per_process_prompts(16, 8) == 2 and per_process_prompts(16, 1) == 16
    with pytest.raises(
        ConfigError, match=r"^trainer\.prompts_per_step=10 does not split over 4 processes; use 8 or 12"
    ):
        per_process_prompts(10, 4)
    with pytest.raises(ConfigError, match=r"prompts_per_step=2 does not split over 4 processes; use 4 \("):
        PromptSampler(PROMPTS, 2, seed=0, rank=0, world=4)


def test_state_round_trip_continues_the_same_order_and_seeds():
    a = PromptSampler(PROMPTS, 4, seed=1)
    for _ in range(3):  # crosses an epoch boundary (12 > 10)
        a.next_batch()
    b = PromptSampler(PROMPTS, 4, seed=1)
    b.load_state_dict(a.state_dict())
    assert [a.next_batch() for _ in range(4)] == [b.next_batch() for _ in range(4)]
