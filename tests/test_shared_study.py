"""The worker protocol (autotune.shared_study) on an in-memory study: the budget each take leaves, whose running
trials are failed or released, and when a budget counts as exported. Workers running it are test_workers'."""

from __future__ import annotations

import subprocess
import sys
import time

import optuna
import pytest

from autotune.shared_study import (DONE, EXPORTED, EXPORTER, WAIT, NoLock, TrialBudget, enqueue_first, exported,
                                   fail_abandoned_trials, release_dead_owners, release_own_trials)
from autotune.storage import worker_identity

RUNNING, FAIL, WAITING = (optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.FAIL,
                          optuna.trial.TrialState.WAITING)


def _dead() -> dict:
    """The identity of a process of this host that has exited (and been reaped)."""
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait(timeout=60)
    return {"host": worker_identity()["host"], "pid": done.pid}


def _count(study, trial) -> None:
    """Finish ``trial`` as a measured config the budget counts."""
    trial.set_user_attr("status", "ok")
    study.tell(trial, 1.0)


def _budget(study, budget, shared=True):
    return TrialBudget(study, budget, NoLock(), study._storage, None, None, shared=shared)


def test_a_trial_is_handed_out_only_while_the_budget_has_room_for_those_in_flight():
    study = optuna.create_study()
    _count(study, study.ask())
    budget = _budget(study, 3)
    first, second = budget.take(), budget.take()
    assert first.number == 1 and second.number == 2 and first.user_attrs["claimed"] == worker_identity()
    assert budget.take() is WAIT  # 1 counted and 2 in flight fill a budget of 3: a fourth would pass it
    _count(study, first)
    assert budget.take() is WAIT
    _count(study, second)
    assert budget.take() is DONE
    assert budget.progress() == (3, 3) and _budget(study, 5, shared=False).progress() == (0, 2)


def test_asks_stop_at_five_a_trial_of_the_budget_when_every_answer_is_a_repeat():
    study = optuna.create_study()
    budget = _budget(study, 1)
    for _ in range(5):  # DUPLICATE_ASK_FACTOR asks per trial of the budget
        trial = budget.take()
        trial.set_user_attr("duplicate_of", 0)  # a repeat: not counted
        study.tell(trial, 1.0)
    assert budget.take() is DONE


def _claimed(study, claim):
    trial = study.ask()
    if claim is not None:
        trial.set_user_attr("claimed", claim)
    return trial


def test_an_unclaimed_trial_is_failed_once_a_grace_period_old_and_a_claimed_one_by_its_owner():
    study = optuna.create_study()
    mine, dead, unclaimed = _claimed(study, worker_identity()), _claimed(study, _dead()), _claimed(study, None)
    fail_abandoned_trials(study, grace_period=60)
    states = [t.state for t in study.get_trials(deepcopy=False)]
    # The dead owner's trial failed and queued once more; mine runs; the unclaimed one is seconds old.
    assert states == [RUNNING, FAIL, RUNNING, WAITING]
    time.sleep(0.01)
    fail_abandoned_trials(study, grace_period=0.001)  # now a grace period old: its process died before the claim
    assert [t.state for t in study.get_trials(deepcopy=False)][:5] == [RUNNING, FAIL, FAIL, WAITING, WAITING]
    assert mine.number == 0 and dead.number == 1 and unclaimed.number == 2


def test_a_stop_releases_this_processs_trials_and_the_drivers_look_those_of_its_dead_workers():
    study = optuna.create_study()
    another_host = {"host": "elsewhere", "pid": 1}
    _claimed(study, worker_identity()), _claimed(study, _dead()), _claimed(study, another_host)
    _claimed(study, {"host": worker_identity()["host"]})  # a claim with no pid: nothing to judge it by
    release_own_trials(study)
    assert [(t.state, t.user_attrs.get("lost")) for t in study.trials] == [(FAIL, True)] + [(RUNNING, None)] * 3
    release_dead_owners(study)
    assert [(t.state, t.user_attrs.get("lost")) for t in study.trials] == [(FAIL, True), (FAIL, True),
                                                                          (RUNNING, None), (RUNNING, None)]


@pytest.mark.parametrize("owner, one_machine, is_exported", [
    ("finished", False, True),
    ("dead, finished", False, True),  # exported: whoever did it has gone since
    ("no pid", False, True),  # marked before exporters were recorded: trusted
    ("me", False, True),
    ("dead", False, False),  # died on this host mid-export: another process exports
    ("another host", True, False),  # a file for one machine: another host's mark is a dead one
    ("another host", False, True),  # a server without beats: trusted
    ("beat now", False, True),
    ("beat long ago", False, False),  # two minutes, past the grace period of one
])
def test_a_budget_is_exported_or_being_exported_by_an_owner_that_may_be_alive(owner, one_machine, is_exported):
    elsewhere = {"host": "elsewhere", "pid": 1}
    owner = {"finished": {"finished": True}, "dead, finished": {**_dead(), "finished": True},
             "no pid": {"host": "elsewhere"}, "me": worker_identity(), "dead": _dead(), "another host": elsewhere,
             "beat now": {**elsewhere, "beat": time.time()},
             "beat long ago": {**elsewhere, "beat": time.time() - 120}}[owner]
    study = optuna.create_study()
    study.set_user_attr(EXPORTED, 4)
    study.set_user_attr(EXPORTER, owner)
    assert exported(study, 4, grace_period=60, one_machine=one_machine) is is_exported
    assert exported(study, 5, grace_period=60, one_machine=one_machine) is False  # another budget's mark


def test_a_file_for_one_machine_is_judged_by_itself_and_a_server_by_heartbeats():
    from autotune.shared_study import _one_machine

    class Storage:
        def __init__(self, url):
            self.url = url

    assert _one_machine(object()) and _one_machine(Storage("sqlite:///a.db"))
    assert not _one_machine(Storage("postgresql://u@h/db"))


FIRSTS = [({"x": 1}, "baseline"), ({"x": 2}, "defaults")]


def test_the_baseline_and_defaults_are_queued_in_a_new_study_and_again_where_a_stop_lost_them():
    study = optuna.create_study()
    enqueue_first(study, FIRSTS)
    assert [(t.state, t.user_attrs["role"]) for t in study.trials] == [(WAITING, "baseline"), (WAITING, "defaults")]
    enqueue_first(study, FIRSTS)  # queued and not yet taken: not twice
    assert len(study.trials) == 2
    baseline = study.ask()
    baseline.set_user_attr("lost", True)
    study.tell(baseline, state=FAIL)
    enqueue_first(study, FIRSTS)  # the baseline lost to a stop: queued once more, the defaults not
    assert [t.user_attrs["role"] for t in study.trials] == ["baseline", "defaults", "baseline"]
    outside = optuna.create_study()  # a study made outside autotune, with trials of its own: left as it is
    outside.tell(outside.ask(), 1.0)
    enqueue_first(outside, FIRSTS)
    assert len(outside.trials) == 1
