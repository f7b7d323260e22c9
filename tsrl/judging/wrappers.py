"""Judges around a judge, composed by `build_judge` from the shared `JudgePolicyConfig` fields:

    [Noise, noise_scope=comparison] → order (BothOrders | RandomOrder) → [Noise, noise_scope=call]
        → Fallback (tie | random | drop) → VerdictCache (cache_path) → Budget → the model judge

Each wrapper answers the three questions of the Judge protocol: pairs (compare), grades (score) and lists
(score_lists: one call per list, the responses shown in the given order; the caller shuffles, no wrapper reorders).

- BothOrders asks (a, b) and (b, a): P(a ≻ b) = ½·(p(a,b) + 1 − p(b,a)); logs swap agreement. Grades and lists
  pass through unchanged (RandomOrder alike).
- RandomOrder shows each pair in a random (seeded, stable) order and maps the answer back, so position
  bias becomes noise instead of a systematic push; ranking fits add the mirror match (j, i, 1 − y). One call
  and one binary verdict per comparison: the TSRL paper's accounting (k calls per sample), hence the default.
  ArenaRL's bidirectional evaluation is order=both (method=arenarl sets it); it costs two calls a comparison.
- Noise (tsrl/judging/noise.py) flips a real verdict with probability flip_prob (the TSRL paper's §4.5 noise
  injection), and replaces a real pointwise grade by a uniformly random grade of the rubric's scale (0, 1, …, 10)
  with the same probability, so a scalar reward (rubric, RLAIF) meets the same p as a comparison, whatever the
  judge; in a list each item's grade is replaced on its own, with the same probability. With
  noise_scope=comparison (default) it sits outside the order wrapper and flips the *comparison*: a sure pair
  judged in both orders at p = 0.3 comes out {1: .7, 0: .3}, as the paper injects it. With noise_scope=call it
  sits inside and flips each request on its own: the same pair comes out {1: .49, ½: .42, 0: .09}.
- Fallback replaces a missing verdict by a tie, a random winner, or keeps None (drop: the reward regime
  then leaves that comparison out, or drops the group), and counts every use; a missing pointwise grade
  likewise becomes 5 (tie), a uniform grade in [0, 10] (random) or stays None (drop), and a list that got no
  answer gets 5 for every item, a uniform grade per item, or stays None.
- Budget stops the run with a UserError before a step or the run exceeds its call, token or dollar allowance (a
  list is one call). The run's allowance (`RunAllowance`) is shared by every judge of the run that asks the same
  endpoint — the training judge, the judge that ranks the ladders, the held-out evaluation judge — so each call
  counts once, whichever judge sent it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

from tsrl.errors import ConfigError, UserError
from tsrl.judging.base import Judge, JudgeCounters, close_judge, merge_metrics, stable_uniform
from tsrl.rendering import RenderConfig
from tsrl.types import ListRequest, ListScores, PairRequest, Score, ScoreRequest, Verdict

ORDERS = ("both", "random", "fixed")
NOISE_SCOPES = ("comparison", "call")
FAILURE_POLICIES = ("tie", "random", "drop")


class BudgetExceeded(UserError):
    """The judge budget of a step or of the run is spent."""


@dataclass
class BudgetConfig:
    """Judge allowance; 0 = unlimited. Counts requests actually sent to the model (cache hits are free)."""

    max_calls_per_step: int = 0
    """Most model requests between two metric drains (one training step; setup's ladder build is one too)."""
    max_tokens_per_step: int = 0
    """Most judge tokens (prompt + completion) per step."""
    max_calls_per_run: int = 0
    """Most model requests in the whole process."""
    max_tokens_per_run: int = 0
    """Most judge tokens in the whole process."""
    max_usd_per_run: float = 0.0
    """Most dollars of judge calls in the whole process, priced at judge.price_in_per_m / price_out_per_m with the
    tokens each answer used (needs those prices)."""
    allow_partial: bool = False
    """Start a run whose estimate printed at start passes a run cap (calls, tokens or dollars): it stops cleanly
    when the cap is spent and trainer.checkpoint.resume=auto continues it. False refuses it before any call."""

    def __post_init__(self) -> None:
        for name in ("max_calls_per_step", "max_tokens_per_step", "max_calls_per_run", "max_tokens_per_run"):
            if getattr(self, name) < 0:
                raise ConfigError(f"judge.budget.{name} must be >= 0 (0 = no limit), got {getattr(self, name)}.")
        if self.max_usd_per_run < 0:
            raise ConfigError(f"judge.budget.max_usd_per_run must be >= 0 (0 = no limit), got {self.max_usd_per_run}.")


class RunAllowance:
    """The run caps of one BudgetConfig and what the process has spent against them: calls, tokens and dollars.
    Every judge of a run that asks the same endpoint holds the same one (the evaluation judge by default), from any
    thread (trainer.pipeline's scoring worker beside the evaluation): a batch's calls are checked and reserved under
    the lock before it is sent, so two judges cannot both take the last of the allowance."""

    def __init__(self, cfg: BudgetConfig) -> None:
        self.cfg = cfg
        self.calls = self.tokens = 0
        self.usd = 0.0
        self.lock = threading.Lock()


@dataclass
class JudgePolicyConfig:
    """Wrapper settings shared by every judge (rubric_sim, openai, hf_local)."""

    OPERATIONAL: ClassVar[tuple[str, ...]] = ("budget", "cache_path", "max_setup_calls")
    """Settings that change how verdicts are fetched, paid for or stored, not what they are (judge_fingerprint)."""

    order: str = "random"
    """random (one call per pair in a seeded random order: TSRL's binary verdict, k calls per sample) | both (ask
    both orders and average, two calls per pair: ArenaRL's bidirectional evaluation) | fixed (as given)."""
    flip_prob: float = 0.0
    """Probability of flipping each real verdict, and of replacing each real grade by a uniformly random grade
    of the 0–10 scale (noise injection, TSRL §4.5; 0 = off)."""
    noise_scope: str = "comparison"
    """What one flip acts on: comparison (the paper's: both orders flipped together) | call (each request)."""
    failure: str = "drop"
    """What a missing verdict becomes: drop (None: the regime leaves it out) | tie (½) | random (0 or 1)."""
    cache_path: str = ""
    """SQLite verdict cache file (empty = no cache); shared safely across runs of the same judge."""
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    max_setup_calls: int = 50_000
    """Most judge calls a run may make before training (the anchor round-robins); a run whose setup would ask more
    stops before asking anything (0 = no limit). The largest paper recipe asks 2,880 on its shipped data."""
    render: RenderConfig = field(default_factory=RenderConfig)
    """Screenshots for tasks whose responses are web pages (task=web): see tsrl/rendering/."""
    seed: int = 0
    """Seed of random order and random fallback (stable hashes of seed and question)."""
    noise_seed: int | None = None
    """Seed of the injected noise's draws (judge.flip_prob); null = the run's `seed`, so replicate runs flip
    different judgments. An integer pins one noise realisation for every run seed."""

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ConfigError(f"judge.order={self.order!r} is unknown; choose one of {list(ORDERS)}.")
        if self.failure not in FAILURE_POLICIES:
            raise ConfigError(f"judge.failure={self.failure!r} is unknown; choose one of {list(FAILURE_POLICIES)}.")
        check_noise(self.flip_prob, self.noise_scope)
        if self.max_setup_calls < 0:
            raise ConfigError(f"judge.max_setup_calls must be >= 0 (0 = no limit), got {self.max_setup_calls}.")


def check_noise(flip_prob: float, scope: str) -> None:
    if not 0.0 <= flip_prob <= 1.0:
        raise ConfigError(f"judge.flip_prob must lie in [0, 1], got {flip_prob}.")
    if scope not in NOISE_SCOPES:
        raise ConfigError(f"judge.noise_scope={scope!r} is unknown; choose one of {list(NOISE_SCOPES)}.")


def swapped(request: PairRequest) -> PairRequest:
    return replace(
        request,
        first=request.second,
        second=request.first,
        first_image=request.second_image,
        second_image=request.first_image,
    )


def mirrored(verdict: Verdict) -> Verdict:
    return replace(verdict, p_first=None if verdict.p_first is None else 1.0 - verdict.p_first)


class BothOrders:
    """P(a ≻ b) = ½·(p(a,b) + 1 − p(b,a)); one side missing → the other side alone; both → no verdict."""

    def __init__(self, inner: Judge) -> None:
        self.inner = inner
        self.agreements: list[float] = []

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        answers = self.inner.compare([*requests, *map(swapped, requests)])
        return [self._combine(fwd, rev) for fwd, rev in zip(answers[: len(requests)], answers[len(requests) :])]

    def _combine(self, fwd: Verdict, rev: Verdict) -> Verdict:
        sides = [p for p in (fwd.p_first, None if rev.p_first is None else 1.0 - rev.p_first) if p is not None]
        if len(sides) == 2:
            self.agreements.append(float(sides[0] == sides[1]))
        return Verdict(
            p_first=sum(sides) / len(sides) if sides else None,
            raw=f"{fwd.raw}\n---swapped---\n{rev.raw}",
            error="; ".join(e for e in (fwd.error, rev.error) if e) or None,
            tokens=fwd.tokens + rev.tokens,
            latency_s=max(fwd.latency_s, rev.latency_s),
            cached=fwd.cached and rev.cached,
            form=fwd.form if fwd.form == rev.form else f"{fwd.form}|{rev.form}",
        )

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        return self.inner.score(requests)  # pointwise: no order to swap

    def score_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]:
        return self.inner.score_lists(requests)  # the caller shuffles a list; its order is not ours to change

    def drain_metrics(self) -> dict[str, float]:
        metrics = self.inner.drain_metrics()
        if self.agreements:
            metrics["swap_agreement"] = sum(self.agreements) / len(self.agreements)
        self.agreements = []
        return metrics


