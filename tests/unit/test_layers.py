"""The import graph, read from every module's import statements (function-local imports included): the
library's layers point one way, the command-line programs (tsrl.commands) sit on top of them, and no two modules
import each other at load time."""

from __future__ import annotations

import ast
from pathlib import Path

import tomllib

PACKAGE = Path(__file__).resolve().parents[2] / "tsrl"
CORE = ("tsrl.rewards", "tsrl.judging", "tsrl.ranking", "tsrl.algo", "tsrl.tasks")
UPPER = ("tsrl.training", "tsrl.commands", "tsrl.reproduce", "tsrl.integrations")
COMMANDS = "tsrl.commands"  # the top layer: one module per command-line program


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, top_level_only: bool) -> set[str]:
    """tsrl modules a file imports (`from tsrl.x import y` counts as tsrl.x, or tsrl.x.y when that is a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tsrl"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("tsrl"))
    return {m for m in found if m in MODULES}


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def test_core_packages_never_import_the_trainer_the_commands_or_the_integrations():
    arrows = [
        (name, target)
        for name, path in MODULES.items()
        if name.startswith(CORE)
        for target in imports(path, top_level_only=False)
        if target.startswith(UPPER)
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


def test_no_import_cycle_at_load_time():
    """Module-level imports only (a function-local import runs later, once both modules exist). A package's
    __init__ importing its own submodules is not a cycle unless a submodule imports that __init__ back."""
    graph = {name: imports(path, top_level_only=True) - {name} for name, path in MODULES.items()}
    cycles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []
