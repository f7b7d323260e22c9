"""Long work is never silent: work that can take more than ~10 s says what it does, why, where it caches and
roughly how long, then reports its progress at least every PROGRESS_EVERY_S, terminal or not."""

from __future__ import annotations

PROGRESS_EVERY_S = 30.0  # long work reports its progress at least this often


def duration(seconds: float) -> str:
    """A rough human duration: '40 s', '3 min', '1.2 h'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"
