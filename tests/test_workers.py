"""Several workers on one study: journal file and PostgreSQL, a worker killed mid-trial, one exporter."""

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
from pathlib import Path

import optuna
import pytest

from autotune.exceptions import AutotuneError
from autotune.storage import BudgetLock, open_storage, redact_storage, retrying
from autotune.storage_names import storage_problem
from autotune.tuner import Tuner
from autotune.trials import counted
from autotune.workers import CPUS_ENV, pinned_threads, plan_workers
from tests.conftest import run_cli, stop_when_said, tagged_processes, wait_or_kill

TESTS = Path(__file__).resolve().parent
STEADY = f"{TESTS / 'workloads' / 'steady.py'}:SteadyWorkload"
STUDY = "steady-cpu-tiny"


def test_sqlite_refuses_several_workers_and_writes_nothing(tmp_path):
    done = run_cli("search", "-w", STEADY, "-d", "cpu", "--workers", "2", cwd=tmp_path)
    assert done.returncode == 2
    message = done.stderr.strip()
    assert "\n" not in message and "SQLite" in message and ".journal" in message and "postgresql://" in message
    assert not (tmp_path / "studies").exists()


@pytest.mark.parametrize("args, fragment", [
    (["--gpus", "0,x"], "--gpus '0,x' is not a list of distinct GPU indices"),
    (["--gpus", "0,0"], "distinct"),
    (["--gpus", "0,1", "--workers", "3"], "--workers 3 and --gpus 0,1 disagree"),
    # Each worker would run on the CPU anyway, beside the others; once it did, with CUDA_VISIBLE_DEVICES set.
    (["--gpus", "0,1"], "--gpus 0,1 starts one worker per CUDA GPU, but --device cpu is not one; use --workers N"),
])
def test_bad_worker_options_are_one_line_errors(tmp_path, args, fragment):
    done = run_cli("search", "-w", STEADY, "-d", "cpu", "--storage", "s.journal", *args, cwd=tmp_path)
    assert done.returncode == 2 and fragment in done.stderr and done.stderr.count("\n") == 1
    assert not (tmp_path / "s.journal").exists()


def test_a_worker_that_failed_is_said_and_fails_the_search_only_where_trials_are_left(tmp_path, monkeypatch, capsys):
    # The driver's verdict on its workers, here with their exit statuses given (a worker killed mid-trial is
    # test_journal_file_two_workers_one_killed's, slow): no test of the default run saw a failed worker.
    from types import SimpleNamespace

    import autotune.devices
    import autotune.workers
    from autotune.cli import _shared_search

    def search(codes, done, gpus=None, cuda=0):
        monkeypatch.setattr(autotune.workers, "run_workers", lambda path, budget, plans, say, env: codes)
        gpu = SimpleNamespace(profile=SimpleNamespace(kind="cuda"))
        monkeypatch.setattr(autotune.devices, "detect", lambda: [gpu] * cuda + [SimpleNamespace(
            profile=SimpleNamespace(kind="cpu"))])
        finished = []
        tuner = SimpleNamespace(
            claim_budget=lambda trials: trials, space=SimpleNamespace(left_out=lambda: []), study_name=STUDY,
            trials_so_far=lambda threads: "new", storage=str(tmp_path / "s.journal"), ensure_reference=lambda: None,
            budget_done=lambda budget: done, device=SimpleNamespace(kind="cuda", name="h100"),
            finish_shared=lambda budget, started: finished.append(budget) or "the result")
        settings = SimpleNamespace(device="cuda", write=lambda path: path)
        said = []
        progress = SimpleNamespace(stage=said.append)
        result = _shared_search(tuner, settings, 5, len(codes), gpus, progress)
        return result, finished, [line for line in said if not line.startswith(("study ", "warning: "))]

    assert search([0, 0], True) == ("the result", [5], [])
    assert search([0, -9], True) == ("the result", [5], ["worker 1 exited -9; the other workers finished all 5 trials"])
    for codes, done in (([3, 0], False), ([0, 1], False)):
        with pytest.raises(SystemExit) as ended:
            search(codes, done)
        failed = next(f"worker {i} exited {c}" for i, c in enumerate(codes) if c)
        assert ended.value.code == 2 and capsys.readouterr().err == (
            f"autotune: error: {failed}; every finished trial is stored: run the same command again to resume\n")
    assert search([0, 0], True, gpus=[0, 1], cuda=2)[0] == "the result"  # the CPU is no third GPU
    with pytest.raises(SystemExit):
        search([0, 0, 0], True, gpus=[0, 1, 2], cuda=2)
    assert "no GPU 2 here; this process sees 2 CUDA GPU(s)" in capsys.readouterr().err


def test_gpus_on_a_machine_or_device_without_them_is_refused_before_anything_is_written(tmp_path):
    # SQLite and one GPU ran one process on the first GPU, whatever --gpus said; here, on the CPU, it ran there.
    done = run_cli("search", "-w", STEADY, "--gpus", "1", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--gpus 1 starts one worker per CUDA GPU, but --device auto (the cpu here) is not one" in done.stderr
    assert not (tmp_path / "studies").exists()


def test_gpus_are_counted_after_cuda_visible_devices(monkeypatch):
    from autotune.devices import PROFILES
    from autotune.workers import check_gpus, gpu_environment

    assert check_gpus([0, 1], "h100", PROFILES["h100"], cuda_count=2) is None
    assert "--gpus 1,2: no GPU 2 here; this process sees 2 CUDA GPU(s)" in check_gpus([1, 2], "cuda", PROFILES["h100"], 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpu_environment(1) == {"CUDA_VISIBLE_DEVICES": "1"}
    # Under CUDA_VISIBLE_DEVICES=2,3 torch's cuda:0 is GPU 2, and so is --gpus 0 (it was GPU 0, one not given).
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert [plan.env for plan in plan_workers(2, [0, 1])[0]] == [{"CUDA_VISIBLE_DEVICES": "2"},
                                                                 {"CUDA_VISIBLE_DEVICES": "3"}]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8a1b,GPU-77ce")
    assert gpu_environment(1) == {"CUDA_VISIBLE_DEVICES": "GPU-77ce"}


def test_unreachable_database_at_start_is_a_clear_error_without_the_password(tmp_path):
    done = run_cli("search", "-w", STEADY, "-d", "cpu", "--storage",
                   "postgresql+psycopg2://tuner:hunter2@127.0.0.1:1/autotune", cwd=tmp_path)
    assert done.returncode == 2 and "cannot open storage postgresql+psycopg2://tuner:***@127.0.0.1:1/autotune" in done.stderr
    assert "hunter2" not in done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].count("cannot open storage") == 1, done.stderr  # said once, on one line


def test_a_storage_that_cannot_be_opened_says_the_driver_s_words_not_optuna_s_wrapper():
    # Optuna wraps a driver's error at a commit in "An exception is raised during the commit. This typically
    # happens due to invalid data in the commit, e.g. exceeding max length.": a database read-only to this user
    # said that, where SQLite says "attempt to write a readonly database".
    import optuna
    import sqlalchemy.exc

    from autotune.storage import storage_failure

    driver = sqlalchemy.exc.OperationalError("INSERT INTO studies", {},
                                             Exception("attempt to write a readonly database"))
    try:
        try:
            raise driver
        except sqlalchemy.exc.OperationalError as exc:
            raise optuna.exceptions.StorageInternalError("An exception is raised during the commit. This typically "
                                                         "happens due to invalid data in the commit.") from exc
    except optuna.exceptions.StorageInternalError as wrapped:
        error = storage_failure("sqlite:///studies/autotune.db", wrapped)
    assert str(error) == ("cannot open storage sqlite:///studies/autotune.db: OperationalError: attempt to write a "
                          "readonly database")


def test_a_worker_says_autotune_s_warnings_in_one_line_as_the_driver_does(monkeypatch, capsys):
    # A journal's torn record on a full disk: the worker printed "/.../storage.py:254: UserWarning: ..." and the
    # source line, the driver "autotune: warning: ..." for the same record.
    import warnings

    import autotune.storage
    from autotune import _worker
    from autotune.exceptions import StorageError

    def read(path, storage=None):
        warnings.warn_explicit("s.journal: its last record was torn", UserWarning, autotune.storage.__file__, 254)
        raise StorageError("lost the storage s.journal")

    monkeypatch.setattr(_worker.SearchSettings, "read", read)
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)  # restored after the test
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        with pytest.raises(StorageError):
            _worker.main(["settings.json", "0", "5"])
    assert capsys.readouterr().err == "autotune: warning: s.journal: its last record was torn\n"


