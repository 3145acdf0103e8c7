"""The worker protocol (autotune.shared_study) on an in-memory study: the budget each take leaves, whose running
trials are failed or released, and when a budget counts as exported. Workers running it are test_workers'."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
import warnings

import optuna
import pytest

from autotune.shared_study import (DONE, EXPORTED, EXPORTER, WAIT, Heartbeat, NoLock, TrialBudget, claim_budget,
                                   elect_exporter, enqueue_first, exported, exporting, fail_abandoned_trials,
                                   release_dead_owners, release_own_trials, release_trial)
from autotune.storage import worker_identity
from tests.conftest import until

RUNNING, FAIL, WAITING, COMPLETE = (optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.FAIL,
                                    optuna.trial.TrialState.WAITING, optuna.trial.TrialState.COMPLETE)


def _dead() -> dict:
    """The identity of a process of this host that has exited (and been reaped), with its start: a later process
    given its pid is not it."""
    from autotune.storage import process_start

    done = subprocess.Popen([sys.executable, "-c", "pass"])
    started = process_start(done.pid)  # exited or not, unreaped it is still there to read
    done.wait(timeout=60)
    return {"host": worker_identity()["host"], "pid": done.pid, **({"started": started} if started else {})}


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


def test_asks_stop_at_twelve_a_trial_of_the_budget_when_every_answer_is_a_repeat_and_say_so():
    study = optuna.create_study()
    _count(study, study.ask())
    _count(study, study.ask())
    budget = _budget(study, 4)  # 2 trials of this run's budget: 24 asks
    for _ in range(24):
        assert budget.out_of_asks() == ""
        trial = budget.take()
        trial.set_user_attr("duplicate_of", 0)  # a repeat: not counted
        study.tell(trial, 1.0)
    assert budget.take() is DONE
    assert budget.out_of_asks().startswith("24 asks of the sampler (12 a trial of the budget) found no config to "
                                           "measure for 2 of the 4 trials: ")  # the study's budget: workers share it


def _claimed(study, claim):
    trial = study.ask()
    if claim is not None:
        trial.set_user_attr("claimed", claim)
    return trial


def test_an_unclaimed_trial_is_failed_once_a_grace_period_old_and_a_claimed_one_by_its_owner():
    study = optuna.create_study()
    mine, dead, unclaimed = _claimed(study, worker_identity()), _claimed(study, _dead()), _claimed(study, None)
    elsewhere = _claimed(study, {"host": "elsewhere", "pid": 1})
    fail_abandoned_trials(study, grace_period=60)
    states = [t.state for t in study.get_trials(deepcopy=False)]
    # The dead owner's trial failed and queued once more; mine runs; the unclaimed one is seconds old; another
    # host's is its heartbeat's to judge (by default the storage is a server's).
    assert states == [RUNNING, FAIL, RUNNING, RUNNING, WAITING]
    time.sleep(0.01)
    fail_abandoned_trials(study, grace_period=0.001)  # now a grace period old: its process died before the claim
    assert [t.state for t in study.get_trials(deepcopy=False)] == [RUNNING, FAIL, FAIL, RUNNING, WAITING, WAITING]
    assert (mine.number, dead.number, unclaimed.number, elsewhere.number) == (0, 1, 2, 3)


def test_a_trial_whose_worker_dies_is_queued_once_more_and_not_again_when_its_retry_dies_too():
    study = optuna.create_study()
    _claimed(study, _dead())
    fail_abandoned_trials(study, grace_period=60)
    retry = study.ask()  # the queued copy, taken by a worker that dies too
    retry.set_user_attr("claimed", _dead())
    fail_abandoned_trials(study, grace_period=60)
    assert [t.state for t in study.get_trials(deepcopy=False)] == [FAIL, FAIL]  # a config that kills its workers


def test_a_budget_fails_a_dead_worker_s_trial_and_queues_it_again_with_no_word_of_optuna_s_experiments():
    # Optuna's stale-trial helpers warn that they are experimental at every call: a line at every trial taken.
    study = optuna.create_study()
    _claimed(study, _dead())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        taken = _budget(study, 2).take()
    assert [t.state for t in study.get_trials(deepcopy=False)] == [FAIL, optuna.trial.TrialState.RUNNING]
    assert taken.number == 1  # the dead worker's config, queued once more


class _Storage:
    """A storage as the protocol reads it: its URL, and the heartbeats it records (a database server's)."""

    def __init__(self, url="postgresql://u@h/db"):
        self.url, self.beats = url, []

    def record_heartbeat(self, trial_id):
        self.beats.append(trial_id)


def test_a_trial_taken_with_heartbeats_beats_before_its_claim_where_the_storage_records_them():
    study = optuna.create_study()
    storage = _Storage()
    assert TrialBudget(study, 2, NoLock(), storage, 5, None, True).take().number == 0 and storage.beats == [0]
    assert TrialBudget(study, 2, NoLock(), storage, None, None, True).take().number == 1 and storage.beats == [0]
    assert _budget(study, 3).take() is not None  # no record_heartbeat (a file's storage): nothing to beat
    assert TrialBudget(study, 4, NoLock(), study._storage, 5, None, True).take().number == 3


def test_a_budget_on_a_file_takes_back_a_trial_another_host_claimed_and_on_a_server_leaves_it():
    # A file is one machine's: a claim under another host name, with no start recorded to judge it by, is this
    # machine's before a rename (a container started anew), and gone. On a server that host's heartbeat judges it.
    for url, state in (("studies/s.journal", FAIL), ("postgresql://u@h/db", RUNNING)):
        study = optuna.create_study()
        _claimed(study, {"host": "elsewhere", "pid": 1})
        TrialBudget(study, 5, NoLock(), _Storage(url), None, 60, True).take()
        assert study.trials[0].state == state, url


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


def test_a_trial_that_finished_before_its_release_or_as_its_dead_owner_was_failed_is_left_as_it_ended(monkeypatch):
    # Two processes at once: a trial may finish between its listing as running and its release, and another worker
    # may fail a dead one's trial first. Neither is an error of the stop or the look that came second.
    study = optuna.create_study()
    done = study.ask()
    _count(study, done)
    release_trial(study, done._trial_id)
    assert (study.trials[0].state, study.trials[0].user_attrs.get("lost")) == (COMPLETE, None)
    _claimed(study, _dead())

    def first_there(trial_id, state, values=None):
        raise optuna.exceptions.UpdateFinishedTrialError("another worker got there first")

    monkeypatch.setattr(study._storage, "set_trial_state_values", first_there)
    fail_abandoned_trials(study, grace_period=60)
    # Failed and queued again by the other worker, not by this look: no second copy queued.
    assert [t.state for t in study.get_trials(deepcopy=False)] == [COMPLETE, RUNNING]


def test_an_exporter_whose_storage_stops_answering_goes_on_and_keeps_its_own_error(monkeypatch):
    # Its marks are for the other workers: a storage that fails a write of one (a server restarting) must neither
    # end the export nor replace the error the export ended with.
    study = optuna.create_study()
    recorded, failing = study.set_user_attr, [True]

    def flaky(key, value):
        if failing[0]:
            raise OSError("server closed the connection unexpectedly")
        recorded(key, value)

    assert elect_exporter(study, NoLock(), 4)
    monkeypatch.setattr(study, "set_user_attr", flaky)
    with exporting(study, NoLock(), heartbeat=0.01):  # its first beat fails, then the storage is back
        first = study.user_attrs[EXPORTER]
        failing[0] = False
        assert until(lambda: "beat" in study.user_attrs[EXPORTER])
        failing[0] = True  # and gone again as the export ends: its "finished" mark is not written
    assert "beat" not in first and "finished" not in study.user_attrs[EXPORTER]
    with pytest.raises(KeyboardInterrupt), exporting(study, NoLock()):
        raise KeyboardInterrupt  # the budget's give-back fails: the stop is still the stop
    assert study.user_attrs[EXPORTED] == 4


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
    if not one_machine:  # by default: a server's
        assert exported(study, 4, grace_period=60) is is_exported


def test_a_budget_is_set_by_the_first_process_joined_by_the_rest_and_renewed_once_exported():
    study = optuna.create_study()
    assert claim_budget(study, NoLock(), 4, FIRSTS) == 4 and study.user_attrs["trial_budget"] == 4
    # The baseline and defaults queued under the same hold, before any worker takes a trial.
    assert [(t.state.name, t.user_attrs["role"]) for t in study.trials] == [("WAITING", "baseline"),
                                                                            ("WAITING", "defaults")]
    _count(study, study.ask())
    _count(study, study.ask())
    assert claim_budget(study, NoLock(), 10, FIRSTS) == 4  # joined in progress: its budget, not --trials more
    _count(study, study.ask())
    _count(study, study.ask())
    assert claim_budget(study, NoLock(), 10, FIRSTS) == 4  # reached, not exported: resumed to the export
    assert elect_exporter(study, NoLock(), 4) and not elect_exporter(study, NoLock(), 4)
    assert study.user_attrs[EXPORTED] == 4 and study.user_attrs[EXPORTER] == worker_identity()
    assert claim_budget(study, NoLock(), 3, FIRSTS) == 7  # exported (by this live process): 3 more


def test_an_export_that_ends_is_marked_finished_and_one_that_raises_gives_the_budget_back():
    study = optuna.create_study()
    assert elect_exporter(study, NoLock(), 4)
    with exporting(study, NoLock()):
        pass
    assert study.user_attrs[EXPORTER] == {**worker_identity(), "finished": True} and exported(study, 4)
    study.set_user_attr(EXPORTED, None)
    assert elect_exporter(study, NoLock(), 4)
    with pytest.raises(KeyboardInterrupt), exporting(study, NoLock()):
        raise KeyboardInterrupt
    assert study.user_attrs[EXPORTED] is None and not exported(study, 4)
    # Taken over meanwhile (this process's beats stalled): the other exporter's mark stays.
    assert elect_exporter(study, NoLock(), 4)
    with pytest.raises(KeyboardInterrupt), exporting(study, NoLock()):
        study.set_user_attr(EXPORTER, {"host": "elsewhere", "pid": 1})
        raise KeyboardInterrupt
    assert study.user_attrs[EXPORTED] == 4


def test_an_exporter_beats_while_it_exports_and_stops_once_another_took_over():
    study = optuna.create_study()
    assert elect_exporter(study, NoLock(), 4)
    with exporting(study, NoLock(), heartbeat=0.01):
        beats = [study.user_attrs[EXPORTER]["beat"]]
        for _ in range(3):  # at every interval, not once
            assert until(lambda: study.user_attrs[EXPORTER]["beat"] != beats[-1])
            beats.append(study.user_attrs[EXPORTER]["beat"])
        other = {"host": "elsewhere", "pid": 1}
        for _ in range(2):  # twice: a beat under way as it was taken over may write once more, then sees it
            study.set_user_attr(EXPORTER, other)
            time.sleep(0.1)
        assert study.user_attrs[EXPORTER] == other  # not overwritten


def test_a_heartbeat_beats_at_once_then_every_interval_until_told_to_stop_and_never_without_one():
    beats = []

    def beat():
        beats.append(time.time())
        if len(beats) == 2:
            raise OSError("a missed beat")  # retried at the next interval
        return len(beats) < 4  # False at the fourth: stop

    with Heartbeat(beat, 0.01):
        assert len(beats) == 1  # before the block
        assert until(lambda: len(beats) == 4)
        time.sleep(0.1)
    assert len(beats) == 4
    with Heartbeat(beats.append, None):
        time.sleep(0.05)
    assert len(beats) == 4
    assert Heartbeat.of_trial(_Storage(), 7, 5).interval == 5 and Heartbeat.of_trial(object(), 7, 5).interval is None


def test_a_beat_under_way_as_the_block_ends_is_waited_for():
    # The exporter marks its export finished once its block ends: a beat that ended after that mark would write
    # "beating" over "finished".
    beats, under_way = [], threading.Event()

    def beat():
        if beats:
            under_way.set()
            time.sleep(0.3)
        beats.append("ended")

    with Heartbeat(beat, 0.01):
        assert under_way.wait(timeout=60)
    assert len(beats) >= 2  # the one under way ended before the block's end returned (a busy machine: a third too)
    storage = _Storage()
    with Heartbeat.of_trial(storage, 7, 5):
        pass
    assert storage.beats[-1] == 7


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning", "ignore:Heartbeat of storage")
def test_another_host_s_trial_whose_heartbeat_went_stale_is_failed_on_a_server(tmp_path):
    # A server's trials of another host are judged by their heartbeats alone (that host's processes cannot be
    # seen from here): one whose beats stopped is failed as a budget takes a trial.
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'beats.db'}", heartbeat_interval=1, grace_period=1)
    study = optuna.create_study(storage=storage)
    trial = _claimed(study, {"host": "elsewhere", "pid": 1})
    storage.record_heartbeat(trial._trial_id)
    with sqlite3.connect(tmp_path / "beats.db") as db:  # its last beat a minute ago (SQLite's clock: whole seconds)
        db.execute("UPDATE trial_heartbeats SET heartbeat = datetime(heartbeat, '-1 minute')")
    TrialBudget(study, 5, NoLock(), _Storage(), None, 60, True).take()  # a server's URL: no look at its owner
    assert study.get_trials(deepcopy=False)[0].state == FAIL


