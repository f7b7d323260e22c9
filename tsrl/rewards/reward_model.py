"""`reward=reward_model`: the TSRL paper's RLHF baseline — a Bradley–Terry reward model trained on anchor
pairs ordered by the judge, then used as the reward with no judge calls during training.

Pairs. The anchor ladder of every training prompt (built or loaded exactly as `reward=ladder` does: judged
round-robin + Bradley–Terry, stored) orders its K anchors; every pair (a_i, a_j) with β_i > β_j becomes a
preference a_i ≻ a_j, K(K−1)/2 pairs per prompt (ties in β are skipped). A fraction of the prompts
(holdout_frac, chosen by a seeded hash of the prompt id) is held out; the model is trained on the rest and
its pairwise accuracy on the held-out prompts' pairs is reported (`rm/heldout_pair_accuracy`).

Model (a project choice; the paper does not specify one at this scale). φ(x) ∈ R^H is the last-layer
hidden state of a *frozen copy of the initial policy*, mean-pooled over the response tokens with the
prompt as context; z = (φ − μ)/σ standardises with the training anchors' statistics; the reward is linear,
r(x) = w·z(x). With d_m = z(winner) − z(loser) the pairwise logistic (Bradley–Terry) loss is

    L(w) = (1/M) Σ_m log(1 + exp(−w·d_m)) + (λ/2)·‖w‖²,   ∇L = −(1/M) Σ_m σ(−w·d_m)·d_m + λw,

convex, minimised by L-BFGS-B with the analytic gradient. A linear head on a frozen backbone keeps the
fit deterministic and cheap (features are computed once) and is the usual "RM = policy + scalar head"
minus backbone fine-tuning. The fitted head (w, μ, σ) is cached on disk, keyed by the ladder, the
backbone's weights and the head settings.

Reward of a completion c (output): `winrate` (default, a project choice) is the RM's predicted win-rate
over the prompt's K anchors, (1/K) Σ_i σ(r(c) − r(a_i)) ∈ [0, 1] — the ladder reward with the judge replaced
by the RM, on the same scale so the algo defaults carry over; `score` is the raw r(c) (classic RLHF).

Shapes: B groups, G completions, K anchors, M pairs, H hidden width. Judge calls per sample: 0 (the ladder
build is counted once at setup, like reward=ladder).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from tsrl.errors import ConfigError
from tsrl.judging import stable_uniform
from tsrl.registry import REWARDS
from tsrl.rewards.base import RegimeContext, require_policy
from tsrl.rewards.ladder import LadderConfig, LadderRegime, Rung
from tsrl.rewards.policy_features import completion_features, text_groups
from tsrl.types import Group, Prompt, RewardBatch

OUTPUTS = ("winrate", "score")
CACHE_VERSION = "1"  # bump when features or the fit change, so cached heads are refitted


@dataclass
class RewardModelConfig:
    """Reward `reward_model`: a Bradley–Terry reward model trained on judge-ordered anchor pairs."""

    ladder: LadderConfig = field(default_factory=LadderConfig)
    """Anchor ladders that order the training pairs (ladder_dir, l2, rebuild as in reward=ladder; k unused)."""
    l2: float = 1.0
    """L2 strength λ of the linear head on standardised features (project default, best of 0.01/0.1/1 on humor)."""
    holdout_frac: float = 0.2
    """Share of training prompts whose anchor pairs are held out to measure pairwise accuracy."""
    split_seed: int = 0
    """Seed of the prompt-level held-out split."""
    output: str = "winrate"
    """winrate: predicted win-rate over the prompt's anchors, in [0, 1] | score: the raw RM score."""
    rm_dir: str = "~/.cache/tsrl/reward_models"
    """Where fitted reward-model heads are stored and looked up."""
    retrain: bool = False
    """Ignore a stored head and fit again."""
    micro_batch_size: int = 32
    """Sequences per forward pass of the frozen backbone."""

    def __post_init__(self) -> None:
        if self.output not in OUTPUTS:
            raise ConfigError(f"reward.output={self.output!r} is unknown; choose one of {list(OUTPUTS)}.")
        if not 0.0 <= self.holdout_frac < 1.0:
            raise ConfigError(f"reward.holdout_frac must lie in [0, 1), got {self.holdout_frac}.")
        if self.l2 < 0:
            raise ConfigError(f"reward.l2 must be >= 0, got {self.l2}.")


