"""The Noise wrapper (tsrl/judging/wrappers.py's chain: noise_scope=comparison outside the order wrapper,
noise_scope=call inside it) and the streams its draws come from: `set_noise_stream` names the stream of a step's
judgments, `skip_noise` passes over the draws of judgments another process makes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tsrl.judging.base import Judge, JudgeCounters, merge_metrics, stable_uniform
from tsrl.judging.wrappers import mirrored
from tsrl.types import ListRequest, ListScores, PairRequest, Score, ScoreRequest, Verdict

GRADES = tuple(float(g) for g in range(11))
"""The rubric's scale: the integer grades 0–10 a pointwise judge answers (ScoreRequest)."""


class Noise:
    """Flips each real verdict with probability flip_prob, replaces each real grade — and each item's grade in a
    real list answer — by a uniformly random one of GRADES with the same probability, and counts each
    (`noise_flips`).

    A fresh draw for every judgment, as TSRL §4.5 injects it ("flip each pairwise judgment independently"): the
    n-th request of a stream draws stable_uniform(seed, *stream, n, "flip"), so the same question asked again — in
    another slot of a group, at another step — is flipped or not on its own. The training loop names the stream
    before each step's judging (`set_noise_stream(judge, "train", step, process)`); a resumed run's steps name the
    same streams and ask their questions in the same order, so it draws what the uninterrupted run drew, with no
    state in the checkpoint. A list is one judgment (one n): the grade of responses[i] draws stable_uniform(seed,
    *stream, n, "flip", i), so each item is replaced or not on its own. Outside the order wrapper
    (noise_scope=comparison) one request is one comparison, whatever the order wrapper asks beneath it; inside
    (noise_scope=call) each shown order draws on its own."""

    def __init__(self, inner: Judge, flip_prob: float, seed: int) -> None:
        self.inner, self.flip_prob, self.seed = inner, flip_prob, seed
        self.counters = JudgeCounters()
        self.stream: tuple[object, ...] = ("setup",)
        self.drawn = 0

    def set_stream(self, *key: object) -> None:
        """Start the stream `key` (e.g. ("train", step, process)): its judgments draw from 0 again."""
        self.stream, self.drawn = key, 0

    def skip(self, n: int) -> None:
        """Pass over the stream's next n draws: the judgments another process makes (a shared setup job)."""
        self.drawn += n

    def _next(self) -> tuple[object, ...]:
        key = (self.seed, *self.stream, self.drawn)
        self.drawn += 1
        return key

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        answers = self.inner.compare(requests)
        out = []
        for v in answers:
            key = self._next()
            flip = v.p_first is not None and stable_uniform(*key, "flip") < self.flip_prob
            self.counters.add("noise_flips", flip)
            out.append(mirrored(v) if flip else v)
        return out

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        answers = self.inner.score(requests)
        return [self._noisy_grade(s) for s in answers]

    def _noisy_grade(self, score: Score) -> Score:
        key = self._next()
        replace_it = score.value is not None and stable_uniform(*key, "flip") < self.flip_prob
        self.counters.add("noise_flips", replace_it)
        if not replace_it:
            return score
        grade = uniform_grade(stable_uniform(*key, "grade"))
        return replace(score, value=grade, raw=f"[noise: grade {score.value} replaced by {grade}] {score.raw}")

    def score_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]:
        return [self._noisy_list(answer) for answer in self.inner.score_lists(requests)]

    def _noisy_list(self, answer: ListScores) -> ListScores:
        """One judgment: each item's grade replaced with probability flip_prob, drawn per slot."""
        key = self._next()
        values, replaced = list(answer.values or ()), []  # no answer: nothing to replace
        for slot, value in enumerate(answer.values or ()):
            if stable_uniform(*key, "flip", slot) < self.flip_prob:
                values[slot] = uniform_grade(stable_uniform(*key, "grade", slot))
                replaced.append(f"R{slot + 1} {value} → {values[slot]}")
        self.counters.add("noise_flips", len(replaced))
        if not replaced:
            return answer
        return replace(answer, values=values, raw=f"[noise: {', '.join(replaced)}] {answer.raw}")

    def drain_metrics(self) -> dict[str, float]:
        return merge_metrics(self.counters.drain(), self.inner.drain_metrics())


def uniform_grade(draw: float) -> float:
    """The grade of GRADES a uniform draw in [0, 1) picks (each with probability 1/11)."""
    return GRADES[min(int(draw * len(GRADES)), len(GRADES) - 1)]


def noise_wrappers(judge: object) -> list[Noise]:
    """Every Noise wrapper in `judge`'s chain, found through `.inner`."""
    found, node = [], judge
    while node is not None:
        if isinstance(node, Noise):
            found.append(node)
        node = getattr(node, "inner", None)
    return found


def set_noise_stream(judge: object, *key: object) -> int:
    """Name the stream the injected noise of `judge`'s chain draws from next; returns how many Noise wrappers
    there were (0: the judge injects no noise)."""
    found = noise_wrappers(judge)
    for node in found:
        node.set_stream(*key)
    return len(found)


def skip_noise(judge: object, n: int) -> None:
    """Pass over the next n draws of `judge`'s injected noise: what a process does for the judgments of a shared
    job that the other processes make, so each judgment draws what it would in one process, and every process
    ends the job at the same place of its stream."""
    for node in noise_wrappers(judge):
        node.skip(n)
