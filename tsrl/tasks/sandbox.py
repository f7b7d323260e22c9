"""Run an untrusted Python program against one test: a fresh process with limits, no network, no writes outside.

Each run: the program and the test's input are written to a fresh temporary directory on the host; `python -I -B
-c RUNNER` starts in a new session (its own process group) with stdin read from the input file and stdout/stderr
written to files there, and an environment holding only PATH, LANG and empty proxy variables (no API keys, no
PYTHON* variables; -I also ignores the user's site-packages and never puts the folder on sys.path). Where it runs
is `Limits.isolation` (task.sandbox): under bwrap (tsrl/tasks/isolation.py) inside bubblewrap's namespaces, in a
private folder of its own holding a copy of the program; under the hook alone in the temporary directory itself.
Either way the runner, before the program's first line runs:
- sets resource limits with `resource.setrlimit`: CPU seconds (RLIMIT_CPU: SIGXCPU, then SIGKILL one second
  later), address space (RLIMIT_AS: a big allocation raises MemoryError), file size (RLIMIT_FSIZE: also caps the
  captured output), no core files, and RLIMIT_NPROC (see Limits.processes);
- installs an audit hook (PEP 578; a program cannot remove it) that refuses: sockets of every family
  (socket.__new__, connect, bind, getaddrinfo, …), process creation (fork, exec, spawn, system, subprocess),
  signals to other processes (os.kill, os.killpg), ctypes (its C calls would step around the hook), opening
  for writing, creating, renaming or deleting any path outside the working directory, and opening for reading
  any path outside the working directory and the interpreter's library folders (stdlib, site-packages), and
  tsrl's own package (its shipped tests and reference solutions): home directories and keys cannot be read,
  and the test's expected output never leaves the parent.
The parent waits at most `wall_s` seconds, then kills the whole process group (SIGKILL), and always kills the
group after the run (under bwrap that ends the PID namespace and everything in it); the directory is removed.

Why limits are set by the runner and not in `preexec_fn`: Python's subprocess documentation warns that
preexec_fn is not safe when the parent has threads (the trainer has: torch, judge clients) and can deadlock
the child before exec; the runner sets the same limits in the child before any of the program's code runs.

The hook alone is NOT a security boundary. It guards Python-level operations of the program; C code steps around
it (the C function under subprocess raises no audit event, and what it starts runs without the hook; sqlite3
opens files in C), the program runs as the trainer's user with the same view of the machine, and RLIMIT_NPROC
does not hold root. It stops the mistakes an RL policy makes (infinite loops, memory hogs, stray writes,
accidental network, runaway forks), not a determined attacker: docs/tasks.md lists, attempt by attempt, what gets
past it and what bwrap stops (tests/unit/tasks/test_sandbox_escapes.py).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tsrl.errors import ConfigError
from tsrl.tasks import isolation
from tsrl.tasks.isolation import PACKAGE

# The child's whole environment: no API keys, no PYTHON* variables, proxies emptied.
ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
    "http_proxy": "",
    "https_proxy": "",
    "HTTP_PROXY": "",
    "HTTPS_PROXY": "",
    "all_proxy": "",
    "ALL_PROXY": "",
    "no_proxy": "*",
}

# The child's first code: limits, then the audit hook, then the program (argv: mode, cpu_s, memory_mb, file_mb,
# processes, func_name, the folder it may not read: tsrl's own package with the shipped tests). Mode "stdin" runs
# the program as __main__; mode "call" runs it, then calls
# Solution().<func_name>(*args) (or a top-level function of that name) with one JSON value per input line and
# prints the result as JSON (LiveCodeBench's functional tests).
RUNNER = r"""
import sys, os, resource, json
import sysconfig
mode, cpu_s, memory_mb, file_mb, processes, func_name, hidden = sys.argv[1:8]
memory = int(memory_mb) << 20
limits = [(resource.RLIMIT_CPU, int(cpu_s), int(cpu_s) + 1), (resource.RLIMIT_AS, memory, memory),
          (resource.RLIMIT_FSIZE, int(file_mb) << 20, int(file_mb) << 20), (resource.RLIMIT_CORE, 0, 0)]
if int(processes) > 0:
    limits.append((resource.RLIMIT_NPROC, int(processes), int(processes)))
for which, soft, hard in limits:
    try:
        resource.setrlimit(which, (soft, hard))
    except (ValueError, OSError):
        if which != resource.RLIMIT_NPROC:
            raise
