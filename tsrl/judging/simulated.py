"""`judge=rubric_sim`: an offline *simulated* judge for tests, demos and noise sweeps.

One perception model behind both protocols (docs/judge_simulator.md has the equations). The item c shown in
call j is perceived as u_j(c) = q(c) + t(c) + e(c) + γ_m·h(c) + η_j + ε_{j,c}: the task's latent quality q, a
fixed per-text taste offset t (shared with the derived evaluation judge), a per-text error e ~ N(0, σ_t²) that
every call showing the text shares and the evaluation judge draws afresh (σ_t = `text_error`, default 0: with it
verdicts against different anchors are no longer conditionally independent, TSRL §2.1's assumption), a surface
feature h (log length) weighted per protocol m (γ_pair, γ_grade), an offset η_j ~ N(0, σ_η²) shared by
everything shown in one call (the grade's reference frame; it cancels in a verdict), and per-item perception
noise ε. A verdict is a Bradley–Terry draw on the two items of one call, with a position bias β and Rao–Kupper
ties of band δ; a grade maps u through a compressive logistic scale onto the range [grade_lo, grade_hi] and
rounds it to one of grade_levels values, so ties and discrimination collapse arise from the parameters. The
defaults are the earlier simulator exactly (γ = σ_η = δ = σ_t = 0, range 0–10, 11 levels), and
`judge.profile` sets the parameters from a sourced file (tsrl/judging/profile.py). The earlier description:

It is not an LLM. Each task supplies a latent quality q(c) computed from observable properties of the
response (for humor: both words present, length band, repetition, punchline shape). A verdict on
(first, second) is a Bradley–Terry draw P(first ≻ second) = σ((q₁ + bias − q₂)/τ), where bias is an
optional first-position advantage, plus a fixed per-text "taste" offset in [−taste, +taste]. Identical
qualities give a tie (½). Verdict flips with probability flip_prob (the TSRL paper's §4.5 noise injection)
are applied by the Noise wrapper that `build_judge` puts around this judge, per comparison by default
(`noise_scope`), with a fresh draw for every judgment asked. The judge's own randomness is a hash of (seed,
prompt id, first, second), so a repeated question gets the same unnoised answer — like a temperature-0 LLM judge
behind a cache — and runs are reproducible without judge state.

Pointwise scores (the Rubrics baseline) follow TSRL §2.1's model of a rubric score, q(c) + ε with
ε ~ N(0, σ²_rub): the grade is 10·σ((q + ε − score_centre)/score_scale), rounded to an integer like a
rubric grade, with ε drawn once per (seed, prompt, response) — a temperature-0 grader whose error is fixed
per text. σ_rub (`rubric_noise`, latent-quality units, the same units as τ) defaults to 1.5, a project
choice: the paper's premise is that a pointwise grade is *noisier* than a pairwise verdict. Two responses one
latent unit apart are then ordered correctly by their grades with probability Φ(1/(1.5·√2)) ≈ 0.68 (less
after rounding ties), against σ(1) ≈ 0.73 for one pairwise verdict at τ = 1; with σ_rub = 0 the simulated
rubric would be the less noisy of the two. flip_prob's grade noise (a grade replaced by a uniformly random one)
is the Noise wrapper's, as for every judge (tsrl/judging/noise.py), drawn per judgment.

A list (`score_lists`, one call showing n responses under R1 … Rn in the caller's order) grades slot i = 0 … n−1
from u_j(c_i) = q + t + e + γ_grade·h + η_j + ε_{j,i} + π·(½ − i/(n−1)): one frame η_j ~ N(0, σ_η²) shared by every
item of the call, item noise ε ~ N(0, σ_list²) per slot (σ_list = `list_noise`, default `rubric_noise`) and a
linear position effect π = `list_position` (first slot +π/2, last −π/2; 0 for a single item), each u then graded
like a pointwise grade. Every draw is a stable hash of (seed, prompt id, the responses in shown order): the same
list in the same order gets the same scores; another order is another call with its own η and ε. So the scores
of one call move together with its frame, while their order within the call does not see it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, ClassVar

from tsrl.errors import ConfigError
from tsrl.judging.base import JudgeCounters, stable_uniform
from tsrl.judging.profile import load_profile
from tsrl.judging.wrappers import JudgePolicyConfig
from tsrl.registry import JUDGES
from tsrl.types import ListRequest, ListScores, PairRequest, Prompt, Score, ScoreRequest, SimulatedQuality, Verdict

Quality = Callable[[Prompt, str], float]


@dataclass
class RubricSimConfig(JudgePolicyConfig):
    """Judge `rubric_sim`: simulated Bradley–Terry judge over the task's latent quality. It goes through the
    same wrappers as the model judges (order, noise, failure policy, cache, budget: JudgePolicyConfig)."""

    OPERATIONAL: ClassVar[tuple[str, ...]] = (*JudgePolicyConfig.OPERATIONAL, "profile")
    """`profile` names where the parameters came from; the parameters themselves are in the fingerprint."""

    tau: float = 1.0
    """Temperature of the Bradley–Terry verdicts (lower = more decisive)."""
    position_bias: float = 0.0
    """Extra latent quality given to whichever response is shown first."""
    taste: float = 0.25
    """Half-width of a fixed per-text offset t(c) added to q, shared with the derived evaluation judge: part of
    what this judge takes quality to be (docs/judge_simulator.md)."""
    text_error: float = 0.0
    """σ_t: std of a normal per-text error, one draw per (seed, text_error_seed, text) shared by every call that
    shows the text (verdicts against every anchor, grades): 0 keeps verdicts conditionally independent given q + t."""
    text_error_seed: int = 0
    """Which draw of the per-text errors; the derived evaluation judge takes the next one (clean_judge_config)."""
    score_centre: float = 3.0
    """Latent quality that maps to a pointwise score of 5."""
    score_scale: float = 1.5
    """Latent-quality units per logistic unit of the pointwise score."""
    rubric_noise: float = 1.5
    """σ_rub: std of the Gaussian error ε added to q before grading (TSRL §2.1; project default 1.5)."""
    frame_noise: float = 0.0
    """σ_η: std of the offset shared by everything shown in one call (a grade's reference frame, shared by every
    item of a list; cancels in a verdict, where both items share the call)."""
    length_weight_pair: float = 0.0
    """γ_pair: latent units per unit of h = log(1 + words) the verdicts add (a length bias)."""
    length_weight_grade: float = 0.0
    """γ_grade: the same for grades."""
    tie_band: float = 0.0
    """δ: a verdict is TIE when the two perceived qualities (position bias included) differ by at most δ."""
    grade_lo: float = 0.0
    """Lowest grade the judge gives (of the rubric's 0–10)."""
    grade_hi: float = 10.0
    """Highest grade the judge gives; a narrow [grade_lo, grade_hi] compresses a group's grades."""
    grade_levels: int = 11
    """Distinct grades within [grade_lo, grade_hi], evenly spaced (11 over 0–10: the integers)."""
    list_noise: float | None = None
    """σ_list: std of the per-item noise of a list's grades (one draw per item per call, on top of the call's frame
    σ_η); None = rubric_noise."""
    list_position: float = 0.0
    """π: latent units a list's first slot gains over its last, linear in between (slot i of n: π·(½ − i/(n−1))):
    > 0 a primacy effect, < 0 recency; centred, so the list's mean grade does not move."""
    profile: str = ""
    """A judge profile (tsrl/judging/profile.py): a shipped name (`ideal`, …; docs/judge_simulator.md lists them
    with their sources) or the path of a .yaml that `tsrl-judge-check check.fit=true` wrote. Its parameters
    replace the fields still at their defaults (a field set away from its default wins). Applied once: the field
    then reads 'applied:<profile>'."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.profile and not self.profile.startswith("applied:"):
            apply_profile(self)
        if self.tau <= 0:
            raise ConfigError(f"judge.tau must be > 0, got {self.tau}.")
        if min(self.rubric_noise, self.frame_noise, self.tie_band, self.text_error) < 0:
            raise ConfigError(
                f"judge.rubric_noise, judge.frame_noise, judge.tie_band and judge.text_error must be >= 0, got "
                f"{self.rubric_noise}, {self.frame_noise}, {self.tie_band}, {self.text_error}."
            )
        if self.list_noise is not None and self.list_noise < 0:
            raise ConfigError(
                f"judge.list_noise must be >= 0 (or null: the same as judge.rubric_noise), got {self.list_noise}."
            )
        if self.score_scale <= 0:
            raise ConfigError(f"judge.score_scale must be > 0, got {self.score_scale}.")
        if not 0.0 <= self.grade_lo < self.grade_hi <= 10.0 or self.grade_levels < 2:
            raise ConfigError(
                f"judge.grade_lo/grade_hi must satisfy 0 <= lo < hi <= 10 and judge.grade_levels >= 2, "
                f"got {self.grade_lo}, {self.grade_hi}, {self.grade_levels}."
            )


class SimulatedJudge:
    """Answers pairwise questions from the task's latent quality; see the module docstring."""

    name = "rubric_sim"

    def __init__(self, cfg: RubricSimConfig, quality: Quality) -> None:
        self.cfg, self.quality = cfg, quality
        self.counters = JudgeCounters()
        self.identity = f"rubric_sim|tau={cfg.tau}|bias={cfg.position_bias}|taste={cfg.taste}|seed={cfg.seed}"
        self.score_identity = (
            f"rubric_sim|centre={cfg.score_centre}|scale={cfg.score_scale}|"
            f"sigma_rub={cfg.rubric_noise}|taste={cfg.taste}|seed={cfg.seed}"
        )
        extra = perception_extras(cfg)
        if extra:  # the earlier identities stand for the defaults, so caches built with them stay valid
            self.identity += f"|{extra}"
            self.score_identity += f"|{extra}"
        self.list_identity = f"{self.score_identity}|list|sigma_list={list_noise(cfg)}|position={cfg.list_position}"

    def latent(self, request: PairRequest, text: str, length_weight: float = 0.0) -> float:
        """q(c) + t(c) + e(c) + γ·h(c): what every call perceives of a text before its own offset and noise."""
        cfg = self.cfg
        taste = cfg.taste * (2.0 * stable_uniform(cfg.seed, "taste", text) - 1.0)
        surface = length_weight * surface_feature(text) if length_weight else 0.0
        perceived = self.quality(request.prompt, text) + taste + surface
        if cfg.text_error:  # e(c) ~ N(0, σ_t²), one draw per text: every verdict and grade of it shares it
            perceived += cfg.text_error * normal(cfg.seed, "text-error", cfg.text_error_seed, text)
        return perceived

    def _verdict(self, request: PairRequest) -> Verdict:
        weight = self.cfg.length_weight_pair
        q1 = self.latent(request, request.first, weight) + self.cfg.position_bias
        q2 = self.latent(request, request.second, weight)
        key = (self.cfg.seed, request.prompt.id, request.first, request.second)
        p = verdict_outcome(q1 - q2, self.cfg.tau, self.cfg.tie_band, stable_uniform(*key, "draw"))
        return Verdict(p_first=p, raw=f"simulated verdict: q_first={q1:.3f} q_second={q2:.3f} -> {p}")

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        verdicts = [self._verdict(r) for r in requests]
        self.counters.record(verdicts)
        return verdicts

    def _score(self, request: ScoreRequest) -> Score:
        cfg = self.cfg
        pair = PairRequest(request.prompt, request.response, "")
        q = self.latent(pair, request.response, cfg.length_weight_grade)
        key = (cfg.seed, request.prompt.id, request.response)
        q += cfg.rubric_noise * normal(*key, "rubric-noise")  # ε ~ N(0, σ_rub²), fixed per text
        if cfg.frame_noise:
            q += cfg.frame_noise * normal(*key, "frame")  # η: this call's reference frame (one item per call)
        grade = to_grade(q, cfg)
        return Score(value=grade, raw=f"simulated score: q={q:.3f} -> {grade}")

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        scores = [self._score(r) for r in requests]
        self.counters.record(scores)
        return scores

    def _list(self, request: ListRequest) -> ListScores:
        cfg, n = self.cfg, len(request.responses)
        call = (cfg.seed, request.prompt.id, *request.responses)  # the same list in the same order: the same call
        frame = cfg.frame_noise * normal(*call, "list-frame") if cfg.frame_noise else 0.0  # η_j, shared by the call
        sigma, values, shown = list_noise(cfg), [], []
        for i, text in enumerate(request.responses):
            u = self.latent(PairRequest(request.prompt, text, ""), text, cfg.length_weight_grade) + frame
            u += sigma * normal(*call, i, "list-noise") + cfg.list_position * slot_position(i, n)
            values.append(to_grade(u, cfg))
            shown.append(f"R{i + 1}: u={u:.3f} -> {values[-1]:g}")
        return ListScores(values=values, raw=f"simulated list (frame {frame:.3f}): " + "; ".join(shown))

    def score_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]:
        """One ListScores per request, slot i scoring responses[i]; one call counted per list."""
        lists = [self._list(r) for r in requests]
        self.counters.record(lists)
        return lists

    def drain_metrics(self) -> dict[str, float]:
        return self.counters.drain()


