"""`reward=listwise`: one judge call scores a whole group (listwise judging; none of the papers asks a list).

Each group's G completions go to the judge as ONE ListRequest in a shuffled order, under the labels R1 … Rn; the
judge answers a 0–10 score per label (Judge.score_lists) and the scores are mapped back to the completions. With
`reward.orders=m` a group is asked m times, each time in another shuffle: order o of group b (its index in the
step's batch) at step t draws from np.random.default_rng([seed, t, b, o]), t the count of scored steps, which
travels in checkpoints, so a resumed run draws the same shuffles. A completion's score s(c) is its mean over the
orders, and without anchors the reward is (`reward.output`)

    standardised (default): (s − mean_G s) / std_G s   (a constant group → zeros)
    rank:                   1 − rank(s)/(G−1) ∈ [0, 1]  (rank 0 = highest s, ties share their average rank).

A listwise ladder (`reward.anchors=k ≥ 1`): the prompt's k ladder anchors — ranked and selected exactly as
`reward=ladder reward.k=k` does (`reward.ladder.*`: the stored ladder, ranking, select), frozen for the run — join
every list, shuffled together with the completions. The reward of c is the share of the k anchors it outscored
in the same call, ties ½, averaged over the orders:

    w(c) = (1/m) Σ_o (1/k) Σ_i ([s_o(c) > s_o(a_i)] + ½ [s_o(c) = s_o(a_i)]) ∈ [0, 1],

not standardised here (the trainer's advantages centre it, as they centre the ladder's win-rate; reward.output is
not used). One call per group and order instead of the ladder's G·k comparisons; the ladder's one-time anchor
round-robin is judged at setup (none when the ladder is stored already).

Long lists (`reward.max_items=n`, 0 = no limit): an order whose list would hold more than n items is split into
calls of at most n items.
- With anchors, each call holds all k anchors and at most n − k completions (the anchors are repeated in every
  call), so each completion is still measured against all k anchors, in its own call.
- Without anchors, the order's shuffled completions are cut into ⌈G/n⌉ near-equal chunks, and each chunk's scores
  are standardised within the chunk before the orders are averaged: a judge may use another part of its scale in
  each call, and standardising cancels a chunk's offset and spread (its frame). It also gives every chunk mean 0,
  which is fair when each chunk holds a fair share of the group; the chunks differ in every order, so averaging
  the orders evens that out. Without a split the raw scores are averaged.
Each chunk is shuffled again with its anchors, so every call's order is random.

A list the judge could not score (ListScores.values None, after the judge's re-asks and failure policy) drops its
group — NaN rewards, left out of the update — and is counted, never read as 0; the step logs a warning with the
first failure's reason (e.g. which labels the answer left unscored).

Metrics: reward/comparisons_per_sample (list calls per sample, m/G without splits), listwise/calls,
listwise/split_calls (calls beyond one per group and order), listwise/flat_group_frac (kept groups whose rewards
are all equal: no learning signal), listwise/mean_score (the completions' mean 0–10 score), with anchors
listwise/anchor_tie_rate (completion–anchor pairs scored equal); reward/missing_verdicts (lists left unscored),
reward/dropped_groups.

Shapes: B groups, G completions, k anchors, m orders, n items per call at most. A call's slots index the group's
items: 0 … G−1 its completions, G … G+k−1 its anchors.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from tsrl.errors import ConfigError, UserError
from tsrl.ranking import standardise
from tsrl.registry import REWARDS
from tsrl.rewards.base import RegimeContext, StepCounted
from tsrl.rewards.intragroup import rank_reward
from tsrl.rewards.ladder import LadderConfig, LadderRegime
from tsrl.rewards.stream import GroupStream, Streams
from tsrl.tasks import Task
from tsrl.types import Count, Group, ListRequest, ListScores, RewardBatch

OUTPUTS = {"standardised": standardise, "rank": rank_reward}
"""What a group without anchors is rewarded, from its completions' mean scores [G]."""


@dataclass
class ListwiseConfig:
    """Reward `listwise`: one judge call scores a group's whole list, optionally with its k ladder anchors."""

    output: str = "standardised"
    """Without anchors: standardised ((s − mean)/std over the group) | rank (1 − rank/(G−1), ties share)."""
    orders: int = 1
    """Calls per group, each in another shuffle; a completion's score is its mean over them."""
    anchors: int = 0
    """k ladder anchors of the prompt in every list (0: none); reward = share of them outscored, ties ½."""
    max_items: int = 0
    """Most items one call may show (0: no limit); a longer list is split (with anchors: all k in each call)."""
    seed: int = 0
    """Seed of the shuffles (mixed with the step, the group and the order)."""
    ladder: LadderConfig = field(default_factory=LadderConfig)
    """How the anchors are ranked and picked (ladder_dir, l2, ranking, select, rebuild as in reward=ladder); its k
    is reward.anchors."""

    def __post_init__(self) -> None:
        if self.output not in OUTPUTS:
            raise ConfigError(f"reward.output={self.output!r} is unknown; choose one of {', '.join(OUTPUTS)}.")
        if self.orders < 1:
            raise ConfigError(f"reward.orders={self.orders} must be at least 1 (judge calls per group).")
        if self.anchors < 0 or self.max_items < 0:
            raise ConfigError(
                f"reward.anchors={self.anchors} and reward.max_items={self.max_items} must both be >= 0 (0: none, "
                "no limit)."
            )
        if self.anchors and 0 < self.max_items <= self.anchors:
            raise ConfigError(
                f"reward.max_items={self.max_items} leaves no room for a completion beside the "
                f"reward.anchors={self.anchors} anchors every call holds; set reward.max_items above "
                f"{self.anchors}, or to 0 for no limit."
            )
        if not self.anchors and self.max_items == 1:
            raise ConfigError(
                "reward.max_items=1 shows one completion per call, whose score standardised within its call is "
                "always 0; set it to at least 2, or to 0 for no limit."
            )


