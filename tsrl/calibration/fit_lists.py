"""Fit a judge's list grades: the frame of a call apart from the noise of its items (`check.fit=true check.lists=R`).

Each prompt's anchors are shown as one list (one call, labels R1 … Rn) in R different orders — rotations of one
random order, so the same anchor is graded in R calls and R slots. The model is the simulated judge's
(docs/judge_simulator.md), with taste and per-text errors folded into the item noise as in tsrl/calibration/fit.py:

    u_{j,i} = q_i + γ·h_i + π·x_i + η_j + ε_{j,i},   η_j ~ N(0, σ_η²) per call,  ε ~ N(0, σ_list²) per item,
    x_i = ½ − i/(n−1) (the slot's position covariate),  grade = the level whose interval of
    lo + (hi − lo)·σ((u − c₀)/s) holds u (the ordered probit of the pointwise fit)

Given η_j a call's grades are independent, so a call's likelihood is one integral over its frame, computed by
adaptive Gauss–Hermite quadrature (LIST_NODES nodes per call around the mode of the call's posterior in η,
re-centred at the estimate until the likelihood settles). The items of one call share η and the calls do not: the
frame shows as the agreement of a call's grades beyond what q says, the item noise as their spread around it, the
position effect as the slot's trend across orders. The fit works, like the pointwise one, in quantities that stay
finite for a judge blind to quality — α₀ = c₀/σ_list, α₁ = s/σ_list, α₂ = 1/σ_list, ρ = σ_η/σ_list,
α_π = π/σ_list, α₃ = γ/σ_list — with the same weak N(0, 10²) penalty, and reports σ_η, σ_list, π (and c₀, s, γ
as the lists show them) with 95 % intervals from draws of the estimate's normal approximation (fit.derived).
σ_η = 0 is a boundary where that approximation fails: a likelihood-ratio test of it (against ½χ²₀ + ½χ²₁) is
reported, and σ_η's interval reaches 0 where the test does not reject at 2.5 %. A per-text offset that every call
showing a text shares (taste, σ_t) enters each call like item noise, so it is in σ_list, and the intervals take
the R calls of a prompt as independent evidence about it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy import optimize, stats
from scipy.special import log_ndtr, logsumexp

from tsrl.calibration.fit import PRIOR_SD, Estimate, covariance, derived, grade_bounds, natural, penalty
from tsrl.errors import ConfigError
from tsrl.judging.simulated import slot_position, surface_feature
from tsrl.types import ListRequest, Prompt

LIST_NODES = 8
"""Gauss–Hermite nodes per call of the adaptive quadrature over the call's frame."""
MAX_ROUNDS = 20
"""At most this many times the nodes are re-centred on the calls' frames at the current estimate, the fit redone."""
LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


@dataclass
class ListAnswers:
    """A judge's list grades, one row per graded item, the rows of a call contiguous."""

    call: np.ndarray
    """The answered call the grade came from (0, 1, …; int)."""
    q: np.ndarray
    """The latent quality of the graded item."""
    h: np.ndarray
    """h = log(1 + words) of the graded item."""
    x: np.ndarray
    """The slot's position covariate ½ − i/(n−1)."""
    grade: np.ndarray
    """The grade given, on [lo, hi]."""
    orders: int = 1
    unanswered: int = 0
    latent: str = "quality"

    ARRAYS = ("call", "q", "h", "x", "grade")

    def to_json(self) -> dict[str, Any]:
        arrays = {k: getattr(self, k).tolist() for k in self.ARRAYS}
        return {**arrays, "orders": self.orders, "unanswered": self.unanswered, "latent": self.latent}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ListAnswers:
        arrays = {k: np.asarray(data[k], int if k == "call" else float) for k in cls.ARRAYS}
        return cls(**arrays, orders=int(data["orders"]), unanswered=int(data["unanswered"]), latent=data["latent"])


