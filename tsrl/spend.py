"""What a run will ask its judge, said before the first question: a judge call can cost money.

Before any judge call (before the judges are even opened) `tsrl-train` prints, on the main process:
- setup: the anchor round-robins the ladder regimes judge once (K(K−1)/2 pairs per training prompt; none where the
  ladder is stored already), self_bootstrap's first ladder, and the anchors `ladder.build` writes with
  `ladder.endpoint` (requests to that model, not to the judge);
- per step: the regime's calls per group (its tournament played on paper: `schedule_matches`) times the groups a
  step scores, trainer.prompts_per_step over every process (the global batch, shared between the processes: the
  same number on one process and on eight), a range where the calls depend on the answers (adaptive routing,
  trainer.fill);
- evaluation: held-out prompts × samples × their reference anchors per evaluation, times the evaluations;
- the whole run, capped by trainer.max_judge_calls where set, and in dollars where `judge.price_in_per_m` and
  `judge.price_out_per_m` are set, with the tokens per call it assumed;
- the run caps of judge.budget (calls, tokens, dollars) and what they count: every call the process's judges send to
  the training judge's endpoint, the ladder ranking and the held-out evaluation included (an evaluation judge on
  another endpoint counts against eval_judge.budget). `check_caps` refuses, before any call, a run whose estimate
  (the most it can ask) passes a cap, unless judge.budget.allow_partial.

A model call is one request: a pair asked in both orders (judge.order=both) is two, a grade or a whole list one.
Cached verdicts (judge.cache_path) are free, so a run with a warm cache spends less than printed: the numbers are
what the run asks, the most it can pay. `judge.max_setup_calls` stops a run whose setup would pass it, before
anything is spent (`check_setup`). `estimate` is the same arithmetic for a composed config without printing; the
grid of `tsrl-reproduce` sums it over its runs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tsrl.config import per_process_prompts
from tsrl.errors import UserError
from tsrl.judging import eval_judge_config, judge_fingerprint, ranking_judge_config, shares_budget
from tsrl.judging.prompting import resolve_template
from tsrl.progress import counted
from tsrl.ranking import TOPOLOGIES, ConstitutionalBracket, LiveTrace, RoundRobin, TraceRoundRobin
from tsrl.registry import ALGOS, JUDGES, REWARDS
from tsrl.rewards.ladder import ladder_path
from tsrl.tasks.base import task_metric


@dataclass(frozen=True)
class Calls:
    """A number of judge calls that is known exactly (low == high) or only within a range."""

    low: int
    high: int

    def __add__(self, other: Calls) -> Calls:
        return Calls(self.low + other.low, self.high + other.high)

    def times(self, n: int) -> Calls:
        return Calls(self.low * n, self.high * n)

    def text(self) -> str:
        return f"{self.high:,}" if self.low == self.high else f"{self.low:,}–{self.high:,}"


NONE = Calls(0, 0)


@dataclass
class Spend:
    """A run's judge calls: setup, per step, per evaluation; see the module docstring."""

    judge: str
    setup: list[tuple[str, int]] = field(default_factory=list)
    """(what, judge calls) of each setup item."""
    writes: str = ""
    """The anchors the ladder step writes before training, and who writes them ("" = none)."""
    per_step: Calls = NONE
    step_what: str = ""
    steps: int = 0
    per_eval: int = 0
    eval_what: str = ""
    evaluations: int = 0
    max_training_calls: int = 0
    tokens: tuple[int, int] | None = None
    """(prompt, completion) tokens assumed per call for the dollar estimate."""
    prices: tuple[float, float] = (0.0, 0.0)
    start_step: int = 0
    """The step a resumed run continues from (its numbers are those still to come)."""
    ladder: str = ""
    """The stored ladder file the setup round-robin writes ("" = none): runs that share it rank it once."""
    caps: str = ""
    """The run caps of judge.budget and what they count ("" = none set)."""

    @property
    def setup_calls(self) -> int:
        return sum(n for _, n in self.setup)

    @property
    def training(self) -> Calls:
        calls = self.per_step.times(self.steps)
        cap = self.max_training_calls
        return Calls(min(calls.low, cap), min(calls.high, cap)) if cap else calls

    @property
    def total(self) -> Calls:
        fixed = self.setup_calls + self.per_eval * self.evaluations
        return self.training + Calls(fixed, fixed)

    def dollars(self, calls: Calls) -> tuple[float, float] | None:
        if self.tokens is None or not any(self.prices):
            return None
        per_call = (self.tokens[0] * self.prices[0] + self.tokens[1] * self.prices[1]) / 1e6
        return calls.low * per_call, calls.high * per_call

    def lines(self) -> list[str]:
        """What the run prints before its first judge call."""
        lines = [f"judge spend ({self.judge}; model calls, a cached verdict is free):"]
        if self.writes:
            lines.append(f"  ladder anchors: {self.writes}")
        for what, n in self.setup or [("nothing to judge before training", 0)]:
            lines.append(f"  setup: {n:,} calls — {what}")
        lines.append(f"  per step: {self.per_step.text()} calls — {self.step_what}")
        lines.append(
            f"  evaluation: {self.per_eval:,} calls × {counted(self.evaluations, 'evaluation')} = "
            f"{self.per_eval * self.evaluations:,} — {self.eval_what}"
        )
        capped = (
            f", training capped by trainer.max_judge_calls={self.max_training_calls:,}"
            if self.max_training_calls
            else ""
        )
        whole = f"rest of the run from step {self.start_step}" if self.start_step else "whole run"
        lines.append(
            f"  {whole}: {self.total.text()} calls (setup {self.setup_calls:,} + {counted(self.steps, 'step')} × "
            f"{self.per_step.text()}{capped} + evaluation {self.per_eval * self.evaluations:,})"
        )
        money = self.dollars(self.total)
        if money is not None and self.tokens is not None:
            low, high = money
            amount = f"${high:,.2f}" if math.isclose(low, high) else f"${low:,.2f}–${high:,.2f}"
            lines.append(
                f"  at ${self.prices[0]:g} per million prompt tokens and ${self.prices[1]:g} per million completion "
                f"tokens: at most {amount}, assuming {self.tokens[0]:,} prompt + {self.tokens[1]:,} completion tokens "
                "per call (the template, the prompt and two responses of generator.max_new_tokens tokens, 4 "
                "characters a token; the answer at the judge's max_tokens)"
            )
        if self.caps:
            lines.append(f"  caps: {self.caps}")
        return lines