def verdict_probabilities(delta: float, tau: float, tie_band: float) -> tuple[float, float]:
    """(P(first wins), P(second wins)) for a perceived difference Δ (position bias included), Rao–Kupper's ties:
    P(first) = σ((Δ − δ)/τ), P(second) = σ((−Δ − δ)/τ), P(TIE) = the rest (none at δ = 0)."""
    return _sigmoid((delta - tie_band) / tau), _sigmoid((-delta - tie_band) / tau)


def verdict_outcome(delta: float, tau: float, tie_band: float, u: float) -> float:
    """The verdict (1 first, 0 second, ½ TIE) that the uniform draw u gives; at δ = 0 exactly equal qualities
    tie, as the earlier simulator's did."""
    if delta == 0.0 and tie_band == 0.0:
        return 0.5
    p_first, p_second = verdict_probabilities(delta, tau, tie_band)
    if u < p_first:
        return 1.0
    return 0.0 if u >= 1.0 - p_second else 0.5


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def normal(*key: object) -> float:
    """A standard normal draw fixed by `key` (a stable hash: the same question, the same draw)."""
    u = min(max(stable_uniform(*key), 1e-12), 1 - 1e-12)
    return NormalDist().inv_cdf(u)


def slot_position(i: int, n: int) -> float:
    """x_i = ½ − i/(n−1): the position covariate of slot i (0-based) of an n-item list (+½ first, −½ last, 0 for
    n = 1); the list's position effect is list_position·x_i."""
    return 0.5 - i / (n - 1) if n > 1 else 0.0


