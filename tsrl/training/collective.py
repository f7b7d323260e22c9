"""The Collective regimes use to agree across training processes, over accelerate's process group."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, TypeVar

from tsrl.types import Count

T = TypeVar("T")


class AccelerateCollective:
    """Agreement across the processes of an accelerate launch (one process: everything is local)."""

    def __init__(self, accelerator: Any) -> None:
        self.acc = accelerator

    @property
    def is_main(self) -> bool:
        return self.acc.is_main_process

    @property
    def rank(self) -> int:
        return self.acc.process_index

    @property
    def world_size(self) -> int:
        return self.acc.num_processes

    def mean(self, value: float) -> float:
        """The mean over processes of the values that are not NaN (NaN when every process has NaN)."""
        values = [v for v in gather(self.acc, value) if not math.isnan(v)]
        return sum(values) / len(values) if values else float("nan")

    def from_main(self, value: T) -> T:
        if self.acc.num_processes == 1:
            return value
        from accelerate.utils import broadcast_object_list

        return broadcast_object_list([value], from_process=0)[0]

    def gather(self, value: T) -> list[T]:
        """Every process's `value` (picklable), in process order, on every process."""
        return gather(self.acc, value)


# Metrics and values across processes (the trainer's own; regimes use the Collective above).


def gather(acc: Any, value: T) -> list[T]:
    """Every process's `value` (picklable), in process order, on every process."""
    if acc.num_processes == 1:
        return [value]
    from accelerate.utils import gather_object

    return gather_object([value])


def sum_dicts(dicts: list[dict[str, float]]) -> dict[str, float]:
    total: dict[str, float] = defaultdict(float)
    for d in dicts:
        for key, value in d.items():
            total[key] += value
    return dict(total)


def reduce_metrics(acc: Any, metrics: dict[str, float]) -> dict[str, float]:
    return combine_metrics(gather(acc, metrics))


def combine_metrics(every: list[dict[str, float]]) -> dict[str, float]:
    """Every process's metrics as one: the sum for a Count (its emitter declared it a counter), the mean for
    anything else; a metric only some processes report is averaged over those that do."""
    total, seen = sum_dicts(every), Counter(key for d in every for key in d)
    counters = {key for d in every for key, value in d.items() if isinstance(value, Count)}
    return {k: Count(v) if k in counters else v / seen[k] for k, v in total.items()}
