"""What the Hydra commands (tsrl-train, tsrl-judge-check, tsrl-eval, tsrl-ladder) share: registering the components
and a command's root schema, checking `recipes=<name>` before Hydra composes, converting the composed config once
to typed dataclasses, and turning a UserError into one sentence and exit status 2.

A key that names no setting — misspelled (`trainer.max_stpes=3`), added with `+` to a structured config, or given
by its old place (`task.sandbox.wall_s`) — is one sentence naming the nearest real key, and exit status 2, in a
single run and in every cell of a `-m` sweep alike: Hydra's own report (a paragraph, exit status 1, advice to
append the key with `+`) is not printed. Ctrl-C (SIGINT) ends a command with one line — what was kept and the
command that resumes — and exit status 130 (INTERRUPTED).

configs/ and recipes/ sit at the repository root and are installed as the packages tsrl.configs and
tsrl.configs.recipes (pyproject.toml maps the folders), so every command finds them from any directory, in an
editable install and from a wheel alike. A folder of your own joins the search path with `--config-dir DIR`
(its recipes/ folder adds recipes).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shlex
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, NoReturn

from hydra._internal.utils import get_args_parser  # the parser @hydra.main reads sys.argv with
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, Override
from hydra.errors import HydraException, OverrideParseException
from omegaconf import DictConfig, OmegaConf

from tsrl.config import CONFIG_PACKAGE, moved_to, not_a_setting, override_error, register_configs
from tsrl.errors import INTERRUPTED, QUIET_STOP_ENV, ConfigError, UserError

CONFIG_PATH = f"pkg://{CONFIG_PACKAGE}"  # each command's @hydra.main config_path
CONSOLE_LOGGERS = ("tsrl", "HYDRA", "__main__")  # loggers whose lines below ERROR the console shows


def parsed_overrides(overrides: Sequence[str]) -> list[Override]:
    """The command line's overrides as Hydra parses them; none when one is not in its grammar (Hydra says so)."""
    try:
        return OverridesParser.create().parse_overrides(list(overrides))
    except OverrideParseException:
        return []


def requested_recipes(args: Any) -> list[str]:
    """The recipe names that `recipes=<name>` (or a sweep `recipes=a,b`) asks for on the command line."""
    names: list[str] = []
    for override in parsed_overrides(args.overrides):
        if override.key_or_group != "recipes" or override.is_delete():
            continue
        value = override.value()
        values = value.list if isinstance(value, ChoiceSweep) else [value]  # glob(...) and ranges: Hydra's
        names += [str(v) for v in values if v is not None]  # recipes=null: no recipe
    return names


def check_recipes(argv: list[str]) -> None:
    """Exit with status 2 and one sentence when `recipes=<name>` names no file in the installed recipes/ or
    in <--config-dir>/recipes/ (Hydra alone fails later, with status 1 and its search path)."""
    args, _ = get_args_parser().parse_known_args(argv)
    folders = [Path(os.environ["TSRL_RECIPES_ROOT"]) / "recipes"]
    if args.config_dir:
        if not Path(args.config_dir).is_dir():
            return  # Hydra says that the folder is not there
        folders.insert(0, Path(args.config_dir).resolve() / "recipes")
    for name in requested_recipes(args):
        if any((folder / f"{name}.yaml").is_file() for folder in folders):
            continue
        listed = [(", ".join(sorted(p.stem for p in folder.glob("*.yaml"))), folder) for folder in folders]
        known = "; ".join(f"{stems} (from {folder})" for stems, folder in listed if stems) or "none"
        print(f"tsrl: error: recipes={name} is not a recipe; the recipes are: {known}.", file=sys.stderr)
        sys.exit(2)


def to_run_config(cfg: DictConfig) -> Any:
    """The composed Hydra config as typed dataclasses; run_dir defaults to Hydra's output directory."""
    if not cfg.run_dir:
        cfg.run_dir = HydraConfig.get().runtime.output_dir if HydraConfig.initialized() else "runs/default"
    return OmegaConf.to_object(cfg)


