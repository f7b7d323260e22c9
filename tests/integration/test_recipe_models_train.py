"""Each model config of the paper recipes trains one step through the real tsrl-train, on a tiny random folder saved
with the class of its real checkpoint: Llama (llama31_8b), Qwen2 (qwen25_3b), Qwen3 (qwen3_4b, thinking off) and
a vision-language Mistral 3 with FP8 weights (ministral3_8b), each in the config's own dtype (bfloat16) with
gradient checkpointing, as the config sets them.

Measured here (2 cores, forked runs): 3–16 s a run, the first paying for the ladder it builds. The Ministral 3
folder is one that AutoModelForCausalLM refuses (a Mistral3Config); the others pin that the configs keep loading.
"""

import json

import pytest
from safetensors.torch import load_file

from tsrl.testing.cli import read_metrics
from tsrl.testing.model_folders import save_mistral3, save_text_model

pytestmark = pytest.mark.slow

SMALL = [
    "trainer.max_steps=1",
    "trainer.prompts_per_step=4",
    "trainer.group_size=4",
    "generator.max_new_tokens=16",
    "trainer.eval.samples=1",
    "trainer.eval.max_prompts=2",
]
CONFIGS = {  # model config → (class of the tiny folder, the class its checkpoints are saved as)
    "llama31_8b": ("llama", "LlamaForCausalLM"),
    "qwen25_3b": ("qwen2", "Qwen2ForCausalLM"),
    "qwen3_4b": ("qwen3", "Qwen3ForCausalLM"),
    "ministral3_8b": ("mistral3_fp8", "Ministral3ForCausalLM"),
}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_model_config_loads_and_trains_a_step(config, cli, cache_dir, tmp_path):
    family, saved_as = CONFIGS[config]
    folder = tmp_path / family
    if family == "mistral3_fp8":
        save_mistral3(folder, fp8=True)
    else:
        save_text_model(folder, family)
    run = tmp_path / "run"
    overrides = [f"model={config}", f"model.path={folder}", f"model.cache_dir={tmp_path / 'exports'}", *SMALL]
    result = cli([*overrides, f"reward.ladder_dir={cache_dir / 'ladders'}", f"run_dir={run}"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    (row,) = read_metrics(run)
    assert row["train/grad_norm"] > 0  # a real update: some group had rewards that differ
    policy = run / "checkpoints" / "step_000001" / "policy"
    saved = json.loads((policy / "config.json").read_text())
    assert saved["architectures"] == [saved_as] and "quantization_config" not in saved
    weights = load_file(policy / "model.safetensors")
    assert {str(t.dtype) for t in weights.values()} == {"torch.bfloat16"}
    if family == "mistral3_fp8":
        (export,) = (tmp_path / "exports").iterdir()
        assert "exporting its text decoder in bfloat16" in result.stdout + result.stderr
        before = load_file(export / "model.safetensors")
        assert set(before) == set(weights) and not any(n.startswith(("vision", "multi_modal")) for n in weights)
        assert any(not before[n].equal(weights[n]) for n in weights)  # trained from the exported weights
        assert saved["llama_4_scaling"] == {"original_max_position_embeddings": 16384, "beta": 0.1}
