"""The code sandbox (tsrl/tasks/sandbox.py): a correct program passes, a wrong one fails, and each limit holds —
a busy loop dies at the CPU limit, a sleeping program at the wall-clock limit, a memory hog gets MemoryError,
network, forks, subprocesses and ctypes are refused, writes outside the temporary working directory and reads
of private files are refused, runaway output is capped, and the parent's secrets are not in the child's
environment. What is tested is the Python-level guard the module documents, not a security boundary."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from tsrl.tasks.sandbox import Limits, run_program, run_test, same_output

FAST = Limits(wall_s=2.0, cpu_s=1, memory_mb=256, file_mb=1)


def test_a_correct_program_passes_and_a_wrong_one_fails():
    program = "a, b = map(int, input().split())\nprint(a + b)\n"
    assert run_test(program, "2 3\n", "5\n", FAST).status == "passed"
    assert run_test("print(6)", "2 3\n", "5\n", FAST).status == "wrong_answer"
    assert run_test("raise ValueError('no')", "", "5\n", FAST).status == "runtime_error"
    assert run_test("import sys\nsys.exit(3)", "", "", FAST).status == "runtime_error"


def test_a_busy_loop_dies_at_the_cpu_limit_and_a_sleeper_at_the_wall_clock():
    start = time.monotonic()
    busy = run_test("while True:\n    pass\n", "", "", FAST)
    assert busy.status == "timeout" and time.monotonic() - start < FAST.wall_s + 3.0
    sleeper = run_test("import time\ntime.sleep(60)\n", "", "", FAST)  # no CPU used: only the wall clock stops it
    assert sleeper.status == "timeout" and sleeper.seconds < FAST.wall_s + 3.0


def test_a_memory_hog_is_refused():
    result = run_test("block = bytearray(2 * 1024 ** 3)\nprint('allocated')\n", "", "allocated\n", FAST)
    assert result.status == "memory_limit" and "allocated" not in result.stdout


def test_network_is_refused_even_to_a_listening_local_server():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    raw = (
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
        f"s.connect(('127.0.0.1', {port}))\nprint('connected')\n"
    )
    by_name = f"import urllib.request\nprint(urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=1).read())\n"
    results = [run_test(raw, "", "connected\n", FAST), run_test(by_name, "", "", FAST)]
    thread.join()
    server.close()
    assert [r.status for r in results] == ["runtime_error", "runtime_error"]
    assert "sandbox: socket" in results[0].stderr_tail and not accepted


def test_a_fork_bomb_and_subprocesses_are_contained():
    bomb = run_test("import os\nwhile True:\n    os.fork()\n", "", "", FAST)
    assert bomb.status == "runtime_error" and "os.fork is not allowed" in bomb.stderr_tail
    shell = run_test("import subprocess\nprint(subprocess.run(['echo', 'hi']))\n", "", "", FAST)
    assert shell.status == "runtime_error" and "subprocess.Popen is not allowed" in shell.stderr_tail
    system = run_test("import os\nos.system('echo hi')\n", "", "", FAST)
    assert system.status == "runtime_error" and "hi" not in system.stdout
    native = run_test("import ctypes\nprint('loaded')\n", "", "loaded\n", FAST)  # ctypes would step around the hook
    assert native.status == "runtime_error"


def test_writes_stay_in_the_temporary_working_directory(tmp_path):
    """The program's cwd is a fresh directory it may write in; an absolute path or `..` outside it is refused and
    the file never appears; the directory is gone after the run."""
    inside = run_test(
        "import os\nopen('scratch.txt', 'w').write('ok')\nprint(open('scratch.txt').read(), os.getcwd())\n",
        "",
        "",
        FAST,
    )
    workdir = inside.stdout.split()[1]
    assert inside.stdout.split()[0] == "ok" and workdir != os.getcwd() and not Path(workdir).exists()
    target = tmp_path / "escaped.txt"
    outside = run_test(f"open({str(target)!r}, 'w').write('x')\n", "", "", FAST)
    parent = run_test("open('../escaped.txt', 'w').write('x')\n", "", "", FAST)
    (tmp_path / "keep.txt").write_text("kept")
    removal = run_test(f"import os\nos.remove({str(tmp_path / 'keep.txt')!r})\n", "", "", FAST)
    assert [outside.status, parent.status, removal.status] == ["runtime_error"] * 3
    assert not target.exists() and (tmp_path / "keep.txt").read_text() == "kept"


def test_private_files_and_the_shipped_tests_cannot_be_read(tmp_path):
    secret = tmp_path / "key.txt"
    secret.write_text("sk-secret")
    home = run_test(f"print(open({str(secret)!r}).read())\n", "", "", FAST)
    data = Path(__file__).resolve().parents[3] / "tsrl" / "tasks" / "data" / "code" / "eval.jsonl"
    shipped = run_test(f"print(open({str(data)!r}).read())\n", "", "", FAST)  # tests and reference solutions
    assert home.status == shipped.status == "runtime_error" and "sk-secret" not in home.stdout
    assert "reading" in shipped.stderr_tail and "not allowed" in shipped.stderr_tail


def test_the_child_sees_no_secret_from_the_parent_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    stdout, code, _, _, _ = run_program("import os\nprint(sorted(os.environ.items()))\n", "", FAST)
    assert code == 0 and "sk-parent-secret" not in stdout and "proxy.example" not in stdout


def test_runaway_output_is_capped_by_the_file_size_limit():
    result = run_test("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", "", "", FAST)
    assert result.status == "output_limit" and len(result.stdout) <= FAST.file_mb << 20


def test_functional_tests_call_the_solution_method_with_json_arguments():
    program = (
        "class Solution:\n    def twoSum(self, nums, target):\n"
        "        return [0, 1] if nums[0] + nums[1] == target else []\n"
    )
    assert run_test(program, "[2, 7, 11]\n9", "[0, 1]", FAST, func_name="twoSum").status == "passed"
    assert run_test(program, "[2, 7, 11]\n10", "[0, 1]", FAST, func_name="twoSum").status == "wrong_answer"


def test_output_comparison_ignores_surrounding_whitespace_and_tiny_float_error():
    assert same_output("5  \n\n", "5\n") and same_output("1 2\n3\n", "1 2\n3")
    assert same_output("0.3333333\n", "0.33333333\n") and not same_output("0.34\n", "0.33\n")
    assert not same_output("1 2\n", "1\n2\n") and not same_output("", "5\n")


@pytest.mark.parametrize("bad", [dict(wall_s=0), dict(cpu_s=0), dict(memory_mb=16), dict(file_mb=0)])
def test_limits_that_cannot_work_are_refused(bad):
    from tsrl.errors import ConfigError

    with pytest.raises(ConfigError):
        Limits(**bad)
