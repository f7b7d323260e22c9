"""`model.lora.*`: train a LoRA adapter (through `peft`) instead of every weight.

With an adapter the reference policy of the KL term is the base model with the adapter switched off — no second
copy of the weights — and generation receives merged weights (W + s·B·A, computed per layer while it is
gathered; the trainer's own modules are never merged in place). Checkpoints hold the adapter alone
(`policy/adapter/`, loadable with `peft.PeftModel.from_pretrained`) and the merged model (`policy/`, loadable by
`from_pretrained` and vLLM).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from tsrl.errors import ConfigError


@dataclass
class LoraSettings:
    """A LoRA adapter on the policy; r = 0 trains every weight instead."""

    r: int = 0
    """Adapter rank (0 = no adapter: full fine-tuning)."""
    alpha: float = 16.0
    """Scaling numerator: the update is (alpha / r)·B·A."""
    dropout: float = 0.0
    """Dropout on the adapter's input."""
    target_modules: list[str] = field(default_factory=lambda: ["all-linear"])
    """Module names (or suffixes) that get an adapter; "all-linear" = every linear layer but the output head."""

    def __post_init__(self) -> None:
        if self.r < 0 or self.alpha <= 0 or not 0 <= self.dropout < 1:
            raise ConfigError(
                f"model.lora needs r >= 0, alpha > 0 and 0 <= dropout < 1; got r={self.r}, "
                f"alpha={self.alpha}, dropout={self.dropout}."
            )
        if self.r and not self.target_modules:
            raise ConfigError(
                "model.lora.target_modules is empty; name the layers that get an adapter "
                "(e.g. [q_proj,v_proj]) or keep the default all-linear."
            )


def lora_settings(model_cfg) -> LoraSettings | None:
    """The model config's active LoRA settings, or None (a plugin model config may have no `lora` field)."""
    settings = getattr(model_cfg, "lora", None)
    return settings if settings is not None and settings.r > 0 else None


def add_adapter(model: torch.nn.Module, settings: LoraSettings) -> torch.nn.Module:
    """The model wrapped by peft with a fresh adapter; only the adapter's weights require grad."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise ConfigError(
            "model.lora.r > 0 needs the `peft` package; run `pip install -e .[scale]` (or `make "
            "setup`), or set model.lora.r=0."
        ) from None
    targets = settings.target_modules
    config = LoraConfig(
        r=settings.r,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules="all-linear" if targets == ["all-linear"] else list(targets),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def is_adapted(model: torch.nn.Module) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "disable_adapter")
