"""Judge cost against ranking accuracy: what each reward regime pays the judge per group, and how well its rewards
order the group, per judge profile.

Groups (fixed): the first --prompts humor training prompts (tsrl/tasks/data/humor/train.jsonl), G = 8 completions
each: 8 of the prompt's 10 anchors drawn at random (seed 0), each rewritten by tsrl.rewards.near_duplicates (a word
swapped for a synonym, else a final "!"; a text with neither stays a copy), so that most completions are not
themselves ladder anchors. A completion's latent quality is the humor task's q(prompt, text), which the simulated
judge perceives through its taste, noise and biases. No policy samples are stored in the repository, hence these.

Regimes, each built through tsrl.registry.REWARDS with a RegimeContext, at its defaults but for what the name says:
ladder_k1 … ladder_k8 (reward=ladder reward.k=k), the arena topologies (reward=arena reward.topology=…),
constitutional, rubric, listwise and listwise_ladder_k4 (reward=listwise reward.anchors=4). The regimes' seeds and
the judge's seed are the run's seed s; ladders are ranked afresh for each (regime, profile, seed) in a temporary
folder. Sample 0 of a group plays the arena's anchor but is not decoded greedily here (there is no policy).

Accuracy (pairwise ordering accuracy): per group, the share of its pairs with different latent quality whose
rewards are ordered the same way, equal rewards counting ½; the mean over groups, then the mean over --seeds seeds
± the 95 % t-interval of that mean, for each judge profile: the shipped `ideal`, `gpt4-mtbench` and `gpt35-mtbench`
(tsrl/judging/profiles/), `framed` (ideal with a per-call frame σ_η = 1, ours: it moves every grade of a call
together) and `noiseless` (τ = 0.001, no taste, no grading noise: the regime's own ceiling).

Cost: judge calls per group, with judge.order=random (tsrl's default: one call per match; order=both doubles the
pairwise ones), and the one-off calls per prompt that ranking a ladder costs (K(K−1)/2 = 45, once per run, then
stored). Tokens: the same regimes once more with judge=openai (reasoning form, no constraint) against the loopback
server (tsrl.testing.judge_server) on the same groups; its prompts are tsrl's real templates, counted with SmolLM2's
tokenizer (--tokenizer; empty: the server's characters/4), and its answers are one line of reasoning and the
verdict or scores — a real judge's reasoning is longer, so completion tokens and dollars are lower bounds. The judge
calls of both passes must agree (checked); prompt tokens move by about 0.1 % between runs (every request
fences its responses with fresh random tags). Dollars at --price-in / --price-out per 1M tokens, by default
gpt-4o-mini's list price ($0.15 / $0.60, openrouter.ai/openai/gpt-4o-mini-2024-07-18).

    python benchmarks/judge_cost.py [--quick] [--seeds 5] [--prompts 32] [--regimes …] [--profiles …]
        [--price-in 0.15] [--price-out 0.60] [--tokenizer smollm2] [--out runs/judge_cost]

Writes table.md, results.json and frontier.png into --out: 152 s here with other jobs on the 2 cores; --quick (4
prompts, 2 seeds) is a smoke run.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import stdtrit

from tsrl.judging import RubricSimConfig, build_judge, close_judge, judge_fingerprint
from tsrl.registry import REWARDS
from tsrl.remote.openai_config import OpenAIJudgeConfig
from tsrl.rewards.base import RegimeContext
from tsrl.rewards.near_duplicates import near_duplicates
from tsrl.tasks import HumorConfig, build_task
from tsrl.tasks.base import TaskView
from tsrl.testing.judge_server import JudgeServer
from tsrl.types import Group, Prompt, Rollout

G = 8  # completions per group
REGIMES: dict[str, tuple[str, dict[str, Any]]] = {
    **{f"ladder_k{k}": ("ladder", {"k": k}) for k in (1, 2, 4, 8)},
    **{
        topology: ("arena", {"topology": topology})
        for topology in ("round_robin", "anchor", "single_elimination", "double_elimination", "swiss", "circular")
    },
    "constitutional": ("constitutional", {}),
    "rubric": ("rubric", {}),
    "listwise": ("listwise", {}),
    "listwise_ladder_k4": ("listwise", {"anchors": 4}),
}
"""Row name → (reward name, config fields away from the defaults)."""
PROFILES: dict[str, dict[str, Any]] = {
    "ideal": {"profile": "ideal"},
    "gpt4-mtbench": {"profile": "gpt4-mtbench"},
    "gpt35-mtbench": {"profile": "gpt35-mtbench"},
    "framed": {"profile": "ideal", "frame_noise": 1.0},
    "noiseless": {"tau": 1e-3, "taste": 0.0, "rubric_noise": 0.0, "list_noise": 0.0},
}
"""Profile name → RubricSimConfig fields (`profile` names a shipped file; the other fields win over it)."""
PRICE = (0.15, 0.60)  # $ per 1M prompt / completion tokens: gpt-4o-mini's list price (see the docstring)


class RememberedQuality(TaskView):
    """The task seen through the chosen prompts, its latent quality computed once per (prompt, text): the simulated
    judge asks it at every verdict, and the benchmark asks the same texts hundreds of times."""

    def __init__(self, task: Any, prompts: list[Prompt]) -> None:
        super().__init__(task, prompts)
        self.known: dict[tuple[str, str], float] = {}

    def quality(self, prompt: Prompt, text: str) -> float:
        key = (prompt.id, text)
        if key not in self.known:
            self.known[key] = self.task.quality(prompt, text)
        return self.known[key]


def make_groups(prompts: list[Prompt], size: int = G, seed: int = 0) -> list[Group]:
    """One group per prompt: near-duplicates of `size` of its anchors, drawn at random."""
    rng, groups = np.random.default_rng(seed), []
    for prompt in prompts:
        chosen = rng.choice(len(prompt.anchors), size, replace=False)
        texts = [near_duplicates(prompt.anchors[i].text, 1)[0] for i in chosen]
        groups.append(Group(prompt, [1], [Rollout(text, [1], [0.0], False) for text in texts]))
    return groups


def pairwise_accuracy(rewards: np.ndarray, quality: np.ndarray) -> float:
    """Share of the pairs with different quality [G] that rewards [G] order alike; equal rewards ½ (NaN: no pair)."""
    rewards = np.round(rewards, 9)  # float round-off between equal records is a tie
    i, j = np.triu_indices(len(quality), k=1)
    dq, dr = np.sign(quality[i] - quality[j]), np.sign(rewards[i] - rewards[j])
    kept = dq != 0
    if not kept.any():
        return float("nan")
    return float(np.mean(np.where(dr[kept] == 0, 0.5, dr[kept] == dq[kept])))


def regime_config(name: str, seed: int, ladder_dir: str) -> Any:
    """The reward config of row `name`: its fields, the run's seed and the ladder folder where it has them."""
    reward, settings = REGIMES[name]
    config_class = next(c.config for c in REWARDS if c.name == reward)
    names = {f.name for f in fields(config_class)}
    cfg = config_class(**settings, **({"seed": seed} if "seed" in names else {}))
    if "ladder_dir" in names:
        cfg = replace(cfg, ladder_dir=ladder_dir)
    if "ladder" in names:
        cfg = replace(cfg, ladder=replace(cfg.ladder, ladder_dir=ladder_dir))
    return cfg


