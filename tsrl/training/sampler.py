"""The global batch and the seeds of its groups.

A step trains on trainer.prompts_per_step prompts over every process (the global batch, B), in a deterministic
order: a fresh seeded permutation of the N training prompts each epoch, the batch wrapping across epochs. W
processes take contiguous equal shares of it, B/W each (process r: slots [r·B/W, (r+1)·B/W)); a B that does not
split evenly is refused (tsrl.config.per_process_prompts).

Every prompt drawn carries a group seed, a hash of the run seed and its place in the run's prompt stream
(epoch·N + cursor), which the step, the batch within the step (trainer.fill=resample draws several) and the slot
decide; its completion j is drawn under group seed + j (tsrl.generation.seeds). So a completion does not depend on
which process draws it or on how many there are; a prompt that comes twice in one step (a batch larger than the
data) or again in a resampled batch has a seed of its own each time; and a resumed run, which restores
(epoch, cursor) from its checkpoint, draws the seeds the uninterrupted run drew.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from tsrl.config import per_process_prompts
from tsrl.generation.seeds import derived_seed
from tsrl.types import Prompt


class Share(NamedTuple):
    """This process's part of one global batch: its prompts, and the group seed of each."""

    prompts: list[Prompt]
    seeds: list[int]


class PromptSampler:
    def __init__(self, prompts: Sequence[Prompt], batch: int, seed: int, rank: int = 0, world: int = 1) -> None:
        """`batch`: trainer.prompts_per_step, the global batch; `seed`: the run seed (order and group seeds)."""
        self.prompts, self.batch, self.seed = list(prompts), batch, seed
        self.share = per_process_prompts(batch, world)  # prompts per process and batch
        self.rank = rank
        self.epoch, self.cursor = 0, 0

    def _order(self) -> np.ndarray:
        return np.random.default_rng([self.seed, self.epoch]).permutation(len(self.prompts))

    def next_batch(self) -> Share:
        """This process's share of the next global batch (which wraps across epochs), with its group seeds."""
        picked: list[tuple[int, int]] = []  # (place in the prompt stream, prompt index) of each slot
        order = self._order()
        while len(picked) < self.batch:
            if self.cursor == len(order):
                self.epoch, self.cursor = self.epoch + 1, 0
                order = self._order()
            picked.append((self.epoch * len(order) + self.cursor, int(order[self.cursor])))
            self.cursor += 1
        mine = picked[self.rank * self.share : (self.rank + 1) * self.share]
        return Share([self.prompts[i] for _, i in mine], [derived_seed(self.seed, place) for place, _ in mine])

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "cursor": self.cursor}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.cursor = state["epoch"], state["cursor"]
