"""The papers' protocols, pinned: every recipe under recipes/paper/ composes, and the values the papers fix — the
k grid, the noise grid, the step ratio, the topology, the judge's order (TSRL: one binary verdict per comparison,
k calls per sample; ArenaRL: both orders), the group size, the headline metric, full fine-tuning — are what the
recipes and method configs set. Compose only, no training; plus the noise metrics and the per-method grids of
tsrl-reproduce on hand-made runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from tsrl.commands.base import to_run_config
from tsrl.config import check_distinct_judges, register_configs
from tsrl.errors import ConfigError
from tsrl.reproduce import NOISE_AXIS, grid_of, method_grids, noise_fractions

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted(p.stem for p in (ROOT / "recipes" / "paper").glob("*.yaml"))
TSRL_METHODS = {
    "tsrl",
    "one_anchor",
    "rubric",
    "in_batch",
    "reward_model",
    "self_bootstrap",
    "sft",
    "dpo",
    "tsrl_bad_judge",
    "tsrl_low_diversity",
}
ORDER = {
    **{m: "random" for m in TSRL_METHODS},
    "arenarl": "both",
    "reasoning_arena": "random",
    "reasoning_arena_live": "random",
}
"""Each method's judge order: TSRL's one random-order verdict, ArenaRL's bidirectional evaluation, Reasoning Arena's
one call per match (its fit mirror-augments)."""
SINGLE_COMPARISON = {"one_anchor", "rubric"}  # trained 4x TSRL's steps (TSRL Table 4: 880 against 220)


def composed(overrides: list[str]):
    register_configs()
    with initialize_config_module("tsrl.configs", version_base="1.3"):
        return compose("config", overrides=overrides)


def grid(recipe: str) -> dict[str, list[str]]:
    register_configs()
    return grid_of(f"paper/{recipe}", [])


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_recipe_composes_with_each_method_under_its_papers_judge_order(recipe):
    """Every method of every paper recipe: the judge order of its paper, the policy fully fine-tuned (LoRA is the
    memory option), G = 8."""
    axes = grid(recipe)
    for method in axes.get("method", []):
        cfg = composed([f"recipes=paper/{recipe}", f"method={method}"])
        if method in ORDER:
            assert cfg.judge.order == ORDER[method], (recipe, method)
        assert cfg.model.lora.r == 0, (recipe, "full fine-tuning is the papers' default")
        assert cfg.trainer.group_size == 8, recipe


def test_tsrl_k_sweep_is_the_papers_grid_with_the_rubric_line():
    axes = grid("tsrl_k_sweep")
    assert axes["reward.k"] == ["1", "2", "4", "5", "6", "8", "10"]
    assert axes["method"] == ["tsrl", "rubric"]
    register_configs()
    split = method_grids("paper/tsrl_k_sweep", axes, [])
    assert [g["method"] for g in split] == [["tsrl"], ["rubric"]]
    assert "reward.k" in split[0] and "reward.k" not in split[1]  # the rubric runs once per seed: a line


def test_tsrl_noise_grid_covers_tsrl_the_single_pair_and_the_scalar_method():
    axes = grid("tsrl_noise")
    assert [float(p) for p in axes[NOISE_AXIS]] == [0.0, 0.05, 0.1, 0.2, 0.3, 0.4]
    assert axes["method"] == ["tsrl", "one_anchor", "rubric"] and axes["judge.noise_scope"] == ["comparison"]


def test_tsrl_table1_trains_single_comparison_baselines_four_times_tsrls_steps():
    """TSRL Table 4: 220 steps for TSRL, 880 for the single-comparison baselines; k = 4 anchors, a binary verdict."""
    axes = grid("tsrl_table1")
    table1 = {"sft", "one_anchor", "rubric", "in_batch", "reward_model", "intuitor", "tsrl"}
    assert set(axes["method"]) == table1 | {"tsrl_bad_judge", "tsrl_low_diversity"}  # + Bad Judge, + Low Diversity
    assert set(axes["task"]) == {"stories", "humor", "web", "counseling"}
    steps = {}
    for method in axes["method"]:
        weak = ["judge.model=weak", "eval_judge.model=strong"] * (method == "tsrl_bad_judge")  # its two judges
        typed = to_run_config(
            composed(["recipes=paper/tsrl_table1", f"method={method}", "task=humor", "run_dir=unused", *weak])
        )
        steps[method] = typed.trainer.max_steps
        if method == "tsrl":
            assert typed.reward.k == 4 and typed.judge.order == "random"
    assert steps["tsrl"] == 220
    assert {m: s for m, s in steps.items() if s != 220} == {m: 880 for m in SINGLE_COMPARISON}


def test_a_saved_trainer_config_rebuilds_the_same_number_of_steps():
    from dataclasses import asdict

    from tsrl.config import TrainerConfig

    once = TrainerConfig(max_steps=220, step_multiplier=4)
    assert (
        once.max_steps == 880
        and TrainerConfig(**{**asdict(once), "eval": once.eval, "checkpoint": once.checkpoint}).max_steps == 880
    )


def test_tsrl_equal_budget_counts_calls_as_the_paper_does():
    """The budget is 220 TSRL steps of B·G·k calls (one call per comparison): 16 × 8 × 4 × 220."""
    axes = grid("tsrl_equal_budget")
    assert axes["trainer.max_judge_calls"] == [str(16 * 8 * 4 * 220)]
    cfg = composed(["recipes=paper/tsrl_equal_budget", "method=tsrl"])
    assert cfg.trainer.prompts_per_step * cfg.trainer.group_size * cfg.reward.k * 220 == 16 * 8 * 4 * 220


def test_arenarl_topologies_follow_arenarls_setup():
    axes = grid("arenarl_topologies")
    assert axes["method"] == ["arenarl"] and axes["reward.topology"][0] == "single_elimination"
    assert set(axes["reward.topology"]) == {
        "single_elimination",
        "round_robin",
        "anchor",
        "double_elimination",
        "swiss",
    }
    cfg = composed(["recipes=paper/arenarl_topologies", "method=arenarl"])
    assert (cfg.trainer.group_size, cfg.trainer.prompts_per_step) == (8, 8)  # N = 8, K = 8 groups
    assert composed(["method=arenarl"]).reward.topology == "single_elimination"  # the method's own default
    # §3.1: "regularizing divergence from a reference policy through KL control" (the coefficient is ours)
    typed = to_run_config(composed(["recipes=paper/arenarl_topologies", "method=arenarl", "run_dir=u"]))
    assert typed.algo.kl_beta > 0 and type(typed.algo).__name__ == "CISPOConfig"


def test_tsrl_self_bootstrap_follows_section_4_10s_schedule():
    """§4.10: "refreshing anchors every 50 steps"; Table 4 reads the policy after four such iterations, the last at
    step 200: the recipe trains 200 steps, evaluates at Table 4's steps and refreshes on the schedule alone (the
    early refresh on saturation is ours, off); both ladders train the same steps."""
    axes = grid("tsrl_self_bootstrap")
    assert axes["method"] == ["self_bootstrap", "tsrl"] and axes["task"] == ["stories"]
    steps = {}
    for method in axes["method"]:
        typed = to_run_config(composed(["recipes=paper/tsrl_self_bootstrap", f"method={method}", "run_dir=u"]))
        steps[method] = (typed.trainer.max_steps, typed.trainer.eval.every)
        if method == "self_bootstrap":
            assert (typed.reward.period, typed.reward.saturation_patience) == (50, 0)
    assert steps == {"self_bootstrap": (200, 50), "tsrl": (200, 50)}


def test_weak_judge_and_anchor_source_recipes_name_the_papers_models_and_tasks():
    weak = grid("tsrl_table2_weak_judge")
    assert weak["judge.model"] == ["meta-llama/Llama-3.1-8B-Instruct"]
    assert set(weak["task"]) == {"stories", "humor", "counseling"}  # MentalH = counseling
    assert composed(["recipes=paper/tsrl_table2_weak_judge"]).eval_judge.order == "both"
    source = grid("tsrl_anchor_source")["task.anchors_file"]
    assert source[0] == "''" and any("flash" in s for s in source) and any("pro" in s for s in source)
    # the human writers' arm runs: its value composes to the dataset's own references (a null did not)
    assert composed(["recipes=paper/tsrl_anchor_source", f"task.anchors_file={source[0]}"]).task.anchors_file == ""


def test_tsrl_recipes_measure_the_held_out_win_rate():
    from tsrl.tasks import build_task
    from tsrl.tasks.base import task_metric

    for recipe in [r for r in RECIPES if r.startswith("tsrl_")]:
        for task in grid(recipe).get("task", []):
            judges = ["judge.model=weak", "eval_judge.model=strong"] * (recipe == "tsrl_table2_weak_judge")
            overrides = [f"recipes=paper/{recipe}", f"task={task}", "model=tiny", "run_dir=u", *judges]
            typed = to_run_config(composed(overrides))
            assert task_metric(build_task(typed.task)) == "winrate", (recipe, task)


def test_reasoning_arena_table1_is_the_papers_setup():
    """Ministral-3-8B-Instruct-2512, fully fine-tuned, 1,400 steps, N = 8, CISPO; one policy per (method, seed) on
    one STEM mix with coding filtered out (no task axis), evaluated on Table 1's six benchmarks: pass ratio@16, and
    pass@5 on LiveCodeBench v6; every method of the table."""
    axes = grid("reasoning_arena_table1")
    assert set(axes["method"]) == {
        "rlvr",
        "rlaif",
        "arenarl",
        "adaptive_pointwise",
        "reasoning_arena",
        "reasoning_arena_live",
    }
    assert set(axes) == {"method", "seed"}  # one training mix, not a policy per benchmark
    cfg = composed(["recipes=paper/reasoning_arena_table1", "method=reasoning_arena_live"])
    assert cfg.model.path == "mistralai/Ministral-3-8B-Instruct-2512" and cfg.model.lora.r == 0
    assert (cfg.trainer.max_steps, cfg.trainer.group_size, cfg.trainer.eval.samples) == (1400, 8, 16)
    # the batch the summary's counts imply: Reasoning Arena-Live, which keeps its groups, generates 455 samples a
    # step at N = 8, so a step trains at most 455 // 8 = 56 whole groups (RLVR's 908 then discard about half)
    assert cfg.trainer.prompts_per_step == 455 // 8 == 56
    assert (
        OmegaConf.get_type(cfg.algo).__name__ == "CISPOConfig"
        and cfg.reward.tournament == "live"
        and cfg.reward.leaderboard == "winrate"
    )
    assert OmegaConf.get_type(cfg.task).__name__ == "StemConfig" and list(cfg.task.mix) == ["aime", "gpqa"]
    heldout = {b.label: b.metric for b in cfg.task.heldout.values()}
    assert heldout == {
        **dict.fromkeys(["AIME 2024", "AIME 2025", "AIME 2026", "Beyond AIME", "GPQA-Diamond"], "pass_ratio"),
        "LiveCodeBench v6": "pass@5",
    }


def test_reasoning_arena_table1_trains_on_no_code_and_never_on_gpqa_diamond():
    """The composed recipe's task: training prompts from math and science only, none of them a held-out prompt
    (GPQA-Diamond included); six held-out benchmarks; the real GPQA-Diamond refused as the science training set."""
    from tsrl.errors import ConfigError
    from tsrl.tasks import build_task

    typed = to_run_config(composed(["recipes=paper/reasoning_arena_table1", "method=rlvr", "model=tiny", "run_dir=u"]))
    task = build_task(typed.task)
    train, heldout = task.prompts("train"), task.prompts("eval")
    assert {p.fields["task"] for p in train} == {"aime", "gpqa"}
    assert not {p.text for p in train} & {p.text for p in heldout}
    assert len({p.fields["benchmark"] for p in heldout}) == 6
    with pytest.raises(ConfigError, match="GPQA-Diamond"):
        diamond = [
            "recipes=paper/reasoning_arena_table1",
            "task.science.dataset=Idavidrein/gpqa",
            "task.science.subset=gpqa_diamond",
        ]
        to_run_config(composed(diamond))


def test_reasoning_arena_table1_fills_every_methods_batches():
    """The paper's system fills each batch to its size, discarding non-diverse groups and sampling more (RLVR 908
    samples per step against 455 for Reasoning Arena-Live): every method runs trainer.fill=resample."""
    for method in grid("reasoning_arena_table1")["method"]:
        cfg = composed(["recipes=paper/reasoning_arena_table1", f"method={method}"])
        assert cfg.trainer.fill == "resample" and cfg.trainer.pipeline != "overlap", method


def test_model_scale_and_human_study_recipes_follow_tsrl():
    """§4.6: Qwen2.5-3B/7B-Instruct on stories; §4.12: the Table 1 methods on stories and jokes."""
    scale = grid("tsrl_model_scale")
    assert set(scale["model"]) == {"qwen25_3b", "qwen25_7b"} and scale["task"] == ["stories"]
    paths = {composed([f"model={m}"]).model.path for m in scale["model"]}
    assert paths == {"Qwen/Qwen2.5-3B-Instruct", "Qwen/Qwen2.5-7B-Instruct"}
    study = grid("tsrl_human_study")
    assert set(study["task"]) == {"stories", "humor"} and "tsrl" in study["method"]


def runs(cells: dict[tuple[str, float], tuple[float, float]]) -> list[dict]:
    return [
        {"method": m, NOISE_AXIS: str(p), "start": start, "final": final} for (m, p), (start, final) in cells.items()
    ]


def test_noise_metrics_performance_retained_and_gain_kept():
    """TSRL §4.4's example: 77.8 clean and 73.6 noisy (−4.2 points) retains 94.6 % of the performance; from a base
    of 13.5 the same run keeps (73.6 − 13.5)/(77.8 − 13.5) = 93.5 % of its gain. A baseline that ends at 45 noisy
    against 60 clean from 40 retains 75 % of its performance but keeps only 25 % of its gain."""
    fractions = noise_fractions(
        runs(
            {
                ("tsrl", 0.0): (13.5, 77.8),
                ("tsrl", 0.3): (13.5, 73.6),
                ("rubric", 0.0): (40.0, 60.0),
                ("rubric", 0.3): (40.0, 45.0),
            }
        ),
        "method",
    )
    retained, kept = fractions["performance_retained"], fractions["gain_kept"]
    assert retained["tsrl"][0.3] == pytest.approx(0.946, abs=5e-4) and retained["tsrl"][0.0] == 1.0
    assert kept["tsrl"][0.3] == pytest.approx(60.1 / 64.3)
    assert retained["rubric"][0.3] == pytest.approx(0.75) and kept["rubric"][0.3] == pytest.approx(0.25)


def test_noise_metrics_compare_a_cell_with_the_clean_runs_of_its_own_seeds():
    """A cell run on seed 0 alone is divided by seed 0's clean run, not by the mean of three clean seeds (one of
    which collapsed): 30 ÷ 60 = 50 %, not 30 ÷ 45; a cell with all three seeds uses the three."""
    records = [
        {"method": "one_anchor", NOISE_AXIS: "0.0", "seed": "0", "start": 40.0, "final": 60.0},
        {"method": "one_anchor", NOISE_AXIS: "0.0", "seed": "1", "start": 40.0, "final": 55.0},
        {"method": "one_anchor", NOISE_AXIS: "0.0", "seed": "2", "start": 40.0, "final": 20.0},
        {"method": "one_anchor", NOISE_AXIS: "0.3", "seed": "0", "start": 40.0, "final": 30.0},
        {"method": "tsrl", NOISE_AXIS: "0.0", "seed": "0", "start": 40.0, "final": 50.0},
        {"method": "tsrl", NOISE_AXIS: "0.0", "seed": "1", "start": 40.0, "final": 60.0},
        {"method": "tsrl", NOISE_AXIS: "0.3", "seed": "0", "start": 40.0, "final": 45.0},
        {"method": "tsrl", NOISE_AXIS: "0.3", "seed": "1", "start": 40.0, "final": 54.0},
    ]
    fractions = noise_fractions(records, "method")
    assert fractions["performance_retained"]["one_anchor"][0.3] == pytest.approx(0.5)
    assert fractions["gain_kept"]["one_anchor"][0.3] == pytest.approx(-10 / 20)
    assert fractions["performance_retained"]["tsrl"][0.3] == pytest.approx(99 / 110)


def test_gain_kept_is_undefined_where_the_clean_runs_gained_nothing():
    """Clean runs 0.2 points above their start: a gain kept of (1.7 − 32.3) ÷ 0.2 = −15,300 % would say only how
    near zero the clean gain is, so the cell has none (performance retained still has one)."""
    records = [
        {"method": "one_anchor", NOISE_AXIS: "0.0", "seed": "0", "start": 32.3, "final": 32.5},
        {"method": "one_anchor", NOISE_AXIS: "0.3", "seed": "0", "start": 32.3, "final": 1.7},
    ]
    fractions = noise_fractions(records, "method")
    assert 0.3 not in fractions["gain_kept"]["one_anchor"]
    assert fractions["performance_retained"]["one_anchor"][0.3] == pytest.approx(1.7 / 32.5)


TSRL_RECIPES = [r for r in RECIPES if r.startswith("tsrl_")]


@pytest.mark.parametrize("recipe", TSRL_RECIPES)
def test_every_tsrl_recipe_runs_three_seeds(recipe):
    """TSRL Paper §3: "mean over 3 runs"; tsrl-reproduce's table gives the mean and std over the seeds."""
    assert grid(recipe)["seed"] == ["0", "1", "2"]


