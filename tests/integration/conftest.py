"""Fixtures for running the real `tsrl-train` entry point as a subprocess on a very small configuration, and the
API key of the openai judge tests (the helpers themselves are in tsrl.testing.cli and tsrl.testing.judge_client)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tsrl.testing.cli import run_cli, tiny_overrides
from tsrl.testing.judge_client import KEY, KEY_ENV, close_judges


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def tsrl(cache_dir, tmp_path):
    """Call tsrl-train with the tiny policy and 3 steps; extra overrides win. Returns CompletedProcess."""

    def call(*overrides: str, run_dir: Path | None = None, multirun: bool = False) -> subprocess.CompletedProcess:
        small = tiny_overrides(cache_dir)
        if not multirun:
            small.append(f"run_dir={run_dir or tmp_path / 'run'}")
        return run_cli([*(["-m"] if multirun else []), *small, *overrides], tmp_path)

    return call


@pytest.fixture
def api_key(monkeypatch):
    """The loopback judge's API key in KEY_ENV; every judge that judge_for made is closed after the test. The
    openai judge test modules use it on every test (`pytestmark = pytest.mark.usefixtures("api_key")`)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    yield
    close_judges()
