"""What the Hydra commands (tsrl-train, tsrl-judge-check, tsrl-eval, tsrl-ladder) share: registering the components
and a command's root schema, checking `recipes=<name>` before Hydra composes, converting the composed config once
to typed dataclasses, and turning a UserError into one sentence and exit status 2.

configs/ and recipes/ sit at the repository root and are installed as the packages tsrl.configs and
tsrl.configs.recipes (pyproject.toml maps the folders), so every command finds them from any directory, in an
editable install and from a wheel alike. A folder of your own joins the search path with `--config-dir DIR`
(its recipes/ folder adds recipes).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from tsrl.config import CONFIG_PACKAGE, register_configs
from tsrl.errors import ConfigError, UserError

CONFIG_PATH = f"pkg://{CONFIG_PACKAGE}"  # each command's @hydra.main config_path


def requested_recipes(args: Any) -> list[str]:
    """The recipe names that `recipes=<name>` (or a sweep `recipes=a,b`) asks for on the command line."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep
    from hydra.errors import OverrideParseException

    try:
        overrides = OverridesParser.create().parse_overrides(args.overrides)
    except OverrideParseException:
        return []  # Hydra reports the syntax error itself
    names: list[str] = []
    for override in overrides:
        if override.key_or_group != "recipes" or override.is_delete():
            continue
        value = override.value()
        values = value.list if isinstance(value, ChoiceSweep) else [value]  # glob(...) and ranges: Hydra's
        names += [str(v) for v in values if v is not None]  # recipes=null: no recipe
    return names


def check_recipes(argv: list[str]) -> None:
    """Exit with status 2 and one sentence when `recipes=<name>` names no file in the installed recipes/ or
    in <--config-dir>/recipes/ (Hydra alone fails later, with status 1 and its search path)."""
    from hydra._internal.utils import get_args_parser  # the parser @hydra.main reads sys.argv with

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
        from hydra.core.hydra_config import HydraConfig

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


def run_or_exit(job: Callable[[Any], dict], cfg: DictConfig) -> dict:
    """job(typed config); a UserError ends the process with its one sentence and exit status 2, and so does a path
    that is a file where a folder belongs or the reverse (the path is named; nothing is caught more broadly)."""
    try:
        run_config = to_run_config(cfg)
        check_folders(run_config)
        return job(run_config)
    except UserError as err:
        print(f"tsrl: error: {err}", file=sys.stderr)
        sys.exit(2)
    except (FileExistsError, NotADirectoryError, IsADirectoryError) as err:
        print(f"tsrl: error: {err.filename}: {err.strerror}; fix the setting that names it.", file=sys.stderr)
        sys.exit(2)


def setup_or_exit() -> None:
    """Register every component (plugins included); a plugin that cannot load is one sentence, exit 2."""
    try:
        register_configs()
    except UserError as err:
        print(f"tsrl: error: {err}", file=sys.stderr)
        sys.exit(2)


def start(app: Callable[[], None], schema_name: str, schema: type) -> None:
    """Register the components and a command's typed root config (its YAML's first default), then run its Hydra
    app."""
    from hydra.core.config_store import ConfigStore

    setup_or_exit()
    ConfigStore.instance().store(name=schema_name, node=schema)
    app()
