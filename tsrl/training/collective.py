"""The Collective regimes use to agree across training processes, over accelerate's process group."""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from typing import Any, TypeVar

T = TypeVar("T")


class AccelerateCollective:
    """Agreement across the processes of an accelerate launch (one process: everything is local)."""

    def __init__(self, accelerator: Any) -> None:
        self.acc = accelerator

    @property
    def is_main(self) -> bool:
        return self.acc.is_main_process

    def mean(self, value: float) -> float:
        """The mean over processes of the values that are not NaN (NaN when every process has NaN)."""
        if self.acc.num_processes == 1:
            return value
        from accelerate.utils import gather_object

        values = [v for v in gather_object([value]) if not math.isnan(v)]
        return sum(values) / len(values) if values else float("nan")

    def from_main(self, value: T) -> T:
        if self.acc.num_processes == 1:
            return value
        from accelerate.utils import broadcast_object_list

        return broadcast_object_list([value], from_process=0)[0]

    def main_first(self) -> AbstractContextManager:
        return self.acc.main_process_first()
