"""Strategies that take turns: several samplers plan the trials of one study in rotation.

Each sampler reads the whole study, so each learns from every config
measured, whichever sampler chose it. Two strategies whose strengths lie on
different spaces (benchmarks/search_quality.py) share the trials instead of
one of them being picked for a space nobody has measured yet.
"""

from __future__ import annotations

from typing import Any

import optuna

__all__ = ["TakingTurns"]


class TakingTurns(optuna.samplers.BaseSampler):
    """An Optuna sampler whose trial ``n`` is planned by ``samplers[n % len(samplers)]``."""

    def __init__(self, samplers: list[optuna.samplers.BaseSampler]) -> None:
        self.samplers = samplers

    def _turn(self, trial: optuna.trial.FrozenTrial) -> optuna.samplers.BaseSampler:
        return self.samplers[trial.number % len(self.samplers)]

    def infer_relative_search_space(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> dict:
        return self._turn(trial).infer_relative_search_space(study, trial)

    def sample_relative(self, study: optuna.Study, trial: optuna.trial.FrozenTrial, search_space: dict) -> dict:
        return self._turn(trial).sample_relative(study, trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: optuna.trial.FrozenTrial, param_name: str,
                           param_distribution: Any) -> Any:
        return self._turn(trial).sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        for sampler in self.samplers:
            sampler.before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial, state: Any, values: Any) -> None:
        for sampler in self.samplers:
            sampler.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        for sampler in self.samplers:
            sampler.reseed_rng()
