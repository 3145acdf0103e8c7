"""The linear strategy's model: its terms (values, trends, pairs), what its draws learn, and how they explore.

Its searches (the sampler shared with the forest) are tested in test_surrogate.py.
"""

import itertools

import numpy as np
import pytest

from autotune.linear import NOISE, PAIRS, TRENDS, VALUES, _capped, _encode, _times, kernel, scales, thompson_draw
from autotune.surrogate import Knob

KNOBS = [Knob(5, True), Knob(5, True), Knob(3, False)]


def _grid():
    """Every config of a 5 x 5 x 3 space as features (positions in [0, 1])."""
    return np.array([[a / 4, b / 4, c / 2] for a, b, c in itertools.product(range(5), range(5), range(3))])


def _mean_draw(measured, log_seconds, candidates, knobs, draws=40, seed=0):
    rng = np.random.default_rng(seed)
    return np.mean([thompson_draw(measured, log_seconds, candidates, knobs, rng) for _ in range(draws)], axis=0)


def test_the_terms_are_value_indices_with_inactive_last_trends_of_numeric_knobs_and_ranges():
    features = np.array([[0.0, 1.0, -1.0, 0.25], [0.5, 0.0, 0.5, 1.0], [-1.0, 0.0, 0.0, -1.0]])
    values, trends = _encode(features, [Knob(3, True), Knob(2, True), Knob(3, False), Knob(None, True)])
    assert values[0].tolist() == [0, 1, 3]  # of 3 values and "inactive" (3): one-hot columns, as indices
    assert values[1].tolist() == [1, 0, 0]
    assert values[2].tolist() == [3, 1, 0]  # inactive in the first config
    # A range: centred position, its square, inactive; an inactive range is its inactive column alone.
    assert values[3].tolist() == [[-0.25, 0.0625, 0.0], [0.5, 0.25, 0.0], [0.0, 0.0, 1.0]]
    # Numeric with more than 2 values: centred position and square; 0 where the knob is inactive (the third).
    assert len(trends) == 1 and trends[0].tolist() == [[-0.5, 0.25], [0.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize("with_range", [False, True])
def test_value_indices_give_the_numbers_of_one_hot_columns_exactly(with_range):
    # The model sums over one-hot columns as lookups and comparisons of indices (draws twice as fast): the
    # same numbers to the last bit, so a search is the same config by config.
    rng = np.random.default_rng(3)
    knobs = [Knob(4, True), Knob(2, False), Knob(5, True)] + ([Knob(None, True)] if with_range else [])
    rows = np.stack([rng.integers(-1, k.levels, 300) / max(k.levels - 1, 1) if k.levels else rng.random(300)
                     for k in knobs], 1)
    rows[rows < 0] = -1.0
    values, trends = _encode(rows, knobs)
    one_hot = [np.eye(k.levels + 1)[v] if v.ndim == 1 else v for v, k in zip(values, knobs)]
    scale = scales(len(knobs))
    seen = slice(0, 40)
    by_index = kernel(scale, values, trends, [v[seen] for v in values], [t[seen] for t in trends])
    by_column = kernel(scale, one_hot, trends, [v[seen] for v in one_hot], [t[seen] for t in trends])
    assert np.array_equal(by_index, by_column)
    weights = rng.standard_normal((5, 6))
    assert np.array_equal(_times(values[0], weights), one_hot[0] @ weights)


def test_the_slow_half_is_cut_to_the_median_so_one_very_slow_config_does_not_rule_the_model():
    capped = _capped(np.array([0.0, 1.0, 2.0, 3.0, 50.0]))
    assert capped[2] == capped[3] == capped[4] == capped.max()  # 3 and 50 are no slower than the median, 2
    assert np.all(np.diff(capped[:3]) > 0) and abs(capped.mean()) < 1e-12 and abs(capped.std() - 1) < 1e-12


def test_equal_times_are_standardised_to_zeros_not_divided_by_their_zero_spread():
    assert _capped(np.full(4, 2.5)).tolist() == [0.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("d", [2, 3, 6])
def test_each_group_of_terms_has_its_prior_variance_however_many_knobs_share_it(d):
    # A config's prior variance is VALUES from its knobs' values and PAIRS from their pairs, with 2 knobs or 6:
    # more knobs split a group's variance, they do not add to it. Numeric knobs add their trends' share.
    unordered = [np.array([0, 1])] * d  # two configs that differ in every knob
    both = kernel(scales(d), unordered, [], unordered, [])
    assert np.allclose(np.diag(both), VALUES + PAIRS) and np.allclose(both[0, 1], 0.0)
    one_shared = [np.array([0, 0])] + [np.array([0, 1])] * (d - 1)  # the configs share the first knob's value
    assert np.isclose(kernel(scales(d), one_shared, [], one_shared, [])[0, 1], VALUES / d)  # no pair shared
    two_shared = [np.array([0, 0])] * 2 + [np.array([0, 1])] * (d - 2)
    assert np.isclose(kernel(scales(d), two_shared, [], two_shared, [])[0, 1],
                      2 * VALUES / d + PAIRS / (d * (d - 1) / 2))  # one pair of d(d-1)/2 shared
    trend = [np.array([[0.5, 0.25]])] * d
    assert np.isclose(kernel(scales(d), [np.array([0])] * d, trend, [np.array([0])] * d, trend)[0, 0],
                      VALUES + PAIRS + TRENDS * (0.5**2 + 0.25**2))


def test_the_draws_follow_the_models_posterior_with_every_kind_of_knob():
    # Matheron's rule draws the weights of every term (values, trends, pairs, a range's columns) and corrects the
    # draw with the kernel alone: the two must describe one model, or the draws' mean and spread are not the
    # posterior's. Checked against the posterior computed from the kernel, over 3,000 draws.
    knobs = [Knob(4, True), Knob(3, False), Knob(None, True)]
    rng = np.random.default_rng(5)
    rows = np.stack([rng.integers(0, 4, 20) / 3, rng.integers(0, 3, 20) / 2, rng.random(20)], 1)
    rows[rng.random((20, 3)) < 0.2] = -1.0  # some knobs inactive
    measured, candidates = rows[:12], rows[12:]
    log_seconds = rng.normal(size=12)
    scale = scales(len(knobs))
    seen, cand = _encode(measured, knobs), _encode(candidates, knobs)
    gram = kernel(scale, *seen, *seen) + NOISE * np.eye(12)
    cross = kernel(scale, *cand, *seen)
    mean = cross @ np.linalg.solve(gram, _capped(log_seconds))
    variance = np.diag(kernel(scale, *cand, *cand)) - np.einsum("ij,ji->i", cross, np.linalg.solve(gram, cross.T))
    draw_rng = np.random.default_rng(0)
    draws = np.array([thompson_draw(measured, log_seconds, candidates, knobs, draw_rng) for _ in range(3000)])
    assert np.all(np.abs(draws.mean(0) - mean) < 5 * np.sqrt(variance / 3000)), (draws.mean(0), mean)
    assert np.allclose(draws.var(0), variance, rtol=0.15), (draws.var(0), variance)


def test_the_draws_learn_a_pair_of_values_from_a_third_of_the_space():
    grid = _grid()
    # Fast where knob 1 is at its first value with knob 2 at its second ("y"); knob 0 adds a small trend.
    truth = 1.0 + 0.1 * grid[:, 0] - 0.8 * ((grid[:, 1] == 0) & (grid[:, 2] == 0.5))
    measured = np.random.default_rng(1).choice(len(grid), 25, replace=False)
    mean = _mean_draw(grid[measured], np.log(truth[measured]), grid, KNOBS)
    fast = (grid[:, 1] == 0) & (grid[:, 2] == 0.5)
    assert mean[fast].max() < np.sort(mean[~fast])[5], "the pair's configs are predicted fastest"


def test_a_trend_seen_in_a_few_values_sends_draws_to_the_unmeasured_end():
    grid = _grid()
    truth = np.exp(-grid[:, 0] - 0.2 * grid[:, 1])  # faster and faster toward knob 0's last value
    measured = np.flatnonzero(grid[:, 0] <= 0.5)  # its first three values only
    rng = np.random.default_rng(0)
    draws = np.array([thompson_draw(grid[measured], np.log(truth[measured]), grid, KNOBS, rng) for _ in range(40)])
    mean = draws.mean(axis=0)
    assert mean[grid[:, 0] == 1.0].mean() < mean[grid[:, 0] == 0.0].mean() - 0.5  # the end is not the slow start
    chosen = grid[draws.argmin(axis=1), 0]
    # Most draws take the measured best value (0.5); some try the unmeasured ones beyond it (6 of 40 here).
    assert (chosen == 0.5).mean() > 0.5 and (chosen >= 0.75).mean() >= 0.1, chosen


def test_a_draw_is_uncertain_where_nothing_was_measured_and_settles_where_much_was():
    grid = _grid()
    truth = np.log(1.0 + grid[:, 0] + grid[:, 1])
    measured = np.flatnonzero(grid[:, 2] < 1.0)  # knob 2's last value never measured
    rng = np.random.default_rng(0)
    draws = np.array([thompson_draw(grid[measured], truth[measured], grid, KNOBS, rng) for _ in range(40)])
    spread = draws.std(axis=0)
    assert spread[grid[:, 2] == 1.0].mean() > 2 * spread[grid[:, 2] < 1.0].mean()
