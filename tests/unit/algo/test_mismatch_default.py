"""algo.is_correction's default follows the generator: truncated importance sampling when a separate engine
(generator=vllm) samples, whose log-probs differ from the learner's even at equal weights; none when the learner's
own module samples (generator=hf) or the loss reads no samples (algo=sft). An explicit value always wins."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tsrl.algo import GRPOConfig
from tsrl.config import RunConfig, TrainerConfig, register_configs
from tsrl.generation import HFGeneratorConfig

CONFIGS = Path(__file__).resolve().parents[3] / "configs"


def load(*overrides: str) -> RunConfig:
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return OmegaConf.to_object(compose("config", overrides=list(overrides)))


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (["generator=vllm"], "tis"),
        (["generator=vllm", "algo=cispo"], "tis"),
        (["generator=hf"], "none"),
        (["generator=vllm", "algo.is_correction=none"], "none"),
        (["generator=vllm", "algo.is_correction=mask"], "mask"),
        (["generator=hf", "algo.is_correction=tis"], "tis"),
        (["generator=vllm", "algo=sft"], "none"),
    ],
    ids=["vllm_grpo", "vllm_cispo", "hf", "vllm_explicit_none", "vllm_explicit_mask", "hf_explicit_tis", "vllm_sft"],
)
def test_the_correction_follows_the_generator_unless_set(overrides, expected):
    assert load(*overrides).algo.is_correction == expected


def test_a_run_config_built_in_code_resolves_it_too():
    def built(generator):
        return RunConfig(
            task=None,
            model=None,
            judge=None,
            reward=None,
            algo=GRPOConfig(),
            generator=generator,
            trainer=TrainerConfig(),
            logger=None,
        )

    class OtherEngineConfig:  # a generator of a plugin: an engine of its own unless it says otherwise
        pass

    assert built(HFGeneratorConfig()).algo.is_correction == "none"
    assert built(OtherEngineConfig()).algo.is_correction == "tis"
    assert built(None).algo.is_correction == "none"
