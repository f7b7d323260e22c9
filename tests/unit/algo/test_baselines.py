"""The papers' baselines: the DPO loss against hand-computed values, SFT's targets and DPO's pairs from a ranked
ladder, RLAIF and Adaptive Pointwise routing on hand-made groups."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tsrl.algo import LossInputs, policy_loss
from tsrl.algo.offline import DPOConfig, SFTConfig, dpo_pair_loss
from tsrl.errors import ConfigError
from tsrl.rewards.base import RegimeContext
from tsrl.rewards.ladder import LadderConfig, LadderRegime, Rung, select_rungs
from tsrl.rewards.rubric import RLAIFConfig, RubricRegime
from tsrl.rewards.verified import AdaptiveConfig, AdaptiveRegime
from tsrl.testing.fakes import NumberTask, ScriptedJudge, number_prompt
from tsrl.training.offline import check_offline, dpo_pairs, offline_groups, offline_ladders, sft_ranks
from tsrl.types import Anchor, Group, Prompt, Rollout, Score, ScoreRequest


def inputs(logp: torch.Tensor, ref: torch.Tensor, mask: torch.Tensor, normalizer) -> LossInputs:
    return LossInputs(logp, logp.detach(), torch.zeros(logp.shape[0]), mask, normalizer, ref)


def sequence_normalizer(mask: torch.Tensor) -> torch.Tensor:
    lengths = mask.sum(dim=1)
    return lengths * (lengths > 0).sum()


def test_dpo_needs_a_reference_and_whole_pairs() -> None:
    logp, mask = torch.zeros(4, 3), torch.ones(4, 3)
    with pytest.raises(ValueError, match="reference log-probs and whole"):
        policy_loss(inputs(logp, None, mask, 12.0), DPOConfig())  # an even batch without a reference
    with pytest.raises(ValueError, match="reference log-probs and whole"):
        policy_loss(inputs(logp[:3], logp[:3], mask[:3], 9.0), DPOConfig())  # a reference, but half a pair


def test_dpo_loss_is_log2_when_the_policy_is_the_reference() -> None:
    logp = torch.randn(4, 5)
    mask = torch.ones(4, 5)
    out = policy_loss(inputs(logp.clone().requires_grad_(), logp, mask, sequence_normalizer(mask)), DPOConfig())
    assert out.loss.item() == pytest.approx(math.log(2), abs=1e-6)
    assert out.metrics["dpo/accuracy"] == 0.0 and out.metrics["dpo/margin"] == pytest.approx(0.0)


def test_dpo_loss_matches_the_hand_computed_value_and_its_gradient() -> None:
    """Two pairs, unequal lengths: loss = mean over pairs of −log σ(β[(πw − rw) − (πl − rl)])."""
    logp = torch.tensor(
        [[-1.0, -2.0, 0.0], [-3.0, 0.0, 0.0], [-0.5, -0.5, -0.5], [-1.0, -1.0, 0.0]], requires_grad=True
    )
    ref = torch.tensor([[-1.5, -1.5, 0.0], [-1.0, 0.0, 0.0], [-1.0, -1.0, -1.0], [-0.5, -0.5, 0.0]])
    mask = torch.tensor([[1.0, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0]])
    beta = 0.5
    # pair 1: (−3 − (−3)) − (−3 − (−1)) = 2 → z = 1; pair 2: (−1.5 − (−3)) − (−2 − (−1)) = 2.5 → z = 1.25
    z = torch.tensor([1.0, 1.25])
    expected = float(-torch.nn.functional.logsigmoid(z).mean())
    out = policy_loss(inputs(logp, ref, mask, sequence_normalizer(mask)), DPOConfig(beta=beta))
    assert out.loss.item() == pytest.approx(expected, rel=1e-6)
    assert out.metrics["dpo/accuracy"] == 1.0 and out.metrics["dpo/margin"] == pytest.approx(float(z.mean()) / beta)
    out.loss.backward()
    # d/d logπ(y_w token) = −β σ(−z) / pairs, on the better row's tokens; the opposite on the worse row's
    grad = beta * torch.sigmoid(-z) / 2
    assert logp.grad[0, :2].tolist() == pytest.approx([-float(grad[0])] * 2, rel=1e-5)
    assert logp.grad[1, 0].item() == pytest.approx(float(grad[0]), rel=1e-5) and logp.grad[0, 2] == 0.0
    assert logp.grad[2].tolist() == pytest.approx([-float(grad[1])] * 3, rel=1e-5)


def test_dpo_pair_loss_prefers_the_better_row() -> None:
    logp, ref = torch.tensor([[0.0], [-2.0]]), torch.zeros(2, 1)
    loss, z = dpo_pair_loss(logp, ref, torch.ones(2, 1), beta=1.0)
    assert float(z) == 2.0 and float(loss) == pytest.approx(math.log1p(math.exp(-2.0)))


def test_sft_loss_is_the_token_mean_negative_log_likelihood() -> None:
    logp = torch.tensor([[-1.0, -3.0], [-2.0, 0.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    out = policy_loss(LossInputs(logp, logp.detach(), torch.ones(2), mask, float(mask.sum())), SFTConfig())
    assert out.loss.item() == pytest.approx(2.0)  # (1 + 3 + 2) / 3


@pytest.mark.parametrize(
    "k, fraction, ranks", [(10, 0.5, [0, 1, 2, 3, 4]), (5, 0.5, [0, 1, 2]), (4, 0.01, [0]), (3, 1.0, [0, 1, 2])]
)
def test_sft_imitates_the_top_of_the_ladder(k, fraction, ranks) -> None:
    assert sft_ranks(k, fraction) == ranks


def test_dpo_pair_rules() -> None:
    assert dpo_pairs(3, "all") == [(0, 1), (0, 2), (1, 2)]
    assert dpo_pairs(4, "adjacent") == [(0, 1), (1, 2), (2, 3)]
    assert dpo_pairs(4, "top_bottom") == [(0, 1), (0, 2), (0, 3)]
    assert len(dpo_pairs(10, "all")) == 45


class WordTokenizer:
    """A stand-in tokenizer: one id per word, no chat template."""

    chat_template = None
    eos_token_id = 0

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": [len(w) for w in text.split()]}


def ladder(texts: list[str]) -> list[Rung]:
    return [Rung(Anchor(t), strength=float(-i)) for i, t in enumerate(texts)]


def test_offline_groups_take_targets_from_the_ranked_ladder() -> None:
    prompt = Prompt("p", "write")
    ladders = {"p": ladder(["best one", "second", "third", "worst"])}
    rng = np.random.default_rng(0)
    (sft,) = offline_groups(SFTConfig(), [prompt], ladders, WordTokenizer(), rng)
    assert [r.text for r in sft.rollouts] == ["best one", "second"] and sft.rollouts[0].token_ids == [4, 3, 0]
    (dpo,) = offline_groups(DPOConfig(pairs="adjacent"), [prompt], ladders, WordTokenizer(), rng)
    assert [r.text for r in dpo.rollouts] == ["best one", "second", "second", "third", "third", "worst"]
    (few,) = offline_groups(DPOConfig(max_pairs=2), [prompt], ladders, WordTokenizer(), rng)
    rank = {r.anchor.text: i for i, r in enumerate(ladders["p"])}
    ranks = [rank[r.text] for r in few.rollouts]
    assert len(ranks) == 4 and ranks[0] < ranks[1] and ranks[2] < ranks[3]  # two pairs, better first
    pairs = [(ranks[0], ranks[1]), (ranks[2], ranks[3])]
    assert pairs[0] != pairs[1] and dpo_pairs(4, "all").index(pairs[0]) < dpo_pairs(4, "all").index(pairs[1])
    (every,) = offline_groups(DPOConfig(max_pairs=6), [prompt], ladders, WordTokenizer(), rng)  # no more than there are
    assert [rank[r.text] for r in every.rollouts] == [i for pair in dpo_pairs(4, "all") for i in pair]


def test_an_anchor_becomes_a_finished_rollout_of_its_tokens_and_eos() -> None:
    (sft,) = offline_groups(
        SFTConfig(top_fraction=0.25),
        [Prompt("p", "write it")],
        {"p": ladder(["a bc"])},
        WordTokenizer(),
        np.random.default_rng(0),
    )
    assert sft.prompt_ids == [5, 2]  # the prompt as the policy sees it (no chat template: its text)
    assert sft.rollouts == [Rollout("a bc", [1, 2, 0], [0.0, 0.0, 0.0], False)]


def ranked_only(ladders: dict, selected: dict) -> LadderRegime:
    """A LadderRegime holding the given ranked and selected rungs (built without a task or a judge)."""
    regime = LadderRegime.__new__(LadderRegime)
    regime.ladders, regime.selected = ladders, selected
    return regime


def test_offline_baselines_refuse_what_they_cannot_run() -> None:
    with pytest.raises(ConfigError, match="set reward=ladder"):
        check_offline(SFTConfig(), object(), 32)
    with pytest.raises(ConfigError, match="set reward=ladder"):
        check_offline(SFTConfig(), type("RewardModel", (), {"ladders": {}})(), 32)  # ranked, but no k selected
    regime = ranked_only({}, {})
    with pytest.raises(ConfigError, match="even trainer.micro_batch_size"):
        check_offline(DPOConfig(), regime, 31)
    check_offline(SFTConfig(), regime, 31)
    with pytest.raises(ConfigError, match="minibatches=1"):
        DPOConfig(minibatches=2)
    with pytest.raises(ConfigError, match="top_fraction"):
        SFTConfig(top_fraction=0.0)
    with pytest.raises(ConfigError, match="top_fraction"):
        SFTConfig(top_fraction=1.5)
    SFTConfig(top_fraction=1.0)  # every rung
    with pytest.raises(ConfigError, match="beta"):
        DPOConfig(beta=0.0)
    with pytest.raises(ConfigError, match="algo.anchors='top' is unknown"):
        DPOConfig(anchors="top")
    one = ranked_only({"p": ladder(["a", "b"])}, {"p": ladder(["a"])})
    with pytest.raises(ConfigError, match="reward.k=1 leaves one per prompt; set reward.k >= 2 or algo.anchors=all"):
        check_offline(DPOConfig(), one, 32)
    check_offline(DPOConfig(anchors="all"), one, 32)
    check_offline(SFTConfig(), one, 32)


def ladder_regime(tmp_path, k: int) -> LadderRegime:
    """A real ladder regime over one prompt with K = 10 anchors of qualities 0..9 (the judge compares them)."""
    task = NumberTask([number_prompt("p", [3, 7, 0, 9, 5, 1, 8, 2, 6, 4])])
    ctx = RegimeContext(task, ScriptedJudge(), "scripted", tmp_path / "run")
    return LadderRegime(LadderConfig(k=k, ladder_dir=str(tmp_path / "ladders")), ctx)


@pytest.mark.parametrize("k, imitated", [(4, 2), (5, 3), (1, 1)])
def test_sft_and_dpo_train_on_the_k_anchors_of_the_ladder_reward(tmp_path, k, imitated) -> None:
    """TSRL: SFT on the top half of the anchors the method uses — the k the ladder reward compares with
    (reward.k by reward.select), ⌈k/2⌉ of them for odd k — and DPO's pairs among those k; never all K = 10."""
    regime = ladder_regime(tmp_path, k)
    chosen = select_rungs(regime.ladders["p"], k, regime.cfg.select)  # the reward's own selection
    assert [r.anchor.text for r in regime.selected["p"]] == [r.anchor.text for r in chosen]
    texts = [r.anchor.text for r in chosen]  # strongest first
    rng = np.random.default_rng(0)
    sft_cfg, dpo_cfg = SFTConfig(), DPOConfig()
    assert sft_cfg.anchors == dpo_cfg.anchors == "ladder"
    (sft,) = offline_groups(sft_cfg, [Prompt("p", "write")], offline_ladders(sft_cfg, regime), WordTokenizer(), rng)
    assert [r.text for r in sft.rollouts] == texts[:imitated]
    (dpo,) = offline_groups(dpo_cfg, [Prompt("p", "write")], offline_ladders(dpo_cfg, regime), WordTokenizer(), rng)
    pairs = [(dpo.rollouts[i].text, dpo.rollouts[i + 1].text) for i in range(0, dpo.size, 2)]
    assert pairs == [(texts[i], texts[j]) for i in range(k) for j in range(i + 1, k)]  # k(k−1)/2, better first


