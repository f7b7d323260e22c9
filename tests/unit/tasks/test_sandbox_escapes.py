"""Escape attempts against the code sandbox, each a test, under bubblewrap isolation (task.sandbox=bwrap,
tsrl/tasks/isolation.py; skipped, with the reason, where bwrap cannot run here) and under the audit hook alone
(task.sandbox=hook). Each asserts that the attack failed and that its side effect did not happen: the file outside
the folder was not written, the secret never reached the program's output, the stand-in trainer still runs.

Under the hook alone the attempts it cannot stop are xfail(strict): they run and escape (their side effects are
kept harmless: files under the test's tmp_path, one text file in site-packages, 24 MiB of files and 16 MiB in
/dev/shm, all removed; at most 40 processes of 3 s in the run's process group; one sleep that outlives its run,
killed; the stand-in trainer killed), and a hook that starts stopping one fails the test so that the table
in docs/tasks.md is updated. One attempt is never run under the hook alone: `kill -9 -1` as root would kill every
process of the machine. Most escapes go through `_posixsubprocess.fork_exec`, the C function under subprocess,
which raises no audit event: from there a shell or a second interpreter runs without the hook.

The "trainer" signalled and spied on is a stand-in process started with a secret in its environment (killing
pytest itself would end the run when the hook alone lets the attack through)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from textwrap import dedent

import pytest

from tsrl.tasks import isolation
from tsrl.tasks.sandbox import Limits, RunResult, run_test

PROBLEM = isolation.bwrap_problem()
NEEDS_BWRAP = pytest.mark.skipif(bool(PROBLEM), reason=f"bubblewrap isolation is unavailable here: {PROBLEM}")
FAST = dict(wall_s=3.0, cpu_s=2, memory_mb=256, file_mb=1)

# Program text that starts a command by the C function under subprocess, which the audit hook never sees.
C_SPAWN = """
import _posixsubprocess, os
def c_spawn(argv, setsid=False):
    r, w = os.pipe()
    try:
        return _posixsubprocess.fork_exec([os.fsencode(a) for a in argv], [os.fsencode(argv[0])], True, (), None,
            None, -1, -1, -1, -1, -1, -1, r, w, False, setsid, -1, None, None, None, -1, None, False)
    finally:
        os.close(r)
        os.close(w)
def c_run(argv):
    return os.waitpid(c_spawn(argv), 0)[1]
