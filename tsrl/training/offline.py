"""Training data of the offline baselines (algo=sft, algo=dpo; tsrl/algo/offline.py) from the ranked ladders.

A step's prompts come from the run's sampler; each becomes a Group whose rollouts are anchor texts tokenised
as the generator would have produced them (the chat prompt's ids, then the text's ids and EOS), so the same
collate → Learner.update path trains on them. The anchors are `offline_ladders`: with algo.anchors=ladder the
k rungs the ladder regime selected for its reward (LadderRegime.selected, made by rewards.ladder.select_rungs
from reward.k and reward.select), with algo.anchors=all every ranked rung; n of them, strongest first:
- sft: the top ⌈top_fraction · n⌉ of them, advantage 1;
- dpo: (better, worse) pairs among them by the ladder's order, rows 2i and 2i + 1 of a group, advantage 0 (unused).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tsrl.algo.offline import SFTConfig
from tsrl.errors import ConfigError
from tsrl.generation.hf import chat_prompt
from tsrl.rewards.ladder import LadderRegime
from tsrl.types import Group, Prompt, Rollout


def check_offline(algo: Any, regime: Any, micro_batch_size: int) -> None:
    """One sentence at start when an offline baseline cannot run: it needs the ranked ladder of reward=ladder,
    DPO at least two anchors per prompt to pair, and DPO's micro-batches must hold whole pairs."""
    if not isinstance(regime, LadderRegime):
        raise ConfigError(
            "algo=sft and algo=dpo train on the ranked anchor ladder that reward=ladder builds; set "
            "reward=ladder (its ranking settings, e.g. reward.ranking, apply)."
        )
    if algo.NEEDS_REFERENCE and min(map(len, offline_ladders(algo, regime).values()), default=2) < 2:
        raise ConfigError(
            "algo=dpo pairs the anchors the ladder reward uses, and reward.k=1 leaves one per prompt; "
            "set reward.k >= 2 or algo.anchors=all."
        )
    if algo.NEEDS_REFERENCE and micro_batch_size % 2:
        raise ConfigError(
            f"algo=dpo needs an even trainer.micro_batch_size (pairs stay whole), got {micro_batch_size}."
        )


def offline_ladders(algo: Any, regime: Any) -> dict[str, list[Any]]:
    """Per prompt id, the ranked rungs (strongest first) an offline baseline trains on: the k the ladder reward
    compares with (algo.anchors=ladder, the regime's own selection) or all of them (algo.anchors=all)."""
    return regime.ladders if algo.anchors == "all" else regime.selected


def sft_ranks(k: int, fraction: float) -> list[int]:
    """The ranks SFT imitates among k rungs (strongest first): the top ⌈fraction · k⌉ (at least one)."""
    return list(range(max(1, math.ceil(fraction * k - 1e-9))))


def dpo_pairs(k: int, rule: str) -> list[tuple[int, int]]:
    """(better rank, worse rank) pairs of k rungs, rank 0 strongest."""
    if rule == "adjacent":
        return [(r, r + 1) for r in range(k - 1)]
    if rule == "top_bottom":
        return [(0, r) for r in range(1, k)]
    return [(i, j) for i in range(k) for j in range(i + 1, k)]


def anchor_rollout(tokenizer: Any, text: str) -> Rollout:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return Rollout(text=text, token_ids=ids, logprobs=[0.0] * len(ids), truncated=False)


def offline_groups(
    algo: Any, prompts: Sequence[Prompt], ladders: dict[str, list[Any]], tokenizer: Any, rng: np.random.Generator
) -> list[Group]:
    """One Group per prompt from its rungs in `ladders` (offline_ladders): SFT's imitated anchors, or DPO's pairs
    (rows 2i better, 2i + 1 worse)."""
    groups = []
    for prompt in prompts:
        rungs = ladders[prompt.id]
        if isinstance(algo, SFTConfig):
            texts = [rungs[r].anchor.text for r in sft_ranks(len(rungs), algo.top_fraction)]
        else:
            pairs = dpo_pairs(len(rungs), algo.pairs)
            if algo.max_pairs and len(pairs) > algo.max_pairs:
                pairs = [pairs[i] for i in sorted(rng.choice(len(pairs), algo.max_pairs, replace=False))]
            texts = [rungs[r].anchor.text for pair in pairs for r in pair]
        prompt_ids = tokenizer(chat_prompt(tokenizer, prompt), add_special_tokens=False)["input_ids"]
        groups.append(
            Group(prompt=prompt, prompt_ids=prompt_ids, rollouts=[anchor_rollout(tokenizer, t) for t in texts])
        )
    return groups