class RandomOrder:
    """Shows each pair in a stable pseudo-random order (hash of seed and texts) and maps answers back."""

    def __init__(self, inner: Judge, seed: int) -> None:
        self.inner, self.seed = inner, seed

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        flips = [stable_uniform(self.seed, "order", r.prompt.id, r.first, r.second) < 0.5 for r in requests]
        answers = self.inner.compare([swapped(r) if f else r for r, f in zip(requests, flips)])
        return [mirrored(v) if f else v for v, f in zip(answers, flips)]

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        return self.inner.score(requests)

    def score_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]:
        return self.inner.score_lists(requests)

    def drain_metrics(self) -> dict[str, float]:
        return self.inner.drain_metrics()


class Fallback:
    """Applies the failure policy to verdicts the judge could not give; the error text is kept."""

    def __init__(self, inner: Judge, policy: str, seed: int) -> None:
        self.inner, self.policy, self.seed = inner, policy, seed
        self.counters = JudgeCounters()

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        answers = self.inner.compare(requests)
        return [v if v.p_first is not None else self._fallback(r, v) for r, v in zip(requests, answers)]

    def _fallback(self, request: PairRequest, verdict: Verdict) -> Verdict:
        self.counters.add("fallbacks")
        self.counters.add(f"fallbacks/{self.policy}")
        if self.policy == "drop":
            return verdict
        coin = stable_uniform(self.seed, "fallback", request.prompt.id, request.first, request.second)
        p = 0.5 if self.policy == "tie" else float(coin < 0.5)
        return replace(verdict, p_first=p, raw=f"[fallback {self.policy}: {verdict.error}] {verdict.raw}")

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        """The same policy for grades: tie → the middle grade 5, random → a uniform grade in [0, 10]."""
        answers = self.inner.score(requests)
        return [s if s.value is not None else self._fallback_score(r, s) for r, s in zip(requests, answers)]

    def _fallback_score(self, request: ScoreRequest, score: Score) -> Score:
        self.counters.add("fallbacks")
        self.counters.add(f"fallbacks/{self.policy}")
        if self.policy == "drop":
            return score
        draw = stable_uniform(self.seed, "fallback-score", request.prompt.id, request.response)
        value = 5.0 if self.policy == "tie" else 10.0 * draw
        return replace(score, value=value, raw=f"[fallback {self.policy}: {score.error}] {score.raw}")

    def score_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]:
        """The same policy for a list without an answer: tie → 5 for every item, random → a uniform grade in
        [0, 10] per item (a stable draw of the prompt, the responses in shown order and the slot)."""
        answers = self.inner.score_lists(requests)
        return [s if s.values is not None else self._fallback_list(r, s) for r, s in zip(requests, answers)]

    def _fallback_list(self, request: ListRequest, scores: ListScores) -> ListScores:
        self.counters.add("fallbacks")
        self.counters.add(f"fallbacks/{self.policy}")
        if self.policy == "drop":
            return scores
        ids = (self.seed, "fallback-list", request.prompt.id, *request.responses)
        n = len(request.responses)
        values = [5.0] * n if self.policy == "tie" else [10.0 * stable_uniform(*ids, slot) for slot in range(n)]
        return replace(scores, values=values, raw=f"[fallback {self.policy}: {scores.error}] {scores.raw}")

    def drain_metrics(self) -> dict[str, float]:
        return merge_metrics(self.counters.drain(), self.inner.drain_metrics())


