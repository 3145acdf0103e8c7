"""autotune.loop: what the sampler is told of each trial (its objective and its constraints)."""

import optuna
import pytest

from autotune.loop import tell
from autotune.runner import TrialResult

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _told(result, directions=("maximize",), budget=1000, memory=4000):
    study = optuna.create_study(directions=list(directions))
    trial = study.ask()
    fits = tell(study, trial, result, budget, memory)
    return fits, study.get_trials(deepcopy=False)[0]


def _result(status, throughput=5.0, peak=500, error=None, tolerance=1e-3):
    check = None if status == "ok" else {"error": error, "tolerance": tolerance}
    return TrialResult(status=status, config={}, throughput=throughput, peak_memory_bytes=peak, check=check)


@pytest.mark.parametrize("result, correct, value, fits_memory", [
    # Correct: feasible, its throughput the objective; 500 of a 1,000-byte budget.
    (_result("ok"), 0.0, 5.0, -0.5),
    # Wrong by 3x its tolerance: infeasible by as much, so the sampler learns how far from right it was.
    (_result("incorrect", error=3e-3), 2.0, 5.0, -0.5),
    # Incorrect, with an error no larger than its tolerance in its figures: infeasible all the same, never 0.
    (_result("incorrect", error=1e-3), 1e-9, 5.0, -0.5),
    # No error to measure (a NaN output), or a tolerance of 0: wholly wrong.
    (_result("incorrect", error=None), 1.0, 5.0, -0.5),
    (_result("incorrect", error=1e-3, tolerance=0.0), 1.0, 5.0, -0.5),
    # Out of memory: nothing done, and all 4,000 bytes of the device needed (3x over the budget).
    (_result("oom", throughput=None, peak=None), 1.0, 0.0, 3.0),
    # Over the budget: infeasible by half of it, and the progress line says it does not fit.
    (_result("ok", peak=1500), 0.0, 5.0, 0.5),
])
def test_a_trial_is_told_its_throughput_and_how_far_it_is_from_correct_and_within_budget(result, correct, value,
                                                                                          fits_memory):
    fits, trial = _told(result)
    assert trial.state == optuna.trial.TrialState.COMPLETE and trial.values == [value]
    assert trial.system_attrs["constraints:correct"] == pytest.approx(correct, rel=1e-6)
    assert trial.system_attrs["constraints:fits_memory"] == pytest.approx(fits_memory)
    assert fits == (fits_memory <= 0)


def test_a_pass_only_a_looser_tolerance_allowed_is_told_as_wrong():
    # Its twin (the same config at the reference's precision) failed: the sampler asked for it again and again.
    study = optuna.create_study(directions=["maximize"])
    tell(study, study.ask(), _result("ok"), None, 4000, loose=True)
    assert study.get_trials(deepcopy=False)[0].system_attrs["constraints:correct"] == 1.0


@pytest.mark.parametrize("status", ["timeout", "crash", "error"])
def test_a_trial_that_gave_no_output_fails_with_no_objective(status):
    fits, trial = _told(TrialResult(status=status, config={}))
    assert trial.state == optuna.trial.TrialState.FAIL and trial.values is None and fits


def test_without_a_budget_every_config_fits_and_a_two_objective_study_is_told_its_memory():
    fits, trial = _told(_result("ok", peak=10**9), directions=("maximize", "minimize"), budget=None)
    assert fits and trial.system_attrs["constraints:fits_memory"] == 0.0 and trial.values == [5.0, 1e9]


def test_the_baseline_is_measured_in_full_and_every_other_config_against_the_best_so_far(tmp_path):
    # The baseline is what every speedup is taken against: it is never cut short. Every other config is, once
    # its runs show it cannot reach the best measured so far (measure.Measurer's cuts).
    from autotune.loop import run_trials
    from autotune.recorded import load_recorded
    from autotune.shared_study import NoLock, TrialBudget, enqueue_first
    from autotune.simulate import _Simulation
    from tests.test_simulate import _cache

    asked = []

    class Watched(_Simulation):
        def request(self, config, best_throughput=None):
            asked.append(best_throughput)
            return config

    recorded = load_recorded(_cache(tmp_path))
    study = optuna.create_study(directions=["maximize"], sampler=optuna.samplers.RandomSampler(seed=0))
    enqueue_first(study, recorded.space.first_params())
    records = run_trials(Watched(recorded, 0), study, TrialBudget(study, 6, NoLock(), None, None, None, shared=False))
    measured = [r for r in records if r.duplicate_of is None]
    assert measured[0].role == "baseline" and asked[0] is None and len(asked) == len(measured) > 2
    best = [max((r.result.throughput or 0.0 for r in measured[:i]), default=0.0) for i in range(1, len(measured))]
    assert asked[1:] == best and best[-1] > 0


