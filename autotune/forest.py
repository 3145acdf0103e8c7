"""The forest strategy (``--sampler forest``): a random forest learns log run time from the configs measured
so far, and the next config is the one of the whole space with the largest expected improvement.

Tuning spaces are discrete, small enough to list (thousands of configs), and
ruled by thresholds and interactions ("tile 20 and method 0", "padding only
with shared memory"). A tree splits on such thresholds; a forest of them,
each grown on a bootstrap of the measured configs, gives a mean and a spread
for every config not measured yet (as SMAC does). Measured on the recorded
GPU spaces it scored about as TPE does (0.46 against 0.54 at 50 evaluations,
0.28 against 0.22 at 20; benchmarks/search_quality.md, "A random forest"),
so it is a choice, not the default.

How the config is planned, and which configs are candidates, is
:mod:`autotune.surrogate`.
"""

from __future__ import annotations

import math

import numpy as np

from autotune.surrogate import ModelSampler

__all__ = ["ForestSampler", "Forest"]

#: Configs measured (the baseline and defaults among them) before the forest chooses; the rest are random.
#: 5, 8 and 12 scored 0.46, 0.43 and 0.43 at 50 evaluations over the recorded GPU spaces (20 repeats each).
STARTUP = 5
#: Trees per forest. Each is grown on a bootstrap of the measured configs.
TREES = 20


class Forest:
    """A random forest (bootstrap, best split over every feature, leaves of one config) on features in [0, 1]."""

    def __init__(self, features: np.ndarray, targets: np.ndarray, rng: np.random.Generator, trees: int = TREES):
        self.trees = [self._grow(*self._bootstrap(features, targets, rng)) for _ in range(trees)]

    @staticmethod
    def _bootstrap(features: np.ndarray, targets: np.ndarray, rng: np.random.Generator):
        pick = rng.integers(0, len(targets), len(targets))
        return features[pick], targets[pick]

    @staticmethod
    def _grow(features: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, ...]:
        feature, threshold, left, right, value = [], [], [], [], []

        def node(rows: np.ndarray) -> int:
            index = len(feature)
            feature.append(-1), threshold.append(0.0), left.append(-1), right.append(-1)
            value.append(float(targets[rows].mean()))
            split = _best_split(features[rows], targets[rows])
            if split is not None:
                feature[index], threshold[index] = split
                below = features[rows, split[0]] <= split[1]
                left[index] = node(rows[below])
                right[index] = node(rows[~below])
            return index

        node(np.arange(len(targets)))
        return np.array(feature), np.array(threshold), np.array(left), np.array(right), np.array(value)

    def predict(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and spread over the trees for each row of ``features``."""
        each = np.array([_walk(tree, features) for tree in self.trees])
        return each.mean(0), each.std(0)


def _best_split(features: np.ndarray, targets: np.ndarray) -> tuple[int, float] | None:
    """The (feature, threshold) that most reduces the squared error; None where no split helps."""
    n = len(targets)
    if n < 2 or np.ptp(targets) == 0:
        return None
    order = np.argsort(features, axis=0, kind="stable")  # every feature at once: one sort per node
    xs = np.take_along_axis(features, order, axis=0)
    ys = targets[order]
    sums, squares = np.cumsum(ys, axis=0)[:-1], np.cumsum(ys * ys, axis=0)[:-1]
    sizes = np.arange(1, n)[:, None]  # configs left of each split
    left = squares - sums**2 / sizes
    right = (targets @ targets - squares) - (targets.sum() - sums) ** 2 / (n - sizes)
    error = left + right
    error[xs[:-1] >= xs[1:]] = np.inf  # a split between equal values is no split
    at = np.unravel_index(int(np.argmin(error)), error.shape)
    if not np.isfinite(error[at]):
        return None
    row, column = int(at[0]), int(at[1])
    return column, float((xs[row, column] + xs[row + 1, column]) / 2)


def _walk(tree: tuple[np.ndarray, ...], features: np.ndarray) -> np.ndarray:
    feature, threshold, left, right, value = tree
    at = np.zeros(len(features), dtype=int)
    while True:
        inner = feature[at] >= 0
        if not inner.any():
            return value[at]
        nodes = at[inner]
        below = features[inner, feature[nodes]] <= threshold[nodes]
        at[inner] = np.where(below, left[nodes], right[nodes])


def expected_improvement(mean: np.ndarray, spread: np.ndarray, best: float) -> np.ndarray:
    """How far below ``best`` each prediction is expected to land (minimising)."""
    spread = np.maximum(spread, 1e-12)
    z = (best - mean) / spread
    cdf = 0.5 * (1.0 + np.vectorize(math.erf, otypes=[float])(z / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return (best - mean) * cdf + spread * pdf


class ForestSampler(ModelSampler):
    """Optuna sampler of the forest strategy over ``space`` (see the module's docstring)."""

    STARTUP = STARTUP

    def choose(self, measured: np.ndarray, log_seconds: np.ndarray, candidates: np.ndarray) -> int:
        mean, spread = Forest(measured, log_seconds, self.rng).predict(candidates)
        gain = expected_improvement(mean, spread, float(log_seconds.min()))
        return int(self.rng.choice(np.flatnonzero(gain >= gain.max() - 1e-12)))
