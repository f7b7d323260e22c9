from tsrl.testing.fakes import number_prompt
from tsrl.training.sampler import PromptSampler

PROMPTS = [number_prompt(f"p{i}", [0]) for i in range(10)]


def ids(batch):
    return [p.id for p in batch]


def test_each_epoch_visits_every_prompt_once_in_a_seeded_order():
    sampler = PromptSampler(PROMPTS, per_process=5, seed=3)
    first, second = ids(sampler.next_batch()), ids(sampler.next_batch())
    assert sorted(first + second) == sorted(ids(PROMPTS))
    assert ids(PromptSampler(PROMPTS, 5, seed=3).next_batch()) == first
    assert ids(PromptSampler(PROMPTS, 5, seed=4).next_batch()) != first


def test_processes_get_disjoint_shares_of_the_global_batch():
    shares = [ids(PromptSampler(PROMPTS, 2, seed=0, rank=r, world=3).next_batch()) for r in range(3)]
    flat = [i for share in shares for i in share]
    assert len(set(flat)) == 6


def test_state_round_trip_continues_the_same_order():
    a = PromptSampler(PROMPTS, 4, seed=1)
    for _ in range(3):  # crosses an epoch boundary (12 > 10)
        a.next_batch()
    b = PromptSampler(PROMPTS, 4, seed=1)
    b.load_state_dict(a.state_dict())
    assert [ids(a.next_batch()) for _ in range(4)] == [ids(b.next_batch()) for _ in range(4)]