def test_a_sampler_that_repeats_itself_is_moved_to_a_neighbour_of_the_best_correct_config(tmp_path):
    # Not of the first config measured, nor of the latest correct one, nor of a wrong one however fast it ran.
    import random

    from autotune.loop import _next_unseen
    from autotune.recorded import load_recorded
    from autotune.simulate import _Simulation
    from tests.test_simulate import _cache

    recorded = load_recorded(_cache(tmp_path))
    study = optuna.create_study(directions=["maximize"])
    measured = {(1, 10): ("ok", 1.0), (8, 10): ("ok", 50.0), (1, 30): ("incorrect", 500.0), (2, 10): ("error", None),
                (1, 20): ("ok", 2.0)}
    for (x, y), (status, throughput) in measured.items():
        study.add_trial(optuna.trial.create_trial(
            values=[throughput or 0.0], params={}, distributions={},
            user_attrs={"status": status, "config": {"x": x, "y": y}, "throughput": throughput}))
    known = {recorded.space.complete({"x": x, "y": y}).key: n for n, (x, y) in enumerate(measured)}
    moves = set()
    for seed in range(30):
        config, role = _next_unseen(_Simulation(recorded, 0), study, known, random.Random(seed), [])
        assert role == "neighbour"
        moves.add((config["x"], config["y"]))
    assert moves == {(4, 10), (8, 20), (4, 20)}  # one knob of (8, 10) moved, or now and then both


def test_a_sparse_space_too_large_to_list_moves_on_from_the_next_fastest_config():
    # A logsumexp of mine in chunks: a chunk from 1024..2**20 (log) that must divide 2**20 divides it at 11 values,
    # which random draws miss. Once the best config's moves were measured the loop found nothing new to queue, and
    # its search of 20 trials ended at 15, its asks spent on repeats and broken constraints.
    import random

    from autotune.loop import _next_unseen
    from autotune.space import SearchSpace

    space = SearchSpace.from_dict({
        "schema_version": 1,
        "parameters": {"method": {"choices": ["whole", "chunked"]}, "dtype": {"choices": ["float64", "float32"]},
                       "chunk": {"type": "int", "low": 1024, "high": 2**20, "log": True,
                                 "condition": "method == 'chunked'"}},
        "constraints": ["method == 'whole' or 1048576 % chunk == 0"],
        "defaults": {"method": "chunked", "chunk": 4096, "dtype": "float32"},
        "baseline": {"method": "whole", "dtype": "float64"}}, source="lse.yaml")
    assert space.every_config() == []  # too large to list
    study = optuna.create_study(direction="maximize")
    measured = [({"method": "whole", "dtype": "float64"}, 1.0), ({"method": "whole", "dtype": "float32"}, 2.4),
                ({"method": "chunked", "chunk": 4096, "dtype": "float32"}, 1.4),
                ({"method": "chunked", "chunk": 4096, "dtype": "float64"}, 0.9)]
    known = {}
    for values, throughput in measured:
        config = space.complete(values)
        known[config.key] = len(known)
        study.add_trial(optuna.trial.create_trial(
            value=throughput, user_attrs={"status": "ok", "config": config.to_dict(), "throughput": throughput}))

    class Tuner:
        pass

    tuner = Tuner()
    tuner.space, tuner.configs = space, space.every_config
    # Every move from the fastest (whole, float32) is measured: one move from the next fastest is queued.
    moves = {(c["chunk"], c["dtype"], role) for seed in range(5)
             for c, role in [_next_unseen(tuner, study, known, random.Random(seed), [])]}
    assert moves == {(2048, "float32", "neighbour"), (8192, "float32", "neighbour")}


def test_a_sampler_that_has_converged_is_given_its_whole_budget():
    # Each new config then takes REPEAT_LIMIT repeats and one more ask: at 5 asks a trial of the budget, that search
    # of 20 trials ended at 19 (78 repeats, 3 restricted asks), though the loop had configs to queue.
    from autotune.loop import REPEAT_LIMIT
    from autotune.shared_study import DUPLICATE_ASK_FACTOR

    assert DUPLICATE_ASK_FACTOR >= 2 * (REPEAT_LIMIT + 1)
