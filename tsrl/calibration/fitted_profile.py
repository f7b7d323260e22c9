"""The judge profile (tsrl/judging/profile.py) of a fit (fit.py, with fit_lists.py's where lists were asked): every
fitted value with its interval as its source (`profile_from_fit`)."""

from __future__ import annotations

import math
from typing import Any

from tsrl.judging.profile import JudgeProfile

BLIND_SCALE = 1000.0
"""τ or σ_g a profile gets when its fit finds no positive signal: large enough that q no longer matters."""


def profile_from_fit(fit: dict[str, Any], name: str, judge: str, command: str) -> JudgeProfile:
    """The judge profile of a fit: every fitted value (fit_parameters) with its interval as its source, a
    description of what it was fitted to and found, and the fit itself."""
    serial = {
        "estimates": {k: x.row() for k, x in fit["estimates"].items()},
        "signal_test": fit["signal_test"],
        "data": fit["data"],
        "log_likelihood": fit["log_likelihood"],
    }
    lists = fit.get("lists")
    if lists:
        serial["lists"] = {
            "estimates": {k: x.row() for k, x in lists["estimates"].items()},
            "frame_test": lists["frame_test"],
            "data": lists["data"],
            "log_likelihood": -float(lists["nll"]),
        }
    description = fit_description(fit, judge, command)
    return JudgeProfile(name, description, parameters=fit_parameters(fit), sources=fit_sources(fit), fit=serial)


def fit_parameters(fit: dict[str, Any]) -> dict[str, float]:
    """The simulator's parameters from a fit's natural-scale estimates. Where the fit finds no positive signal
    (1/τ or 1/σ_g ≤ 0 at the estimate), τ or σ_g is BLIND_SCALE and the biases and the scale are rescaled with it,
    so the simulated answers keep the rates the judge showed (σ(b) first-position wins, its grade distribution)
    while q stops mattering."""
    e, (v, g) = fit["estimates"], (fit["natural"]["verdicts"], fit["natural"]["grades"])
    tau = 1.0 / v[0] if v[0] > 1.0 / BLIND_SCALE else BLIND_SCALE
    sigma = 1.0 / g[2] if g[2] > 1.0 / BLIND_SCALE else BLIND_SCALE
    ties, length_pair = e["tie_band"].fixed == "", e["length_weight_pair"].fixed == ""
    params = {
        "tau": tau,
        "position_bias": v[1] * tau,
        "tie_band": math.exp(v[2]) * tau if ties else 0.0,
        "length_weight_pair": v[2 + ties] * tau if length_pair else 0.0,
        "score_centre": g[0] * sigma,
        "score_scale": math.exp(g[1]) * sigma,
        "rubric_noise": sigma,
        "frame_noise": 0.0,
        "length_weight_grade": g[3] * sigma if len(g) > 3 else 0.0,
        "taste": 0.0,
        "text_error": 0.0,
        **fit["scale"],
    }
    if fit.get("lists"):  # the frame apart from the item noise: only lists show it
        params.update(list_parameters(fit["lists"], sigma))
    return {k: (round(float(x), 4) if k != "grade_levels" else int(x)) for k, x in params.items()}


def fit_sources(fit: dict[str, Any]) -> dict[str, str]:
    """Where each parameter of fit_parameters comes from: its estimate and interval, or why it is 0 or fixed."""
    e = fit["estimates"]
    fitted = ("tau", "position_bias", "tie_band", "length_weight_pair", "score_centre", "score_scale")
    sources = {key: cite(e[key]) for key in (*fitted, "length_weight_grade")}
    sources["rubric_noise"] = (
        f"{cite(e['grade_noise'])}; the whole grade noise σ_g (frame and item: one item per "
        "grade call does not separate them)"
    )
    sources["frame_noise"] = (
        f"0: folded into rubric_noise (σ_η beyond the verdicts' item noise would be "
        f"{e['frame_noise'].value:.3g}, 95 % CI [{e['frame_noise'].low:.3g}, "
        f"{e['frame_noise'].high:.3g}])"
    )
    sources["taste"] = "0: a fitted profile folds per-text taste into τ and σ_g"
    sources["text_error"] = (
        "0: not estimated; the fit takes answers as independent given q, so a per-text error shared across a "
        "text's verdicts and grade is folded into τ and σ_g (with ranks for q it is indistinguishable from quality)"
    )
    for key in ("grade_lo", "grade_hi", "grade_levels"):
        sources[key] = "the judge's grade scale (0–10 integers), not fitted"
    if fit.get("lists"):
        sources.update(list_sources(fit["lists"], e["grade_noise"]))
    return sources


