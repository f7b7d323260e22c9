"""Groups that reach the judge while the batch is still being generated (`trainer.pipeline=stream`).

The generator hands each group over the moment its G completions exist (`emit`); a `GroupStream` passes them on
in batch order (a group that finishes early waits for those before it, so what a regime sees, and the order in
which it draws its per-step randomness, is the batch's order). A regime that streams (`StreamingRegime`) takes
what has arrived, sends it to the judge, and takes again: the ladder and the rubric judge each arrival as one
batch; a tournament (`play` in tsrl/rewards/matches.py) starts a group's first round as soon as the group is
there, next to the later rounds of groups already playing, so its rounds are scheduled as results come in
instead of in lockstep with the slowest group of the batch.

A complete stream (`GroupStream.of(groups)`) gives everything at the first take: `score(groups)` of every
streaming regime is `score_stream(GroupStream.of(groups))`, one code path, and a streamed step asks the judge
the same questions as a batch step and gets the same rewards (the judges' randomness is a hash of the question,
never of the order asked). What can differ is how the questions are split into judge batches, hence the
timings, and one coin: the constitutional bracket's random winner of a match the judge failed is drawn in the
order the failures happen.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from tsrl.types import Group, RewardBatch


class GroupStream:
    """One step's B groups, arriving from the generator (any thread), released in index order."""

    def __init__(self, total: int) -> None:
        self.total = total
        self._arrived: dict[int, Group] = {}
        self._released = 0  # groups handed to the reader so far (always a prefix of the batch)
        self._ready = 0  # groups 0 … ready−1 have all arrived
        self._closed = False
        self._error: BaseException | None = None
        self._cond = threading.Condition()

    @classmethod
    def of(cls, groups: Sequence[Group]) -> GroupStream:
        """A stream that already holds the whole batch."""
        stream = cls(len(groups))
        stream.put(list(enumerate(groups)))
        stream.close()
        return stream

    def put(self, items: Sequence[tuple[int, Group]]) -> None:
        """The generator's callback: (index in the batch, finished group) pairs, in any order."""
        with self._cond:
            for index, group in items:
                if not 0 <= index < self.total or index in self._arrived:
                    raise ValueError(f"group {index} of a batch of {self.total} was emitted twice or out of range")
                self._arrived[index] = group
            while self._ready in self._arrived:
                self._ready += 1
            self._cond.notify_all()

    def has(self, index: int) -> bool:
        """Whether group `index` has arrived."""
        with self._cond:
            return index in self._arrived

    def close(self, error: BaseException | None = None) -> None:
        """Generation has ended; with `error`, it failed and the reader stops with that error."""
        with self._cond:
            self._closed, self._error = True, error
            self._cond.notify_all()

    def take(self, wait: bool) -> list[Group]:
        """The groups that arrived since the last take, in order. wait=True blocks until there is at least one or
        the stream has ended; [] then means the end. wait=False never blocks."""
        with self._cond:
            while wait and self._released == self._ready and not self.ended:
                self._cond.wait()
            if self._error is not None:
                raise RuntimeError("generation failed while the judge was scoring its groups") from self._error
            if self._closed and self._ready < self.total and self._released == self._ready:
                missing = next(i for i in range(self.total) if i not in self._arrived)
                raise RuntimeError(f"the generator ended without group {missing} of {self.total}")
            out = [self._arrived[i] for i in range(self._released, self._ready)]
            self._released = self._ready
            return out

    @property
    def ended(self) -> bool:
        """Every group has been taken, or generation ended (closed) with nothing more to take."""
        return self._released == self.total or (self._closed and self._released == self._ready)

    def chunks(self):
        """Each take until the end: a list of groups per arrival."""
        while True:
            got = self.take(wait=True)
            if not got:
                return
            yield got

    def all(self) -> list[Group]:
        """Every group, once generation has ended."""
        return [g for chunk in self.chunks() for g in chunk]


class Streams:
    """For a streaming regime: score(groups) is score_stream over the whole batch at once."""

    def score(self, groups: Sequence[Group]) -> RewardBatch:
        return self.score_stream(GroupStream.of(groups))

    def score_stream(self, stream: GroupStream) -> RewardBatch:
        raise NotImplementedError


@runtime_checkable
class StreamingRegime(Protocol):
    """A regime that can judge a step's groups while later ones are still being generated."""

    def score_stream(self, stream: GroupStream) -> RewardBatch: ...
