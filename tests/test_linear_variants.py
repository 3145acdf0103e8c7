"""benchmarks/linear_variants.py: the scratch replay's variants do what their names say."""

import numpy as np

from tests.conftest import load_benchmark


def _space(seed: int = 0):
    from autotune.surrogate import Knob

    rng = np.random.default_rng(seed)
    grid = np.array([[a / 4, b / 4, c / 2] for a in range(5) for b in range(5) for c in range(3)])
    times = np.exp(2 * grid[:, 0] + (grid[:, 1] - 0.5) ** 2 + 0.3 * grid[:, 2] + 0.05 * rng.standard_normal(len(grid)))
    return grid, times, [Knob(5, True), Knob(5, True), Knob(3, False)]


def test_late_takes_the_posterior_mean_s_best_only_at_the_budget_s_end():
    variants = load_benchmark("linear_variants")
    features, times, knobs = _space()
    measured = list(range(0, 75, 3))  # 25 configs measured
    choices = {(variant, trials): {variants.choose(features, times, knobs, measured, np.random.default_rng(seed),
                                                   variant, trials) for seed in range(8)}
               for variant, trials in [("late=5", 28), ("late=5", 40), ("thompson", 28)]}
    assert len(choices[("late=5", 28)]) == 1  # 3 choices left of the budget: no draw, one answer whatever the seed
    assert len(choices[("late=5", 40)]) > 1  # 15 left: still Thompson draws, as the plain rule's
    assert len(choices[("thompson", 28)]) > 1