def test_a_worker_s_exit_status_says_how_it_ended(studies, monkeypatch, capsys):
    # The driver reads a worker's status: 0 finished its share, 2 an error of the user's to fix (said in one line),
    # 130 stopped with its trial marked; any other is "worker N exited C", and a search whose workers all failed
    # stops there. A mutant exiting 1 after a finished share (or 0 after an error) was seen by no test.
    from types import SimpleNamespace

    from autotune import _worker
    from tests.test_tuner import _Answering

    def finished(worker_index, **options):
        return Tuner("chmm", "cpu", "tiny", storage=str(studies / "s.journal"), seed=worker_index, runner=_Answering(),
                     **options)

    steps = []

    def failing(exc):
        def work(budget):
            steps.append("work")
            raise exc
        return lambda **options: SimpleNamespace(
            workload=SimpleNamespace(unit="items"), work=work, close=lambda: steps.append("close"),
            runner=SimpleNamespace(warm_up=lambda: steps.append("warm up") or 0.0))

    def refused(**options):
        raise AutotuneError("no such workload")

    # This process's handlers stay as they are: the worker's stop on SIGTERM is noted (test_stopping tests it).
    monkeypatch.setattr(_worker, "stop_on_sigterm", lambda: steps.append("stop on SIGTERM"))
    monkeypatch.setattr(_worker.warnings, "showwarning", _worker.warnings.showwarning)  # restored after the test
    exits, ran, cores = {}, {}, os.sched_getaffinity(0)
    monkeypatch.setenv(CPUS_ENV, str(min(cores)))  # the cores the driver gave it
    try:
        for name, tuner in [("finished", finished), ("refused", refused),
                            ("failed", failing(AutotuneError("lost it"))), ("stopped", failing(KeyboardInterrupt()))]:
            settings = SimpleNamespace(quiet=False, memory_budget_bytes=None, tuner=tuner)
            monkeypatch.setattr(_worker.SearchSettings, "read", lambda path, storage=None: settings)
            os.sched_setaffinity(0, cores)
            exits[name] = (_worker.main(["settings.json", "3", "2"]), capsys.readouterr())
            ran[name], steps[:] = (steps[:], os.sched_getaffinity(0)), []
    finally:
        os.sched_setaffinity(0, cores)
    exits["usage"] = (_worker.main(["settings.json"]), capsys.readouterr())
    assert {name: code for name, (code, _) in exits.items()} == {
        "finished": 0, "refused": 2, "failed": 2, "stopped": 130, "usage": 2}
    # Each keeps to its cores and takes SIGTERM as a stop before it makes a tuner; a tuner made warms its fork server
    # up before its work and is closed after it, however the work ends.
    assert {name: steps for name, (steps, _) in ran.items()} == {
        "finished": ["stop on SIGTERM"], "refused": ["stop on SIGTERM"],
        "failed": ["stop on SIGTERM", "warm up", "work", "close"], "stopped": ["stop on SIGTERM", "warm up", "work",
                                                                             "close"]}
    assert all(pinned == {min(cores)} for _, pinned in ran.values())
    assert len(counted(optuna.load_study(study_name="chmm-cpu-tiny", storage=open_storage(str(studies / "s.journal")))
                       .get_trials())) == 2
    # Its stdout is the driver's, where `search --json` writes its one object: a worker says everything on stderr.
    assert {name: out.out for name, (_, out) in exits.items()} == dict.fromkeys(exits, "")
    said = {name: out.err.strip().splitlines() for name, (_, out) in exits.items()}
    assert said["finished"][-1].startswith("[w3] ") and all(line.startswith("[w3] ") for line in said["finished"])
    assert said["refused"] == ["autotune: error: no such workload"] and said["failed"] == ["autotune: error: lost it"]
    assert said["stopped"] == ["[w3] autotune: stopped; its unfinished trial is marked in the study"]
    assert said["usage"] == ["usage: python -m autotune._worker SETTINGS INDEX BUDGET (started by `autotune search "
                             "--workers`)"]


def test_workers_get_their_own_devices(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # set on a GPU machine, it renumbers the GPUs
    plans, warning = plan_workers(4, [0, 1, 2, 3])
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in plans] == ["0", "1", "2", "3"] and warning is None
    plans, warning = plan_workers(2, None, cpus=[0, 1, 2, 3])
    assert [p.env[CPUS_ENV] for p in plans] == ["0,1", "2,3"] and warning is None
    plans, warning = plan_workers(4, None, cpus=[0, 1])
    assert all(CPUS_ENV not in p.env for p in plans) and "share them" in warning
    # Their trials run on their own cores, as the driver's line on the trials so far must count them.
    assert pinned_threads(plan_workers(2, None, cpus=[0, 1, 2, 3])[0]) == 2
    assert pinned_threads(plans) is None and pinned_threads(plan_workers(2, [0, 1])[0]) is None


