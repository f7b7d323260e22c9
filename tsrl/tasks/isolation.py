"""Operating-system isolation around each sandboxed program (tsrl/tasks/sandbox.py): bubblewrap namespaces.

`task.sandbox` picks how a program is held: `bwrap` (bubblewrap, Debian package `bubblewrap`; refuses to run
without it), `hook` (the in-process audit hook and resource limits alone) or `auto` (bwrap where it works, else
the hook alone, with one warning per process). Under bwrap the audit hook and limits still run inside, as a
second layer. Each program gets, from `bwrap`:
- its own user, PID, IPC, network, UTS and (where the kernel has it) cgroup namespaces: it sees no process of
  the host (the trainer's pid names nothing), has only a loopback of its own (no route out, no port of the host,
  no abstract UNIX socket of the host), and dies with the bwrap process, which the runner kills (SIGKILL) at the
  wall clock: the kernel then kills everything left in the PID namespace;
- a filesystem of its own: an empty read-only root holding read-only binds of the system's programs and
  libraries (/usr and the /bin, /lib… beside it), the interpreter's prefixes (sys.prefix, sys.base_prefix: the
  standard library and site-packages), /etc/localtime and /etc/ld.so.cache, a fresh /proc of its PID namespace and a
  minimal read-only /dev; tsrl's own package, with the shipped tests and reference solutions, is covered by an
  empty folder when it lies under one of those prefixes. The only writable path is the program's folder,
  `/sandbox`, a tmpfs of `folder_mb` MiB (its files take memory, never disk); home directories, /tmp, the
  repository and every other file of the host are not there;
- no capabilities and no new privileges (no_new_privs; nosuid mounts), and a seccomp filter (below).

As root (the usual CI and GPU container), bubblewrap maps the sandbox's user to the caller's, so the program would
run as the host's root user without capabilities, which the kernel exempts from RLIMIT_NPROC. tsrl therefore
writes the namespace's user and group maps itself (bwrap's --userns-block-fd): inside uid 0 is host uid 0 (bwrap
needs it for its setup) and uid 65534 is host uid 65534 (nobody). bwrap keeps only CAP_SETUID and CAP_SETGID;
the runner's first lines switch to 65534, which clears every capability, before any of the program's code runs.
RLIMIT_NPROC then counts the sandbox's own tasks only (the kernel counts per user namespace), so a fork bomb
stops at `processes` tasks. A non-root trainer needs none of this: bwrap maps the sandbox to its (non-root) user.

The seccomp filter (x86-64 and aarch64) refuses what would widen the kernel surface or reach outside the
namespaces: new namespaces (unshare, setns, clone with CLONE_NEWUSER; clone3, whose flags a filter cannot read,
answers ENOSYS so the C library falls back to clone), ptrace and process_vm_readv/writev, bpf, perf_event_open,
userfaultfd, io_uring_setup and the keyring calls; any other architecture's system calls (the 32-bit ABI of an
x86-64 process) kill the process. Without the filter a program could create a nested user namespace, get
capabilities in it and, for example, mount a tmpfs without size limit.

Not done: a memory cgroup (RLIMIT_AS is per process, so `processes` × `memory_mb` bounds the total) and a disk
quota beyond the folder's size. bwrap runs once per program: see benchmarks/sandbox_bench.py for its cost.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import platform
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from tsrl.errors import ConfigError

log = logging.getLogger("tsrl")

SETTINGS = ("auto", "bwrap", "hook")
FOLDER = "/sandbox"  # the program's folder (its cwd) inside the sandbox
NOBODY = 65534  # the program's uid and gid, inside and (as root) outside
PROCESSES = 16  # RLIMIT_NPROC under bwrap when Limits.processes is 0: the program, its threads and children
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
FILES = ("/etc/localtime", "/etc/ld.so.cache")
PACKAGE = Path(__file__).resolve().parents[1]  # tsrl/: its shipped data holds tests and reference solutions
_warned: list[str] = []  # the auto fallback's warning, once per process
PROBE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
# The probe's program: it imports from the standard library, writes in its folder, reads its file, says where it is.
PROBE = "import os, json\nopen('scratch', 'w').write('x')\nprint(open('solution.py').read(), os.getcwd(), os.getuid())"

# seccomp: the audit architecture, the 32-bit-ABI bit (x86-64's x32), and the numbers of the refused calls.
SYSCALLS = {
    "x86_64": (0xC000003E, 0x40000000, {"clone": 56, "clone3": 435, "unshare": 272, "setns": 308, "ptrace": 101,
                                        "process_vm_readv": 310, "process_vm_writev": 311, "bpf": 321,
                                        "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425,
                                        "keyctl": 250, "add_key": 248, "request_key": 249}),
    "aarch64": (0xC00000B7, 0, {"clone": 220, "clone3": 435, "unshare": 97, "setns": 268, "ptrace": 117,
                                "process_vm_readv": 270, "process_vm_writev": 271, "bpf": 280,
                                "perf_event_open": 241, "userfaultfd": 282, "io_uring_setup": 425,
                                "keyctl": 219, "add_key": 217, "request_key": 218}),
}  # fmt: skip
CLONE_NEWUSER = 0x10000000
EPERM, ENOSYS = 1, 38


def resolve(setting: str) -> str:
    """`bwrap` or `hook` for a `task.sandbox` setting; `bwrap` where bubblewrap cannot run raises ConfigError,
    `auto` there falls back to `hook` and warns once per process."""
    if setting not in SETTINGS:
        raise ConfigError(f"task.sandbox={setting!r} is not a sandbox; use one of {', '.join(SETTINGS)}.")
    if setting == "hook":
        return "hook"
    problem = bwrap_problem()
    if not problem:
        return "bwrap"
    if setting == "bwrap":
        raise ConfigError(
            f"task.sandbox=bwrap needs bubblewrap isolation, which is unavailable here ({problem}); install "
            "bubblewrap (`make bubblewrap` or `apt-get install bubblewrap`) where it is missing, allow user "
            "namespaces where it cannot create them, or set task.sandbox=hook to run programs under the audit hook "
            "alone."
        )
    if not _warned:
        _warned.append(problem)
        log.warning(
            "task.sandbox=auto: bubblewrap isolation is unavailable (%s); policy programs run under the in-process "
            "audit hook and resource limits alone, which is not a security boundary. Install bubblewrap "
            "(`make bubblewrap`) and set task.sandbox=bwrap to require isolation.",
            problem,
        )
    return "hook"


@functools.cache
def bwrap_problem() -> str:
    """Why bubblewrap cannot isolate programs on this machine ("" when it can): it runs one program, once per
    process, and checks that it ran in its folder as the sandbox's user, read its file, wrote there and imported
    from the standard library."""
    if shutil.which("bwrap") is None:
        return "the bwrap program is not installed"
    if platform.machine() not in SYSCALLS:
        return f"tsrl has no seccomp filter for the {platform.machine()} architecture"
    expected = f"probe {FOLDER} {NOBODY if os.getuid() == 0 else os.getuid()}"
    with tempfile.TemporaryDirectory(prefix="tsrl-bwrap-probe-") as folder:
        source = Path(folder) / "solution.py"
        source.write_text("probe", encoding="utf-8")
        with open(os.devnull, "rb") as empty, open(Path(folder) / "out.txt", "w+b") as out:
            proc = None
            try:
                proc = spawn([sys.executable, "-I", "-c", prelude() + PROBE], source, 1, (empty, out, out), PROBE_ENV)
                failure = "" if proc.wait(timeout=60) == 0 else f"exit status {proc.returncode}"
            except (OSError, RuntimeError, subprocess.TimeoutExpired) as err:
                failure = str(err)
                if proc is not None:
                    proc.kill()
                    proc.wait()
            out.seek(0)
            seen = out.read().decode(errors="replace").strip()
    if failure or seen != expected:
        return f"a program under bwrap failed ({failure or 'wrong output'}; it wrote {seen[-300:]!r})"
    return ""


def prelude() -> str:
    """Code the isolated interpreter runs first: as root, switch to the sandbox's user (which clears the two
    capabilities bwrap left it) before anything else runs."""
    if os.getuid() != 0:
        return ""
    ids = f"{NOBODY}, {NOBODY}, {NOBODY}"
    return f"import os\nos.setgroups([])\nos.setresgid({ids})\nos.setresuid({ids})\n"


def exit_status(returncode: int) -> int:
    """bwrap's exit status in subprocess's convention: a program killed by signal N exits bwrap with 128 + N."""
    return -(returncode - 128) if 128 < returncode < 128 + 65 else returncode


def spawn(
    command: Sequence[str], source: Path, folder_mb: int, streams: tuple[IO, IO, IO], env: dict[str, str]
) -> subprocess.Popen:
    """Start `command` with `env` in a fresh bwrap sandbox whose folder holds a copy of `source` as solution.py;
    `streams` are its stdin, stdout and stderr. Returns once the program may run (as root: once its user maps are
    written); raises RuntimeError when bwrap exits before its sandbox starts."""
    root = os.getuid() == 0
    seccomp_read, seccomp_write = os.pipe()
    os.write(seccomp_write, seccomp_filter())  # a few hundred bytes: fits in the pipe's buffer
    os.close(seccomp_write)
    info_read, info_write = os.pipe() if root else (-1, -1)
    block_read, block_write = os.pipe() if root else (-1, -1)
    theirs = [fd for fd in (seccomp_read, info_write, block_read) if fd >= 0]  # bwrap's ends: closed here after
    try:
        with open(source, "rb") as program:
            argv = bwrap_argv(program.fileno(), seccomp_read, folder_mb << 20, (info_write, block_read))
            proc = subprocess.Popen(
                argv + list(command), stdin=streams[0], stdout=streams[1], stderr=streams[2], cwd="/", env=env,
                start_new_session=True, close_fds=True, pass_fds=[*theirs, program.fileno()],
            )  # fmt: skip
    except BaseException:
        for fd in (info_read, block_write):
            if fd >= 0:
                os.close(fd)
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    if root:
        _map_users(proc, info_read, block_write)
    return proc


def _map_users(proc: subprocess.Popen, info_read: int, block_write: int) -> None:
    """As root: read the sandbox's pid from bwrap, write its user and group maps, let it go on."""
    pid = None
    try:
        pid = _child_pid(info_read, time.monotonic() + 30.0)
        if pid is None:
            raise RuntimeError(f"bwrap exited with {proc.poll()} before starting the sandbox")
        for name in ("uid_map", "gid_map"):
            Path(f"/proc/{pid}/{name}").write_text(f"0 0 1\n{NOBODY} {NOBODY} 1\n", encoding="ascii")
        os.write(block_write, b"1")
    except BaseException:
        if pid is not None:  # killed before its block fd closes: it must not go on without its maps
            os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait()
        raise
    finally:
        os.close(info_read)
        os.close(block_write)