def pairwise_loss(w: np.ndarray, diffs: np.ndarray, l2: float) -> tuple[float, np.ndarray]:
    """Mean pairwise logistic loss + (λ/2)‖w‖² and its gradient; diffs [M, H] = z(winner) − z(loser)."""
    margin = diffs @ w  # [M]
    loss = float(np.mean(np.logaddexp(0.0, -margin)) + 0.5 * l2 * w @ w)
    weight = np.exp(-np.logaddexp(0.0, margin))  # [M] σ(−margin), overflow-safe
    grad = -(weight @ diffs) / len(diffs) + l2 * w  # [H]
    return loss, grad


def fit_reward_head(diffs: np.ndarray, l2: float) -> np.ndarray:
    """The w [H] minimising pairwise_loss (convex; L-BFGS-B from zero)."""
    result = minimize(
        pairwise_loss,
        np.zeros(diffs.shape[1]),
        args=(diffs, l2),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 1000},
    )
    return result.x


def pairwise_accuracy(w: np.ndarray, diffs: np.ndarray) -> float:
    """Share of pairs ranked as preferred (ties count ½); NaN without pairs."""
    if len(diffs) == 0:
        return float("nan")
    margin = diffs @ w  # [M]
    return float(np.mean((margin > 0) + 0.5 * (margin == 0)))


def ladder_pairs(rungs: Sequence[Rung]) -> list[tuple[int, int]]:
    """(winner, loser) positions of every rung pair with different strengths."""
    return [
        (i, j) if rungs[i].strength > rungs[j].strength else (j, i)
        for i in range(len(rungs))
        for j in range(i + 1, len(rungs))
        if rungs[i].strength != rungs[j].strength
    ]


def heldout_ids(prompt_ids: Sequence[str], frac: float, seed: int) -> set[str]:
    """A seeded, prompt-level held-out set: ⌈frac·n⌉ ids (at least one when frac > 0 and n ≥ 2)."""
    if frac <= 0 or len(prompt_ids) < 2:
        return set()
    count = min(len(prompt_ids) - 1, max(1, int(np.ceil(frac * len(prompt_ids)))))
    return set(sorted(prompt_ids, key=lambda pid: stable_uniform(seed, "rm-holdout", pid))[:count])