def test_all_ranked_anchors_stay_an_option(tmp_path) -> None:
    regime = ladder_regime(tmp_path, 4)
    ranked = [r.anchor.text for r in regime.ladders["p"]]
    assert [t.split()[0] for t in ranked] == [f"q={q}" for q in range(9, -1, -1)]
    rng = np.random.default_rng(0)
    sft_cfg, dpo_cfg = SFTConfig(anchors="all"), DPOConfig(anchors="all")
    (sft,) = offline_groups(sft_cfg, [Prompt("p", "write")], offline_ladders(sft_cfg, regime), WordTokenizer(), rng)
    assert [r.text for r in sft.rollouts] == ranked[:5]
    (dpo,) = offline_groups(dpo_cfg, [Prompt("p", "write")], offline_ladders(dpo_cfg, regime), WordTokenizer(), rng)
    assert dpo.size == 2 * 45


class GradingJudge:
    """Grades a text by its number of words (10 at most); records the requests."""

    def __init__(self) -> None:
        self.requests: list[ScoreRequest] = []

    def score(self, requests):
        self.requests += requests
        return [Score(float(min(10, len(r.response.split())))) for r in requests]

    def compare(self, requests):
        raise AssertionError("pointwise regimes never compare")

    def drain_metrics(self):
        return {}