@pytest.mark.parametrize("recipe", TSRL_RECIPES)
def test_every_tsrl_recipe_names_the_papers_judge(recipe):
    """Paper §3: Kimi-K2 judges, Kimi-K2-VL the rendered web pages; the served model name stays the user's."""
    header = (ROOT / "recipes" / "paper" / f"{recipe}.yaml").read_text()
    assert "the paper's judge is Kimi-K2" in header
    assert recipe == "tsrl_table2_weak_judge" or "Kimi-K2-VL" in header


def test_reasoning_arena_names_its_judge_and_its_robustness_judges():
    header = (ROOT / "recipes" / "paper" / "reasoning_arena_table1.yaml").read_text()
    assert all(name in header for name in ("DeepSeekMath-V2", "Qwen3-235B-A22B", "Qwen3.5-122B-A10B"))


def test_tsrl_methods_center_by_the_group_mean_and_the_standardising_papers_standardise():
    """TSRL §2.2: GRPO on w(c) − b, "rewards centered by the group mean" (algo.adv_scale=none), and §3 trains its
    "Baselines (all trained under identical optimization settings)": Intuitor too, though its own paper standardises
    (algo.adv_scale=group is the switch). Reasoning Arena's CISPO methods standardise within the group."""
    for method in ("tsrl", "one_anchor", "rubric", "in_batch", "reward_model", "self_bootstrap", "intuitor"):
        assert composed([f"method={method}"]).algo.adv_scale == "none", method
    for method in ("rlvr", "rlaif", "adaptive_pointwise", "reasoning_arena", "reasoning_arena_live"):
        assert composed([f"method={method}"]).algo.adv_scale == "group", method
    for recipe in ("tsrl_table1", "tsrl_human_study"):  # every recipe that trains Intuitor beside TSRL
        typed = to_run_config(composed([f"recipes=paper/{recipe}", "method=intuitor", "run_dir=u"]))
        tsrl = to_run_config(composed([f"recipes=paper/{recipe}", "method=tsrl", "run_dir=u"]))
        assert (typed.algo, typed.trainer) == (tsrl.algo, tsrl.trainer), recipe


