"""scripts/simulate_text_error.py: the ladder under a per-text error σ_t, against the closed forms it reduces to.

Raw Monte Carlo checks allow 4 standard errors of the Rao–Blackwellised value (a false alarm has probability
≈ 6e-5 per check; the generators are seeded, so a pass is reproducible).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2] / "scripts"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sim, regimes = load("simulate_text_error"), load("simulate_regimes")


def test_the_batched_count_pmf_is_the_poisson_binomial():
    p = np.random.default_rng(0).random((5, 7))  # [T, K]
    assert np.allclose(sim.count_pmfs(p), [regimes.count_pmf(row) for row in p])


@pytest.mark.parametrize("k", [1, 4, 16])
def test_without_a_text_error_the_cells_are_the_independent_ladder_s(k):
    """σ_t = 0 is TSRL §2.1's conditionally independent ladder: the exact values of simulate_regimes.py."""
    row = sim.cell(0.5, k, 0.0, 1.0, 200, np.random.default_rng(k))
    p = regimes.win_prob(regimes.qualities(0.5), regimes.anchor_qualities(k), 1.0, 0.0)  # [2, K]
    assert np.allclose((row["misorder"], row["tie"]), regimes.exact_ladder(p))
    assert np.isclose(row["var"], regimes.ladder_variance(p).mean()) and row["var_shared"] < 1e-12
    assert row["limit_coin"] == 0.0 and row["limit_var"] == 0.0


def test_raw_monte_carlo_agrees_with_the_rao_blackwellised_values():
    row = sim.cell(0.5, 4, 1.0, 1.0, 20_000, np.random.default_rng(1))
    assert abs(row["z_misorder"]) < 4 and abs(row["z_tie"]) < 4
    assert abs(row["mc_var"] - row["var"]) < 0.05 * row["var"]


def test_a_per_text_error_sets_a_floor_that_anchors_do_not_lower():
    """σ_t = 1, τ = 1: with many anchors the ladder tends to Φ(−Δq/(√2σ_t)) and its variance to Var_e F(q + e);
    without the error the same ladder keeps improving like 1/K."""
    many = sim.cell(1.0, 256, 1.0, 1.0, 4000, np.random.default_rng(2))
    assert abs(many["coin"] - many["limit_coin"]) < 0.02 and many["limit_coin"] > 0.2
    assert many["var_shared"] == pytest.approx(many["limit_var"], rel=0.1)
    few = [sim.cell(1.0, k, 1.0, 1.0, 4000, np.random.default_rng(3)) for k in (1, 16)]
    clean = [sim.cell(1.0, k, 0.0, 1.0, 10, np.random.default_rng(4)) for k in (1, 16)]
    assert clean[1]["var"] < clean[0]["var"] / 15  # 1/K
    assert few[1]["var"] > few[0]["var"] / 8 and few[1]["var"] > many["limit_var"]  # not 1/K: the floor
