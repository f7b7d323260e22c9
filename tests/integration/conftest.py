"""Fixtures for running the real `tsrl-train` entry point on a very small configuration, and the API key of the
openai judge tests (the helpers themselves are in tsrl.testing.cli and tsrl.testing.judge_client).

`cli` (and the `tsrl` fixture, which goes through it) runs a command's main() in a child forked from a server
(tests/integration/cli_server.py) that has imported torch, transformers, DeepSpeed and tsrl once: a tiny run
otherwise spends most of its time on those imports (a 3-step tsrl-train run: 12 s of CPU as a new process, 2.5 s
forked; a refused setting: 5 s and 1 s). The child is a process of its own, with the run's working directory,
environment, empty stdin, its own stdout and stderr and a process's exit (cli_server.py says what it leaves out);
its exit status and output come back as subprocess.run(..., capture_output=True, text=True) returns them. Tests
that need a new interpreter — an environment read at import (PYTHONPATH, OMP_NUM_THREADS), signals, the console
script itself, a clean exit down to the last finaliser — run it with tsrl.testing.cli.run_cli or subprocess, and
every command keeps such runs.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from tsrl.testing.cli import TRAIN, cli_env, run_cli, tiny_overrides
from tsrl.testing.judge_client import KEY, KEY_ENV, close_judges

COMMANDS = {  # console script → the module whose main() it runs (pyproject.toml's [project.scripts])
    "tsrl-train": "tsrl.commands.train",
    "tsrl-judge-check": "tsrl.commands.judge_check",
    "tsrl-eval": "tsrl.commands.evaluate",
    "tsrl-ladder": "tsrl.commands.ladder",
    "tsrl-reproduce": "tsrl.commands.reproduce",
    "tsrl-human-study": "tsrl.commands.human_study",
    "tsrl-serve-judge": "tsrl.commands.serve_judge",
}
SERVER = Path(__file__).with_name("cli_server.py")


class CommandServer:
    """The fork server of tests/integration/cli_server.py, one per test session, and the runs it forks."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=cli_env()
        )
        self.pending = b""

    def run(self, command: str, args: Sequence[str], cwd: Path, timeout: float = 600.0) -> subprocess.CompletedProcess:
        """`command *args` in cwd with cli_env(), as run_cli runs tsrl-train: exit status, stdout and stderr."""
        argv = [str(Path(TRAIN).with_name(command)), *args]
        with tempfile.TemporaryDirectory() as folder:
            out, err = Path(folder) / "stdout", Path(folder) / "stderr"
            request = {"module": COMMANDS[command], "argv": argv, "cwd": str(cwd), "env": cli_env()}
            self.process.stdin.write((json.dumps({**request, "stdout": str(out), "stderr": str(err)}) + "\n").encode())
            self.process.stdin.flush()
            pid = self.answer(argv, 600.0)["pid"]  # the first waits for the server's imports
            try:
                status = self.answer(argv, timeout)["status"]
            except BaseException:  # timed out, or the test was interrupted: no run outlives its test
                os.kill(pid, signal.SIGKILL)
                self.answer(argv, 60.0)
                raise
            return subprocess.CompletedProcess(argv, status, text_of(out), text_of(err))

    def answer(self, argv: list[str], timeout: float) -> dict:
        """The server's next answer line about the run of argv; subprocess.TimeoutExpired after timeout seconds."""
        fd, deadline = self.process.stdout.fileno(), time.monotonic() + timeout
        while b"\n" not in self.pending:
            if not select.select([fd], [], [], max(deadline - time.monotonic(), 0.0))[0]:
                raise subprocess.TimeoutExpired(argv, timeout)
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"{SERVER.name} ended (exit status {self.process.wait()}); its stderr says why")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()  # the end of its input ends the server
        self.process.wait(timeout=60)


def text_of(path: Path) -> str:
    """What the run wrote, read as text mode reads a pipe (universal newlines)."""
    text = path.read_bytes().decode("utf-8", errors="replace") if path.is_file() else ""
    return text.replace("\r\n", "\n").replace("\r", "\n")


@pytest.fixture(scope="session")
def cli():
    """cli(args, cwd, command="tsrl-train") -> CompletedProcess: the command's main() in a child of the fork server
    (module docstring), as tsrl.testing.cli.run_cli runs tsrl-train in a new interpreter."""
    server = CommandServer()

    def run(args: Sequence[str], cwd: Path, command: str = "tsrl-train") -> subprocess.CompletedProcess:
        return server.run(command, args, cwd)

    yield run
    server.close()


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def tsrl(cli, cache_dir, tmp_path):
    """Call tsrl-train with the tiny policy and 3 steps; extra overrides win. Returns CompletedProcess. It runs
    through `cli` (a forked child), or with new_process=True as the console script in a new interpreter."""

    def call(
        *overrides: str, run_dir: Path | None = None, multirun: bool = False, new_process: bool = False
    ) -> subprocess.CompletedProcess:
        small = tiny_overrides(cache_dir)
        if not multirun:
            small.append(f"run_dir={run_dir or tmp_path / 'run'}")
        args = [*(["-m"] if multirun else []), *small, *overrides]
        return run_cli(args, tmp_path) if new_process else cli(args, tmp_path)

    return call


@pytest.fixture
def api_key(monkeypatch):
    """The loopback judge's API key in KEY_ENV; every judge that judge_for made is closed after the test. The
    openai judge test modules use it on every test (`pytestmark = pytest.mark.usefixtures("api_key")`)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    yield
    close_judges()