def test_a_file_for_one_machine_is_judged_by_itself_and_a_server_by_heartbeats():
    from autotune.shared_study import _one_machine

    assert _one_machine(object()) and _one_machine(_Storage("sqlite:///a.db"))
    assert not _one_machine(_Storage("postgresql://u@h/db"))


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
    started = optuna.create_study()  # its baseline measured, no defaults: a study, not a new one
    started.enqueue_trial({"x": 1}, user_attrs={"role": "baseline"})
    started.tell(started.ask(), 1.0)
    enqueue_first(started, FIRSTS)
    assert [t.state for t in started.trials] == [COMPLETE]
    cut_short = optuna.create_study()  # its queueing cut short: the baseline queued, the defaults never
    cut_short.enqueue_trial({"x": 1}, user_attrs={"role": "baseline"})
    enqueue_first(cut_short, FIRSTS)
    assert [t.user_attrs["role"] for t in cut_short.trials] == ["baseline", "defaults"]
    probes = optuna.create_study()  # each probe is its own config, queued once and again only where it was lost
    firsts = FIRSTS + [({"x": 3}, "probe"), ({"x": 4}, "probe")]
    enqueue_first(probes, firsts)
    enqueue_first(probes, firsts)  # all still queued (a queueing retried, a stop before the first trial): new
    assert [t.system_attrs["fixed_params"]["x"] for t in probes.trials] == [1, 2, 3, 4]
    for lost in (False, False, True, False):
        trial = probes.ask()
        trial.suggest_int("x", 1, 4)  # as the loop asks each knob
        trial.set_user_attr("lost", lost)
        probes.tell(trial, state=FAIL)
    enqueue_first(probes, firsts)
    assert [t.system_attrs["fixed_params"]["x"] for t in probes.trials] == [1, 2, 3, 4, 3]
    outside = optuna.create_study()  # a study made outside autotune, with trials of its own: left as it is
    outside.tell(outside.ask(), 1.0)
    enqueue_first(outside, FIRSTS)
    assert len(outside.trials) == 1
