"""trainer.pipeline=stream's parts: GroupStream's ordering, tournaments that take groups as they arrive, every
streaming regime giving the rewards and metrics of batch scoring, and the Streamer's failure paths."""

import threading
import time

import numpy as np
import pytest

from tsrl.errors import ConfigError
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
from tsrl.rewards.stream import GroupStream, StreamingRegime
from tsrl.testing.fakes import ScriptedJudge, VerifiedNumberTask, number_prompt
from tsrl.training.pipeline import Streamer, check_pipeline
from tsrl.types import Group, Rollout


class BatchLog(ScriptedJudge):
    """ScriptedJudge that also keeps each compare batch's prompt ids and texts, and can be slow."""

    def __init__(self, delay=0.0):
        super().__init__()
        self.delay, self.batches = delay, []

    def compare(self, requests):
        time.sleep(self.delay)
        self.batches.append([(r.prompt.id, r.first, r.second) for r in requests])
        return super().compare(requests)


PROMPTS = [number_prompt(f"p{b}", [3, 1, 2, 0]) for b in range(5)]


def groups(seed=0, G=4):
    rng = np.random.default_rng(seed)
    return [
        Group(p, [1], [Rollout(f"q={rng.integers(0, 4)} sample {b}.{k}", [1], [0.0], False) for k in range(G)])
        for b, p in enumerate(PROMPTS)
    ]


def feed(stream, batch, order, delay=0.01):
    """Put the groups in `order` (indices), one at a time, from another thread; returns the thread."""

    def run():
        for b in order:
            time.sleep(delay)
            stream.put([(b, batch[b])])
        stream.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_groups_are_released_in_batch_order_whatever_order_they_finish_in():
    batch = groups()
    stream = GroupStream(len(batch))
    stream.put([(2, batch[2]), (0, batch[0])])
    assert stream.take(wait=False) == [batch[0]]  # 1 is missing: 2 waits for it
    stream.put([(1, batch[1])])
    assert stream.take(wait=True) == [batch[1], batch[2]]
    stream.put([(4, batch[4]), (3, batch[3])])
    assert stream.take(wait=False) == [batch[3], batch[4]] and stream.ended and stream.take(wait=True) == []


def test_a_stream_that_ends_short_or_failed_says_so():
    batch = groups()
    stream = GroupStream(len(batch))
    stream.put([(0, batch[0])])
    stream.close()
    assert stream.take(wait=True) == [batch[0]]
    with pytest.raises(RuntimeError, match="without group 1 of 5"):
        stream.take(wait=True)
    with pytest.raises(ValueError, match="emitted twice"):
        GroupStream.of(batch).put([(0, batch[0])])
    failed = GroupStream(len(batch))
    failed.close(KeyError("boom"))
    with pytest.raises(RuntimeError, match="generation failed"):
        failed.take(wait=True)


REGIMES = [
    LadderConfig(k=2),
    OneAnchorConfig(),
    InBatchConfig(),
    ArenaConfig(topology="swiss"),
    ArenaConfig(topology="double_elimination"),
    ArenaConfig(topology="anchor"),
    ConstitutionalConfig(),
    RubricConfig(),
    VerifierConfig(),
    AdaptiveConfig(tournament="live"),
    AdaptiveConfig(tournament="pointwise"),
]


