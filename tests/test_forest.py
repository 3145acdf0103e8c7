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


def _squared_error(targets):
    return float(((targets - targets.mean()) ** 2).sum()) if len(targets) else 0.0


def test_the_split_chosen_is_the_one_of_least_squared_error_among_every_feature_and_threshold():
    from autotune.forest import _best_split

    for seed in range(5):
        rng = np.random.default_rng(seed)
        features = rng.integers(0, 5, (15, 3)) / 4  # positions of 5-valued knobs: repeated values in each column
        targets = rng.normal(size=15)
        column, threshold = _best_split(features, targets)
        below = features[:, column] <= threshold
        chosen = _squared_error(targets[below]) + _squared_error(targets[~below])
        every = [_squared_error(targets[features[:, c] <= t]) + _squared_error(targets[features[:, c] > t])
                 for c in range(3) for t in np.unique(features[:, c])[:-1]]
        assert np.isclose(chosen, min(every))
        values = np.unique(features[:, column])  # the threshold lies midway between two neighbouring values
        assert np.isclose(threshold, (values[values < threshold].max() + values[values > threshold].min()) / 2)


def test_a_tree_grows_to_leaves_of_one_config_and_the_forest_samples_every_config():
    from autotune.forest import _walk

    features = np.array([[0.0, 0.5], [0.25, 0.0], [0.5, 1.0], [0.75, 0.5], [1.0, 0.0], [1.0, 1.0]])
    targets = np.array([3.0, 1.0, 4.0, 1.5, 5.0, 9.0])
    assert _walk(Forest._grow(features, targets), features).tolist() == targets.tolist()
    # Two configs: each tree's bootstrap draws from both, the first too, so trees disagree about the first.
    mean, spread = Forest(features[:2], targets[:2], np.random.default_rng(0)).predict(features[:1])
    assert 1.0 < mean[0] < 3.0 and spread[0] > 0


def test_expected_improvement_is_the_normal_distributions_closed_form():
    # E[max(best - x, 0)] for x ~ N(mean, spread): at the best, spread / sqrt(2 pi); one spread below it,
    # Phi(1) + phi(1); with no spread, the gain itself or nothing.
    gain = expected_improvement(np.array([1.0, 0.0, 0.0, 2.0, 1.0]), np.array([1.0, 1.0, 0.0, 0.0, 0.0]), best=1.0)
    assert np.allclose(gain, [0.3989423, 1.0833155, 1.0, 0.0, 0.0])
