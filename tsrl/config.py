"""Run configuration: one dataclass per component, registered in Hydra's ConfigStore.

YAML files under configs/<group>/ extend these schemas; the CLI converts the composed config once with
OmegaConf.to_object, so below the CLI only typed dataclasses travel. A misspelled key or a wrong type is
rejected by Hydra at start; cross-field checks live in __post_init__ and raise ConfigError.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import MISSING

from tsrl.algo import AGGREGATES, DEFAULT_AGGREGATE, SCALES, SURROGATES
from tsrl.errors import ConfigError
from tsrl.generation import HFGeneratorConfig
from tsrl.judging import HFLocalJudgeConfig, OpenAIJudgeConfig, RubricSimConfig
from tsrl.judging.check import JudgeCheckRunConfig
from tsrl.models import HFModelConfig, TinyModelConfig
from tsrl.rewards import IntuitorConfig, LadderConfig, RewardModelConfig, SelfBootstrapConfig
from tsrl.rewards import (AdaptiveConfig, ArenaConfig, ConstitutionalConfig, InBatchConfig, OneAnchorConfig,
                          RubricConfig, VerifierConfig)
from tsrl.tasks import HumorConfig


@dataclass
class AlgoConfig:
    """Advantages and policy loss."""

    loss: str = "grpo"
    """grpo | dr_grpo | cispo."""
    adv_scale: str = "none"
    """Advantage std scaling: none (TSRL: w − mean w) | group (GRPO) | batch."""
    std_floor: float = 1e-4
    """Lower bound of the std divisor; zero-variance groups get zero advantages."""
    eps_low: float = 0.2
    """Lower clip ε of the ratio (grpo, dr_grpo)."""
    eps_high: float = 0.2
    """Upper clip ε of the ratio (grpo, dr_grpo); > eps_low is DAPO's clip-higher."""
    cispo_cap: float = 4.0
    """Absolute cap on CISPO's stop-gradient importance weight (project default)."""
    kl_beta: float = 0.0
    """Weight of the k3 KL penalty to the frozen initial policy (0 = no reference model)."""
    epochs: int = 1
    """μ: passes over each batch of rollouts."""
    minibatches: int = 1
    """Optimizer steps per pass (each over 1/minibatches of the rollouts)."""
    mask_truncated: bool = False
    """Leave completions cut at max_new_tokens out of the loss (DAPO's overlong filtering)."""
    aggregate: str = ""
    """token (DAPO) | sequence (DeepSeekMath's GRPO) | constant (Dr. GRPO); empty = the loss's own default."""

    def __post_init__(self) -> None:
        if self.loss not in SURROGATES:
            raise ConfigError(f"algo.loss={self.loss!r} is unknown; choose one of {sorted(SURROGATES)}.")
        self.aggregate = self.aggregate or DEFAULT_AGGREGATE[self.loss]
        if self.aggregate not in AGGREGATES:
            raise ConfigError(f"algo.aggregate={self.aggregate!r} is unknown; choose one of {sorted(AGGREGATES)}.")
        if self.adv_scale not in SCALES:
            raise ConfigError(f"algo.adv_scale={self.adv_scale!r} is unknown; choose one of {sorted(SCALES)}.")
        if self.epochs < 1 or self.minibatches < 1:
            raise ConfigError("algo.epochs and algo.minibatches must be at least 1.")


def inert_clip_warning(algo: AlgoConfig) -> str | None:
    """A sentence when a clipped loss runs where its importance ratio is identically 1 (one epoch, one
    minibatch, sampler = learner): the clip can never act. Said for cispo, whose clipped weight is the whole
    point, and for grpo/dr_grpo when their ε was changed from the default (a tuned clip that cannot act)."""
    if algo.epochs * algo.minibatches > 1:
        return None
    tuned = (algo.eps_low, algo.eps_high) != (0.2, 0.2)
    if algo.loss == "cispo" or tuned:
        return (f"algo.loss={algo.loss} with algo.epochs=1 and algo.minibatches=1 updates on-policy: the importance "
                "ratio is identically 1, so the clip never acts and the loss is plain policy gradient; set "
                "algo.minibatches (or algo.epochs) above 1 for off-policy updates, as the algo=cispo preset does.")
    return None


@dataclass
class EvalConfig:
    """Held-out win-rate against the reference anchors."""

    every: int = 20
    """Evaluate every N steps (and always at start and end; 0 = only start and end)."""
    samples: int = 4
    """Completions per held-out prompt."""
    max_prompts: int = 0
    """Evaluate on the first N held-out prompts (0 = all)."""
    seed: int = 1234
    """Sampling seed of evaluation (independent of the training RNG)."""


@dataclass
class CheckpointConfig:
    """Checkpoints: policy in Hugging Face format plus optimizer, scheduler, RNG and data position."""

    every: int = 0
    """Save every N steps (0 = only at the end)."""
    keep: int = 2
    """Keep the newest N checkpoints."""
    resume: str = "never"
    """never | auto (newest checkpoint in run_dir) | a checkpoint directory."""