def play(name: str, judge: Any, judge_cfg: Any, task: Any, groups: list[Group], seed: int, folder: str) -> dict:
    """Score the groups with one regime: rewards [B, G], the judge's metrics of that scoring, and the calls that
    building the regime made (ranking a ladder's anchors; none when the folder holds the ladder already)."""
    ctx = RegimeContext(task, judge, judge_fingerprint(judge_cfg), Path(folder) / name)
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    judge.drain_metrics()
    regime = REWARDS.build(regime_config(name, seed, str(Path(folder) / "ladders")), ctx)
    setup = judge.drain_metrics()
    rewards = regime.score(groups).rewards  # [B, G]
    if np.isnan(rewards).any():
        raise RuntimeError(f"{name}: the judge left groups unscored; the benchmark needs every group scored.")
    return {"rewards": rewards, "metrics": judge.drain_metrics(), "setup_calls": setup.get("calls", 0.0)}


def accuracy_pass(task: Any, groups: list[Group], regimes: list[str], profiles: list[str], seeds: int) -> dict:
    """Simulated judge: per (regime, profile) the accuracy of every seed, and the calls per group."""
    quality = np.array([[task.quality(g.prompt, r.text) for r in g.rollouts] for g in groups])  # [B, G]
    out: dict[str, dict] = {name: {"accuracy": {}, "calls": None, "setup_calls": 0.0} for name in regimes}
    for profile in profiles:
        for seed in range(seeds):
            judge_cfg = RubricSimConfig(**PROFILES[profile], seed=seed)
            for name in regimes:
                judge = build_judge(judge_cfg, task)
                with tempfile.TemporaryDirectory() as folder:
                    played = play(name, judge, judge_cfg, task, groups, seed, folder)
                per_group = [pairwise_accuracy(r, q) for r, q in zip(played["rewards"], quality)]
                out[name]["accuracy"].setdefault(profile, []).append(float(np.nanmean(per_group)))
                calls = played["metrics"]["calls"] / len(groups)
                if out[name]["calls"] not in (None, calls):
                    raise RuntimeError(
                        f"{name}: {calls} calls per group under {profile}, seed {seed}, against "
                        f"{out[name]['calls']} before; the cost must not depend on the judge."
                    )
                out[name]["calls"] = calls
                out[name]["setup_calls"] = played["setup_calls"] / len(groups)  # one group per prompt
    return out


