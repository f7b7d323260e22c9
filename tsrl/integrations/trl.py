"""A reward function for `trl.GRPOTrainer` that scores whole groups with any tsrl regime.

    from tsrl.integrations.trl import TournamentReward
    reward = TournamentReward(num_generations=8, regime="ladder", judge="rubric_sim", k=4)
    trainer = GRPOTrainer(model=..., reward_funcs=[reward], args=GRPOConfig(num_generations=8, ...), ...)

TRL's calling convention (GRPOTrainer._calculate_rewards, TRL 1.x): the function is called on each process
with keyword arguments prompts, completions, completion_ids (lists over that process's slice of the
generation batch, per_device_train_batch_size × steps_per_generation long), plus the dataset's other
columns, trainer_state and log_metric; it returns one float (or None) per completion. TRL's RepeatSampler
lays the num_generations completions of a prompt out consecutively, and each process receives a
contiguous slice — so a group is split across processes whenever that slice length is not a multiple of
num_generations. TRL itself gathers rewards before normalising, but a tournament cannot score half a
group, so this adapter refuses such a batch with an error saying which setting to change.

Prompts and completions may be plain strings or conversational message lists (the last user / assistant
message's text is used). A completion the regime could not score is returned as None (TRL: NaN, left out
of the group baseline) — never 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tsrl.errors import UserError
from tsrl.integrations.scoring import build_scorer


class GroupSplitError(UserError):
    """A batch holds only part of some prompt's group of completions."""


def message_text(value: Any) -> str:
    """The text of a TRL prompt or completion: a string, or the last message of a conversational list."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and isinstance(value[-1], dict):
        content = value[-1].get("content", "")
        if isinstance(content, list):  # multimodal parts: keep the text ones
            return "".join(part.get("text", "") for part in content if isinstance(part, dict))
        return str(content)
    raise UserError(
        f"Cannot read a prompt/completion of type {type(value).__name__}; expected a string or a list of chat messages."
    )


def whole_groups(prompts: Sequence[str], num_generations: int) -> list[str]:
    """The prompt of each consecutive run of num_generations completions; GroupSplitError when the batch
    does not consist of whole groups."""
    G = num_generations
    if len(prompts) % G:
        raise GroupSplitError(
            f"The tsrl reward function received {len(prompts)} completions, not a multiple of num_generations={G}: "
            "TRL split a prompt's group across processes. Set per_device_train_batch_size × steps_per_generation "
            f"(= generation_batch_size / num_processes) to a multiple of {G}."
        )
    heads = []
    for start in range(0, len(prompts), G):
        chunk = prompts[start : start + G]
        if any(p != chunk[0] for p in chunk):
            raise GroupSplitError(
                f"Completions {start}..{start + G - 1} of this batch belong to different prompts, so a group of "
                f"num_generations={G} is split across processes; check that GRPOConfig.num_generations equals "
                f"{G} and that per_device_train_batch_size × steps_per_generation is a multiple of it."
            )
        heads.append(chunk[0])
    return heads


class TournamentReward:
    """Callable reward function for trl.GRPOTrainer backed by a tsrl Scorer (built once)."""

    def __init__(
        self,
        num_generations: int,
        regime: str = "ladder",
        judge: str = "rubric_sim",
        task: str = "humor",
        **scorer_options: Any,
    ) -> None:
        if num_generations < 2:
            raise UserError(f"num_generations={num_generations}: tournaments need at least 2 completions per prompt.")
        self.num_generations = num_generations
        self.scorer = build_scorer(regime, judge, task, **scorer_options)
        self.__name__ = f"tsrl_{regime}"  # TRL logs rewards/<name>

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Any = None,
        log_metric: Any = None,
        **kwargs: Any,
    ) -> list[float | None]:
        G = self.num_generations
        heads = whole_groups([message_text(p) for p in prompts], G)
        texts = [message_text(c) for c in completions]
        batch = self.scorer.score(heads, [texts[b * G : (b + 1) * G] for b in range(len(heads))])
        if log_metric is not None:
            for key, value in batch.metrics.items():
                log_metric(f"tsrl/{key}", float(value))
        rewards = batch.rewards.reshape(-1)  # [B*G]
        return [None if np.isnan(r) else float(r) for r in rewards]
