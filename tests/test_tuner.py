"""Real searches, in subprocess mode, on tiny workloads."""

import json

import optuna
import pytest

import autotune
from autotune.config import Config
from autotune.tuner import Candidate, Tuner
from autotune.runner import TrialResult
from tests.conftest import BROKEN, FAST_MEASURER

BEHAVIOURS = ["wrong", "nan", "raise_build", "raise_run", "segfault", "exit", "hang", "oom_torch", "oom_numpy", "fast"]


def test_chmm_search_exports_resumes_and_loads(studies):
    seen = []
    tuner = Tuner("chmm", "cpu", "tiny", measurer=FAST_MEASURER, remeasure_rounds=2, seed=3,
                  on_trial=lambda record, i, n: seen.append(record))
    try:
        result = tuner.search(n_trials=5)
    finally:
        tuner.close()
    assert [r.number for r in seen] == [0, 1, 2, 3, 4] and seen[0].role == "baseline"
    assert seen[0].config == tuner.space.baseline
    assert result.winner is not None and result.winner.passed
    assert result.baseline.config == tuner.space.baseline and len(result.baseline.results) == 2
    assert result.speedup == pytest.approx(
        result.winner.measurement.throughput / result.baseline.measurement.throughput
    )
    document = json.loads((studies / "chmm" / "cpu.json").read_text())
    for key in ("schema_version", "workload", "device", "size", "config", "measured", "baseline", "speedup",
                "check", "environment", "study", "trial"):
        assert key in document, key
    assert document["measured"]["unit"] == "timesteps" and document["measured"]["throughput"] > 0
    assert document["baseline"]["throughput"] > 0 and document["check"]["passed"]
    assert document["environment"]["torch"] and document["environment"]["cpu_threads"] >= 1
    cfg = autotune.load_config("chmm", device="auto")
    assert dict(cfg) == document["config"] and cfg.speedup == document["speedup"]

    # The same command again adds trials to the same study.
    again = Tuner("chmm", "cpu", "tiny", measurer=FAST_MEASURER, remeasure_rounds=1, remeasure_top=1)
    try:
        again.search(n_trials=2)
    finally:
        again.close()
    study = optuna.load_study(study_name="chmm-cpu-tiny", storage=f"sqlite:///{studies / 'autotune.db'}")
    assert len(study.trials) == 7
    baseline_trials = [t for t in study.trials if t.user_attrs.get("role") == "baseline"]
    assert len(baseline_trials) == 1  # enqueued once, not on resume
    for trial in study.trials:
        assert trial.user_attrs["status"] in ("ok", "incorrect") and "config" in trial.user_attrs
        assert trial.constraints  # Optuna sees feasibility


def test_a_study_survives_every_failure_and_never_picks_a_wrong_answer(studies):
    storage = f"sqlite:///{studies / 'autotune.db'}"
    studies.mkdir(parents=True)
    study = optuna.create_study(study_name="broken-cpu-tiny", storage=storage, directions=["maximize", "minimize"])
    for behaviour in BEHAVIOURS:
        study.enqueue_trial({"behaviour": behaviour})
    tuner = Tuner(BROKEN, "cpu", "tiny", measurer=FAST_MEASURER, trial_timeout=4, remeasure_rounds=1, remeasure_top=4)
    try:
        result = tuner.search(n_trials=len(BEHAVIOURS))
    finally:
        tuner.close()
    statuses = {record.config["behaviour"]: record.result.status for record in result.trials}
    assert statuses == {
        "wrong": "incorrect", "nan": "incorrect", "raise_build": "error", "raise_run": "error",
        "segfault": "crash", "exit": "crash", "hang": "timeout", "oom_torch": "oom", "oom_numpy": "oom", "fast": "ok",
    }
    # "wrong" was the fastest of all, and incorrect: never the winner.
    assert result.winner.config["behaviour"] == "fast"
    assert result.counts == {"ok": 1, "incorrect": 2, "oom": 2, "timeout": 1, "crash": 2, "error": 2}
    study = optuna.load_study(study_name="broken-cpu-tiny", storage=storage)
    by_behaviour = {t.params["behaviour"]: t for t in study.trials}
    assert by_behaviour["wrong"].constraints["correct"] > 0 and by_behaviour["fast"].constraints["correct"] == 0
    assert by_behaviour["oom_torch"].constraints["correct"] > 0
    assert by_behaviour["segfault"].state == optuna.trial.TrialState.FAIL
    assert "SIGSEGV" in by_behaviour["segfault"].user_attrs["error"]
    assert by_behaviour["hang"].user_attrs["status"] == "timeout"


def _candidate(throughput_times, memory, trial):
    result = TrialResult("ok", {"t": trial}, items_per_run=1, times=throughput_times, peak_memory_bytes=memory)
    return Candidate(Config({"t": trial}), trial, "candidate", [result])


def test_ties_within_noise_break_by_memory_then_trial():
    fast_big = _candidate([1.00, 1.00, 1.00], 900, 5)
    fast_small = _candidate([1.01, 1.01, 1.01], 100, 7)  # 1% slower: a tie
    slow = _candidate([2.0, 2.0, 2.0], 50, 1)
    assert Tuner.pick_winner([fast_big, fast_small, slow]) is fast_small
    same = _candidate([1.00, 1.00, 1.00], 100, 2)
    assert Tuner.pick_winner([fast_small, same]) is same  # equal memory: the earlier trial
    clearly = _candidate([0.5, 0.5, 0.5], 900, 9)
    assert Tuner.pick_winner([fast_small, clearly]) is clearly
    failed = Candidate(Config({"t": 0}), 0, "candidate", [TrialResult("incorrect", {"t": 0}, items_per_run=1, times=[0.1] * 3)])
    assert Tuner.pick_winner([failed, slow]) is slow
    assert Tuner.pick_winner([failed]) is None
    assert Tuner.pick_winner([fast_big, fast_small, slow], memory_budget_bytes=60) is slow


def test_memory_budget_makes_big_configs_infeasible(studies):
    tuner = Tuner("chmm", "cpu", "tiny", measurer=FAST_MEASURER, memory_budget_bytes=1, remeasure_rounds=1)
    try:
        result = tuner.search(n_trials=2)
    finally:
        tuner.close()
    study = optuna.load_study(study_name="chmm-cpu-tiny", storage=f"sqlite:///{studies / 'autotune.db'}")
    assert all(t.constraints["fits_memory"] > 0 for t in study.trials)
    assert result.trials[0].result.status == "ok"
    assert result.winner is None and result.export_path is None
    assert not (studies / "chmm" / "cpu.json").exists()
