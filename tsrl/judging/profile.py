"""Judge profiles: the simulated judge's perception parameters as a named, sourced YAML (`judge.profile=…`).

A profile is a file under tsrl/judging/profiles/ (shipped: `ideal` and profiles built from published
measurements of LLM judges) or one written by `tsrl-judge-check check.fit=true` from a real judge's answers:

    name: …
    description: …
    parameters: {tau: 1.0, position_bias: 0.3, …}   # RubricSimConfig fields; the rest keep their defaults
    sources: {tau: "…", position_bias: "…", …}       # where each number comes from ("none — …" if nowhere)
    fit: {…}                                          # fitted profiles only: intervals, data, log-likelihood

docs/judge_simulator.md lists every shipped profile with its sources; tsrl/calibration/fitted_profile.py turns a fit
into a profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tsrl.errors import ConfigError

PROFILE_DIR = Path(__file__).parent / "profiles"
PROFILE_FIELDS = (
    "tau",
    "position_bias",
    "taste",
    "score_centre",
    "score_scale",
    "rubric_noise",
    "frame_noise",
    "length_weight_pair",
    "length_weight_grade",
    "tie_band",
    "grade_lo",
    "grade_hi",
    "grade_levels",
    "text_error",
    "list_noise",
    "list_position",
)
NULLABLE = ("list_noise",)
"""Parameters that may be null in a profile: list_noise (null = the same as rubric_noise)."""


@dataclass(frozen=True)
class JudgeProfile:
    name: str
    description: str
    parameters: dict[str, float | None]
    sources: dict[str, str]
    fit: dict[str, Any] = field(default_factory=dict)


def shipped_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def profile_path(ref: str) -> Path:
    if ref.endswith((".yaml", ".yml")):
        return Path(ref).expanduser()
    return PROFILE_DIR / f"{ref}.yaml"


def load_profile(ref: str) -> JudgeProfile:
    """The profile `ref` names (a shipped name or a .yaml path), checked: every parameter a known field with a
    source. Errors name the file and the fix."""
    path = profile_path(ref)
    if not path.is_file():
        raise ConfigError(
            f"judge.profile={ref!r}: there is no {path}. Shipped profiles: "
            f"{', '.join(shipped_profiles())}; or give the path of a .yaml that "
            "`tsrl-judge-check check.fit=true` wrote."
        )
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(
            f"judge profile {path} is not readable YAML ({err}); rewrite it with "
            "`tsrl-judge-check check.fit=true` or fix it by hand."
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("parameters"), dict):
        raise ConfigError(
            f"judge profile {path} has no 'parameters' mapping; a profile holds name, description, "
            "parameters and sources (tsrl/judging/profiles/ideal.yaml is an example)."
        )
    params, sources = data["parameters"], data.get("sources") or {}
    unknown = sorted(set(params) - set(PROFILE_FIELDS))
    if unknown:
        raise ConfigError(
            f"judge profile {path} sets {', '.join(unknown)}, which the simulated judge does not "
            f"have; its parameters are {', '.join(PROFILE_FIELDS)}."
        )
    unsourced = sorted(name for name in params if not str(sources.get(name, "")).strip())
    if unsourced:
        raise ConfigError(
            f"judge profile {path}: {', '.join(unsourced)} without a source; give each parameter "
            "a 'sources' entry (\"none — …\" where there is none)."
        )
    if not all(is_number(v) or (v is None and k in NULLABLE) for k, v in params.items()):
        raise ConfigError(
            f"judge profile {path}: every parameter must be a number (list_noise may be null), got {params}."
        )
    return JudgeProfile(
        name=str(data.get("name", path.stem)),
        description=str(data.get("description", "")),
        parameters={k: v if v is None else float(v) if k != "grade_levels" else int(v) for k, v in params.items()},
        sources={k: str(v) for k, v in sources.items()},
        fit=dict(data.get("fit") or {}),
    )


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def write_profile(profile: JudgeProfile, path: Path) -> None:
    body = {
        "name": profile.name,
        "description": profile.description,
        "parameters": profile.parameters,
        "sources": profile.sources,
    }
    if profile.fit:
        body["fit"] = profile.fit
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=110))