def test_only_the_single_comparison_baselines_train_four_times_tsrls_steps():
    """Paper §3 trains "the single-comparison baselines" 4× longer to equalise judge calls: one-anchor (one verdict
    per sample) and the rubric (one grade). The reward model, Intuitor, SFT and DPO make no judge call in training
    and the in-batch rank asks G − 1 per sample: they run TSRL's steps."""
    multiplier = {m: composed([f"method={m}"]).trainer.step_multiplier for m in TSRL_METHODS | {"intuitor"}}
    assert {m for m, x in multiplier.items() if x != 1} == SINGLE_COMPARISON
    assert all(multiplier[m] == 4 for m in SINGLE_COMPARISON)


@pytest.mark.parametrize("recipe", ["tsrl_table1"])
def test_the_web_judge_sees_rendered_pages_for_verdicts_and_grades(recipe):
    """Paper §3: "Kimi-K2-VL judges rendered webpages": under the recipe, task=web renders the pages and the model
    judge is sent the screenshots (judge.vision null = where pages are rendered), pairwise and pointwise alike."""
    from tsrl.remote.openai_judge import pages_rendered
    from tsrl.tasks import build_task

    for method in ("tsrl", "rubric"):
        typed = to_run_config(composed([f"recipes=paper/{recipe}", f"method={method}", "task=web", "run_dir=u"]))
        assert typed.judge.render.enabled and typed.judge.vision is None
        assert pages_rendered(typed.judge, build_task(typed.task))
        stories = to_run_config(composed([f"recipes=paper/{recipe}", f"method={method}", "task=stories", "run_dir=u"]))
        assert not pages_rendered(stories.judge, build_task(stories.task))


