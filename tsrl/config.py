"""Run configuration: the trainer's own dataclasses, CommandConfig (the root fields every command's config
shares) and tsrl-train's root RunConfig; the Hydra ConfigStore is built from the component registries
(tsrl.registry), so this module imports no component.

YAML files under configs/<group>/ extend the schemas `<name>_schema` that `register_configs` stores; the CLI
converts the composed config once with OmegaConf.to_object, so below the CLI only typed dataclasses travel.
A misspelled key or a wrong type is rejected by Hydra at start; range and cross-field checks live in each
dataclass's __post_init__ and raise ConfigError.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from difflib import get_close_matches
from pathlib import Path
from typing import Any

from omegaconf import MISSING

from tsrl.errors import ConfigError
from tsrl.registry import FAMILIES, load_components

CONFIG_PACKAGE = "tsrl.configs"  # configs/ as installed: every command composes its YAML from here


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

    def __post_init__(self) -> None:
        if self.every < 0 or self.samples < 1 or self.max_prompts < 0:
            raise ConfigError(
                f"trainer.eval needs every >= 0, samples >= 1 and max_prompts >= 0; got every={self.every}, "
                f"samples={self.samples}, max_prompts={self.max_prompts}."
            )


@dataclass
class CheckpointConfig:
    """Checkpoints: policy in Hugging Face format plus optimizer, scheduler, RNG and data position."""

    every: int = 0
    """Save every N steps (0 = only at the end)."""
    keep: int = 2
    """Keep the newest N checkpoints."""
    resume: str = "never"
    """never | auto (newest checkpoint in run_dir) | a checkpoint directory."""

    def __post_init__(self) -> None:
        if self.every < 0 or self.keep < 1:
            raise ConfigError(
                f"trainer.checkpoint needs every >= 0 and keep >= 1; got every={self.every}, keep={self.keep}."
            )


PIPELINES, FILLS = ("sync", "stream", "overlap"), ("none", "resample")


def per_process_prompts(prompts_per_step: int, processes: int) -> int:
    """Each process's share of trainer.prompts_per_step, the global batch; a ConfigError naming the nearest valid
    batches when it does not split evenly over `processes`."""
    share, left = divmod(prompts_per_step, processes)
    if left:
        below, above = share * processes, (share + 1) * processes
        nearest = f"{below} or {above}" if below else f"{above}"
        raise ConfigError(
            f"trainer.prompts_per_step={prompts_per_step} does not split over {processes} processes; use {nearest} "
            f"(a multiple of {processes}: the batch is shared equally between the processes)."
        )
    return share


@dataclass
class TrainerConfig:
    """The RL loop: batch shape, optimisation and schedule."""

    max_steps: int = 100
    """Training steps (one step = generate, score, update), times step_multiplier."""
    step_multiplier: int = 1
    """The method's share of steps: the run trains max_steps × step_multiplier steps. method=one_anchor and
    method=rubric set 4, as TSRL trains its single-comparison baselines (Table 4: 880 steps against TSRL's 220,
    the same judge calls at k = 4). Applied once when the config is built (max_steps then holds the product and
    step_multiplier 1, so a saved config rebuilds the same run)."""
    prompts_per_step: int = 8
    """B: prompts per step over every process (the global batch): W processes take B/W each, so a recipe trains
    the same batch on one GPU and on eight; B must be a multiple of W (checked at start, `per_process_prompts`)."""
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
    max_judge_calls: int = 0
    """Stop after the step whose judge calls bring the run's training total to N or more, then evaluate and
    save as at max_steps (0 = no limit). Comparisons at an equal judge budget (TSRL §4.11): each method trains
    as many steps as N calls pay for. The one-time setup (a ladder's round-robin) does not count."""
    share_prompt: bool = True
    """Run each distinct prompt of a micro-batch once and share its keys/values with the group's completions:
    the same log-probs and gradients up to rounding, the prompt's FLOPs divided by G (tsrl/models/forward.py).
    false = one full forward per sequence."""
    pipeline: str = "sync"
    """sync: each step generates, scores, then updates | stream: the judge scores each group as soon as its G
    completions exist, while the rest of the batch is generated (hf: per generator.prompts_per_call chunk; vllm:
    per finished request), so a step costs generate + the judging left after the last group + update; still
    on-policy, the same rewards as sync | overlap: the judge scores one step's groups while the policy updates
    on the step before's and generates the next's (tsrl/training/pipeline.py), so a step costs
    max(generate + update, score) instead of their sum; samples are then one policy version stale and the loss
    takes its ratio against their sampling log-probs."""
    fill: str = "none"
    """none: train on the step's groups as they come | resample (DAPO's dynamic sampling): a group whose rewards
    are all equal carries no advantage, so it is set aside and further batches are generated and scored until every
    process holds its share (prompts_per_step / processes) of groups with a signal, or fill_max_batches batches were
    drawn; the groups beyond it are not used. fill/generations_per_step counts the completions a step drew
    (Reasoning Arena's 'samples per step')."""
    fill_max_batches: int = 8
    """With fill=resample: batches (of prompts_per_step prompts over every process) a step may draw at most; a step
    that still lacks groups trains on those it has."""
    collective_timeout_s: int = 7200
    """How long a process waits for the others at a collective (gradient reduction, gathering metrics, ladders)
    before the run stops with a timeout: accelerate's own default (600 s on NCCL) is shorter than one rank's
    judging may run ahead of another's with a slow hosted judge. Setup work is shared between the processes, so
    no process waits for a whole setup job; printed at start with several processes."""
    memory_check: bool = True
    """On a GPU, refuse at start a run whose memory plan (tsrl/training/memory.py, printed at start) exceeds the
    device; false = print the plan and start anyway (the plan is an estimate)."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)

    def __post_init__(self) -> None:
        if self.pipeline not in PIPELINES:
            raise ConfigError(f"trainer.pipeline={self.pipeline!r} is unknown; use {' or '.join(PIPELINES)}.")
        if self.fill not in FILLS or self.fill_max_batches < 1:
            raise ConfigError(
                f"trainer.fill={self.fill!r} / fill_max_batches={self.fill_max_batches}: use fill "
                f"{' or '.join(FILLS)} and fill_max_batches >= 1."
            )
        if self.fill == "resample" and self.pipeline == "overlap":
            raise ConfigError(
                "trainer.fill=resample runs with trainer.pipeline=sync or stream, not overlap (an "
                "overlapped step cannot yet draw more batches while the judge scores); pick one."
            )
        if self.step_multiplier < 1:
            raise ConfigError(f"trainer.step_multiplier={self.step_multiplier} must be >= 1 (1 = train max_steps).")
        self.max_steps, self.step_multiplier = self.max_steps * self.step_multiplier, 1
        if self.group_size < 2:
            raise ConfigError(
                f"trainer.group_size={self.group_size} but group-relative advantages need at least "
                "2 completions per prompt; set trainer.group_size=2 or more."
            )
        if self.lr_schedule not in ("constant", "linear", "cosine"):
            raise ConfigError(f"trainer.lr_schedule={self.lr_schedule!r} is unknown; use constant, linear or cosine.")
        if min(self.max_steps, self.prompts_per_step, self.micro_batch_size) < 1:
            raise ConfigError("trainer.max_steps, prompts_per_step and micro_batch_size must be at least 1.")
        if not self.lr > 0:
            raise ConfigError(f"trainer.lr={self.lr} must be > 0 (AdamW's learning rate), e.g. trainer.lr=5e-4.")
        if self.collective_timeout_s < 1:
            raise ConfigError(
                f"trainer.collective_timeout_s={self.collective_timeout_s} must be >= 1 (seconds a process waits for "
                "the others at a collective; default 7200)."
            )
        if self.max_judge_calls < 0:
            raise ConfigError(f"trainer.max_judge_calls={self.max_judge_calls} must be >= 0 (0 = no limit).")
        if min(self.warmup_steps, self.weight_decay, self.grad_clip) < 0:
            raise ConfigError(
                "trainer.warmup_steps, weight_decay and grad_clip must be >= 0 (grad_clip=0 turns "
                f"clipping off); got {self.warmup_steps}, {self.weight_decay}, {self.grad_clip}."
            )


@dataclass
class EndpointConfig:
    """A stronger model that writes anchors (OpenAI-compatible chat completions): tsrl-ladder's
    `build.source=endpoint` and tsrl-train's `ladder.endpoint`."""

    base_url: str = ""
    """Its base URL, e.g. http://host:8000/v1."""
    model: str = ""
    """The served model name."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key (a local server may need none)."""
    temperature: float = 1.0
    """Sampling temperature."""
    max_tokens: int = 1024
    """Completion length cap."""
    concurrency: int = 8
    """Requests in flight."""
    timeout_s: float = 120.0
    """Per-request time limit."""
    retries: int = 3
    """Further attempts after a retryable failure (timeout, connection, 429, 5xx)."""


LADDER_BUILDS, LADDER_SOURCES = ("auto", "policy", "endpoint", "off"), ("auto", "policy", "endpoint")
LADDER_JUDGES = ("clean", "train")  # ladder.judge: which judge ranks the anchor ladders


@dataclass
class LadderStepConfig:
    """tsrl-train's first step when the training prompts have fewer anchors than the reward needs (reward.k;
    WebSight, MentalChat16K and MWAHAHA give one reference or none): the missing anchors are written by
    tsrl-ladder's builders into the run directory (ladder_anchors.jsonl, reused on resume), then trained on."""

    build: str = "auto"
    """When the missing anchors are written: auto (only where the task's data has at most one reference per
    training prompt, the one-reference datasets this step exists for; elsewhere a reward asking for more anchors
    than the data has stops the run) | policy | endpoint (always, by that writer: the anchors are then no longer
    only the task's) | off (never: the run stops)."""
    source: str = "auto"
    """Who writes under build=auto: endpoint (ladder.endpoint.*, a stronger model: TSRL's Gemini quality spectrum) |
    policy (the model group's policy under the tier instructions) | auto (endpoint if its base_url is set)."""
    tiers: dict[str, str] = field(default_factory=dict)
    """Quality tier → instruction added to the prompt; empty = reward=self_bootstrap's four tiers."""
    styles: list[str] = field(default_factory=list)
    """Style instructions crossed with the tiers; empty = one unstyled anchor per tier."""
    samples: int = 0
    """Anchors per tier × style and prompt; 0 = the fewest that give every prompt the anchors it needs."""
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    """The stronger model for source=endpoint (or auto with its base_url set)."""
    judge: str = "clean"
    """Which judge ranks the anchor ladders (once at setup, and at each self-bootstrap refresh): clean — the
    training judge without its injected noise (judge.flip_prob), or, in a run trained by a weak judge and measured
    by a strong one (distinct_judges), the evaluation judge asked as the training judge asks (judge.order); so every
    cell of a noise or judge grid compares against the same ladder | train — the training judge as it is, noise
    and weakness included (the ladder then moves with them; the run says so at start)."""

    def __post_init__(self) -> None:
        if self.judge not in LADDER_JUDGES:
            raise ConfigError(f"ladder.judge={self.judge!r} is unknown; use one of {' | '.join(LADDER_JUDGES)}.")
        if self.build not in LADDER_BUILDS or self.source not in LADDER_SOURCES:
            raise ConfigError(
                f"ladder.build={self.build!r} / ladder.source={self.source!r}: use build "
                f"{' | '.join(LADDER_BUILDS)} and source {' | '.join(LADDER_SOURCES)}."
            )
        if self.samples < 0:
            raise ConfigError(f"ladder.samples={self.samples} must be >= 0 (0 = as many as reward.k needs).")


@dataclass
class CommandConfig:
    """The root fields every Hydra command's config shares (tsrl-train, tsrl-judge-check, tsrl-eval, tsrl-ladder):
    each command's root dataclass extends it, and its YAML (configs/config.yaml, judge_check.yaml, eval.yaml,
    ladder.yaml) picks the groups."""

    task: Any = MISSING
    """The task (configs/task/): its prompts, anchors and reference sets."""
    judge: Any = MISSING
    """The judge (configs/judge/): the one tsrl-train trains with, tsrl-judge-check measures, tsrl-eval evaluates
    with (made clean) or tsrl-ladder ranks with."""
    run_dir: str = ""
    """Where the command writes its files (empty = Hydra's output directory)."""


@dataclass
class RunConfig(CommandConfig):
    """tsrl-train's root (configs/config.yaml); run_dir receives metrics, plots and checkpoints."""

    model: Any = MISSING
    eval_judge: Any = None
    """Judge of the held-out evaluation (null = the training judge without noise, position bias and budget)."""
    reward: Any = MISSING
    algo: Any = MISSING
    generator: Any = MISSING
    trainer: TrainerConfig = MISSING
    logger: Any = MISSING
    ladder: LadderStepConfig = field(default_factory=LadderStepConfig)
    """The ladder step before training (a missing ladder's anchors written first)."""
    seed: int = 0
    """Seed of the policy's sampling, data order and initialisation."""
    distinct_judges: bool = False
    """The run trains with one judge and is measured by another (TSRL's "+ Bad Judge" rows, method=tsrl_bad_judge):
    a run whose model judges are the same model, or that has no evaluation judge of its own, is refused."""

    def __post_init__(self) -> None:
        if self.distinct_judges:
            check_distinct_judges(self.judge, self.eval_judge)
        resolve = getattr(self.algo, "resolve_is_correction", None)  # a loss's config (None in some tests)
        if resolve is not None:
            # the generator decides: one that samples with the learner's own module has no mismatch to correct
            shares = getattr(type(self.generator), "SHARES_POLICY_MODULE", False)
            resolve(separate_sampler=self.generator is not None and not shares)


def override_error(err: Exception) -> str:
    """One sentence for a HydraException raised while composing a config from overrides (a misspelled key, a value
    of the wrong type, an unknown option, bad syntax), where Hydra's own report is a traceback or a paragraph."""
    from hydra.errors import MissingConfigException, OverrideParseException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

    cause = err.__cause__
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)) and cause.full_key:
        known = [k for k in cause.parent_node.keys() if k != "hydra"] if cause.parent_node is not None else []
        return not_a_setting(str(cause.full_key), known, cause.object_type)
    if isinstance(cause, ValidationError) and cause.full_key:
        return f"{cause.full_key}: {str(cause).splitlines()[0]}; give a value of the setting's type."
    if isinstance(err, MissingConfigException) and err.options:
        group = (err.missing_cfg_file or "").rpartition("/")[0]
        options = ", ".join(o for o in err.options if not o.endswith("_schema"))
        return f"{err.missing_cfg_file} is not a config; the options of {group} are: {options}."
    lines = [line.strip().rstrip(".") for line in str(err).splitlines() if line.strip()]
    said = "; ".join(line for line in lines if "hydra.cc" not in line)
    if isinstance(err, OverrideParseException):
        return f"an override is not in Hydra's override grammar ({said}); write it as key=value."
    return f"{said}."