class RewardModelRegime:
    """Scores completions with a reward model fitted on the anchor ladders; see the module docstring."""

    def __init__(self, cfg: RewardModelConfig, ctx: RegimeContext) -> None:
        require_policy(ctx, "reward_model", "model", "tokenizer")
        self.cfg, self.ctx = cfg, ctx
        self.backbone = ctx.model.initial()  # the frozen initial policy (a PolicyView)
        ladder = LadderRegime(replace(cfg.ladder, k=1), ctx)
        self.ladders = ladder.ladders
        head = {k: v for k, v in asdict(cfg).items() if k not in ("ladder", "rm_dir", "retrain", "micro_batch_size")}
        key = json.dumps([CACHE_VERSION, ladder.path.name, self.backbone.fingerprint(), head], sort_keys=True)
        self.path = (
            Path(cfg.rm_dir).expanduser() / f"{ctx.task.name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.npz"
        )
        if ctx.collective.from_main(self.path.is_file()) and not cfg.retrain:  # every process decides alike
            stored = np.load(self.path)
            self.w, self.mu, self.sigma = stored["w"], stored["mu"], stored["sigma"]
            self.report = json.loads(str(stored["report"]))
        else:
            self.report = self._fit(ctx.task.prompts("train"))
            self._store()
        ctx.run_dir.mkdir(parents=True, exist_ok=True)
        if ctx.collective.is_main:
            (ctx.run_dir / "reward_model.json").write_text(
                json.dumps({**self.report, "head": str(self.path)}, indent=1)
            )
        self.anchor_scores: dict[str, np.ndarray] = {}

    def _features(self, prompts: Sequence[Prompt], texts: Sequence[Sequence[str]]) -> np.ndarray:
        groups = text_groups(self.ctx.tokenizer, prompts, texts)
        return (
            completion_features(self.backbone, groups, self.ctx.tokenizer.pad_token_id, self.cfg.micro_batch_size)
            .numpy()
            .astype(np.float64)
        )  # [N, H]

    def _fit(self, prompts: Sequence[Prompt]) -> dict[str, float]:
        """Fit the head on the training prompts' pairs; returns accuracies and counts."""
        prompts = [p for p in prompts if p.id in self.ladders]
        phi = self._features(prompts, [[r.anchor.text for r in self.ladders[p.id]] for p in prompts])  # [ΣK, H]
        held = heldout_ids([p.id for p in prompts], self.cfg.holdout_frac, self.cfg.split_seed)
        offsets = np.cumsum([0] + [len(self.ladders[p.id]) for p in prompts])
        rows = {True: [], False: []}
        for p, start in zip(prompts, offsets):
            rows[p.id in held] += [(start + i, start + j) for i, j in ladder_pairs(self.ladders[p.id])]
        train_rows = np.array(sorted({i for pair in rows[False] for i in pair}))
        self.mu = phi[train_rows].mean(0)  # [H]
        self.sigma = phi[train_rows].std(0) + 1e-6  # [H]
        z = (phi - self.mu) / self.sigma  # [ΣK, H]
        diffs = {
            split: np.array([z[i] - z[j] for i, j in pairs]).reshape(-1, z.shape[1]) for split, pairs in rows.items()
        }
        if len(diffs[False]) == 0:
            raise ConfigError(
                "reward=reward_model found no ordered anchor pairs to train on; the task's training "
                "prompts need at least two anchors the judge tells apart (or lower reward.holdout_frac)."
            )
        self.w = fit_reward_head(diffs[False], self.cfg.l2)
        return {
            "train_pairs": len(diffs[False]),
            "heldout_pairs": len(diffs[True]),
            "train_pair_accuracy": pairwise_accuracy(self.w, diffs[False]),
            "heldout_pair_accuracy": pairwise_accuracy(self.w, diffs[True]),
            "train_loss": pairwise_loss(self.w, diffs[False], self.cfg.l2)[0],
        }

    def _store(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{self.path.stem}.{os.getpid()}.tmp.npz")  # unique: every process may store it
        np.savez(tmp, w=self.w, mu=self.mu, sigma=self.sigma, report=json.dumps(self.report))
        tmp.replace(self.path)  # atomic

    def rm_scores(self, prompts: Sequence[Prompt], texts: Sequence[Sequence[str]]) -> np.ndarray:
        """r(x) = w·(φ(x) − μ)/σ for every text, flat in order."""
        return ((self._features(prompts, texts) - self.mu) / self.sigma) @ self.w

    def _anchors_of(self, prompt: Prompt) -> np.ndarray:
        if prompt.id not in self.anchor_scores:
            texts = (
                [r.anchor.text for r in self.ladders[prompt.id]]
                if prompt.id in self.ladders
                else [a.text for a in prompt.anchors]
            )
            if not texts:
                raise ConfigError(
                    f"reward.output=winrate needs anchors, but prompt {prompt.id!r} has none; set "
                    "reward.output=score to use the raw reward-model score."
                )
            self.anchor_scores[prompt.id] = self.rm_scores([prompt], [texts])
        return self.anchor_scores[prompt.id]  # [K]

    def score(self, groups: Sequence[Group]) -> RewardBatch:
        B, G = len(groups), groups[0].size
        scores = self.rm_scores([g.prompt for g in groups], [[r.text for r in g.rollouts] for g in groups])
        scores = scores.reshape(B, G)  # [B, G]
        if self.cfg.output == "winrate":
            anchors = [self._anchors_of(g.prompt) for g in groups]  # B × [K]
            rewards = np.stack(
                [np.mean(1.0 / (1.0 + np.exp(-(s[:, None] - a[None, :]))), axis=1) for s, a in zip(scores, anchors)]
            )  # [B, G]
        else:
            rewards = scores
        metrics = {
            "reward/comparisons_per_sample": 0.0,
            "rm/score_mean": float(scores.mean()),
            "rm/score_std": float(scores.std()),
            "rm/heldout_pair_accuracy": self.report["heldout_pair_accuracy"],
            "rm/train_pair_accuracy": self.report["train_pair_accuracy"],
        }
        return RewardBatch(rewards=rewards, metrics=metrics)


REWARDS.register("reward_model", RewardModelConfig, RewardModelRegime)