"""
HOOKLESS = "the C function under subprocess raises no audit event; what it starts runs without the hook"


def shell(command: str) -> str:
    """A program running `command` in /bin/sh started through the C-level route."""
    return f"{C_SPAWN}\nc_run(['/bin/sh', '-c', {command!r}])\nprint('ran')\n"


def hookless_python(code: str) -> str:
    """A program running `code` in a second interpreter started through the C-level route (no hook there)."""
    return f"{C_SPAWN}\nimport sys\nc_run([sys.executable, '-I', '-c', {code!r}])\nprint('ran')\n"


def cases(routes: dict[str, str | None], unsafe: tuple[str, ...] = ()) -> list:
    """(mode, route) parameters: each route under bwrap (skipped without it) and under the hook alone, where a
    route with a reason is one the hook cannot stop (xfail, strict) and an unsafe one is not run."""
    params = []
    for route, hole in routes.items():
        params.append(pytest.param("bwrap", route, marks=NEEDS_BWRAP, id=f"bwrap-{route}"))
        if route in unsafe:
            marks = [pytest.mark.skip(reason=f"{route} would harm this machine if it escaped the hook")]
        else:
            marks = [pytest.mark.xfail(strict=True, reason=f"the hook alone cannot stop it: {hole}")] if hole else []
        params.append(pytest.param("hook", route, marks=marks, id=f"hook-{route}"))
    return params


def run(program: str, mode: str, **limits: float) -> RunResult:
    return run_test(program, "", "", Limits(**{**FAST, **limits, "isolation": mode}))  # type: ignore[arg-type]


@pytest.fixture
def trainer() -> Iterator[tuple[subprocess.Popen, str]]:
    """A stand-in trainer: a process of this user with a secret in its environment; (process, secret)."""
    secret = f"sk-trainer-{uuid.uuid4().hex}"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], env={**os.environ, "TSRL_TEST_SECRET": secret}
    )
    yield proc, secret
    proc.kill()
    proc.wait()


SPAWN_ROUTES = {
    "subprocess": "import subprocess\nsubprocess.run(['/bin/sh', '-c', CMD])",
    "os_system": "import os\nos.system(CMD)",
    "os_popen": "import os\nos.popen(CMD).read()",
    "os_posix_spawn": "import os\nos.waitpid(os.posix_spawn('/bin/sh', ['sh', '-c', CMD], {}), 0)",
    "os_spawnv": "import os\nos.spawnv(os.P_WAIT, '/bin/sh', ['sh', '-c', CMD])",
    "os_fork_exec": "import os\nif os.fork() == 0:\n    os.execv('/bin/sh', ['sh', '-c', CMD])\nos.wait()",
    "pty_spawn": "import pty\npty.spawn(['/bin/sh', '-c', CMD])",
    "ctypes_system": "import ctypes\nctypes.CDLL(None).system(CMD.encode())",
    "ctypes_fork_execve": dedent("""
        import ctypes
        libc = ctypes.CDLL(None)
        if libc.fork() == 0:
            libc.execve(b'/bin/sh', (ctypes.c_char_p * 4)(b'/bin/sh', b'-c', CMD.encode(), None), None)
        libc.wait(None)
    """),
    "c_level_fork_exec": C_SPAWN + "\nc_run(['/bin/sh', '-c', CMD])",
}


@pytest.mark.parametrize(
    ("mode", "route"), cases({r: HOOKLESS if r == "c_level_fork_exec" else None for r in SPAWN_ROUTES})
)
def test_a_started_process_cannot_write_outside(mode, route, tmp_path):
    """Each way Python offers to start a process runs a shell that writes a file outside the folder: the hook
    refuses every route but the C-level one; under bwrap that one starts a shell that cannot reach the file."""
    outside = tmp_path / "spawned.txt"
    result = run(f"CMD = {f'echo pwned > {outside}'!r}\n" + SPAWN_ROUTES[route] + "\nprint('ran')\n", mode)
    assert not outside.exists(), f"{route} wrote outside the folder ({result.status})"
    if route != "c_level_fork_exec":
        assert result.status == "runtime_error" and "is not allowed" in result.stderr_tail


WRITE_ROUTES = {
    "open": ("open(T, 'w').write('x')", None),
    "pathlib": ("import pathlib\npathlib.Path(T).write_text('x')", None),
    "shutil_copy": ("import shutil\nshutil.copy('solution.py', T)", None),
    "os_open": ("import os\nos.close(os.open(T, os.O_CREAT | os.O_WRONLY))", None),
    "sqlite3": (
        "import sqlite3\nsqlite3.connect(T).execute('create table t (x)')",
        "sqlite3 opens its database in C, and connect's audit event is not a file open",
    ),
    "ctypes_fopen": (
        dedent("""
            import ctypes
            libc = ctypes.CDLL(None)
            libc.fopen.restype = ctypes.c_void_p
            libc.fclose(ctypes.c_void_p(libc.fopen(T.encode(), b'w')))
        """),
        None,
    ),
    "c_level_shell": (
        "import shlex\n" + C_SPAWN + "\nc_run(['/bin/sh', '-c', 'echo x > ' + shlex.quote(T)])",
        HOOKLESS,
    ),
}


@pytest.mark.parametrize(("mode", "route"), cases({r: hole for r, (_, hole) in WRITE_ROUTES.items()}))
def test_no_file_outside_the_folder_is_written(mode, route, tmp_path):
    target = tmp_path / "written.txt"
    result = run(f"T = {str(target)!r}\n{WRITE_ROUTES[route][0]}\nprint('wrote')\n", mode)
    assert not target.exists(), f"{route} created {target} ({result.status})"


@pytest.mark.parametrize(("mode", "route"), cases({"open_then_shell": HOOKLESS}))
def test_the_interpreter_s_own_folders_cannot_be_written(mode, route):
    """A file planted in site-packages would run in the trainer's next start (a .pth file); under bwrap the
    interpreter's prefixes are read-only. The hook alone stops Python's own writes there, not a shell's."""
    target = Path(sysconfig.get_paths()["purelib"]) / f"tsrl-escape-{uuid.uuid4().hex}.txt"
    try:
        direct = run(f"open({str(target)!r}, 'w').write('x')\n", mode)
        assert direct.status == "runtime_error" and not target.exists()
        run(shell(f"echo x > {target}"), mode)
        assert not target.exists(), "a shell started by the program wrote into site-packages"
    finally:
        target.unlink(missing_ok=True)