def _child_pid(fd: int, deadline: float) -> int | None:
    """The child-pid bwrap writes to its info fd (a JSON object), or None when it exits first. Read until the
    object is whole, not until EOF: the sandboxed child may still hold the fd while it waits for its maps."""
    text = b""
    while time.monotonic() < deadline:
        chunk = os.read(fd, 4096) if readable(fd, deadline - time.monotonic()) else b""
        if not chunk:
            return None
        text += chunk
        try:
            return int(json.loads(text)["child-pid"])
        except ValueError:
            continue
    return None


def readable(fd: int, seconds: float) -> bool:
    """Whether `fd` becomes readable within `seconds` (poll, not select: a trainer may hold over 1024 files)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0, int(seconds * 1000))))


def bwrap_argv(program_fd: int, seccomp_fd: int, folder_bytes: int, root_fds: tuple[int, int]) -> list[str]:
    """bwrap's command line up to the program's command (see the module docstring for what each part does)."""
    argv = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--unshare-user", "--die-with-parent",
            "--new-session", "--hostname", "sandbox", "--cap-drop", "ALL", "--seccomp", str(seccomp_fd)]  # fmt: skip
    if root_fds[0] >= 0:  # as root: tsrl writes the user maps; the prelude needs these two to switch user
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--info-fd", str(root_fds[0])]
        argv += ["--userns-block-fd", str(root_fds[1])]
    argv += mount_args(read_only_paths(), PACKAGE)
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(folder_bytes), "--tmpfs", FOLDER]
    argv += ["--perms", "0444", "--file", str(program_fd), f"{FOLDER}/solution.py", "--chdir", FOLDER]
    return argv + ["--remount-ro", "/dev", "--remount-ro", "/", "--"]


def read_only_paths() -> list[str]:
    """The host paths the sandbox sees read-only: the system's programs and libraries and the interpreter's
    prefixes (standard library, site-packages) — never sys.path as a whole (an editable install puts the
    repository there)."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return [*SYSTEM, *sorted(prefixes), *FILES]


