"""The openai judge's start-up check: fail in one sentence before any model or ladder is built, not after
twenty retries in the middle of a ladder build.

- Form (`url_problem` in openai_config.py, run by the config): each base URL needs an http(s) scheme, a host and a
  port in 1–65535. An out-of-range port would otherwise be retried as a connection error.
- Reachability and model (`preflight`, run when the judge is built unless `judge.preflight=false`): each URL
  is asked `GET <base_url>/models`, all at once. Unreachable, a refused key, a server without that route or
  a list that lacks `judge.model` each stop the run with one sentence naming the URL and the fix.
- Structured outputs (`probe_dialects`, run when the judge is built unless `judge.constrain=off`): each URL is
  asked constrain.probe's questions, all URLs at once, to learn which spelling of a constraint it obeys. None
  obeyed stops the run for an explicit `judge.constrain`, warns for `auto`; an endpoint that keeps failing the
  probe (retried as any request) stops it with JudgeUnavailable.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

from tsrl.errors import ConfigError
from tsrl.judging.base import JudgeCounters, JudgeUnavailable
from tsrl.remote.constrain import DIALECTS, probe, probe_order
from tsrl.remote.openai_config import OpenAIJudgeConfig
from tsrl.remote.transport import AttemptError, backoff_s, read_completion

log = logging.getLogger("tsrl")
SKIP = "set judge.preflight=false to skip this check for servers without /models"
LISTED = 8  # served model names quoted in an error (a hosted API may serve hundreds)


async def preflight(transport: Any, urls: list[str], model: str, key_env: str, timeout_s: float) -> None:
    """Ask every endpoint for its model list at once; raise for the first URL (in order) that fails."""
    answers = await asyncio.gather(*(transport.models(i, timeout_s) for i in range(len(urls))), return_exceptions=True)
    for url, answer in zip(urls, answers):
        if isinstance(answer, AttemptError):
            raise endpoint_error(url, answer, key_env)
        if isinstance(answer, BaseException):
            raise answer
        served = served_models(answer)
        if served is None:
            raise JudgeUnavailable(
                f"The judge endpoint {url} answered GET /models with something other than a "
                "model list; check that the URL is the server's OpenAI API root (…/v1), "
                f"or {SKIP}."
            )
        if model not in served:
            names = ", ".join(repr(name) for name in served[:LISTED]) or "nothing"
            more = f" and {len(served) - LISTED} more" if len(served) > LISTED else ""
            raise ConfigError(
                f"The judge endpoint {url} does not serve model {model!r} (it serves {names}{more}); "
                "set judge.model to the served name."
            )


def served_models(answer: dict) -> list[str] | None:
    """The model ids of a `GET /models` body ({"data": [{"id": ...}, ...]}), None if it is no such list."""
    listed = answer.get("data")
    if not isinstance(listed, list):
        return None
    return [str(entry["id"]) for entry in listed if isinstance(entry, dict) and "id" in entry]


def endpoint_error(url: str, err: AttemptError, key_env: str) -> JudgeUnavailable:
    """One sentence for a failed `GET /models`: what happened at which URL, and what to do."""
    reason = " ".join(str(err).split())[:160]  # one line, whatever the library's message looks like
    if err.kind in ("timeout", "connection"):
        return JudgeUnavailable(
            f"The judge endpoint {url} is unreachable ({reason}); start the server or correct judge.base_urls."
        )
    if err.kind in ("http_401", "http_403"):
        where = f"the variable {key_env}" if key_env else "a variable named by judge.api_key_env"
        return JudgeUnavailable(
            f"The judge endpoint {url} refused the API key ({err.kind.replace('_', ' ')}); put a valid key in {where}."
        )
    if err.kind in ("http_404", "http_405"):
        return JudgeUnavailable(
            f"The judge endpoint {url} has no GET /models ({err.kind.replace('_', ' ')}); check "
            f"that the URL is the server's OpenAI API root (…/v1), or {SKIP}."
        )
    return JudgeUnavailable(
        f"The judge endpoint {url} failed GET /models ({err.kind}: {reason}); check the server, or {SKIP}."
    )


async def probe_dialects(
    cfg: OpenAIJudgeConfig, transport: Any, counters: JudgeCounters, jitter: random.Random
) -> list[str | None]:
    """Each endpoint's constraint dialect (constrain.probe), all endpoints at once; warns or fails on none."""

    async def ask(index: int, extra: dict[str, Any]) -> str | None:
        body = {
            "model": cfg.model,
            "temperature": 0.0,
            "max_tokens": 64,
            **cfg.extra_body,
            **extra,
            "messages": [{"role": "user", "content": "Reply with the single word zqx-probe."}],
        }
        body = {key: value for key, value in body.items() if value is not None}  # a null removes a field
        retry = cfg.retry
        for attempt in range(retry.max_retries + 1):
            try:
                answer = read_completion(await transport.post(index, body))
            except AttemptError as err:
                if not err.retryable:  # a 4xx: the server refuses the field
                    return None
                if attempt == retry.max_retries:
                    raise JudgeUnavailable(
                        f"The judge endpoint {cfg.base_urls[index]} failed the structured-output probe of "
                        f"judge.constrain={cfg.constrain} {attempt + 1} times ({err.kind}: {str(err)[:160]}); "
                        "check the server, or set judge.constrain=off to skip the probe."
                    ) from None
                await asyncio.sleep(backoff_s(attempt, err.wait, retry.backoff_s, retry.backoff_max_s, jitter))
                continue
            counters.add("cost_usd", cfg.cost_usd(answer.prompt_tokens, answer.completion_tokens))
            return answer.text
        raise AssertionError("unreachable")

    found = await asyncio.gather(
        *(probe(lambda extra, i=i: ask(i, extra), cfg.constrain) for i in range(len(cfg.base_urls)))
    )
    for url, dialect in zip(cfg.base_urls, found):
        if dialect is not None:
            continue
        if cfg.constrain != "auto":
            raise ConfigError(
                f"judge.constrain={cfg.constrain}: the judge endpoint {url} ignored a "
                f"{cfg.constrain} constraint in every form tsrl knows ({', '.join(probe_order(cfg.constrain))}); "
                "use judge.constrain=auto to take what it honours, or judge.constrain=off."
            )
        log.warning(  # tsrl's logger, not warnings.warn: this runs on the judge's event loop, and a warning would
            # name asyncio/events.py as its source
            f"judge.constrain=auto: the judge endpoint {url} honours no structured-output field tsrl "
            f"knows ({', '.join(DIALECTS)}); its answers are not constrained, so a model that does not "
            "follow the template's format will fail (judge.retry.first_answers stops such a run early)."
        )
    return list(found)