READ_ROUTES = {
    "open": ("print(open(T).read())", None),
    "pathlib": ("import pathlib\nprint(pathlib.Path(T).read_text())", None),
    "os_open": ("import os\nprint(os.read(os.open(T, os.O_RDONLY), 4096))", None),
    "ctypes_fopen": (
        dedent("""
            import ctypes
            libc = ctypes.CDLL(None)
            libc.fopen.restype = ctypes.c_void_p
            buf = ctypes.create_string_buffer(4096)
            libc.fread(buf, 1, 4096, ctypes.c_void_p(libc.fopen(T.encode(), b'r')))
            print(buf.value)
        """),
        None,
    ),
    "c_level_shell": ("import shlex\n" + C_SPAWN + "\nc_run(['/bin/sh', '-c', 'cat ' + shlex.quote(T)])", HOOKLESS),
}


@pytest.mark.parametrize(("mode", "route"), cases({r: hole for r, (_, hole) in READ_ROUTES.items()}))
def test_a_secret_outside_the_folder_cannot_be_read(mode, route, tmp_path):
    secret = f"sk-file-{uuid.uuid4().hex}"
    target = tmp_path / "key.txt"
    target.write_text(secret)
    result = run(f"T = {str(target)!r}\n{READ_ROUTES[route][0]}\n", mode)
    assert secret not in result.stdout + result.stderr_tail


@pytest.mark.parametrize(("mode", "route"), cases({"c_level_shell": HOOKLESS}))
def test_the_shipped_tests_cannot_be_read(mode, route):
    """The shipped problems' tests and reference solutions (tsrl's package): not mounted under bwrap."""
    data = isolation.PACKAGE / "tasks" / "data" / "code" / "eval.jsonl"
    marker = data.read_text(encoding="utf-8").splitlines()[0][:80]
    result = run(shell(f"cat {data}"), mode)
    assert marker not in result.stdout


ENV_ROUTES = {
    "os_environ": ("import os\nprint(sorted(os.environ.items()))", None),
    "proc_environ": ("print(open(f'/proc/{PID}/environ', 'rb').read())", None),
    "c_level_shell": (C_SPAWN + "\nc_run(['/bin/sh', '-c', f'cat /proc/{PID}/environ'])", HOOKLESS),
}


@pytest.mark.parametrize(("mode", "route"), cases({r: hole for r, (_, hole) in ENV_ROUTES.items()}))
def test_the_trainer_s_environment_is_not_visible(mode, route, trainer, monkeypatch):
    """A secret in this process's environment (as a trainer's API key would be) and in the stand-in trainer's:
    the program's environment is built from nothing, and under bwrap no process of the host is in its /proc."""
    proc, secret = trainer
    monkeypatch.setenv("TSRL_TEST_SECRET", secret)
    result = run(f"PID = {proc.pid}\n{ENV_ROUTES[route][0]}\n", mode)
    assert secret not in result.stdout + result.stderr_tail


@pytest.fixture
def listeners(tmp_path) -> Iterator[dict[str, object]]:
    """A TCP, a UNIX-path and an abstract UNIX server of the host, listening; none accepts, so a connection that
    reached one waits in its queue, where `reached` finds it after the run (no timing involved)."""
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    unix_path = socket.socket(socket.AF_UNIX)
    unix_path.bind(str(tmp_path / "s.sock"))
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0tsrl-test-{uuid.uuid4().hex}")
    servers = [tcp, unix_path, abstract]
    for server in servers:
        server.listen(8)
        server.setblocking(False)
    yield {"port": tcp.getsockname()[1], "path": str(tmp_path / "s.sock"), "abstract": abstract.getsockname(),
           "servers": servers}  # fmt: skip
    for server in servers:
        server.close()


def reached(servers: list[socket.socket]) -> list[str]:
    """The servers with a connection waiting to be accepted."""
    found = []
    for server in servers:
        try:
            server.accept()[0].close()
            found.append(str(server.getsockname()))
        except BlockingIOError:
            continue
    return found


