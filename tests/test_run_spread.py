"""benchmarks/run_spread.py: the spread of warm runs around their trial's median, read from a study."""

import importlib.util
from pathlib import Path

import optuna

ROOT = Path(__file__).resolve().parent.parent


def _main():
    spec = importlib.util.spec_from_file_location("run_spread", ROOT / "benchmarks" / "run_spread.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_ratios_of_warm_runs_skip_the_first_warm_up_run_and_cut_trials(tmp_path, capsys):
    db = tmp_path / "autotune.db"
    study = optuna.create_study(study_name="s", storage=f"sqlite:///{db}")
    for attrs in (
        # median 1.0; the first warm-up run (5.0, may still compile) is left out, the second (1.5) counts
        {"times": [1.0, 0.8, 1.2], "warmup_times": [5.0, 1.5]},
        {"times": [2.0], "warmup_times": [9.0], "cut_short": True},  # a single run: no median to judge
        {"times": [0.5, 0.5, 0.5], "warmup_times": [], "cut_short": True},
    ):
        trial = study.ask()
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        study.tell(trial, 1.0)
    assert _main()([str(db)]) == 0
    out = capsys.readouterr().out
    assert "4 warm runs of 1 trials" in out and "min 0.80" in out and "max 1.50" in out
