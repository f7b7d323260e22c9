"""Long work is never silent: work that can take more than ~10 s says what it does, why, where it caches and
roughly how long, then reports its progress at least every PROGRESS_EVERY_S, terminal or not."""

from __future__ import annotations

PROGRESS_EVERY_S = 30.0  # long work reports its progress at least this often


def duration(seconds: float) -> str:
    """A rough human duration: '40 s', '3 min', '1.2 h'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def counted(n: int, noun: str) -> str:
    """n and its noun, singular for one: '1 sample', '4 samples', '1,200 held-out prompts'."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def bar_fields(metrics: dict[str, float], heldout: float, offline: bool) -> dict[str, str]:
    """The progress bar's fields after a step. An offline algo (sft, dpo) scores nothing, so it shows no reward
    (it would read nan); DPO shows its pair accuracy and implicit reward margin instead."""
    fields = {} if offline else {"reward": f"{metrics['reward/mean']:.3f}"}
    if offline:
        fields.update({k.rsplit("/", 1)[1]: f"{v:.3f}" for k, v in metrics.items() if k.startswith("train/dpo/")})
    fields["heldout"] = f"{heldout:.1f}%"
    fields["loss"] = f"{metrics.get('train/loss', float('nan')):+.3f}"  # absent when every group was dropped
    fields["s_per_step"] = f"{metrics['time/step_s']:.2f}"
    return fields
