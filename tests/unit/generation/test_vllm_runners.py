"""The greedy-logprob processor under both of vLLM's model runners, checked with vLLM's own loaders (they import on
CPU): the V2 runner (CUDA's default) refuses a V1-interface processor at engine start, so each paper recipe's
engine arguments — exactly what `vllm.LLM` receives — must carry the V2 one there, and the V2 processor must scale
the greedy rows it is asked to and no other."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tsrl.generation.vllm import Request, VLLMGenerator
from tsrl.generation.vllm_engine import (
    LOGPROB_TEMPERATURE,
    EngineSite,
    engine_arguments,
    engine_context_length,
    greedy_logprob_processor,
)

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[3]
RECIPES = sorted(p.stem for p in (ROOT / "recipes" / "paper").glob("*.yaml"))


def v2_validator(processors):
    from vllm.v1.worker.gpu.sample.logits_processor.loader import build_custom_logits_processors_params_validator

    return build_custom_logits_processors_params_validator(tuple(processors))


def test_the_v2_loader_refuses_the_v1_processor_and_accepts_the_v2_one():
    with pytest.raises(ValueError, match="is not a subclass"):
        v2_validator([greedy_logprob_processor(v2_runner=False)])
    v2_validator([greedy_logprob_processor(v2_runner=True)])


def test_the_v1_loader_accepts_the_v1_processor_and_refuses_the_v2_one():
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import validate_logits_processors_parameters

    params = SamplingParams(temperature=0.0, extra_args={LOGPROB_TEMPERATURE: 0.7})
    validate_logits_processors_parameters([greedy_logprob_processor(v2_runner=False)], params)
    with pytest.raises(ValueError, match="subclass of LogitsProcessor"):
        validate_logits_processors_parameters([greedy_logprob_processor(v2_runner=True)], params)


def test_the_v2_processor_divides_only_the_rows_of_requests_that_ask():
    """Slots 1 and 3 hold greedy requests at temperatures 0.5 and 0.7, slot 0 a sampled one; the step's rows come
    in another order (row → slot). A recycled slot forgets its previous occupant's temperature."""
    import numpy as np
    from vllm import SamplingParams
    from vllm.v1.worker.gpu.sample.logits_processor.interface import LogitsContext

    cls = greedy_logprob_processor(v2_runner=True)
    processor = cls(None, SimpleNamespace(max_num_reqs=4, device=torch.device("cpu")))
    greedy = {1: 0.5, 3: 0.7}
    assert not processor.add_request(0, SamplingParams(temperature=0.8))
    for slot, t in greedy.items():
        assert processor.add_request(slot, SamplingParams(temperature=0.0, extra_args={LOGPROB_TEMPERATURE: t}))
    processor.apply_staged_writes()
    slots = [3, 0, 1]  # row → slot
    mapping = torch.tensor(slots, dtype=torch.int32)
    ctx = LogitsContext(mapping, mapping, np.array(slots), *(torch.zeros(3),) * 3, np.zeros(3))
    logits = torch.randn(3, 11)  # [R, V]
    out = processor.apply(logits.clone(), ctx)
    expected = torch.stack([logits[0] / 0.7, logits[1], logits[2] / 0.5])  # [R, V]
    assert torch.equal(out, expected)

    processor.add_request(3, SamplingParams(temperature=0.8))  # slot 3 recycled for a sampled request
    processor.apply_staged_writes()
    assert torch.equal(processor.apply(logits.clone(), ctx)[0], logits[0])


def test_a_request_with_a_non_positive_logprob_temperature_is_refused_at_admission():
    from vllm import SamplingParams
    from vllm.exceptions import VLLMValidationError

    validate = v2_validator([greedy_logprob_processor(v2_runner=True)])
    with pytest.raises(VLLMValidationError, match=LOGPROB_TEMPERATURE):
        validate(SamplingParams(temperature=0.0, extra_args={LOGPROB_TEMPERATURE: 0.0}))


def recipe_config(recipe: str):
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from tsrl.config import register_configs

    register_configs()
    with initialize_config_module("tsrl.configs", version_base="1.3"):
        judges = ["judge.model=weak", "eval_judge.model=strong"] * (recipe == "tsrl_table2_weak_judge")  # two judges
        return OmegaConf.to_object(compose("config", overrides=[f"recipes=paper/{recipe}", *judges]))


@pytest.fixture(scope="module")
def tokenizer():
    """A stand-in for the recipes' tokenizers (no model hub here): lengths differ, the arguments' shape does not."""
    from tsrl.models.tiny import train_tokenizer
    from tsrl.tasks import HumorConfig, build_task

    return train_tokenizer([p.text for p in build_task(HumorConfig()).prompts("train")], vocab_size=400)


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_paper_recipes_engine_arguments_start_under_the_v2_runner(recipe, tokenizer):
    """On a GPU (V2 runner, sleep mode, 8 processes under ZeRO-3 or one): the arguments are EngineArgs' own, their
    processor passes the V2 loader, the requests tsrl sends pass its admission check, and the context is the
    task's longest prompt + generator.max_new_tokens (rounded), not the model's 131,072."""
    from vllm.engine.arg_utils import EngineArgs

    from tsrl.tasks import build_task

    cfg = recipe_config(recipe)
    prompts = [*build_task(cfg.task).prompts("train"), *build_task(cfg.task).prompts("eval")]
    context = engine_context_length(cfg.generator, tokenizer, prompts)
    assert cfg.generator.max_new_tokens < context <= cfg.generator.max_new_tokens + 1024
    for several in (False, True):
        site = EngineSite(sleep_mode=True, several_processes=several, v2_runner=True)
        args = engine_arguments(cfg.generator, "/models/policy", cfg.model.dtype, context, site)
        EngineArgs(**args)  # every key is an engine argument
        assert args["max_model_len"] == context and args["enable_sleep_mode"]
        assert args["distributed_executor_backend"] == ("external_launcher" if several else None)
        validate = v2_validator(args["logits_processors"])
        requests = [Request([1, 2, 3], 1, True, 0), Request([1, 2, 3], 7, False, 12345)]
        for params in VLLMGenerator._params(SimpleNamespace(cfg=cfg.generator), requests, 16):
            validate(params)
