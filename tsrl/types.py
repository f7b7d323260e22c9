"""The records that travel between stages: plain dataclasses, no behaviour but one: a Rollout's text is the
completion's answer, without the thinking block a reasoning model writes first (`answer_text`); two task protocols.

Dimension letters used across tsrl: B prompts, G completions per prompt (group), K anchors, T tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class Anchor:
    """A reference response for a prompt, with the quality tier its author intended."""

    text: str
    tier: str = ""


@dataclass(frozen=True)
class Prompt:
    """One task prompt: the text the judge reads plus whatever the task needs to judge or verify it.

    `messages` ((role, content) pairs ending with a user turn) is what the policy is shown when the prompt is a
    conversation (counseling); empty = one user turn holding `text`."""

    id: str
    text: str
    anchors: tuple[Anchor, ...] = ()
    fields: dict = field(default_factory=dict, hash=False, compare=False)
    messages: tuple[tuple[str, str], ...] = ()


THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def answer_text(text: str) -> str:
    """A completion's text without its thinking block, as every reader of the completion gets it (judges,
    verifiers, reward models, logs). Qwen3 and other reasoning models open the completion with <think>…</think>;
    some templates open the block in the prompt, so the completion holds only its end. A block never closed (cut
    by max_new_tokens) leaves no answer: "". A completion without a leading block is returned as it is; so is one
    cut inside a block its prompt opened (nothing in the text marks it)."""
    body = text.lstrip()
    if body.startswith(THINK_OPEN):
        _, closed, answer = body.partition(THINK_CLOSE)
        return answer.strip() if closed else ""
    thinking, closed, answer = text.partition(THINK_CLOSE)
    return answer.strip() if closed and THINK_OPEN not in thinking else text


@dataclass
class Rollout:
    """One sampled completion. `text` is the answer (answer_text: a leading thinking block is cut here, once, for
    every reader); token_ids and logprobs are everything the policy wrote, the thinking included: what it is
    trained on."""

    text: str
    token_ids: list[int]  # [T] completion tokens, EOS included when the model stopped
    logprobs: list[float]  # [T] sampling log-probabilities of those tokens
    truncated: bool  # True when max_new_tokens was reached without EOS

    def __post_init__(self) -> None:
        self.text = answer_text(self.text)


@dataclass
class Group:
    """All G completions of one prompt. Tournaments always see a whole group."""

    prompt: Prompt
    prompt_ids: list[int]  # [P] tokenised chat prompt
    rollouts: list[Rollout]

    @property
    def size(self) -> int:
        return len(self.rollouts)


Emit = Callable[[list[tuple[int, Group]]], None]
"""A generator's callback for groups that are finished: (index in the batch, group) pairs."""


@dataclass(frozen=True)
class PairRequest:
    """Ask the judge which of two responses to the same prompt is better (first vs second)."""

    prompt: Prompt
    first: str
    second: str
    first_image: str | None = None  # optional rendering of `first` (file path or data URL) for vision judges
    second_image: str | None = None  # same for `second`


@dataclass
class Verdict:
    """A judge's answer to one PairRequest.

    p_first is P(first is better) in [0, 1] (1 = first wins, 0.5 = tie), or None when no verdict could be
    obtained; error then says why. A verdict is never silently turned into a tie or a win.
    """

    p_first: float | None
    raw: str = ""
    error: str | None = None
    tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    form: str = ""  # how a model judge was asked: "<form>/<constraint>" (judge.form / judge.constrain), "+soft"


@dataclass(frozen=True)
class ScoreRequest:
    """Ask the judge for a pointwise rubric score (0–10) of one response (the Rubrics baseline)."""

    prompt: Prompt
    response: str
    image: str | None = None  # optional rendering of `response` (file path or data URL) for vision judges


@dataclass
class Score:
    """A judge's pointwise answer: value in [0, 10], or None with error saying why."""

    value: float | None
    raw: str = ""
    error: str | None = None
    tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    form: str = ""  # as Verdict.form


@dataclass(frozen=True)
class ListRequest:
    """Ask the judge for one score (0–10) per response, all responses shown in one call in this order under the
    labels R1 … Rn (listwise judging). The caller shuffles: slot i of the call is responses[i]."""

    prompt: Prompt
    responses: tuple[str, ...]
    images: tuple[str | None, ...] = ()  # optional renderings, one per response (empty = none), for vision judges


@dataclass
class ListScores:
    """A judge's answer to one ListRequest: values[i] in [0, 10] scores responses[i], or values is None with error
    saying why (an answer that does not score every label is no answer)."""

    values: list[float] | None
    raw: str = ""
    error: str | None = None
    tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    form: str = ""  # as Verdict.form

    @property
    def value(self) -> list[float] | None:
        """values, under the name the counters read from every answer."""
        return self.values


class Count(float):
    """A metric value that processes add up when their metrics are gathered (a counter: judge calls, errors,
    dropped groups). Every other metric value is averaged across processes. Whoever emits a metric decides:
    wrap a counter in Count, leave a rate or a mean a plain float."""

    def __add__(self, other: float) -> Count:
        return Count(float(self) + float(other))

    __radd__ = __add__


@dataclass
class RewardBatch:
    """What a reward regime returns for a list of groups."""

    rewards: np.ndarray  # [B, G] float, NaN rows = groups the regime could not score
    metrics: dict[str, float] = field(default_factory=dict)  # reward/*, route/*, … (Count for counters)


@runtime_checkable
class SimulatedQuality(Protocol):
    """A task with a latent quality q(prompt, text) computed from observable properties (judge=rubric_sim)."""

    def quality(self, prompt: Prompt, text: str) -> float: ...


@runtime_checkable
class Rendered(Protocol):
    """A task whose responses are web pages: page(text) is the HTML document to render and show the judge."""

    def page(self, text: str) -> str: ...
