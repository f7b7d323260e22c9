"""A decoder's shape — the config.json fields that decide its memory — read from a local model folder or from the
shapes shipped for the models the paper recipes name (tsrl/models/shapes/<name>.json: the values of each model's
public config.json, its hub id in `model`). The memory plan (tsrl/training/memory.py) works from it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SHAPES = Path(__file__).resolve().parent / "shapes"
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class ModelShape:
    """A decoder's shape, as its config.json gives it."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ModelShape:
        """From a config.json's fields; a multimodal config's text model (text_config) when it has one."""
        text = {**config, **config.get("text_config", {})}
        heads = text["num_attention_heads"]
        return cls(
            hidden_size=text["hidden_size"],
            intermediate_size=text["intermediate_size"],
            num_hidden_layers=text["num_hidden_layers"],
            num_attention_heads=heads,
            num_key_value_heads=text.get("num_key_value_heads") or heads,
            head_dim=text.get("head_dim") or text["hidden_size"] // heads,
            vocab_size=text["vocab_size"],
            tie_word_embeddings=bool(text.get("tie_word_embeddings", False)),
            max_position_embeddings=text.get("max_position_embeddings", 0),
        )

    def linears(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each linear layer of a decoder layer."""
        h, q, kv, i = self.hidden_size, self.q_width, self.kv_width, self.intermediate_size
        widths = [(h, q), (h, kv), (h, kv), (q, h), (h, i), (h, i), (i, h)]
        return dict(zip(LINEARS, widths))

    @property
    def q_width(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @property
    def layer_parameters(self) -> int:
        """One decoder layer: its linear layers and two norms (biases left out)."""
        return sum(a * b for a, b in self.linears().values()) + 2 * self.hidden_size

    @property
    def parameters(self) -> int:
        embeddings = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        return embeddings + self.num_hidden_layers * self.layer_parameters + self.hidden_size

    def adapter_parameters(self, rank: int, targets: tuple[str, ...] = ("all-linear",)) -> int:
        """A LoRA adapter of `rank` on the target linear layers of every decoder layer: r·(in + out) each. A target
        this shape does not know (a custom module name) counts as every linear layer (an upper bound)."""
        linears = self.linears()
        named = [t.rsplit(".", 1)[-1] for t in targets]
        chosen = linears if any(t not in linears for t in named) else {t: linears[t] for t in named}
        return self.num_hidden_layers * sum(rank * (a + b) for a, b in chosen.values())

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        return 2 * self.num_hidden_layers * self.kv_width * dtype_bytes

    def activation_bytes_per_token(self, dtype_bytes: int) -> int:
        """One decoder layer's saved activations per token (module docstring)."""
        h, i = self.hidden_size, self.intermediate_size
        return dtype_bytes * (4 * h + 2 * self.q_width + 2 * self.kv_width + 4 * i) + 4 * self.num_attention_heads + 8


def shipped_shape(model: str) -> ModelShape | None:
    """The shipped shape of a model by its hub id (tsrl/models/shapes/*.json, e.g. meta-llama/Llama-3.1-8B-Instruct)
    or by its file's name (llama31_8b); None when none is shipped."""
    for path in sorted(SHAPES.glob("*.json")):
        fields = json.loads(path.read_text())
        if model in (path.stem, fields["model"]):
            return ModelShape.from_config(fields)
    return None


def model_shape(path: str) -> ModelShape | None:
    """A local model folder's shape (its config.json), else the shipped shape of that name, else None."""
    config = Path(path).expanduser() / "config.json"
    if config.is_file():
        return ModelShape.from_config(json.loads(config.read_text()))
    return shipped_shape(path)