def mount_args(paths: Sequence[str], hidden: Path) -> list[str]:
    """bwrap arguments binding `paths` read-only (a symlink is recreated and its target bound; a path under
    another is left to it; a missing one is skipped) and covering `hidden` when it lies under one of them."""
    binds = sorted({os.path.realpath(p) for p in paths if os.path.exists(p)})
    kept = [b for i, b in enumerate(binds) if not any(_under(b, k) for k in binds[:i])]
    links = [p for p in paths if os.path.islink(p) and not any(_under(p, k) for k in kept)]
    argv: list[str] = []
    made: set[Path] = set()
    for path in kept + links:  # bwrap would copy each missing parent's mode from the host (/root is 0700)
        for parent in reversed(Path(path).parents[:-1]):
            if parent not in made and not any(_under(str(parent), k) or str(parent) == k for k in kept):
                made.add(parent)
                argv += ["--perms", "0755", "--dir", str(parent)]
    argv += [arg for path in kept for arg in ("--ro-bind", path, path)]
    argv += [arg for path in links for arg in ("--symlink", os.readlink(path), path)]
    real_hidden = os.path.realpath(hidden)
    if any(_under(real_hidden, k) for k in kept):
        argv += ["--tmpfs", real_hidden, "--remount-ro", real_hidden]
    return argv


