"""generator=vllm without an engine: the trainer's sleep → wake weights → sync → wake KV cache order, the context
length sized from the task's prompts, the refusal of a prompt that does not fit, and the engine's parameter names
under a LoRA wrapper. The engine is a recording fake (vLLM's LLM surface that VLLMGenerator calls); vLLM itself is
not imported, so these run in the main environment."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from tsrl.errors import UserError
from tsrl.generation.hf import longest_prompt_tokens
from tsrl.generation.vllm import VLLMGenerator
from tsrl.generation.vllm_config import VLLMGeneratorConfig
from tsrl.generation.vllm_engine import CONTEXT_STEP, PROMPT_MARGIN, engine_context_length, engine_parameter_names
from tsrl.testing.fakes import number_prompt
from tsrl.training.loop import sync_weights


class RecordingEngine:
    """The parts of vllm.LLM that VLLMGenerator uses, recording every call in order; weights handed to the in-place
    reload are drawn from the iterator inside the call, as vLLM's worker does."""

    def __init__(self, max_model_len: int = 512, sleep_mode: bool = True) -> None:
        self.calls: list[tuple] = []
        model_config = SimpleNamespace(enable_sleep_mode=sleep_mode, max_model_len=max_model_len)
        self.llm_engine = SimpleNamespace(vllm_config=SimpleNamespace(model_config=model_config))

    def apply_model(self, fn: Callable[[Any], Any]) -> list[Any]:
        return [fn(SimpleNamespace(packed_modules_mapping={"qkv_proj": ["q_proj", "k_proj", "v_proj"]}))]

    def sleep(self, level: int = 1) -> None:
        self.calls.append(("sleep", level))

    def wake_up(self, tags: list[str] | None = None) -> None:
        self.calls.append(("wake_up", tags))

    def collective_rpc(self, method: str, kwargs: dict[str, Any]) -> list[None]:
        names = [name for name, _ in kwargs["weights_iterator"]]
        self.calls.append((method, names))
        return [None]

    def reset_prefix_cache(self) -> bool:
        self.calls.append(("reset_prefix_cache",))
        return True


class FakeLearner:
    def __init__(self, names: Iterable[str]) -> None:
        self.names = list(names)

    def weights_for_sync(self):
        return ((name, torch.zeros(2)) for name in self.names)


NAMES = ["embed.weight", "l.0.q_proj.weight", "l.0.k_proj.weight", "l.0.v_proj.weight"]


def generator(engine: RecordingEngine, tokenizer: Any = None, **cfg: Any) -> VLLMGenerator:
    return VLLMGenerator(engine, tokenizer, VLLMGeneratorConfig(**cfg), set(NAMES))


def test_a_trainer_step_wakes_the_weights_syncs_then_wakes_the_kv_cache():
    """sleep at level 2 (the default: the weights are replaced anyway), then the loop's sync: the weights' memory
    first, the reload into it (the fused q/k/v parts together), the prefix-cache reset, and the KV cache last."""
    engine = RecordingEngine()
    gen = generator(engine)
    gen.sleep()
    assert gen.unsynced == set(NAMES)  # level 2 dropped the weights: generate must wait for the sync
    sync_weights(SimpleNamespace(generator=gen, learner=FakeLearner(NAMES)))
    assert engine.calls == [
        ("sleep", 2),
        ("wake_up", ["weights"]),
        ("reload_weights", NAMES),
        ("reset_prefix_cache",),
        ("wake_up", ["kv_cache"]),
    ]
    assert gen.unsynced == set() and gen.asleep == set()


def test_level_one_and_wake_up_without_sleep():
    """sleep_level 1 is still available; a sync with nothing asleep (the first one, an offline step's) wakes
    nothing (vLLM would warn "Executor is not sleeping"), and wake_up() takes back whatever is still asleep."""
    engine = RecordingEngine()
    gen = generator(engine, sleep_level=1)
    sync_weights(SimpleNamespace(generator=gen, learner=FakeLearner(NAMES)))
    assert [c[0] for c in engine.calls] == ["reload_weights", "reset_prefix_cache"]
    engine.calls.clear()
    gen.sleep()
    gen.sleep()  # already asleep: vLLM would warn and do nothing
    gen.wake_up()
    assert engine.calls == [("sleep", 1), ("wake_up", ["weights", "kv_cache"])]
    assert gen.unsynced == set()  # level 1 kept the weights


def test_a_platform_without_sleep_mode_makes_sleep_and_wake_no_ops():
    engine = RecordingEngine(sleep_mode=False)
    gen = generator(engine)
    gen.sleep()
    gen.wake_up(("weights",))
    assert engine.calls == []


def test_the_context_is_the_longest_prompt_plus_margin_and_new_tokens_rounded_up(policy):
    _, tokenizer = policy
    prompts = [number_prompt("short", [0]), number_prompt("a much longer prompt id " * 20, [0])]
    longest = longest_prompt_tokens(tokenizer, prompts)
    cfg = VLLMGeneratorConfig(max_new_tokens=300)
    length = engine_context_length(cfg, tokenizer, prompts)
    assert length % CONTEXT_STEP == 0
    assert longest + PROMPT_MARGIN + 300 <= length < longest + PROMPT_MARGIN + 300 + CONTEXT_STEP
    assert engine_context_length(VLLMGeneratorConfig(max_model_len=4096), tokenizer, prompts) == 4096


def test_generate_refuses_a_prompt_that_does_not_fit_naming_the_setting(policy):
    """Before any request reaches vLLM (which would cut the completion short or fail mid-run)."""
    _, tokenizer = policy
    engine = RecordingEngine(max_model_len=64)
    gen = generator(engine, tokenizer, max_new_tokens=32)
    gen.load_weights((name, torch.zeros(2)) for name in NAMES)
    long = number_prompt("a much longer prompt id " * 8, [0])
    with pytest.raises(UserError, match=r"generator\.max_model_len=64 cannot hold a prompt of \d+ tokens plus 32"):
        gen.generate([long], n=2)
    assert [c[0] for c in engine.calls] == ["reload_weights", "reset_prefix_cache"]  # nothing was generated


