"""Test and benchmark support: small real implementations of the `Task` and `Judge` protocols (no mocks).

A response's quality is the number written in it ("q=1.5 ..."), so a test can state the true order of any
texts it makes up, and a judge that compares those numbers is right by construction.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

from tsrl.types import Anchor, Count, ListRequest, ListScores, PairRequest, Prompt, Score, ScoreRequest, Verdict


class NumberTask:
    """A task whose latent quality is the number written in the response ("q=1.5 ...")."""

    name = "numbers"

    def __init__(self, prompts: list[Prompt] | None = None) -> None:
        self._prompts = prompts or []

    def prompts(self, split: str) -> list[Prompt]:
        return self._prompts

    def quality(self, prompt: Prompt, text: str) -> float:
        return float(re.search(r"q=(-?[\d.]+)", text).group(1))


class ScriptedJudge:
    """Answers from a table {(first, second): p}; unknown pairs answer by comparing the texts' q numbers; grades
    (of one response or of each response of a list) from `grades`, else the q numbers. Records every request."""

    def __init__(
        self, table: dict[tuple[str, str], float | None] | None = None, grades: dict[str, float | None] | None = None
    ) -> None:
        self.table, self.grades = table or {}, grades or {}
        self.requests: list[PairRequest] = []
        self.score_requests: list[ScoreRequest] = []
        self.list_requests: list[ListRequest] = []

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        self.requests += requests
        out = []
        for r in requests:
            if (r.first, r.second) in self.table:
                p = self.table[(r.first, r.second)]
            else:
                q1, q2 = (NumberTask().quality(r.prompt, t) for t in (r.first, r.second))
                p = 0.5 if q1 == q2 else float(q1 > q2)
            out.append(Verdict(p_first=p, error=None if p is not None else "scripted failure"))
        return out

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        """Grades from the `grades` table, else the response's q number (capped at 10)."""
        self.score_requests += requests
        values = [self._grade(r.prompt, r.response) for r in requests]
        return [
            Score(v, raw=f"graded {v}", error=None if v is not None else "scripted failure", tokens=3) for v in values
        ]

    def score_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]:
        """One call per list: each response graded as `score` grades it; a list with a failed grade fails whole
        (an answer that does not score every label is no answer)."""
        self.list_requests += requests
        out = []
        for r in requests:
            values = [self._grade(r.prompt, text) for text in r.responses]
            scored = [f"R{slot + 1}" for slot, v in enumerate(values) if v is not None]
            failed = [f"R{slot + 1}" for slot, v in enumerate(values) if v is None]
            if failed:
                error = f"unparseable_list: the answer scores {', '.join(scored) or 'none'} but not {', '.join(failed)}"
                out.append(ListScores(None, error=error, tokens=3))
            else:
                out.append(ListScores(values, raw=f"graded {values}", tokens=3))
        return out

    def _grade(self, prompt: Prompt, text: str) -> float | None:
        return self.grades[text] if text in self.grades else min(10.0, NumberTask().quality(prompt, text))

    def drain_metrics(self) -> dict[str, float]:
        return {"calls": float(len(self.requests) + len(self.score_requests) + len(self.list_requests))}


class VerifiedNumberTask(NumberTask):
    """NumberTask whose verifier passes responses with q ≥ 2 (for reward=verifier and adaptive routing)."""

    def verify(self, prompt: Prompt, text: str) -> float:
        return float(self.quality(prompt, text) >= 2)


def number_prompt(pid: str, qualities: Sequence[float]) -> Prompt:
    """A prompt whose anchors have the given qualities, in order ("q=3 anchor 0", …)."""
    return Prompt(
        id=pid,
        text=f"prompt {pid}",
        anchors=tuple(Anchor(f"q={q} anchor {i}", f"t{i}") for i, q in enumerate(qualities)),
    )


PAIR_PROMPT = Prompt("p", "Which is better?")


class AnswerJudge:
    """A judge whose every answer comes from `answer(request)` (pairs, grades and lists alike); records each batch
    it is sent. Its metrics count the requests since the last drain."""

    def __init__(
        self, answer: Callable[[PairRequest | ScoreRequest | ListRequest], Verdict | Score | ListScores]
    ) -> None:
        self.answer = answer
        self.batches: list[list] = []
        self.undrained = 0

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        self.batches.append(list(requests))
        self.undrained += len(requests)
        return [self.answer(r) for r in requests]

    score = score_lists = compare

    def drain_metrics(self) -> dict[str, float]:
        calls, self.undrained = self.undrained, 0
        return {"calls": Count(calls)}

    @property
    def asked(self) -> list:
        return [r for batch in self.batches for r in batch]


def first_wins(_: PairRequest) -> Verdict:
    """An answer for AnswerJudge: the first response always wins (every swap shows)."""
    return Verdict(1.0, raw="first")


def numbered_pairs(n: int, prompt: Prompt = PAIR_PROMPT) -> list[PairRequest]:
    """n distinct pairs whose first response is the better one (q=2 against q=1)."""
    return [PairRequest(prompt, f"q=2 answer {i}", f"q=1 other {i}") for i in range(n)]


def known_ladders(prompts: int, seed: int) -> tuple[list[Prompt], dict[str, float]]:
    """Prompts with ladders of 8 anchors of known latent quality (best first, 0.7 apart, jittered by N(0, 0.3²)) and
    1–40 words each, and the quality of every anchor text: data for checking what a judge fit recovers."""
    rng, quality, out = random.Random(seed), {}, []
    for i in range(prompts):
        anchors = []
        for rank in range(8):
            text = f"s{seed}p{i}a{rank} " + "w " * rng.randint(1, 40)
            quality[text] = 5.0 - 0.7 * rank + rng.gauss(0.0, 0.3)
            anchors.append(Anchor(text))
        out.append(Prompt(id=f"s{seed}p{i}", text="tell a joke", anchors=tuple(anchors)))
    return out, quality


class NeverAsked:
    """A judge that must not be asked: for inputs refused before any question reaches the judge."""

    def compare(self, requests):
        raise AssertionError("not asked")

    def score(self, requests):
        raise AssertionError("not asked")

    def drain_metrics(self):
        return {}
