"""The settings of `judge=openai` (OpenAIJudgeConfig, its RetryConfig), the form of its base URLs and the API key
read for it; the judge itself is tsrl/remote/openai_judge.py."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlsplit

from tsrl.errors import ConfigError
from tsrl.judging.wrappers import JudgePolicyConfig
from tsrl.remote.constrain import check_form
from tsrl.remote.hedging import HedgeConfig
from tsrl.remote.rate import RateConfig
from tsrl.remote.transport import TRANSPORTS


@dataclass
class RetryConfig:
    """Timeouts, retries and re-asks of each judge request."""

    timeout_s: float = 60.0
    """Per-attempt timeout in seconds (a hard cap: a hedged attempt's copies are cancelled at it too)."""
    max_retries: int = 5
    """Retries after the first attempt (429, 5xx, timeout, connection error, malformed body)."""
    backoff_s: float = 0.5
    """First backoff; doubles each retry, times a jitter factor in [0.5, 1]."""
    backoff_max_s: float = 30.0
    """Longest wait between attempts (also caps Retry-After)."""
    max_consecutive_failures: int = 20
    """Stop the run after this many requests in a row failed for good."""
    endpoint_cooldown_s: float = 2.0
    """With several base_urls: an endpoint whose attempt failed (timeout, connection, 429, 5xx, malformed body)
    rests this long, doubling with each failure in a row (at most backoff_max_s, or this value where it is
    longer), while the others serve."""
    reask: int = 1
    """Ask again, with a fresh fence, after an answer with no readable verdict (no verdict line, empty, an
    echo of the prompt), at most this many times per request; then the failure policy applies."""
    first_answers: int = 4
    """Fail fast on a judge that does not follow the format: the first this-many requests of a run go out alone
    (the rest wait for one readable answer), and if their first answers are all unreadable the run stops at once
    with JudgeUnreadable saying what the answers looked like (0 = off). A judge that follows the format 80 % of
    the time is stopped by mistake with probability 0.2⁴ = 0.16 %."""

    def __post_init__(self) -> None:
        if self.timeout_s <= 0:
            raise ConfigError(f"judge.retry.timeout_s must be > 0, got {self.timeout_s}.")
        for name in ("max_retries", "backoff_s", "backoff_max_s", "endpoint_cooldown_s", "reask", "first_answers"):
            if getattr(self, name) < 0:
                raise ConfigError(f"judge.retry.{name} must be >= 0, got {getattr(self, name)}.")
        if self.max_consecutive_failures < 1:
            raise ConfigError(
                f"judge.retry.max_consecutive_failures must be >= 1, got {self.max_consecutive_failures}."
            )


@dataclass
class OpenAIJudgeConfig(JudgePolicyConfig):
    """Judge `openai`: an LLM judge behind OpenAI-compatible endpoints."""

    OPERATIONAL: ClassVar[tuple[str, ...]] = (
        *JudgePolicyConfig.OPERATIONAL,
        "base_urls",
        "api_key_env",
        "concurrency",
        "transport",
        "retry",
        "hedge",
        "rate",
        "preflight",
        "price_in_per_m",
        "price_out_per_m",
    )

    base_urls: list[str] = field(default_factory=lambda: ["http://127.0.0.1:8000/v1"])
    """Endpoints serving the same judge model; requests are spread round-robin."""
    model: str = "judge"
    """Model name sent with each request (vLLM: the served model name)."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key ('' = no key, for local servers without auth)."""
    template: str = "auto"
    """Prompt template: auto (<task>_pairwise_v1 or generic_pairwise_v1), a shipped name, or a .txt path."""
    allow_tie: bool | None = None
    """May a verdict be TIE: null = the task's (no on TSRL's tasks, whose verdicts are binary, TSRL §2.1; yes
    elsewhere). Without ties the template, the constraint and the parser know only A and B, and an answer TIE is
    unreadable (re-asked, then judge.failure)."""
    concurrency: int = 32
    """Most requests in flight at once (over all base_urls)."""
    max_tokens: int = 256
    """Most tokens the judge may generate per answer."""
    temperature: float = 0.0
    """Sampling temperature of the judge."""
    logprobs: bool = True
    """Ask for top log-probs to turn the verdict token into a soft probability (if the server supports it)."""
    form: str = "reasoning"
    """reasoning (brief reasoning, then a final VERDICT:/SCORE: line) | direct (the verdict or grade alone, a few
    tokens; with logprobs its first token gives P(A)); see tsrl/remote/constrain.py."""
    constrain: str = "auto"
    """Have the server constrain answers to the form: auto (the best each endpoint honours, probed once at start) |
    regex | choice (direct form) | json (response_format JSON schema) | off (the template alone)."""
    vision: bool | None = None
    """Send the responses' renderings (PairRequest first_image/second_image, a grade's image) as image parts, for
    vision judges: null = where pages are rendered for the judge (task=web with judge.render.enabled: TSRL's
    web judge sees rendered pages, §3), true | false = always | never."""
    extra_body: dict[str, Any] = field(default_factory=dict)
    """Fields merged into every request body; a null value removes a field. On the command line add them one
    by one: '+judge.extra_body.chat_template_kwargs={enable_thinking:false}' (a Qwen3 judge on vLLM without
    thinking), +judge.extra_body.max_tokens=null +judge.extra_body.max_completion_tokens=1024."""
    price_in_per_m: float = 0.0
    """Dollars per 1M prompt tokens: the judge/cost_usd metric, and a dollar bound in the spend a run prints
    before its first call."""
    price_out_per_m: float = 0.0
    """Dollars per 1M completion tokens (see price_in_per_m)."""
    transport: str = "aiohttp"
    """aiohttp (lean client, default) | openai (the openai SDK's AsyncOpenAI); see tsrl/remote/transport.py."""
    preflight: bool = True
    """At start, check that every base URL answers GET /models and serves `model` (false: servers without /models)."""
    retry: RetryConfig = field(default_factory=RetryConfig)
    hedge: HedgeConfig = field(default_factory=HedgeConfig)
    """Duplicates of requests outstanding far longer than the running p95 latency (tsrl/remote/hedging.py)."""
    rate: RateConfig = field(default_factory=RateConfig)
    """The provider's requests and tokens per minute, kept on our side (tsrl/remote/rate.py; 0 = no limit)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.transport not in TRANSPORTS:
            raise ConfigError(f"judge.transport={self.transport!r} is unknown; choose one of {list(TRANSPORTS)}.")
        if not self.base_urls:
            raise ConfigError("judge.base_urls is empty; give at least one URL such as http://127.0.0.1:8000/v1.")
        check_urls(self.base_urls)
        if self.concurrency < 1:
            raise ConfigError(f"judge.concurrency must be at least 1, got {self.concurrency}.")
        check_form(self.form, self.constrain)
        if self.max_tokens < 1:
            raise ConfigError(f"judge.max_tokens must be at least 1, got {self.max_tokens}.")

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        """What one answer cost at price_in_per_m and price_out_per_m (the judge/cost_usd metric)."""
        return (self.price_in_per_m * prompt_tokens + self.price_out_per_m * completion_tokens) / 1e6


def read_api_key(env_name: str) -> str:
    if not env_name:
        return "EMPTY"
    key = os.environ.get(env_name)
    if not key:
        raise ConfigError(
            f"The judge API key variable {env_name} is not set; export it (any value for a local "
            "server without --api-key) or set judge.api_key_env='' for no key."
        )
    return key


def url_problem(url: str) -> str | None:
    """What is wrong with the form of a base URL, as the end of a sentence; None when nothing is."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return "has no http:// or https:// scheme; write it as http://host:port/v1"
    if not parts.hostname:
        return "names no host; write it as http://host:port/v1"
    try:
        port = parts.port
    except ValueError:  # urllib: out of range or not a number
        port = -1
    if port is not None and not 1 <= port <= 65535:
        return f"has port {parts.netloc.rsplit(':', 1)[-1]!r}, which is not a number in 1–65535; fix the port"
    return None


def check_urls(urls: list[str]) -> None:
    for url in urls:
        problem = url_problem(url)
        if problem:
            raise ConfigError(f"judge.base_urls entry {url!r} {problem}.")
