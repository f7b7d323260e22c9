"""The Noise wrapper (tsrl/judging/wrappers.py's chain: noise_scope=comparison outside the order wrapper,
noise_scope=call inside it) and the streams its draws come from: `set_noise_stream` names the stream of a step's
judgments, `skip_noise` counts the questions of a shared job that other processes ask.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from tsrl.judging.base import Judge, JudgeCounters, merge_metrics, stable_uniform
from tsrl.judging.wrappers import mirrored
from tsrl.types import ListRequest, ListScores, PairRequest, Score, ScoreRequest, Verdict

GRADES = tuple(float(g) for g in range(11))
"""The rubric's scale: the integer grades 0–10 a pointwise judge answers (ScoreRequest)."""

Request = PairRequest | ScoreRequest | ListRequest


def question(request: Request) -> tuple[object, ...]:
    """What a judgment asks: its kind, the prompt and the texts shown, in the order shown."""
    if isinstance(request, PairRequest):
        return ("pair", request.prompt.id, request.first, request.second)
    if isinstance(request, ScoreRequest):
        return ("grade", request.prompt.id, request.response)
    return ("list", request.prompt.id, *request.responses)


class Noise:
    """Flips each real verdict with probability flip_prob, replaces each real grade — and each item's grade in a
    real list answer — by a uniformly random one of GRADES with the same probability, and counts each
    (`noise_flips`).

    A fresh draw for every judgment, as TSRL §4.5 injects it ("flip each pairwise judgment independently"), keyed
    by the judgment's identity, never by when it was asked: the draw of a request is stable_uniform(seed, *stream,
    question, n, "flip"), where the stream names the step (`set_noise_stream(judge, "train", step)`), the question
    is what the request shows (prompt, texts, order) and n counts the times this stream asked that same question
    before (another slot of the group holding the same text, a repeat). So the same question at another step, or
    asked again in the same step, is flipped or not on its own; a run resumed from a checkpoint, a streamed step
    whose groups reach the judge in another order, and a step split over any number of processes draw the same
    flips, with no state in the checkpoint. (Only the n of identical questions depends on the order they are asked
    in, and identical questions are interchangeable; one question asked on two processes in one step — the same
    prompt twice in the step's batch, with the same texts — counts on each process from its own first asking.)
    `seed` is the noise seed: the run's seed unless judge.noise_seed pins it. A list is one judgment: the grade of
    responses[i] draws stable_uniform(seed, *stream, question, n, "flip", i), so each item is replaced or not on its
    own. Outside the order wrapper
    (noise_scope=comparison) one request is one comparison, whatever the order wrapper asks beneath it; inside
    (noise_scope=call) each shown order draws on its own."""

    def __init__(self, inner: Judge, flip_prob: float, seed: int) -> None:
        self.inner, self.flip_prob, self.seed = inner, flip_prob, seed
        self.counters = JudgeCounters()
        self.stream: tuple[object, ...] = ("setup",)
        self.asked: Counter[tuple[object, ...]] = Counter()  # question → times this stream asked it
        self._lock = threading.Lock()  # a streamed step may ask from the scoring worker's thread

    def set_stream(self, *key: object) -> None:
        """Start the stream `key` (e.g. ("train", step)): every question counts from 0 again."""
        with self._lock:
            self.stream, self.asked = key, Counter()

    def skip(self, requests: Sequence[Request]) -> None:
        """Count `requests` as asked without drawing for them: the questions of a shared job that another process
        asks, so a repeat of one of them here draws what it draws in one process."""
        with self._lock:
            self.asked.update(question(r) for r in requests)

    def _key(self, request: Request) -> tuple[object, ...]:
        asked = question(request)
        with self._lock:
            n = self.asked[asked]
            self.asked[asked] += 1
        return (self.seed, *self.stream, *asked, n)

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        answers = self.inner.compare(requests)
        out = []
        for request, v in zip(requests, answers):
            key = self._key(request)
            flip = v.p_first is not None and stable_uniform(*key, "flip") < self.flip_prob
            self.counters.add("noise_flips", flip)
            out.append(mirrored(v) if flip else v)
        return out

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        answers = self.inner.score(requests)
        return [self._noisy_grade(request, s) for request, s in zip(requests, answers)]

    def _noisy_grade(self, request: ScoreRequest, score: Score) -> Score:
        key = self._key(request)
        replace_it = score.value is not None and stable_uniform(*key, "flip") < self.flip_prob
        self.counters.add("noise_flips", replace_it)
        if not replace_it:
            return score
        grade = uniform_grade(stable_uniform(*key, "grade"))
        return replace(score, value=grade, raw=f"[noise: grade {score.value} replaced by {grade}] {score.raw}")

    def score_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]:
        answers = self.inner.score_lists(requests)
        return [self._noisy_list(request, answer) for request, answer in zip(requests, answers)]

    def _noisy_list(self, request: ListRequest, answer: ListScores) -> ListScores:
        """One judgment: each item's grade replaced with probability flip_prob, drawn per slot."""
        key = self._key(request)
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


def skip_noise(judge: object, requests: Sequence[Request]) -> None:
    """Count `requests` as asked by `judge`'s injected noise without drawing: what a process does for the questions
    of a shared job that the other processes ask, so each judgment draws what it would in one process."""
    for node in noise_wrappers(judge):
        node.skip(requests)


def step_stream(step: int) -> tuple[object, ...]:
    """The noise stream of the judgments that score the groups trained on at `step`, on every process (a resumed
    run names the same streams, so it draws what the uninterrupted run drew)."""
    return ("train", step)
