import numpy as np
import pytest

from tsrl.ranking import bradley_terry_loss, fit_bradley_terry


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    matches = np.column_stack([rng.integers(0, 5, 40), rng.integers(0, 5, 40), rng.random(40)])
    matches = matches[matches[:, 0] != matches[:, 1]]
    beta = rng.normal(size=5)
    _, grad = bradley_terry_loss(beta, matches, l2=0.3)
    eps = 1e-6
    numeric = [
        (bradley_terry_loss(beta + eps * e, matches, 0.3)[0] - bradley_terry_loss(beta - eps * e, matches, 0.3)[0])
        / (2 * eps)
        for e in np.eye(5)
    ]
    assert np.allclose(grad, numeric, atol=1e-5)


def test_recovers_known_strengths_from_simulated_outcomes():
    """6 players, 400 games per ordered pair drawn from the BT model itself. The MLE is consistent; with
    12,000 games the standard error of each strength is about 0.04, so 0.15 is a > 3σ tolerance and the
    tiny l2 (1e-3) shifts estimates by far less than that."""
    rng = np.random.default_rng(1)
    truth = np.array([1.5, 0.8, 0.2, -0.1, -0.9, -1.5])
    rows = []
    for i in range(6):
        for j in range(6):
            if i != j:
                p = 1 / (1 + np.exp(-(truth[i] - truth[j])))
                rows += [(i, j, float(y)) for y in rng.random(400) < p]
    beta = fit_bradley_terry(6, rows, l2=1e-3)
    assert np.abs(beta - (truth - truth.mean())).max() < 0.15


def test_mirror_makes_fit_independent_of_presentation_order():
    rows = [(0, 1, 1.0), (1, 2, 0.5), (2, 0, 0.0), (0, 2, 1.0)]
    swapped = [(j, i, 1.0 - y) for i, j, y in rows]
    assert np.allclose(fit_bradley_terry(3, rows), fit_bradley_terry(3, swapped))


def test_one_sided_and_disconnected_graphs_give_finite_strengths():
    beta = fit_bradley_terry(4, [(0, 1, 1.0)] * 10, l2=0.1)  # player 0 always wins; 2 and 3 never play
    assert np.isfinite(beta).all()
    assert beta[0] > beta[1]
    assert beta[2] == pytest.approx(beta[3])


def test_soft_outcomes_and_ties():
    beta = fit_bradley_terry(2, [(0, 1, 0.5)] * 5)
    assert np.allclose(beta, 0.0, atol=1e-6)
    soft = fit_bradley_terry(2, [(0, 1, 0.8)] * 50, l2=1e-4)
    assert 1 / (1 + np.exp(-(soft[0] - soft[1]))) == pytest.approx(0.8, abs=0.01)


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="must lie in"):
        fit_bradley_terry(2, [(0, 1, 1.5)])
    with pytest.raises(ValueError, match="indices"):
        fit_bradley_terry(2, [(0, 2, 1.0)])
    with pytest.raises(ValueError, match="l2"):
        fit_bradley_terry(2, [(0, 1, 1.0)], l2=0.0)
