"""`reward=constitutional`: the cai-tournament constitutional bracket.

Per group of G completions, a single-elimination bracket (tsrl.ranking.ConstitutionalBracket): a seeded
random draw sets the order of round 1; each round pairs the remaining completions off in order, and when
a round has an odd number of them the last one gets a bye and advances. Each match is judged under one
principle sampled uniformly from the constitution file (the principle is appended to the prompt the judge
sees). The bracket plays G − 1 matches in ⌈log2 G⌉ rounds and

    reward = wins / ⌈log2 G⌉,   a bye counting as a win,

so rewards lie in [0, 1]: champion 1, first-round loser 0. A group of one completion is its own
champion: reward 1, no judge call.

Optional coherence checker (reward.coherence_min_distinct > 0), applied independently of the bracket: every
completion plays the bracket as above, every match is judged, and afterwards a completion that is empty
or whose distinct-word ratio is below the threshold gets reward 0 (its opponents keep what they won or
lost against it). A match the judge cannot answer falls back to a random winner; the reason is recorded
in run_dir/constitutional_failures.jsonl and counted (reward/missing_verdicts,
constitutional/random_fallbacks).

Shapes: B groups, G completions. Differences from cai-tournament, all tsrl's choices: its coherence
checker is a model call, tsrl's a cheap repetition heuristic (off by default); the draw before round 1 is
a seeded random permutation and each match's principle is sampled uniformly (the method specifies
neither); the shipped constitution is tsrl's own.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tsrl.errors import ConfigError, DataError, not_a_file
from tsrl.ranking import ConstitutionalBracket, Match
from tsrl.registry import REWARDS
from tsrl.rewards.base import RegimeContext, StepCounted
from tsrl.rewards.matches import Table, diagnostics, play
from tsrl.rewards.stream import GroupStream, Streams
from tsrl.tasks.base import DATA_DIR
from tsrl.types import Count, Group, PairRequest, RewardBatch

WORD = re.compile(r"\w+")


@dataclass
class ConstitutionalConfig:
    """Reward `constitutional`: single-elimination bracket, one sampled principle per match."""

    principles_file: str = ""
    """Text file, one principle per line ('#' comments); empty = the shipped constitution."""
    coherence_min_distinct: float = 0.0
    """After the bracket, zero the reward of completions whose distinct-word ratio is below this; 0 = off."""
    seed: int = 0
    """Seed of draws, principle sampling, tie coin flips and the random fallback (mixed with the step)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.coherence_min_distinct <= 1.0:
            raise ConfigError(f"reward.coherence_min_distinct={self.coherence_min_distinct} must lie in [0, 1].")


def load_principles(path: str) -> list[str]:
    file = Path(path).expanduser() if path else DATA_DIR / "constitution" / "principles.txt"
    if not file.is_file():
        raise DataError(
            f"Constitution file {file} {not_a_file(file)}; set reward.principles_file to a text file "
            "with one principle per line."
        )
    lines = [line.strip() for line in file.read_text(encoding="utf-8").splitlines()]
    principles = [line for line in lines if line and not line.startswith("#")]
    if not principles:
        raise DataError(f"Constitution file {file} holds no principles; add one principle per line.")
    return principles


def coherent(text: str, min_distinct: float) -> bool:
    """The repetition heuristic: non-empty and distinct-word ratio ≥ min_distinct."""
    words = [w.lower() for w in WORD.findall(text)]
    return bool(words) and len(set(words)) / len(words) >= min_distinct


class ConstitutionalRegime(Streams, StepCounted):
    """Constitutional bracket per group; reward = wins / rounds, then 0 for incoherent completions."""

    def __init__(self, cfg: ConstitutionalConfig, ctx: RegimeContext) -> None:
        self.cfg, self.ctx, self.steps = cfg, ctx, 0
        self.principles = load_principles(cfg.principles_file)
        self.failure_log = ctx.run_dir / "constitutional_failures.jsonl"

    def request(self, group: Group, match: Match) -> PairRequest:
        principle = self.principles[match.principle]
        prompt = dataclasses.replace(
            group.prompt,
            id=f"{group.prompt.id}|principle-{match.principle}",
            text=f"{group.prompt.text}\n\nJudge which response better follows this principle: {principle}",
            fields={**group.prompt.fields, "principle": principle},
        )
        return PairRequest(prompt, group.rollouts[match.first].text, group.rollouts[match.second].text)

    def score_stream(self, stream: GroupStream) -> RewardBatch:
        self.steps += 1
        rng = np.random.default_rng([self.cfg.seed, self.steps])
        seeds = rng.integers(2**31, size=stream.total)
        played = play(
            stream,
            lambda start, groups: [
                ConstitutionalBracket(g.size, len(self.principles), seed=int(seeds[start + i]))
                for i, g in enumerate(groups)
            ],
            Table(self.ctx.judge, "random", rng, self.request),
        )
        groups = played.groups
        ok = np.array(
            [
                [
                    self.cfg.coherence_min_distinct == 0 or coherent(r.text, self.cfg.coherence_min_distinct)
                    for r in g.rollouts
                ]
                for g in groups
            ]
        )  # [B, G]
        rewards = np.where(ok, np.stack([s.scores() for s in played.schedules]), 0.0)  # [B, G] the veto comes last
        self.record_failures(groups, played.failures)
        metrics = diagnostics(played.histories(), groups[0].size, played, rewards.size)
        metrics.update(
            {
                "constitutional/random_fallbacks": Count(len(played.failures)),
                "constitutional/vetoed_frac": float(1.0 - ok.mean()),
            }
        )
        return RewardBatch(rewards=rewards, metrics=metrics)

    def record_failures(self, groups: Sequence[Group], failures: list[tuple[int, str]]) -> None:
        if not failures:
            return
        self.failure_log.parent.mkdir(parents=True, exist_ok=True)
        with self.failure_log.open("a", encoding="utf-8") as handle:
            for b, reason in failures:
                row = {
                    "step": self.steps,
                    "prompt_id": groups[b].prompt.id,
                    "fallback": "random winner",
                    "reason": reason,
                }
                handle.write(json.dumps(row) + "\n")


REWARDS.register("constitutional", ConstitutionalConfig, ConstitutionalRegime)