def test_workers_under_a_cpu_quota_share_its_cores_not_the_machine_s(monkeypatch):
    # A 4-CPU quota on 8 cores: two workers were pinned to 4 cores each, and each trial took 4 threads (the
    # quota's), 8 in all, so the quota held them for half of every period.
    import autotune.workers as workers

    monkeypatch.setattr(workers, "_available_cpus", lambda: list(range(8)))
    monkeypatch.setattr(workers, "cpu_threads", lambda: 4)
    plans, warning = plan_workers(2, None)
    assert [p.env[CPUS_ENV] for p in plans] == ["0,1", "2,3"] and warning is None
    plans, warning = plan_workers(6, None)
    assert "6 workers on 4 cores share them" in warning


def test_one_worker_keeps_every_core_and_as_many_cores_as_workers_pins_one_each():
    plans, warning = plan_workers(1, None, cpus=[0, 1])
    assert [(p.index, p.env, p.description) for p in plans] == [(0, {}, "every core")] and warning is None
    assert pinned_threads(plans) is None  # its trials take the threads they are given, not a pinned count
    plans, warning = plan_workers(2, None, cpus=[0, 1])
    assert [(p.env[CPUS_ENV], p.description) for p in plans] == [("0", "cores 0-0"), ("1", "cores 1-1")]
    assert warning is None


def test_without_cpu_affinity_every_core_the_machine_counts_is_available(monkeypatch):
    import autotune.workers as workers

    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # macOS has none
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert workers._available_cpus() == [0, 1, 2]
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # the count unknown: one core, not none
    assert workers._available_cpus() == [0]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this system")
def test_a_worker_keeps_to_the_cores_it_was_given_and_one_given_none_to_all():
    show = "from autotune.workers import apply_cpu_pinning; import os; apply_cpu_pinning(); " \
           "print(sorted(os.sched_getaffinity(0)))"
    mine = sorted(os.sched_getaffinity(0))
    env = {k: v for k, v in os.environ.items() if k != CPUS_ENV}
    given = subprocess.run([sys.executable, "-c", show], env={**env, CPUS_ENV: str(mine[-1])}, capture_output=True,
                           text=True, timeout=60)
    assert given.stdout.strip() == f"[{mine[-1]}]", given.stderr
    unpinned = subprocess.run([sys.executable, "-c", show], env=env, capture_output=True, text=True, timeout=60)
    assert unpinned.stdout.strip() == str(mine), unpinned.stderr


FAKE_WORKER = """
import json, os, signal, sys, time
settings, index, budget = sys.argv[1:]
got = []
signal.signal(signal.SIGTERM, lambda *_: got.append("SIGTERM"))
seen = {"argv": [settings, index, budget], "own_session": os.getsid(0) == os.getpid(),
        "env": {k: os.environ.get(k) for k in ("EXTRA", "CUDA_VISIBLE_DEVICES", "AUTOTUNE_WORKER_CPUS")}}
open(os.path.join(os.environ["OUT"], "ready-" + index), "w").close()
deadline = time.time() + float(os.environ.get("WAIT", "0"))
while time.time() < deadline and not got:
    time.sleep(0.05)
seen["got"] = got
json.dump(seen, open(os.path.join(os.environ["OUT"], "seen-" + index), "w"))
sys.exit(3 + int(index))
"""


def _fake_workers(tmp_path):
    """A package whose ``autotune._worker`` notes what a worker was given: the one ``python -m`` imports from the
    working folder ``tmp_path/w`` (the driver's own autotune is imported already)."""
    fake = tmp_path / "w" / "autotune"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "_worker.py").write_text(FAKE_WORKER)
    return {"OUT": str(tmp_path)}


def test_each_worker_gets_its_plans_and_the_drivers_environment_in_a_session_of_its_own(tmp_path, monkeypatch):
    from autotune.workers import WorkerPlan, run_workers

    extra = _fake_workers(tmp_path)
    monkeypatch.chdir(tmp_path / "w")
    plans = [WorkerPlan(0, {"CUDA_VISIBLE_DEVICES": "5"}, "GPU 5"), WorkerPlan(1, {CPUS_ENV: "0"}, "cores 0-0")]
    said: list[str] = []
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    statuses = run_workers(tmp_path / "settings.json", 7, plans, said.append, env={**extra, "EXTRA": "the storage URL"})
    assert statuses == [3, 4]
    # Its stop signals forwarded to the workers while they ran, and the caller's own again once they are done.
    assert {s: signal.getsignal(s) for s in handlers} == handlers
    assert [re.sub(r"pid \d+", "pid N", line) for line in said] == ["worker 0 started (pid N, GPU 5)",
                                                                     "worker 1 started (pid N, cores 0-0)"]
    seen = [json.loads((tmp_path / f"seen-{i}").read_text()) for i in (0, 1)]
    assert [s["argv"] for s in seen] == [[str(tmp_path / "settings.json"), str(i), "7"] for i in (0, 1)]
    assert all(s["own_session"] for s in seen)  # a terminal's Ctrl-C reaches the driver alone, which stops them
    assert [s["env"] for s in seen] == [
        {"EXTRA": "the storage URL", "CUDA_VISIBLE_DEVICES": "5", "AUTOTUNE_WORKER_CPUS": None},
        {"EXTRA": "the storage URL", "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
         "AUTOTUNE_WORKER_CPUS": "0"}]


def test_a_stop_signal_to_the_driver_reaches_every_worker_and_the_driver_then_stops(tmp_path):
    # In a process of its own: the driver's signal handlers are the process's.
    script = """
import os, signal, sys, threading, time
from pathlib import Path
from autotune.workers import WorkerPlan, run_workers
out = Path(sys.argv[1])
def stop():
    while len(list(out.glob("ready-*"))) < 2:
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)
threading.Thread(target=stop, daemon=True).start()
os.chdir(out / "w")
start = time.time()
try:
    run_workers(out / "settings.json", 5, [WorkerPlan(0), WorkerPlan(1)], lambda line: None,
                env={"OUT": str(out), "WAIT": "30"})
except KeyboardInterrupt:
    print("stopped after", round(time.time() - start))
"""
    _fake_workers(tmp_path)
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=90,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert done.stdout.startswith("stopped after"), done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) < 20  # not the workers' own 30 s
    assert [json.loads((tmp_path / f"seen-{i}").read_text())["got"] for i in (0, 1)] == [["SIGTERM"], ["SIGTERM"]]


