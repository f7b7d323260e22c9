"""Fit the simulated judge's perception model to a judge's answers (`tsrl-judge-check check.fit=true`).

The judge is asked every pair of a prompt's reference anchors in both orders and grades every anchor alone,
each question `repeats` times. Each anchor has a latent quality: the task's q(c) where the task has one (the
units the simulated judge works in, so the fitted profile drops into `judge=rubric_sim judge.profile=…` on that
task), else minus its rank in the ladder. The model is docs/judge_simulator.md's, with taste and the per-text
error folded into the noise (t = 0 and σ_t = 0 in a fitted profile: the fit does not estimate a per-text error):

    verdict   Δ = Δq + γ_pair·Δh + β;   P(first) = σ((Δ − δ)/τ),  P(second) = σ((−Δ − δ)/τ),  P(TIE) = the rest
    grade     u = q + γ_grade·h + N(0, σ_g²);   grade = the level whose interval of the logistic scale
              lo + (hi − lo)·σ((u − c₀)/s) holds u (an ordered probit with thresholds c₀ + s·logit(·))

fitted by maximum likelihood (each answer independent given its question: true of a sampling judge, and of a
temperature-0 judge asked each question once), in the parameters the answers pin — 1/τ, β/τ, δ/τ, γ_pair/τ and
1/σ_g, c₀/σ_g, s/σ_g, γ_grade/σ_g — which stay finite for a judge blind to quality (1/τ = 0), with a weak N(0, 10²)
penalty on each so that separated answers (every verdict for the first shown, every grade a 10) keep finite
estimates. The simulator's parameters are ratios of these; their 95 % intervals come from draws of the
estimate's normal approximation (inverse observed information), unbounded where the data cannot exclude a blind
judge. A soft verdict (P(A) from log-probs) counts as that fraction of a win (a quasi-likelihood), ½ as a TIE.
A grade call shows one item, so the call's frame η and the item's noise ε are not separable from grades alone:
σ_g is their sum, σ_g² = σ_η² + σ_ε². Taking the item noise to be the one the verdicts show (ε of std τπ/√6,
the Gumbel whose differences are the logistic of scale τ), the frame is the grade noise beyond it:
σ_η = √max(σ_g² − (τπ/√6)², 0), reported with its interval. Lists (`check.lists`) show the frame directly, several
items in one call: tsrl/calibration/fit_lists.py fits them, and a profile (tsrl/calibration/fitted_profile.py)
takes σ_η from there. The grade scale's range and levels are the judge's (0–10 integers for a model judge), not
fitted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, stats
from scipy.special import expit, log_expit, logit

from tsrl.errors import ConfigError
from tsrl.judging.simulated import surface_feature
from tsrl.types import PairRequest, Prompt, Score, ScoreRequest, Verdict

Z95 = 1.959963984540054
PRIOR_SD = 10.0
GUMBEL_STD = math.pi / math.sqrt(6.0)  # std of a Gumbel of scale 1: the item noise behind logistic(τ) verdicts


@dataclass
class Answers:
    """What a judge answered about a ladder, as the fit reads it."""

    dq: np.ndarray
    """Verdicts: q(first) − q(second)."""
    dh: np.ndarray
    """Verdicts: h(first) − h(second), h = log(1 + words)."""
    outcome: np.ndarray
    """Verdicts: 1 first, 0 second, 0.5 TIE, or a soft P(first)."""
    q: np.ndarray
    """Grades: q of the graded item."""
    h: np.ndarray
    """Grades: h of the graded item."""
    grade: np.ndarray
    """Grades: the grade given, on [lo, hi]."""
    unanswered: int = 0
    latent: str = "quality"

    ARRAYS = ("dq", "dh", "outcome", "q", "h", "grade")

    def to_json(self) -> dict[str, Any]:
        return {
            **{k: getattr(self, k).tolist() for k in self.ARRAYS},
            "unanswered": self.unanswered,
            "latent": self.latent,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Answers:
        return cls(
            **{k: np.asarray(data[k], float) for k in cls.ARRAYS},
            unanswered=int(data["unanswered"]),
            latent=str(data["latent"]),
        )


def collect_answers(
    judge: Any,
    prompts: Sequence[Prompt],
    latent: Callable[[Prompt, int, str], float],
    repeats: int = 1,
    verdicts: Sequence[Verdict] | None = None,
) -> Answers:
    """Ask `judge` every anchor pair of `prompts` in both orders and every anchor's grade, `repeats` times each
    (`verdicts`: answers to one round of the pairs already asked, in anchor-pair order, reused as the first)."""
    pairs, grades = [], []
    for p in prompts:
        items = [(latent(p, rank, a.text), surface_feature(a.text), a.text) for rank, a in enumerate(p.anchors)]
        for i in range(len(items)):
            grades.append((p, items[i]))
            for j in range(i + 1, len(items)):
                pairs += [(p, items[i], items[j]), (p, items[j], items[i])]
    asked = list(verdicts or [])
    rounds = repeats - (1 if verdicts is not None else 0)
    asked += judge.compare([PairRequest(p, a[2], b[2]) for _ in range(rounds) for p, a, b in pairs])
    scores: list[Score] = judge.score([ScoreRequest(p, item[2]) for _ in range(repeats) for p, item in grades])
    pair_rows = [
        (a[0] - b[0], a[1] - b[1], v.p_first) for (_, a, b), v in zip(pairs * repeats, asked) if v.p_first is not None
    ]
    grade_rows = [(item[0], item[1], s.value) for (_, item), s in zip(grades * repeats, scores) if s.value is not None]
    missing = len(asked) + len(scores) - len(pair_rows) - len(grade_rows)
    column = lambda rows, k: np.array([r[k] for r in rows], float)  # noqa: E731
    return Answers(
        dq=column(pair_rows, 0),
        dh=column(pair_rows, 1),
        outcome=column(pair_rows, 2),
        q=column(grade_rows, 0),
        h=column(grade_rows, 1),
        grade=column(grade_rows, 2),
        unanswered=missing,
    )


# --- the likelihoods, in the parameters the answers pin --------------------------------------------------------
# Verdicts: a = 1/τ (signal per latent unit), b = β/τ (position, in logits), d = δ/τ (tie band), c = γ_pair/τ.
# Grades: α₂ = 1/σ_g (signal), α₀ = c₀/σ_g, α₁ = s/σ_g, α₃ = γ_grade/σ_g. A judge blind to quality has a = 0 or
# α₂ = 0, where τ or σ_g is infinite: these stay finite, and the simulator's parameters are ratios of them.


def verdict_nll(theta: np.ndarray, a: Answers, with_ties: bool, with_length: bool, with_signal: bool = True) -> float:
    """−log L of the verdicts; θ = (a, b, [log d], [c])."""
    rest = list(theta[2:])
    d = math.exp(rest.pop(0)) if with_ties else 0.0
    c = rest.pop(0) if with_length else 0.0
    z = (theta[0] * a.dq if with_signal else 0.0) + theta[1] + c * a.dh
    y = a.outcome  # a soft verdict counts as that fraction of a win (a quasi-likelihood)
    ll = y * log_expit(z - d) + (1.0 - y) * log_expit(-z - d)
    if with_ties:
        ll = np.where(y == 0.5, np.log(np.maximum(expit(z + d) - expit(z - d), 1e-300)), ll)
    return -float(ll.sum()) + penalty(theta)


def penalty(theta: np.ndarray) -> float:
    """−log of a weak N(0, PRIOR_SD²) on each parameter: nothing the answers pin moves measurably, and the
    estimates stay finite when the answers separate (every verdict for the first shown, every grade a 10)."""
    return float(np.sum(np.asarray(theta) ** 2)) / (2.0 * PRIOR_SD**2)


def grade_bounds(grade: np.ndarray, lo: float, hi: float, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """The interval of the logistic scale's argument (u − c₀)/s that rounds to each grade (±inf at the ends)."""
    step = (hi - lo) / (levels - 1)
    k = np.clip(np.round((grade - lo) / step), 0, levels - 1)
    with np.errstate(divide="ignore"):
        lower = np.where(k == 0, -np.inf, logit(np.clip((k - 0.5) * step / (hi - lo), 0, 1)))
        upper = np.where(k == levels - 1, np.inf, logit(np.clip((k + 0.5) * step / (hi - lo), 0, 1)))
    return lower, upper