SOCKET_ROUTES = {  # route: (code using PORT, PATH and ABSTRACT, what the hook misses, run in a second interpreter)
    "tcp_connect": ("import socket\nsocket.create_connection(('127.0.0.1', PORT), timeout=1)", None, False),
    "unix_path": ("import socket\nsocket.socket(socket.AF_UNIX).connect(PATH)", None, False),
    "unix_abstract": ("import socket\nsocket.socket(socket.AF_UNIX).connect(ABSTRACT)", None, False),
    "c_level_tcp_connect": ("import socket\nsocket.create_connection(('127.0.0.1', PORT), timeout=1)", HOOKLESS, True),
    "c_level_unix_abstract": ("import socket\nsocket.socket(socket.AF_UNIX).connect(ABSTRACT)", HOOKLESS, True),
}


@pytest.mark.parametrize(("mode", "route"), cases({r: hole for r, (_, hole, _) in SOCKET_ROUTES.items()}))
def test_no_socket_reaches_the_host(mode, route, listeners):
    """Connections to a TCP port on the loopback, a UNIX socket file and an abstract UNIX socket of the host:
    under bwrap the program has a network namespace of its own (its own loopback and abstract sockets) and
    sees no file of the host."""
    code, _, second_interpreter = SOCKET_ROUTES[route]
    values = f"PORT = {listeners['port']}\nPATH = {listeners['path']!r}\nABSTRACT = {listeners['abstract']!r}\n"
    run(hookless_python(values + code) if second_interpreter else values + code, mode)
    assert reached(listeners["servers"]) == []


BIND = """
import socket, time
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(('127.0.0.1', PORT))
server.listen(1)
print('listening', flush=True)
time.sleep(2.5)
"""


@pytest.mark.parametrize(("mode", "route"), cases({"bind": None, "c_level_bind": HOOKLESS}))
def test_a_port_the_program_opens_is_not_reachable_from_the_host(mode, route):
    """The program listens on a loopback port while the test tries to connect to it from the host."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    code = f"PORT = {port}\n{BIND}"
    done = threading.Event()
    worker = threading.Thread(target=lambda: (run(hookless_python(code) if route == "c_level_bind" else code, mode),
                                              done.set()))  # fmt: skip
    worker.start()
    connected = False
    while not done.is_set() and not connected:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            connected = True
        except OSError:
            time.sleep(0.1)
    worker.join()
    assert not connected


SIGNAL_ROUTES = {
    "os_kill": ("import os, signal\nos.kill(PID, signal.SIGKILL)", None),
    "ctypes_kill": ("import ctypes\nctypes.CDLL(None).kill(PID, 9)", None),
    "c_level_shell": (C_SPAWN + "\nc_run(['/bin/sh', '-c', f'kill -9 {PID}'])", HOOKLESS),
    "kill_every_process": (C_SPAWN + "\nc_run(['/bin/sh', '-c', 'kill -9 -1'])", "kill -9 -1 from a shell"),
}


@pytest.mark.parametrize(
    ("mode", "route"),
    cases({r: hole for r, (_, hole) in SIGNAL_ROUTES.items()}, unsafe=("kill_every_process",)),
)
def test_the_trainer_cannot_be_signalled(mode, route, trainer):
    """SIGKILL to the stand-in trainer's pid: under bwrap that pid names nothing in the program's PID namespace,
    and `kill -9 -1` reaches only the sandbox's own processes."""
    proc, _ = trainer
    run(f"PID = {proc.pid}\n{SIGNAL_ROUTES[route][0]}\n", mode)
    with pytest.raises(subprocess.TimeoutExpired):  # a SIGKILL sent during the run ends it within this
        proc.wait(timeout=0.5)


FORKS = {
    "os_fork": (
        dedent("""
            import os, time
            n = 0
            for _ in range(40):
                try:
                    pid = os.fork()
                except OSError:
                    break
                if pid == 0:
                    time.sleep(3)
                    os._exit(0)
                n += 1
            print(n)
        """),
        None,
    ),
    "c_level_spawn": (
        C_SPAWN
        + dedent("""
            n = 0
            for _ in range(40):
                try:
                    c_spawn(['/bin/sleep', '3'])
                except OSError:
                    break
                n += 1
            print(n)
        """),
        "RLIMIT_NPROC does not hold root, and the hook sees no C-level process creation",
    ),
}


@pytest.mark.parametrize(("mode", "route"), cases({r: hole for r, (_, hole) in FORKS.items()}))
def test_forks_stop_at_the_process_limit(mode, route):
    """40 children asked for with processes=8: the hook refuses Python's fork; under bwrap the program runs as
    a non-root user of its own user namespace, so RLIMIT_NPROC stops the C-level route at 8 tasks."""
    result = run(FORKS[route][0], mode, processes=8)
    started = int(result.stdout.strip() or 0)
    assert started < 8


