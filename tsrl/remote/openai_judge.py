"""`judge=openai`: a judge behind any OpenAI-compatible endpoint (vLLM, SGLang, a hosted API).

It answers pairs (`compare` → Verdict), single responses (`score` → a 0–10 Score) and lists (`score_lists` → one
0–10 score per response, all shown in one call under the labels R1 … Rn in the caller's order; list_answers.py).
`compare` is synchronous for the trainer but runs the whole batch concurrently on a private asyncio loop
(one background thread): `concurrency` workers each take the next request, render its prompt and send it
through `judge.transport` (the lean aiohttp client by default, or the openai SDK; see transport.py),
round-robin over `base_urls` (a retry goes to the next URL; an endpoint whose attempt failed rests a while,
see Endpoints). Each request is retried on 429, 5xx, timeouts, dropped connections and malformed bodies
with exponential backoff and jitter, waiting at least what Retry-After(-ms) asks. An attempt outstanding far
longer than the running p95 latency is hedged: a duplicate goes out and the first answer wins (hedging.py).
With `judge.rate` set, every attempt (hedges, retries and re-asks too) is first admitted by the provider's rate
limiter, which keeps requests and tokens per minute under the limits (rate.py).
An answer that arrives but holds no readable verdict (empty, wrong format, echo of the prompt) is asked again
with a fresh fence, up to `retry.reask` times (counted as reasks, apart from transport retries); then it
becomes a failed Verdict of its kind. Every failed attempt is counted (attempt_errors/<kind>), every final
failure too (errors/<kind>); after `max_consecutive_failures` final failures in a row the run stops with
JudgeUnavailable naming the URL (JudgeUnreadable when the failures are answers without a verdict).

What is asked and how it is read (constrain.py): `form` (reasoning, or the verdict alone) and `constrain` (the
server decodes only answers of that form; `auto` probes once per endpoint, at build, which spelling of structured
outputs it obeys). Until a first readable answer, at most `retry.first_answers` requests are out; if all their
answers are unreadable the run stops at once (FormatWatch) instead of after minutes of re-asks.

Building the judge checks its endpoints first (preflight.py): each URL must answer GET /models and list
`model`, else one sentence names the URL and the fix; then the constraint probe above runs (also preflight.py).
The connections and the loop are released by `close`, or, if nobody calls it, when the judge is
garbage-collected or the process exits (weakref.finalize), so no exit path leaves an open aiohttp session behind.

This module holds the batch: the workers, their retries, re-asks and counters. The pieces they use live with
their neighbours: the loop's thread (judge_loop.py), reading a reply body and the wait before a retry
(transport.py), an answer's value (constrain.AnswerSpec.parse; a list's in list_answers.py), the chat messages
with their images (prompting.py). Inside the batch every answer travels as a Score whose value is the parsed one
(a list's: its scores in slot order), turned into a Verdict or ListScores at the end.

p_first is the soft probability P(A) + ½P(TIE) from the verdict token's log-probs when the server
returns them, else the hard verdict (A → 1, B → 0, TIE → ½). The API key is read from the environment
variable the config names and lives only inside the client: it is never logged or written.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from tsrl.judging.base import JudgeCounters, JudgeUnavailable, JudgeUnreadable
from tsrl.judging.list_answers import direct_list_template
from tsrl.judging.prompting import (
    ParseError,
    load_template,
    new_fence,
    render,
    render_list,
    resolve_template,
    soft_verdict,
    ties_allowed,
    with_images,
)
from tsrl.registry import JUDGES
from tsrl.remote.constrain import (
    KINDS,
    PARSE_KINDS,
    AnswerSpec,
    FormatWatch,
    advice,
    answer_spec,
    direct_template,
    list_spec,
    resolve,
)
from tsrl.remote.hedging import Hedger
from tsrl.remote.judge_loop import shutdown, start_loop
from tsrl.remote.openai_config import OpenAIJudgeConfig, RetryConfig, read_api_key  # noqa: F401 (RetryConfig: re-exported)
from tsrl.remote.preflight import preflight, probe_dialects
from tsrl.remote.rate import PacedTransport, Pacer, limiter_for
from tsrl.remote.transport import AttemptError, Completion, Endpoints, backoff_s, build_transport, read_completion
from tsrl.types import Count, ListRequest, ListScores, PairRequest, Rendered, Score, ScoreRequest, Verdict

log = logging.getLogger("tsrl")
PROGRESS_EVERY_S = 30.0
"""A judge batch still running after this long reports how far it got, and again every as long."""

Job = tuple[list, str, str, int]  # (chat messages, fence, kind of answer: verdict | score | list, list length or 0)
Reply = tuple[Completion, int]  # (the answer, the endpoint that gave it)
DIRECT_TOP_LOGPROBS = 20  # the alternatives at the verdict token: wide, so that both A and B are among them
PREFLIGHT_TIMEOUT_S = 10.0  # longest wait for GET /models at start (at most retry.timeout_s)


class OpenAIJudge:
    """See the module docstring."""

    def __init__(self, cfg: OpenAIJudgeConfig, task_name: str, rendered: bool = False) -> None:
        self.cfg = cfg
        self.ties = ties_allowed(cfg.allow_tie, task_name)
        self.vision = cfg.vision if cfg.vision is not None else rendered  # null: where pages are rendered
        self._templates(cfg, task_name)
        key = read_api_key(cfg.api_key_env)
        self.counters = JudgeCounters()
        self.spent_usd = 0.0  # every answer's cost at the judge's prices, never drained (judge.budget's money cap)
        self.hedger = Hedger(cfg.hedge, self.counters)
        connections = cfg.concurrency + self.hedger.burst * cfg.hedge.enabled  # hedges need connections of their own
        # the provider's limits, shared with the process's other judges on the same endpoints (rate.py)
        limiter = limiter_for(cfg.rate, cfg.base_urls, cfg.model) if cfg.rate.enabled else None
        self.pacer = Pacer(limiter, cfg.max_tokens, self.counters) if limiter else None

        async def connect() -> Any:  # aiohttp sessions belong to the loop they are made on
            return build_transport(cfg.transport, cfg.base_urls, key, cfg.retry.timeout_s, connections)

        self.loop, self.thread = start_loop()
        self.transport = asyncio.run_coroutine_threadsafe(connect(), self.loop).result()
        # closes at close(), at garbage collection or at exit, whichever comes first (and holds no reference)
        self.closer = weakref.finalize(self, shutdown, self.loop, self.thread, self.transport)
        self.semaphore = asyncio.Semaphore(cfg.concurrency)
        self.endpoints = Endpoints(len(cfg.base_urls), cfg.retry.endpoint_cooldown_s, cfg.retry.backoff_max_s)
        self.jitter = random.Random(cfg.seed)
        self.consecutive_failures = 0
        self.last_failure = ("", "")
        self.last_spec: AnswerSpec | None = None  # how the last unreadable answer was asked (for the advice)
        self.watch = FormatWatch(cfg.retry.first_answers)
        self.tasks: list[asyncio.Task] = []  # the running batch's workers (cancelled when the watch stops the run)
        try:
            self.dialects = self._check_endpoints()
        except BaseException:
            self.close()
            raise
        # per endpoint, per kind of answer: how it is asked (form, constraint, body fields)
        self.specs = [
            {
                kind: answer_spec(
                    kind, cfg.form, resolve(cfg.constrain, cfg.form, dialect), dialect, cfg.max_tokens, self.ties
                )
                for kind in KINDS
            }
            for dialect in self.dialects
        ]
        self.list_specs: dict[tuple[int, int], AnswerSpec] = {}  # (endpoint, list length) → spec, made on first use

    def _templates(self, cfg: OpenAIJudgeConfig, task_name: str) -> None:
        """The pairwise, pointwise and listwise templates, and each one's cache identity: the model, the template
        (name + hash, ties included) and every request setting that can change an answer."""
        self.template = load_template(resolve_template(cfg.template, task_name), self.ties)
        self.score_template = load_template(resolve_template("auto", task_name, "pointwise"))
        self.list_template = load_template(resolve_template("auto", task_name, "listwise"))
        if cfg.form == "direct":
            self.template = direct_template(self.template, self.ties)
            self.score_template = direct_template(self.score_template)
            self.list_template = direct_list_template(self.list_template)
        settings = json.dumps(
            [cfg.temperature, cfg.max_tokens, cfg.logprobs, cfg.extra_body, self.vision, cfg.form, cfg.constrain],
            sort_keys=True,
        )
        generation = hashlib.sha256(settings.encode()).hexdigest()[:12]
        self.identity = f"{cfg.model}|{self.template.identity}|{generation}"
        self.score_identity = f"{cfg.model}|{self.score_template.identity}|{generation}"
        self.list_identity = f"{cfg.model}|{self.list_template.identity}|{generation}"

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        answers = self._run(requests, self._pair_job)
        verdicts = [Verdict(a.value, a.raw, a.error, a.tokens, a.latency_s, form=a.form) for a in answers]
        self.counters.record(verdicts)
        self._raise_if_dead()
        return verdicts

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        scores = self._run(requests, self._score_job)  # already Scores: value, raw text, error, tokens, latency
        self.counters.record(scores)
        self._raise_if_dead()
        return scores

    def score_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]:
        """One call per list (an empty list is answered [] without one): values[i] scores responses[i]."""
        asked = [i for i, request in enumerate(requests) if request.responses]
        answers = self._run([requests[i] for i in asked], self._list_job)  # Scores whose value is the list
        lists = [ListScores([]) for _ in requests]
        for i, a in zip(asked, answers):
            lists[i] = ListScores(a.value, a.raw, a.error, a.tokens, a.latency_s, form=a.form)
        self.counters.record([lists[i] for i in asked])
        self._raise_if_dead()
        return lists

    def drain_metrics(self) -> dict[str, float]:
        metrics = self.counters.drain()
        if self.endpoints.count > 1:
            metrics["endpoints_resting"] = float(self.endpoints.resting())
        if self.cfg.hedge.enabled and (delay := self.hedger.delay()) is not None:
            metrics["hedge_after_s"] = delay  # the current trigger: max(floor_s, after_p95 × p95)
        if self.pacer is not None:
            metrics.setdefault("rate_wait_s", Count(0.0))  # request-seconds held by judge.rate since the last drain
        return metrics

    def close(self) -> None:
        """Close the connections and stop the judge's event loop (the judge is unusable afterwards)."""
        self.closer()

    def _check_endpoints(self) -> list[str | None]:
        """The start-up checks (preflight.py): GET /models at every URL, then each URL's constraint dialect."""
        cfg = self.cfg
        if cfg.preflight:
            timeout_s = min(PREFLIGHT_TIMEOUT_S, cfg.retry.timeout_s)
            self._call(preflight(self.transport, cfg.base_urls, cfg.model, cfg.api_key_env, timeout_s))
        if cfg.constrain == "off":
            return [None] * len(cfg.base_urls)
        transport = self.transport if self.pacer is None else PacedTransport(self.transport, self.pacer)
        return self._call(probe_dialects(cfg, transport, self.counters, self.jitter))

    def _score_job(self, request: ScoreRequest) -> Job:
        fence = new_fence()
        rubric = request.prompt.fields.get("rubric", "")
        messages = render(self.score_template, request.prompt.text, rubric, (request.response,), fence)
        return self._with_images(messages, [("A", request.image)]), fence, "score", 0

    def _pair_job(self, request: PairRequest) -> Job:
        fence = new_fence()
        criteria = request.prompt.fields.get("rubric", "")
        messages = render(self.template, request.prompt.text, criteria, (request.first, request.second), fence)
        images = [("A", request.first_image), ("B", request.second_image)]
        return self._with_images(messages, images), fence, "verdict", 0

    def _list_job(self, request: ListRequest) -> Job:
        fence, n = new_fence(), len(request.responses)
        criteria = request.prompt.fields.get("rubric", "")
        messages = render_list(self.list_template, request.prompt.text, criteria, request.responses, fence)
        images = [(f"R{i}", image) for i, image in enumerate(request.images, 1)]
        return self._with_images(messages, images), fence, "list", n

    def _spec(self, index: int, kind: str, n: int) -> AnswerSpec:
        """How endpoint `index` is asked for `kind`; a list's spec (per length n) is made on first use."""
        if kind != "list":
            return self.specs[index][kind]
        if (index, n) not in self.list_specs:
            cfg, dialect = self.cfg, self.dialects[index]
            constraint = resolve(cfg.constrain, cfg.form, dialect)
            self.list_specs[index, n] = list_spec(cfg.form, constraint, dialect, cfg.max_tokens, n)
        return self.list_specs[index, n]

    def _with_images(self, messages: list[dict[str, Any]], images: list[tuple[str, str | None]]) -> list:
        """The user turn with each response's rendering as an image part (judge.vision=true), else unchanged."""
        return with_images(messages, images) if self.vision else messages

    def _run(self, requests: Sequence[Any], make_job: Callable[[Any], Job]) -> list[Score]:
        """Answer every request, in order: `concurrency` workers take the next request, render it, ask."""
        answers: list[Score] = [Score(None)] * len(requests)
        pending = iter(range(len(requests)))
        answered = 0

        async def worker() -> None:
            nonlocal answered
            for i in pending:
                answers[i] = await self._ask(requests[i], make_job)
                answered += 1

        async def progress() -> None:  # a long batch (a ladder's round-robins, a slow judge) is never silent
            start = time.monotonic()
            while answered < len(requests):  # a batch that has just finished says nothing more
                await asyncio.sleep(PROGRESS_EVERY_S)
                if answered == len(requests):
                    return
                log.info(
                    "judge %s: %d of %d requests answered after %.0f s",
                    self.cfg.model,
                    answered,
                    len(requests),
                    time.monotonic() - start,
                )

        async def run_all() -> None:
            self.tasks = [asyncio.ensure_future(worker()) for _ in range(min(self.cfg.concurrency, len(requests)))]
            reporter = asyncio.ensure_future(progress())
            try:
                done = await asyncio.gather(*self.tasks, return_exceptions=True)
            finally:
                reporter.cancel()
            failed = [
                err for err in done if isinstance(err, BaseException) and not isinstance(err, asyncio.CancelledError)
            ]
            if failed:
                raise failed[0]

        if self.watch.error is None:
            self._call(run_all())
        if self.watch.error is not None:
            raise self.watch.error
        return answers

    def _call(self, coroutine: Any) -> Any:
        """Run a coroutine on the judge's loop and wait for it; an interrupted wait (Ctrl-C) cancels it."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    async def _ask(self, request: Any, make_job: Callable[[Any], Job]) -> Score:
        go, held = await self.watch.admit()
        if not go:
            return Score(None, error="judge_unreadable: the run stopped on unreadable answers")
        try:
            async with self.semaphore:
                start = time.perf_counter()
                answer = await self._readable_answer(request, make_job)
                answer.latency_s = time.perf_counter() - start
        finally:
            self.watch.settle(held)
        if answer.error is None:
            self.consecutive_failures = 0
        else:
            self.consecutive_failures += 1
        return answer

    async def _readable_answer(self, request: Any, make_job: Callable[[Any], Job]) -> Score:
        """The request's answer; an unreadable one is asked again (a fresh render: a new fence) up to retry.reask
        times. Unlike a transport failure this is the model's answer, so it is a re-ask, not a retry."""
        tokens = 0
        for ask in range(self.cfg.retry.reask + 1):
            self.counters.add("reasks", ask > 0)
            messages, fence, kind, n = make_job(request)
            reply = await self._attempts(messages, kind, n)
            if isinstance(reply, Score):  # the transport gave up: retries are spent
                reply.tokens += tokens
                return reply
            completion, index = reply
            tokens += completion.prompt_tokens + completion.completion_tokens
            answer = self._parse(completion, tokens, fence, self._spec(index, kind, n), index)
            if answer.error is None:
                self.counters.add("reasked_requests", ask > 0)
                return answer
        return answer

    async def _attempts(self, messages: list, kind: str, n: int) -> Reply | Score:
        """The endpoint's reply to one question, or a failed Score once retries are spent."""
        retry = self.cfg.retry
        bodies = [self._request_args(messages, self._spec(i, kind, n)) for i in range(len(self.specs))]
        for attempt in range(retry.max_retries + 1):
            if self.consecutive_failures >= retry.max_consecutive_failures:
                return Score(None, error="judge_unavailable: skipped after too many consecutive failures")
            index = self.endpoints.pick()
            await self.endpoints.hold(index)
            post, other = await self._senders(bodies, index)
            try:
                response, index = await self.hedger.send(post, index, other, retry.timeout_s, self._attempt_failed)
                answer = self._read(response)
            except AttemptError as err:
                error = self._attempt_failed(err, index)
                if not err.retryable or attempt == retry.max_retries:
                    return Score(None, error=error)
                self.counters.add("retries")
                await asyncio.sleep(backoff_s(attempt, err.wait, retry.backoff_s, retry.backoff_max_s, self.jitter))
                continue
            self.endpoints.succeeded(index)
            return answer, index
        raise AssertionError("unreachable")

    async def _senders(self, bodies: list[dict], index: int) -> tuple[Callable[[int], Awaitable[dict]], Any]:
        """How one attempt's copies are sent (post) and where a hedge goes (other; None: not now). Under judge.rate
        the first copy (to `index`) is admitted here, before the hedger's clock for the attempt starts (a wait in
        the limiter is neither latency nor a reason to hedge); a hedge goes only where the limiter admits it at
        once, never queueing before requests that wait (the hedger tries again at its next check)."""
        if self.pacer is None:
            return (lambda i: self.transport.post(i, bodies[i])), self.endpoints.other
        pacer, admitted = self.pacer, [await self.pacer.acquire(bodies[index])]

        def other(i: int) -> int | None:
            target = self.endpoints.other(i)
            if target is None or (grant := pacer.admit_now(bodies[target])) is None:
                return None
            admitted.append(grant)  # the hedger posts to `target` right after this answer
            return target

        return (lambda i: pacer.post(self.transport, i, bodies[i], admitted.pop())), other

    def _attempt_failed(self, err: AttemptError, index: int) -> str:
        """Count a failed attempt, rest its endpoint if the endpoint is at fault (not for a 400); the error text."""
        if err.retryable:
            self.endpoints.failed(index, err.wait)
        error = f"{err.kind}: {str(err)[:200]}"
        self.counters.add(f"attempt_errors/{err.kind}")
        self.last_failure = (self.cfg.base_urls[index], error)
        return error

    def _parse(self, completion: Completion, tokens: int, fence: str, spec: AnswerSpec, index: int) -> Score:
        """The value of one answer (ParseError → a failed Score of that kind); every answer goes to the watch."""
        text, top, finished, url = completion.text, completion.top, completion.finished, self.cfg.base_urls[index]
        self.counters.add("answers")
        try:
            value = spec.parse(text, fence)
        except ParseError as err:
            self.counters.add("unreadable_answers")
            self.counters.add(f"attempt_errors/{err.kind}")
            self.last_failure, self.last_spec = (url, f"{err.kind}: {err}"), spec
            self.watch.answered(err.kind, text or "", finished, f"{url} (model {self.cfg.model!r})", spec)
            if self.watch.error is not None:
                for task in self.tasks:
                    task.cancel()
            return Score(None, text, f"{err.kind}: {err}", tokens, form=spec.label)
        self.watch.answered(None, text, finished, url, spec)
        soft = soft_verdict(top, spec.ties) if top and spec.kind == "verdict" else None
        self.counters.add("soft_verdicts", soft is not None)
        self.counters.add(f"answers/{spec.label}")
        form = spec.label + ("+soft" if soft is not None else "")
        return Score(value if soft is None else soft, text, None, tokens, form=form)

    def _request_args(self, messages: list, spec: AnswerSpec) -> dict[str, Any]:
        """The request body: messages, sampling, log-probs, the spec's constraint and max_tokens, then extra_body."""
        args: dict[str, Any] = {"model": self.cfg.model, "messages": messages, "temperature": self.cfg.temperature}
        if self.cfg.logprobs and spec.kind != "list":  # a list's scores are read as written, never from log-probs
            args.update(logprobs=True, top_logprobs=DIRECT_TOP_LOGPROBS if spec.form == "direct" else 5)
        args.update(spec.body)
        args.update(self.cfg.extra_body)
        return {key: value for key, value in args.items() if value is not None}

    def _read(self, response: Any) -> Completion:
        """The answer in a chat-completion body (AttemptError malformed_response if it is none), its cost counted."""
        answer = read_completion(response)
        cost = self.cfg.cost_usd(answer.prompt_tokens, answer.completion_tokens)
        self.spent_usd += cost
        self.counters.add("cost_usd", cost)
        return answer

    def _raise_if_dead(self) -> None:
        limit = self.cfg.retry.max_consecutive_failures
        if self.consecutive_failures >= limit:
            (url, error), spec = self.last_failure, self.last_spec
            if error.split(":", 1)[0] in PARSE_KINDS and spec:  # it answers: the answers are the problem
                raise JudgeUnreadable(
                    f"The judge at {url} answered {limit} requests in a row without a readable "
                    f"answer (last: {error[:160]}). " + advice(spec, False)
                )
            raise JudgeUnavailable(
                f"The judge at {url} failed {limit} requests in a row (last error: {error}); "
                "check that the server is up and judge.base_urls/judge.model are right."
            )


def pages_rendered(cfg: Any, task: Any) -> bool:
    """Whether the judge is shown rendered pages (task=web, a Rendered task, with judge.render.enabled): where
    judge.vision is null, a vision judge then sees them, as TSRL's web judge sees rendered pages (§3)."""
    return isinstance(task, Rendered) and cfg.render.enabled


JUDGES.register("openai", OpenAIJudgeConfig, lambda cfg, task: OpenAIJudge(cfg, task.name, pages_rendered(cfg, task)))
