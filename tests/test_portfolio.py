"""Strategies taking turns (autotune.portfolio): who plans each trial, and who learns from it."""

from __future__ import annotations

import optuna

from autotune.portfolio import HandingOver, TakingTurns


class Fixed(optuna.samplers.RandomSampler):
    """Answers every knob with one value, and notes each trial it hears begin and end, and each reseed."""

    def __init__(self, value: int) -> None:
        super().__init__(seed=0)
        self.value = value
        self.began: list[int] = []
        self.heard: list[int] = []
        self.reseeded = 0

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self.value

    def before_trial(self, study, trial):
        self.began.append(trial.number)

    def after_trial(self, study, trial, state, values):
        self.heard.append(trial.number)

    def reseed_rng(self):
        self.reseeded += 1


def test_trials_alternate_and_every_sampler_hears_every_trial():
    first, second = Fixed(1), Fixed(2)
    study = optuna.create_study(sampler=TakingTurns([first, second]))
    study.optimize(lambda trial: trial.suggest_int("x", 0, 3), n_trials=5)
    assert [t.params["x"] for t in study.trials] == [1, 2, 1, 2, 1]
    # Each keeps its own state of a trial (a sampler may set it up as the trial begins), whoever planned it.
    assert first.began == second.began == first.heard == second.heard == [0, 1, 2, 3, 4]
    study.sampler.reseed_rng()  # as Optuna does for each thread of n_jobs > 1: none of them repeats another's asks
    assert (first.reseeded, second.reseeded) == (1, 1)


def _measured(trial):
    """An objective whose trials count toward a budget, as the loop's measured trials do."""
    trial.set_user_attr("status", "ok")
    return trial.suggest_int("x", 0, 3)


def test_the_second_sampler_plans_every_trial_once_enough_configs_are_measured():
    first, then = Fixed(1), Fixed(2)
    study = optuna.create_study(sampler=HandingOver(first, then, after=3))
    study.optimize(_measured, n_trials=5)
    assert [t.params["x"] for t in study.trials] == [1, 1, 1, 2, 2]
    assert first.heard == then.heard == [0, 1, 2, 3, 4]


def test_a_repeat_or_a_restricted_ask_does_not_bring_the_hand_over_nearer():
    def objective(trial):
        x = _measured(trial)
        if trial.number in (1, 2):
            trial.set_user_attr("duplicate_of" if trial.number == 1 else "restricted", 0)
        return x

    study = optuna.create_study(sampler=HandingOver(Fixed(1), Fixed(2), after=3))
    study.optimize(objective, n_trials=6)
    # Trials 0, 3 and 4 are the three measured configs; trial 5 is the first the second sampler plans.
    assert [t.params["x"] for t in study.trials] == [1, 1, 1, 1, 1, 2]


def test_tpe_linear_searches_as_tpe_until_it_hands_over_and_differently_after():
    """On the held-out recorded space: the same configs as TPE for the first HAND_OVER, then the model's."""
    from autotune.recorded import load_recorded
    from autotune.samplers import HAND_OVER
    from autotune.simulate import simulate
    from tests.conftest import HELD_OUT

    recorded = load_recorded(HELD_OUT)
    trials = HAND_OVER + 10
    tpe = simulate(recorded, trials, seed=3, sampler="tpe")
    handing_over = simulate(recorded, trials, seed=3, sampler="tpe-linear")
    assert handing_over.best_so_far[:HAND_OVER] == tpe.best_so_far[:HAND_OVER]
    assert handing_over.seconds_so_far[:HAND_OVER] == tpe.seconds_so_far[:HAND_OVER]
    assert handing_over.seconds_so_far != tpe.seconds_so_far