def token_pass(task: Any, groups: list[Group], regimes: list[str], tokenizer: str) -> dict:
    """judge=openai against the loopback server: calls, prompt and completion tokens per group, per regime.

    The judge's cost metric is read at 1 $ per prompt token and 0 per completion token, so it counts the prompt
    tokens; its token metric counts both."""
    out = {}
    with JudgeServer(tokenizer=tokenizer) as server, tempfile.TemporaryDirectory() as folder:
        cfg = OpenAIJudgeConfig(
            base_urls=[server.url], api_key_env="", constrain="off", preflight=False, price_in_per_m=1e6
        )
        for name in regimes:
            judge = build_judge(cfg, task)
            try:
                metrics = play(name, judge, cfg, task, groups, 0, folder)["metrics"]
            finally:
                close_judge(judge)
            prompt = metrics.get("cost_usd", 0.0)
            out[name] = {
                "calls": metrics["calls"] / len(groups),
                "prompt_tokens": prompt / len(groups),
                "completion_tokens": (metrics["tokens"] - prompt) / len(groups),
            }
    return out


def interval(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % t-interval (NaN with one value)."""
    n = len(values)
    if n < 2:
        return float(np.mean(values)), float("nan")
    return float(np.mean(values)), float(stdtrit(n - 1, 0.975) * np.std(values, ddof=1) / np.sqrt(n))


def rows_of(accuracy: dict, tokens: dict, price: tuple[float, float]) -> list[dict]:
    """One row per regime: cost per group (calls, tokens, dollars per 1000 groups) and accuracy per profile."""
    rows = []
    for name, acc in accuracy.items():
        sim, http = acc["calls"], tokens[name]["calls"]
        if abs(sim - http) > 1e-9:
            raise RuntimeError(
                f"{name}: {sim} judge calls per group with the simulated judge but {http} with judge=openai; the "
                "token count must be of the same calls."
            )
        prompt, completion = tokens[name]["prompt_tokens"], tokens[name]["completion_tokens"]
        rows.append(
            {
                "regime": name,
                "calls": sim,
                "setup_calls_per_prompt": acc["setup_calls"],
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "tokens": prompt + completion,
                "usd_per_1k_groups": (price[0] * prompt + price[1] * completion) / 1e6 * 1000,
                "accuracy": {p: dict(zip(("mean", "ci95"), interval(v)), seeds=v) for p, v in acc["accuracy"].items()},
            }
        )
    return rows


def markdown(rows: list[dict], price: tuple[float, float], seeds: int) -> str:
    profiles = list(rows[0]["accuracy"])
    head = (
        "| regime | calls/group | one-off calls/prompt | prompt tok/group | completion tok/group | "
        f"$ per 1000 groups (${price[0]:g} / ${price[1]:g} per 1M) | "
        + " | ".join(f"accuracy {p}" for p in profiles)
        + " |"
    )
    lines = [head, "|---" * (6 + len(profiles)) + "|"]
    for r in rows:
        accuracy = [r["accuracy"][p] for p in profiles]
        shown = [f"{a['mean']:.3f}" + ("" if np.isnan(a["ci95"]) else f" ± {a['ci95']:.3f}") for a in accuracy]
        lines.append(
            f"| {r['regime']} | {r['calls']:g} | {r['setup_calls_per_prompt']:g} | {r['prompt_tokens']:.0f} | "
            f"{r['completion_tokens']:.0f} | {r['usd_per_1k_groups']:.3f} | " + " | ".join(shown) + " |"
        )
    note = f"\nAccuracy: mean over {seeds} seed(s) ± the 95 % t-interval of the mean (none with one seed)."
    return "\n".join(lines) + "\n" + note + "\n"


def pareto(points: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """The points no other point beats on both cost (lower) and accuracy (higher), cheapest first."""
    front, best = [], -np.inf
    for cost, accuracy, name in sorted(points, key=lambda p: (p[0], -p[1])):
        if accuracy > best:
            front.append((cost, accuracy, name))
            best = accuracy
    return front


def plot(rows: list[dict], path: Path) -> None:
    """Accuracy against tokens per group, one panel per profile (three a row), one marker per regime, the Pareto
    front drawn; the legend takes a free panel, or sits below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    profiles = list(rows[0]["accuracy"])
    ncols = min(3, len(profiles))
    nrows = -(-len(profiles) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 4.2 * nrows), sharey=True, squeeze=False)
    markers = dict(zip([r["regime"] for r in rows], "o^sDvP*Xh<>pd8H"))
    colours = dict(zip([r["regime"] for r in rows], plt.cm.tab20.colors))
    for ax, profile in zip(axes.flat, profiles):
        for r in rows:
            a = r["accuracy"][profile]
            style = {"fmt": markers[r["regime"]], "color": colours[r["regime"]], "ms": 6, "capsize": 2}
            ax.errorbar(r["tokens"], a["mean"], yerr=np.nan_to_num(a["ci95"]), label=r["regime"], **style)
        front = pareto([(r["tokens"], r["accuracy"][profile]["mean"], r["regime"]) for r in rows])
        ax.step([p[0] for p in front], [p[1] for p in front], where="post", color="black", lw=1, alpha=0.6)
        ax.set(xscale="log", title=f"judge profile: {profile}", xlabel="judge tokens per group (prompt + completion)")
        ax.grid(alpha=0.3, which="both")
    for ax in axes[:, 0]:
        ax.set_ylabel("pairwise ordering accuracy")
    handles, labels = axes[0][0].get_legend_handles_labels()
    spare = list(axes.flat)[len(profiles) :]
    for ax in spare:
        ax.axis("off")
    if spare:
        spare[0].legend(handles, labels, loc="center", fontsize=9, title="regime (black: Pareto front)")
    else:
        fig.legend(handles, labels, loc="lower center", ncol=min(7, len(labels)), fontsize=8)
    fig.tight_layout(rect=(0, 0 if spare else 0.12, 1, 1))
    fig.savefig(path, dpi=100)


