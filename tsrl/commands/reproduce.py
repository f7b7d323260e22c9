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
from tsrl.commands.base import command_line, setup_or_exit, stop
from tsrl.config import override_error
from tsrl.errors import UserError, not_a_file
from tsrl.progress import counted
from tsrl.reproduce import STAND_INS, aggregate, method_grids, not_sweeps, plan, run_grids
from tsrl.reproduce.spend import CONFIRM_ABOVE, grid_spend, world_of


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tsrl-reproduce", description=reproduce.__doc__.splitlines()[0])
    parser.add_argument("recipe", help="a paper recipe: paper/tsrl_table1 (or tsrl_table1), see recipes/paper/")
    parser.add_argument("overrides", nargs="*", help="tsrl-train overrides for every run (e.g. judge.model=…)")
    parser.add_argument("--out", type=Path, default=None, help="grid folder (default runs/reproduce/<recipe>)")
    parser.add_argument("--cpu", action="store_true", help="CPU stand-ins at `make train`'s sizes, the whole grid")
    parser.add_argument("--smoke", action="store_true", help="CPU stand-ins, 2 steps, 1 seed, ≤ 2 values per axis")
    parser.add_argument("--accelerate", default=None, help="an accelerate config file: every run on its processes")
    parser.add_argument("--aggregate-only", action="store_true", help="only (re)write the tables and plots")
    parser.add_argument(
        "--yes",
        action="store_true",
        help=f"run a grid whose judge is not simulated even above {CONFIRM_ABOVE:,} estimated judge calls",
    )
    return parser


def paper_recipe(name: str) -> str:
    """`paper/<name>` for a bare name; exits with one sentence listing the paper recipes when there is no such file."""
    recipe = name if "/" in name else f"paper/{name}"
    folder = Path(os.environ["TSRL_RECIPES_ROOT"]) / "recipes"  # set by setup_or_exit
    if not (folder / f"{recipe}.yaml").is_file():
        known = ", ".join(sorted(p.stem for p in (folder / "paper").glob("*.yaml")))
        print(f"tsrl-reproduce: error: {recipe} is not a recipe under {folder}; the paper recipes are: {known}.",
              file=sys.stderr)  # fmt: skip
        sys.exit(2)
    return recipe


def check_paths(out: Path | None, accelerate: str | None) -> None:
    """Exit with one sentence and status 2 when --out is a file or --accelerate names no file: found before the
    grid, not by the first run's mkdir or by accelerate launch."""
    problem = ""
    if out is not None and out.exists() and not out.is_dir():
        problem = f"--out {out} is a file; give a folder (it receives one folder per run)"
    elif accelerate and not Path(accelerate).expanduser().is_file():
        problem = f"--accelerate {accelerate} {not_a_file(accelerate)}; give an accelerate config (see tsrl-configs)"
    if problem:
        print(f"tsrl-reproduce: error: {problem}.", file=sys.stderr)
        sys.exit(2)


def plan_or_exit(recipe: str, overrides: list[str], scale: str) -> tuple[dict[str, list[str]], list[str]]:
    """reproduce.plan, or one sentence and exit status 2 when an override does not compose (a misspelled key, a
    value of the wrong type) — before any run starts."""
    from hydra.errors import HydraException

    try:
        return plan(recipe, overrides, scale)
    except HydraException as err:
        print(f"tsrl-reproduce: error: {override_error(err)}", file=sys.stderr)
        sys.exit(2)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_intermixed_args(argv)  # overrides before or after the options
    try:
        reproduce_grid(args)
    except KeyboardInterrupt:
        stop(f"{kept_runs(grid_folder(args))}; to resume: {command_line()}")


def reproduce_grid(args: argparse.Namespace) -> None:
    setup_or_exit()
    recipe = paper_recipe(args.recipe)
    check_paths(args.out, args.accelerate)
    scale = scale_of(args)
    grid, fixed = plan_or_exit(recipe, args.overrides, scale)
    out = grid_folder(args)
    failed = 0
    if not args.aggregate_only:
        grids = method_grids(recipe, grid, [*STAND_INS[scale], *not_sweeps(args.overrides)])
        size = sum(math.prod(len(values) for values in g.values()) for g in grids)
        print(f"tsrl-reproduce: {recipe}: {size} runs into {out}", flush=True)
        spend = grid_spend(recipe, grids, fixed, world_of(args.accelerate), out)
        print("\n".join(spend.lines()), flush=True)
        if spend.needs_yes() and not args.yes:
            unknown = f" and {len(spend.failed)} runs whose calls could not be estimated" if spend.failed else ""
            print(
                f"tsrl-reproduce: error: the grid would make {spend.total.text()} judge calls{unknown} with a judge "
                f"that is not simulated ({', '.join(sorted(spend.judges)) or 'not known'}; the threshold is "
                f"{CONFIRM_ABOVE:,} calls); nothing was run: add --yes to run it, or narrow the grid (an axis on the "
                "command line, e.g. seed=0).",
                file=sys.stderr,
            )
            sys.exit(2)
        failed = run_grids(recipe, out, grids, fixed, args.accelerate)  # one multirun per set of axes
    try:
        print(aggregate(out, grid))
    except UserError as err:  # a folder without finished runs of this grid: nothing is written
        print(f"tsrl-reproduce: error: {err}", file=sys.stderr)
        sys.exit(2)
    print(f"tables and plots: {out}/table.md, table.csv, curves.png")
    if failed:
        print(
            f"tsrl-reproduce: error: the sweep stopped with exit status {failed}; the table holds the runs that "
            "finished. Run the same command again to resume.",
            file=sys.stderr,
        )
        sys.exit(failed)


def scale_of(args: argparse.Namespace) -> str:
    """The grid's scale: smoke, cpu (the CPU stand-ins) or full."""
    return "smoke" if args.smoke else "cpu" if args.cpu else "full"


def grid_folder(args: argparse.Namespace) -> Path:
    """--out, or runs/reproduce/<recipe>[_cpu|_smoke] in the working directory."""
    suffix = "" if scale_of(args) == "full" else f"_{scale_of(args)}"
    return (args.out or Path("runs/reproduce") / (args.recipe.split("/")[-1] + suffix)).resolve()


def kept_runs(out: Path) -> str:
    """What a grid stopped by Ctrl-C keeps: its finished runs (skipped when it resumes) and each unfinished run's
    newest checkpoint (resumed from)."""
    done = len(list(out.rglob("done.json"))) if out.is_dir() else 0
    return f"kept {counted(done, 'finished run')} in {out} and each unfinished run's newest checkpoint"


if __name__ == "__main__":
    main()