class Checked:
    """A verifiable task: a completion passes when it contains 'yes'."""

    name = "checked"

    def prompts(self, split):
        return []

    def verify(self, prompt, text):
        return 1.0 if "yes" in text else 0.0


def group(*texts: str) -> Group:
    return Group(Prompt("p", "q"), [1], [Rollout(t, [1], [0.0], False) for t in texts])


def test_adaptive_pointwise_grades_only_the_groups_the_verifier_cannot_separate() -> None:
    judge = GradingJudge()
    regime = AdaptiveRegime(AdaptiveConfig(tournament="pointwise"), RegimeContext(Checked(), judge, "j", None))
    separated, tied = group("yes", "no no"), group("a b c", "a")
    batch = regime.score([separated, tied])
    assert batch.rewards.tolist() == [[1.0, 0.0], [0.3, 0.1]]
    assert [r.response for r in judge.requests] == ["a b c", "a"]  # the separated group costs no judge call
    assert batch.metrics["route/verifier"] == 1 and batch.metrics["route/tournament"] == 1
    assert batch.metrics["reward/comparisons_per_sample"] == 0.5


def test_rlaif_is_the_judge_grade_even_where_a_verifier_exists() -> None:
    judge = GradingJudge()
    batch = RubricRegime(RLAIFConfig(), RegimeContext(Checked(), judge, "j", None)).score([group("yes", "no no")])
    assert batch.rewards.tolist() == [[0.1, 0.2]] and len(judge.requests) == 2


