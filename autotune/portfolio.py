"""Strategies that share one study: samplers taking turns, or one handing over to another.

Each sampler reads the whole study, so each learns from every config
measured, whichever sampler chose it. Two strategies whose strengths lie on
different spaces (benchmarks/search_quality.py) share the trials instead of
one of them being picked for a space nobody has measured yet; a strategy
strong early (TPE) hands over to one strong late (the linear model) once
enough configs are measured for the latter to fit.
"""

from __future__ import annotations

from typing import Any

import optuna

from autotune.trials import counted

__all__ = ["HandingOver", "TakingTurns"]


class _Shared(optuna.samplers.BaseSampler):
    """Delegates each trial to the sampler :meth:`_turn` names; every sampler hears of every trial."""

    samplers: list[optuna.samplers.BaseSampler]

    def _turn(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> optuna.samplers.BaseSampler:
        raise NotImplementedError

    def infer_relative_search_space(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> dict:
        return self._turn(study, trial).infer_relative_search_space(study, trial)

    def sample_relative(self, study: optuna.Study, trial: optuna.trial.FrozenTrial, search_space: dict) -> dict:
        return self._turn(study, trial).sample_relative(study, trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: optuna.trial.FrozenTrial, param_name: str,
                           param_distribution: Any) -> Any:
        return self._turn(study, trial).sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        for sampler in self.samplers:
            sampler.before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial, state: Any, values: Any) -> None:
        for sampler in self.samplers:
            sampler.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        for sampler in self.samplers:
            sampler.reseed_rng()


class TakingTurns(_Shared):
    """An Optuna sampler whose trial ``n`` is planned by ``samplers[n % len(samplers)]``."""

    def __init__(self, samplers: list[optuna.samplers.BaseSampler]) -> None:
        self.samplers = samplers

    def _turn(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> optuna.samplers.BaseSampler:
        return self.samplers[trial.number % len(self.samplers)]


class HandingOver(_Shared):
    """An Optuna sampler: ``first`` plans every trial until ``after`` configs are measured, then ``then`` does.

    Measured means counted toward the budget (:func:`autotune.trials.counted`):
    a repeat, a restricted ask or a trial lost to a dead worker adds nothing
    for ``then`` to fit, so it does not bring the hand-over nearer.
    """

    def __init__(self, first: optuna.samplers.BaseSampler, then: optuna.samplers.BaseSampler, after: int) -> None:
        self.samplers = [first, then]
        self.after = after
        self._planner: dict[int, optuna.samplers.BaseSampler] = {}

    def _turn(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> optuna.samplers.BaseSampler:
        # Chosen once per trial: a config finished by another worker mid-ask must not split one trial's knobs
        # between the two samplers. One trial is asked at a time in a process.
        if trial.number not in self._planner:
            study_trials = study.get_trials(deepcopy=False)
            first, then = self.samplers
            self._planner = {trial.number: first if len(counted(study_trials)) < self.after else then}
        return self._planner[trial.number]
