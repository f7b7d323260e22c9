"""Training data of the offline baselines (algo=sft, algo=dpo; tsrl/algo/offline.py) from the ranked ladders.

A step's prompts come from the run's sampler; each becomes a Group whose rollouts are anchor texts tokenised
as the generator would have produced them (the chat prompt's ids, then the text's ids and EOS), so the same
collate → Learner.update path trains on them:
- sft: the top ⌈top_fraction · K⌉ anchors of the prompt's ladder (strongest first), advantage 1;
- dpo: (better, worse) pairs by the ladder's order, rows 2i and 2i + 1 of a group, advantage 0 (unused).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from tsrl.errors import ConfigError
from tsrl.generation.hf import chat_prompt
from tsrl.types import Group, Prompt, Rollout


def check_offline(algo: Any, regime: Any, micro_batch_size: int) -> None:
    """One sentence at start when an offline baseline cannot run: it needs the ranked ladder of reward=ladder,
    and DPO's micro-batches must hold whole pairs."""
    if not isinstance(getattr(regime, "ladders", None), dict):
        raise ConfigError("algo=sft and algo=dpo train on the ranked anchor ladder that reward=ladder builds; set "
                          "reward=ladder (its ranking settings, e.g. reward.ranking, apply).")
    if getattr(algo, "NEEDS_REFERENCE", False) and micro_batch_size % 2:
        raise ConfigError(f"algo=dpo needs an even trainer.micro_batch_size (pairs stay whole), got {micro_batch_size}.")


def sft_ranks(k: int, fraction: float) -> list[int]:
    """The ladder ranks SFT imitates: the top ⌈fraction · K⌉ (at least one)."""
    return list(range(max(1, math.ceil(fraction * k - 1e-9))))


def dpo_pairs(k: int, rule: str) -> list[tuple[int, int]]:
    """(better rank, worse rank) pairs of a K-rung ladder, rank 0 strongest."""
    if rule == "adjacent":
        return [(r, r + 1) for r in range(k - 1)]
    if rule == "top_bottom":
        return [(0, r) for r in range(1, k)]
    return [(i, j) for i in range(k) for j in range(i + 1, k)]


def anchor_rollout(tokenizer: Any, text: str) -> Rollout:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return Rollout(text=text, token_ids=ids, logprobs=[0.0] * len(ids), truncated=False)


def offline_groups(algo: Any, prompts: Sequence[Prompt], ladders: dict[str, list[Any]], tokenizer: Any,
                   rng: np.random.Generator) -> list[Group]:
    """One Group per prompt: SFT's imitated anchors, or DPO's pairs (rows 2i better, 2i + 1 worse)."""
    groups = []
    for prompt in prompts:
        rungs = ladders[prompt.id]
        if hasattr(algo, "top_fraction"):
            texts = [rungs[r].anchor.text for r in sft_ranks(len(rungs), algo.top_fraction)]
        else:
            pairs = dpo_pairs(len(rungs), algo.pairs)
            if algo.max_pairs and len(pairs) > algo.max_pairs:
                pairs = [pairs[i] for i in sorted(rng.choice(len(pairs), algo.max_pairs, replace=False))]
            texts = [rungs[r].anchor.text for pair in pairs for r in pair]
        prompt_ids = tokenizer(chat_prompt(tokenizer, prompt), add_special_tokens=False)["input_ids"]
        groups.append(Group(prompt=prompt, prompt_ids=prompt_ids, rollouts=[anchor_rollout(tokenizer, t) for t in texts]))
    return groups
