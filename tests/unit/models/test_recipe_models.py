"""The recipes' own policies: a vision-language Ministral 3 checkpoint (FP8 or not) trains its text decoder through
a one-time export, other quantizations are refused, Qwen3's thinking switch is rendered as configured, and no
reader of a completion (the judge first) sees its thinking block.

The checkpoints are tiny random folders laid out as the real ones (tsrl/testing/model_folders.py); what the real
Ministral-3-8B-Instruct-2512 folder holds was read, not run here (docs/scaling.md, "The recipes' own models").
"""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from transformers import AutoModelForCausalLM, Mistral3ForConditionalGeneration

from tsrl.config import register_configs
from tsrl.errors import ConfigError
from tsrl.generation.hf import HFGenerator, HFGeneratorConfig, chat_prompt
from tsrl.models.export import dequantized, export_reason
from tsrl.models.hf import HFModelConfig, hf_source
from tsrl.models.source import load_source
from tsrl.rewards import LadderConfig, LadderRegime, RegimeContext
from tsrl.testing.fakes import NumberTask, ScriptedJudge, number_prompt
from tsrl.testing.model_folders import save_mistral3, save_text_model
from tsrl.types import Group, Prompt, Rollout, answer_text

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
IDS = torch.tensor([[1, 7, 42, 99, 150, 3, 64, 200]])  # [1, L] any tokens of the tiny vocabularies


def load(folder: Path, cache: Path, **settings):
    """(source, model, tokenizer) as model=hf loads `folder`, exports in `cache`."""
    source = hf_source(HFModelConfig(path=str(folder), cache_dir=str(cache), **settings), None)
    return (source, *load_source(source))


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("recipe_models")
    return {
        "mistral3": save_mistral3(root / "mistral3"),
        "mistral3_fp8": save_mistral3(root / "mistral3_fp8", fp8=True),
        "qwen3": save_text_model(root / "qwen3", "qwen3"),
    }


def test_mistral3_checkpoint_trains_its_text_decoder(folders, tmp_path):
    """AutoModelForCausalLM refuses the vision-language config (as the real checkpoint is refused); model=hf exports
    the text decoder, whose logits are the full model's on text, and reuses the export the second time."""
    with pytest.raises(ValueError, match="Mistral3Config"):
        AutoModelForCausalLM.from_pretrained(folders["mistral3"])
    source, model, tokenizer = load(folders["mistral3"], tmp_path)
    assert source.path.parent == tmp_path and type(model).__name__ == "Ministral3ForCausalLM"
    exported = json.loads((source.path / "config.json").read_text())
    assert exported["architectures"] == ["Ministral3ForCausalLM"] and exported["model_type"] == "ministral3"
    assert not any(
        n.startswith(("vision", "multi_modal")) or "language_model" in n for n, _ in model.named_parameters()
    )
    full = Mistral3ForConditionalGeneration.from_pretrained(folders["mistral3"]).eval()
    with torch.no_grad():
        torch.testing.assert_close(model.eval()(IDS).logits, full(input_ids=IDS).logits, rtol=0, atol=0)
    # what vLLM's Mistral model reads for Ministral 3's attention scaling (test_vllm_ministral3.py measures it)
    assert model.config.llama_4_scaling == {"original_max_position_embeddings": 16384, "beta": 0.1}
    stamp = (source.path / "model.safetensors").stat().st_mtime_ns
    again = hf_source(HFModelConfig(path=str(folders["mistral3"]), cache_dir=str(tmp_path)), None)
    assert again.path == source.path and (again.path / "model.safetensors").stat().st_mtime_ns == stamp
    assert chat_prompt(tokenizer, Prompt("p", "hi")) == "<s>[INST]hi[/INST]"  # the folder's tokenizer came along


def test_fp8_weights_are_dequantized_explicitly_to_the_dtype(folders, tmp_path):
    """The FP8 checkpoint's export holds plain weights in model.dtype (no scale, no quantization_config left for
    transformers or vLLM to act on), equal to transformers' own dequantized reading of the same file, and close to
    the weights before quantization (the scales were applied: without them the logits would be far off)."""
    source, model, _ = load(folders["mistral3_fp8"], tmp_path)
    assert "quantization_config" not in json.loads((source.path / "config.json").read_text())
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert getattr(model, "hf_quantizer", None) is None and not any("scale" in n for n, _ in model.named_parameters())
    reference = Mistral3ForConditionalGeneration.from_pretrained(folders["mistral3_fp8"], dtype=torch.float32).eval()
    original = Mistral3ForConditionalGeneration.from_pretrained(folders["mistral3"]).eval()
    with torch.no_grad():
        ours, theirs, before = model.eval()(IDS).logits, reference(input_ids=IDS).logits, original(input_ids=IDS).logits
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)
    assert 0 < (ours - before).abs().max() < 0.05  # FP8 rounding, nothing more
    _, bf16, _ = load(folders["mistral3_fp8"], tmp_path, dtype="bfloat16")
    assert {p.dtype for p in bf16.parameters()} == {torch.bfloat16}


