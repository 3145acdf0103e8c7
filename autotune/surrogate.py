"""Strategies that learn run time from the configs measured so far and choose the next config of the whole space.

A tuning space is discrete and small enough to list (thousands of configs),
so a model of run time can be asked about every allowed config that is not
measured yet, and the best of them by the model's rule is measured next. The
forest (:mod:`autotune.forest`) and the linear model (:mod:`autotune.linear`)
are two such models; this module is what they share: the Optuna sampler that
plans one whole config per trial, the listing of the space, each config's
features and what the study has measured.

The sampler answers Optuna's define-by-run asks (one knob at a time) from the
config it planned for the trial; enqueued trials (the baseline, the defaults,
the loop's neighbours) keep their values, as with every sampler. It never
plans a config that is measured, that another worker is measuring, or that
breaks a constraint.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna

from autotune.config import Config, show
from autotune.parameters import knob_of

if TYPE_CHECKING:
    from autotune.space import SearchSpace

__all__ = ["Knob", "ModelSampler", "list_configs"]

#: A space with more configs than this (or a range knob) is not listed: a pool of random allowed configs
#: stands for it, drawn anew at each ask.
MAX_LISTED = 50_000
POOL = 5_000


@dataclass(frozen=True)
class Knob:
    """What a model needs to know of one feature column: how many values it takes (None: a range) and if numeric."""

    levels: int | None
    numeric: bool


class ModelSampler(optuna.samplers.BaseSampler):
    """An Optuna sampler that plans each trial's whole config with :meth:`choose` (see the module's docstring).

    Until ``startup`` configs are measured (the baseline and defaults among
    them) it plans a random allowed one; each strategy sets its own default.
    """

    STARTUP = 10

    def __init__(self, space: "SearchSpace", seed: int | None = None, startup: int | None = None) -> None:
        self.space = space
        self.startup = self.STARTUP if startup is None else startup
        self.rng = np.random.default_rng(seed)
        self._random = random.Random(seed)
        self._listed: tuple[list[Config], np.ndarray] | None = None
        self._plans: dict[int, Config] = {}
        # One knob per feature column: a space with no tunable knob has one constant column (see features).
        self.knobs = [Knob(len(p.choices) if p.type == "categorical" else None,
                           p.type != "categorical" or _numeric(p.choices)) for p in space.tunable] or [Knob(1, False)]

    def choose(self, measured: np.ndarray, log_seconds: np.ndarray, candidates: np.ndarray) -> int:
        """The row of ``candidates`` (features) to measure next, given the measured configs' features and log times."""
        raise NotImplementedError

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
        return self._plans[trial.number][knob_of(param_name, self.space.parameters)]  # chunk_size[messages=scan]

    def _plan(self, study: optuna.Study, number: int) -> Config:
        measured, running = _outcomes(study, self.space, number)
        candidates, features = self._candidates()
        fresh = np.flatnonzero([c.key not in measured and c.key not in running for c in candidates])
        if not len(fresh):
            return self.space.sample(self._random)
        found = [seconds for _, seconds in measured.values() if seconds is not None]
        if len(measured) < self.startup or len(found) < 2:
            return candidates[int(self.rng.choice(fresh))]
        # Log time: a config 2x slower is as far off at any speed. A failure counts as the slowest seen.
        worst = max(math.log(s) for s in found)
        targets = np.array([worst if seconds is None else math.log(seconds) for _, seconds in measured.values()])
        configs = [config for config, _ in measured.values()]
        return candidates[int(fresh[self.choose(self.features(configs), targets, features[fresh])])]

    def _candidates(self) -> tuple[list[Config], np.ndarray]:
        """The configs to choose among and their features: every allowed config where the space can be listed."""
        if self._listed is None:
            listed = list_configs(self.space, MAX_LISTED)
            self._listed = (listed, self.features(listed)) if listed else ([], np.zeros((0, 1)))
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
        return configs, self.features(configs)

    def features(self, configs: list[Config]) -> np.ndarray:
        """Each tunable knob's value as a position in [0, 1] (sorted numbers, declared order otherwise); -1 inactive."""
        params = self.space.tunable
        if not params:
            return np.zeros((len(configs), 1))  # one constant column: a model still has a feature to read
        positions = {p.name: _positions(p) for p in params}
        rows = []
        for config in configs:
            active = self.space.active(config)
            rows.append([_position(p, config[p.name], positions[p.name]) if active[p.name] else -1.0 for p in params])
        return np.array(rows, dtype=float).reshape(len(configs), len(params))


def _numeric(choices: Any) -> bool:
    return all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in choices)


def _positions(param: Any) -> dict[str, float] | None:
    """A categorical knob's value -> position in [0, 1]; None for a range."""
    if param.type != "categorical":
        return None
    choices = sorted(param.choices) if _numeric(param.choices) else list(param.choices)
    return {show(c): i / max(1, len(choices) - 1) for i, c in enumerate(choices)}


def _position(param: Any, value: Any, positions: dict[str, float] | None) -> float:
    if positions is not None:
        return positions[show(value)]
    low, high, value = float(param.low), float(param.high), float(value)
    if param.log:
        low, high, value = math.log(low), math.log(high), math.log(value)
    return (value - low) / (high - low) if high > low else 0.0


def list_configs(space: "SearchSpace", limit: int) -> list[Config] | None:
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
    from autotune.exceptions import AutotuneError
    from autotune.trials import counted, in_flight

    trials = study.get_trials(deepcopy=False)
    running = set(in_flight(space, trials, asking))  # the trial being planned has no config yet
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