def test_tsrl_diversity_compares_the_ladder_with_near_duplicates_at_identical_k():
    """§4.3: "Train with identical $k$ and compute on two anchor pools — high-diversity (varied styles, from
    differently-prompted Gemini-2.5-Pro) vs. low-diversity (near-duplicate responses)." """
    axes = grid("tsrl_diversity")
    assert axes["method"] == ["tsrl"] and axes["reward.select"] == ["nested", "near_duplicate"]
    for select in axes["reward.select"]:
        typed = to_run_config(
            composed(["recipes=paper/tsrl_diversity", "method=tsrl", f"reward.select={select}", "run_dir=u"])
        )
        assert (typed.reward.k, typed.reward.select) == (4, select)
    low = to_run_config(composed(["recipes=paper/tsrl_table1", "method=tsrl_low_diversity", "run_dir=u"]))
    assert (low.reward.k, low.reward.select, low.trainer.max_steps) == (4, "near_duplicate", 220)


def test_tsrl_bad_judge_trains_with_the_judge_given_and_is_measured_by_a_named_strong_judge():
    """§4.4: the weak judge replaces the strong one in training, "keeping anchors, prompts, and hyperparameters
    unchanged"; the held-out win-rate is the strong judge's (eval_judge), not the weak judge made clean."""
    overrides = ["recipes=paper/tsrl_table1", "judge.model=meta-llama/Llama-3.1-8B-Instruct", "run_dir=u"]
    bad = to_run_config(composed([*overrides, "method=tsrl_bad_judge", "eval_judge.model=strong"]))
    tsrl = to_run_config(composed([*overrides, "method=tsrl"]))
    assert bad.judge.model == "meta-llama/Llama-3.1-8B-Instruct" and bad.eval_judge.model == "strong"
    assert tsrl.eval_judge is None  # the other rows: the (strong) training judge, made clean
    assert (bad.reward, bad.trainer, bad.algo) == (tsrl.reward, tsrl.trainer, tsrl.algo)
    # the whole grid in one call would give the + Bad Judge row the strong judge twice: refused, naming the fix
    with pytest.raises(ConfigError, match="judge.model and eval_judge.model are both 'strong'"):
        to_run_config(
            composed([*overrides[:1], "judge.model=strong", "method=tsrl_bad_judge", "eval_judge.model=strong"])
        )
    with pytest.raises(ConfigError, match="eval_judge is not set"):
        check_distinct_judges(bad.judge, None)