@dataclass
class TrainerConfig:
    """The RL loop: batch shape, optimisation and schedule."""

    max_steps: int = 100
    """Training steps (one step = generate, score, update)."""
    prompts_per_step: int = 8
    """B: prompts per step on each process."""
    group_size: int = 8
    """G: completions per prompt (≥ 2: advantages are relative to the group)."""
    lr: float = 5e-4
    """Peak learning rate of AdamW."""
    lr_schedule: str = "constant"
    """constant | linear | cosine (after warmup_steps of linear warm-up)."""
    warmup_steps: int = 0
    """Linear warm-up steps."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    grad_clip: float = 1.0
    """Max global gradient norm (0 = off)."""
    micro_batch_size: int = 32
    """Sequences per forward/backward; gradients accumulate over the rest."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)

    def __post_init__(self) -> None:
        if self.group_size < 2:
            raise ConfigError(f"trainer.group_size={self.group_size} but group-relative advantages need at least "
                              "2 completions per prompt; set trainer.group_size=2 or more.")
        if self.lr_schedule not in ("constant", "linear", "cosine"):
            raise ConfigError(f"trainer.lr_schedule={self.lr_schedule!r} is unknown; use constant, linear or cosine.")
        if min(self.max_steps, self.prompts_per_step, self.micro_batch_size) < 1:
            raise ConfigError("trainer.max_steps, prompts_per_step and micro_batch_size must be at least 1.")


@dataclass
class JsonlLoggerConfig:
    """Logger `jsonl`: metrics.jsonl, eval.json, samples.jsonl and plot.png in the run directory."""

    samples_every: int = 10
    """Write the step's completions with their rewards every N steps (0 = never)."""


@dataclass
class WandbLoggerConfig(JsonlLoggerConfig):
    """Logger `wandb`: everything `jsonl` writes, plus a wandb run (offline unless mode says otherwise)."""

    project: str = "tsrl"
    """wandb project."""
    entity: str = ""
    """wandb entity (empty = your default)."""
    mode: str = "offline"
    """offline | online | disabled."""


@dataclass
class RunConfig:
    task: Any = MISSING
    model: Any = MISSING
    judge: Any = MISSING
    eval_judge: Any = None
    """Judge of the held-out evaluation (null = the training judge without noise, position bias and budget)."""
    reward: Any = MISSING
    algo: AlgoConfig = MISSING
    generator: Any = MISSING
    trainer: TrainerConfig = MISSING
    logger: Any = MISSING
    seed: int = 0
    """Seed of the policy's sampling, data order and initialisation."""
    run_dir: str = ""
    """Where metrics, plots and checkpoints go (empty = Hydra's output directory)."""


SCHEMAS: dict[str, dict[str, type]] = {
    "task": {"humor": HumorConfig},
    "model": {"tiny": TinyModelConfig, "hf": HFModelConfig},
    "judge": {"rubric_sim": RubricSimConfig, "openai": OpenAIJudgeConfig, "hf_local": HFLocalJudgeConfig},
    "reward": {"ladder": LadderConfig, "intuitor": IntuitorConfig, "reward_model": RewardModelConfig,
               "self_bootstrap": SelfBootstrapConfig},
    "algo": {"algo": AlgoConfig},
    "generator": {"hf": HFGeneratorConfig},
    "trainer": {"trainer": TrainerConfig},
    "logger": {"jsonl": JsonlLoggerConfig, "wandb": WandbLoggerConfig},
}
SCHEMAS["reward"].update({  # the ranking-core regimes (tsrl/rewards/{ladder,rubric,intragroup,verified,constitutional}.py)
    "one_anchor": OneAnchorConfig, "rubric": RubricConfig, "in_batch": InBatchConfig, "arena": ArenaConfig,
    "adaptive": AdaptiveConfig, "verifier": VerifierConfig, "constitutional": ConstitutionalConfig})


REPO = Path(__file__).resolve().parent.parent  # holds configs/ and recipes/ (editable install)


def register_configs() -> None:
    """Store every schema as `<group>/<name>_schema` and the root as `run_schema`; put recipes/ on
    Hydra's search path (configs/config.yaml reads TSRL_RECIPES_ROOT)."""
    from hydra.core.config_store import ConfigStore

    os.environ.setdefault("TSRL_RECIPES_ROOT", str(REPO))
    store = ConfigStore.instance()
    store.store(name="run_schema", node=RunConfig)
    store.store(name="check_schema", node=JudgeCheckRunConfig)  # tsrl-judge-check (configs/judge_check.yaml)
    for group, schemas in SCHEMAS.items():
        for name, schema in schemas.items():
            store.store(group=group, name=f"{name}_schema", node=schema)