@pytest.mark.parametrize(
    "cfg", REGIMES, ids=lambda c: f"{type(c).__name__}-{getattr(c, 'topology', '')}{getattr(c, 'tournament', '')}"
)
def test_every_streaming_regime_scores_a_trickled_batch_as_it_scores_the_whole(tmp_path, cfg):
    """The same groups, once given whole and once arriving out of order from another thread: the same judge
    questions (as a multiset), the same rewards, the same metrics — two steps each, so per-step seeds move."""
    task, judges = VerifiedNumberTask(PROMPTS), (BatchLog(), BatchLog())
    whole, trickled = [
        build_regime(cfg, RegimeContext(task, judge, "scripted", tmp_path / name))
        for judge, name in zip(judges, ("whole", "trickled"))
    ]
    assert isinstance(whole, StreamingRegime)
    for step in range(2):
        for judge in judges:  # only this step's questions (not a ladder's round-robin)
            judge.batches, judge.score_requests = [], []
        batch = groups(seed=step)
        expected = whole.score(batch)
        stream = GroupStream(len(batch))
        thread = feed(stream, batch, [1, 0, 3, 2, 4])
        got = trickled.score_stream(stream)
        thread.join()
        np.testing.assert_array_equal(got.rewards, expected.rewards)
        assert got.metrics == pytest.approx(expected.metrics, nan_ok=True)
        asked = [q for b in judges[0].batches for q in b]
        assert sorted(q for b in judges[1].batches for q in b) == sorted(asked)
        assert sorted(judges[1].score_requests, key=str) == sorted(judges[0].score_requests, key=str)


def test_a_group_that_arrives_mid_tournament_plays_its_first_round_beside_the_later_rounds_of_others(tmp_path):
    """Swiss over G = 4 plays 2 rounds. Group 1 arrives while group 0's first round is with the judge: the next
    judge batch holds group 0's second round and group 1's first — no batch waits for the whole step."""
    judge = BatchLog(delay=0.2)
    regime = build_regime(
        ArenaConfig(topology="swiss"), RegimeContext(VerifiedNumberTask(PROMPTS), judge, "scripted", tmp_path)
    )
    batch = groups()[:2]
    stream = GroupStream(2)
    stream.put([(0, batch[0])])

    def late():
        time.sleep(0.1)  # while round 1 of group 0 is being judged
        stream.put([(1, batch[1])])
        stream.close()

    thread = threading.Thread(target=late)
    thread.start()
    regime.score_stream(stream)
    thread.join()
    prompts = [sorted({pid for pid, _, _ in b}) for b in judge.batches]
    assert prompts == [["p0"], ["p0", "p1"], ["p1"]]


class Generated:
    """A generator stand-in for the Streamer: emits each group after a pause, or fails at `fail_at`."""

    def __init__(self, batch, delay=0.02, fail_at=None, emits=True):
        self.batch, self.delay, self.fail_at, self.emits = batch, delay, fail_at, emits
        self.emitted_before_end = 0

    def __call__(self, emit):
        for b, g in enumerate(self.batch):
            time.sleep(self.delay)
            if b == self.fail_at:
                raise KeyError("the generator broke")
            if self.emits:
                emit([(b, g)])
        return list(self.batch)


def test_the_streamer_scores_while_generating_and_stops_with_a_failed_generation(tmp_path):
    judge = BatchLog()
    regime = build_regime(LadderConfig(k=2), RegimeContext(VerifiedNumberTask(PROMPTS), judge, "scripted", tmp_path))
    streamer = Streamer(regime)
    batch = groups()
    got, scored, times = streamer.run(Generated(batch), len(batch))
    assert got == batch and len(judge.batches) > 1  # judged in several arrivals, not one batch at the end
    np.testing.assert_array_equal(scored.rewards, regime.score(batch).rewards)
    assert 0 <= times["time/score_wait_s"] <= times["time/score_s"]
    _, quiet, _ = streamer.run(Generated(batch, emits=False), len(batch))  # a generator that never emits
    np.testing.assert_array_equal(quiet.rewards, scored.rewards)
    with pytest.raises(KeyError, match="the generator broke"):
        streamer.run(Generated(batch, fail_at=2), len(batch))
    streamer.close()


def test_what_cannot_stream_is_refused(tmp_path):
    class BatchOnly:
        def score(self, groups):
            raise AssertionError("not called")

    with pytest.raises(ConfigError, match="reward=custom does not"):
        check_pipeline("stream", "custom", BatchOnly(), offline=False)
    with pytest.raises(ConfigError, match="cannot run reward=intuitor"):
        check_pipeline("stream", "intuitor", BatchOnly(), offline=False)
    check_pipeline("overlap", "custom", BatchOnly(), offline=False)  # overlap scores whole batches: fine