def test_tsrl_model_scale_runs_the_rubric_beside_tsrl_at_each_size():
    """§4.6: "the gap over the rubric baseline grows from +14.2 to +28.0 with scale": both methods at each size,
    the rubric at its 4x steps."""
    axes = grid("tsrl_model_scale")
    assert axes["method"] == ["tsrl", "rubric"] and axes["model"] == ["qwen25_3b", "qwen25_7b"]
    steps = {
        m: to_run_config(composed(["recipes=paper/tsrl_model_scale", f"method={m}", "run_dir=u"])).trainer.max_steps
        for m in axes["method"]
    }
    assert steps == {"tsrl": 220, "rubric": 880}


def record(method: str, final: float, **values) -> dict:
    base = {"method": method, "final": final, "steps": 220, "judge_calls": 0.0, "judge_tokens": 0.0, "wall_s": 0.0}
    return {**base, "pool": None, **values}


def test_the_gap_over_the_rubric_is_computed_per_policy():
    """TSRL 59.2 and 78.0 against the rubric's 45.0 and 50.0 (3B, 7B): gaps +14.2 and +28.0."""
    from tsrl.reproduce.ablations import gap_table

    records = [
        record("tsrl", 59.0, model="qwen25_3b"),
        record("tsrl", 59.4, model="qwen25_3b"),
        record("rubric", 45.0, model="qwen25_3b"),
        record("tsrl", 78.0, model="qwen25_7b"),
        record("rubric", 50.0, model="qwen25_7b"),
    ]
    table = gap_table(records, "method", ["model"])
    assert "| model=qwen25_3b | 59.2 (0.3) | 45.0 (0.0) n=1 | +14.2 |" in table
    assert "| model=qwen25_7b | 78.0 (0.0) n=1 | 50.0 (0.0) n=1 | +28.0 |" in table
    assert gap_table([r for r in records if r["method"] == "tsrl"], "method", ["model"]) == ""


