"""How well the list fit (tsrl/calibration/fit_lists.py) recovers the simulated judge's list parameters: the frame σ_η,
the item noise σ_list and the position effect π, on the simulator's own answers.

Each data set: P prompts with a ladder of 8 anchors of known latent quality (best first, 0.7 apart, jittered by
N(0, 0.3²); 1–40 words), each prompt's anchors asked as one list in 4 orders (`check.lists=4`), the judge
`rubric_sim` with taste 0, γ_grade = 0.3 and the default grade scale, and the fit run on its answers — the design of
tests/unit/calibration/test_fit_lists.py. For each truth and P, over `--seeds` independent data sets: the mean
estimate and its spread, the mean width of the 95 % interval, and how many intervals hold the truth.

    python scripts/list_fit_recovery.py [--seeds 20] [--prompts 20 40]

Prints a markdown table (about a second per fit on one core).
"""

from __future__ import annotations

import argparse

import numpy as np

from tsrl.calibration.fit_lists import collect_lists, fit_lists
from tsrl.judging import RubricSimConfig, SimulatedJudge
from tsrl.testing.fakes import known_ladders

TRUTHS = ((1.0, 0.5, 1.0), (0.3, 1.2, -0.8), (0.6, 0.8, 0.5), (0.0, 1.0, 0.0))
"""(σ_η, σ_list, π) of each row."""
NAMES = ("frame_noise", "list_noise", "list_position")


def recover(truth: tuple[float, float, float], prompts: int, seed: int) -> dict:
    ladders, quality = known_ladders(prompts, seed)
    settings = dict(zip(NAMES, truth), length_weight_grade=0.3)
    judge = SimulatedJudge(RubricSimConfig(seed=seed, taste=0.0, **settings), lambda p, text: quality[text])
    return fit_lists(collect_lists(judge, ladders, lambda p, rank, text: quality[text], orders=4))["estimates"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--prompts", type=int, nargs="+", default=[20, 40])
    args = parser.parse_args()
    print("| σ_η, σ_list, π | lists | σ_η: mean ± sd, width, covered | σ_list | π |")
    print("|---|---|---|---|---|")
    for truth in TRUTHS:
        for prompts in args.prompts:
            fits = [recover(truth, prompts, seed) for seed in range(args.seeds)]
            cells = []
            for name, value in zip(NAMES, truth):
                estimates = np.array([f[name].value for f in fits])
                width = np.mean([f[name].high - f[name].low for f in fits])
                covered = sum(f[name].low <= value <= f[name].high for f in fits)
                cells.append(
                    f"{estimates.mean():.3f} ± {estimates.std(ddof=1):.3f}, {width:.3f}, {covered}/{args.seeds}"
                )
            print(f"| {truth[0]}, {truth[1]}, {truth[2]} | {prompts * 4} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
