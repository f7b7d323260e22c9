"""The numbers of `tsrl-human-study report` (tsrl/evaluation/human_study.py has the study's shape): mean ranks
with bootstrap intervals, Kendall's W, each label's human win-rate, the judge's and the runs' agreement with the
humans, and report.md's text. Pure: the study, its key, the rankings and the judge's scores in, a report out."""

from __future__ import annotations

from typing import Any

import numpy as np

from tsrl.ranking.agreement import (
    average_ranks,
    bootstrap_mean_ci,
    kendall_tau_b,
    kendalls_w,
    pairwise_win_rate,
    spearman_rho,
)

ANCHOR = "anchor"
"""The key's label prefix of a reference anchor's item (an anchor tier is labelled anchor/<tier>)."""


def rank_tables(study: dict, key: dict, rankings: list[dict]) -> dict[str, Any]:
    """labels [L] (runs, then anchor tiers); per_prompt [P, L] mean rank over annotators and the label's items;
    per_annotator [A, L] mean rank over prompts; per prompt its [A, N] rankings; each item's mean rank."""
    labels = list(key["runs"]) + sorted({v for v in key["items"].values() if v.startswith(ANCHOR)})
    column = {label: j for j, label in enumerate(labels)}
    per_prompt = np.full((len(study["prompts"]), len(labels)), np.nan)
    sums, counts = np.zeros((len(rankings), len(labels))), np.zeros((len(rankings), len(labels)))
    matrices, item_means = [], {}
    for p, prompt in enumerate(study["prompts"]):
        matrix = np.array([[r["ranks"][prompt["id"]][i] for i in prompt["items"]] for r in rankings], float)  # [A, N]
        matrices.append(matrix)
        item_means.update(zip(prompt["items"], matrix.mean(axis=0)))
        for n, item in enumerate(prompt["items"]):
            j = column[key["items"][item]]
            sums[:, j] += matrix[:, n]
            counts[:, j] += 1
        for label, j in column.items():
            mine = [n for n, item in enumerate(prompt["items"]) if key["items"][item] == label]
            if mine:
                per_prompt[p, j] = matrix[:, mine].mean()
    return {
        "labels": labels,
        "per_prompt": per_prompt,
        "per_annotator": sums / np.maximum(counts, 1),
        "matrices": matrices,
        "item_means": item_means,
    }


def summarise(
    study: dict, key: dict, rankings: list[dict], judge: dict | None, samples: int = 10_000, level: float = 0.95
) -> dict[str, Any]:
    """The report's numbers (see the module docstring); seeded, so the same inputs give the same report."""
    t = rank_tables(study, key, rankings)
    mean, low, high = bootstrap_mean_ci(t["per_prompt"], samples, level, seed=study["seed"])
    w_prompts = np.array([kendalls_w(m) for m in t["matrices"]])  # [P]
    w_mean, w_low, w_high = bootstrap_mean_ci(w_prompts[:, None], samples, level, seed=study["seed"])
    by_annotator = np.array([average_ranks(row) for row in t["per_annotator"]])  # [A, L]: ties possible
    report: dict[str, Any] = {
        "task": study["task"],
        "prompts": len(study["prompts"]),
        "annotators": [r["annotator"] for r in rankings],
        "items_per_prompt": len(study["prompts"][0]["items"]),
        "interval": f"{round(100 * level)} % percentile bootstrap over prompts, {samples} resamples",
        "mean_rank": [
            {"label": lab, "mean": float(m), "low": float(lo), "high": float(hi)}
            for lab, m, lo, hi in sorted(zip(t["labels"], mean, low, high), key=lambda x: x[1])
        ],
        "kendalls_w": {
            "per_prompt": dict(zip((p["id"] for p in study["prompts"]), w_prompts.tolist())),
            "mean_over_prompts": float(w_mean[0]),
            "low": float(w_low[0]),
            "high": float(w_high[0]),
            "over_labels": kendalls_w(by_annotator),
        },
        "human_win_rate": human_win_rates(study, key, t),
        "vs_judge": None,
        "vs_winrate": None,
    }
    human = dict(zip(t["labels"], mean))
    if judge is not None:
        report["vs_judge"] = judge_agreement(study, key, judge, t, human)
    runs = {label: run["value"] for label, run in key["runs"].items() if "value" in run}
    if len(runs) >= 2:
        labels = list(runs)
        metric = next(r["metric"] for r in key["runs"].values() if "metric" in r)
        values, ranks = [-runs[x] for x in labels], [human[x] for x in labels]
        report["vs_winrate"] = {
            "metric": metric,
            "labels": labels,
            "tau_b": kendall_tau_b(values, ranks),
            "tau_b_why": tied(values, ranks, f"every method's {metric}", "every method's human mean rank"),
        }
    return report


def tied(first: list[float], second: list[float], first_name: str, second_name: str) -> str:
    """Why Kendall's τ_b of two orders is undefined ("" when it is not): τ_b divides by the pairs each order leaves
    untied, which is zero when every value of one order is the same."""
    for values, name in ((first, first_name), (second, second_name)):
        if len(values) < 2 or np.ptp(np.asarray(values, float)) == 0:
            return f"{name} is tied"
    return ""


def tau_text(value: float, why: str) -> str:
    """τ_b for report.md: the number, or why there is none (a bare "nan" says nothing)."""
    return f"{value:.3f}" if not np.isnan(value) else f"undefined ({why or 'no untied pair'})"


