"""`model.lora.*`: train a LoRA adapter (through `peft`) instead of every weight.

With an adapter the reference policy of the KL term is the base model with the adapter switched off — no second
copy of the weights. A vLLM engine receives the base weights unmerged and the adapter itself, which it applies as
the learner does (W·x + s·B·A·x): merging into a bf16 base would round away every update smaller than half a bf16
step of the base weight (tsrl/generation/vllm_lora.py). Checkpoints hold the adapter alone (`policy/adapter/`,
loadable with `peft.PeftModel.from_pretrained`) and the merged model (`policy/`, loadable by `from_pretrained` and
vLLM; merged in the base's dtype, so it rounds as a merge does).
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
    lr: float = 0.0
    """The adapter's learning rate; 0 = trainer.lr. The GPU model configs set 2.5e-5 for their LoRA option (ours:
    docs/scaling.md, "LoRA")."""

    def __post_init__(self) -> None:
        if self.r < 0 or self.alpha <= 0 or not 0 <= self.dropout < 1 or self.lr < 0:
            raise ConfigError(
                f"model.lora needs r >= 0, alpha > 0, 0 <= dropout < 1 and lr >= 0 (0 = trainer.lr); got "
                f"r={self.r}, alpha={self.alpha}, dropout={self.dropout}, lr={self.lr}."
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


def adapter_lr(model_cfg, trainer_lr: float) -> float:
    """The learning rate of the run's trainable weights: model.lora.lr under LoRA when set, else trainer.lr."""
    settings = lora_settings(model_cfg)
    return settings.lr if settings is not None and settings.lr > 0 else trainer_lr


def active_adapter(model: torch.nn.Module) -> str:
    """The name peft gives the adapter being trained ("default")."""
    name = model.active_adapter
    return name if isinstance(name, str) else name[0]


def is_adapter_weight(name: str) -> bool:
    """Whether a parameter name (peft's, or as peft saves it) belongs to a LoRA adapter."""
    return ".lora_" in name


def saved_adapter_name(name: str, adapter: str) -> str:
    """peft's parameter name of an adapter weight as peft saves it (and vLLM loads it): without the adapter's
    name, 'base_model.model.….q_proj.lora_A.default.weight' → 'base_model.model.….q_proj.lora_A.weight'."""
    return name.replace(f".{adapter}.", ".")