def test_passwords_are_masked():
    assert redact_storage("postgresql://u:pw@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redact_storage("studies/x.journal") == "studies/x.journal"
    # A URL SQLAlchemy cannot read (a port that is no number) is masked by hand: the user kept, the password not.
    assert redact_storage("postgresql://u:pw@h:port/db") == "postgresql://u:***@h:port/db"
    assert redact_storage("postgresql://h:port/db") == "postgresql://h:port/db"  # no password to mask
    assert redact_storage("postgresql://u@h:port/db") == "postgresql://u@h:port/db"
    # A password's "@" not written %40: SQLAlchemy took the password to end there and showed the rest,
    # "postgresql://u:***@ss@h/db".
    assert redact_storage("postgresql://u:p@ss@h/db") == "postgresql://u:***@h/db"
    assert redact_storage("mysql://u:a@b@c@h:1/db?x=y@z") == "mysql://u:***@h:1/db?x=y@z"


def test_a_storage_that_stops_answering_is_retried_then_stopped_cleanly():
    import sqlalchemy.exc

    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("server closed the connection"))
        return "ok"

    notes = []
    assert retrying(flaky, "taking a trial", "postgresql://u:pw@h/db", delays=(0, 0, 0), on_retry=notes.append) == "ok"
    assert len(calls) == 3 and len(notes) == 2

    def down():
        raise sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("connection refused"))

    with pytest.raises(Exception) as info:
        retrying(down, "taking a trial", "postgresql://u:pw@h/db", delays=(0, 0))
    message = str(info.value)
    assert "lost the storage postgresql://u:***@h/db while taking a trial" in message and "resume" in message
    with pytest.raises(ValueError):  # not a storage fault: no retry
        retrying(lambda: (_ for _ in ()).throw(ValueError("bug")), "x", "sqlite:///x")


@pytest.mark.parametrize("text", ["1,two", "1,-2", "nan", "inf", "1e300"])  # 1e300: OverflowError from sleep
def test_retry_delays_that_are_not_seconds_are_refused_when_the_storage_opens(tmp_path, monkeypatch, text):
    # Read only at the storage's first fault, a typo stopped the search then, in place of the retries it set;
    # a negative delay was a traceback from time.sleep.
    from autotune.exceptions import StorageError

    monkeypatch.setenv("AUTOTUNE_STORAGE_RETRY_DELAYS", text)
    with pytest.raises(StorageError, match=f"AUTOTUNE_STORAGE_RETRY_DELAYS={text!r} is not a list of seconds"):
        open_storage(f"sqlite:///{tmp_path / 'x.db'}")
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "sqlite:///:memory:"])
def test_a_sqlite_url_that_names_no_file_is_refused(tmp_path, monkeypatch, url):
    # sqlite:///:memory: ran a search whose study vanished with it (nothing to resume or report) and left a
    # ":memory:.lock" file behind; sqlite:// said "PosixPath('.') has an empty name".
    from autotune.exceptions import StorageError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorageError, match=f"{re.escape(url)} names no database file"):
        open_storage(url)
    with pytest.raises(StorageError, match=f"{re.escape(url)} names no database file"):
        BudgetLock(url, "s").searching().__enter__()  # a search takes this lock before it opens the storage
    with pytest.raises(AutotuneError, match=f"storage '{re.escape(url)}' is refused: it names no database file"):
        Tuner("chmm", "cpu", "tiny", storage=url)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url, said", [
    ("sqlite:/x.db", "lacks the '//' of a URL (as a journal file's path it is a file in a folder named 'sqlite:')"),
    ("postgresql:x", "lacks the '//' of a URL (as a journal file's path it is a file in a folder named 'postgresql:')"),
    ("sqlite://x.db", "is not an SQLite URL: sqlite:/// and the file's path"),
    ("sqlite:///sub/", "is a folder: name a database file in it"),
    ("sqlite:///sub", "is a folder: name a database file in it"),
    ("sub/", "is a folder: a journal is a file in one"),
    ("sub", "is a folder: a journal is a file in one"),
])
def test_a_storage_name_that_is_no_storage_is_refused_before_a_lock_file_is_written(tmp_path, monkeypatch, url, said):
    # sqlite:/x.db searched into a journal file x.db in a folder "sqlite:" that no report found; a folder left
    # "sub.search.lock" beside it before "unable to open database file".
    from autotune.exceptions import StorageError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    with pytest.raises(StorageError, match=re.escape(f"{url} {said}")):
        BudgetLock(url, "s").searching().__enter__()
    with pytest.raises(StorageError, match=re.escape(said)):
        open_storage(url)
    assert [p.name for p in tmp_path.iterdir()] == ["sub"] and not any((tmp_path / "sub").iterdir())
    for fine in ("sqlite:///sub/a.db?timeout=5", "sub/a.journal", "a:b.journal"):  # a path with a colon is a path
        assert storage_problem(fine) is None


def _search_and_kill_one_worker(tmp_path: Path, storage: str, workers: int, trials: int, extra: list[str]):
    """Run a shared search, SIGKILL one worker while it holds a running trial, and return what happened."""
    tag = f"workers-{os.getpid()}-{time.time()}"
    # The killed worker leaves its temporary folder behind: in tmp_path, not in the machine's /tmp.
    env = {**os.environ, "AUTOTUNE_STUDIES": str(tmp_path / "studies"), "AUTOTUNE_TEST_TAG": tag,
           "TMPDIR": str(tmp_path)}
    command = [sys.executable, "-m", "autotune", "search", "-w", STEADY, "-d", "cpu", "-n", str(trials),
               "--workers", str(workers), "--storage", storage, "--min-time", "0.3", "--remeasure-rounds", "1", *extra]
    driver = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids: dict[int, int] = {}
    lines: list[str] = []

    def read() -> None:
        for line in driver.stderr:
            lines.append(line)
            if "worker" in line and "started (pid" in line:
                index = int(line.split("worker ")[1].split()[0])
                pids[index] = int(line.split("pid ")[1].split(",")[0])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    out: list[str] = []
    out_reader = threading.Thread(target=lambda: out.extend(driver.stdout), daemon=True)
    out_reader.start()
    victim = workers - 1
    killed_trial = None
    deadline = time.time() + 120
    study = None
    while time.time() < deadline and killed_trial is None:
        time.sleep(0.05)
        if victim not in pids:
            continue
        try:
            study = study or optuna.load_study(study_name=STUDY, storage=open_storage(storage))
        except KeyError:
            continue
        done = [t for t in study.get_trials(deepcopy=False) if t.state.is_finished()]
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            owner = t.user_attrs.get("claimed") or {}
            # Mid-trial: its config drawn and being measured (a death before that is the dead-taker test's).
            if owner.get("pid") == pids[victim] and len(done) >= 3 and t.params:
                os.kill(pids[victim], signal.SIGKILL)
                killed_trial = t.number
                break
    wait_or_kill(driver, timeout=300, tag=tag)  # threads read both pipes: neither can fill and block the driver
    reader.join(timeout=10)
    out_reader.join(timeout=10)
    return driver.returncode, "".join(out), "".join(lines), killed_trial, tag