root = os.path.realpath(os.getcwd())
libraries = [sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")]
libraries += [p for p in sys.path if p.endswith("lib-dynload")]
readable = [root] + sorted({os.path.realpath(p) for p in libraries if os.path.isdir(p)})
readable += ["/dev/null", "/dev/urandom", "/etc/localtime", "/usr/share/zoneinfo"]
hidden = [os.path.realpath(hidden)]
source = open("solution.py", encoding="utf-8").read()
BLOCKED = ("socket.", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "os.kill",
           "os.killpg", "subprocess.", "pty.", "ctypes.", "signal.pthread_kill", "os.startfile", "webbrowser.")
PATHS = ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.link", "os.symlink",
         "os.truncate", "os.utime", "shutil.rmtree", "shutil.copyfile", "shutil.move", "os.chdir", "os.chroot")
WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
def inside(path, roots):
    real = os.path.realpath(os.fsdecode(path))
    return any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots)
def hook(event, args):
    if event.startswith(BLOCKED):
        raise PermissionError(f"sandbox: {event} is not allowed")
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):  # not a file descriptor
        mode, flags = args[1] or "r", args[2] or 0
        writing = any(c in str(mode) for c in "wax+") or bool(flags & WRITES)
        if not inside(args[0], [root] if writing else readable) or (not writing and inside(args[0], hidden)):
            raise PermissionError(f"sandbox: {'writing' if writing else 'reading'} {args[0]!r} is not allowed")
    elif event in PATHS:
        for arg in args:
            if isinstance(arg, (str, bytes, os.PathLike)) and not inside(arg, [root]):
                raise PermissionError(f"sandbox: {event} on {arg!r} is not allowed")
code = compile(source, "solution.py", "exec")
sys.addaudithook(hook)
namespace = {"__name__": "__main__" if mode == "stdin" else "solution", "__builtins__": __builtins__}
exec(code, namespace)
if mode == "call":
    args = [json.loads(line) for line in sys.stdin.read().splitlines() if line.strip()]
    holder = namespace.get("Solution")
    target = getattr(holder(), func_name) if holder is not None else namespace[func_name]
    result = target(*args)
    sys.stdout.write(json.dumps(result))
