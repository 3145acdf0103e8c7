"""The fault table: every way a trial, a worker, the driver, the storage or the input can fail, and what must happen.

Each in-trial row runs a one-trial study of the purpose-built `broken`
workload and asserts the recorded status and message, that the study
finished (nothing left RUNNING), and that no process the trial started is
left running. The worker, driver and storage rows drive the CLI.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import optuna
import pytest

from autotune.storage import open_storage, worker_identity
from autotune.tuner import Tuner
from tests.conftest import BROKEN, FAST_MEASURER, run_cli, stop_when_said, tagged_processes

TESTS = Path(__file__).resolve().parent
STEADY = f"{TESTS / 'workloads' / 'steady.py'}:SteadyWorkload"
GIB = 1 << 30

# behaviour -> (status, fragment of the recorded error, tuner options)
FAULTS = {
    "segfault": ("crash", "SIGSEGV", {}),
    "abort": ("crash", "SIGABRT", {}),
    "exit": ("crash", "exit", {}),
    "hang": ("timeout", "", {"trial_timeout": 3}),
    "oom_rlimit": ("oom", "MemoryError", {"memory_limit_bytes": 3 * GIB}),
    "oom_torch": ("oom", "", {}),
    "nan": ("incorrect", "error inf > tolerance", {}),
    "wrong": ("incorrect", "value error 1 > tolerance 1e-09", {}),
    "raise_build": ("error", "ValueError: broken on purpose in build", {}),
    "raise_run": ("error", "RuntimeError: broken on purpose in run", {}),
}


#: Faults whose path through the runner another fault of the default run already takes (a signal, an
#: exception, an out-of-memory): they run with -m slow, to keep the default run under 10 minutes.
SLOW_FAULTS = {"abort", "exit", "hang", "oom_rlimit", "raise_build"}  # a hang's kill: test_runner's own test


@pytest.mark.parametrize("behaviour", [pytest.param(b, marks=pytest.mark.slow) if b in SLOW_FAULTS else b
                                       for b in FAULTS])
def test_a_trial_fault_is_recorded_and_the_study_goes_on(studies, monkeypatch, behaviour):
    status, fragment, options = FAULTS[behaviour]
    tag = f"fault-{behaviour}-{os.getpid()}"
    monkeypatch.setenv("AUTOTUNE_TEST_TAG", tag)  # every process the trial starts inherits it
    storage = f"sqlite:///{studies / 'autotune.db'}"
    studies.mkdir(parents=True)
    study = optuna.create_study(study_name="broken-cpu-tiny", storage=storage, directions=["maximize", "minimize"])
    study.enqueue_trial({"behaviour": behaviour})
    study.enqueue_trial({"behaviour": "fast"})  # the study goes on after the fault
    tuner = Tuner(BROKEN, "cpu", "tiny", measurer=FAST_MEASURER, remeasure_rounds=1,
                  **{"trial_timeout": 30, **options})
    try:
        result = tuner.search(n_trials=2)
    finally:
        tuner.close()
    faulty, healthy = result.trials
    assert faulty.result.status == status, faulty.result
    assert fragment in (faulty.result.error or ""), faulty.result.error
    assert healthy.result.status == "ok"
    study = optuna.load_study(study_name="broken-cpu-tiny", storage=storage)
    assert all(t.state.is_finished() for t in study.trials)
    recorded = study.trials[0]
    assert recorded.user_attrs["status"] == status
    if status in ("oom", "incorrect"):
        # A constraint violation: the sampler learns to avoid it, and it can never be chosen.
        assert recorded.constraints["correct"] > 0
    else:
        assert recorded.state == optuna.trial.TrialState.FAIL
    # Never exported: the winner is the healthy trial.
    assert result.winner is not None and result.winner.config["behaviour"] == "fast"
    assert tagged_processes(tag) == []  # no trial, grandchild or fork server left running


@pytest.mark.slow  # 30 s; test_single_process_sigterm_is_a_clean_stop covers a stop in the default run
def test_driver_sigterm_marks_the_trial_and_a_rerun_resumes_without_loss(tmp_path):
    storage = str(tmp_path / "steady.journal")
    tag = f"sigterm-{os.getpid()}"
    env = {**os.environ, "AUTOTUNE_STUDIES": str(tmp_path / "studies"), "AUTOTUNE_TEST_TAG": tag}
    command = [sys.executable, "-m", "autotune", "search", "-w", STEADY, "-d", "cpu", "-n", "10", "--workers", "2",
               "--storage", storage, "--min-time", "0.3", "--remeasure-rounds", "1"]
    driver = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finished_before: set[int] = set()
    deadline = time.time() + 120
    while time.time() < deadline:
        time.sleep(0.1)
        if not Path(storage).is_file():
            continue
        try:
            study = optuna.load_study(study_name="steady-cpu-tiny", storage=open_storage(storage))
        except KeyError:
            continue
        finished_before = {t.number for t in study.get_trials(deepcopy=False) if t.state.is_finished()}
        if len(finished_before) >= 3:
            break
    driver.send_signal(signal.SIGTERM)
    _, stderr = driver.communicate(timeout=120)
    assert driver.returncode == 130, stderr[-2000:]
    assert "Run the same command again to resume" in stderr
    assert tagged_processes(tag) == []
    study = optuna.load_study(study_name="steady-cpu-tiny", storage=open_storage(storage))
    assert not any(t.state == optuna.trial.TrialState.RUNNING for t in study.trials)
    assert all(t.user_attrs.get("lost") for t in study.trials if t.state == optuna.trial.TrialState.FAIL)
    # The same command again finishes the budget; nothing finished before is lost.
    again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    study = optuna.load_study(study_name="steady-cpu-tiny", storage=open_storage(storage))
    after = {t.number: t for t in study.trials}
    assert finished_before <= {n for n, t in after.items() if t.state.is_finished()}
    counted = [t for t in after.values() if t.state.is_finished() and "status" in t.user_attrs
               and "duplicate_of" not in t.user_attrs and not t.user_attrs.get("lost")]
    assert len(counted) == 10


def test_single_process_sigterm_is_a_clean_stop(tmp_path):
    tag = f"single-{os.getpid()}"
    env = {**os.environ, "AUTOTUNE_STUDIES": str(tmp_path / "studies"), "AUTOTUNE_TEST_TAG": tag}
    driver = subprocess.Popen(
        [sys.executable, "-m", "autotune", "search", "-w", BROKEN, "-d", "cpu", "-n", "3", "--min-time", "0.05"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(driver.stderr), daemon=True)
    reader.start()
    deadline = time.time() + 60
    while time.time() < deadline and not any("fork server ready" in line for line in lines):
        time.sleep(0.05)
    driver.send_signal(signal.SIGTERM)
    driver.wait(timeout=60)
    reader.join(timeout=10)
    assert driver.returncode == 130, "".join(lines)[-2000:]
    # One process adds --trials to the study on every run: the message says so rather than "resume".
    assert ("Run the same command again to go on: it measures 3 more configs (--trials; 0 re-measures alone)."
            in "".join(lines))
    assert tagged_processes(tag) == []
    storage = f"sqlite:///{tmp_path / 'studies' / 'autotune.db'}"
    study = optuna.load_study(study_name="broken-cpu-tiny", storage=storage)
    assert not any(t.state == optuna.trial.TrialState.RUNNING for t in study.trials)


def test_a_new_sqlite_database_opens_while_another_process_creates_its_tables(tmp_path):
    # Optuna itself (a script polling the study) takes no lock of autotune's: a search whose start met it
    # creating the tables failed with "table studies already exists" (exit 2), about one start in two. Every
    # other round two of ours meet (two searches creating one new database: tests/test_cli.py's, with -m slow).
    for i in range(8):
        url = f"sqlite:///{tmp_path / f'{i}.db'}"
        start, failures = threading.Barrier(2), []

        def ours():
            start.wait()
            try:
                open_storage(url)
            except Exception as exc:  # noqa: BLE001 - collected, then asserted
                failures.append(exc)

        def theirs():
            start.wait()
            try:
                optuna.storages.RDBStorage(url)
            except Exception:  # noqa: BLE001 - not ours: it may lose the race
                pass

        threads = [threading.Thread(target=ours), threading.Thread(target=ours if i % 2 else theirs)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not failures, failures[0]


@pytest.mark.slow  # 15 s; test_tuner's test_interrupt_keeps_completed_trials_and_resume_goes_on keeps the resume
def test_a_first_trial_a_stop_interrupted_is_measured_when_the_search_resumes(tmp_path):
    # The defaults were queued only in a new study: stopped mid-run, they were never measured again.
    tag = f"firsts-{os.getpid()}"
    env = {**os.environ, "AUTOTUNE_STUDIES": str(tmp_path / "studies"), "AUTOTUNE_TEST_TAG": tag}
    def search(trials: int, min_time: str) -> list[str]:
        return [sys.executable, "-m", "autotune", "search", "-w", STEADY, "-d", "cpu", "-n", str(trials),
                "--min-time", min_time, "--remeasure-rounds", "1"]

    said = tmp_path / "driver.err"  # a file, not a pipe: nobody reads it while the driver runs
    with open(said, "w") as err:
        # Runs of 2 s: the defaults' trial is still running when the poll below sees it.
        driver = subprocess.Popen(search(2, "2"), cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=err)
    storage = f"sqlite:///{tmp_path / 'studies' / 'autotune.db'}"
    running = optuna.trial.TrialState.RUNNING
    deadline = time.time() + 90
    try:
        while time.time() < deadline and driver.poll() is None:
            time.sleep(0.05)
            try:
                # Read-only: a poll that created Optuna's tables while the driver did failed the driver's start
                # (exit 2, "table studies already exists"; once in a CI run of 2026-11-26).
                study = optuna.load_study(study_name="steady-cpu-tiny", storage=open_storage(storage, read_only=True))
                trials = study.get_trials(deepcopy=False)
            except Exception:  # noqa: BLE001 - the database or the study is not made yet
                continue
            if any(t.user_attrs.get("role") == "defaults" and t.state == running for t in trials):
                break
        driver.send_signal(signal.SIGTERM)
        assert driver.wait(timeout=60) == 130, said.read_text()[-2000:]
    finally:
        driver.kill()
    study = optuna.load_study(study_name="steady-cpu-tiny", storage=storage)
    assert [t.user_attrs.get("lost") for t in study.trials if t.user_attrs.get("role") == "defaults"] == [True]
    again = subprocess.run(search(1, "0.05"), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    study = optuna.load_study(study_name="steady-cpu-tiny", storage=storage)
    measured = [t.params for t in study.trials if t.user_attrs.get("role") == "defaults" and t.state.name == "COMPLETE"]
    assert measured == [{"work": 500}]
    assert "defaults" in again.stderr


# With -m slow (19 s), to keep the default run under 10 minutes: the retries and the clean stop keep their rule in
# tests/test_workers.py (retrying) and in test_a_sqlite_study_held_mid_search_is_waited_for_then_a_clean_stop.
@pytest.mark.slow
@pytest.mark.postgres
def test_database_lost_mid_study_stops_cleanly_and_keeps_every_finished_trial(tmp_path):
    # A server of its own, stopped while the workers run.
    from tests.conftest import _postgres_server

    with _postgres_server() as (url, stop):
        env = {**os.environ, "AUTOTUNE_STUDIES": str(tmp_path / "studies"), "AUTOTUNE_STORAGE_RETRY_DELAYS": "0.2,0.2"}
        command = [sys.executable, "-m", "autotune", "search", "-w", STEADY, "-d", "cpu", "-n", "30", "--workers", "2",
                   "--storage", url, "--min-time", "0.3"]
        driver = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        storage = open_storage(url)
        deadline = time.time() + 120
        finished: set[int] = set()
        while time.time() < deadline:
            time.sleep(0.2)
            try:
                study = optuna.load_study(study_name="steady-cpu-tiny", storage=storage)
            except KeyError:
                continue
            finished = {t.number for t in study.get_trials(deepcopy=False) if t.state.is_finished()}
            if len(finished) >= 3:
                break
        storage.engine.dispose()
        stop()
        _, stderr = driver.communicate(timeout=180)
        assert driver.returncode == 2, stderr[-2000:]
        assert "lost the storage" in stderr and "run the same command again to resume" in stderr
        assert "s3cret-pw" not in stderr


_ORPHAN = """
import os, sys, optuna
from autotune.storage import open_storage, worker_identity
study = optuna.create_study(study_name=sys.argv[1], storage=open_storage(sys.argv[2]),
                            directions=["maximize", "minimize"], load_if_exists=True)
