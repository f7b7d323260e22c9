"""task.sandbox (tsrl/tasks/isolation.py): `auto` falls back to the hook alone with one warning where bubblewrap
cannot run, `bwrap` refuses to start there in one sentence naming the fix, an unknown setting is refused, the code
task resolves its setting when it is built; the bind list keeps tsrl's package hidden; and, where bwrap runs, a
program inside is a non-root user without capabilities, with no_new_privs and a seccomp filter, that sees only
the system's files, the interpreter's and its own folder. The fallback is exercised with a stand-in `bwrap` that
fails the way a container without user namespaces makes it fail, so it runs on every machine."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from textwrap import dedent

import pytest

from tsrl.errors import ConfigError
from tsrl.tasks import isolation
from tsrl.tasks.code import CodeConfig, CodeTask
from tsrl.tasks.sandbox import Limits, run_program

PROBLEM = isolation.bwrap_problem()
NEEDS_BWRAP = pytest.mark.skipif(bool(PROBLEM), reason=f"bubblewrap isolation is unavailable here: {PROBLEM}")
FAILING_BWRAP = "#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n"


@pytest.fixture
def broken_bwrap(tmp_path, monkeypatch) -> Iterator[None]:
    """A `bwrap` first on PATH that cannot create namespaces; the probe's cached answer is dropped around it."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "bwrap").write_text(FAILING_BWRAP)
    (folder / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    monkeypatch.setattr(isolation, "_warned", [])
    isolation.bwrap_problem.cache_clear()
    yield
    isolation.bwrap_problem.cache_clear()


def test_auto_falls_back_to_the_hook_with_one_warning_and_bwrap_refuses(broken_bwrap, caplog):
    with caplog.at_level(logging.WARNING, logger="tsrl"):
        assert [isolation.resolve("auto") for _ in range(3)] == ["hook"] * 3
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "tsrl"]
    assert "Creating new namespace failed" in warning and "task.sandbox=bwrap" in warning
    with pytest.raises(ConfigError, match=r"task.sandbox=bwrap needs bubblewrap .* task.sandbox=hook"):
        isolation.resolve("bwrap")
    with pytest.raises(ConfigError, match="task.sandbox=bwrap"):
        CodeTask(CodeConfig(sandbox="bwrap"))
    assert isolation.resolve("hook") == "hook" and CodeTask(CodeConfig(sandbox="auto")).limits.isolation == "hook"
    stdout, code, _, _, _ = run_program("print(6 * 7)", "", Limits(isolation="auto"))
    assert (stdout, code) == ("42\n", 0)  # the run goes on under the hook alone


def test_a_missing_bwrap_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    isolation.bwrap_problem.cache_clear()
    try:
        assert isolation.bwrap_problem() == "the bwrap program is not installed"
    finally:
        isolation.bwrap_problem.cache_clear()


def test_an_unknown_setting_is_refused():
    with pytest.raises(ConfigError, match="task.sandbox='docker' is not a sandbox; use one of auto, bwrap, hook"):
        CodeConfig(sandbox="docker")
    with pytest.raises(ConfigError, match="not a sandbox"):
        isolation.resolve("docker")


def test_binds_fold_nested_paths_recreate_links_and_hide_the_package(tmp_path):
    prefix = tmp_path / "prefix"
    (prefix / "lib" / "tsrl").mkdir(parents=True)
    (tmp_path / "link").symlink_to(prefix)
    paths = [str(prefix / "lib"), str(prefix), str(tmp_path / "link"), str(tmp_path / "missing")]
    argv = isolation.mount_args(paths, prefix / "lib" / "tsrl")
    binds = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--ro-bind"]
    assert binds == [str(prefix)]  # the nested path and the link's target are the same bind; the missing one none
    assert ["--symlink", str(prefix), str(tmp_path / "link")] == argv[argv.index("--symlink") :][:3]
    assert argv[-4:] == ["--tmpfs", str(prefix / "lib" / "tsrl"), "--remount-ro", str(prefix / "lib" / "tsrl")]
    parents = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--dir"]
    assert parents == [str(p) for p in reversed(prefix.parents[:-1])]  # made 0755, not copied from the host
    assert "--tmpfs" not in isolation.mount_args([str(prefix / "lib")], tmp_path / "elsewhere")


def test_bwrap_exit_statuses_read_as_signals():
    assert [isolation.exit_status(c) for c in (0, 1, 137, 152, 255)] == [0, 1, -9, -24, 255]


@NEEDS_BWRAP
def test_auto_uses_bwrap_where_it_runs():
    assert isolation.resolve("auto") == "bwrap" and CodeTask(CodeConfig()).limits.isolation == "bwrap"


@NEEDS_BWRAP
def test_a_program_under_bwrap_is_a_user_without_privileges_that_sees_little():
    """Read by a shell the program starts (the hook refuses Python's reads of /proc): its uid (65534 when the
    trainer is root), capabilities, no_new_privs and seccomp mode; the top of its file tree (no /tmp, /home, /var:
    the host has them); the processes it sees and its host name."""
    script = "grep -E '^(Uid|CapEff|NoNewPrivs|Seccomp):' /proc/self/status; echo; ls /; echo; ls /proc; hostname"
    program = dedent(f"""
        import _posixsubprocess, os
        r, w = os.pipe()
        pid = _posixsubprocess.fork_exec([b'/bin/sh', b'-c', {script.encode()!r}], [b'/bin/sh'], True, (), None,
            None, -1, -1, -1, -1, -1, -1, r, w, False, False, -1, None, None, None, -1, None, False)
        os.waitpid(pid, 0)
    """)
    stdout, code, stderr, _, _ = run_program(program, "", Limits(isolation="bwrap"))
    status, top, procs = stdout.split("\n\n")
    fields = dict(line.split(":\t", 1) for line in status.splitlines())
    uid = isolation.NOBODY if os.getuid() == 0 else os.getuid()
    assert code == 0 and fields["Uid"].split() == [str(uid)] * 4, stderr
    assert (fields["CapEff"], fields["NoNewPrivs"], fields["Seccomp"]) == ("0000000000000000", "1", "2")
    seen = set(top.split())
    # the interpreter's prefixes are bound read-only, with the folders above them (a venv under /tmp brings /tmp)
    prefixes = {Path(p).resolve().parts[1] for p in (sys.prefix, sys.base_prefix)}
    hidden = {name for name in ("tmp", "home", "var") if Path("/", name).is_dir() and name not in prefixes}
    assert "sandbox" in seen and not seen & hidden, (seen, prefixes)
    pids = [int(p) for p in procs.split() if p.isdigit()]  # bwrap's init, the program, the shell, the running ls
    assert pids[:3] == [1, 2, 3] and len(pids) == 4 and procs.split()[-1] == "sandbox"