def folder_settings(node: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(dotted key, value) of every setting of a typed config whose name ends in _dir: folders a run writes into."""
    for field in fields(node) if is_dataclass(node) else ():
        value, key = getattr(node, field.name), f"{prefix}{field.name}"
        if is_dataclass(value):
            yield from folder_settings(value, f"{key}.")
        elif field.name.endswith("_dir") and isinstance(value, str) and value:
            yield key, value


def check_folders(cfg: Any) -> None:
    """A ConfigError when a folder setting (run_dir, model.cache_dir, reward.ladder_dir, ...) names a file or a path
    through one: caught here before a policy is built, not by the first mkdir minutes later."""
    for key, value in folder_settings(cfg):
        path = Path(value).expanduser()
        blocking = next((p for p in (path, *path.parents) if p.exists()), None)
        if blocking is not None and not blocking.is_dir():
            raise ConfigError(f"{key}={value} must be a folder, but {blocking} is a file; point {key} at a folder.")


def unknown_settings(node: DictConfig, prefix: str = "") -> Iterator[str]:
    """The sentence for each key of the composed config that is no field of its structured config: one that
    `+key=value` added (Hydra's advice for a misspelled key), which to_object would keep as a stray attribute."""
    kind = OmegaConf.get_type(node)
    names = [f.name for f in fields(kind)] if is_dataclass(kind) else None
    for key in node.keys():
        child = node._get_node(key)
        if names is not None and key not in names:
            yield not_a_setting(f"{prefix}{key}", names, kind)
        elif isinstance(child, DictConfig) and not child._is_missing() and not child._is_none():
            yield from unknown_settings(child, f"{prefix}{key}.")


def run_or_exit(job: Callable[[Any], dict], cfg: DictConfig, stopped: Callable[[Any], str] | None = None) -> dict:
    """job(typed config); a UserError ends the process with its one sentence and exit status 2, and so does a path
    that is a file where a folder belongs or the reverse (the path is named; nothing is caught more broadly).
    Ctrl-C ends it with one line (`stop`): stopped(typed config) says what was kept and how to resume; without
    it, that the command writes its results at its end."""
    run_config = None
    quiet_console()
    try:
        problem = next(unknown_settings(cfg), None)
        if problem is not None:
            raise ConfigError(problem)
        run_config = to_run_config(cfg)
        check_folders(run_config)
        return job(run_config)
    except UserError as err:
        fail(str(err))
    except (FileExistsError, NotADirectoryError, IsADirectoryError) as err:
        fail(f"{err.filename}: {err.strerror}; fix the setting that names it.")
    except KeyboardInterrupt:
        if stopped is not None and run_config is not None:
            stop(stopped(run_config))
        stop(f"nothing was kept (the results are written at the end); to run it again: {command_line()}")


class ConsoleFilter(logging.Filter):
    """On the console handler Hydra gives a command: tsrl's own lines, Hydra's, and every library's errors. Other
    libraries' lines below ERROR ("Removed shared tensor {'lm_head.weight'} while saving", "Model weights
    successfully saved to …") reach the run's log file (Hydra's <command>.log) alone."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or record.name.partition(".")[0] in CONSOLE_LOGGERS


class FileOnly(logging.Filter):
    """On a library's logger that prints to the console itself and does not propagate (DeepSpeed's: "Setting
    accelerator to CPU" when it is imported): its records below ERROR go to the run's log file alone."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.FileHandler) and record.levelno >= handler.level:
                handler.handle(record)
        return False


def quiet_console() -> None:
    """Keep libraries' notes off the console and in the run's log file (ConsoleFilter, FileOnly); once per job, as
    Hydra sets up each job's logging afresh. DeepSpeed's logger keeps its filters when DeepSpeed, imported later,
    sets up its handler."""
    for handler in logging.getLogger().handlers:
        if type(handler) is logging.StreamHandler and not any(isinstance(f, ConsoleFilter) for f in handler.filters):
            handler.addFilter(ConsoleFilter())
    deepspeed = logging.getLogger("DeepSpeed")
    if not any(isinstance(f, FileOnly) for f in deepspeed.filters):
        deepspeed.addFilter(FileOnly())


def fail(sentence: str) -> NoReturn:
    """Exit with status 2 after one sentence on stderr."""
    print(f"tsrl: error: {sentence}", file=sys.stderr)
    sys.exit(2)


def program() -> str:
    """How this command was started: its console script's name (tsrl-train), or `python -m <module>`."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return f"python -m {spec.name}" if spec is not None and sys.argv[0].endswith(".py") else Path(sys.argv[0]).name


def command_line(pinned: Sequence[str] = ()) -> str:
    """This process's command line as a shell command, with `pinned` overrides (key=value) in place of any the
    command line gave for the same keys."""
    keys = {p.split("=", 1)[0] for p in pinned}
    kept = [a for a in sys.argv[1:] if a.split("=", 1)[0].lstrip("+~") not in keys]
    return " ".join([program(), shlex.join([*kept, *pinned])])


def stop(what: str) -> NoReturn:
    """End a command that Ctrl-C stopped: one line on stderr (`what`: what was kept and the command that resumes,
    printed by the main process alone) and exit status INTERRUPTED; no traceback. A command that another tsrl
    command started (QUIET_STOP_ENV) leaves the line to that one."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C does not cut the line short
    if os.environ.get(QUIET_STOP_ENV) != "1" and os.environ.get("RANK", "0") == "0":
        print(f"{program()}: stopped by Ctrl-C; {what}", file=sys.stderr, flush=True)
    sys.exit(INTERRUPTED)


def setup_or_exit() -> None:
    """Register every component (plugins included); a plugin that cannot load is one sentence, exit 2."""
    try:
        register_configs()
    except UserError as err:
        fail(str(err))


def check_moved(argv: list[str]) -> None:
    """Exit with status 2 and one sentence naming the new key when an override gives a setting by its old place."""
    args, _ = get_args_parser().parse_known_args(argv)
    for override in parsed_overrides(args.overrides):
        new = moved_to(override.key_or_group)
        if new is not None:
            fail(f"{override.key_or_group} has moved to {new}; write {new}={override.input_line.split('=', 1)[1]}.")


def run_app(app: Callable[[], None]) -> None:
    """Run a command's Hydra app. A config that does not compose — in a single run or in any cell of a `-m` sweep
    — is one sentence (override_error) and exit status 2: Hydra raises it here instead of printing its report
    (HYDRA_FULL_ERROR=1 while the app runs; an error in the command itself keeps its whole traceback). Ctrl-C
    outside a run (while Hydra composes one) is one line too."""
    check_moved(sys.argv[1:])
    before = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        if get_args_parser().parse_known_args(sys.argv[1:])[0].help:
            help_without_schemas(app)
        else:
            app()
    except HydraException as err:
        fail(override_error(err))
    except KeyboardInterrupt:
        stop(f"no run was in progress; to run it again: {command_line()}")
    finally:
        if before is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = before


def help_without_schemas(app: Callable[[], None]) -> None:
    """--help: Hydra's, its groups' options without the `<name>_schema` entries (the typed schemas the YAML files
    extend, which are not choices)."""
    text = io.StringIO()
    try:
        with contextlib.redirect_stdout(text):
            app()  # prints the help, then exits
    finally:
        groups, cut, rest = text.getvalue().partition("== Config ==")
        print("\n".join(map(without_schemas, groups.splitlines())) + "\n" + cut + rest, end="")


def without_schemas(line: str) -> str:
    """A line `group: a, a_schema, b` of --help's groups without its schemas; any other line as it is."""
    group, sep, options = line.partition(": ")
    return f"{group}: {', '.join(o for o in options.split(', ') if not o.endswith('_schema'))}" if sep else line


def start(app: Callable[[], None], schema_name: str, schema: type) -> None:
    """Register the components and a command's typed root config (its YAML's first default), then run its Hydra
    app (run_app)."""
    setup_or_exit()
    ConfigStore.instance().store(name=schema_name, node=schema)
    run_app(app)
