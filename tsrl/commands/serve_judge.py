"""`tsrl-serve-judge`: serve a local judge model for a run and stop the servers when done. What it starts and how
(engines, replicas, devices, readiness, stopping): tsrl.remote.serve, whose docstring is this command's --help;
this module reads the command line, handles Ctrl-C and SIGTERM, and sets the exit status."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tsrl.errors import UserError
from tsrl.remote import serve as serving
from tsrl.remote.serve import ENGINES, ServerFailed, say, serve, stop


def interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the servers as Ctrl-C does


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """The options, and the command after `--` (empty without one)."""
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(
        prog="tsrl-serve-judge", description=serving.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", required=True, help="local model folder or Hugging Face id")
    parser.add_argument("--name", help="served model name (default: the model's last path part)")
    parser.add_argument("--engine", choices=sorted(ENGINES), default="vllm")
    parser.add_argument("--python", default=sys.executable, help="the interpreter of an environment with it")
    parser.add_argument("--gpus", help="GPU ids the replicas share evenly (0,1,…), or cpu")
    parser.add_argument("--replicas", type=int, default=1, help="data-parallel copies, one port each")
    parser.add_argument("--tensor-parallel", type=int, help="GPUs a replica shards the model over")
    parser.add_argument("--port", type=int, default=8000, help="the first replica's; the next take port+1, …")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--no-prefix-caching", action="store_true")
    parser.add_argument("--wait-s", type=float, default=900.0, help="longest wait for the servers")
    parser.add_argument("--log-dir", type=Path, help="default: outputs/judge_servers/<time>/")
    parser.add_argument("--env-file", type=Path, help="also write the overrides here, one per line")
    parser.add_argument(
        "--engine-arg",
        action="append",
        default=[],
        help="one more engine flag, written with =: --engine-arg=--enforce-eager; repeatable",
    )
    return parser.parse_args(argv[:cut]), argv[cut + 1 :]


def main(argv: Sequence[str] | None = None) -> int:
    """`tsrl-serve-judge`. Exit status: the command's; 0 when Ctrl-C or SIGTERM ends serving (130 when it
    interrupts the command); 2 on bad input; 1 when a server fails."""
    args, command = parse(sys.argv[1:] if argv is None else argv)
    handlers = {
        signal.SIGINT: signal.getsignal(signal.SIGINT),
        signal.SIGTERM: signal.signal(signal.SIGTERM, interrupt),
    }
    processes: list[subprocess.Popen] = []
    try:
        return serve(args, command, processes)
    except UserError as err:
        say(f"error: {err}")
        return 2
    except ServerFailed as err:
        say(f"error: {err}")
        return 1
    except KeyboardInterrupt:
        say("interrupted")
        return 130 if command else 0
    finally:
        for sig in handlers:  # stopping the servers is not itself interrupted
            signal.signal(sig, signal.SIG_IGN)
        if processes:
            say("stopping the judge servers")
        stop(processes)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
