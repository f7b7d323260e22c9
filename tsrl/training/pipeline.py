"""`trainer.pipeline=stream | overlap`: the judge off the step's critical path.

Streamed (`Streamer`), a step stays on-policy: one worker thread judges the step's groups as the generator
finishes them (tsrl/rewards/stream.py) while generation goes on, so a step costs generate + the judging left
after the last group + update, and it asks the same questions and gets the same rewards as a sync step.

A sync step is generate(θ_{t−1}) → score → update → θ_t, so every second the judge takes is a second the policy's
hardware idles. Overlapped, one worker thread scores while the main thread trains:

    step t:  generate G_{t+1} from θ_{t−1} (the current weights)  ‖  the judge scores G_t
             wait for G_t's rewards, hand G_{t+1} to the judge
             update on G_t → θ_t                                   ‖  the judge scores G_{t+1}

A step then costs max(generate + update, score) instead of their sum. G_{t+1} was sampled from θ_{t−1} and is
trained on from θ_t: one policy version stale, never more (step 1 trains on fresh samples). The loss takes its
ratio π_θ/π_sample against the log-probs the generator reported, so GRPO's clip and CISPO's truncation bound the
correction they already bound (`Learner.update(stale=True)`); `pipeline/staleness` and the ratio statistics
(`train/clip_frac`, `train/approx_kl_old`) are logged.

What stays as in sync: the judge's budget (scoring of the next groups starts only while the run's training calls
are under trainer.max_judge_calls, counted over every process), cache, hedging and dropped-group rules (the
regime and its judge are the same objects, called one batch at a time in step order); generation, the update,
weight sync and a colocated engine's sleep/wake stay on the main thread in sync's order. The groups in flight at a
checkpoint travel in it (trainer_state.json: `pending`) and are scored again on resume, so a resumed run follows
the uninterrupted one. Regimes that read the live policy while scoring (intuitor, reward_model, self_bootstrap)
would race the update and are refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tsrl.errors import ConfigError
from tsrl.rewards.stream import GroupStream, StreamingRegime
from tsrl.types import Emit, Group, Prompt, RewardBatch, Rollout

POLICY_REGIMES = ("intuitor", "reward_model", "self_bootstrap")
"""Regimes whose score() runs the live policy (its logits or its sampler): they cannot overlap the update."""


@dataclass
class Scored:
    """A batch of groups the worker scored, with what it cost."""

    groups: list[Group]
    batch: RewardBatch
    judge_metrics: dict[str, float]
    score_s: float
    version: int
    """Policy updates applied when the groups were sampled."""


class Overlap:
    """One scoring worker; at most one batch in flight."""

    def __init__(
        self,
        score: Callable[[list[Group]], RewardBatch],
        drain: Callable[[], dict[str, float]],
        begin: Callable[[tuple[object, ...]], None] = lambda noise: None,
    ) -> None:
        self._score, self._drain, self._begin = score, drain, begin
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tsrl-score")
        self._future: Future | None = None
        self.in_flight: tuple[list[Group], int] | None = None

    def submit(self, groups: list[Group], version: int, noise: tuple[object, ...] = ()) -> None:
        """Score `groups` (sampled after `version` updates) in the worker; `noise` names the stream the judge's
        injected noise draws from for them (the step they are trained at), set by `begin` before scoring."""
        if self._future is not None:
            raise RuntimeError("the scoring worker holds a batch already: collect it first")
        self.in_flight = (groups, version)
        self._future = self._pool.submit(self._run, groups, version, noise)

    def _run(self, groups: list[Group], version: int, noise: tuple[object, ...]) -> Scored:
        start = time.perf_counter()
        self._begin(noise)
        batch = self._score(groups)
        return Scored(groups, batch, self._drain(), time.perf_counter() - start, version)

    def collect(self) -> Scored:
        """The batch in flight, scored (waits; re-raises what scoring raised, e.g. a spent judge budget)."""
        if self._future is None:
            raise RuntimeError("no batch in flight")
        future, self._future, self.in_flight = self._future, None, None
        return future.result()

    def close(self) -> None:
        """Wait for the batch in flight, if any, and stop the worker (its result is not needed)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


