"""Checkpoints that transformers cannot train as a causal LM as they stand, exported once into a plain folder of
their text decoder in model.dtype, which then loads like any other (`model=hf`, ZeRO-3, vLLM).

Two layouts, both of them recipes' own policies:

- **A vision-language Mistral 3 checkpoint** (config model_type "mistral3", class Mistral3ForConditionalGeneration:
  Ministral 3, Mistral Small 3.1). AutoModelForCausalLM refuses its config. Its text decoder is an ordinary causal
  LM (`text_config`: model_type ministral3 or mistral) whose weights the folder holds under `language_model.model.`
  and `language_model.lm_head.` (transformers 5 saves them so; `model.language_model.` and `lm_head.` are the names
  it holds in memory, also accepted). The export keeps those weights under the causal LM's names (`model.`,
  `lm_head.`), writes `text_config` as the folder's config (with the composite's tie_word_embeddings) and leaves
  the vision tower and the projector out: tsrl's prompts are text. A trained checkpoint is then a text-only
  Ministral3ForCausalLM folder.
- **FP8 weights** (config quantization_config.quant_method "fp8": each quantized linear weight stored as
  float8_e4m3fn with a float32 scale per tensor or per block, named `weight_scale_inv` by transformers and
  `weight_scale` by vLLM, W = W8 · scale; activation scales alongside). transformers keeps such layers in FP8 on a
  GPU, where they cannot be trained, and on a CPU dequantizes them to bfloat16 with a warning. tsrl dequantizes
  explicitly, once, to model.dtype, and drops the activation scales: the export takes 2 bytes a weight in
  bfloat16 (twice the FP8 files; ~17 GB for Ministral 3 8B's text decoder), and training, checkpoints and the vLLM
  engine then see ordinary bfloat16 weights. Other quantization methods are refused: tsrl trains full-precision
  weights.

The export streams: one source shard at a time is read, renamed, dequantized and written as one output shard, so
its memory is one shard's tensors in model.dtype. It goes to model.cache_dir under a name fingerprinting the source
(config.json, the weight index, each weight file's name and size), the dtype and EXPORT_VERSION, and is made once
and atomically (build_once: the first process to finish renames its folder into place).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from tsrl.errors import ConfigError
from tsrl.models.source import DTYPES, build_once
from tsrl.progress import duration

log = logging.getLogger("tsrl")

EXPORT_VERSION = "1"  # bump when the export changes, so cached exports are rebuilt
TEXT_DECODERS = {  # composite model_type → (checkpoint prefix, causal-LM prefix) of its text decoder's weights
    "mistral3": (
        ("language_model.model.", "model."),
        ("language_model.lm_head.", "lm_head."),
        ("model.language_model.", "model."),
        ("lm_head.", "lm_head."),
    ),
}
DEQUANTIZED = ("fp8",)  # quant_method values whose weights the export dequantizes
WEIGHT_SCALES = ("weight_scale_inv", "weight_scale")  # multiplied into their weight (transformers' and vLLM's names)
WEIGHT_FILES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")  # not copied: the export writes its own weights
NOT_COPIED = {"config.json", "params.json"}  # the source's own configs (params.json: Mistral's native format)


def export_reason(config: dict[str, Any], path: Path) -> str:
    """Why the folder needs a text-decoder export ("" = it loads as it is); refuses a quantization tsrl cannot
    train from."""
    reasons = []
    if config.get("model_type") in TEXT_DECODERS:
        reasons.append(f"a vision-language {config['model_type']} checkpoint (its text decoder is trained)")
    method = quantization(config).get("quant_method")
    if method in DEQUANTIZED:
        reasons.append(f"{method}-quantized (dequantized to model.dtype: FP8 layers cannot be trained)")
    elif method is not None:
        raise ConfigError(
            f"model.path={path} holds weights quantized with {method!r}; tsrl trains full-precision weights and "
            f"dequantizes only {', '.join(DEQUANTIZED)} checkpoints: point model.path at the model's bfloat16 "
            "checkpoint."
        )
    return " and ".join(reasons)


def quantization(config: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint's quantization_config, at the top or in its text_config (where transformers looks too)."""
    return config.get("quantization_config") or (config.get("text_config") or {}).get("quantization_config") or {}