def grade_nll(theta: np.ndarray, a: Answers, bounds: tuple[np.ndarray, np.ndarray], with_length: bool) -> float:
    """−log L of the grades; θ = (α₀, log α₁, α₂, [α₃]): P(grade k) = Φ(α₀ + α₁U_k − α₂q − α₃h) − Φ(… L_k …)."""
    base = theta[0] - theta[2] * a.q - (theta[3] * a.h if with_length else 0.0)
    lower, upper = bounds
    log_hi = stats.norm.logcdf(base + math.exp(theta[1]) * upper)
    log_lo = stats.norm.logcdf(base + math.exp(theta[1]) * lower)
    p = np.maximum(-np.expm1(log_lo - log_hi), 1e-300)  # Φ(U) − Φ(L), stable in the tails
    return -float((log_hi + np.log(p)).sum()) + penalty(theta)


# --- maximum likelihood and intervals ---------------------------------------------------------------------------


def hessian(f: Callable[[np.ndarray], float], x: np.ndarray, step: float = 1e-4) -> np.ndarray:
    """Central finite-difference Hessian of f at x."""
    n, h = len(x), np.empty((len(x), len(x)))
    for i in range(n):
        for j in range(i, n):
            e_i, e_j = np.eye(n)[i] * step, np.eye(n)[j] * step
            h[i, j] = h[j, i] = (f(x + e_i + e_j) - f(x + e_i - e_j) - f(x - e_i + e_j) + f(x - e_i - e_j)) / (
                4 * step * step
            )
    return h


