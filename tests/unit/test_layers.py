"""The import graph, read from every module's import statements (imports inside functions included): the library's
packages stand in layers (LAYERS, lowest first) and a module imports only its own package and the layers below it;
the command-line programs (tsrl.commands) sit on top; no two modules import each other, at load time or later; and
an import of a tsrl module inside a function says on its line why it waits (an optional heavy dependency)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import tomllib

PACKAGE = Path(__file__).resolve().parents[2] / "tsrl"
COMMANDS = "tsrl.commands"  # the top layer: one module per command-line program
LAYERS = (  # lowest first; a package (or top-level module) imports its own modules and those of lower layers only
    ("tsrl.errors", "tsrl.types", "tsrl.progress"),
    ("tsrl.registry",),
    ("tsrl.config",),
    ("tsrl.ranking", "tsrl.rendering", "tsrl.algo"),
    ("tsrl.judging",),
    ("tsrl.tasks",),
    ("tsrl.models", "tsrl.remote", "tsrl.calibration"),
    ("tsrl.generation",),
    ("tsrl.rewards",),
    ("tsrl.spend", "tsrl.wallclock"),
    ("tsrl.anchors", "tsrl.evaluation"),
    ("tsrl.training", "tsrl.integrations", "tsrl.reproduce"),
    ("tsrl",),  # the root: tsrl.score_groups and tsrl.build_scorer, loaded from tsrl.integrations on first use
    (COMMANDS, "tsrl.testing"),
)
ONE_CONCERN = {frozenset({"tsrl.training.memory", "tsrl.training.memory_learner"})}
"""Modules that name each other, one of them under `if TYPE_CHECKING:` only: one concern split for length."""


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_nodes(
    tree: ast.Module | ast.FunctionDef | ast.AsyncFunctionDef, top_level_only: bool, type_checking: bool = True
) -> list[ast.stmt]:
    """The import statements of a module: at module level only, or anywhere (inside functions too); with or
    without those under `if TYPE_CHECKING:`, which never run."""
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    skipped = set()
    if not type_checking:
        guards = (n for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test))
        skipped = {id(node) for guard in guards for node in ast.walk(guard)}
    return [n for n in nodes if isinstance(n, ast.Import | ast.ImportFrom) and id(n) not in skipped]


def targets(node: ast.stmt) -> set[str]:
    """tsrl modules an import statement names (`from tsrl.x import y` counts as tsrl.x, or tsrl.x.y when that is a
    module)."""
    if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tsrl"):
        found = {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    elif isinstance(node, ast.Import):
        found = {a.name for a in node.names if a.name.startswith("tsrl")}
    else:
        found = set()
    return found & MODULES.keys()


@functools.cache
def parsed(path: Path) -> tuple[ast.Module, list[str]]:
    text = path.read_text(encoding="utf-8")
    return ast.parse(text), text.splitlines()


def imports(path: Path, top_level_only: bool, type_checking: bool = True) -> set[str]:
    """tsrl modules a file imports (see targets), at module level only or anywhere."""
    tree = parsed(path)[0]
    return {m for node in import_nodes(tree, top_level_only, type_checking) for m in targets(node)}


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def group(name: str) -> str:
    """The package or top-level module of LAYERS that a module belongs to (the longest that holds it)."""
    return max((g for layer in LAYERS for g in layer if within(name, g)), key=len)


LAYER = {g: i for i, layer in enumerate(LAYERS) for g in layer}


def tangles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The groups of modules that import each other, directly or through others (strongly connected components)."""
    reach = {}
    for start in graph:
        seen, todo = set(), [start]
        while todo:
            fresh = graph[todo.pop()] - seen
            seen |= fresh
            todo.extend(fresh)
        reach[start] = seen
    return {frozenset({n} | {m for m in reach[n] if n in reach[m]}) for n in graph if n in reach[n]}


def test_every_package_has_its_layer():
    """A new package or top-level module is placed in LAYERS (else it would count as the root's)."""
    assert sorted({name for name in MODULES if group(name) == "tsrl"} - {"tsrl"}) == []


def test_no_import_reaches_up_a_layer():
    """Imports inside functions and under `if TYPE_CHECKING:` count too; a package's own modules are exempt."""
    arrows = [
        (name, target)
        for name, path in MODULES.items()
        for target in imports(path, top_level_only=False)
        if group(target) != group(name) and LAYER[group(target)] >= LAYER[group(name)]
    ]
    assert arrows == []


def test_the_library_never_imports_the_commands():
    """tsrl.commands is the top layer: only its own modules import it."""
    arrows = [
        (name, target)
        for name, path in MODULES.items()
        if not within(name, COMMANDS)
        for target in imports(path, top_level_only=False)
        if within(target, COMMANDS)
    ]
    assert arrows == []


def test_every_command_is_the_main_of_a_module_in_tsrl_commands():
    """One home per command: each [project.scripts] entry is `tsrl.commands.<module>:main`."""
    scripts = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]["scripts"]
    commands = {f"{name}:main" for name in MODULES if name.startswith(f"{COMMANDS}.")}
    assert {script: target for script, target in scripts.items() if target not in commands} == {}


def test_the_library_never_imports_its_test_support():
    """tsrl.testing (fakes, the loopback judge server) is for tests and benchmarks; nothing in tsrl may rely on it."""
    arrows = [
        (name, target)
        for name, path in MODULES.items()
        if not name.startswith("tsrl.testing")
        for target in imports(path, top_level_only=False)
        if target.startswith("tsrl.testing")
    ]
    assert arrows == []


def test_no_import_cycle_at_run_time():
    """Imports inside functions count (they run once the function does); those under `if TYPE_CHECKING:` never
    run. A package's __init__ importing its own submodules is not a cycle unless a submodule imports it back."""
    graph = {name: imports(path, False, type_checking=False) - {name} for name, path in MODULES.items()}
    assert tangles(graph) == set()


def test_type_checking_imports_join_only_one_concern():
    """A pair held apart by `if TYPE_CHECKING:` alone is a cycle for a reader: allowed only within ONE_CONCERN."""
    graph = {name: imports(path, top_level_only=False) - {name} for name, path in MODULES.items()}
    assert tangles(graph) - ONE_CONCERN == set()


def test_an_import_inside_a_function_says_why():
    """Imports of tsrl modules belong at the top; one inside a function only defers an optional heavy dependency
    (vLLM, Chromium, …) and says so in a comment on its line."""
    silent = []
    for name, path in MODULES.items():
        tree, lines = parsed(path)
        functions = (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
        for node in {id(n): n for f in functions for n in import_nodes(f, False, type_checking=False)}.values():
            if targets(node) and "#" not in lines[node.lineno - 1]:
                silent.append(f"{name}:{node.lineno}")
    assert silent == []