@dataclass(frozen=True)
class ListCall:
    """One judge call: group `group` (index in the step's batch), order `order`, showing `slots` [n] in order."""

    group: int
    order: int
    slots: np.ndarray


def shuffled_calls(size: int, anchors: int, per_call: int, rng: np.random.Generator) -> list[np.ndarray]:
    """One order's calls for a group of `size` completions: the completions shuffled and cut into near-equal
    chunks of at most `per_call` (0: one chunk), each chunk joined by the anchors (slots size … size+anchors−1) and
    shuffled again. Returns each call's slots [n]."""
    chunks = 1 if per_call <= 0 else -(-size // per_call)
    calls = []
    for chunk in np.array_split(rng.permutation(size), chunks):
        items = np.concatenate([chunk, np.arange(size, size + anchors)])
        calls.append(items[rng.permutation(len(items))])
    return calls


def anchor_shares(scores: np.ndarray, slots: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """For one call with anchors: the completions it showed [c] and the share of the call's anchors each one
    outscored, ties ½ [c]."""
    shown = slots < size
    mine, theirs = scores[shown][:, None], scores[~shown][None, :]  # [c, 1], [1, k]
    return slots[shown], ((mine > theirs) + 0.5 * (mine == theirs)).mean(axis=1)


def call_values(scores: np.ndarray, slots: np.ndarray, size: int, anchored: bool, split: bool) -> np.ndarray:
    """What one answered call says about each completion it showed, as a row [size] (NaN where not shown): the
    share of anchors outscored, the score standardised within the call (a split list), or the raw score."""
    row = np.full(size, np.nan)
    if anchored:
        shown, shares = anchor_shares(scores, slots, size)
        row[shown] = shares
    else:
        row[slots] = standardise(scores) if split else scores
    return row


def group_rewards(rows: np.ndarray, anchored: bool, output: str) -> np.ndarray:
    """A group's rewards [G] from its calls' rows [calls, G] (each completion in one call per order): the mean
    over orders, then (without anchors) the output rule."""
    mean = np.nanmean(rows, axis=0)  # [G]
    return mean if anchored else OUTPUTS[output](mean)


def require_lists(judge: object) -> None:
    """Every judge of the stack — the one given and each `.inner` below it — has score_lists, else a ConfigError
    naming the first that lacks it."""
    node = judge
    while node is not None:
        if not callable(getattr(node, "score_lists", None)):
            where = "" if node is judge else f" (inside {type(judge).__name__})"
            raise ConfigError(
                f"reward=listwise asks the judge to score lists, but judge {type(node).__name__}{where} has no "
                "score_lists method; give it score_lists(requests) -> list[ListScores] (see tsrl.judging.Judge), "
                "or choose a pairwise or pointwise reward."
            )
        node = getattr(node, "inner", None)


def check_list_anchors(cfg: ListwiseConfig, task: Task) -> None:
    """With reward.anchors=k, every training prompt has at least k anchors (cheap: runs before the policy is
    built)."""
    if not cfg.anchors:
        return
    prompts = task.prompts("train")
    short = [p for p in prompts if len(p.anchors) < cfg.anchors]
    if short:
        fewest = min(len(p.anchors) for p in prompts)
        lower = f"lower reward.anchors to at most {fewest}" if fewest else "set reward.anchors=0"
        raise ConfigError(
            f"reward.anchors={cfg.anchors} puts {cfg.anchors} ladder anchors in every list, but prompt "
            f"{short[0].id!r} of task {task.name} has {len(short[0].anchors)} ({len(short)} of {len(prompts)} "
            f"prompts short); give the data anchors (tsrl-ladder, then task.anchors_file=...) or {lower}."
        )


def warn_dropped(dropped: int, total: int, answers: Sequence[ListScores]) -> None:
    """Log how many groups a step dropped and why the first unscored list failed (the judge's one sentence)."""
    reason = next(a.error for a in answers if a.values is None) or "no reason given"
    logging.getLogger("tsrl").warning(
        "listwise: %d of %d groups dropped (NaN rewards), each with a list the judge could not score; the first "
        "reason: %s",
        dropped,
        total,
        reason,
    )


class ListwiseRegime(Streams, StepCounted):
    """One shuffled list per group and order (optionally with the prompt's k ladder anchors); see the module
    docstring. Streams: each arrival's lists go to the judge as one batch."""

    def __init__(self, cfg: ListwiseConfig, ctx: RegimeContext) -> None:
        require_lists(ctx.judge)
        self.cfg, self.ctx, self.steps = cfg, ctx, 0
        self.anchors: dict[str, list[str]] = {}  # prompt id → its k anchors' texts, frozen for the run
        if cfg.anchors:
            check_list_anchors(cfg, ctx.task)
            ladder = LadderRegime(replace(cfg.ladder, k=cfg.anchors), ctx)  # ranks (or loads) and selects
            self.anchors = {pid: [r.anchor.text for r in rungs] for pid, rungs in ladder.selected.items()}

    @property
    def per_call(self) -> int:
        """Completions one call may show (0: all of the group)."""
        return self.cfg.max_items - self.cfg.anchors if self.cfg.max_items else 0

    def calls_for(self, index: int, group: Group) -> list[tuple[ListCall, ListRequest]]:
        """Group `index`'s calls of this step, every order, with the judge requests that show them."""
        if self.cfg.anchors and group.prompt.id not in self.anchors:
            raise UserError(
                f"Prompt {group.prompt.id!r} has no anchor ladder: reward=listwise with reward.anchors scores only "
                "the task's training prompts; pass one of them (same text) or set reward.anchors=0."
            )
        texts = [r.text for r in group.rollouts] + self.anchors.get(group.prompt.id, [])
        out = []
        for order in range(self.cfg.orders):
            rng = np.random.default_rng([self.cfg.seed, self.steps, index, order])
            for slots in shuffled_calls(group.size, self.cfg.anchors, self.per_call, rng):
                request = ListRequest(group.prompt, tuple(texts[s] for s in slots))
                out.append((ListCall(index, order, slots), request))
        return out

    def score_stream(self, stream: GroupStream) -> RewardBatch:
        self.steps += 1
        groups: list[Group] = []
        calls: list[ListCall] = []
        answers: list[ListScores] = []
        for chunk in stream.chunks():
            asked = [pair for i, g in enumerate(chunk, start=len(groups)) for pair in self.calls_for(i, g)]
            got = self.ctx.judge.score_lists([request for _, request in asked]) if asked else []
            for (_, request), answer in zip(asked, got):
                if answer.values is not None and len(answer.values) != len(request.responses):
                    raise RuntimeError(
                        f"judge {type(self.ctx.judge).__name__} answered {len(answer.values)} scores for a list of "
                        f"{len(request.responses)} responses; a judge must score every response of a list or none."
                    )
            groups += chunk
            calls += [call for call, _ in asked]
            answers += got
        return self.rewards(groups, calls, answers)

    def rewards(self, groups: Sequence[Group], calls: Sequence[ListCall], answers: Sequence[ListScores]) -> RewardBatch:
        """Rewards [B, G] and metrics from every call of the step and its answer."""
        B, G = len(groups), groups[0].size if groups else 0
        anchored, split = bool(self.cfg.anchors), 0 < self.per_call < G
        rows: list[list[np.ndarray]] = [[] for _ in range(B)]
        dropped = np.zeros(B, dtype=bool)
        scored, ties = [], []  # completions' scores; completion–anchor ties (0/1 per pair)
        for call, answer in zip(calls, answers):
            if answer.values is None:
                dropped[call.group] = True
                continue
            scores = np.asarray(answer.values, dtype=float)  # [n]
            rows[call.group].append(call_values(scores, call.slots, G, anchored, split))
            scored += scores[call.slots < G].tolist()
            if anchored:
                pairs = scores[call.slots < G][:, None] == scores[call.slots >= G][None, :]  # [c, k]
                ties += pairs.ravel().tolist()
        if dropped.any():
            warn_dropped(int(dropped.sum()), B, answers)
        rewards = np.full((B, G), np.nan)
        for b in np.flatnonzero(~dropped):
            rewards[b] = group_rewards(np.stack(rows[b]), anchored, self.cfg.output)
        kept = rewards[~dropped]
        metrics = {
            "reward/comparisons_per_sample": len(calls) / (B * G) if B * G else 0.0,
            "reward/missing_verdicts": Count(sum(a.values is None for a in answers)),
            "reward/dropped_groups": Count(dropped.sum()),
            "listwise/calls": Count(len(calls)),
            "listwise/split_calls": Count(len(calls) - B * self.cfg.orders),
            "listwise/flat_group_frac": float((np.ptp(kept, axis=1) == 0).mean()) if kept.size else 1.0,
            "listwise/mean_score": float(np.mean(scored)) if scored else float("nan"),
        }
        if anchored:
            metrics["listwise/anchor_tie_rate"] = float(np.mean(ties)) if ties else 0.0
        return RewardBatch(rewards=rewards, metrics=metrics)


REWARDS.register("listwise", ListwiseConfig, ListwiseRegime, check=check_list_anchors)