def fit_description(fit: dict[str, Any], judge: str, command: str) -> str:
    """What the profile was fitted to (the `judge`, by `command`) and what the fit found."""
    e, data, test, lists = fit["estimates"], fit["data"], fit["signal_test"], fit.get("lists")
    description = (
        f"{judge}, fitted by `{command}` to {data['verdicts']} verdicts and {data['grades']} grades "
        f"on a ranked ladder (latent: the task's {data['latent']}). Its verdicts follow the latent "
        f"quality with likelihood ratio {test['lr']:.1f} (p = {test['p_value']:.2g}) against a judge "
        f"blind to it; the first shown wins {100 * e['p_first_if_equal'].value:.0f} % of equal pairs."
    )
    if not lists:
        return description
    frame, noise = lists["estimates"]["frame_noise"], lists["estimates"]["list_noise"]
    return description + (
        f" Its {lists['data']['lists']} lists ({lists['data']['orders']} orders of each prompt's anchors) put a "
        f"call's frame at σ_η = {frame.value:.3g} and the item noise at σ_list = {noise.value:.3g}."
    )


def cite(est: Any) -> str:
    """The source line of a fitted estimate (a fit.py Estimate): its interval, or why it is fixed."""
    if est.fixed:
        return f"fitted: {est.fixed}"
    blind = " (no positive signal at the estimate: set so that q stops mattering)" if math.isinf(est.high) else ""
    return f"fitted: 95 % CI [{est.low:.3g}, {est.high:.3g}]{blind}"


def list_parameters(lists: dict[str, Any], grade_noise: float) -> dict[str, float]:
    """From the list fit (θ = α₀, log α₁, α₂ = 1/σ_list, ρ = σ_η/σ_list, α_π, …): list_noise, list_position and
    frame_noise, and rubric_noise = √max(σ_g² − σ_η², 0), so a pointwise grade keeps the whole noise σ_g the grades
    showed. σ_list is BLIND_SCALE where the lists show no positive signal, as τ and σ_g are."""
    theta = lists["natural"]
    sigma = 1.0 / theta[2] if theta[2] > 1.0 / BLIND_SCALE else BLIND_SCALE
    frame = abs(theta[3]) * sigma
    return {
        "list_noise": sigma,
        "list_position": theta[4] * sigma,
        "frame_noise": frame,
        "rubric_noise": math.sqrt(max(grade_noise**2 - frame**2, 0.0)),
    }


def list_sources(lists: dict[str, Any], grade_noise: Any) -> dict[str, str]:
    """The sources of list_parameters' values."""
    e, data = lists["estimates"], lists["data"]
    asked = f"from {data['lists']} lists, {data['orders']} orders of each prompt's anchors"
    return {
        "list_noise": f"{cite(e['list_noise'])} {asked}",
        "list_position": f"{cite(e['list_position'])} {asked} (the first slot's gain over the last)",
        "frame_noise": f"{cite(e['frame_noise'])} {asked}: the offset a call's grades share",
        "rubric_noise": (
            f"√max(σ_g² − σ_η², 0): the pointwise grades' whole noise σ_g ({cite(grade_noise)}) less the lists' "
            "frame, so a grade alone keeps σ_g"
        ),
    }