def test_block_scales_multiply_their_blocks_also_when_the_last_ones_are_short():
    weight = torch.randn(5, 7).to(torch.float8_e4m3fn)  # [R, C]
    scale = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])  # blocks of ⌈5/2⌉ = 3 rows × ⌈7/3⌉ = 3 columns
    expected = weight.float().clone()
    for i in range(5):
        for j in range(7):
            expected[i, j] *= scale[i // 3, j // 3]
    assert torch.equal(dequantized(weight, scale, torch.float32), expected)
    assert torch.equal(dequantized(weight, torch.tensor(2.0), torch.float32), weight.float() * 2)


def test_other_quantizations_are_refused_in_one_sentence():
    with pytest.raises(ConfigError, match=r"quantized with 'gptq'.*bfloat16 checkpoint"):
        export_reason({"model_type": "qwen3", "quantization_config": {"quant_method": "gptq"}}, Path("/m"))
    assert export_reason({"model_type": "qwen3"}, Path("/m")) == ""


def test_thinking_switch_is_rendered_as_set(folders, tmp_path):
    """Qwen3's enable_thinking=false closes an empty thinking block in the prompt; unset or true leaves the model to
    open one. The generator's prompt tokens carry the switch (every renderer goes through chat_prompt)."""
    prompt = Prompt("p", "Tell a joke.")
    head = "<|im_start|>user\nTell a joke.<|im_end|>\n<|im_start|>assistant\n"
    shown = {}
    for name, switches in (("unset", {}), ("off", {"enable_thinking": False}), ("on", {"enable_thinking": True})):
        _, model, tokenizer = load(folders["qwen3"], tmp_path, chat_template_kwargs=switches)
        shown[name] = chat_prompt(tokenizer, prompt)
    assert shown == {"unset": head, "off": head + "<think>\n\n</think>\n\n", "on": head}
    group = HFGenerator(model, tokenizer, HFGeneratorConfig(max_new_tokens=2)).generate([prompt], n=1)[0]
    assert tokenizer.decode(group.prompt_ids) == head  # the last load: thinking on
    _, model, tokenizer = load(folders["qwen3"], tmp_path, chat_template_kwargs={"enable_thinking": False})
    group = HFGenerator(model, tokenizer, HFGeneratorConfig(max_new_tokens=2)).generate([prompt], n=1)[0]
    assert tokenizer.decode(group.prompt_ids) == head + "<think>\n\n</think>\n\n"


def test_a_switch_the_template_never_reads_is_refused(folders, tmp_path):
    with pytest.raises(ConfigError, match="model.chat_template_kwargs.enable_thinking is set, but the chat template"):
        load(folders["mistral3"], tmp_path, chat_template_kwargs={"enable_thinking": False})


@pytest.mark.parametrize(
    "text, answer",
    [
        ("<think>\nLet me see.\n</think>\n\nThe answer is 4.", "The answer is 4."),
        ("  <think>short</think>4", "4"),
        ("<think>cut off by max_new_tokens", ""),  # no answer was written
        ("Let me see.\n</think>\n\n4", "4"),  # the template opened the block in the prompt
        ("A plain answer.", "A plain answer."),
        ("An answer that mentions <think> and </think> tags.", "An answer that mentions <think> and </think> tags."),
    ],
)
def test_answer_text_cuts_a_leading_thinking_block(text, answer):
    assert answer_text(text) == answer


def test_the_judge_reads_the_answer_not_the_thinking(tmp_path):
    """A ladder regime's judge gets each rollout's answer; the rollout keeps every token the policy wrote. The
    scripted judge reads the first q= number of a text: a thinking block claiming q=9 would win every comparison."""
    task = NumberTask([number_prompt("p0", [3, 1, 2, 0])])
    judge = ScriptedJudge()
    ladder = LadderRegime(
        LadderConfig(ladder_dir=str(tmp_path / "ladders"), k=4), RegimeContext(task, judge, "s", tmp_path)
    )
    ids = list(range(20))
    rollouts = [
        Rollout("<think>q=9 I am the best</think>\nq=-1 answer", ids, [0.0] * 20, False),
        Rollout("q=2.5 a", [1], [0.0], False),
    ]
    judge.requests.clear()
    batch = ladder.score([Group(task.prompts("train")[0], [1], rollouts)])
    assert rollouts[0].text == "q=-1 answer" and rollouts[0].token_ids == ids
    assert not any("think" in r.first + r.second or "q=9" in r.first + r.second for r in judge.requests)
    assert np.allclose(batch.rewards, [[0.0, 0.75]])  # q=-1 beats no anchor (3, 2, 1, 0); q=2.5 beats three


def test_qwen3_configs_turn_thinking_off_and_the_others_set_no_switch():
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        switches = {
            name: OmegaConf.to_object(compose("config", overrides=[f"model={name}"])).model.chat_template_kwargs
            for name in ("qwen3_4b", "qwen25_3b", "qwen25_7b", "llama31_8b", "ministral3_8b")
        }
    assert switches == {
        "qwen3_4b": {"enable_thinking": False},
        "qwen25_3b": {},
        "qwen25_7b": {},
        "llama31_8b": {},
        "ministral3_8b": {},
    }