def schedule_matches(make: Callable[[int], Any], seeds: int = 8) -> Calls:
    """Matches a schedule plays, from playing it on paper with seeded random outcomes (`make(seed)` → a fresh
    Schedule): exact when every seed plays as many, a range otherwise."""
    counts = []
    for seed in range(seeds):
        schedule, rng, played = make(seed), np.random.default_rng(seed), 0
        while matches := schedule.next_round():
            played += len(matches)
            schedule.record(rng.choice([0.0, 0.5, 1.0], size=len(matches)).tolist())
        counts.append(played)
    return Calls(min(counts), max(counts))


def group_calls(name: str, reward: Any, size: int, both: bool) -> tuple[Calls, str]:
    """Judge calls to score one group of `size` completions under reward `name`, and how they come about."""
    pairs = 2 if both else 1
    order = " × 2 orders" if both else ""
    if name in ("ladder", "one_anchor", "self_bootstrap"):
        k = reward.ladder.k if name == "self_bootstrap" else reward.k
        what = f"{counted(size, 'completion')} × {counted(k, 'anchor')}{order}"
        return Calls(size * k * pairs, size * k * pairs), what
    if name == "in_batch":
        n = schedule_matches(lambda seed: RoundRobin(size)).times(pairs)
        return n, f"a round-robin of {size}{order}"
    if name == "arena":
        n = schedule_matches(lambda seed: TOPOLOGIES[reward.topology](size, seed)).times(pairs)
        return n, f"{reward.topology.replace('_', ' ')} among {size}{order}"
    if name == "constitutional":
        n = schedule_matches(lambda seed: ConstitutionalBracket(size, 1, seed=seed)).times(pairs)
        return n, f"a single-elimination bracket of {size}{order}"
    if name in ("rubric", "rlaif"):
        return Calls(size, size), counted(size, "grade")
    if name == "listwise":
        chunks = 1 if not reward.max_items else -(-size // max(reward.max_items - reward.anchors, 1))
        calls = reward.orders * chunks
        return Calls(calls, calls), f"{reward.orders} order(s) × {chunks} list(s) of the group"
    if name == "adaptive":
        if reward.tournament == "pointwise":
            high, what = size, counted(size, "grade")
        else:
            live = reward.tournament == "live"
            make = (lambda seed: LiveTrace(size)) if live else (lambda seed: TraceRoundRobin(size))
            high = schedule_matches(make).high * pairs
            what = f"a {'live' if live else 'round-robin'} trace tournament of {size}{order}"
        return Calls(0, high), f"0 when the verifier separates the group, else {what}"
    if name in ("verifier", "intuitor", "reward_model"):
        return NONE, "no judge call (the reward does not ask the judge)"
    calls = getattr(reward, "judge_calls", None)  # a plugin regime may say its own
    if callable(calls):
        low, high = calls(size)
        return Calls(low, high), f"reward={name}'s own count"
    return NONE, f"reward={name} does not say its calls (give its config a judge_calls(group_size) method)"


def ladder_setup(
    name: str, reward: Any, prompts: Sequence[Any], fingerprint: str, task_name: str
) -> tuple[list[tuple[str, int]], str]:
    """The setup round-robin of the regimes that rank anchor ladders: K(K−1)/2 pairs per training prompt, none
    where the same ladder is stored (reward.ladder_dir) and not rebuilt; and the ladder file."""
    if name in ("ladder", "one_anchor"):
        ladder = reward
    elif name == "listwise" and reward.anchors:
        ladder = reward.ladder
    elif name == "reward_model":
        ladder = reward.ladder
    else:
        return [], ""
    pairs = sum(len(p.anchors) * (len(p.anchors) - 1) // 2 for p in prompts)
    sizes = sorted({len(p.anchors) for p in prompts})
    anchors = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}–{sizes[-1]}"
    path = ladder_path(ladder, fingerprint, task_name, prompts)
    if path.is_file() and not ladder.rebuild:
        return [(f"the {len(prompts)} training prompts' ladders are stored ({path})", 0)], str(path)
    what = f"rank the {anchors} anchors of {counted(len(prompts), 'training prompt')} by round-robin"  # K ≥ 2
    return [(what, pairs)], str(path)


def evaluations(max_steps: int, every: int, start_step: int = 0) -> int:
    """Held-out evaluations of a run from `start_step`: at step 0 (a run from the start), every `every` steps and
    at the end."""
    steps = range(start_step + 1, max_steps + 1)
    return (start_step == 0) + len({s for s in steps if every and s % every == 0} | ({max_steps} & set(steps)))


def winrate_calls(prompts: Sequence[Any], samples: int, judge_cfg: Any) -> int:
    """Calls of one held-out win-rate evaluation: every sample against every reference anchor of its prompt, two
    calls a comparison where the judge asks both orders."""
    pairs = 2 if getattr(judge_cfg, "order", "random") == "both" else 1
    return sum(samples * len(p.anchors) * pairs for p in prompts)


def tokens_per_call(cfg: Any, task: Any) -> tuple[int, int]:
    """(prompt, completion) tokens assumed per call: the judge template, a mean training prompt and two responses
    of generator.max_new_tokens tokens, at 4 characters a token; the answer at judge.max_tokens (256 where the
    judge has none)."""
    spec = getattr(cfg.judge, "template", None)  # the simulator has none: the prompt alone
    template = len(resolve_template(spec, task.name).read_text()) if isinstance(spec, str) and spec else 0
    prompts = task.prompts("train")
    prompt = sum(len(p.text) for p in prompts) / max(len(prompts), 1)
    return int((template + prompt) / 4 + 2 * cfg.generator.max_new_tokens), int(getattr(cfg.judge, "max_tokens", 256))


def estimate(cfg: Any, task: Any, world: int | None = None, start_step: int = 0) -> Spend:
    """The run's judge calls (see the module docstring) for a typed RunConfig whose task holds the anchors the
    reward needs (after the ladder step's decision, `prepare_ladder`); a ConfigError where trainer.prompts_per_step
    does not split over the `world` processes (WORLD_SIZE by default), which the run would refuse at start."""
    world = world or int(os.environ.get("WORLD_SIZE", "1"))
    name, tcfg = REWARDS.of(cfg.reward).name, cfg.trainer
    per_process_prompts(tcfg.prompts_per_step, world)  # refused before anything is asked, as the run refuses it
    both = getattr(cfg.judge, "order", "random") == "both"
    prompts = task.prompts("train")
    model = getattr(cfg.judge, "model", "")
    name_ = f"judge={JUDGES.of(cfg.judge).name}" + (f" {model}" if model else "")
    spend = Spend(judge=name_, steps=max(tcfg.max_steps - start_step, 0), start_step=start_step)
    ranking = ranking_judge_config(cfg)  # ladder.judge: the clean judge ranks the ladders (and keys their file)
    spend.setup, spend.ladder = ladder_setup(name, cfg.reward, prompts, judge_fingerprint(ranking), task.name)
    if name == "self_bootstrap":
        k = len(cfg.reward.tiers) * cfg.reward.samples_per_tier
        pairs = len(prompts) * k * (k - 1) // 2
        of = f"{counted(k, 'anchor')} of {counted(len(prompts), 'training prompt')}"
        what = f"rank the first self-sampled ladder: {of}"
        spend.setup = [(what, pairs)]
    asked = (
        " (asked of the strong evaluation judge: ladder.judge)"
        if ranking is not cfg.judge and cfg.distinct_judges
        else ""
    )
    spend.setup = [(what + asked * bool(n), n * (2 if ranking.order == "both" else 1)) for what, n in spend.setup]
    if cfg.algo.OFFLINE:
        spend.per_step, spend.step_what = NONE, f"algo={ALGOS.of(cfg.algo).name} trains on the ladder's anchors"
    else:
        groups = tcfg.prompts_per_step  # the global batch: the same calls on any number of processes
        per_group, how = group_calls(name, cfg.reward, tcfg.group_size, both)
        spend.per_step = per_group.times(groups)
        spend.step_what = f"{counted(groups, 'group')} × ({how}) (reward={name})"
        if tcfg.fill == "resample":
            spend.per_step = Calls(spend.per_step.low, spend.per_step.high * tcfg.fill_max_batches)
            spend.step_what += f", up to {tcfg.fill_max_batches} batches with trainer.fill=resample"
        if name == "self_bootstrap" and cfg.reward.period:
            k = len(cfg.reward.tiers) * cfg.reward.samples_per_tier
            spend.step_what += f"; every {cfg.reward.period} steps (or early) {len(prompts) * k * (k - 1) // 2:,} more"
    eval_prompts = task.prompts("eval")
    eval_prompts = eval_prompts[: tcfg.eval.max_prompts] if tcfg.eval.max_prompts else eval_prompts
    eval_cfg = eval_judge_config(cfg)
    if task_metric(task) == "winrate":
        spend.per_eval = winrate_calls(eval_prompts, tcfg.eval.samples, eval_cfg)
        spend.eval_what = (
            f"{counted(len(eval_prompts), 'held-out prompt')} × {counted(tcfg.eval.samples, 'sample')} × "
            "their reference anchors"
        )
    else:
        spend.eval_what = "held-out pass rate by the task's verifier, no judge call"
    spend.evaluations = evaluations(tcfg.max_steps, tcfg.eval.every, start_step)
    spend.max_training_calls = tcfg.max_judge_calls
    prices = (getattr(cfg.judge, "price_in_per_m", 0.0), getattr(cfg.judge, "price_out_per_m", 0.0))
    budget = cfg.judge.budget
    if any(prices) or budget.max_tokens_per_run or budget.max_usd_per_run:
        spend.prices, spend.tokens = prices, tokens_per_call(cfg, task)
    spend.caps = caps_text(cfg)
    return spend


def check_setup(spend: Spend, limit: int) -> None:
    """Stop a run whose setup would ask the judge more than judge.max_setup_calls, before it asks anything."""
    if limit and spend.setup_calls > limit:
        what = "; ".join(f"{n:,} to {w}" for w, n in spend.setup if n)
        raise UserError(
            f"The run's setup would make {spend.setup_calls:,} judge calls ({what}), more than "
            f"judge.max_setup_calls={limit:,}; nothing was asked: raise it (judge.max_setup_calls={spend.setup_calls}) "
            "if that is meant, or 0 for no limit."
        )


RUN_CAPS = ("max_calls_per_run", "max_tokens_per_run", "max_usd_per_run")


def caps_text(cfg: Any) -> str:
    """The run caps that are set and what they count ("" where none is): judge.budget's, and eval_judge.budget's for
    an evaluation judge on another endpoint."""
    evaluation = eval_judge_config(cfg)
    shared = shares_budget(cfg, evaluation)
    caps, own = (
        [f"{name}.{n}={getattr(b, n):g}" for n in RUN_CAPS if getattr(b, n)]
        for name, b in (("judge.budget", cfg.judge.budget), ("eval_judge.budget", evaluation.budget))
    )
    if shared:
        what = "setup, training and held-out evaluation"
        return f"{', '.join(caps)} per process, counting every call to the training judge's endpoint: {what}" * bool(
            caps
        )
    if not caps and not own:
        return ""
    return (
        f"{', '.join(caps) or 'judge.budget: none'} per process for setup and training; the evaluation asks another "
        f"endpoint, under {', '.join(own) or 'no run cap (eval_judge.budget)'}"
    )


def over_caps(calls: int, spend: Spend, prices: tuple[float, float], caps: Any, world: int, name: str) -> list[str]:
    """Each run cap of `caps` (a BudgetConfig named `name`) that `calls` calls at the estimate's tokens per call and
    `prices` would pass, as 'estimate against cap'; a cap holds per process, so W processes hold W times it."""
    tokens = spend.tokens or (0, 0)
    usd = calls * (tokens[0] * prices[0] + tokens[1] * prices[1]) / 1e6
    estimates = (
        ("max_calls_per_run", calls, f"{calls:,} calls"),
        ("max_tokens_per_run", calls * sum(tokens), f"{calls * sum(tokens):,} tokens"),
        ("max_usd_per_run", usd, f"${usd:,.2f}" if usd >= 0.01 else f"${usd:.2g}"),
    )
    over = []
    for field_, amount, text in estimates:
        cap = getattr(caps, field_)
        if cap and amount > cap * world:
            each = f" × {world} processes" if world > 1 else ""
            over.append(f"an estimate of {text} against {name}.{field_}={cap:g}{each}")
    return over


def check_caps(spend: Spend, cfg: Any, world: int) -> None:
    """Stop, before any judge call, a run whose estimate (the most it can ask) passes a run cap of judge.budget —
    or, for an evaluation judge on another endpoint, of eval_judge.budget — unless judge.budget.allow_partial; and a
    dollar cap without the prices it counts by."""
    budget, evaluation = cfg.judge.budget, eval_judge_config(cfg)
    if budget.max_usd_per_run and not any(spend.prices):
        raise UserError(
            f"judge.budget.max_usd_per_run={budget.max_usd_per_run:g} counts dollars at the judge's prices, which "
            "are not set: set judge.price_in_per_m and judge.price_out_per_m (dollars per million tokens)."
        )
    if budget.allow_partial:
        return
    evaluations = spend.per_eval * spend.evaluations
    if shares_budget(cfg, evaluation):
        over = over_caps(spend.total.high, spend, spend.prices, budget, world, "judge.budget")
    else:
        over = over_caps(spend.total.high - evaluations, spend, spend.prices, budget, world, "judge.budget")
        prices = (getattr(evaluation, "price_in_per_m", 0.0), getattr(evaluation, "price_out_per_m", 0.0))
        over += over_caps(evaluations, spend, prices, evaluation.budget, world, "eval_judge.budget")
    if over:
        raise UserError(
            f"The run would pass its judge budget — {'; '.join(over)} — so nothing was asked: raise the cap (0 = no "
            "limit), or set judge.budget.allow_partial=true to run until the cap stops it "
            "(trainer.checkpoint.resume=auto then continues the run)."
        )