def human_win_rates(study: dict, key: dict, t: dict) -> dict[str, float]:
    """Per label, the mean over its items and annotators of the pairwise win-rate (agreement.pairwise_win_rate)
    against the other items of the same prompt, best first."""
    shares: dict[str, list[float]] = {label: [] for label in t["labels"]}
    for prompt, matrix in zip(study["prompts"], t["matrices"]):
        for item, share in zip(prompt["items"], pairwise_win_rate(matrix)):
            shares[key["items"][item]].append(float(share))
    rates = {label: float(np.mean(v)) for label, v in shares.items() if v}
    return dict(sorted(rates.items(), key=lambda x: -x[1]))


def judge_agreement(study: dict, key: dict, judge: dict, t: dict, human: dict[str, float]) -> dict[str, Any]:
    """τ_b and Spearman's ρ between the judge's round-robin order and the human mean ranks: per prompt over its
    items, and over labels (the judge's mean rank per label against the humans'; ρ with its p-value)."""
    taus, rhos, judge_ranks = [], [], {label: [] for label in t["labels"]}
    for prompt in study["prompts"]:
        scored = [i for i in prompt["items"] if judge["scores"][prompt["id"]].get(i) is not None]
        scores = np.array([judge["scores"][prompt["id"]][i] for i in scored])  # [N'] higher = better
        humans = [t["item_means"][i] for i in scored]
        taus.append(kendall_tau_b(-scores, humans) if len(scored) > 1 else np.nan)
        rhos.append(spearman_rho(-scores, humans)[0] if len(scored) > 1 else np.nan)
        for item, rank in zip(scored, average_ranks(-scores)):
            judge_ranks[key["items"][item]].append(rank)
    labels = [label for label in t["labels"] if judge_ranks[label]]
    judged = [float(np.mean(judge_ranks[label])) for label in labels]
    rho, p_value = spearman_rho(judged, [human[x] for x in labels])
    return {
        "judge": judge["judge"],
        "tau_b_per_prompt_mean": float(np.nanmean(taus)) if not np.all(np.isnan(taus)) else float("nan"),
        "tau_b_over_labels": kendall_tau_b(judged, [human[x] for x in labels]),
        "tau_b_over_labels_why": tied(
            judged, [human[x] for x in labels], "every label's judge mean rank", "every label's human mean rank"
        ),
        "spearman_over_labels": {"rho": rho, "p_value": p_value, "n": len(labels)},
        "spearman_per_prompt_mean": float(np.nanmean(rhos)) if not np.all(np.isnan(rhos)) else float("nan"),
        "judge_mean_rank": dict(zip(labels, judged)),
    }


def markdown(report: dict[str, Any]) -> str:
    w = report["kendalls_w"]
    lines = [
        f"Blinded human ranking — task {report['task']}: {report['prompts']} prompts × "
        f"{report['items_per_prompt']} items, {len(report['annotators'])} annotators; rank 1 = best. "
        f"Intervals: {report['interval']}.",
        "",
        "| method / anchor | mean rank | interval | human win-rate |",
        "|---|---|---|---|",
    ]
    wins = report["human_win_rate"]
    lines += [
        f"| {r['label']} | {r['mean']:.2f} | [{r['low']:.2f}, {r['high']:.2f}] | {100 * wins[r['label']]:.1f} % |"
        for r in report["mean_rank"]
    ]
    lines += [
        "",
        f"Inter-annotator agreement, Kendall's W (no ties: a sheet ranks without ties): mean over prompts "
        f"{w['mean_over_prompts']:.3f} [{w['low']:.3f}, {w['high']:.3f}], range "
        f"{min(w['per_prompt'].values()):.3f}–{max(w['per_prompt'].values()):.3f}; over methods (each "
        f"annotator's mean ranks, tie-corrected) {w['over_labels']:.3f}. (TSRL §4.12 gives one agreement per "
        "task without naming its statistic.)",
        "Human win-rate: the share of the pairwise comparisons implied by the annotators' rankings that the item "
        'wins against the other items of its prompt (a tie ½); our reading of TSRL\'s "average win-rates".',
    ]
    judge = report["vs_judge"]
    if judge:
        lines.append(
            f"Judge ({judge['judge']['kind']} {judge['judge']['model']}, round-robin of the same items, both "
            "orders) against the human mean ranks: Kendall's τ_b "
            f"{tau_text(judge['tau_b_over_labels'], judge.get('tau_b_over_labels_why', ''))} over methods and "
            "anchors, "
            f"{tau_text(judge['tau_b_per_prompt_mean'], 'every prompt has its judge scores or human ranks tied')} "
            "per prompt (mean over prompts); "
            f"Spearman's ρ {judge['spearman_over_labels']['rho']:.3f} (p = "
            f"{judge['spearman_over_labels']['p_value']:.3g}, n = {judge['spearman_over_labels']['n']}) over "
            f"methods and anchors, {judge['spearman_per_prompt_mean']:.3f} per prompt (mean over prompts)."
        )
    winrate = report["vs_winrate"]
    if winrate:
        lines.append(
            f"The runs' held-out {winrate['metric']} (eval.json, evaluation judge) against the human mean "
            f"ranks: Kendall's τ_b {tau_text(winrate['tau_b'], winrate.get('tau_b_why', ''))} over "
            f"{len(winrate['labels'])} methods."
        )
    return "\n".join(lines) + "\n"