class Streamer:
    """trainer.pipeline=stream: one worker that judges a step's groups while the generator is still producing them."""

    def __init__(self, regime: StreamingRegime) -> None:
        self.regime = regime
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tsrl-stream")

    def run(
        self, generate: Callable[[Emit], list[Group]], total: int
    ) -> tuple[list[Group], RewardBatch, dict[str, float]]:
        """Generate `total` groups with `generate(emit)` while the regime scores them as they are emitted; returns
        the groups, their rewards and the step's times: time/score_s is the worker's whole span (waits for
        groups included), time/score_wait_s what the step waited for it after generation ended."""
        stream = GroupStream(total)
        start = time.perf_counter()

        def score() -> tuple[RewardBatch, float]:
            batch = self.regime.score_stream(stream)
            return batch, time.perf_counter() - start

        future = self._pool.submit(score)
        try:
            groups = generate(stream.put)
            stream.put([(b, g) for b, g in enumerate(groups) if not stream.has(b)])  # a generator that emits nothing
        except BaseException as err:
            stream.close(err)
            future.exception()  # the worker stops at its next take; its error is this one
            raise
        stream.close()
        generated = time.perf_counter()
        batch, score_s = future.result()
        return (
            groups,
            batch,
            {
                "time/generate_s": generated - start,
                "time/score_s": score_s,
                "time/score_wait_s": time.perf_counter() - generated,
            },
        )

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def check_pipeline(pipeline: str, reward_name: str, regime: object, offline: bool) -> None:
    """Refuse, in one sentence, what trainer.pipeline=stream | overlap cannot run."""
    if offline:
        raise ConfigError(
            f"trainer.pipeline={pipeline} has nothing to take off the critical path for an offline "
            "baseline (algo=sft | dpo: no generation, no judge); use trainer.pipeline=sync."
        )
    if reward_name in POLICY_REGIMES:
        raise ConfigError(
            f"trainer.pipeline={pipeline} cannot run reward={reward_name}: it reads the live policy "
            "while scoring, which runs beside generation and the update; use trainer.pipeline=sync."
        )
    if pipeline == "stream" and not isinstance(regime, StreamingRegime):
        raise ConfigError(
            f"trainer.pipeline=stream needs a regime that scores groups as they arrive, and "
            f"reward={reward_name} does not (it has no score_stream); use trainer.pipeline=sync or "
            "overlap."
        )


def encode_groups(groups: Sequence[Group], version: int) -> dict[str, Any]:
    """The groups in flight as JSON for a checkpoint (prompts by id)."""
    return {
        "version": version,
        "groups": [
            {
                "prompt": g.prompt.id,
                "prompt_ids": g.prompt_ids,
                "rollouts": [[r.text, r.token_ids, r.logprobs, r.truncated] for r in g.rollouts],
            }
            for g in groups
        ],
    }


def decode_groups(state: dict[str, Any], prompts: Sequence[Prompt]) -> tuple[list[Group], int]:
    by_id = {p.id: p for p in prompts}
    missing = [g["prompt"] for g in state["groups"] if g["prompt"] not in by_id]
    if missing:
        raise ConfigError(
            f"The checkpoint holds groups in flight for prompt {missing[0]!r}, which the task's "
            "training prompts no longer have; resume with the task it was saved with, or "
            "trainer.checkpoint.resume=never."
        )
    groups = [
        Group(
            by_id[g["prompt"]],
            list(g["prompt_ids"]),
            [Rollout(t, list(i), list(lp), bool(c)) for t, i, lp, c in g["rollouts"]],
        )
        for g in state["groups"]
    ]
    return groups, int(state["version"])