def list_noise(cfg: RubricSimConfig) -> float:
    """σ_list: judge.list_noise, or judge.rubric_noise where it is not set."""
    return cfg.rubric_noise if cfg.list_noise is None else cfg.list_noise


def surface_feature(text: str) -> float:
    """h(c) = log(1 + words): the surface feature a length-biased judge rewards."""
    return math.log1p(len(text.split()))


def to_grade(u: float, cfg: RubricSimConfig) -> float:
    """The grade of perceived quality u: grade_lo + (grade_hi − grade_lo)·σ((u − centre)/scale), rounded to the
    nearest of grade_levels evenly spaced values (over 0–10 with 11 levels: the integer, as `round` gives it)."""
    step = (cfg.grade_hi - cfg.grade_lo) / (cfg.grade_levels - 1)
    x = cfg.grade_lo + (cfg.grade_hi - cfg.grade_lo) / (1.0 + math.exp(-(u - cfg.score_centre) / cfg.score_scale))
    return float(cfg.grade_lo + step * round((x - cfg.grade_lo) / step))


def perception_extras(cfg: RubricSimConfig) -> str:
    """The perception settings away from their defaults, as text for the cache identity ('' at the defaults)."""
    defaults = RubricSimConfig()
    names = (
        "frame_noise",
        "length_weight_pair",
        "length_weight_grade",
        "tie_band",
        "grade_lo",
        "grade_hi",
        "grade_levels",
        "text_error",
    )
    extras = [f"{name}={getattr(cfg, name)}" for name in names if getattr(cfg, name) != getattr(defaults, name)]
    if cfg.text_error:  # which draw of the errors matters only where there are errors to draw
        extras.append(f"text_error_seed={cfg.text_error_seed}")
    return "|".join(extras)


def apply_profile(cfg: RubricSimConfig) -> None:
    """Set the fields of `cfg` still at their defaults to its profile's values (see RubricSimConfig.profile)."""
    profile, defaults = load_profile(cfg.profile), RubricSimConfig()
    for name, value in profile.parameters.items():
        if getattr(cfg, name) == getattr(defaults, name):
            setattr(cfg, name, value)
    cfg.profile = f"applied:{cfg.profile}"


def simulated_judge(cfg: RubricSimConfig, task: Any) -> SimulatedJudge:
    """The simulated judge reads one thing of the task: its latent quality q(prompt, text)."""
    if not isinstance(task, SimulatedQuality):
        raise ConfigError(
            f"judge=rubric_sim needs a task with a latent quality (quality(prompt, text)), and task "
            f"{getattr(task, 'name', task)!r} has none; pick a model judge (judge=openai or hf_local)."
        )
    return SimulatedJudge(cfg, task.quality)


JUDGES.register("rubric_sim", RubricSimConfig, simulated_judge)