FILL = {  # route: (program printing the MiB it wrote, the most it may write, what the hook alone misses)
    "many_files": (
        dedent("""
            n = 0
            try:
                for i in range(24):
                    open(f'f{i}', 'wb').write(bytes(1 << 20))
                    n += 1
            except OSError:
                pass
            print(n)
        """),
        8,
        "under the hook alone the folder is on disk: only each file is limited (RLIMIT_FSIZE)",
    ),
    "one_file": (
        dedent("""
            n = 0
            try:
                with open('big', 'wb') as f:
                    for i in range(24):
                        f.write(bytes(1 << 20))
                        f.flush()
                        n += 1
            except OSError:
                pass
            print(n)
        """),
        2,
        None,
    ),
}


@pytest.mark.parametrize(("mode", "route"), cases({r: hole for r, (_, _, hole) in FILL.items()}))
def test_filling_the_disk_stops_at_the_folder_size(mode, route):
    """24 MiB asked for with folder_mb=8 and file_mb=2: one file stops at 2 MiB (RLIMIT_FSIZE) everywhere;
    many files stop at the folder's 8 MiB under bwrap (a tmpfs of that size)."""
    program, most, _ = FILL[route]
    result = run(program, mode, file_mb=2, folder_mb=8)
    assert int(result.stdout.strip() or 0) <= most


SHM = "/dev/shm"


@pytest.mark.parametrize(
    ("mode", "route"),
    cases({"python": None, "c_level_python": None, "shared_memory": "a shell's files in /dev/shm are memory"}),
)
def test_memory_past_the_limit_is_refused(mode, route):
    """2 GiB asked for with memory_mb=256: RLIMIT_AS holds the program and what it starts (limits are inherited).
    Files in /dev/shm are memory outside RLIMIT_AS (RLIMIT_FSIZE caps each file, not their number): 16 files of
    1 MiB written there from a shell; /dev is read-only under bwrap."""
    if route == "shared_memory" and not os.access(SHM, os.W_OK):
        pytest.skip(f"{SHM} is not writable here, so the attempt could not escape anyway")
    prefix = f"tsrl-escape-{uuid.uuid4().hex}"
    programs = {
        "python": "block = bytearray(2 << 30)\nprint('allocated')\n",
        "c_level_python": hookless_python("block = bytearray(2 << 30)\nprint('allocated')"),
        "shared_memory": shell(f"for i in $(seq 16); do head -c 1048576 /dev/zero > {SHM}/{prefix}.$i; done"),
    }
    try:
        result = run(programs[route], mode)
        assert "allocated" not in result.stdout
        assert not list(Path(SHM).glob(f"{prefix}.*"))
    finally:
        for leftover in Path(SHM).glob(f"{prefix}.*"):
            leftover.unlink()


def _processes_with(marker: str) -> list[int]:
    """Pids of the host's processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize(
    ("mode", "route"), cases({"c_level_new_session": "a child in its own session escapes the process-group kill"})
)
def test_nothing_the_program_started_outlives_the_wall_clock(mode, route):
    """The program starts a long sleep in a session of its own (out of its process group), then sleeps past the
    wall clock; under bwrap killing bwrap ends the PID namespace and everything in it."""
    marker = f"{uuid.uuid4().int % 900 + 100}.{uuid.uuid4().int % 10**6:06d}"
    program = C_SPAWN + f"\nimport time\nc_spawn(['/bin/sleep', {marker!r}], setsid=True)\ntime.sleep(60)\n"
    try:
        result = run(program, mode, wall_s=1.5)
        assert result.status == "timeout"
        deadline = time.monotonic() + 3.0
        while _processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _processes_with(marker), "a process the program started is still running"
    finally:
        for pid in _processes_with(marker):
            os.kill(pid, signal.SIGKILL)


@NEEDS_BWRAP
def test_the_program_cannot_make_namespaces_of_its_own():
    """In a user namespace of its own a program would hold every capability there (mount a tmpfs without size
    limit, reach more of the kernel): the seccomp filter refuses unshare, and clone with CLONE_NEWUSER."""
    program = C_SPAWN + "\nprint(c_run(['/usr/bin/unshare', '--user', '--map-root-user', '/bin/true']))\n"
    result = run(program, "bwrap")
    assert result.stdout.strip() not in ("", "0") and "unshare failed" in result.stderr_tail