def list_orders(n: int, rounds: int, key: str) -> list[list[int]]:
    """min(rounds, n) different orders of n items: one random order (a stable hash of `key`) rotated by r·n/rounds
    places for r = 0, 1, …, so each item takes that many different slots, spread over the list."""
    base = list(range(n))
    random.Random(f"list-order|{key}").shuffle(base)
    rounds = min(rounds, n)
    return [base[s:] + base[:s] for s in (r * n // rounds for r in range(rounds))]


def collect_lists(
    judge: Any, prompts: Sequence[Prompt], latent: Callable[[Prompt, int, str], float], orders: int
) -> ListAnswers:
    """Ask `judge` each prompt's anchors as one list in `orders` different orders (list_orders) and read the
    grades; a list without a score for every item counts as unanswered."""
    node = judge
    while node is not None:  # a wrapper forwards lists to the judge inside it: every layer must answer them
        if not callable(getattr(node, "score_lists", None)):
            raise ConfigError(
                f"check.lists={orders} asks the judge to score lists, but judge {type(node).__name__} has no "
                "score_lists method; give it score_lists(requests) -> list[ListScores] or set check.lists=0."
            )
        node = getattr(node, "inner", None)
    requests, shown = [], []
    for p in prompts:
        items = [(latent(p, rank, a.text), surface_feature(a.text), a.text) for rank, a in enumerate(p.anchors)]
        for order in list_orders(len(items), orders, p.id):
            shown.append([items[k] for k in order])
            requests.append(ListRequest(p, tuple(item[2] for item in shown[-1])))
    rows: list[tuple[int, float, float, float, float]] = []
    answered = 0
    for listed, answer in zip(shown, judge.score_lists(requests)):
        if answer.values is None or len(answer.values) != len(listed):
            continue
        slots = enumerate(zip(listed, answer.values))
        rows += [(answered, q, h, slot_position(i, len(listed)), v) for i, ((q, h, _), v) in slots]
        answered += 1
    column = lambda k: np.array([r[k] for r in rows], int if k == 0 else float)  # noqa: E731
    return ListAnswers(*(column(k) for k in range(5)), orders=orders, unanswered=len(requests) - answered)


# --- the likelihood: θ = (α₀, log α₁, α₂, ρ, α_π, [α₃]) ----------------------------------------------------------


def log_interval(lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """log(Φ(upper) − Φ(lower)) for lower ≤ upper, computed in the tail where it is stable."""
    flip = (lower + upper) > 0  # both high: Φ(−lower) − Φ(−upper) is the same number, away from 1
    lo, hi = np.where(flip, -upper, lower), np.where(flip, -lower, upper)
    log_hi, log_lo = log_ndtr(hi), log_ndtr(lo)
    return log_hi + np.log(np.maximum(-np.expm1(np.minimum(log_lo - log_hi, 0.0)), 1e-300))


def interval_bounds(
    theta: np.ndarray, a: ListAnswers, bounds: tuple[np.ndarray, np.ndarray], z: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """B_L − ρz and B_U − ρz per item and frame z ([items, K]), B = α₀ + α₁·bound − α₂q − α_π·x − α₃h."""
    base = theta[0] - theta[2] * a.q - theta[4] * a.x - (theta[5] * a.h if len(theta) > 5 else 0.0)
    scale, (lower, upper) = math.exp(theta[1]), bounds
    shared = base[:, None] - theta[3] * z
    return shared + scale * lower[:, None], shared + scale * upper[:, None]


def item_terms(
    theta: np.ndarray, a: ListAnswers, bounds: tuple[np.ndarray, np.ndarray], z: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per item and frame z ([items, K] each): log P_i(z) = log(Φ(B_U − ρz) − Φ(B_L − ρz)), its derivative in B's
    shared part and in log α₁."""
    b_lo, b_hi = interval_bounds(theta, a, bounds, z)
    log_p = log_interval(b_lo, b_hi)
    with np.errstate(invalid="ignore", over="ignore"):
        r_hi = np.exp(-(b_hi**2) / 2 - LOG_SQRT_2PI - log_p)  # φ(B_U)/P: 0 at an infinite bound
        r_lo = np.exp(-(b_lo**2) / 2 - LOG_SQRT_2PI - log_p)
    lower, upper = (np.where(np.isfinite(b), b, 0.0)[:, None] for b in bounds)  # r is 0 at an infinite bound
    return log_p, r_hi - r_lo, math.exp(theta[1]) * (upper * r_hi - lower * r_lo)


def call_sums(values: np.ndarray, a: ListAnswers) -> np.ndarray:
    """Sum of per-item values over each call's rows: [items, …] → [calls, …]."""
    starts = np.flatnonzero(np.r_[True, np.diff(a.call) != 0])
    return np.add.reduceat(values, starts, axis=0)


def call_nodes(
    theta: np.ndarray, a: ListAnswers, bounds: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Where each call's quadrature nodes go, (ẑ, σ̂) each [calls]: the mode ẑ of g(z) = Σ_i log P_i(z) − z²/2
    (concave: a grid, then Newton) and σ̂ = 1/√(−g''(ẑ)); the nodes are then ẑ + σ̂·x_m."""

    def g(z: np.ndarray) -> np.ndarray:  # z: [calls, K] → g per call and z
        return call_sums(log_interval(*interval_bounds(theta, a, bounds, z[a.call])), a) - z**2 / 2

    grid = np.linspace(-6.0, 6.0, 25)
    z = grid[np.argmax(g(np.tile(grid, (a.call[-1] + 1, 1))), axis=1)]
    step = 1e-3
    for _ in range(6):  # Newton from within a grid step of the maximum of a concave g
        g_down, g0, g_up = g(z[:, None] + np.array([-step, 0.0, step])).T
        curvature = np.minimum((g_up - 2 * g0 + g_down) / step**2, -1.0)  # the prior alone gives −1
        z = z - np.clip((g_up - g_down) / (2 * step) / curvature, -0.5, 0.5)
    return z, 1.0 / np.sqrt(-curvature)


def list_nll(
    theta: np.ndarray,
    a: ListAnswers,
    bounds: tuple[np.ndarray, np.ndarray],
    centre: tuple[np.ndarray, np.ndarray],
    nodes_per_call: int = LIST_NODES,
) -> tuple[float, np.ndarray]:
    """−log L of the list grades and its gradient, each call's frame integrated out around the fixed `centre`
    (ẑ, σ̂ per call) by Gauss–Hermite: ∫ Π_i P_i(z) φ(z) dz ≈ σ̂ Σ_m w_m e^{x_m²/2} Π_i P_i(z_m) φ(z_m),
    z_m = ẑ + σ̂·x_m (at ρ = 0 one node at ẑ = 0, σ̂ = 1 is exact)."""
    x, w = hermegauss(nodes_per_call)
    mode, spread = centre
    nodes = mode[:, None] + spread[:, None] * x[None, :]  # [calls, K]
    log_w = np.log(w) + x**2 / 2 + np.log(spread)[:, None] - nodes**2 / 2 - LOG_SQRT_2PI
    z = nodes[a.call]  # [items, K]
    log_p, d_shared, d_scale = item_terms(theta, a, bounds, z)
    joint = call_sums(log_p, a) + log_w  # [calls, K]
    log_calls = logsumexp(joint, axis=1)
    posterior = np.exp(joint - log_calls[:, None])[a.call]  # each node's share of its call's likelihood
    shared = (posterior * d_shared).sum(axis=1)  # ∂ log L / ∂B per item
    grad = [shared.sum(), (posterior * d_scale).sum(), -(a.q * shared).sum(), -(posterior * z * d_shared).sum()]
    grad += [-(a.x * shared).sum()] + ([-(a.h * shared).sum()] if len(theta) > 5 else [])
    return -float(log_calls.sum()) + penalty(theta), -np.array(grad) + theta / PRIOR_SD**2


# --- the fit ----------------------------------------------------------------------------------------------------


def fit_lists(a: ListAnswers, lo: float = 0.0, hi: float = 10.0, levels: int = 11) -> dict[str, Any]:
    """σ_η, σ_list, π, c₀, s, γ with their intervals from the list grades on the judge's lo–hi scale."""
    calls = len(np.unique(a.call))
    if calls < 10:
        raise ConfigError(
            f"The list fit needs at least 10 answered lists; the judge answered {calls}. Use more prompts "
            "(check.prompts) or orders (check.lists), or fix the judge's list answers first."
        )
    bounds = grade_bounds(a.grade, lo, hi, levels)
    with_length = bool(np.ptp(a.h) > 0)
    start = np.array([float(np.median(a.q)), 0.0, 1.0, 1.0, 0.0] + ([0.0] if with_length else []))
    theta, value, fixed = maximise_lists(a, bounds, start)
    step = 1e-5  # the observed information: central differences of the exact gradient
    gradient = lambda t: list_nll(t, *fixed)[1]  # noqa: E731
    columns = [(gradient(theta + step * e) - gradient(theta - step * e)) / (2 * step) for e in np.eye(len(theta))]
    cov = covariance(np.array(columns))
    no_frame = np.where(np.arange(len(theta)) == 3, 0.0, theta)
    lr = max(2.0 * (maximise_lists(a, bounds, no_frame, frame=False)[1] - value), 0.0)
    frame_test = {"lr": lr, "p_value": float(0.5 * stats.chi2.sf(lr, 1))}  # σ_η = 0 lies on the boundary
    data = {"lists": calls, "grades": len(a.grade), "orders": a.orders, "unanswered": a.unanswered, "latent": a.latent}
    return {
        "estimates": list_estimates(theta, cov, with_length, frame_test),
        "frame_test": frame_test,
        "natural": [float(t) for t in theta],
        "cov": cov,
        "nll": value,
        "data": data,
    }


def maximise_lists(
    a: ListAnswers, bounds: tuple[np.ndarray, np.ndarray], theta: np.ndarray, frame: bool = True
) -> tuple[np.ndarray, float, tuple]:
    """(θ̂, −log L there, the likelihood's fixed arguments): BFGS with the nodes re-centred on the calls' frames at
    the current estimate until −log L moves by less than 1e-6 (at most MAX_ROUNDS times); frame=False holds ρ = 0."""
    free = (np.arange(len(theta)) != 3) | frame
    previous = math.inf
    calls = a.call[-1] + 1
    for _ in range(MAX_ROUNDS if frame else 1):  # without a frame one node per call is exact: no re-centring
        centre = call_nodes(theta, a, bounds) if frame else (np.zeros(calls), np.ones(calls))
        fixed = (a, bounds, centre, LIST_NODES if frame else 1)

        def nll(t: np.ndarray, fixed: tuple = fixed, base: np.ndarray = theta) -> tuple[float, np.ndarray]:
            full = base.copy()
            full[free] = t
            value, grad = list_nll(full, *fixed)
            return value, grad[free]

        result = optimize.minimize(nll, theta[free], jac=True, method="BFGS", options={"gtol": 1e-6})
        theta = theta.copy()
        theta[free] = result.x
        if abs(previous - result.fun) < 1e-6:
            break
        previous = result.fun
    return theta, float(result.fun), fixed


def list_estimates(
    theta: np.ndarray, cov: np.ndarray, with_length: bool, frame_test: dict[str, float]
) -> dict[str, Estimate]:
    """The simulator's list parameters as ratios of θ. σ_η's interval reaches 0 where the likelihood-ratio test
    cannot reject σ_η = 0 at 2.5 % (the normal approximation is poor next to that boundary)."""
    frame = derived(theta, cov, lambda t: np.abs(t[:, 3]) / t[:, 2], signal=2)
    if frame_test["p_value"] >= 0.025:
        frame = Estimate(frame.value, 0.0, frame.high)
    return {
        "list_signal_per_sigma": natural(theta, cov, 2),
        "frame_noise": frame,
        "list_noise": derived(theta, cov, lambda t: 1.0 / t[:, 2], signal=2, reciprocal=True),
        "list_position": derived(theta, cov, lambda t: t[:, 4] / t[:, 2], signal=2),
        "score_centre": derived(theta, cov, lambda t: t[:, 0] / t[:, 2], signal=2),
        "score_scale": derived(theta, cov, lambda t: np.exp(t[:, 1]) / t[:, 2], signal=2),
        "length_weight_grade": (
            derived(theta, cov, lambda t: t[:, 5] / t[:, 2], signal=2)
            if with_length
            else Estimate(0.0, 0.0, 0.0, fixed="the anchors' lengths do not vary")
        ),
    }


def list_lines(lists: dict[str, Any]) -> list[str]:
    """The report's lines of a list fit (its serial form: estimates as rows, frame_test, data)."""
    data = lists["data"]
    rows = []
    for name, e in lists["estimates"].items():
        note = f"   ({e['fixed']})" if "fixed" in e else ""
        rows.append(f"    {name:<22} {e['value']:>8.3f}   95% CI [{e['ci95'][0]:.3f}, {e['ci95'][1]:.3f}]{note}")
    test = lists["frame_test"]
    return [
        f"  list fit                           {data['lists']} lists, {data['grades']} grades, {data['orders']} "
        f"orders per prompt ({data['unanswered']} unanswered): a call's frame σ_η apart from its items' noise",
        *rows,
        f"    the grades of a call share a frame: likelihood ratio {test['lr']:.1f}, p = {test['p_value']:.3g} "
        "(against σ_η = 0)",
    ]
