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
