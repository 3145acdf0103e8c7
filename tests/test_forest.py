"""The forest's model: it learns thresholds and interactions; expected improvement weighs mean against spread.

Its searches (the sampler shared with the linear strategy) are tested in test_surrogate.py.
"""

import numpy as np

from autotune.forest import Forest, expected_improvement


def test_the_forest_learns_a_threshold_and_an_interaction():
    rng = np.random.default_rng(0)
    features = rng.random((80, 3))
    # Slow unless x0 > 0.7 and x1 < 0.3; x2 is noise-free but irrelevant.
    targets = np.where((features[:, 0] > 0.7) & (features[:, 1] < 0.3), 0.0, 1.0)
    mean, spread = Forest(features, targets, rng).predict(np.array([[0.9, 0.1, 0.5], [0.9, 0.9, 0.5], [0.1, 0.1, 0.5]]))
    assert mean[0] < 0.2 and mean[1] > 0.8 and mean[2] > 0.8
    assert (spread >= 0).all()


def test_expected_improvement_prefers_low_means_and_wide_spreads():
    gain = expected_improvement(np.array([0.0, 1.0, 1.0, 2.0]), np.array([0.1, 0.1, 1.0, 0.1]), best=1.0)
    assert gain[0] > gain[2] > gain[1] > gain[3] >= 0