"""


@dataclass(frozen=True)
class Limits:
    """Limits of one sandboxed run of a program on one test."""

    wall_s: float = 6.0
    """Wall-clock seconds before the process group is killed (catches sleeping and blocked programs)."""
    cpu_s: int = 4
    """CPU seconds (RLIMIT_CPU); a busy loop dies here, before wall_s."""
    memory_mb: int = 1024
    """Address space in MiB (RLIMIT_AS); the interpreter itself takes ~30 MiB of it."""
    file_mb: int = 16
    """Largest file the program may write, captured stdout included (RLIMIT_FSIZE), in MiB."""
    processes: int = 0
    """RLIMIT_NPROC: tasks (processes and threads) the program may have at once. 0 = 16 under bwrap, where the
    kernel counts the sandbox's own tasks only (its user namespace; the program runs as a non-root user), and unset
    under the hook alone, where it would count every task of the user system-wide and root is exempt (the hook
    refuses Python's own forks regardless)."""
    folder_mb: int = 64
    """Size in MiB of the program's folder under bwrap (a tmpfs: its files take memory); every file it writes
    there counts. Under the hook alone the folder is on disk and only each file is limited (file_mb)."""
    isolation: str = "auto"
    """How the program is held (task.sandbox): auto, bwrap or hook; see tsrl/tasks/isolation.py."""

    def __post_init__(self) -> None:
        if (
            self.wall_s <= 0
            or self.cpu_s < 1
            or self.memory_mb < 64
            or self.file_mb < 1
            or self.processes < 0
            or self.folder_mb < 1
        ):
            raise ConfigError(
                f"Sandbox limits need wall_s > 0, cpu_s >= 1, memory_mb >= 64, file_mb >= 1, processes >= 0 and "
                f"folder_mb >= 1; got wall_s={self.wall_s}, cpu_s={self.cpu_s}, memory_mb={self.memory_mb}, "
                f"file_mb={self.file_mb}, processes={self.processes}, folder_mb={self.folder_mb}."
            )


@dataclass(frozen=True)
class RunResult:
    """What one run did: status is passed, wrong_answer, runtime_error, timeout, memory_limit or output_limit."""

    status: str
    stdout: str
    stderr_tail: str
    returncode: int
    seconds: float


def run_program(program: str, stdin: str, limits: Limits, func_name: str = "") -> tuple[str, int, str, float, bool]:
    """Run `program` with `stdin` in a fresh sandbox: (stdout, returncode, stderr tail, seconds, timed out).
    With `func_name`, the program is called as a LeetCode-style function (mode "call")."""
    isolated = isolation.resolve(limits.isolation) == "bwrap"
    workdir = Path(tempfile.mkdtemp(prefix="tsrl-sandbox-"))
    try:
        (workdir / "solution.py").write_text(program, encoding="utf-8")
        (workdir / "stdin.txt").write_text(stdin, encoding="utf-8")
        processes = limits.processes or (isolation.PROCESSES if isolated else 0)
        runner = isolation.prelude() + RUNNER if isolated else RUNNER
        argv = [sys.executable, "-I", "-B", "-c", runner, "call" if func_name else "stdin", str(limits.cpu_s),
                str(limits.memory_mb), str(limits.file_mb), str(processes), func_name, str(PACKAGE)]  # fmt: skip
        start = time.monotonic()
        with (
            open(workdir / "stdin.txt", "rb") as given,
            open(workdir / "stdout.txt", "wb") as out,
            open(workdir / "stderr.txt", "wb") as err,
        ):
            if isolated:
                proc = isolation.spawn(argv, workdir / "solution.py", limits.folder_mb, (given, out, err), ENV)
            else:
                proc = subprocess.Popen(
                    argv, stdin=given, stdout=out, stderr=err, cwd=workdir, env=ENV, start_new_session=True,
                    close_fds=True,
                )  # fmt: skip
            timed_out = _wait(proc, limits.wall_s)
        seconds = time.monotonic() - start
        returncode = isolation.exit_status(proc.returncode) if isolated else proc.returncode
        cap = limits.file_mb << 20
        stdout = (workdir / "stdout.txt").read_bytes()[:cap].decode("utf-8", errors="replace")
        stderr = (workdir / "stderr.txt").read_bytes()[-4000:].decode("utf-8", errors="replace")
        return stdout, returncode, stderr, seconds, timed_out
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _wait(proc: subprocess.Popen, wall_s: float) -> bool:
    """Wait at most `wall_s` seconds (True when that ran out), then kill the process group either way: nothing the
    program started outlives the run (under bwrap, killing bwrap ends its PID namespace and all in it). The wait is
    on a pidfd, which wakes at the exit: Popen.wait(timeout) polls, up to 50 ms late, a second program's worth."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # before Linux 5.3
        pidfd = -1
    if pidfd >= 0:
        try:
            timed_out = not isolation.readable(pidfd, wall_s)
        finally:
            os.close(pidfd)
    else:
        try:
            proc.wait(timeout=wall_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
    _kill_group(proc.pid)
    proc.wait()
    return timed_out


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def classify(returncode: int, stderr: str, timed_out: bool) -> str:
    """The failure status of a run that did not pass (see RunResult)."""
    if timed_out or returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return "timeout"
    if returncode == -signal.SIGXFSZ or "File too large" in stderr:  # Python ignores SIGXFSZ: writes fail instead
        return "output_limit"
    if "MemoryError" in stderr:
        return "memory_limit"
    return "runtime_error" if returncode != 0 else "wrong_answer"


def same_output(got: str, expected: str) -> bool:
    """stdout against the expected output as LiveCodeBench-style judges compare: line by line with surrounding
    whitespace ignored and trailing blank lines dropped; tokens that are both numbers may differ by 1e-6
    (relative to max(1, |expected|)) — the tolerance is ours."""
    got_lines, want_lines = _lines(got), _lines(expected)
    if got_lines == want_lines:
        return True
    if len(got_lines) != len(want_lines):
        return False
    for have, want in zip(got_lines, want_lines):
        a, b = have.split(), want.split()
        if len(a) != len(b) or not all(x == y or _close(x, y) for x, y in zip(a, b)):
            return False
    return True


def _lines(text: str) -> list[str]:
    lines = [line.strip() for line in text.strip().splitlines()]
    return lines


def _close(x: str, y: str) -> bool:
    try:
        have, want = float(x), float(y)
    except ValueError:
        return False
    return abs(have - want) <= 1e-6 * max(1.0, abs(want))


def run_test(program: str, stdin: str, expected: str, limits: Limits, func_name: str = "") -> RunResult:
    """One test: run the program on `stdin` and compare its stdout with `expected` (functional tests compare
    the JSON values)."""
    stdout, code, stderr, seconds, timed_out = run_program(program, stdin, limits, func_name)
    if code == 0 and not timed_out:
        passed = _same_json(stdout, expected) if func_name else same_output(stdout, expected)
        status = "passed" if passed else "wrong_answer"
    else:
        status = classify(code, stderr, timed_out)
    return RunResult(status, stdout, stderr, code, seconds)


def _same_json(got: str, expected: str) -> bool:
    import json

    try:
        return json.loads(got) == json.loads(expected)
    except ValueError:
        return False
