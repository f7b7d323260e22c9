"""Rewards without the trainer: score groups of completions with any regime and judge.

    import tsrl
    batch = tsrl.score_groups(prompts, completions, regime="ladder", judge="rubric_sim", k=2)
    batch.rewards  # [B, G]

The configuration is composed by Hydra from configs/ exactly as `tsrl-train` composes it (same defaults,
same validation), so every regime and judge option is reachable: keyword options go to `reward.<name>`,
anything else through `overrides=["judge.flip_prob=0.1", ...]`. Prompts are strings or `Prompt`s; a string
equal to one of the task's prompts (train or eval split) takes that prompt's id, anchors and fields (what
ladders and the simulated judge need). Regimes that read the policy (intuitor, reward_model,
self_bootstrap) need `policy=(model, tokenizer)`.

`build_scorer` builds once (ladders, reward models) and scores many batches; `score_groups` is one shot.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tsrl.config import override_error, register_configs
from tsrl.errors import UserError
from tsrl.generation import build_generator
from tsrl.judging import build_judge, close_judge, judge_fingerprint
from tsrl.rewards import RegimeContext, build_regime
from tsrl.rewards.policy_features import text_groups
from tsrl.tasks import TaskView, build_task
from tsrl.types import Group, Prompt, RewardBatch, Rollout


def hydra_value(value: Any) -> str:
    """A Python value written in Hydra's override grammar."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    escaped = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def compose_run_config(
    regime: str,
    judge: str,
    task: str,
    run_dir: str,
    overrides: Sequence[str] = (),
    reward_options: dict[str, Any] | None = None,
):
    """The typed RunConfig `tsrl-train reward=<regime> judge=<judge> task=<task> ...` would run with."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    register_configs()
    options = [f"reward.{key}={hydra_value(value)}" for key, value in (reward_options or {}).items()]
    from hydra.errors import HydraException

    with initialize_config_module("tsrl.configs", version_base="1.3", job_name="tsrl_score"):
        try:
            cfg = compose(
                "config",
                overrides=[
                    f"reward={regime}",
                    f"judge={judge}",
                    f"task={task}",
                    f"run_dir={hydra_value(run_dir)}",
                    *options,
                    *overrides,
                ],
            )
        except HydraException as err:  # unknown group, option or value: say which, without Hydra's traceback
            raise UserError(
                f"Cannot configure reward={regime} judge={judge} task={task}: {override_error(err)}"
            ) from None
    return OmegaConf.to_object(cfg)


def check_prompts(prompts: Any) -> None:
    """A UserError naming `prompts` unless it is a non-empty list of strings or Prompts (checked before anything is
    built: a wrong argument otherwise fails deep inside hashing or a regime)."""
    if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence) or not prompts:
        raise UserError(f"prompts must be a non-empty list of strings or tsrl.types.Prompt, got {prompts!r:.60}.")
    for b, prompt in enumerate(prompts):
        if not isinstance(prompt, (str, Prompt)):
            raise UserError(f"prompts[{b}] is {prompt!r:.60} ({type(prompt).__name__}); a prompt is a str or a Prompt.")


def check_completions(prompts: Sequence[Any], completions: Any) -> None:
    """A UserError naming `completions` unless it holds one non-empty list of strings per prompt, all of one size G."""
    shape = "completions must hold one list of completions per prompt, all of the same length G"
    if isinstance(completions, (str, bytes)) or not isinstance(completions, Sequence):
        raise UserError(f"{shape}, got {type(completions).__name__}.")
    if len(completions) != len(prompts):
        raise UserError(f"{shape}; got {len(prompts)} prompts and {len(completions)} lists.")
    for b, group in enumerate(completions):
        if isinstance(group, (str, bytes)) or not isinstance(group, Sequence) or not group:
            raise UserError(f"{shape}; completions[{b}] is {group!r:.60}, not a non-empty list of str.")
        wrong = next((g for g, text in enumerate(group) if not isinstance(text, str)), None)
        if wrong is not None:
            raise UserError(f"completions[{b}][{wrong}] is {group[wrong]!r:.60}; every completion is a str.")
    sizes = sorted({len(group) for group in completions})
    if len(sizes) > 1:
        raise UserError(f"{shape} (whole groups only); got group sizes {sizes}.")


def check_options(policy: Any, overrides: Any) -> None:
    """A UserError naming `policy` unless it is None or (model, tokenizer), or `overrides` unless it is a list of
    strings (a bare string would be read letter by letter)."""
    if policy is not None and not (isinstance(policy, (tuple, list)) and len(policy) == 2):
        raise UserError(f"policy must be (model, tokenizer), got {type(policy).__name__}.")
    if isinstance(overrides, str) or not all(isinstance(o, str) for o in overrides):
        raise UserError(f"overrides must be a list of strings like ['judge.flip_prob=0.1'], got {overrides!r:.60}.")


def resolve_prompt(known: dict[str, Prompt], prompt: str | Prompt) -> Prompt:
    """A string becomes the known Prompt with that text, else a bare Prompt with a stable id."""
    if isinstance(prompt, Prompt):
        return prompt
    return known.get(prompt) or Prompt(id="text-" + hashlib.sha256(prompt.encode()).hexdigest()[:12], text=prompt)


@dataclass
class Scorer:
    """A built regime over a fixed set of prompts; `score` turns completions into a RewardBatch."""

    regime: Any
    judge: Any
    known: dict[str, Prompt]  # by text: the task's prompts and the scorer's own
    tokenizer: Any = None
    setup_judge_calls: float = 0.0

    def score(self, prompts: Sequence[str | Prompt], completions: Sequence[Sequence[str]]) -> RewardBatch:
        """Rewards [B, G] for completions[b] (G texts each) of prompts[b]; whole groups only."""
        check_prompts(prompts)
        check_completions(prompts, completions)
        resolved = [resolve_prompt(self.known, p) for p in prompts]
        if self.tokenizer is not None:
            groups = text_groups(self.tokenizer, resolved, completions)
        else:
            groups = [
                Group(p, [], [Rollout(t, [], [], False) for t in texts]) for p, texts in zip(resolved, completions)
            ]
        batch = self.regime.score(groups)
        batch.metrics.update({f"judge/{k}": v for k, v in self.judge.drain_metrics().items()})
        return batch


def build_scorer(
    regime: str = "ladder",
    judge: str = "rubric_sim",
    task: str = "humor",
    prompts: Sequence[str | Prompt] | None = None,
    policy: tuple[Any, Any] | None = None,
    overrides: Sequence[str] = (),
    run_dir: str | Path | None = None,
    **reward_options: Any,
) -> Scorer:
    """Build a regime once (ladders, reward models) for `prompts` (default: the task's training prompts).

    policy=(model, tokenizer) gives regimes that read the policy its logits and a sampler; run_dir
    (default: a fresh temporary directory) receives what the regime writes (ladder.jsonl, ...).
    """
    if prompts is not None:
        check_prompts(prompts)
    check_options(policy, overrides)
    run_dir = Path(run_dir) if run_dir is not None else Path(tempfile.mkdtemp(prefix="tsrl-score-"))
    cfg = compose_run_config(regime, judge, task, str(run_dir), overrides, reward_options)
    base = build_task(cfg.task)
    known = {p.text: p for split in ("train", "eval") for p in base.prompts(split)}
    chosen = [resolve_prompt(known, p) for p in prompts] if prompts is not None else base.prompts("train")
    judge_obj = build_judge(cfg.judge, base)
    fingerprint = judge_fingerprint(cfg.judge)
    model, tokenizer = policy if policy is not None else (None, None)
    generator = build_generator(cfg.generator, model, tokenizer, chosen) if model is not None else None
    ctx = RegimeContext(
        TaskView(base, chosen), judge_obj, fingerprint, run_dir, model=model, tokenizer=tokenizer, generator=generator
    )
    try:
        built = build_regime(cfg.reward, ctx)
    except BaseException:  # e.g. the judge died during the ladder build: release its connections now
        close_judge(judge_obj)
        raise
    setup_calls = judge_obj.drain_metrics().get("calls", 0.0)
    return Scorer(built, judge_obj, {**known, **{p.text: p for p in chosen}}, tokenizer, setup_calls)


def score_groups(
    prompts: Sequence[str | Prompt],
    completions: Sequence[Sequence[str]],
    regime: str = "ladder",
    judge: str = "rubric_sim",
    task: str = "humor",
    policy: tuple[Any, Any] | None = None,
    overrides: Sequence[str] = (),
    **reward_options: Any,
) -> RewardBatch:
    """One shot: build the regime for these prompts and score their groups; see the module docstring."""
    check_prompts(prompts)
    check_completions(prompts, completions)  # before the regime is built: a wrong shape costs no judge call
    with tempfile.TemporaryDirectory(prefix="tsrl-score-") as run_dir:
        scorer = build_scorer(regime, judge, task, prompts, policy, overrides, run_dir, **reward_options)
        batch = scorer.score(prompts, completions)
    batch.metrics["judge/setup_calls"] = scorer.setup_judge_calls
    return batch