class Budget:
    """Refuses (BudgetExceeded, a UserError: the CLI stops with its one sentence) a batch that would pass the call
    allowance, or the dollar allowance at the run's mean cost per call so far, and stops after a batch whose tokens
    or dollars passed their allowance. The step caps are this judge's; the run caps are `run`'s (shared)."""

    def __init__(self, inner: Judge, cfg: BudgetConfig, run: RunAllowance | None = None) -> None:
        self.inner, self.cfg = inner, cfg
        self.run = run or RunAllowance(cfg)
        self.step_calls = self.step_tokens = 0

    def _check_calls(self, n: int) -> None:
        run = self.run
        for used, limit, name in (
            (self.step_calls, self.cfg.max_calls_per_step, "max_calls_per_step"),
            (run.calls, run.cfg.max_calls_per_run, "max_calls_per_run"),
        ):
            if limit and used + n > limit:
                raise BudgetExceeded(
                    f"Judge budget spent: {used} calls made and {n} more needed exceed "
                    f"judge.budget.{name}={limit}; raise it or set it to 0 for no limit."
                )
        cap = run.cfg.max_usd_per_run
        if cap and run.calls and run.usd + n * run.usd / run.calls > cap:
            raise BudgetExceeded(
                f"Judge budget spent: ${run.usd:,.4f} paid for {run.calls} calls, and {n} more at that mean cost "
                f"would pass judge.budget.max_usd_per_run={cap:g}; raise it or set it to 0 for no limit."
            )

    def _charge(self, tokens: int, usd: float) -> None:
        run = self.run
        self.step_tokens += tokens
        run.tokens += tokens
        run.usd += usd
        for used, limit, name in (
            (self.step_tokens, self.cfg.max_tokens_per_step, "max_tokens_per_step"),
            (run.tokens, run.cfg.max_tokens_per_run, "max_tokens_per_run"),
        ):
            if limit and used > limit:
                raise BudgetExceeded(
                    f"Judge budget spent: {used} judge tokens exceed judge.budget.{name}={limit}; "
                    "raise it or set it to 0 for no limit."
                )
        if run.cfg.max_usd_per_run and run.usd > run.cfg.max_usd_per_run:
            raise BudgetExceeded(
                f"Judge budget spent: ${run.usd:,.4f} paid for {run.calls} calls exceeds "
                f"judge.budget.max_usd_per_run={run.cfg.max_usd_per_run:g}; raise it or set it to 0 for no limit."
            )

    def _ask(self, method: str, requests: Sequence) -> list:
        with self.run.lock:  # checked and reserved together (RunAllowance)
            self._check_calls(len(requests))
            self.step_calls += len(requests)
            self.run.calls += len(requests)
        paid = usd_spent(self.inner)
        answers = getattr(self.inner, method)(requests)
        with self.run.lock:
            self._charge(sum(a.tokens for a in answers), usd_spent(self.inner) - paid)
        return answers

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        return self._ask("compare", requests)

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        return self._ask("score", requests)

    def score_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]:
        """One call per list, whatever its length; its tokens charged."""
        return self._ask("score_lists", requests)

    def drain_metrics(self) -> dict[str, float]:
        self.step_calls = self.step_tokens = 0
        return self.inner.drain_metrics()


