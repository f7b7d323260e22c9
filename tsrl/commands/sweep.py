"""`tsrl-sweep FOLDER`: sweep.md and sweep.png for a multirun's sweep folder, finished or not (tsrl.reproduce.sweep,
whose docstring says what they hold); a `tsrl-train -m` multirun writes them itself when it ends."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tsrl.errors import UserError
from tsrl.reproduce.sweep import PICTURE, TABLE, write_sweep


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tsrl-sweep",
        description=f"Write {TABLE} (the varied settings as rows and columns; per cell the held-out headline with "
        f"its seeds and 95 % t-interval, judge calls and wall-clock per run) and {PICTURE} into a sweep folder, "
        "and print the table. Runs without a done.json (failed, stopped or still running) are named, not counted.",
    )
    parser.add_argument(
        "folder",
        type=Path,
        help="a sweep folder: a tsrl-train multirun's hydra.sweep.dir (multirun/<date>/<time> unless set), or a "
        "tsrl-reproduce grid's --out folder",
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        if not args.folder.is_dir():
            what = "is a file" if args.folder.exists() else "does not exist"
            raise UserError(f"{args.folder} {what}; give a sweep folder (hydra.sweep.dir of a multirun).")
        text, said = write_sweep(args.folder.resolve())
    except UserError as err:
        print(f"tsrl-sweep: error: {err}", file=sys.stderr)
        sys.exit(2)
    print(text)
    print(said)


if __name__ == "__main__":
    main()
