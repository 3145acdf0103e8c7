"""The forest strategy (``--sampler forest``): a random forest learns log run time from the configs measured
so far, and the next config is the one of the whole space with the largest expected improvement.

Tuning spaces are discrete, small enough to list (thousands of configs), and
ruled by thresholds and interactions ("tile 20 and method 0", "padding only
with shared memory"). A tree splits on such thresholds; a forest of them,
each grown on a bootstrap of the measured configs, gives a mean and a spread
for every config not measured yet (as SMAC does). Measured on the recorded
GPU spaces it scored about as TPE does (0.46 against 0.54 at 50 evaluations,
0.28 against 0.22 at 20; README, "How quickly the search finds the best
config"), so it is a choice, not the default.

The sampler answers Optuna's define-by-run asks (one knob at a time) from a
whole config it plans once per trial; enqueued trials (the baseline, the
defaults, the loop's neighbours) keep their values, as with every sampler.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna

from autotune.config import Config
from autotune.parameters import show

if TYPE_CHECKING:
    from autotune.space import SearchSpace

__all__ = ["ForestSampler", "Forest"]

#: Configs measured (the baseline and defaults among them) before the forest chooses; the rest are random.
#: 5, 8 and 12 scored 0.46, 0.43 and 0.43 at 50 evaluations over the recorded GPU spaces (20 repeats each).
STARTUP = 5
#: Trees per forest. Each is grown on a bootstrap of the measured configs.
TREES = 20
#: A space with more configs than this (or a range knob) is not listed: a pool of random allowed configs
#: stands for it, drawn anew at each ask.
MAX_LISTED = 50_000
POOL = 5_000


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


class ForestSampler(optuna.samplers.BaseSampler):
    """Optuna sampler of the forest strategy over ``space`` (see the module's docstring)."""

    def __init__(self, space: "SearchSpace", seed: int | None = None, startup: int = STARTUP) -> None:
        self.space = space
        self.startup = startup
        self._rng = np.random.default_rng(seed)
        self._random = random.Random(seed)
        self._listed: tuple[list[Config], np.ndarray] | None = None
        self._plans: dict[int, Config] = {}

    # Optuna's interface: nothing is sampled jointly; each knob is answered from the trial's plan.
    def infer_relative_search_space(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> dict[str, Any]:
        return {}

    def sample_relative(self, study: optuna.Study, trial: optuna.trial.FrozenTrial,
                        search_space: dict[str, Any]) -> dict[str, Any]:
        return {}

    def sample_independent(self, study: optuna.Study, trial: optuna.trial.FrozenTrial, param_name: str,
                           param_distribution: optuna.distributions.BaseDistribution) -> Any:
        if trial.number not in self._plans:
            self._plans = {trial.number: self._plan(study, trial.number)}  # one trial at a time in a process
        return self._plans[trial.number][param_name]

    # -- planning -------------------------------------------------------------------

    def _plan(self, study: optuna.Study, number: int) -> Config:
        measured, running = _outcomes(study, self.space, number)
        candidates, features = self._candidates()
        fresh = np.array([c.key not in measured and c.key not in running for c in candidates], dtype=bool)
        if not fresh.any():
            return self.space.sample(self._random)
        found = [seconds for _, seconds in measured.values() if seconds is not None]
        if len(measured) < self.startup or len(found) < 2:
            return candidates[int(self._rng.choice(np.flatnonzero(fresh)))]
        # Log time: a config 2x slower is as far off at any speed. A failure counts as the slowest seen.
        worst = max(math.log(s) for s in found)
        configs = [config for config, _ in measured.values()]
        targets = np.array([worst if seconds is None else math.log(seconds) for _, seconds in measured.values()])
        forest = Forest(self._features(configs), targets, self._rng)
        mean, spread = forest.predict(features[fresh])
        gain = expected_improvement(mean, spread, math.log(min(found)))
        best = np.flatnonzero(fresh)[gain >= gain.max() - 1e-12]
        return candidates[int(self._rng.choice(best))]

    def _candidates(self) -> tuple[list[Config], np.ndarray]:
        """The configs to choose among and their features: every allowed config where the space can be listed."""
        if self._listed is None:
            listed = _list_configs(self.space, MAX_LISTED)
            self._listed = (listed, self._features(listed)) if listed else ([], np.zeros((0, 1)))
        if self._listed[0]:
            return self._listed
        pool: dict[str, Config] = {}
        for _ in range(POOL * 2):
            config = self.space.sample(self._random)
            if self.space.violated(config) is None:
                pool[config.key] = config
            if len(pool) >= POOL:
                break
        configs = list(pool.values())
        return configs, self._features(configs)

    def _features(self, configs: list[Config]) -> np.ndarray:
        """Each tunable knob's value as a position in [0, 1] (sorted numbers, declared order otherwise); -1 inactive."""
        params = self.space.tunable
        if not params:
            return np.zeros((len(configs), 1))
        positions = {p.name: _positions(p) for p in params}
        rows = []
        for config in configs:
            active = self.space.active(config)
            rows.append([_position(p, config[p.name], positions[p.name]) if active[p.name] else -1.0 for p in params])
        return np.array(rows, dtype=float).reshape(len(configs), len(params))


def _positions(param: Any) -> dict[str, float] | None:
    """A categorical knob's value -> position in [0, 1]; None for a range."""
    if param.type != "categorical":
        return None
    choices = list(param.choices)
    if all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in choices):
        choices = sorted(choices)
    return {show(c): i / max(1, len(choices) - 1) for i, c in enumerate(choices)}


def _position(param: Any, value: Any, positions: dict[str, float] | None) -> float:
    if positions is not None:
        return positions[show(value)]
    low, high, value = float(param.low), float(param.high), float(value)
    if param.log:
        low, high, value = math.log(low), math.log(high), math.log(value)
    return (value - low) / (high - low) if high > low else 0.0


def _list_configs(space: "SearchSpace", limit: int) -> list[Config] | None:
    """Every allowed config of ``space`` (conditions and constraints applied), or None if over ``limit`` or ranged."""
    params = list(space.parameters.values())
    if any(p.type != "categorical" for p in params):
        return None
    total = math.prod(len(p.choices) for p in params)
    if total > limit * 4:
        return None
    listed: dict[str, Config] = {}
    for values in itertools.product(*(p.choices for p in params)):
        config = space.complete(dict(zip((p.name for p in params), values)))
        if config.key not in listed and space.violated(config) is None:
            listed[config.key] = config
            if len(listed) > limit:
                return None
    return list(listed.values())


def _outcomes(study: optuna.Study, space: "SearchSpace",
              asking: int) -> tuple[dict[str, tuple[Config, float | None]], set[str]]:
    """Every measured config with its seconds per item (None: it failed), and the configs other workers are measuring.

    A config this space no longer allows (a study resumed after the space changed) teaches nothing here.
    """
    from optuna.trial import TrialState

    from autotune.exceptions import AutotuneError
    from autotune.trials import counted

    trials = study.get_trials(deepcopy=False)
    running = {space.complete(t.params).key for t in trials
               if t.state == TrialState.RUNNING and t.number != asking}  # the trial being planned has no config yet
    measured: dict[str, tuple[Config, float | None]] = {}
    for trial in counted(trials):  # not repeats, restricted, lost or retried trials
        attrs = trial.user_attrs
        if "config" not in attrs:
            continue
        try:
            config = space.validate(attrs["config"])
        except AutotuneError:
            continue
        throughput = attrs.get("throughput")
        ok = attrs.get("status") == "ok" and throughput
        measured.setdefault(config.key, (config, 1.0 / throughput if ok else None))
    return measured, running
