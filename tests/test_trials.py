"""autotune.trials: what a trial records of its result, and the result read back from it."""

import optuna

from autotune.config import Config
from autotune.runner import TrialResult
from autotune.trials import result_of, to_attrs

optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_a_trial_records_the_memory_limit_only_where_it_ran_out_of_memory():
    # The limit names why an oom config is measured again under a higher --memory-limit; on any other outcome it
    # would read as a reason the config never had.
    limit = 2**30
    oom = to_attrs(TrialResult(status="oom", config={"x": 1}), Config(x=1), "search", None, memory_limit=limit)
    assert oom["memory_limit_bytes"] == limit and oom["config"] == {"x": 1} and oom["role"] == "search"
    ok = to_attrs(TrialResult(status="ok", config={"x": 1}, throughput=5.0), Config(x=1), "search", None,
                  memory_limit=limit)
    assert "memory_limit_bytes" not in ok and "duplicate_of" not in ok and ok["throughput"] == 5.0


def test_a_result_read_back_is_under_the_config_asked_for_else_the_one_the_trial_recorded():
    # A repeat reuses the result of the trial it repeats, under its own config.
    study = optuna.create_study(direction="maximize")
    trial = study.ask()
    for key, value in to_attrs(TrialResult(status="ok", config={"x": 1}, throughput=5.0), Config(x=1), "search",
                               None).items():
        trial.set_user_attr(key, value)
    study.tell(trial, 5.0)
    recorded = study.trials[0]
    assert result_of(recorded).config == {"x": 1} and result_of(recorded).throughput == 5.0
    assert result_of(recorded, Config(x=2)).config == {"x": 2}


def test_a_trial_records_neither_the_environment_nor_what_its_other_figures_give():
    # The environment is one per study (Tuner.finish records it once): a copy per trial would grow every study by
    # the fingerprint's size a trial. The spread is its iqr over its median, both recorded.
    result = TrialResult(status="ok", config={"x": 1}, throughput=5.0, median_seconds=0.2, iqr_seconds=0.01,
                         relative_spread=0.05, environment={"torch": "2.13.0"})
    attrs = to_attrs(result, Config(x=1), "search", None)
    assert "environment" not in attrs and "relative_spread" not in attrs
    assert attrs["median_seconds"] == 0.2 and attrs["iqr_seconds"] == 0.01


def test_a_trial_that_recorded_no_outcome_reads_back_as_an_error():
    # A trial that recorded its config and no status (a record cut short, or a study written by hand) reads back as
    # a failure, never as a measurement.
    study = optuna.create_study(direction="maximize")
    trial = study.ask()
    trial.set_user_attr("config", {"x": 1})
    study.tell(trial, state=optuna.trial.TrialState.FAIL)
    read = result_of(study.trials[0])
    assert read.status == "error" and read.config == {"x": 1} and read.throughput is None
