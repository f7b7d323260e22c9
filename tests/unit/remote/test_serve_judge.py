"""`tsrl-serve-judge`: the replicas' command lines and environments, the GPU split, the overrides, and the
whole lifecycle against a fake engine — a package named `vllm` on PYTHONPATH whose
`vllm.entrypoints.openai.api_server` answers GET /v1/models with the served name from its argv."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import textwrap

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from tsrl.commands import serve_judge
from tsrl.errors import UserError
from tsrl.remote import serve
from tsrl.remote.serve import (
    ServerSpec,
    base_urls,
    judge_overrides,
    overrides_line,
    replica_env,
    sglang_argv,
    split_gpus,
    vllm_argv,
)

FAKE_SERVER = """
import argparse, http.server, json, os, pathlib, sys, time
parser = argparse.ArgumentParser()
for flag in ("--host", "--port", "--served-model-name"):
    parser.add_argument(flag)
args, _ = parser.parse_known_args()
mode = os.environ.get("FAKE_ENGINE", "serve")
record = {"pid": os.getpid(), "argv": sys.argv[1:], "kv_cache": os.environ.get("VLLM_CPU_KVCACHE_SPACE")}
pathlib.Path(os.environ["FAKE_ENGINE_RECORDS"], args.port).write_text(json.dumps(record))
if mode == "fail":
    print("loading weights", flush=True)
    print("RuntimeError: not enough memory for the KV cache", flush=True)
    sys.exit(3)
if mode == "hang":
    time.sleep(600)

