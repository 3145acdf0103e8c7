"""Strategies taking turns (autotune.portfolio): who plans each trial, and who learns from it."""

from __future__ import annotations

import optuna

from autotune.portfolio import TakingTurns


class Fixed(optuna.samplers.RandomSampler):
    """Answers every knob with one value, and notes each finished trial it hears of."""

    def __init__(self, value: int) -> None:
        super().__init__(seed=0)
        self.value = value
        self.heard: list[int] = []

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self.value

    def after_trial(self, study, trial, state, values):
        self.heard.append(trial.number)


def test_trials_alternate_and_every_sampler_hears_every_trial():
    first, second = Fixed(1), Fixed(2)
    study = optuna.create_study(sampler=TakingTurns([first, second]))
    study.optimize(lambda trial: trial.suggest_int("x", 0, 3), n_trials=5)
    assert [t.params["x"] for t in study.trials] == [1, 2, 1, 2, 1]
    assert first.heard == second.heard == [0, 1, 2, 3, 4]