def usd_spent(judge: Judge) -> float:
    """The dollars a model judge has paid so far (its `spent_usd`: the openai judge prices each answer's usage),
    looked up through the wrappers inside the budget (a RenderingJudge's `inner`); 0 for a judge that costs nothing."""
    while not hasattr(judge, "spent_usd") and hasattr(judge, "inner"):
        judge = judge.inner
    return getattr(judge, "spent_usd", 0.0)


class Deferred:
    """A judge built on its first question (`build()`): the separate judge that ranks a run's anchor ladders, which
    a run whose regime ranks none never opens."""

    def __init__(self, build: Callable[[], Judge]) -> None:
        self.build, self.inner = build, None

    def _judge(self) -> Judge:
        if self.inner is None:
            self.inner = self.build()
        return self.inner

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        return self._judge().compare(requests)

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        return self._judge().score(requests)

    def score_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]:
        return self._judge().score_lists(requests)

    def drain_metrics(self) -> dict[str, float]:
        return {} if self.inner is None else self.inner.drain_metrics()


class Ranked:
    """The training judge (`inner`: every question goes to it) beside the judge that ranks the anchor ladders
    (`ranking`, RegimeContext.rank_judge): the metrics are both judges', so a ladder ranked during training (a
    self-bootstrap refresh) is counted in that step's judge calls, and closing it closes both."""

    def __init__(self, inner: Judge, ranking: Judge, fingerprint: str) -> None:
        self.inner, self.ranking, self.fingerprint = inner, ranking, fingerprint

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        return self.inner.compare(requests)

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        return self.inner.score(requests)

    def score_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]:
        return self.inner.score_lists(requests)

    def drain_metrics(self) -> dict[str, float]:
        return merge_metrics(self.ranking.drain_metrics(), self.inner.drain_metrics())

    def close(self) -> None:
        close_judge(self.ranking)