trial = study.ask()
if sys.argv[3] == "claimed":  # taken and claimed, then the process dies without a heartbeat
    trial.set_user_attr("claimed", worker_identity())
os._exit(0)
"""


@pytest.mark.parametrize("kind, how", [
    ("sqlite", "claimed"),
    pytest.param("journal", "unclaimed", marks=pytest.mark.slow),  # 15 s; the same recovery as sqlite's
    # On PostgreSQL (18 s of a 10-minute default run) both run with -m slow; test_workers covers the server.
    pytest.param("postgres", "unclaimed", marks=[pytest.mark.postgres, pytest.mark.slow]),
    pytest.param("postgres", "claimed", marks=[pytest.mark.postgres, pytest.mark.slow]),
])
def test_a_trial_taken_by_a_process_that_died_blocks_no_later_search(tmp_path, request, kind, how):
    # A process opens the study, takes a trial (study.ask) and exits before any heartbeat: the
    # search after it must fail that trial, finish within its time, and reach its budget exactly.
    if kind == "postgres":
        storage = request.getfixturevalue("postgres_url")
        study_name = f"orphan-{how}-{os.getpid()}"
    else:
        storage = f"sqlite:///{tmp_path / 'o.db'}" if kind == "sqlite" else str(tmp_path / "o.journal")
        study_name = "orphan"
    workers = ["--workers", "2"] if kind != "sqlite" else []
    env = {"AUTOTUNE_STUDIES": str(tmp_path / "studies")}
    common = ["search", "-w", STEADY, "-d", "cpu", "-n", "2", "--storage", storage, "--study", study_name,
              "--min-time", "0.05", "--remeasure-rounds", "1", "--grace-period", "2", "--heartbeat", "1", *workers]
    orphan = subprocess.run([sys.executable, "-c", _ORPHAN, study_name, storage, how], capture_output=True,
                            text=True, timeout=60)
    assert orphan.returncode == 0, orphan.stderr
    started = time.time()
    again = run_cli(*common, cwd=tmp_path, env=env, timeout=180)
    assert again.returncode == 0, again.stderr[-2000:]
    assert time.time() - started < 120
    study = optuna.load_study(study_name=study_name, storage=open_storage(storage))
    trials = study.get_trials(deepcopy=False)
    assert not any(t.state == optuna.trial.TrialState.RUNNING for t in trials)
    retried = {n for t in trials for n in t.system_attrs.get("retry_history", ())}
    counted = [t for t in trials if t.state.is_finished() and "status" in t.user_attrs and t.number not in retried
               and "duplicate_of" not in t.user_attrs and not t.user_attrs.get("lost")]
    assert len(counted) == 2, [(t.number, t.state, t.user_attrs.get("status")) for t in trials]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_late_in_the_re_measurement_exports_from_its_whole_rounds(tmp_path, signum):
    # A stop in the second round of three lost the re-measurement and the export with it; on a GPU, a command's
    # deadline did so to a 350 s lsd search (2026-11-27). The first round is whole: the winner comes from it.
    # SIGHUP (a terminal closed) killed the search where it stood.
    tag = f"late-stop-{os.getpid()}-{signum}"
    env = {**os.environ, "AUTOTUNE_STUDIES": str(tmp_path / "studies"), "AUTOTUNE_TEST_TAG": tag}
    code, stdout, stderr = stop_when_said(["search", "-w", STEADY, "-d", "cpu", "-n", "3", "--min-time", "0.5",
                                           "--remeasure-rounds", "3", "--json"], "re-measuring round 2/3",
                                          cwd=tmp_path, env=env, signum=signum)
    assert code == 0, stderr[-2000:]
    # Stopped in round 2, or in round 3 on a machine slow to deliver the stop: the rounds before it are whole.
    stopped_in = max(int(n) for n in re.findall(r"re-measuring round (\d)/3", stderr))
    whole = stopped_in - 1
    assert whole >= 1 and f"stopped: the re-measurement ends with {whole} whole round" in stderr, stderr[-2000:]
    result = json.loads(stdout)
    exported = json.loads(Path(result["export"]).read_text())
    assert exported["remeasure"]["rounds"] == whole
    assert all(len(c["statuses"]) == whole for c in exported["remeasure"]["candidates"])
    assert tagged_processes(tag) == []


@pytest.mark.parametrize("torn, kept", [
    (b'{"op_code": 9, "worker_id": "w", "trial_id": 0, "user_attr', False),  # cut mid-record: dropped
    (b'{"op_code": 2, "worker_id": "w", "study_id": 0, "user_attr": {"late": 2}}', True),  # whole but for its newline
])
def test_a_journal_record_torn_by_a_writer_that_died_is_mended_before_the_next_write(tmp_path, torn, kept):
    # The next record used to be glued to the torn one: a line no reader parses, and the study unreadable for good.
    path = tmp_path / "study.journal"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a new journal has nothing to mend
        study = optuna.create_study(study_name="s", storage=open_storage(str(path)))
    study.set_user_attr("before", 1)
    with open(path, "ab") as handle:
        handle.write(torn)
    with pytest.warns(UserWarning, match="its last record was torn") if not kept else contextlib.nullcontext():
        optuna.load_study(study_name="s", storage=open_storage(str(path))).set_user_attr("after", 3)
    attrs = optuna.load_study(study_name="s", storage=open_storage(str(path))).user_attrs
    assert attrs == {"before": 1, "after": 3, **({"late": 2} if kept else {})}
    assert path.read_bytes().endswith(b"\n") and (torn in path.read_bytes()) is kept


def test_a_writer_that_dies_the_moment_the_lock_is_let_go_glues_nothing_to_the_next_record(tmp_path, monkeypatch):
    # The mend took the writers' lock and let it go, and the append took it again: a writer that took it between,
    # wrote half a record and died (the OOM killer) left its torn line for the append to be glued to.
    from optuna.storages.journal import JournalFileSymlinkLock

    from autotune.journal import mending_journal

    path = tmp_path / "study.journal"
    journal = mending_journal(path)
    journal.append_logs([{"op_code": 0}])
    let_go = JournalFileSymlinkLock.release

    def let_go_and_another_writer_dies(self):
        let_go(self)
        with open(path, "ab") as handle:
            handle.write(b'{"op_code": 9, "worker_id": "w", "user_attr')

    monkeypatch.setattr(JournalFileSymlinkLock, "release", let_go_and_another_writer_dies)
    journal.append_logs([{"op_code": 1}])
    monkeypatch.setattr(JournalFileSymlinkLock, "release", let_go)
    with pytest.warns(UserWarning, match="its last record was torn"):
        journal.append_logs([{"op_code": 2}])
    assert [json.loads(line)["op_code"] for line in path.read_bytes().splitlines()] == [0, 1, 2]


def test_a_mend_that_fails_lets_go_of_the_writers_lock(tmp_path, monkeypatch):
    # Held after a failed mend (a journal unreadable for a moment), the lock would make every other writer of the
    # study wait out Optuna's grace period (30 s) for a lock nobody holds.
    from autotune import journal

    path = tmp_path / "study.journal"
    writer = journal.mending_journal(path)
    writer.append_logs([{"op_code": 0}])

    def unreadable(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(journal, "mend_torn_tail", unreadable)
    with pytest.raises(PermissionError):
        writer.append_logs([{"op_code": 1}])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["study.journal"]  # no lock left beside it
    monkeypatch.undo()
    writer.append_logs([{"op_code": 2}])
    assert [json.loads(line)["op_code"] for line in path.read_bytes().splitlines()] == [0, 2]


@pytest.mark.parametrize("before", [b'{"op_code": 0}\n', b""])
def test_a_torn_record_longer_than_the_search_step_is_dropped_whole(tmp_path, before):
    from autotune.journal import mend_torn_tail

    path = tmp_path / "study.journal"
    path.write_bytes(before + b'{"op_code": 2, "user_attr": {"times": [' + b"0.125, " * 30_000)  # 210 kB, 4 steps
    with pytest.warns(UserWarning, match="its 210039 bytes dropped"):
        mend_torn_tail(path)
    assert path.read_bytes() == before


def test_a_whole_journal_is_left_as_it_is_and_a_torn_line_goes_back_to_its_newline_and_no_further(tmp_path):
    from autotune.journal import mend_torn_tail

    path = tmp_path / "study.journal"
    whole = b'{"op_code": 0}\n{"op_code": 1}\n'
    path.write_bytes(whole)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing torn: no "0 bytes dropped"
        mend_torn_tail(path)
    assert path.read_bytes() == whole
    # The newline before the torn line is the first byte of a search step (64 KiB from the end): that newline
    # ends the records kept, not one further back, which would drop a whole record.
    torn = b'{"op_code": 9, "user_attr": "' + b"x" * ((1 << 16) - 1 - 29)
    path.write_bytes(whole + torn)
    with pytest.warns(UserWarning, match="its 65535 bytes dropped"):
        mend_torn_tail(path)
    assert path.read_bytes() == whole
    # A writer that died one byte into the journal's first record.
    path.write_bytes(b"{")
    with pytest.warns(UserWarning, match="its 1 bytes dropped"):
        mend_torn_tail(path)
    assert path.read_bytes() == b""


def test_a_sqlite_study_held_mid_search_is_waited_for_then_a_clean_stop(studies, monkeypatch):
    # Another process holding the database (a `sqlite3` shell, a dashboard) for more than SQLite's 5 s busy
    # wait made a one-process search end in a traceback and lose the trial it had measured, or, held as the
    # winner was recorded, minutes of re-measuring; a search of several workers waited and retried. Now the
    # one-process search does the same: a hold of a moment is waited for, a longer one is a clean stop.
    import sqlalchemy.exc

    from autotune import loop
    from autotune.exceptions import StorageError

    monkeypatch.setenv("AUTOTUNE_STORAGE_RETRY_DELAYS", "0,0")
    held = {"record": 1, "environment": 1}  # how many times each write finds the file held

    def fault(what):
        if held[what]:
            held[what] -= 1
            cause = sqlalchemy.exc.OperationalError("COMMIT", {}, Exception("database is locked"))
            raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") from cause

    real_record, real_attr = loop._record, optuna.Study.set_user_attr

    def record(trial, attrs):
        if trial.number >= 1:  # the defaults' trial onwards
            fault("record")
        return real_record(trial, attrs)

    def study_attr(self, key, value):
        if key == "environment":
            fault("environment")
        return real_attr(self, key, value)

    monkeypatch.setattr(loop, "_record", record)
    monkeypatch.setattr(optuna.Study, "set_user_attr", study_attr)
    stages: list[str] = []
    tuner = Tuner(STEADY, "cpu", "tiny", measurer=FAST_MEASURER, remeasure_rounds=1, remeasure_top=1, seed=0,
                  on_stage=stages.append)
    try:
        result = tuner.search(n_trials=3)
        assert result.export_path is not None and Path(result.export_path).is_file()
        for what in ("recording a trial", "recording the winner"):
            assert any(f"storage not answering while {what} (OperationalError: database is locked); retry 1/2" in s
                       for s in stages), stages
        study = optuna.load_study(study_name="steady-cpu-tiny", storage=tuner.storage)
        assert [t.state.name for t in study.trials] == ["COMPLETE"] * 3
        held["record"] = 99  # held past every retry
        with pytest.raises(StorageError, match=r"lost the storage .* while recording a trial \(OperationalError: "
                                               r"database is locked\), after 2 retries"):
            tuner.search(n_trials=1)
    finally:
        tuner.close()


@pytest.mark.parametrize("queued_before", [0, 1])
def test_a_full_disk_under_a_sqlite_study_is_named_and_a_clean_stop(studies, monkeypatch, queued_before):
    # A search on a full disk (a 700 KiB tmpfs, this machine) ended in a traceback when the unseen config it
    # queued after a restricted ask could not be written (or its first configs, in a new study), and where a
    # write was retried it said "lost the storage ... (StorageInternalError)": Optuna's wrapper, whose words
    # blame "invalid data". Queueing is retried as every other write, and the driver's words are said.
    import sqlalchemy.exc

    from autotune import loop
    from autotune.exceptions import StorageError

    monkeypatch.setenv("AUTOTUNE_STORAGE_RETRY_DELAYS", "0")
    full = sqlalchemy.exc.OperationalError("INSERT", {}, Exception("database or disk is full"))
    real_run_trial, real_enqueue = loop.run_trial, optuna.Study.enqueue_trial
    asks, queued = [], []

    def run_trial(tuner, study, trial, *args):
        asks.append(trial.number)
        if len(asks) > 1:
            return real_run_trial(tuner, study, trial, *args)
        # The first ask breaks a constraint, as a real one is told: the loop queues an unseen config next.
        loop._skip(study, trial, {"restricted": "planted", "config": tuner.space.suggest(trial).to_dict()}, args[-1])
        return None

    def enqueue_trial(self, *args, **kwargs):
        queued.append(args)
        if len(queued) in (1, 3) and queued_before:  # the defaults' queueing fails once, after the baseline's
            return real_enqueue(self, *args, **kwargs)
        raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") from full

    monkeypatch.setattr(loop, "run_trial", run_trial)
    monkeypatch.setattr(optuna.Study, "enqueue_trial", enqueue_trial)
    stages: list[str] = []
    tuner = Tuner(STEADY, "cpu", "tiny", measurer=FAST_MEASURER, remeasure_rounds=1, remeasure_top=1, seed=0,
                  on_stage=stages.append)
    what = "queueing an unseen config" if queued_before else "queueing the first configs"
    try:
        with pytest.raises(StorageError, match=rf"while {what} \(OperationalError: database or disk is full\), "
                                               r"after 1 retries"):
            tuner.search(n_trials=3)
    finally:
        tuner.close()
    assert any(f"while {what} (OperationalError: database or disk is full); retry 1/1" in s for s in stages), stages
    if queued_before:  # the first configs' retry queued the defaults, not the baseline again
        assert any("while queueing the first configs (OperationalError" in s for s in stages), stages
        assert queued[:3] == [({"work": 1000},), ({"work": 500},), ({"work": 500},)], queued


def test_a_journal_on_a_full_disk_is_a_clean_stop_not_a_traceback():
    # A journal search on a 700 KiB tmpfs (this machine): Optuna's append_logs raised "OSError: [Errno 28] No
    # space left on device" through the worker, which ended in a traceback. A journal's OSError is the storage's.
    from autotune.exceptions import StorageError
    from autotune.storage import retrying

    def append():
        raise OSError(28, "No space left on device")

    said = []
    with pytest.raises(StorageError, match=r"lost the storage s.journal while recording a trial \(OSError: "
                                           r"\[Errno 28\] No space left on device\), after 1 retries"):
        retrying(append, "recording a trial", "s.journal", delays=(0,), on_retry=said.append)
    assert said == ["storage not answering while recording a trial (OSError: [Errno 28] No space left on device); "
                    "retry 1/1 in 0 s"]


def test_a_trial_failed_by_a_full_disk_stops_the_search_and_is_measured_again_on_resume(studies):
    # numba's cache on a full disk (a 700 KiB tmpfs, this machine) failed a chmm trial "OSError: [Errno 28] No
    # space left on device": recorded as its config's error, the search went on failing, and a resumed study
    # never measured that config again. Such a trial is now lost (counts toward no budget), the search stops in
    # one line, and a resumed search measures its config.
    from autotune.exceptions import DiskFullError

    full = studies.parent / "full"
    source = Path(STEADY.split(":")[0]).read_text().replace(
        "        seconds = config[\"work\"] / 50_000\n",
        "        seconds = config[\"work\"] / 50_000\n        import errno, pathlib\n"
        f"        if config['work'] == 1000 and pathlib.Path({str(full)!r}).exists():  # the baseline\n"
        "            raise RuntimeError('compiling failed') from OSError(errno.ENOSPC, 'No space left on device')\n")
    assert "errno.ENOSPC" in source
    (studies.parent / "steady.py").write_text(source)
    (studies.parent / "steady.yaml").write_text(Path(STEADY.split(":")[0]).with_suffix(".yaml").read_text())
    workload = f"{studies.parent / 'steady.py'}:SteadyWorkload"
    full.touch()
    tuner = Tuner(workload, "cpu", "tiny", measurer=FAST_MEASURER, remeasure_rounds=1, remeasure_top=1, seed=0)
    try:
        with pytest.raises(DiskFullError, match=r"trial #0 could not write to a disk \(RuntimeError: compiling "
                                                r"failed\); it is kept as lost, not as its config's error"):
            tuner.search(n_trials=2)
        full.unlink()
        result = tuner.search(n_trials=2)
    finally:
        tuner.close()
    study = optuna.load_study(study_name="steady-cpu-tiny", storage=tuner.storage)
    first, *later = study.trials
    assert first.user_attrs["lost"] and first.user_attrs["config"] == {"work": 1000}
    assert [t.user_attrs["status"] for t in later if t.user_attrs["config"] == {"work": 1000}] == ["ok"]
    assert result.baseline is not None and result.export_path is not None


def test_a_re_measurement_a_full_disk_failed_stops_rather_than_export_another_winner(studies, monkeypatch):
    # A winner's re-measurement that the disk failed (lost, autotune.runner) read as the winner's failure: the
    # next candidate would have been exported in its place.
    from autotune.config import Config
    from autotune.exceptions import DiskFullError
    from autotune.selection import Candidate

    tuner = Tuner(STEADY, "cpu", "tiny", measurer=FAST_MEASURER, remeasure_rounds=1, remeasure_top=1, seed=0)
    try:
        tuner.ensure_reference()
        real_run = tuner.runner.run

        def run(request, timeout=None):
            result = real_run(request, timeout)
            if request.config == {"work": 7}:  # the winner's
                result.status, result.lost, result.error = "error", True, "OSError: [Errno 28] No space left"
            return result

        monkeypatch.setattr(tuner.runner, "run", run)
        candidates = [Candidate(Config({"work": 1000}), 0, "baseline"), Candidate(Config({"work": 7}), 1, "candidate"),
                      Candidate(Config({"work": 9}), 2, "candidate")]
        with pytest.raises(DiskFullError, match=r"^OSError: \[Errno 28\] No space left: no config is judged"):
            tuner.remeasure(candidates)
    finally:
        tuner.close()


def test_a_search_started_with_its_output_streams_closed_still_measures_and_exports(tmp_path):
    # `autotune search ... >&- 2>&-` (a supervisor that closes them): the study's lock file took the closed
    # stderr's number, the fork server wrote its trials' output there, and every trial crashed: no trial, no export,
    # no word. Closed streams are now /dev/null.
    closed = subprocess.run(
        [sys.executable, "-m", "autotune", "search", "-w", STEADY, "-d", "cpu", "-n", "2", "--min-time", "0.05",
         "--remeasure-rounds", "1", "--studies", str(tmp_path / "studies")],
        cwd=tmp_path, preexec_fn=lambda: (os.close(1), os.close(2)), timeout=120)
    assert closed.returncode == 0
    assert (tmp_path / "studies" / "steady" / "cpu-tiny.json").is_file()
    study = optuna.load_study(study_name="steady-cpu-tiny", storage=f"sqlite:///{tmp_path / 'studies' / 'autotune.db'}")
    assert [t.user_attrs.get("status") for t in study.trials] == ["ok", "ok"]


@pytest.mark.parametrize("claim, one_machine, failed", [
    ({"host": "dead-container-1234", "pid": 1}, True, True),  # a file for one machine: nobody else holds it
    ({"host": "dead-container-1234", "pid": 1}, False, False),  # a server database: its heartbeat decides
    ("a later process given my pid", True, True),
    ("me", True, False),
    ("me, under the host name I had", True, False),  # a laptop renamed mid-search: its trial still runs
    ("a dead container, started", True, True),  # its boot id and ticks match no process here
])
def test_a_trial_a_changed_host_name_or_a_reused_pid_left_running_blocks_no_search(claim, one_machine, failed):
    # A SQLite study holding a running trial claimed by another host name (a container of the job killed and run
    # anew, a renamed laptop) made every later search wait for it, silently, for ever; so did one claimed by this
    # host's pid when a restarted container gave its new process the dead one's pid (1, say).
    from autotune.shared_study import fail_abandoned_trials

    me = worker_identity()
    if claim == "me":
        claim = me
    elif claim == "a later process given my pid":
        claim = {**me, "started": "another-boot:12345"}
    elif claim == "me, under the host name I had":
        claim = {**me, "host": "old-name"}
    elif claim == "a dead container, started":
        claim = {"host": "dead-container-1234", "pid": 1, "started": "another-boot:12345"}
    study = optuna.create_study()
    trial = study.ask()
    trial.set_user_attr("claimed", claim)
    fail_abandoned_trials(study, grace_period=60, one_machine=one_machine)
    state = study.get_trials(deepcopy=False)[trial.number].state
    assert (state == optuna.trial.TrialState.FAIL) == failed
    if failed:  # queued once more, as any abandoned trial
        assert study.get_trials(deepcopy=False)[-1].state == optuna.trial.TrialState.WAITING


def test_a_search_on_a_study_file_goes_on_past_a_trial_another_host_name_left_running(tmp_path):
    storage = f"sqlite:///{tmp_path / 'o.db'}"
    study = optuna.create_study(study_name="left", storage=storage, direction="maximize")
    study.ask().set_user_attr("claimed", {"host": "dead-container-1234", "pid": 1})
    done = run_cli("search", "-w", STEADY, "-d", "cpu", "-n", "2", "--storage", storage, "--study", "left",
                   "--min-time", "0.05", "--remeasure-rounds", "1", cwd=tmp_path,
                   env={"AUTOTUNE_STUDIES": str(tmp_path / "studies")}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    trials = optuna.load_study(study_name="left", storage=storage).get_trials(deepcopy=False)
    assert not any(t.state == optuna.trial.TrialState.RUNNING for t in trials)
