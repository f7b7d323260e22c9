"""Errors meant for people: the command line prints their message alone, without a traceback."""


class UserError(ValueError):
    """Bad configuration or input; the message names the thing and the fix."""


class ConfigError(UserError):
    """A setting is invalid or inconsistent with another."""


class DataError(UserError):
    """A data file is missing or malformed; the message names the file, the line and the fix."""
