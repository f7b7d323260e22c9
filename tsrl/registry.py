"""Component registries: one per family — task, model, judge, reward, algo, generator, logger.

A component registers itself in the module that defines it, next to its config dataclass:

    from tsrl.registry import REWARDS
    REWARDS.register("my_regime", MyRegimeConfig, MyRegime)   # name, config class, builder

and ships a YAML file configs/<family>/<name>.yaml whose defaults list names `<name>_schema`. Nothing else is
edited: `load_components()` imports every module of tsrl's component packages, so a new module file is found
on its own, plus the plugin modules named in the environment variable TSRL_PLUGINS (comma-separated import
paths) or declared by an installed package under the `tsrl.plugins` entry-point group. The Hydra
ConfigStore is built from the registries (tsrl.config.register_configs), and every `build_*` function picks
the builder by the config's class.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tsrl.errors import ConfigError

PACKAGES = (
    "tsrl.tasks",
    "tsrl.models",
    "tsrl.judging",
    "tsrl.remote",
    "tsrl.rewards",
    "tsrl.algo",
    "tsrl.generation",
    "tsrl.training.logs",
)


@dataclass(frozen=True)
class Component:
    name: str
    config: type
    build: Callable[..., Any]
    check: Callable[..., None] | None = None
    """Cheap checks of the config against what it will be built with (a reward against the task's prompts),
    run before anything expensive is built; raises a ConfigError."""


class Registry:
    """name → (config class, builder) for one family of components."""

    def __init__(self, family: str) -> None:
        self.family = family
        self._components: dict[str, Component] = {}

    def register(
        self, name: str, config: type, build: Callable[..., Any], check: Callable[..., None] | None = None
    ) -> None:
        old = self._components.get(name)
        if old is not None and old.config.__qualname__ != config.__qualname__:
            raise ValueError(
                f"{self.family} {name!r} is registered twice ({old.config.__qualname__} and "
                f"{config.__qualname__}); give one of them another name."
            )
        self._components[name] = Component(name, config, build, check)

    def __iter__(self) -> Iterator[Component]:
        return iter(self._components.values())

    def names(self) -> list[str]:
        return sorted(self._components)

    def of(self, cfg: Any) -> Component:
        """The component registered with `cfg`'s exact config class (a subclass of it is another component)."""
        match = next((c for c in self._components.values() if type(cfg) is c.config), None)
        if match is None:
            raise ConfigError(
                f"No {self.family} is registered for a {type(cfg).__name__} config; "
                f"the registered {self.family}s are: {', '.join(self.names())}."
            )
        return match

    def build(self, cfg: Any, *args: Any, **kwargs: Any) -> Any:
        return self.of(cfg).build(cfg, *args, **kwargs)

    def check(self, cfg: Any, *args: Any) -> None:
        """The component's cheap checks (see Component.check), if it registered any."""
        component = self.of(cfg)
        if component.check is not None:
            component.check(cfg, *args)


TASKS, MODELS, JUDGES = Registry("task"), Registry("model"), Registry("judge")
REWARDS, ALGOS, GENERATORS, LOGGERS = Registry("reward"), Registry("algo"), Registry("generator"), Registry("logger")
FAMILIES: dict[str, Registry] = {
    "task": TASKS,
    "model": MODELS,
    "judge": JUDGES,
    "reward": REWARDS,
    "algo": ALGOS,
    "generator": GENERATORS,
    "logger": LOGGERS,
}

_loaded = False


def load_components() -> None:
    """Import every built-in component module and every plugin module once (they register themselves)."""
    global _loaded
    if _loaded:
        return
    for package in PACKAGES:
        module = importlib.import_module(package)
        for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
            importlib.import_module(f"{package}.{info.name}")
    for name in plugin_modules():
        try:
            importlib.import_module(name)
        except ImportError as err:
            raise ConfigError(
                f"tsrl plugin module {name!r} could not be imported ({err}); check TSRL_PLUGINS "
                "and that the module is on PYTHONPATH."
            ) from None
    _loaded = True


def plugin_modules() -> list[str]:
    """Modules named in TSRL_PLUGINS, then those of installed packages' `tsrl.plugins` entry points."""
    from importlib.metadata import entry_points

    named = [m.strip() for m in os.environ.get("TSRL_PLUGINS", "").split(",") if m.strip()]
    return named + [ep.value for ep in entry_points(group="tsrl.plugins")]