def test_under_lora_the_engine_expects_the_base_models_names(policy):
    """The base model's names (what from_pretrained and the engine know: the base part of what weights_for_sync
    yields), never peft's base_model.model.… or lora_A/lora_B: the adapter goes in as an adapter."""
    peft = pytest.importorskip("peft")
    import copy

    model, _ = policy
    plain = copy.deepcopy(model)
    wrapped = peft.get_peft_model(
        copy.deepcopy(model), peft.LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM")
    )
    expected = {name for name, _ in plain.named_parameters()}
    assert engine_parameter_names(plain) == expected
    assert engine_parameter_names(wrapped) == expected


@pytest.mark.parametrize(
    "sizes",
    [
        {"gpu_memory_utilization": "half"},
        {"gpu_memory_utilization": 0.0},
        {"max_num_seqs": 0},
        {"max_num_batched_tokens": "8k"},
    ],
)
def test_engine_sizes_are_auto_or_in_range(sizes):
    """generator.gpu_memory_utilization in (0, 1], the batch limits whole numbers >= 1, or auto (the default: the
    memory plan's under tsrl-train on a GPU)."""
    from tsrl.errors import ConfigError

    auto = VLLMGeneratorConfig()
    assert (auto.gpu_memory_utilization, auto.max_num_seqs, auto.max_num_batched_tokens) == ("auto",) * 3
    VLLMGeneratorConfig(gpu_memory_utilization=0.5, max_num_seqs=128, max_num_batched_tokens=1536)
    with pytest.raises(ConfigError, match=next(iter(sizes))):
        VLLMGeneratorConfig(**sizes)


def test_the_engines_adapter_rank_is_the_smallest_of_vllms_that_holds_model_lora_r():
    from tsrl.errors import ConfigError
    from tsrl.generation.vllm_engine import engine_lora_rank

    assert [engine_lora_rank(r) for r in (1, 4, 8, 9, 64, 300, 512)] == [1, 8, 8, 16, 64, 320, 512]
    with pytest.raises(ConfigError, match=r"model\.lora\.r=1024"):
        engine_lora_rank(1024)


class RecordingAdapter:
    """EngineAdapter's surface (tsrl/generation/vllm_lora.py) without vLLM: what the generator hands it."""

    def __init__(self) -> None:
        self.received: list[str] = []
        self.published: list[bool] = []  # `reloaded` of each publish
        self.request = None

    def receive(self, name: str, tensor: torch.Tensor) -> None:
        self.received.append(name)

    def publish(self, engine: Any, reloaded: bool) -> None:
        self.published.append(reloaded)
        self.request = "the current adapter"

    def check_loaded(self) -> None:
        assert self.request is not None


ADAPTER = ["base_model.model.l.0.q_proj.lora_A.weight", "base_model.model.l.0.q_proj.lora_B.weight"]


def test_under_lora_the_base_is_loaded_where_the_engine_lacks_it_and_the_adapter_goes_in_as_an_adapter():
    """The first sync loads the base weights (the adapter's never reach the in-place reload); later ones load no
    base weight, as the engine holds the frozen base, until a level-2 sleep drops it; every sync publishes the
    adapter, saying whether the base was reloaded (vLLM then drops its adapters)."""
    engine = RecordingEngine()
    gen = generator(engine)
    gen.adapter = RecordingAdapter()
    learner = FakeLearner([*NAMES, *ADAPTER])
    sync_weights(SimpleNamespace(generator=gen, learner=learner))
    assert engine.calls == [("reload_weights", NAMES), ("reset_prefix_cache",)]
    assert gen.adapter.received == ADAPTER and gen.adapter.published == [True]
    engine.calls.clear()
    sync_weights(SimpleNamespace(generator=gen, learner=learner))
    assert engine.calls == [("reset_prefix_cache",)]  # every pair drawn, no base weight reloaded
    assert gen.adapter.received == ADAPTER * 2 and gen.adapter.published == [True, False]
    gen.sleep()
    engine.calls.clear()
    sync_weights(SimpleNamespace(generator=gen, learner=learner))
    assert ("reload_weights", NAMES) in engine.calls and gen.adapter.published[-1] is True


def test_the_engine_adapter_waits_for_every_weight_under_peft_saved_names(policy):
    """Its folder holds peft's adapter_config.json from the start; it expects the adapter's weights under the
    names peft saves them with, keeps host copies in the engine's LoRA dtype, and refuses to generate before an
    adapter is loaded."""
    import copy
    import json
    from pathlib import Path

    from peft import get_peft_model_state_dict

    from tsrl.generation.vllm_lora import EngineAdapter
    from tsrl.models.lora import LoraSettings, add_adapter

    model, _ = policy
    wrapped = add_adapter(copy.deepcopy(model), LoraSettings(r=4))
    adapter = EngineAdapter(wrapped, torch.bfloat16)
    assert adapter.names == set(get_peft_model_state_dict(wrapped))
    assert json.loads((Path(adapter.folder) / "adapter_config.json").read_text())["r"] == 4
    name = sorted(adapter.names)[0]
    adapter.receive(name, torch.ones(2, 2))
    assert adapter.received[name].dtype == torch.bfloat16 and adapter.received[name].device.type == "cpu"
    with pytest.raises(UserError, match="no LoRA adapter yet"):
        adapter.check_loaded()
    adapter.remove_folder()
    assert not Path(adapter.folder).exists()