def _assert_recovered(storage: str, trials: int, killed_trial: int, tag: str, stdout: str, stderr: str, tmp_path: Path):
    assert killed_trial is not None, "no worker was caught mid-trial"
    study = optuna.load_study(study_name=STUDY, storage=open_storage(storage))
    every = study.get_trials(deepcopy=False)
    retried = {n for t in every for n in t.system_attrs.get("retry_history", ())}
    counted = [t for t in every if t.state.is_finished() and "status" in t.user_attrs and t.number not in retried
               and "duplicate_of" not in t.user_attrs and not t.user_attrs.get("lost")]
    assert len(counted) == trials, [(t.number, t.state, t.user_attrs.get("status")) for t in every]
    assert len({t.number for t in every}) == len(every)  # trial numbers are unique
    # The killed worker's trial failed, and was queued and measured once more (it counts once, as the retry).
    lost = next(t for t in every if t.number == killed_trial)
    assert lost.state == optuna.trial.TrialState.FAIL and retried == {killed_trial}
    retries = [t for t in every if t.system_attrs.get("failed_trial") == killed_trial]
    assert len(retries) == 1 and retries[0].user_attrs["status"] == "ok" and retries[0].params == lost.params
    assert not any(t.state in (optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.WAITING) for t in every)
    # The killed worker's fork server and trial went with it; the others stopped cleanly.
    assert tagged_processes(tag) == []
    # One export, and no password anywhere.
    exported = tmp_path / "studies" / "steady" / "cpu-tiny.json"
    assert exported.is_file() and "Best config" in stdout
    for text in (stdout, stderr, exported.read_text()):
        assert "s3cret-pw" not in text


@pytest.mark.slow  # 25 s; a killed worker's trial is covered by test_faults' process that died
def test_journal_file_two_workers_one_killed(tmp_path):
    storage = str(tmp_path / "studies" / "steady.journal")
    code, stdout, stderr, killed, tag = _search_and_kill_one_worker(tmp_path, storage, 2, 20, [])
    assert code == 0, stderr[-3000:]
    assert "worker 1 exited -9" in stderr and "the other workers finished all 20 trials" in stderr
    _assert_recovered(storage, 20, killed, tag, stdout, stderr, tmp_path)
    # The report reads the journal; the study that elected the exporter is not listed as a result.
    env = {"AUTOTUNE_STUDIES": str(tmp_path / "studies")}
    report = run_cli("report", "-w", STEADY, "-d", "cpu", "--storage", storage, "-o", "r.html", cwd=tmp_path, env=env)
    assert report.returncode == 0 and (tmp_path / "r.html").is_file(), report.stderr
    missing = run_cli("report", "-w", STEADY, "-d", "cpu", "--storage", storage, "--study", "x", cwd=tmp_path, env=env)
    assert "valid: steady-cpu-tiny." in missing.stderr and "@export" not in missing.stderr


@pytest.mark.postgres
@pytest.mark.slow  # 35 s; in the default run a dead taker is covered on SQLite (test_faults.py), not on PostgreSQL
def test_postgres_four_workers_forty_trials_one_killed_by_heartbeat(tmp_path, postgres_url):
    code, stdout, stderr, killed, tag = _search_and_kill_one_worker(
        tmp_path, postgres_url, 4, 40, ["--heartbeat", "1", "--grace-period", "3"])
    assert code == 0, stderr[-3000:]
    _assert_recovered(postgres_url, 40, killed, tag, stdout, stderr, tmp_path)
    document = json.loads((tmp_path / "studies" / "steady" / "cpu-tiny.json").read_text())
    assert document["study"]["storage"].startswith("postgresql://autotune:***@")


@pytest.mark.postgres
# 27 s alone (2026-11-27): with -m slow, to keep the default run under 10 minutes. The exporter's election and
# its beat across hosts keep unit tests in the default run (test_an_exporter_on_another_host_is_gone_...).
@pytest.mark.slow
def test_two_hosts_cooperate_and_only_one_exports(tmp_path, postgres_url):
    # Two drivers with the same command (as on two machines) share the study and its budget.
    env = {**os.environ, "AUTOTUNE_STUDIES": str(tmp_path / "studies")}
    command = [sys.executable, "-m", "autotune", "search", "-w", STEADY, "-d", "cpu", "-n", "10", "--study",
               "two-hosts", "--storage", postgres_url, "--min-time", "0.2", "--remeasure-rounds", "1"]
    hosts = [subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outputs = [host.communicate(timeout=300) for host in hosts]
    assert [host.returncode for host in hosts] == [0, 0], outputs
    exporters = [out for out, _ in outputs if "Best config" in out]
    assert len(exporters) == 1
    assert sum("another process re-measures and exports" in out for out, _ in outputs) == 1
    study = optuna.load_study(study_name="two-hosts", storage=open_storage(postgres_url))
    # The budget is what autotune counts (trials.counted): an ask skipped because the other host was measuring
    # that config, and a trial a retry replaced, are finished trials that were never counted. This test counted
    # every finished trial that was not a repeat, and one CI run (2026-11-26) found 11; 19 runs here found 10.
    # Its trials were not kept: a failure now shows them.
    measured = counted(study.trials)
    uncounted = [(t.number, t.state.name, t.user_attrs) for t in study.trials if t not in measured]
    assert len(measured) == 10, uncounted
    assert len({t.user_attrs["config_key"] for t in measured}) == 10  # no config measured twice


def test_a_bare_postgresql_url_names_the_installed_driver():
    from autotune.storage import with_installed_driver

    assert with_installed_driver("postgresql://u:pw@h/db") in ("postgresql+psycopg2://u:pw@h/db",
                                                             "postgresql+psycopg://u:pw@h/db")
    assert with_installed_driver("postgresql+psycopg2://u:pw@h/db") == "postgresql+psycopg2://u:pw@h/db"
    assert with_installed_driver("sqlite:///x.db") == "sqlite:///x.db"


def test_a_postgresql_url_without_a_driver_installed_says_what_to_install(monkeypatch):
    import importlib.util

    from autotune.exceptions import StorageError
    from autotune.storage import with_installed_driver

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name.startswith("psycopg") else found(name))
    with pytest.raises(StorageError, match=r"^no PostgreSQL driver is installed for --storage postgresql://\.\.\.: "
                                           r"pip install 'autotune\[postgres\]' \(psycopg2\) or psycopg$"):
        with_installed_driver("postgres://u:pw@h/db")