def not_a_setting(full_key: str, known: list[str], owner: type | None) -> str:
    """One sentence for a key that names no setting: the nearest real keys, else the settings next to it."""
    parent, _, key = full_key.rpartition(".")
    near = [f"{parent}.{k}".lstrip(".") for k in get_close_matches(key, known)]
    of = f" of {owner.__name__}" if owner is not None else ""
    hint = f"did you mean {' or '.join(near)}?" if near else f"the settings there are: {', '.join(known)}."
    return f"{full_key} is not a setting{of}; {hint}"


MOVED = {"task.sandbox.": "task.limits."}  # old key prefix → new: the code task's per-test limits (task.limits)


def moved_to(key: str) -> str | None:
    """The key a setting given by its old place has now (task.sandbox.wall_s → task.limits.wall_s), or None."""
    old = next((prefix for prefix in MOVED if key.startswith(prefix)), None)
    return None if old is None else MOVED[old] + key[len(old) :]


def check_distinct_judges(judge: Any, eval_judge: Any) -> None:
    """Refuse a weak-judge run that would be measured by its own judge: no eval_judge, or two model judges that
    name the same model (simulated judges, which have no model name, pass: the CPU stand-ins)."""
    if eval_judge is None:
        raise ConfigError(
            "this method trains with a weak judge and is measured by a strong one, but eval_judge is not set; "
            "set judge.model to the weak judge and eval_judge.model (and eval_judge.base_urls) to the strong one."
        )
    trained, measured = getattr(judge, "model", None), getattr(eval_judge, "model", None)
    if trained is not None and trained == measured:
        raise ConfigError(
            f"this method trains with a weak judge and is measured by a strong one, but judge.model and "
            f"eval_judge.model are both {trained!r}; set judge.model to the weak judge (TSRL §4.4: LLaMA-3.1-8B)."
        )


def register_configs() -> None:
    """Load every component (built-in modules and plugins), then store each registered config class as
    `<family>/<name>_schema`, the trainer's as `trainer/trainer_schema` and the root as `run_schema`; put the
    installed recipes/ on Hydra's search path (configs/config.yaml reads TSRL_RECIPES_ROOT, the folder that
    holds recipes/: the repository root in an editable install, tsrl/configs from a wheel)."""
    from importlib import resources

    from hydra.core.config_store import ConfigStore

    load_components()
    recipes = Path(str(resources.files("tsrl.configs.recipes")))  # the repository's recipes/ or the wheel's copy
    os.environ.setdefault("TSRL_RECIPES_ROOT", str(recipes.parent))
    store = ConfigStore.instance()
    store.store(name="run_schema", node=RunConfig)
    store.store(group="trainer", name="trainer_schema", node=TrainerConfig)
    for family, registry in FAMILIES.items():
        for component in registry:
            store.store(group=family, name=f"{component.name}_schema", node=component.config)
