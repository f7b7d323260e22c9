"""Every config group composes into typed dataclasses; bad settings fail with a message naming them."""

import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from tsrl.algo import CISPOConfig
from tsrl.config import RunConfig, register_configs
from tsrl.errors import ConfigError
from tsrl.registry import FAMILIES

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def load(*overrides: str) -> RunConfig:
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return OmegaConf.to_object(compose("config", overrides=list(overrides)))


def group_options():
    for group in FAMILIES:
        for path in sorted((CONFIGS / group).glob("*.yaml")):
            yield group, path.stem


@pytest.mark.parametrize("group, option", list(group_options()))
def test_every_config_group_option_composes_to_its_dataclass(group, option):
    extra = ["model.path=/tmp"] if (group, option) == ("model", "hf") else []
    cfg = load(f"{group}={option}", *extra)
    assert isinstance(cfg, RunConfig)
    assert type(getattr(cfg, group)).__name__.endswith("Config")


def test_defaults_and_overrides_arrive_typed():
    cfg = load("reward.k=2", "judge.flip_prob=0.1", "trainer.max_steps=20", "algo=cispo")
    assert (cfg.reward.k, cfg.judge.flip_prob, cfg.trainer.max_steps) == (2, 0.1, 20)
    assert isinstance(cfg.algo, CISPOConfig) and cfg.algo.minibatches == 4
    assert cfg.trainer.eval.every == 20


def test_misspelled_key_is_rejected_naming_it():
    with pytest.raises(ConfigCompositionException, match="max_stpes"):
        load("trainer.max_stpes=3")


def test_wrong_type_is_rejected():
    with pytest.raises(ConfigCompositionException, match="max_steps"):
        load("trainer.max_steps=many")


def test_cross_field_checks_say_what_to_change():
    with pytest.raises(ConfigError, match="trainer.group_size=1 .* set trainer.group_size=2 or more"):
        load("trainer.group_size=1")
    with pytest.raises(ConfigError, match="algo.aggregate='per_prompt' is unknown"):
        load("algo.aggregate=per_prompt")


@pytest.mark.parametrize(
    "override, message",
    [
        ("trainer.lr=-1", "trainer.lr=-1.0 must be > 0"),
        ("trainer.grad_clip=-0.5", "grad_clip must be >= 0"),
        ("trainer.eval.samples=0", "samples >= 1"),
        ("algo.kl_beta=-0.1", "algo.kl_beta must be >= 0"),
        ("algo.eps_low=1.5", "algo.eps_low must lie in [0, 1)"),
        ("judge.tau=0", "judge.tau must be > 0"),
        ("generator.max_new_tokens=0", "generator.max_new_tokens"),
        ("logger.samples_every=-1", "logger.samples_every must be >= 0"),
    ],
)
def test_numeric_settings_out_of_range_fail_in_one_sentence(override, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load(override)


@pytest.mark.parametrize("recipe", sorted(p.stem for p in (CONFIGS.parent / "recipes").glob("*.yaml")))
def test_every_recipe_composes(recipe):
    assert isinstance(load(f"recipes={recipe}"), RunConfig)


def test_every_single_machine_launcher_file_asks_accelerate_for_a_free_port():
    """Without main_process_port, accelerate launches every run on 29500, and two launches on one machine (two
    runs, or two test jobs in parallel) collide: one fails with EADDRINUSE or, with DeepSpeed's CPU shared-memory
    all-reduce (its segments are named after the port), one rank aborts. Port 0 asks accelerate for a free one."""
    files = {path.name: OmegaConf.load(path) for path in sorted((CONFIGS / "accelerate").glob("*.yaml"))}
    single = {name: config.get("main_process_port") for name, config in files.items() if config.num_machines == 1}
    assert len(single) == 5 and set(single.values()) == {0}, single
