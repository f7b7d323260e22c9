"""`reward=constitutional`: the cai-tournament constitutional bracket.

Per group, a single-elimination bracket over a seeded random draw of the G completions
(tsrl.ranking.ConstitutionalBracket); each match is judged under one principle sampled uniformly from the
constitution file (the principle is appended to the prompt the judge sees). Reward = wins / rounds with
rounds = ⌈log2 G⌉ and byes counted as wins, so rewards lie in [0, 1]: champion 1, first-round loser 0.
G − 1 matches per group.

Optional coherence checker (reward.coherence_min_distinct > 0): a completion that is empty or whose
distinct-word ratio is below the threshold is vetoed — reward 0, and it loses its matches by walkover
without a judge call (two vetoed completions: a seeded coin). A match the judge cannot answer falls back
to a random winner; the reason is recorded in run_dir/constitutional_failures.jsonl and counted
(reward/missing_verdicts, constitutional/random_fallbacks).

Shapes: B groups, G completions. Differences from cai-tournament: its coherence checker is a model call;
tsrl's is a cheap repetition heuristic (a project choice, off by default), and the shipped constitution
is tsrl's own.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from tsrl.errors import ConfigError, DataError
from tsrl.ranking import ConstitutionalBracket, Match
from tsrl.rewards.base import RegimeContext, StepCounted
from tsrl.rewards.matches import Table, diagnostics, play
from tsrl.tasks.base import DATA_DIR
from tsrl.types import Group, PairRequest, RewardBatch

WORD = re.compile(r"\w+")


@dataclass
class ConstitutionalConfig:
    """Reward `constitutional`: single-elimination bracket, one sampled principle per match."""

    principles_file: str = ""
    """Text file, one principle per line ('#' comments); empty = the shipped constitution."""
    coherence_min_distinct: float = 0.0
    """Veto (reward 0) completions whose distinct-word ratio is below this; 0 = checker off."""
    seed: int = 0
    """Seed of draws, principle sampling, coin flips and the random fallback (mixed with the step)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.coherence_min_distinct <= 1.0:
            raise ConfigError(f"reward.coherence_min_distinct={self.coherence_min_distinct} must lie in [0, 1].")


def load_principles(path: str) -> list[str]:
    file = Path(path).expanduser() if path else DATA_DIR / "constitution" / "principles.txt"
    if not file.is_file():
        raise DataError(f"Constitution file {file} does not exist; set reward.principles_file to a text file "
                        "with one principle per line.")
    lines = [line.strip() for line in file.read_text(encoding="utf-8").splitlines()]
    principles = [line for line in lines if line and not line.startswith("#")]
    if not principles:
        raise DataError(f"Constitution file {file} holds no principles; add one principle per line.")
    return principles


def coherent(text: str, min_distinct: float) -> bool:
    """The repetition heuristic: non-empty and distinct-word ratio ≥ min_distinct."""
    words = [w.lower() for w in WORD.findall(text)]
    return bool(words) and len(set(words)) / len(words) >= min_distinct


class ConstitutionalRegime(StepCounted):
    """Constitutional bracket per group; reward = wins / rounds, vetoed completions 0."""

    def __init__(self, cfg: ConstitutionalConfig, ctx: RegimeContext) -> None:
        self.cfg, self.ctx, self.steps = cfg, ctx, 0
        self.principles = load_principles(cfg.principles_file)
        self.failure_log = ctx.run_dir / "constitutional_failures.jsonl"

    def request(self, group: Group, match: Match) -> PairRequest:
        principle = self.principles[match.principle]
        prompt = dataclasses.replace(
            group.prompt, id=f"{group.prompt.id}|principle-{match.principle}",
            text=f"{group.prompt.text}\n\nJudge which response better follows this principle: {principle}",
            fields={**group.prompt.fields, "principle": principle})
        return PairRequest(prompt, group.rollouts[match.first].text, group.rollouts[match.second].text)

    def score(self, groups: Sequence[Group]) -> RewardBatch:
        self.steps += 1
        rng = np.random.default_rng([self.cfg.seed, self.steps])
        ok = np.array([[self.cfg.coherence_min_distinct == 0 or coherent(r.text, self.cfg.coherence_min_distinct)
                        for r in g.rollouts] for g in groups])  # [B, G]
        schedules = [ConstitutionalBracket(g.size, len(self.principles), seed=int(s))
                     for g, s in zip(groups, rng.integers(2**31, size=len(groups)))]

        def walkover(b: int, m: Match) -> float | None:
            first, second = ok[b, m.first], ok[b, m.second]
            return None if first and second else float(rng.integers(2)) if first == second else float(first)

        played = play(groups, schedules, Table(self.ctx.judge, "random", rng, self.request, walkover))
        rewards = np.where(ok, np.stack([s.scores() for s in schedules]), 0.0)  # [B, G]
        self.record_failures(groups, played.failures)
        metrics = diagnostics([s.tally.history for s in schedules], groups[0].size, played, rewards.size)
        metrics.update({"constitutional/random_fallbacks": float(len(played.failures)),
                        "constitutional/vetoed_frac": float(1.0 - ok.mean())})
        return RewardBatch(rewards=rewards, routes=["constitutional"] * len(groups), judge_calls=played.requests,
                           metrics=metrics)

    def record_failures(self, groups: Sequence[Group], failures: list[tuple[int, str]]) -> None:
        if not failures:
            return
        self.failure_log.parent.mkdir(parents=True, exist_ok=True)
        with self.failure_log.open("a", encoding="utf-8") as handle:
            for b, reason in failures:
                row = {"step": self.steps, "prompt_id": groups[b].prompt.id, "fallback": "random winner",
                       "reason": reason}
                handle.write(json.dumps(row) + "\n")
