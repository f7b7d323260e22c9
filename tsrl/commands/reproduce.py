"""`tsrl-reproduce`: a paper recipe's grid as Hydra multiruns, then its tables and plots. The grid logic, the runs'
collection and the tables live in tsrl.reproduce (whose docstring describes the whole command); this module reads
the command line, names the recipe and output folder, and says what ran and where the tables are."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from tsrl import reproduce
from tsrl.commands.base import setup_or_exit
from tsrl.reproduce import STAND_INS, aggregate, method_grids, not_sweeps, plan, run_grids


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tsrl-reproduce", description=reproduce.__doc__.splitlines()[0])
    parser.add_argument("recipe", help="a paper recipe: paper/tsrl_table1 (or tsrl_table1), see recipes/paper/")
    parser.add_argument("overrides", nargs="*", help="tsrl-train overrides for every run (e.g. judge.model=…)")
    parser.add_argument("--out", type=Path, default=None, help="grid folder (default runs/reproduce/<recipe>)")
    parser.add_argument("--cpu", action="store_true", help="CPU stand-ins at `make train`'s sizes, the whole grid")
    parser.add_argument("--smoke", action="store_true", help="CPU stand-ins, 2 steps, 1 seed, ≤ 2 values per axis")
    parser.add_argument("--accelerate", default=None, help="an accelerate config file: every run on its processes")
    parser.add_argument("--aggregate-only", action="store_true", help="only (re)write the tables and plots")
    return parser


def paper_recipe(name: str) -> str:
    """`paper/<name>` for a bare name; exits with one sentence listing the paper recipes when there is no such file."""
    recipe = name if "/" in name else f"paper/{name}"
    folder = Path(os.environ["TSRL_RECIPES_ROOT"]) / "recipes"  # set by setup_or_exit
    if not (folder / f"{recipe}.yaml").is_file():
        known = ", ".join(sorted(p.stem for p in (folder / "paper").glob("*.yaml")))
        raise SystemExit(
            f"tsrl-reproduce: error: {recipe} is not a recipe under {folder}; the paper recipes are: {known}."
        )
    return recipe


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_intermixed_args(argv)  # overrides before or after the options
    setup_or_exit()
    recipe = paper_recipe(args.recipe)
    scale = "smoke" if args.smoke else "cpu" if args.cpu else "full"
    grid, fixed = plan(recipe, args.overrides, scale)
    suffix = "" if scale == "full" else f"_{scale}"
    out = (args.out or Path("runs/reproduce") / (recipe.split("/")[-1] + suffix)).resolve()
    failed = 0
    if not args.aggregate_only:
        grids = method_grids(recipe, grid, [*STAND_INS[scale], *not_sweeps(args.overrides)])
        size = sum(math.prod(len(values) for values in g.values()) for g in grids)
        print(f"tsrl-reproduce: {recipe}: {size} runs into {out}", flush=True)
        failed = run_grids(recipe, out, grids, fixed, args.accelerate)  # one multirun per set of axes
    print(aggregate(out, grid))
    print(f"tables and plots: {out}/table.md, table.csv, curves.png")
    if failed:
        print(
            f"tsrl-reproduce: error: the sweep stopped with exit status {failed}; the table holds the runs that "
            "finished. Run the same command again to resume.",
            file=sys.stderr,
        )
        sys.exit(failed)


if __name__ == "__main__":
    main()