class Models(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": args.served_model_name}]}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        pass

http.server.HTTPServer((args.host, int(args.port)), Models).serve_forever()
"""

# The command run after `--`: records its argv and what GET /v1/models said while it ran, exits with status 3.
RECORDING_COMMAND = textwrap.dedent("""
    import json, sys, urllib.request
    urls = next(item for item in sys.argv if item.startswith("judge.base_urls="))
    url = urls.split("[")[1].split(",")[0]
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    listed = json.load(opener.open(url + "/models"))
    json.dump({"argv": sys.argv[2:], "listed": listed}, open(sys.argv[1], "w"))
    sys.exit(3)
""")


# ---- pure parts -------------------------------------------------------------------------------------------


def test_vllm_argv_serves_the_name_with_prefix_caching_and_passes_engine_args_last():
    spec = ServerSpec(
        "models/judge", "judge", max_model_len=2048, dtype="float32", tensor_parallel=2, engine_args=["--enforce-eager"]
    )
    argv = vllm_argv(spec, 8001)
    assert argv[:2] == ["-m", "vllm.entrypoints.openai.api_server"]
    flags = dict(zip(argv[2::2], argv[3::2]))
    assert flags["--model"] == "models/judge" and flags["--served-model-name"] == "judge"
    assert (flags["--port"], flags["--host"], flags["--max-model-len"]) == ("8001", "127.0.0.1", "2048")
    assert (flags["--dtype"], flags["--tensor-parallel-size"]) == ("float32", "2")
    assert argv[-2:] == ["--enable-prefix-caching", "--enforce-eager"]
    spec.prefix_caching = False
    assert "--no-enable-prefix-caching" in vllm_argv(spec, 8001)  # vLLM V1 caches by default: say no


def test_sglang_argv_uses_its_own_flag_names():
    spec = ServerSpec("Qwen/Qwen3-8B", "Qwen3-8B", max_model_len=8192, tensor_parallel=4)
    argv = sglang_argv(spec, 30000)
    assert argv[:2] == ["-m", "sglang.launch_server"]
    flags = dict(zip(argv[2::2], argv[3::2]))
    assert (flags["--model-path"], flags["--served-model-name"]) == ("Qwen/Qwen3-8B", "Qwen3-8B")
    assert (flags["--context-length"], flags["--tp-size"], flags["--port"]) == ("8192", "4", "30000")
    assert "--disable-radix-cache" not in argv and "--device" not in argv
    spec.prefix_caching, spec.cpu = False, True
    assert sglang_argv(spec, 30000)[-3:] == ["--device", "cpu", "--disable-radix-cache"]


def test_gpus_are_split_evenly_in_order():
    assert split_gpus("0,1,2,3", 2) == ["0,1", "2,3"]
    assert split_gpus("4, 5,6", 3) == ["4", "5", "6"]
    assert split_gpus("cpu", 2) == ["cpu", "cpu"]
    assert split_gpus(None, 1) == [None]


@pytest.mark.parametrize(
    "gpus,replicas,says",
    [
        ("0,1,2", 2, "cannot share evenly"),
        ("0", 2, "cannot share"),
        ("0,0", 1, "distinct"),
        ("0,,1", 1, "distinct"),
        (None, 2, "needs --gpus"),
        ("0,1", 0, "at least 1"),
    ],
)
def test_bad_gpu_splits_are_one_sentence(gpus, replicas, says):
    with pytest.raises(UserError, match=says):
        split_gpus(gpus, replicas)


def test_replica_env_pins_gpus_or_sizes_the_cpu_kv_cache():
    assert replica_env("2,3", {"PATH": "/bin"}) == {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "2,3"}
    assert replica_env("cpu", {}, cpu_cores=[2, 3]) == {
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "OMP_NUM_THREADS": "2",
        "VLLM_CPU_OMP_THREADS_BIND": "2-3",
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
    }  # its share of the cores, none kept back for the front end
    assert replica_env("cpu", {"VLLM_CPU_KVCACHE_SPACE": "8", "OMP_NUM_THREADS": "4"}, cpu_cores=[0]) == {
        "VLLM_CPU_KVCACHE_SPACE": "8",
        "OMP_NUM_THREADS": "4",
        "VLLM_CPU_OMP_THREADS_BIND": "0-0",
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
    }  # the user's settings win
    assert replica_env(None, {"CUDA_VISIBLE_DEVICES": "1"}) == {"CUDA_VISIBLE_DEVICES": "1"}


def test_overrides_line_is_what_a_shell_and_hydra_read_back():
    urls = base_urls("0.0.0.0", [8000, 8001])  # a wildcard listener is reached at 127.0.0.1
    assert urls == ["http://127.0.0.1:8000/v1", "http://127.0.0.1:8001/v1"]
    overrides = judge_overrides("Qwen3-8B", urls)
    line = overrides_line(overrides)
    assert line == (
        "judge=openai judge.model=Qwen3-8B 'judge.base_urls="
        "[http://127.0.0.1:8000/v1,http://127.0.0.1:8001/v1]' judge.api_key_env=''"
    )
    assert shlex.split(line) == overrides
    parsed = {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(overrides)}
    assert parsed == {"judge": "openai", "judge.model": "Qwen3-8B", "judge.base_urls": urls, "judge.api_key_env": ""}


# ---- the command, with a fake engine ----------------------------------------------------------------------


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    """A `vllm` package on PYTHONPATH whose OpenAI server module is FAKE_SERVER; returns the folder where
    each fake server records its pid, argv and KV cache setting (one file per port)."""
    package = tmp_path / "engine" / "vllm" / "entrypoints" / "openai"
    package.mkdir(parents=True)
    for folder in (package, package.parent, package.parent.parent):
        (folder / "__init__.py").write_text("")
    (package / "api_server.py").write_text(FAKE_SERVER)
    records = tmp_path / "records"
    records.mkdir()
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "engine"))
    monkeypatch.setenv("FAKE_ENGINE_RECORDS", str(records))
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    return records


def free_ports(count: int) -> int:
    """A first port such that it and the next count - 1 are free now."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        try:
            for port in range(first, first + count):
                serve.check_port("127.0.0.1", port)
        except UserError:
            continue
        return first
    raise RuntimeError("no free ports")


def is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_command_gets_the_overrides_its_status_is_returned_and_servers_are_stopped(fake_vllm, tmp_path, capsys):
    port, out = free_ports(2), tmp_path / "command.json"
    status = serve_judge.main(
        [
            "--model",
            "models/tiny-judge",
            "--python",
            sys.executable,
            "--gpus",
            "cpu",
            "--replicas",
            "2",
            "--port",
            str(port),
            "--log-dir",
            str(tmp_path / "logs"),
            "--env-file",
            str(tmp_path / "judge.env"),
            "--",
            sys.executable,
            "-c",
            RECORDING_COMMAND,
            str(out),
        ]
    )
    assert status == 3
    urls = [f"http://127.0.0.1:{port}/v1", f"http://127.0.0.1:{port + 1}/v1"]
    overrides = judge_overrides("tiny-judge", urls)
    ran = json.loads(out.read_text())
    assert ran["argv"] == overrides  # appended as separate, unquoted argv items
    assert ran["listed"]["data"] == [{"id": "tiny-judge"}]  # the server answered while the command ran
    assert (tmp_path / "judge.env").read_text().splitlines() == overrides
    assert overrides_line(overrides) in capsys.readouterr().out
    for replica in (port, port + 1):
        record = json.loads((fake_vllm / str(replica)).read_text())
        assert "--enable-prefix-caching" in record["argv"] and record["kv_cache"] == "1"
        assert is_gone(record["pid"])
        serve.check_port("127.0.0.1", replica)  # free again
    logs = sorted(log.name for log in (tmp_path / "logs").iterdir())
    assert logs == ["judge-server-0.log", "judge-server-1.log"]


def test_an_engine_that_exits_early_is_reported_with_its_log_tail(fake_vllm, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_ENGINE", "fail")
    status = serve_judge.main(
        [
            "--model",
            "m",
            "--python",
            sys.executable,
            "--port",
            str(free_ports(1)),
            "--log-dir",
            str(tmp_path / "logs"),
            "--",
            "true",
        ]
    )
    err = capsys.readouterr().err
    assert status == 1
    assert "exited with status 3 before it was ready" in err
    assert "not enough memory for the KV cache" in err  # the log's end
    assert str(tmp_path / "logs" / "judge-server-0.log") in err


def test_a_server_never_ready_fails_after_wait_s_saying_what_it_waited_for(fake_vllm, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_ENGINE", "hang")
    monkeypatch.setattr(serve, "PROGRESS_EVERY_S", 0.2)
    port = free_ports(1)
    status = serve_judge.main(
        [
            "--model",
            "m",
            "--python",
            sys.executable,
            "--port",
            str(port),
            "--wait-s",
            "1.5",
            "--log-dir",
            str(tmp_path / "logs"),
        ]
    )
    err = capsys.readouterr().err
    assert status == 1 and "did not list m within --wait-s 1.5 s" in err
    assert f"for http://127.0.0.1:{port}/v1 to list m" in err  # the progress line
    assert is_gone(json.loads((fake_vllm / str(port)).read_text())["pid"])


def test_without_a_command_it_serves_until_sigterm_then_stops_the_servers(fake_vllm, tmp_path):
    port = free_ports(1)
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from tsrl.commands.serve_judge import main; sys.exit(main())",
            "--model",
            "m",
            "--python",
            sys.executable,
            "--port",
            str(port),
            "--log-dir",
            str(tmp_path / "logs"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout.readline().startswith("judge=openai judge.model=m ")  # ready
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
    assert "stopping the judge servers" in process.stderr.read()
    assert is_gone(json.loads((fake_vllm / str(port)).read_text())["pid"])


def test_bad_input_is_one_sentence_and_status_2(fake_vllm, tmp_path, monkeypatch, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert serve_judge.main(["--model", "m", "--python", sys.executable, "--port", str(port)]) == 2
        assert f"port {port} on 127.0.0.1 is in use" in capsys.readouterr().err
    assert serve_judge.main(["--model", "m", "--python", str(tmp_path / "nope"), "--port", str(port)]) == 2
    assert "is not an executable interpreter" in capsys.readouterr().err
    sglang = ["--model", "m", "--engine", "sglang", "--python", sys.executable, "--port", str(port)]
    assert serve_judge.main(sglang) == 2
    assert f"{sys.executable} cannot import sglang" in capsys.readouterr().err
    monkeypatch.delenv("PYTHONPATH")  # no fake vllm: the test environment has none
    assert serve_judge.main(["--model", "m", "--python", sys.executable, "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"{sys.executable} cannot import vllm" in err and "`make test-vllm` builds .venv-vllm" in err
    assert serve_judge.main(["--model", "m", "--gpus", "0,1,2", "--replicas", "2"]) == 2
    assert "cannot share evenly" in capsys.readouterr().err
    assert serve_judge.main(["--model", "m", "--", "no-such-command-here"]) == 2
    assert "no-such-command-here after -- is not found" in capsys.readouterr().err
