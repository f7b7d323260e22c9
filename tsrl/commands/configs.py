"""`tsrl-configs`: where the accelerate and DeepSpeed launcher files are, as paths that work from any directory.

The files live in configs/accelerate/ and configs/deepspeed/ and ship inside the package (tsrl/configs/ of a wheel).
An accelerate file that runs DeepSpeed names its JSON by `deepspeed_config_file: configs/deepspeed/….json`, and
accelerate hands that string on unchanged: every process opens it relative to its own working directory
(transformers' HfDeepSpeedConfig, via ACCELERATE_DEEPSPEED_CONFIG_FILE), so it resolves only from the repository
root. `tsrl-configs NAME` prints a path that works anywhere: the installed file itself when it names no other file,
else a copy whose `deepspeed_config_file` is the absolute path of the installed JSON, written under
$XDG_CACHE_HOME/tsrl/configs (default ~/.cache/tsrl/configs). Without a name it lists the files.

    accelerate launch --config_file "$(tsrl-configs accelerate/gpu8_zero3.yaml)" -m tsrl.commands.train recipes=…
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from importlib import resources
from pathlib import Path

from tsrl.config import CONFIG_PACKAGE

LAUNCHER_FOLDERS = ("accelerate", "deepspeed")
"""The folders of configs/ that launchers read (the rest is Hydra's)."""

CONFIGS_PREFIX = "configs/"
"""How a launcher file names another one: relative to the repository root, configs/ first."""

DEEPSPEED_LINE = re.compile(r"^(?P<key>\s*deepspeed_config_file:[ \t]*)(?P<value>[^\s#]+)(?P<rest>.*)$", re.MULTILINE)


HEADER = "# Written by tsrl-configs from {source}, with its deepspeed_config_file made absolute.\n"
"""The first line of a resolved copy."""


def configs_root() -> Path:
    """The installed configs/ folder: the repository's configs/ in an editable install, tsrl/configs from a wheel."""
    return Path(str(resources.files(CONFIG_PACKAGE)))


def cache_root() -> Path:
    """Where resolved copies go: $XDG_CACHE_HOME/tsrl/configs, default ~/.cache/tsrl/configs."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tsrl" / "configs"


def launcher_files(root: Path) -> list[str]:
    """The launcher files under `root`, as names relative to it (accelerate/gpu8_zero3.yaml, …)."""
    return sorted(
        p.relative_to(root).as_posix()
        for folder in LAUNCHER_FOLDERS
        for p in (root / folder).glob("*")
        if p.suffix in (".yaml", ".json")
    )


def summary(path: Path) -> str:
    """The first sentence of a launcher file's opening comment (what it is for), "" without one (JSON)."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("# "):  # the comment's end, or an indented launch command under it
            break
        lines.append(line[2:].strip())
    text = " ".join(lines)
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def absolute_references(text: str, root: Path) -> str:
    """An accelerate file's text with a repository-relative `deepspeed_config_file: configs/…` replaced by the
    absolute path of that file under `root` (a quoted YAML string); absolute and other paths are left as they are."""

    def absolute(match: re.Match) -> str:
        value = match["value"].strip("'\"")
        if not value.startswith(CONFIGS_PREFIX):
            return match[0]
        return f"{match['key']}{json.dumps(str(root / value[len(CONFIGS_PREFIX) :]))}{match['rest']}"

    return DEEPSPEED_LINE.sub(absolute, text)


def usable_path(name: str, root: Path, cache: Path) -> Path:
    """A path to launcher file `name` that works from any directory: the installed file when it names no other
    file by a relative path, else a copy under `cache` with those paths made absolute (rewritten only when its
    content changes, atomically: several nodes may resolve the same file at once)."""
    source = root / name
    text = source.read_text(encoding="utf-8")
    resolved = absolute_references(text, root)
    if resolved == text:
        return source
    resolved = HEADER.format(source=source) + resolved
    copy = cache / name
    if not copy.is_file() or copy.read_text(encoding="utf-8") != resolved:
        copy.parent.mkdir(parents=True, exist_ok=True)
        partial = copy.with_name(f".{copy.name}.{os.getpid()}")
        partial.write_text(resolved, encoding="utf-8")
        os.replace(partial, copy)
    return copy


def listing(root: Path) -> list[str]:
    """The lines `tsrl-configs` prints without a name: the folder, then each file with what it is for."""
    names = launcher_files(root)
    width = max(map(len, names), default=0)
    rows = [f"  {name:<{width}}  {summary(root / name)}".rstrip() for name in names]
    return [f"launcher files in {root} (tsrl-configs NAME prints a path usable from any directory):", *rows]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="tsrl-configs",
        description="Print a path to one of tsrl's accelerate/DeepSpeed launcher files that works from any "
        "directory (without NAME: list them).",
    )
    parser.add_argument("name", nargs="?", help="a launcher file, e.g. accelerate/gpu8_zero3.yaml")
    args = parser.parse_args(argv)
    root = configs_root()
    if args.name is None:
        print("\n".join(listing(root)))
        return
    names = launcher_files(root)
    if args.name not in names:
        print(
            f"tsrl: error: {args.name} is not a launcher file; the files are: {', '.join(names)} (from {root}).",
            file=sys.stderr,
        )
        sys.exit(2)
    print(usable_path(args.name, root, cache_root()))


if __name__ == "__main__":
    main()