def maximise(nll: Callable[[np.ndarray], float], start: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(estimate, covariance, −log L at the estimate); the covariance is the inverse observed information."""
    result = optimize.minimize(
        nll, start, method="Nelder-Mead", options={"xatol": 1e-7, "fatol": 1e-9, "maxiter": 20000, "maxfev": 40000}
    )
    result = optimize.minimize(nll, result.x, method="BFGS")
    return result.x, covariance(hessian(nll, result.x)), float(result.fun)


def covariance(information: np.ndarray) -> np.ndarray:
    """The inverse of the observed information (symmetrised); all NaN where it is not positive definite."""
    n = len(information)
    try:
        cov = np.linalg.inv((information + information.T) / 2)
    except np.linalg.LinAlgError:
        return np.full((n, n), np.nan)
    if not np.all(np.isfinite(cov)) or np.any(np.linalg.eigvalsh((cov + cov.T) / 2) <= 0):
        return np.full((n, n), np.nan)  # a flat direction: the data do not pin the parameters
    return cov


@dataclass
class Estimate:
    value: float
    low: float
    high: float
    fixed: str = ""
    """Why the parameter was not fitted ('' when it was)."""

    def row(self) -> dict[str, Any]:
        out = {"value": round(float(self.value), 4), "ci95": [round(float(self.low), 4), round(float(self.high), 4)]}
        return {**out, "fixed": self.fixed} if self.fixed else out


def derived(
    theta: np.ndarray,
    cov: np.ndarray,
    f: Callable[[np.ndarray], np.ndarray],
    signal: int,
    reciprocal: bool = False,
    seed: int = 0,
    draws: int = 4000,
) -> Estimate:
    """f(θ) with a 95 % interval from draws of θ's normal approximation. f divides by θ[signal] (1/τ or 1/σ_g):
    where more than 2.5 % of the draws put that signal at or below zero, the data cannot exclude a judge blind
    to quality and the interval is unbounded on the side the blind judge lies."""
    value = float(f(theta[None, :])[0])
    if theta[signal] <= 0:  # no positive signal at the estimate: τ or σ_g infinite, the ratios undefined
        value = math.inf if reciprocal else math.nan
    if not np.all(np.isfinite(cov)):
        return Estimate(value, -math.inf, math.inf)
    sample = np.random.default_rng(seed).multivariate_normal(theta, cov, draws)
    values = f(sample)
    if np.mean(sample[:, signal] <= 0) > 0.025:
        positive = values[sample[:, signal] > 0]
        low = float(np.quantile(positive, 0.025)) if len(positive) else -math.inf
        return Estimate(value, low if np.all(positive >= 0) else -math.inf, math.inf)
    return Estimate(value, float(np.quantile(values, 0.025)), float(np.quantile(values, 0.975)))


def natural(theta: np.ndarray, cov: np.ndarray, i: int) -> Estimate:
    """θ[i] with its Wald 95 % interval."""
    se = math.sqrt(cov[i, i]) if np.isfinite(cov[i, i]) else math.inf
    return Estimate(float(theta[i]), theta[i] - Z95 * se, theta[i] + Z95 * se)


def fit_verdicts(a: Answers) -> dict[str, Any]:
    """Fit the verdicts; the simulator's (τ, β, δ, γ_pair) from them, and the likelihood-ratio test of 'the
    verdicts follow q at all' (a = 0)."""
    with_ties = bool(np.any(a.outcome == 0.5))
    with_length = bool(np.ptp(a.dh) > 0) if len(a.dh) else False
    start = np.array([1.0, 0.0] + ([math.log(0.2)] if with_ties else []) + ([0.0] if with_length else []))
    theta, cov, nll = maximise(lambda t: verdict_nll(t, a, with_ties, with_length), start)
    i_tie, i_len = 2, 2 + with_ties
    out = {
        "signal_per_tau": natural(theta, cov, 0),
        "p_first_if_equal": natural_probability(theta, cov),
        "tau": derived(theta, cov, lambda t: 1.0 / t[:, 0], signal=0, reciprocal=True),
        "position_bias": derived(theta, cov, lambda t: t[:, 1] / t[:, 0], signal=0),
    }
    out["tie_band"] = (
        derived(theta, cov, lambda t: np.exp(t[:, i_tie]) / t[:, 0], signal=0)
        if with_ties
        else Estimate(0.0, 0.0, 0.0, fixed="no TIE answered")
    )
    out["length_weight_pair"] = (
        derived(theta, cov, lambda t: t[:, i_len] / t[:, 0], signal=0)
        if with_length
        else Estimate(0.0, 0.0, 0.0, fixed="the anchors' lengths do not vary")
    )
    blind = maximise(lambda t: verdict_nll(t, a, with_ties, with_length, with_signal=False), theta)[2]
    lr = max(2.0 * (blind - nll), 0.0)
    return {
        "estimates": out,
        "theta": theta,
        "cov": cov,
        "nll": nll,
        "ties": with_ties,
        "length": with_length,
        "signal_test": {"lr": float(lr), "p_value": float(stats.chi2.sf(lr, 1))},
    }


def natural_probability(theta: np.ndarray, cov: np.ndarray) -> Estimate:
    """P(first shown wins | equal items) = σ(b), with the interval of b mapped through σ."""
    b = natural(theta, cov, 1)
    return Estimate(float(expit(b.value)), float(expit(b.low)), float(expit(b.high)))


def fit_grades(a: Answers, lo: float, hi: float, levels: int) -> dict[str, Any]:
    """Fit the grades on the judge's lo–hi scale with `levels` levels; the simulator's (c₀, s, σ_g, γ_grade)."""
    bounds = grade_bounds(a.grade, lo, hi, levels)
    with_length = bool(np.ptp(a.h) > 0) if len(a.h) else False
    start = np.array([float(np.median(a.q)), 0.0, 1.0] + ([0.0] if with_length else []))
    theta, cov, nll = maximise(lambda t: grade_nll(t, a, bounds, with_length), start)
    out = {
        "grade_signal_per_sigma": natural(theta, cov, 2),
        "score_centre": derived(theta, cov, lambda t: t[:, 0] / t[:, 2], signal=2),
        "score_scale": derived(theta, cov, lambda t: np.exp(t[:, 1]) / t[:, 2], signal=2),
        "grade_noise": derived(theta, cov, lambda t: 1.0 / t[:, 2], signal=2, reciprocal=True),
        "length_weight_grade": (
            derived(theta, cov, lambda t: t[:, 3] / t[:, 2], signal=2)
            if with_length
            else Estimate(0.0, 0.0, 0.0, fixed="the anchors' lengths do not vary")
        ),
    }
    return {"estimates": out, "theta": theta, "cov": cov, "nll": nll}


def frame_share(verdicts: dict[str, Any], grades: dict[str, Any], seed: int = 0, draws: int = 4000) -> Estimate:
    """σ_η = √max(σ_g² − (τπ/√6)², 0): the grade noise beyond the verdicts' item noise (1/α₂ and 1/a), with a
    95 % interval from draws of the two fits' normal approximations; unbounded when either signal may be 0."""

    def frame(a: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.sqrt(np.maximum(1.0 / alpha**2 - (GUMBEL_STD / a) ** 2, 0.0))

    a, alpha = verdicts["theta"][0], grades["theta"][2]
    value = float(frame(np.array(a), np.array(alpha))) if a > 0 and alpha > 0 else math.inf
    var_a, var_alpha = verdicts["cov"][0, 0], grades["cov"][2, 2]
    if not (np.isfinite(var_a) and np.isfinite(var_alpha)):
        return Estimate(value, 0.0, math.inf)
    rng = np.random.default_rng(seed)
    a_s, alpha_s = rng.normal(a, math.sqrt(var_a), draws), rng.normal(alpha, math.sqrt(var_alpha), draws)
    if np.mean((a_s <= 0) | (alpha_s <= 0)) > 0.025:
        return Estimate(value, 0.0, math.inf)
    sample = frame(a_s, alpha_s)
    return Estimate(value, float(np.quantile(sample, 0.025)), float(np.quantile(sample, 0.975)))


def fit_answers(a: Answers, lo: float = 0.0, hi: float = 10.0, levels: int = 11) -> dict[str, Any]:
    """Every parameter the answers pin, with its interval, the signal test and the grades' spread."""
    if len(a.outcome) < 10 or len(a.grade) < 10:
        raise ConfigError(
            f"The fit needs at least 10 readable verdicts and 10 readable grades; the judge gave "
            f"{len(a.outcome)} and {len(a.grade)}. Use more prompts (check.prompts) or repeats "
            "(check.repeats), or fix the judge's answer format first (the check's report says how)."
        )
    verdicts, grades = fit_verdicts(a), fit_grades(a, lo, hi, levels)
    estimates = {**verdicts["estimates"], **grades["estimates"], "frame_noise": frame_share(verdicts, grades)}
    values, counts = np.unique(a.grade, return_counts=True)
    return {
        "estimates": estimates,
        "signal_test": verdicts["signal_test"],
        "log_likelihood": {"verdicts": -float(verdicts["nll"]), "grades": -float(grades["nll"])},
        "data": {
            "verdicts": int(len(a.outcome)),
            "grades": int(len(a.grade)),
            "unanswered": a.unanswered,
            "latent": a.latent,
            "ties": int(np.sum(a.outcome == 0.5)),
            "grades_used": {f"{v:g}": int(c) for v, c in zip(values, counts)},
        },
        "scale": {"grade_lo": lo, "grade_hi": hi, "grade_levels": levels},
        "natural": {"verdicts": [float(x) for x in verdicts["theta"]], "grades": [float(x) for x in grades["theta"]]},
    }