def _under(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip("/") + "/")


@functools.cache
def seccomp_filter() -> bytes:
    """The seccomp program (classic BPF, struct sock_filter[]) for this machine's architecture."""
    arch, abi_bit, numbers = SYSCALLS[platform.machine()]
    load, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06

    def op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
        return struct.pack("=HBBI", code, jt, jf, k)

    def refuse(errno: int) -> int:
        return 0x00050000 | errno  # SECCOMP_RET_ERRNO

    prog = op(load, 4) + op(jeq, arch, 1, 0) + op(ret, 0x80000000)  # another ABI: SECCOMP_RET_KILL_PROCESS
    prog += op(load, 0)  # seccomp_data.nr
    if abi_bit:
        prog += op(jge, abi_bit, 0, 1) + op(ret, refuse(EPERM))
    for name, number in numbers.items():
        if name not in ("clone", "clone3"):
            prog += op(jeq, number, 0, 1) + op(ret, refuse(EPERM))
    prog += op(jeq, numbers["clone3"], 0, 1) + op(ret, refuse(ENOSYS))
    prog += op(jeq, numbers["clone"], 0, 3) + op(load, 16) + op(jset, CLONE_NEWUSER, 0, 1) + op(ret, refuse(EPERM))
    return prog + op(ret, 0x7FFF0000)  # SECCOMP_RET_ALLOW
