"""Math and behaviour of the policy-reading regimes: intuitor, reward_model, self_bootstrap."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from tsrl.errors import ConfigError
from tsrl.rewards import (
    IntuitorConfig,
    IntuitorRegime,
    LadderConfig,
    RegimeContext,
    RewardModelConfig,
    RewardModelRegime,
    SelfBootstrapConfig,
    SelfBootstrapRegime,
)
from tsrl.rewards.diversity import jaccard_distance
from tsrl.rewards.ladder import Rung
from tsrl.rewards.policy_features import completion_self_certainty, self_certainty, text_groups
from tsrl.rewards.reward_model import fit_reward_head, heldout_ids, ladder_pairs, pairwise_accuracy, pairwise_loss
from tsrl.rewards.self_bootstrap import RefreshState, refresh_decision
from tsrl.testing.fakes import NumberTask, ScriptedJudge, number_prompt
from tsrl.types import Anchor, Group, Rollout


def context(task, tmp_path, judge=None, **policy):
    return RegimeContext(task, judge or ScriptedJudge(), "scripted", tmp_path / "run", **policy)


# ---- intuitor -------------------------------------------------------------------------------------------------


def test_self_certainty_hand_value():
    """p = (½, ¼, ⅛, ⅛): KL(U‖p) = ¼·[log(¼/½) + log(¼/¼) + 2·log(¼/⅛)] = ¼·log 2. A uniform token adds 0 and a
    masked token adds nothing; a row without tokens has no self-certainty (NaN)."""
    peaked = torch.log(torch.tensor([0.5, 0.25, 0.125, 0.125]))
    logits = torch.stack(
        [torch.stack([peaked, torch.zeros(4), peaked + 7.0]), torch.stack([peaked, peaked, peaked])]
    )  # [N=2, T=3, V=4]
    mask = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    sc = self_certainty(logits, mask)
    assert sc[0].item() == pytest.approx(0.25 * math.log(2) / 2, abs=1e-6)  # mean of ¼·log 2 and 0
    assert math.isnan(sc[1].item())
    assert self_certainty(peaked.view(1, 1, 4) * 3.0, torch.ones(1, 1)).item() > 0.25 * math.log(2)


def test_intuitor_rewards_are_self_certainty_and_grow_as_temperature_falls(policy, tmp_path):
    """KL(U‖softmax(l/τ)) = logsumexp(l/τ) − mean(l)/τ − log V is convex in 1/τ with zero slope at 1/τ = 0, so it
    strictly increases as τ falls (for non-constant logits): lower temperature → higher reward, every completion."""
    model, tokenizer = policy
    prompt = number_prompt("p", [0])
    groups = text_groups(tokenizer, [prompt, prompt], [["q=1 jokes", "q=2 penguins and taxes"], ["q=3", "a tiny"]])
    task = NumberTask([prompt])
    batches = [
        IntuitorRegime(IntuitorConfig(temperature=t), context(task, tmp_path, model=model, tokenizer=tokenizer)).score(
            groups
        )
        for t in (0.5, 1.0, 2.0)
    ]
    assert batches[1].rewards.shape == (2, 2) and batches[1].metrics["reward/comparisons_per_sample"] == 0
    assert (batches[0].rewards > batches[1].rewards).all() and (batches[1].rewards > batches[2].rewards).all()
    direct = completion_self_certainty(model, groups, tokenizer.pad_token_id, 1.0, micro=1)
    assert np.allclose(batches[1].rewards.reshape(-1), direct.numpy(), atol=1e-5)  # micro-batching is invisible


def test_policy_regimes_without_the_policy_fail_naming_the_fix(number_task, tmp_path):
    with pytest.raises(ConfigError, match=r"reward=intuitor needs the policy's model and tokenizer.*policy=\(model"):
        IntuitorRegime(IntuitorConfig(), context(number_task, tmp_path))
    with pytest.raises(ConfigError, match="reward=self_bootstrap needs the policy's generator"):
        SelfBootstrapRegime(SelfBootstrapConfig(), context(number_task, tmp_path))


# ---- reward model ---------------------------------------------------------------------------------------------


def test_pairwise_loss_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    diffs, w = rng.normal(size=(30, 5)), rng.normal(size=5)
    loss, grad = pairwise_loss(w, diffs, l2=0.3)
    assert loss == pytest.approx(np.mean(np.log1p(np.exp(-diffs @ w))) + 0.15 * w @ w)
    eps = 1e-6
    numeric = [
        (pairwise_loss(w + eps * e, diffs, 0.3)[0] - pairwise_loss(w - eps * e, diffs, 0.3)[0]) / (2 * eps)
        for e in np.eye(5)
    ]
    assert np.allclose(grad, numeric, atol=1e-6)


def test_reward_head_recovers_a_linear_preference():
    """Pairs labelled by a hidden direction w* with logistic noise (BT with scale 3): the fitted head ranks fresh
    pairs like w* does. 400 training pairs in 6 dimensions pin the direction to within a few degrees, so held-out
    accuracy is near the noise ceiling (≈ 0.8 here); 0.7 leaves a wide margin for the seeded draw."""
    rng = np.random.default_rng(1)
    w_star = rng.normal(size=6)
    x = rng.normal(size=(1000, 6))
    flip = rng.random(1000) > 1 / (1 + np.exp(-3 * x @ w_star))  # loser shown as winner with BT probability
    diffs = np.where(flip[:, None], -x, x)
    w = fit_reward_head(diffs[:400], l2=0.01)
    assert pairwise_accuracy(w, diffs[400:]) > 0.7
    assert pairwise_accuracy(w, diffs[400:]) == pytest.approx(pairwise_accuracy(w_star, diffs[400:]), abs=0.05)
    assert pairwise_accuracy(np.zeros(6), diffs) == 0.5  # ties count ½
    assert math.isnan(pairwise_accuracy(w, diffs[:0]))


def test_ladder_pairs_put_the_stronger_anchor_first_and_skip_ties():
    rungs = [Rung(Anchor("a"), 2.0), Rung(Anchor("b"), 1.0), Rung(Anchor("c"), 1.0), Rung(Anchor("d"), 3.0)]
    assert ladder_pairs(rungs) == [(0, 1), (0, 2), (3, 0), (3, 1), (3, 2)]


def test_heldout_split_is_seeded_prompt_level_and_never_empty():
    ids = [f"p{i}" for i in range(10)]
    assert heldout_ids(ids, 0.2, seed=0) == heldout_ids(list(reversed(ids)), 0.2, seed=0)
    assert len(heldout_ids(ids, 0.2, 0)) == 2 and len(heldout_ids(ids[:3], 0.01, 0)) == 1
    assert heldout_ids(ids, 0.2, 0) != heldout_ids(ids, 0.2, 1)
    assert heldout_ids(ids, 0.0, 0) == set() and heldout_ids(ids[:1], 0.5, 0) == set()


def test_reward_model_trains_once_caches_and_scores_without_judge_calls(policy, tmp_path):
    model, tokenizer = policy
    task = NumberTask([number_prompt(f"p{i}", [3, 1, 2, 0]) for i in range(6)])
    cfg = RewardModelConfig(
        ladder=LadderConfig(ladder_dir=str(tmp_path / "ladders")), rm_dir=str(tmp_path / "rm"), holdout_frac=0.3
    )
    first_judge = ScriptedJudge()
    first = RewardModelRegime(cfg, context(task, tmp_path, first_judge, model=model, tokenizer=tokenizer))
    assert len(first_judge.requests) == 6 * 6  # the anchor round-robin, once
    report = json.loads((tmp_path / "run" / "reward_model.json").read_text())
    assert report["train_pairs"] == 4 * 6 and report["heldout_pairs"] == 2 * 6
    assert 0.0 <= report["heldout_pair_accuracy"] <= 1.0 and report["train_pair_accuracy"] > 0.5
    judge = ScriptedJudge()
    second = RewardModelRegime(cfg, context(task, tmp_path, judge, model=model, tokenizer=tokenizer))
    assert judge.requests == [] and np.array_equal(first.w, second.w)  # ladder and head both from disk
    prompt = task.prompts("train")[0]
    batch = second.score([Group(prompt, [], [Rollout(t, [], [], False) for t in ("q=3 taxes", "q=0", "jokes")])])
    assert judge.requests == [] and batch.metrics["reward/comparisons_per_sample"] == 0
    assert batch.rewards.shape == (1, 3) and ((batch.rewards > 0) & (batch.rewards < 1)).all()
    raw = RewardModelRegime(
        RewardModelConfig(**{**cfg.__dict__, "output": "score"}),
        context(task, tmp_path, judge, model=model, tokenizer=tokenizer),
    )
    scores = raw.score([Group(prompt, [], [Rollout(t, [], [], False) for t in ("q=3 taxes", "q=0", "jokes")])])
    assert np.array_equal(np.argsort(scores.rewards), np.argsort(batch.rewards))  # win-rate is monotone in r


# ---- self-bootstrapped ladder ---------------------------------------------------------------------------------


def test_refresh_every_period_steps():
    state, reasons = RefreshState(), []
    for _ in range(7):
        state, reason = refresh_decision(state, 0.5, period=3, threshold=0.9, patience=2)
        reasons.append(reason)
    assert reasons == [None, None, "scheduled", None, None, "scheduled", None]


def test_saturated_win_rates_trigger_an_early_refresh_only_when_sustained():
    def run(winrates, **kw):
        state, out = RefreshState(), []
        for w in winrates:
            state, reason = refresh_decision(state, w, **{"period": 50, "threshold": 0.9, "patience": 3, **kw})
            out.append(reason)
        return out

    assert run([0.95, 0.95, 0.95]) == [None, None, "saturated"]
    assert run([0.95, 0.95, 0.5, 0.95, 0.95]) == [None] * 5  # a dip resets the count
    assert run([0.95, float("nan"), 0.95, 0.95]) == [None] * 4  # no rewards is not saturation
    assert run([1.0] * 5, patience=0) == [None] * 5 and run([1.0] * 5, threshold=1.0) == [None] * 5


def test_self_bootstrap_refreshes_on_the_papers_schedule_alone_by_default():
    """TSRL §4.10 refreshes "every 50 steps": with the defaults a policy that beats its ladder every time (win-rate
    1 for 100 steps) gets the scheduled refreshes at steps 50 and 100 and no early one (the early refresh is ours,
    off unless reward.saturation_patience is set)."""
    cfg, state, reasons = SelfBootstrapConfig(), RefreshState(), {}
    for step in range(1, 101):
        state, reason = refresh_decision(state, 1.0, cfg.period, cfg.saturation_threshold, cfg.saturation_patience)
        if reason is not None:
            reasons[step] = reason
    assert reasons == {50: "scheduled", 100: "scheduled"}


class TierGenerator:
    """A Generator whose samples reveal their tier: quality q = index of the tier instruction (low = 0)."""

    def __init__(self, tiers: list[str]) -> None:
        self.tiers, self.calls = tiers, []

    def generate(self, prompts, n, max_new_tokens=None):
        self.calls.append(len(prompts))
        seed = int(torch.randint(0, 1000, ()).item())  # shows that the caller seeds the RNG
        out = []
        for p in prompts:
            q = next(i for i, t in enumerate(self.tiers) if p.text.endswith(t))
            out.append(Group(p, [], [Rollout(f"q={q} tier answer {seed} {s}", [], [], False) for s in range(n)]))
        return out

    def load_weights(self, named_tensors) -> None:
        """Nothing to sync."""


def test_self_bootstrap_ranks_tiers_refreshes_and_reports_diversity(tmp_path):
    tiers = {"low": "Be lazy.", "mid": "Be fine.", "top": "Be brilliant."}
    task = NumberTask([number_prompt("p0", [0]), number_prompt("p1", [0])])
    generator, judge = TierGenerator(list(tiers.values())), ScriptedJudge()
    cfg = SelfBootstrapConfig(
        ladder=LadderConfig(k=3, ladder_dir=str(tmp_path / "ladders")),
        tiers=tiers,
        period=4,
        saturation_threshold=0.9,
        saturation_patience=2,
    )
    regime = SelfBootstrapRegime(cfg, context(task, tmp_path, judge, generator=generator))
    assert generator.calls == [2 * 3] and len(judge.requests) == 2 * 3  # 2 prompts x C(3,2) pairs
    assert [r.anchor.tier for r in regime.ladder.ladders["p0"]] == ["top", "mid", "low"]
    first_top = regime.ladder.ladders["p0"][0].anchor.text
    prompt = task.prompts("train")[0]
    middling = [Group(prompt, [], [Rollout(t, [], [], False) for t in ("q=1.5 a", "q=0.5 b")])]
    batch = regime.score(middling)
    assert batch.rewards.tolist() == [[2 / 3, 1 / 3]]
    texts = {pid: [r.anchor.text for r in rungs] for pid, rungs in regime.ladder.ladders.items()}
    assert batch.metrics["bootstrap/ladder_diversity"] == pytest.approx(
        np.mean([jaccard_distance(t) for t in texts.values()])
    )
    assert batch.metrics["bootstrap/ladder_diversity"] > 0 and "ladder/distinct_1" in batch.metrics
    strong = [Group(prompt, [], [Rollout(t, [], [], False) for t in ("q=9 a", "q=8 b")])]
    assert regime.score(strong).metrics["bootstrap/refreshes"] == 0.0
    after = regime.score(strong)  # second saturated step in a row: early refresh
    assert after.metrics["bootstrap/early_refreshes"] == 1.0 and after.metrics["bootstrap/refresh_calls"] == 6.0
    assert len(generator.calls) == 2
    assert regime.ladder.ladders["p0"][0].anchor.text != first_top  # fresh samples under the next refresh seed
    for _ in range(4):  # the schedule restarts at a refresh: the next scheduled one is 4 steps later
        last = regime.score(middling)
    assert last.metrics["bootstrap/refreshes"] == 2.0 and last.metrics["bootstrap/early_refreshes"] == 1.0


def test_self_bootstrap_rejects_k_above_its_anchor_count():
    with pytest.raises(ConfigError, match=r"reward.ladder.k=4 but self_bootstrap samples only 2 anchors"):
        SelfBootstrapConfig(ladder=LadderConfig(k=4), tiers={"a": "x", "b": "y"})


def test_self_bootstrap_defaults_to_the_papers_four_tiers_and_uses_every_anchor():
    """TSRL §4.10 samples anchors under four quality-tier prompts, low-effort → top-tier; with the default k
    every sampled anchor takes part in the reward, so no anchor is judged in the round-robin and then unused."""
    cfg = SelfBootstrapConfig()
    assert list(cfg.tiers) == ["low", "okay", "good", "top"]
    assert len(cfg.tiers) * cfg.samples_per_tier == cfg.ladder.k