def text_decoder_folder(path: Path, dtype: str, cache_dir: str) -> Path:
    """The export of `path` in `dtype` under cache_dir, made on first use; `path` itself when it needs none."""
    config = json.loads((path / "config.json").read_text())
    reason = export_reason(config, path)
    if not reason:
        return path
    target = Path(cache_dir).expanduser() / f"{path.name}-text-{dtype}-{fingerprint(path, dtype)}"
    if target.is_dir():
        log.info("model.path=%s is %s: using its export %s", path, reason, target)
        return target
    log.info(
        "model.path=%s is %s: exporting its text decoder in %s once into %s (every weight is read and rewritten; "
        "the folder holds %d bytes a weight)",
        path,
        reason,
        dtype,
        target,
        DTYPES[dtype].itemsize,
    )
    start = time.monotonic()
    build_once(target, lambda folder: export_text_decoder(path, dtype, folder))
    log.info("export of %s done in %s", path, duration(time.monotonic() - start))
    return target


def fingerprint(path: Path, dtype: str) -> str:
    """16 hex digits naming an export: the source's config and weight index, each weight file's name and size (not
    its bytes: reading tens of GB to name a folder would cost as much as the export), the dtype, EXPORT_VERSION."""
    digest = hashlib.sha256(f"{dtype}|{EXPORT_VERSION}|".encode())
    for item in sorted(path.iterdir()):
        if item.name == "config.json" or item.name.endswith(".index.json"):
            digest.update(item.name.encode() + item.read_bytes())
        elif item.name.endswith(WEIGHT_FILES):
            digest.update(f"{item.name}:{item.stat().st_size}".encode())
    return digest.hexdigest()[:16]


def weight_files(path: Path) -> dict[str, list[str]]:
    """Each safetensors file of the folder → the tensor names it holds."""
    from safetensors import safe_open

    files = sorted(p.name for p in path.glob("*.safetensors") if not p.name.startswith("consolidated"))
    if not files:
        raise ConfigError(f"model.path={path} has no *.safetensors weights to export; tsrl reads safetensors only.")
    names: dict[str, list[str]] = {}
    for name in files:
        with safe_open(path / name, framework="pt") as reader:
            names[name] = list(reader.keys())
    return names


def renamed(name: str, prefixes: tuple[tuple[str, str], ...]) -> str | None:
    """The causal LM's name of a checkpoint tensor, None for one it leaves out (vision tower, projector); a
    folder without prefixes (a text-only checkpoint) keeps every name."""
    if not prefixes:
        return name
    return next((new + name[len(old) :] for old, new in prefixes if name.startswith(old)), None)


def is_scale(name: str) -> bool:
    """A quantization scale (weight or activation): consumed by the dequantization or dropped."""
    return name.rsplit(".", 1)[-1].endswith(("_scale", "_scale_inv"))


