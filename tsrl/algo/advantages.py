"""Group-relative advantages.

TSRL centres each completion's reward on its group: A_bg = w_bg − mean_g(w_bg) (B prompts, G completions).
Optional scaling divides by a standard deviation (population, i.e. ddof = 0):
    "group": std over the group (GRPO), "batch": std over all B·G rewards (REINFORCE++-style),
    "none": no scaling (Dr. GRPO, TSRL).
The divisor is max(std, floor), so a zero-variance group gives exactly zero advantages, never NaN.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Scaler = Callable[[torch.Tensor], torch.Tensor]

SCALES: dict[str, Scaler] = {
    "group": lambda r: r.std(dim=1, keepdim=True, correction=0),  # [B, 1]
    "batch": lambda r: r.std(correction=0).expand(r.shape[0], 1),  # [B, 1]
}
ADV_SCALES = ("none", *SCALES)


def group_advantages(rewards: torch.Tensor, scale: str = "none", floor: float = 1e-4) -> torch.Tensor:
    """Advantages [B, G] from rewards [B, G]."""
    if scale not in ADV_SCALES:
        raise ValueError(f"Unknown advantage scale {scale!r}; choose one of {list(ADV_SCALES)}.")
    centred = rewards - rewards.mean(dim=1, keepdim=True)  # [B, G]
    if scale == "none":
        return centred
    return centred / SCALES[scale](rewards).clamp_min(floor)  # [B, G]
