#!/usr/bin/env bash
# The CPU-scale study of docs/results.md: the paper recipes with the CPU stand-ins (tsrl-reproduce --cpu: the tiny
# policy, the simulated judge, `make train`'s sizes) on humor, two runs at a time with one torch thread each, under
# the papers' protocols: one binary verdict per comparison (judge.order=random, k calls per sample), the
# single-comparison baselines (one_anchor, rubric) trained 4x the steps (their method configs), both noise metrics.
# Each grid resumes where it stopped; results land in runs/reproduce/<name>_cpu/table.md.
#   bash scripts/cpu_study.sh            (about 4 hours on 2 idle cores: ~86 runs' worth of 100 steps, of which the
#                                         noise grid's one_anchor and rubric runs, 400 steps each, are more than half;
#                                         trainer.step_multiplier=1 on the noise line gives equal steps, ~2 hours)
# Humor ships 10 anchors per training prompt, so TSRL's whole k grid {1, 2, 4, 5, 6, 8, 10} fits (k = 10 is every
# anchor); the rubric line of the k sweep runs once per seed.
set -euo pipefail
BIN=$(dirname "$(readlink -f "$0")")/../.venv/bin
export OMP_NUM_THREADS=1
run() { "$BIN/tsrl-reproduce" "$@" --cpu task=humor hydra/launcher=local_parallel; }
run paper/tsrl_k_sweep --out runs/reproduce/k_sweep_cpu reward.k=1,2,4,5,6,8,10 seed=0,1
run paper/tsrl_diversity --out runs/reproduce/diversity_cpu reward.k=2 seed=0,1
run paper/reasoning_arena_table1 --out runs/reproduce/routing_cpu method=rlvr,adaptive_pointwise,reasoning_arena_live seed=0
run paper/tsrl_self_bootstrap --out runs/reproduce/self_bootstrap_cpu seed=0
run paper/tsrl_noise --out runs/reproduce/noise_cpu method=tsrl,one_anchor,rubric \
    judge.flip_prob=0.0,0.05,0.1,0.2,0.3,0.4 seed=0
# AIME-style problems, one run after another (the first builds the tiny policy for aime: a one-off warm start on
# the worked solutions that two parallel runs would both start)
"$BIN/tsrl-reproduce" paper/reasoning_arena_table1 --cpu --out runs/reproduce/routing_aime_cpu \
    method=rlvr,reasoning_arena_live seed=0 trainer.max_steps=40 trainer.eval.every=10