def tokenizer_path(name: str) -> str:
    """The tokenizer folder the loopback server counts with: smollm2 → SmolLM2's (converted once), '' → none."""
    if name != "smollm2":
        return name
    from tsrl.models.smollm2 import smollm2_folder

    return str(smollm2_folder())


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 prompts and 2 seeds (a smoke run)")
    parser.add_argument("--prompts", type=int, default=32, help="humor training prompts, one group each")
    parser.add_argument("--seeds", type=int, default=5, help="seeds of the simulated judge and the regimes")
    parser.add_argument("--regimes", nargs="+", default=list(REGIMES), choices=list(REGIMES), metavar="REGIME")
    parser.add_argument("--profiles", nargs="+", default=list(PROFILES), choices=list(PROFILES), metavar="PROFILE")
    parser.add_argument("--price-in", type=float, default=PRICE[0], help="$ per 1M prompt tokens")
    parser.add_argument("--price-out", type=float, default=PRICE[1], help="$ per 1M completion tokens")
    parser.add_argument("--tokenizer", default="smollm2", help="smollm2, a tokenizer folder, or '' (characters/4)")
    parser.add_argument("--out", type=Path, default=Path("runs/judge_cost"))
    args = parser.parse_args(argv)
    if args.quick:
        args.prompts, args.seeds = min(args.prompts, 4), min(args.seeds, 2)
    start = time.perf_counter()
    humor = build_task(HumorConfig())
    task = RememberedQuality(humor, humor.prompts("train")[: args.prompts])  # ladders rank these prompts' anchors
    groups = make_groups(task.prompts("train"))
    accuracy = accuracy_pass(task, groups, args.regimes, args.profiles, args.seeds)
    tokens = token_pass(task, groups, args.regimes, tokenizer_path(args.tokenizer))
    price = (args.price_in, args.price_out)
    rows = rows_of(accuracy, tokens, price)
    table = markdown(rows, price, args.seeds)
    args.out.mkdir(parents=True, exist_ok=True)
    results = {
        "groups": len(groups),
        "group_size": G,
        "seeds": args.seeds,
        "price_per_m": {"prompt": price[0], "completion": price[1]},
        "tokenizer": args.tokenizer or "characters/4",
        "rows": rows,
    }
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    (args.out / "table.md").write_text(table)
    plot(rows, args.out / "frontier.png")
    print(table)
    print(
        f"{len(groups)} groups × {len(args.regimes)} regimes × {len(args.profiles)} profiles × {args.seeds} seeds "
        f"in {time.perf_counter() - start:.1f} s → {args.out}/"
    )
    return results


if __name__ == "__main__":
    main()
