"""Pure parts of the judge transport: failure classification, Retry-After, proxies from the environment,
endpoint rests."""

from __future__ import annotations

import pytest

from tsrl.remote.openai_judge import Endpoints
from tsrl.remote.transport import AttemptError, decode, env_proxy, retry_after, status_error


@pytest.mark.parametrize(
    "status,kind,retryable",
    [
        (429, "rate_limited", True),
        (500, "server_error", True),
        (503, "server_error", True),
        (408, "http_408", True),
        (400, "http_400", False),
        (401, "http_401", False),
        (404, "http_404", False),
    ],
)
def test_status_codes_map_to_kinds_and_retry_decisions(status, kind, retryable):
    err = status_error(status, {}, '{"error": "x"}')
    assert (err.kind, err.retryable, err.wait) == (kind, retryable, None)


def test_retry_after_prefers_milliseconds_and_ignores_garbage():
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}) == pytest.approx(0.25)
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) is None  # HTTP-date: not honoured
    assert status_error(429, {"retry-after": "3"}, "").wait == 3.0


def test_bodies_that_are_not_json_objects_are_malformed_and_retryable():
    assert decode(b'{"choices": []}') == {"choices": []}
    for raw in (b'{"choices": [{"message": ', b"[1, 2]", b"null", b"<html>502</html>"):
        with pytest.raises(AttemptError) as err:
            decode(raw)
        assert err.value.kind == "malformed_response" and err.value.retryable


def test_proxies_come_from_the_environment_and_no_proxy_is_honoured(monkeypatch):
    for name in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert env_proxy("https://api.example.com/v1") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "gpu-a,localhost")
    assert env_proxy("https://api.example.com/v1") == "http://proxy.internal:3128"
    assert env_proxy("http://api.example.com/v1") is None  # no HTTP_PROXY set
    assert env_proxy("https://gpu-a:8000/v1") is None


def test_endpoints_skip_resting_ones_and_fall_back_to_the_first_back():
    endpoints = Endpoints(3, cooldown_s=10.0, max_s=60.0)
    assert [endpoints.pick() for _ in range(4)] == [0, 1, 2, 0]
    endpoints.failed(1, wait=None)
    assert [endpoints.pick() for _ in range(4)] == [2, 0, 2, 0] and endpoints.resting() == 1
    endpoints.failed(0, wait=30.0)  # Retry-After longer than the cooldown
    endpoints.failed(2, wait=None)
    endpoints.failed(2, wait=None)  # second failure in a row: 20 s
    assert endpoints.resting() == 3 and endpoints.pick() == 1  # all rest: the one back first (10 s)
    endpoints.succeeded(2)
    assert endpoints.pick() == 2 and endpoints.resting() == 2