def test_workers_print_their_trials_use_the_threads_given_and_never_see_the_password(tmp_path):
    # --threads reaches every worker's trials, each worker prints its per-trial lines, and the
    # storage comes through the environment (a journal path here, checked on the command lines).
    storage = str(tmp_path / "studies" / "steady.journal")
    tag = f"threads-{os.getpid()}-{time.time()}"
    # A knob whose one choice needs torch.compile, on a CPU without the C++ compiler it needs: left out, and said.
    steady = Path(STEADY.split(":")[0])
    (tmp_path / "steady.py").write_text(steady.read_text())
    (tmp_path / "steady.yaml").write_text(steady.with_suffix(".yaml").read_text().replace(
        "defaults:\n", "  mode:\n    choices: [eager, compiled]\n    requires: {compiled: [compile]}\ndefaults:\n"
        "  mode: eager\n"))
    env = {**os.environ, "AUTOTUNE_STUDIES": str(tmp_path / "studies"), "AUTOTUNE_TEST_TAG": tag,
           "AUTOTUNE_STORAGE": storage, "CXX": str(tmp_path / "no-such-compiler")}
    workload = f"{tmp_path / 'steady.py'}:SteadyWorkload"
    command = [sys.executable, "-m", "autotune", "search", "-w", workload, "-d", "cpu", "-n", "6", "--workers", "2",
               "--threads", "1", "--min-time", "0.05", "--remeasure-rounds", "1"]
    driver = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    command_lines: set[str] = set()
    out: list[str] = []
    readers = [threading.Thread(target=lambda s=s: out.extend(s), daemon=True) for s in (driver.stdout, driver.stderr)]
    for reader in readers:
        reader.start()
    while driver.poll() is None:
        for process in tagged_processes(tag):
            try:
                command_lines.add(" ".join(process.cmdline()))
            except Exception:  # noqa: BLE001 - gone meanwhile
                pass
        time.sleep(0.1)
    wait_or_kill(driver, 180, tag)
    for reader in readers:
        reader.join(timeout=10)
    text = "".join(out)
    assert driver.returncode == 0, text[-3000:]
    assert any("autotune._worker" in c for c in command_lines)
    assert not any(storage in c for c in command_lines if "autotune._worker" in c)
    # Every trial has its per-trial line from the worker that ran it (a worker that started late may have none).
    trial_lines = re.findall(r"^\[w[01]\] \[ *\d+/\d+\] trial #", text, flags=re.MULTILINE)
    assert len(trial_lines) >= 6, text[-3000:]
    study = optuna.load_study(study_name=STUDY, storage=open_storage(storage))
    measured = [t for t in study.trials if "threads" in t.user_attrs]
    assert measured and {t.user_attrs["threads"] for t in measured} == {1}
    assert {t.user_attrs["config"]["mode"] for t in measured} == {"eager"}
    assert text.count("warning: mode=compiled left out of this search: torch.compile needs a C++ compiler") == 1, text
    # Before its workers start, the driver says which study and budget they share.
    assert re.search(rf"^autotune: study {STUDY} in {re.escape(storage)} \(.*\): budget 6 trials, 2 worker\(s\) "
                     "here$", text, flags=re.MULTILINE), text[-3000:]
    # The summary's time is the command's, the workers' trials included (it was the re-measurement's alone: 5 s
    # for a run of 40).
    said = float(re.search(r"measured by its workers; in the study: [^;]*; (\d+) s$", text, flags=re.MULTILINE)[1])
    first = min(t.datetime_start for t in study.trials if t.datetime_start).timestamp()
    exported = (tmp_path / "studies" / "steady" / "cpu-tiny.json").stat().st_mtime
    assert said >= exported - first - 0.5, (said, exported - first)  # rounded to whole seconds


_STOPPED_WORKERS = """
import sys
import optuna
from autotune import workers
from autotune.storage import STORAGE_ENV, open_storage
from tests.test_shared_study import _dead

def run_workers(settings, budget, plans, on_stage, env):
    # A worker stopped at an unlucky instant: its trial claimed and RUNNING, the worker gone, then Ctrl-C.
    study = optuna.load_study(study_name="steady-cpu-tiny", storage=open_storage(env[STORAGE_ENV]))
    study.ask().set_user_attr("claimed", _dead())
    raise KeyboardInterrupt

workers.run_workers = run_workers
from autotune.cli import main
main(sys.argv[1:])
"""


