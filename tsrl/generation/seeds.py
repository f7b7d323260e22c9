"""Sampling seeds: each completion is drawn under a seed of its own, so what it says depends on its seed and the
weights alone — not on which process draws it, how many processes there are, the batch it is drawn in, or what was
drawn before it.

A group (G completions of one prompt) has a group seed s, and its completion j is drawn under s + j: vLLM's own
rule for the n samples of one seeded request (vllm/v1/engine/parallel_sampling.py gives child j the parent's seed
+ j), which generator=hf follows, so both generators seed completion j alike. Group seeds lie in [0, SEED_LIMIT),
so s + j stays a valid torch and vLLM seed; two groups' ranges [s, s + G) overlap with probability about
2G / SEED_LIMIT (~1e-17 for G = 8).

Training names every group seed (tsrl.training.sampler: a hash of the run seed and the prompt's place in the run's
prompt stream); a caller that names none (held-out evaluation, which seeds torch's RNG per chunk; the ladder
builders) gets group seeds drawn from torch's global RNG, one per prompt.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

SEED_LIMIT = 2**62
"""Group seeds lie in [0, SEED_LIMIT): room for + j below torch's and vLLM's 64-bit seeds."""


def derived_seed(*key: int) -> int:
    """A group seed in [0, SEED_LIMIT) that is a pure function of the integers `key` (numpy's SeedSequence hash;
    negative integers are taken modulo 2**64)."""
    state = np.random.SeedSequence([k & (2**64 - 1) for k in key]).generate_state(1, dtype=np.uint64)[0]
    return int(state) % SEED_LIMIT


def sample_seed(group_seed: int, index: int) -> int:
    """The seed of completion `index` of the group seeded `group_seed`."""
    return group_seed + index


def group_seeds(seeds: Sequence[int] | None, count: int) -> list[int]:
    """The group seeds of `count` prompts: `seeds` where the caller names them (one per prompt), else drawn from
    torch's global RNG."""
    if seeds is None:
        return [int(s) for s in torch.randint(SEED_LIMIT, (count,)).tolist()]
    if len(seeds) != count:
        raise ValueError(f"{len(seeds)} sampling seeds for {count} prompts: give one seed per prompt.")
    return [int(s) for s in seeds]
