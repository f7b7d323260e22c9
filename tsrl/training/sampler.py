"""Deterministic prompt order: a fresh seeded permutation each epoch; each process takes its share of
every global batch. The position (epoch, cursor) is saved in checkpoints."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tsrl.types import Prompt


class PromptSampler:
    def __init__(self, prompts: Sequence[Prompt], per_process: int, seed: int, rank: int = 0, world: int = 1) -> None:
        self.prompts, self.per_process, self.seed = list(prompts), per_process, seed
        self.rank, self.world = rank, world
        self.epoch, self.cursor = 0, 0

    def _order(self) -> np.ndarray:
        return np.random.default_rng([self.seed, self.epoch]).permutation(len(self.prompts))

    def next_batch(self) -> list[Prompt]:
        """This process's prompts for the next step (the global batch wraps across epochs)."""
        picked: list[int] = []
        order = self._order()
        while len(picked) < self.per_process * self.world:
            if self.cursor == len(order):
                self.epoch, self.cursor = self.epoch + 1, 0
                order = self._order()
            picked.append(int(order[self.cursor]))
            self.cursor += 1
        mine = picked[self.rank * self.per_process : (self.rank + 1) * self.per_process]
        return [self.prompts[i] for i in mine]

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "cursor": self.cursor}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.cursor = state["epoch"], state["cursor"]