def test_the_pool_table_shows_both_pools_diversity_and_strength_and_the_ablation_rows_their_labels():
    from tsrl.reproduce.ablations import pool_table

    nested = {"distinct_1": 0.6, "distinct_2": 0.9, "jaccard_distance": 0.85, "strength": 0.1}
    near = {"distinct_1": 0.3, "distinct_2": 0.35, "jaccard_distance": 0.05, "strength": 0.2}
    records = [record("tsrl", 70.0, pool=nested), record("tsrl_low_diversity", 14.0, pool=near), record("rubric", 40)]
    table = pool_table(records, "method", [])
    assert "| tsrl | all runs | 0.600 | 0.900 | 0.850 | 0.100 | 70.0 (0.0) n=1 |" in table
    assert "| + Low Diversity | all runs | 0.300 | 0.350 | 0.050 | 0.200 | 14.0 (0.0) n=1 |" in table
    assert "rubric" not in table  # no ladder, no pool


def test_the_compute_table_gives_judge_calls_tokens_and_wall_clock_beside_the_score():
    """§4.11: "TSRL at 220 steps (74.0, ~2.5 h) still beats the rubric baseline at 880 steps (47.5, ~7 h)"."""
    from tsrl.reproduce.ablations import compute_table

    records = [
        record("tsrl", 74.0, judge_calls=112640.0, judge_tokens=9e6, wall_s=2.5 * 3600),
        record("rubric", 47.5, steps=880, judge_calls=112640.0, wall_s=7 * 3600),
    ]
    table = compute_table(records, "method")
    assert "| tsrl | 220 | 112640 | 9000000 | 2.50 | 74.0 (0.0) n=1 |" in table
    assert "| rubric | 880 | 112640 | — | 7.00 | 47.5 (0.0) n=1 |" in table  # a judge without usage: no tokens


