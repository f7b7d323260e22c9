"""A fork server for the integration tests' command runs (the `cli` fixture in tests/integration/conftest.py).

Started once per test session, it imports what tsrl's commands import on their way to a first step (torch,
transformers, DeepSpeed, Hydra, matplotlib, tsrl) and then, for each request, forks a child that runs one command's
main() as its console script would: in the request's working directory and environment, stdin empty, stdout and
stderr into the request's files, and exiting as a process does — its threads joined, its exit handlers and weakref
finalizers run, its garbage finalised — except that its modules are not torn down.
The child skips the imports, most of a tiny run's cost (a 3-step tsrl-train run: 12 s of CPU as a new process,
2.5 s forked). The server itself runs nothing else, so its children start as clean as a new interpreter that has
imported the same modules (no OpenMP threads to lose in the fork, no test state).

One JSON object a line: the test process writes {"module", "argv", "cwd", "env", "stdout", "stderr"}; the server
answers {"pid": ...} when the child starts and {"status": ...} when it has ended (−N: killed by signal N, as
subprocess reports it). The end of its input ends the server.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import importlib.util
import json
import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn, TextIO

WARM = (  # what the commands import before their first step
    "tsrl.commands.train",
    "tsrl.commands.judge_check",
    "tsrl.commands.evaluate",
    "tsrl.commands.ladder",
    "tsrl.training.loop",
    "tsrl.training.setup",
    "tsrl.calibration.check",
    "transformers.models.llama.modeling_llama",
    "deepspeed",
    "scipy.stats",
    "hydra._internal.utils",
    "matplotlib.backends.backend_agg",
    "matplotlib.pyplot",
)


def run_child(request: dict) -> NoReturn:
    """The forked child: the request's process state, then main() as a console script calls it."""
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)  # sys.stdout/stderr follow
    sys.stdin = open(os.devnull)  # closed at exit, as a process's stdin is
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    threads = request["env"].get("OMP_NUM_THREADS", "")
    if threads.isdigit():  # read at import, in the server's environment
        import torch

        torch.set_num_threads(int(threads))
    sys.argv = request["argv"]
    sys.path[0] = os.path.dirname(sys.argv[0])  # a console script's own folder, not this file's
    status = exit_status(importlib.import_module(request["module"]).main)
    # An interpreter's exit, less tearing its modules down (a second of CPU that nothing observable depends on):
    threading._shutdown()  # the run's threads joined (executors told to stop first)
    atexit._run_exitfuncs()  # its exit handlers, weakref finalizers among them
    gc.collect()  # its garbage finalised (an unclosed session says so)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def exit_status(main: Callable[[], object]) -> int:
    """The exit status of `sys.exit(main())`, as the interpreter reports it (a traceback on stderr: 1)."""
    try:
        code = main()
    except SystemExit as exit:
        code = exit.code
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return 1
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1


def reply(replies: TextIO, **fields: int) -> None:
    replies.write(json.dumps(fields) + "\n")
    replies.flush()  # nothing buffered is left for a child to inherit


def main() -> None:
    replies = os.fdopen(os.dup(1), "w")  # the answers' own descriptor: fd 1 is stderr from here on, so that what a
    os.dup2(2, 1)  # library prints (DeepSpeed does, at import) cannot reach the test process as an answer
    sys.path[0] = os.path.dirname(sys.executable)  # the console scripts' folder: nothing here shadows a module
    import matplotlib

    matplotlib.use("Agg")  # what tsrl's plot asks for
    for module in WARM:
        if importlib.util.find_spec(module.split(".")[0]) is not None:  # DeepSpeed is an extra
            importlib.import_module(module)
    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()  # what the imports made: never collected in a child (each collection then sees only the run's)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            replies.close()
            run_child(request)
        reply(replies, pid=pid)
        _, status = os.waitpid(pid, 0)
        reply(replies, status=os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
