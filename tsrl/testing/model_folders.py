"""Tiny random Hugging Face folders laid out as the recipes' own policies, for tests: Ministral 3 (a vision-language
Mistral3ForConditionalGeneration checkpoint, optionally with FP8 weights stored as Mistral stores them), and Llama,
Qwen2 and Qwen3 causal LMs (a ChatML template with Qwen3's enable_thinking switch). Random weights, a byte-level BPE
tokenizer trained on a few sentences, chat templates of our own that mimic the real ones' documented behaviour.

Sizes: width 64, 2 layers, head size 32 (vLLM's CPU attention supports it), ~60k parameters in the text decoder.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from tsrl.models.tiny import train_bpe

CORPUS = [
    "Write a short, funny joke that uses both of these words: piano, cat.",
    "The cat sat on the piano and played a song about the moon.",
    "Solve the problem step by step and give the final answer.",
    "A story about a robot who learns to paint the sea at night.",
]
QWEN3_TEMPLATE = (  # Qwen3's documented switch: enable_thinking=false closes an empty thinking block in the prompt
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- endif -%}{%- endif -%}"
)
MISTRAL_TEMPLATE = (
    "{{- bos_token -}}{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}{{- '[INST]' + message['content'] + '[/INST]' -}}"
    "{%- else -%}{{- message['content'] + eos_token -}}{%- endif -%}{%- endfor -%}"
)


def bpe_tokenizer(specials: list[str], plain: list[str], template: str, eos: str, pad: str):
    """A byte-level BPE tokenizer (vocabulary ~400) trained on CORPUS, with `specials` (skipped when decoding) and
    `plain` added tokens (kept when decoding, as Qwen3 keeps <think>), and the chat template."""
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    core = train_bpe(CORPUS, 400, specials)
    core.add_tokens([AddedToken(token, special=False, normalized=False) for token in plain])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=eos, pad_token=pad)
    tokenizer.chat_template = template
    return tokenizer


def save_text_model(folder: Path, family: str) -> Path:
    """A tiny random causal LM of `family` (llama, qwen2 or qwen3: the classes of configs/model's Llama, Qwen2.5 and
    Qwen3 policies) with a ChatML tokenizer whose template carries Qwen3's enable_thinking; returns `folder`."""
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config

    tokenizer = bpe_tokenizer(
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        ["<think>", "</think>"],
        QWEN3_TEMPLATE,
        "<|im_end|>",
        "<|endoftext|>",
    )
    kind = {"llama": LlamaConfig, "qwen2": Qwen2Config, "qwen3": Qwen3Config}[family]
    extra = {"head_dim": 32} if family != "qwen2" else {}
    config = kind(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        **extra,
    )
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_mistral3(folder: Path, fp8: bool = False, original_context: int = 16384) -> Path:
    """A tiny Mistral3ForConditionalGeneration (a Ministral 3 text decoder, a Pixtral vision tower of one layer and
    the projector), saved as transformers saves it; with `fp8`, its decoder's linear weights stored as Mistral's FP8
    checkpoints store them (quantize_fp8). `original_context`: the context YaRN and Ministral 3's attention scaling
    extend from (the real model's 16384; a small one makes both act on short sequences). Returns `folder`."""
    from transformers import Ministral3Config, Mistral3Config, Mistral3ForConditionalGeneration, PixtralVisionConfig

    tokenizer = bpe_tokenizer(["<pad>", "<s>", "</s>", "[INST]", "[/INST]"], [], MISTRAL_TEMPLATE, "</s>", "<pad>")
    tokenizer.bos_token = "<s>"
    text = Ministral3Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=512,
        rope_parameters=ministral3_rope(original_context),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    vision = PixtralVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, head_dim=16, image_size=32
    )
    torch.manual_seed(0)
    model = Mistral3ForConditionalGeneration(
        Mistral3Config(vision_config=vision, text_config=text, tie_word_embeddings=False)
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if fp8:
        quantize_fp8(folder)
    return folder


def ministral3_rope(original_context: int) -> dict:
    """Ministral 3's rope_parameters (YaRN from `original_context`, factor 16, its llama-4 attention scaling)."""
    return {
        "rope_type": "yarn",
        "rope_theta": 1000000.0,
        "factor": 16.0,
        "original_max_position_embeddings": original_context,
        "max_position_embeddings": 512,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "llama_4_scaling_beta": 0.1,
    }


def quantize_fp8(folder: Path) -> None:
    """Rewrite the folder's text-decoder linear weights in FP8 as transformers' fine-grained FP8 format holds them
    with Mistral's settings (per-tensor scales, static activation scales): weight float8_e4m3fn, weight_scale_inv =
    max|W| / 448 (W ≈ weight · weight_scale_inv), activation_scale; config.json gets its quantization_config."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    for name in [n for n in tensors if ".layers." in n and n.startswith("language_model.") and "_proj." in n]:
        weight = tensors[name].float()
        scale = weight.abs().max() / torch.finfo(torch.float8_e4m3fn).max
        tensors[name] = (weight / scale).to(torch.float8_e4m3fn)
        tensors[name.removesuffix("weight") + "weight_scale_inv"] = scale.reshape(())
        tensors[name.removesuffix("weight") + "activation_scale"] = torch.tensor(1.0)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"] = {
        "quant_method": "fp8",
        "activation_scheme": "static",
        "weight_block_size": None,
        "modules_to_not_convert": ["model.vision_tower", "model.multi_modal_projector", "lm_head"],
        "dequantize": False,
    }
    (folder / "config.json").write_text(json.dumps(config, indent=1))