def test_aggregate_prints_the_ablation_rows_under_table_1s_labels(tmp_path):
    """Finished runs of tsrl, + Bad Judge and + Low Diversity: table.md names the two ablations as Table 1 does,
    with the pools and the compute of every run."""
    import json

    import yaml

    from tsrl.reproduce import aggregate

    for method, final, pool in (("tsrl", 70.0, 0.8), ("tsrl_bad_judge", 65.0, 0.8), ("tsrl_low_diversity", 14.0, 0.05)):
        run = tmp_path / f"method={method}"
        (run / ".hydra").mkdir(parents=True)
        (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"method={method}", "seed=0"]))
        evals = {"start": {"winrate": 13.0, "step": 0}, "latest": {"winrate": final, "step": 220}, "history": []}
        (run / "eval.json").write_text(json.dumps(evals))
        (run / "done.json").write_text("{}")
        step = {"step": 1, "judge/calls": 512.0, "judge/tokens": 0.0, "time/step_s": 36.0}
        (run / "metrics.jsonl").write_text(json.dumps(step) + "\n")
        selected = {"distinct_1": 0.5, "distinct_2": 0.5, "jaccard_distance": pool, "strength": 0.0}
        (run / "ladder_diversity.json").write_text(json.dumps({"selected": selected}))
    text = aggregate(tmp_path, {"method": ["tsrl", "tsrl_bad_judge", "tsrl_low_diversity"], "seed": ["0"]})
    assert "| + Bad Judge | 65.0 (0.0) n=1 |" in text and "| + Low Diversity | 14.0 (0.0) n=1 |" in text
    assert "| + Low Diversity | all runs | 0.500 | 0.500 | 0.050 | 0.000 |" in text
    assert "| + Bad Judge | 1 | 512 | — | 0.01 | 65.0 (0.0) n=1 |" in text