def bos_tokenizer():
    """A real Hugging Face fast tokenizer, built in memory: one id per known word, and (as Llama's) a BOS
    prepended whenever special tokens are asked for, which the default add_special_tokens=True does."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<s>": 0, "</s>": 1, "[UNK]": 2, "write": 3, "it": 4, "a": 5, "bc": 6}
    core = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>", unk_token="[UNK]")


def test_anchors_and_prompt_are_tokenised_as_generated_without_a_bos() -> None:
    """A generated completion never starts with BOS, nor does the chat prompt's text get a second one: both are
    tokenised with add_special_tokens=False (a fast tokenizer refuses anything but a bool there)."""
    prompt = Prompt("p", "write it")
    (sft,) = offline_groups(SFTConfig(), [prompt], {"p": ladder(["a bc"])}, bos_tokenizer(), np.random.default_rng(0))
    assert sft.prompt is prompt
    assert sft.prompt_ids == [3, 4]  # "write it", no <s> (id 0)
    assert sft.rollouts == [Rollout("a bc", [5, 6, 1], [0.0, 0.0, 0.0], False)]  # then </s> (id 1)


def test_dpo_pairs_capped_by_max_pairs_are_drawn_without_repeats_in_the_rules_order() -> None:
    ladders = {"p": ladder([f"r{i}" for i in range(10)])}  # 45 pairs; 44 drawn with replacement would repeat one
    rank = {r.anchor.text: i for i, r in enumerate(ladders["p"])}
    rng = np.random.default_rng(0)
    (few,) = offline_groups(DPOConfig(max_pairs=44), [Prompt("p", "write")], ladders, WordTokenizer(), rng)
    ranks = [rank[r.text] for r in few.rollouts]
    pairs = list(zip(ranks[::2], ranks[1::2]))
    assert len(pairs) == 44 and len(set(pairs)) == 44
    everything = dpo_pairs(10, "all")
    assert sorted(pairs, key=everything.index) == pairs  # in the rule's order, better first


def test_a_cap_that_admits_every_pair_spends_no_random_draw() -> None:
    """max_pairs = the rule's count keeps every pair without sampling, so the run's rng is left as it was (and the
    next prompt's draw is the one it would have been)."""
    ladders = {"p": ladder(["a", "b", "c", "d"])}  # 6 pairs
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    (every,) = offline_groups(DPOConfig(max_pairs=6), [Prompt("p", "write")], ladders, WordTokenizer(), rng)
    assert every.size == 12 and rng.bit_generator.state == before


def test_dpo_counts_a_pair_as_wrongly_ordered_exactly_when_its_margin_is_not_positive() -> None:
    """clip_frac of DPO = share of tokens in pairs with z ≤ 0. Three one-token pairs, reference 0, β = 0.5:
    z = 0.5·(0 − 0) = 0 (a tie: wrong), 0.5·(−1 − (−2)) = 0.5 (right), 0.5·(−2 − (−1)) = −0.5 (wrong) → 4 of 6."""
    logp = torch.tensor([[0.0], [0.0], [-1.0], [-2.0], [-2.0], [-1.0]])
    mask = torch.ones(6, 1)
    out = policy_loss(inputs(logp, torch.zeros(6, 1), mask, sequence_normalizer(mask)), DPOConfig(beta=0.5))
    assert out.metrics["clip_frac"] == pytest.approx(4 / 6)
    assert out.metrics["dpo/accuracy"] == pytest.approx(1 / 3)