def test_a_shared_search_stopped_fails_the_trials_its_gone_workers_left_running(tmp_path):
    # Each worker releases its own trial as it stops; the driver's look after them is for one that could not.
    storage = str(tmp_path / "studies" / "steady.journal")
    done = subprocess.run([sys.executable, "-c", _STOPPED_WORKERS, "search", "-w", STEADY, "-d", "cpu", "-n", "4",
                           "--workers", "2", "--storage", storage, "--studies", str(tmp_path / "studies")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert done.returncode == 130 and "interrupted" in done.stderr, done.stderr[-3000:]
    trials = optuna.load_study(study_name=STUDY, storage=open_storage(storage)).trials
    # The baseline the gone worker took is failed as lost, not left RUNNING for a grace period; the defaults wait.
    assert [(t.user_attrs["role"], t.state.name, t.user_attrs.get("lost")) for t in trials] == [
        ("baseline", "FAIL", True), ("defaults", "WAITING", None)]


def test_a_killed_driver_takes_its_workers_along(tmp_path):
    storage = str(tmp_path / "studies" / "steady.journal")
    tag = f"orphans-{os.getpid()}-{time.time()}"
    # Killed outright, the driver leaves its temporary folders behind: in tmp_path, not in the machine's /tmp.
    env = {**os.environ, "AUTOTUNE_STUDIES": str(tmp_path / "studies"), "AUTOTUNE_TEST_TAG": tag,
           "TMPDIR": str(tmp_path)}
    # A budget that takes its workers minutes: with 200 trials, orphans left running (a mutant) finished them
    # within the minute waited for below, and the test passed.
    command = [sys.executable, "-m", "autotune", "search", "-w", STEADY, "-d", "cpu", "-n", "5000", "--workers", "2",
               "--storage", storage, "--min-time", "0.3"]
    driver = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(driver.stderr), daemon=True)
    reader.start()
    deadline = time.time() + 120
    while time.time() < deadline and sum("started (pid" in line for line in lines) < 2:
        time.sleep(0.1)
    assert sum("started (pid" in line for line in lines) == 2, "".join(lines)[-2000:]
    driver.kill()
    driver.wait(timeout=30)
    deadline = time.time() + 60
    while time.time() < deadline and tagged_processes(tag):
        time.sleep(0.2)
    left = tagged_processes(tag)
    for process in left:
        process.kill()
    assert left == []


def test_an_exporter_that_stopped_or_died_leaves_the_budget_to_be_resumed_to_its_export(tmp_path):
    # The elected exporter stopped in its first re-measurement round (or killed) left the budget marked exported:
    # the same command then measured --trials more configs before anything was exported, and a driver on the
    # same host finishing meanwhile said another process exported, though none would.
    import socket

    from autotune.shared_study import (EXPORTED, EXPORTER, NoLock, claim_budget, elect_exporter, exported,
                                       exporting)

    study = optuna.create_study(study_name="s", storage=open_storage(str(tmp_path / "s.journal")))
    lock, here = NoLock(), socket.gethostname()
    assert claim_budget(study, lock, 4, []) == 4
    assert elect_exporter(study, lock, 4) and exported(study, 4) and not elect_exporter(study, lock, 4)
    with pytest.raises(KeyboardInterrupt):
        with exporting(study, lock):
            raise KeyboardInterrupt  # a stop in the first round: the budget is given back
    assert not exported(study, 4) and study.user_attrs[EXPORTED] is None
    # Its trials done, the same command keeps the budget (to export it) rather than adding four more.
    def measured(trial):
        trial.set_user_attr("status", "ok")
        return float(trial.suggest_int("x", 0, 9))

    study.optimize(measured, n_trials=4)
    assert claim_budget(study, lock, 4, []) == 4
    assert elect_exporter(study, lock, 4)
    with exporting(study, lock):
        pass  # exported
    assert study.user_attrs[EXPORTER]["finished"] and exported(study, 4)
    assert claim_budget(study, lock, 4, []) == 8  # exported: the next run adds trials, as before
    # An exporter gone from this host (SIGKILL) is seen to be gone; one on another host, or unrecorded, is trusted.
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    for owner, trusted in [({"host": here, "pid": int(gone.stdout)}, False), ({"host": "elsewhere", "pid": 1}, True),
                           (None, True)]:
        study.set_user_attr(EXPORTED, 8)
        study.set_user_attr(EXPORTER, owner)
        assert exported(study, 8) is trusted and elect_exporter(study, lock, 8) is not trusted


def test_an_exporter_on_another_host_is_gone_once_its_beat_is_a_grace_period_old(tmp_path):
    # An exporter killed on another host (a database server's workers) kept its budget from being exported, ever:
    # only one on this host could be seen to be dead. Now it beats while it exports, as a worker's trial does.
    import threading

    from autotune.shared_study import EXPORTED, EXPORTER, NoLock, elect_exporter, exported, exporting

    study = optuna.create_study(study_name="s", storage=open_storage(str(tmp_path / "s.journal")))
    lock = NoLock()
    for beat, alive in [(time.time() - 5, True), (time.time() - 61, False), (None, True)]:  # None: it never beat
        owner = {"host": "elsewhere", "pid": 1, **({} if beat is None else {"beat": beat})}
        study.set_user_attr(EXPORTED, 8)
        study.set_user_attr(EXPORTER, owner)
        assert exported(study, 8, grace_period=60) is alive
        assert exported(study, 8) is alive  # no grace given: 60 s, the storage's default
        assert elect_exporter(study, lock, 8, grace_period=60) is not alive  # a gone one's budget is taken over
    # The elected exporter beats while it exports (here every second), and stops before it marks itself finished.
    assert elect_exporter(study, lock, 9, grace_period=60)
    threads = threading.active_count()
    with exporting(study, lock, heartbeat=1):
        first = study.user_attrs[EXPORTER]["beat"] if "beat" in study.user_attrs[EXPORTER] else None
        time.sleep(1.5)
        assert study.user_attrs[EXPORTER]["beat"] > (first or 0)
    assert study.user_attrs[EXPORTER]["finished"] and exported(study, 9, grace_period=1)
    # One whose beats stalled and whose budget another host took over does not write over the new exporter.
    assert elect_exporter(study, lock, 10)
    with exporting(study, lock, heartbeat=1):
        time.sleep(0.5)  # its first beat made
        taken = {"host": "elsewhere", "pid": 1, "beat": time.time()}
        study.set_user_attr(EXPORTER, taken)
        time.sleep(1.5)
        assert study.user_attrs[EXPORTER] == taken
    assert threading.active_count() == threads  # the beat's thread is gone


def test_an_exporter_another_host_name_marked_in_a_study_file_is_gone(tmp_path):
    # In a file for one machine (a journal, SQLite) no other host exports: a host name that changed (a container
    # of the job killed in its re-measurement and started anew) marked it, and the budget it never exported was
    # taken as exported, so the next run measured --trials more configs before it exported.
    from autotune.shared_study import EXPORTED, EXPORTER, NoLock, claim_budget, elect_exporter, exported

    class FileLock(NoLock):
        kind = "journal"

    study = optuna.create_study(study_name="s", storage=open_storage(str(tmp_path / "s.journal")))
    study.set_user_attr("trial_budget", 0)
    study.set_user_attr(EXPORTED, 0)
    study.set_user_attr(EXPORTER, {"host": "dead-container-1234", "pid": 1})
    assert exported(study, 0) and not exported(study, 0, one_machine=True)
    assert claim_budget(study, FileLock(), 5, []) == 0  # resumed to its export, not to 5 more configs
    assert elect_exporter(study, FileLock(), 0)


def test_the_elected_exporter_gives_the_budget_back_when_its_export_is_interrupted(tmp_path, monkeypatch):
    from autotune.shared_study import EXPORTED, EXPORTER
    from autotune.tuner import Tuner

    tuner = Tuner(STEADY, "cpu", "tiny", storage=str(tmp_path / "s.journal"), studies=tmp_path / "studies")
    try:
        assert tuner.claim_budget(2) == 2

        def interrupted(*args, **kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(tuner, "finish", interrupted)
        with pytest.raises(KeyboardInterrupt):
            tuner.finish_shared(2)
        assert tuner.open_study().user_attrs[EXPORTED] is None
        monkeypatch.setattr(tuner, "finish", lambda *args, **kwargs: "exported")
        assert tuner.finish_shared(2) == "exported" and tuner.finish_shared(2) is None
        assert tuner.open_study().user_attrs[EXPORTER]["finished"]
    finally:
        tuner.close()


@pytest.mark.slow  # 31 s; the default run has the exporter's rules (above) and the search's stop (test_faults)
def test_a_shared_search_stopped_in_its_first_re_measurement_round_resumes_to_the_export(tmp_path):
    tag = f"resume-export-{os.getpid()}"
    env = {"AUTOTUNE_STUDIES": str(tmp_path / "studies"), "AUTOTUNE_TEST_TAG": tag}
    args = ["search", "-w", STEADY, "-d", "cpu", "-n", "3", "--workers", "2", "--storage", str(tmp_path / "s.journal"),
            "--min-time", "0.3", "--remeasure-rounds", "2"]
    code, _, stderr = stop_when_said(args, "re-measuring round 1/2", cwd=tmp_path, env=env)
    assert code == 130 and "Run the same command again to resume" in stderr, stderr[-2000:]
    assert not (tmp_path / "studies" / "steady" / "cpu-tiny.json").exists()
    again = run_cli(*args, cwd=tmp_path, env=env, timeout=180)
    assert again.returncode == 0, again.stderr[-2000:]
    # The budget of 3 is resumed: no trial more, and the export is made.
    assert "budget 3 trials" in again.stderr and "Exported to" in again.stdout
    study = optuna.load_study(study_name=STUDY, storage=open_storage(str(tmp_path / "s.journal")))
    assert len(counted(study.trials)) == 3
    assert tagged_processes(tag) == []


@contextlib.contextmanager
def _search_lock_held(tmp_path: Path, storage: str, shared: bool):
    """Another process holding the study's search lock, as a lone search (or, ``shared``, a driver of workers)."""
    held = tmp_path / f"held-{time.monotonic_ns()}"
    code = ("import time; from pathlib import Path; from autotune.storage import BudgetLock\n"
            f"with BudgetLock({storage!r}, {STUDY!r}).searching(shared={shared}):\n"
            f"    Path({str(held)!r}).touch(); time.sleep(120)\n")
    holder = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        while not held.exists():
            assert holder.poll() is None and time.monotonic() < deadline, "the holder could not take the lock"
            time.sleep(0.05)
        yield
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_a_second_search_of_a_study_is_refused_while_one_runs_and_writes_nothing(tmp_path):
    # Two `autotune search` of one SQLite study at once (two terminals, a CI retry) each re-measured and exported:
    # the last one's winner was kept, a config 43x slower than the other's winner (chmm at tiny, this CPU).
    studies = tmp_path / "studies"
    with _search_lock_held(tmp_path, f"sqlite:///{studies / 'autotune.db'}", shared=False):
        done = run_cli("search", "-w", STEADY, "-d", "cpu", "-n", "2", cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"autotune: error: study '{STUDY}' in sqlite:///studies/autotune.db is being searched by another "
        "autotune process now (one stopped with Ctrl-Z too); two at once would time their configs beside each "
        "other's, and each export its own winner: wait for it to end, or share the study as workers (--workers, on "
        "a journal file or PostgreSQL)"]
    assert not (studies / "autotune.db").exists() and not (studies / "steady").exists()


@pytest.mark.parametrize("holder_shared, shared, refused", [
    (True, False, True),  # workers run: a lone search is refused
    (False, True, True),  # a lone search runs: workers are refused
    (True, True, False),  # workers beside workers: they share the study's budget
])
def test_workers_and_a_lone_search_exclude_each_other(tmp_path, holder_shared, shared, refused):
    from autotune.exceptions import AutotuneError
    from autotune.tuner import Tuner

    journal = str(tmp_path / "steady.journal")
    tuner = Tuner(STEADY, "cpu", storage=journal, studies=tmp_path / "studies", measurer={"min_time": 0.01})
    try:
        with _search_lock_held(tmp_path, journal, holder_shared):
            if refused:
                with pytest.raises(AutotuneError, match="is being searched by another autotune process now"):
                    tuner.claim_budget(1) if shared else tuner.search(1)
            else:
                assert tuner.claim_budget(1) == 1
    finally:
        tuner.close()
    if shared:  # released by close: another process takes it alone
        with _search_lock_held(tmp_path, journal, shared=False):
            pass


def test_a_search_releases_the_study_when_it_ends(tmp_path):
    from autotune.tuner import Tuner

    storage = f"sqlite:///{tmp_path / 'studies' / 'autotune.db'}"
    tuner = Tuner(STEADY, "cpu", studies=tmp_path / "studies", measurer={"min_time": 0.01}, remeasure_rounds=1)
    try:
        tuner.search(1)
    finally:
        tuner.close()
    with _search_lock_held(tmp_path, storage, shared=False):  # this process's lock is gone: another takes it
        pass


@pytest.mark.postgres
def test_a_lone_search_is_refused_while_workers_run_on_postgresql(tmp_path, postgres_url):
    from autotune.exceptions import AutotuneError
    from autotune.tuner import Tuner

    tuner = Tuner(STEADY, "cpu", storage=postgres_url, studies=tmp_path / "studies", measurer={"min_time": 0.01})
    try:
        with _search_lock_held(tmp_path, postgres_url, shared=True):  # a session's advisory lock
            with pytest.raises(AutotuneError, match="is being searched by another autotune process now"):
                tuner.search(1)
            assert tuner.claim_budget(1) >= 1  # workers beside workers
    finally:
        tuner.close()
    with _search_lock_held(tmp_path, postgres_url, shared=False):  # unlocked by close: another takes it alone
        pass


def test_a_file_system_that_takes_no_lock_is_said_in_one_line(tmp_path, monkeypatch):
    # A network file system without its lock service: every search failed with "OSError: [Errno 37] No locks
    # available" alone. A lock held by another process still raises as before (the search says it is busy).
    import errno
    import fcntl

    from autotune.exceptions import StorageError

    def no_locks(*args, **kwargs):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    monkeypatch.setattr(fcntl, "lockf", no_locks)
    said = ": No locks available (a network file system without file locks?); keep the studies on a local disk"
    url = f"sqlite:///{tmp_path}/s.db"
    for take in (lambda: BudgetLock(url, "s").searching().__enter__(), lambda: BudgetLock(url, "s").held().__enter__(),
                 lambda: open_storage(url)):
        with pytest.raises(StorageError, match=re.escape(said)):
            take()

    def busy(*args, **kwargs):
        raise BlockingIOError(errno.EAGAIN, "busy")

    monkeypatch.setattr(fcntl, "lockf", busy)
    with pytest.raises(AutotuneError, match="is being searched by another autotune process now"):
        BudgetLock(url, "s").searching().__enter__()


def test_a_journal_on_a_file_system_that_makes_no_symbolic_link_is_said_in_one_line(tmp_path, monkeypatch):
    # Optuna's journal lock is a symbolic link beside the file: on a FAT or SMB mount the search said "cannot open
    # storage s.journal: PermissionError: [Errno 1] Operation not permitted", read as the file's permissions.
    import errno

    from autotune.exceptions import StorageError

    def no_links(*args, **kwargs):
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(os, "symlink", no_links)
    journal = str(tmp_path / "s.journal")
    with pytest.raises(StorageError, match=r"cannot lock the journal .*s\.journal: Operation not permitted \(its lock "
                                           r"is a symbolic link beside it, which this file system cannot make"):
        optuna.create_study(study_name="s", storage=open_storage(journal))

    def failing(*args, **kwargs):  # another fault of the disk is its own, not a file system without links
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "symlink", failing)
    with pytest.raises(OSError, match=r"^\[Errno 5\] Input/output error$") as failed:
        optuna.create_study(study_name="s", storage=open_storage(journal))
    assert not isinstance(failed.value, StorageError)