def dequantized(weight: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """W = W8 · s in `dtype`, with s one scale for the tensor or one per block of [⌈rows / scale rows⌉,
    ⌈cols / scale columns⌉] weights (the last blocks may be short)."""
    w, s = weight.to(torch.float32), scale.to(torch.float32)  # [R, C], [] or [1] or [R', C']
    if s.numel() > 1:
        rows, cols = s.shape[-2:]
        s = s.repeat_interleave(-(-w.shape[0] // rows), 0)[: w.shape[0]]
        s = s.repeat_interleave(-(-w.shape[1] // cols), 1)[:, : w.shape[1]]  # [R, C]
    return (w * s).to(dtype)


def scale_of(name: str, present: dict[str, str]) -> str | None:
    """The name of the scale multiplied into weight `name`, if the checkpoint has one."""
    if not name.endswith(".weight"):
        return None
    return next((name[: -len("weight")] + s for s in WEIGHT_SCALES if name[: -len("weight")] + s in present), None)


def export_tensors(
    path: Path, prefixes: tuple[tuple[str, str], ...], dtype: torch.dtype, folder: Path, quantized: bool
) -> dict[str, str]:
    """Write the text decoder's tensors, one output file per source file that holds any; returns the weight map
    (name → file). `quantized`: scales are multiplied into their weights, or dropped (activation scales)."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    files = weight_files(path)
    home = {name: file for file, names in files.items() for name in names}  # a scale may sit in another shard
    written: dict[str, list[str]] = {}
    for done, (file, names) in enumerate(files.items(), start=1):
        out: dict[str, torch.Tensor] = {}
        with safe_open(path / file, framework="pt") as reader:
            for name in names:
                new = renamed(name, prefixes)
                if new is None or (quantized and is_scale(name)):
                    continue
                tensor, scale = reader.get_tensor(name), scale_of(name, home)
                if scale is not None:
                    with safe_open(path / home[scale], framework="pt") as holder:
                        tensor = dequantized(tensor, holder.get_tensor(scale), dtype)
                elif tensor.is_floating_point() and tensor.element_size() == 1:
                    raise ConfigError(
                        f"model.path={path}: the FP8 tensor {name} has no scale beside it; cannot export."
                    )
                out[new] = tensor.to(dtype).contiguous()
        if out:
            target = "model.safetensors" if len(files) == 1 else file
            save_file(out, folder / target, metadata={"format": "pt"})
            written[target] = list(out)
        log.info("export of %s: %d of %d weight files done", path.name, done, len(files))  # long work speaks
    return {name: file for file, names in written.items() for name in names}


def export_text_decoder(path: Path, dtype: str, folder: Path) -> None:
    """Write the text decoder of `path` into `folder`: config.json (text_config of a composite, no
    quantization_config), the weights (renamed, dequantized, in dtype), every other file of the folder (tokenizer,
    chat template, generation config) as it is, and tsrl_export.json saying where it came from."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    config = json.loads((path / "config.json").read_text())
    reason = export_reason(config, path)
    prefixes = TEXT_DECODERS.get(config.get("model_type"), ())
    text = dict(config["text_config"]) if prefixes else dict(config)
    if prefixes:  # the composite's own switch decides whether its head is tied (Mistral3Config's default: true)
        text["tie_word_embeddings"] = config.get("tie_word_embeddings", True)
    for stale in ("quantization_config", "torch_dtype"):  # the export holds plain weights in `dtype`
        text.pop(stale, None)
    causal = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(text.get("model_type"))
    text["architectures"] = [causal] if prefixes and causal else config.get("architectures")
    text["dtype"] = dtype
    weight_map = export_tensors(path, prefixes, DTYPES[dtype], folder, bool(quantization(config)))
    if prefixes:  # names were rewritten: make sure they landed where the causal LM looks
        check_decoder(weight_map, text, path)
    if len(set(weight_map.values())) > 1:
        index = {"metadata": {}, "weight_map": dict(sorted(weight_map.items()))}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    (folder / "config.json").write_text(json.dumps(text, indent=1))
    for item in path.iterdir():
        if item.is_file() and item.name not in NOT_COPIED and not item.name.endswith((*WEIGHT_FILES, ".index.json")):
            shutil.copy2(item, folder / item.name)
    provenance = {"source": str(path), "why": reason, "dtype": dtype, "export_version": EXPORT_VERSION}
    (folder / "tsrl_export.json").write_text(json.dumps(provenance, indent=1))


def check_decoder(weight_map: dict[str, str], text: dict[str, Any], path: Path) -> None:
    """Refuse an export that would load with weights missing (transformers would initialise them at random): the
    embeddings, the final norm, every layer and, untied, the head must be there."""
    names = set(weight_map)
    layers = {name.split(".")[2] for name in names if name.startswith("model.layers.")}
    wanted = {"model.embed_tokens.weight", "model.norm.weight"}
    if not text.get("tie_word_embeddings"):
        wanted.add("lm_head.weight")
    missing = sorted(wanted - names) + [
        f"model.layers.{i}.*" for i in range(int(text.get("num_hidden_layers", 0))) if str(i) not in layers
    ]
    if missing:
        raise ConfigError(
            f"model.path={path}: its exported text decoder lacks {', '.join(missing[:4])}"
            f"{' …' if len(missing) > 4 else ''}; the folder's weights are not laid out as its config says (a "
            "Mistral 3 checkpoint holds them under language_model.model.): point model.path at a complete checkpoint."
        )
