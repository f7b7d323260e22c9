"""Errors meant for people: the command line prints their message alone, without a traceback."""

INTERRUPTED = 130  # a command's exit status after Ctrl-C (SIGINT): 128 + 2, as a shell reports an interrupted program
QUIET_STOP_ENV = "TSRL_QUIET_STOP"  # "1" for a command another one runs (tsrl-reproduce's multiruns): the Ctrl-C line
# is the parent's, which knows what the whole command kept


class UserError(ValueError):
    """Bad configuration or input; the message names the thing and the fix."""


class ConfigError(UserError):
    """A setting is invalid or inconsistent with another."""


class DataError(UserError):
    """A data file is missing or malformed; the message names the file, the line and the fix."""


def read_json(path, what: str, fix: str):
    """The JSON in `path`, or a DataError naming `what` the file is, the file, what is wrong and `fix`."""
    import json
    from pathlib import Path

    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise DataError(f"The {what} {path} is unusable ({type(err).__name__}: {err}); {fix}") from None


def not_a_file(path) -> str:
    """Why `path` cannot be read as a file, for a DataError's sentence: it is a folder, or it does not exist."""
    from pathlib import Path

    return "is a folder, not a file" if Path(path).is_dir() else "does not exist"
