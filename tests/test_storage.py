"""Where studies live (autotune.storage) in small pieces: heartbeats and their grace period, the retries' waits and
words, tables created once, a process told from a later one with its pid, and the locks' folders. Workers sharing a
study through it are test_workers' and test_faults'."""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import optuna
import pytest
import sqlalchemy
import sqlalchemy.exc

from autotune import storage
from autotune.exceptions import StorageError
from autotune.limits import MAX_SECONDS
from autotune.storage import (BudgetLock, check_heartbeat, open_storage, owner_alive, pid_alive, process_start,
                              retrying, storage_failure, worker_identity)
from tests.conftest import until


def test_a_grace_period_of_twice_the_heartbeat_is_allowed_and_a_second_less_is_not():
    check_heartbeat(10, 20)
    check_heartbeat(None, 1)  # no heartbeats: no grace period to keep
    with pytest.raises(StorageError, match=r"^--grace-period 19 is under twice --heartbeat 10: .* use --grace-period "
                                           r"20 or more$"):
        check_heartbeat(10, 19)
    check_heartbeat(30, None)  # the default grace period, 60 s
    with pytest.raises(StorageError, match=r"^--grace-period 60 is under twice --heartbeat 31"):
        check_heartbeat(31, None)


def test_retry_delays_may_be_zero_fractions_or_the_longest_wait(monkeypatch, tmp_path):
    monkeypatch.setenv("AUTOTUNE_STORAGE_RETRY_DELAYS", f"0, 0.5,{MAX_SECONDS}")
    assert storage._retry_delays() == (0.0, 0.5, float(MAX_SECONDS))
    for over in ("-0.5", str(MAX_SECONDS * 2)):
        monkeypatch.setenv("AUTOTUNE_STORAGE_RETRY_DELAYS", over)
        with pytest.raises(StorageError, match="is not a list of seconds"):
            storage._retry_delays()
    # Refused as the storage opens, nothing written: not at its first fault, where the retries were wanted.
    with pytest.raises(StorageError, match="is not a list of seconds"):
        storage.open_storage(str(tmp_path / "new" / "s.journal"))
    assert list(tmp_path.iterdir()) == []
    monkeypatch.delenv("AUTOTUNE_STORAGE_RETRY_DELAYS")
    assert storage._retry_delays() == storage.RETRY_DELAYS


def _wrapped(cause: BaseException, explicit: bool) -> optuna.exceptions.StorageInternalError:
    """Optuna's wrapper of a driver's error, raised ``from`` it or while handling it (its context only)."""
    try:
        try:
            raise cause
        except type(cause) as exc:
            if explicit:
                raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") from exc
            raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.")
    except optuna.exceptions.StorageInternalError as wrapped:
        return wrapped


def test_a_storage_that_cannot_be_opened_says_the_driver_s_error_once_in_at_most_400_characters():
    said = StorageError("cannot open storage x: already said")
    assert storage_failure("sqlite:///x.db", said) is said  # not wrapped in a second "cannot open storage"
    context_only = _wrapped(OSError(28, "No space left on device"), explicit=False)
    assert str(storage_failure("s.journal", context_only)) == ("cannot open storage s.journal: OSError: [Errno 28] "
                                                               "No space left on device")
    own = ValueError("a bad value")  # another error with a cause is its own: only Optuna's wrapper hides its cause
    own.__cause__ = OSError("disk")
    assert str(storage_failure("s.journal", own)) == "cannot open storage s.journal: ValueError: a bad value"
    long = storage_failure("s.journal", RuntimeError("x" * 1000))
    assert len(str(long)) == 400 and str(long).startswith("cannot open storage s.journal: RuntimeError: xxx")


@pytest.mark.parametrize("url", ["journal:///tmp/j.log", "redis://localhost:6379", "postgresql+nodriver://u@h/d"])
def test_a_url_of_no_database_sqlalchemy_knows_says_which_storages_there_are(url):
    # A user who guessed `journal://` for a journal read "NoSuchModuleError: Can't load plugin:
    # sqlalchemy.dialects:journal", which names neither the mistake nor what to write.
    with pytest.raises(sqlalchemy.exc.NoSuchModuleError) as raised:
        open_storage(url)
    scheme = url.partition("://")[0]
    assert str(storage_failure(url, raised.value)) == (
        f"cannot open storage {url}: '{scheme}' is no database SQLAlchemy knows; give a journal file's path "
        "(studies/chmm.journal), sqlite:///studies/autotune.db, or postgresql://USER@HOST/DATABASE")


@pytest.mark.parametrize("line, words", [
    ("(psycopg2.OperationalError) could not connect", "could not connect"),
    ("(driver) said a) b", "said a) b"),  # the driver's words from the first ") " on
    ("(no closing", "(no closing"),
    ("f(a) b", "f(a) b"),  # a ") " not after a leading "(" is the words' own
    ("\n  \nsecond line first\nthird", "second line first"),
])
def test_the_words_of_an_error_are_its_first_line_without_sqlalchemy_s_driver_name(line, words):
    assert storage._words(Exception(line)) == words


def test_a_journal_and_an_sqlite_file_are_made_in_folders_that_do_not_exist_yet(tmp_path):
    journal = tmp_path / "a" / "b" / "s.journal"
    open_storage(str(journal)).create_new_study([optuna.study.StudyDirection.MAXIMIZE], "s")
    assert journal.stat().st_size > 0
    db = tmp_path / "c" / "d" / "s.db"
    open_storage(f"sqlite:///{db}").create_new_study([optuna.study.StudyDirection.MAXIMIZE], "s")
    assert db.stat().st_size > 0


def _tables(db: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(db)) as connection:
        return [name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]


def test_a_report_reads_an_sqlite_file_without_creating_optuna_s_tables_in_it(tmp_path):
    db = tmp_path / "other.db"
    sqlite3.connect(db).close()  # a database of something else, or none yet
    with pytest.raises(optuna.exceptions.StorageInternalError):  # "no such table" (a report says it has no study)
        open_storage(f"sqlite:///{db}", read_only=True)
    assert _tables(db) == []
    open_storage(f"sqlite:///{db}")  # a search's creates them
    assert "studies" in _tables(db)
    assert isinstance(open_storage(f"sqlite:///{db}", read_only=True), optuna.storages.RDBStorage)


@pytest.mark.postgres
def test_a_report_reads_a_database_server_without_creating_optuna_s_tables_in_it(postgres_url):
    # As on an SQLite file: a report pointed at another project's database is no reason to write into it.
    url = sqlalchemy.engine.make_url(storage.with_installed_driver(postgres_url))
    other = url.set(database=f"other_{os.getpid()}")
    admin = sqlalchemy.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f"CREATE DATABASE {other.database}")
        with pytest.raises(optuna.exceptions.StorageInternalError):
            open_storage(other.render_as_string(hide_password=False), read_only=True)
        engine = sqlalchemy.create_engine(other)
        assert sqlalchemy.inspect(engine).get_table_names() == []
        engine.dispose()
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {other.database} WITH (FORCE)")
        admin.dispose()


@pytest.mark.postgres
def test_heartbeats_on_a_server_beat_at_the_interval_given_with_its_grace_period_and_one_retry(postgres_url):
    plain = open_storage(postgres_url)
    assert plain.get_heartbeat_interval() is None
    with warnings.catch_warnings():  # Optuna's words that heartbeats are experimental: open_storage's to keep
        warnings.simplefilter("error", optuna.exceptions.ExperimentalWarning)
        beating = open_storage(postgres_url, heartbeat=3)
        assert beating.get_heartbeat_interval() == 3 and beating.grace_period == storage.DEFAULT_GRACE_PERIOD
        retry = beating.get_heartbeat_stale_trial_callback()
        assert isinstance(retry, optuna.storages.RetryHeartbeatStaleTrialCallback) and retry._max_retry == 1
        assert open_storage(postgres_url, heartbeat=3, grace_period=7).grace_period == 7


@pytest.mark.postgres
def test_two_holders_of_a_study_s_budget_lock_on_postgresql_take_it_in_turn(postgres_url):
    # A worker reads the budget and takes its trial under this lock: two at once could each take the last trial.
    first, second, order = BudgetLock(postgres_url, "s"), BudgetLock(postgres_url, "s"), []

    def take_it_second():
        with second.held():
            order.append("second")

    with first.held():
        waiting = threading.Thread(target=take_it_second, daemon=True)
        waiting.start()
        time.sleep(1.0)  # time to reach the lock, and wait there
        order.append("first, let go")
    waiting.join(timeout=30)  # let go at the block's end (the session stays open in its engine's pool)
    assert order == ["first, let go", "second"]


def _creating(failures: list[BaseException]):
    """A table creation that raises ``failures`` in turn, then succeeds; the calls it took."""
    calls = []

    def make():
        calls.append(1)
        if len(calls) <= len(failures):
            raise failures[len(calls) - 1]
        return "tables"
    return make, calls


def _raced(words: str) -> sqlalchemy.exc.OperationalError:
    return sqlalchemy.exc.OperationalError("CREATE TABLE studies", {}, Exception(words))


def test_tables_another_process_was_creating_are_tried_four_times_a_longer_wait_each(monkeypatch):
    slept = []
    monkeypatch.setattr(storage.time, "sleep", slept.append)
    races = [_raced("table studies already exists"), sqlalchemy.exc.IntegrityError("INSERT", {}, Exception(
        'duplicate key value violates unique constraint "pg_type_typname_nsp_index"')),
        _raced("UNIQUE constraint failed: alembic_version.version_num")]
    make, calls = _creating(races)
    assert storage._created_once(make) == "tables" and len(calls) == 4 and slept == [0.5, 1.0, 1.5]
    slept.clear()
    make, calls = _creating([*races, _raced("table studies already exists")])
    with pytest.raises(sqlalchemy.exc.OperationalError, match="already exists"):
        storage._created_once(make)
    assert len(calls) == 4 and slept == [0.5, 1.0, 1.5]
    slept.clear()
    make, calls = _creating([_raced("unable to open database file")])  # no race: said at once
    with pytest.raises(sqlalchemy.exc.OperationalError, match="unable to open"):
        storage._created_once(make)
    assert len(calls) == 1 and slept == []


def _start_field(pid: int, words_in_name: int = 1) -> str:
    """The 22nd field of /proc/PID/stat (the start, in clock ticks since boot) counted as ``man proc`` counts it,
    for a process whose name is ``words_in_name`` words."""
    return Path(f"/proc/{pid}/stat").read_text().split()[21 + words_in_name - 1]


@pytest.fixture
def odd_python(tmp_path) -> Path:
    """Python as a program named "sl) p": /proc/PID/stat shows it "(sl) p)", where only the last ")" ends the name."""
    odd = tmp_path / "sl) p"
    odd.write_bytes(Path(sys.executable).read_bytes())
    odd.chmod(0o755)
    return odd


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="no /proc here")
def test_a_process_start_is_its_boot_and_start_tick_even_where_its_name_holds_a_parenthesis(odd_python):
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert process_start(os.getpid()) == f"{boot}:{_start_field(os.getpid())}"
    child = subprocess.Popen([str(odd_python), "-c", "import time; time.sleep(60)"])
    try:
        until(lambda: "(sl) p)" in Path(f"/proc/{child.pid}/stat").read_text(), 30)  # it runs as itself, past fork
        assert process_start(child.pid) == f"{boot}:{_start_field(child.pid, words_in_name=2)}"
    finally:
        child.kill()
        child.wait(timeout=60)
    assert process_start(child.pid) is None  # gone


def test_a_worker_is_alive_while_its_pid_runs_with_the_start_it_recorded(monkeypatch):
    me = worker_identity()
    assert me == {"host": socket.gethostname(), "pid": os.getpid(),
                  **({"started": process_start(os.getpid())} if Path("/proc/self/stat").exists() else {})}
    with monkeypatch.context() as patch:  # where a start cannot be read (no /proc), none is recorded, not None
        patch.setattr(storage, "process_start", lambda pid: None)
        assert "started" not in worker_identity()
    assert owner_alive(me) and owner_alive({"pid": me["pid"]})  # a start not recorded: the pid alone says
    if "started" in me:
        assert not owner_alive({**me, "started": "another-boot:1"})  # a later process given the pid
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=60)
    assert not owner_alive({"pid": gone.pid})


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="no /proc here")
def test_a_zombie_is_dead_and_a_process_whose_state_cannot_be_read_is_alive(monkeypatch, odd_python):
    zombie = subprocess.Popen([str(odd_python), "-c", "pass"])  # its state follows the last ")"
    try:
        assert until(lambda: Path(f"/proc/{zombie.pid}/stat").read_text().startswith(f"{zombie.pid} (sl) p) Z "),
                     30), "the child never exited"
        assert not pid_alive(zombie.pid)
    finally:
        zombie.wait(timeout=60)

    def unreadable(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(storage, "open", unreadable, raising=False)  # a /proc mounted hidepid=2
    assert pid_alive(os.getpid())


def test_a_process_of_another_user_is_alive(monkeypatch):
    def not_ours(pid, signal):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(storage.os, "kill", not_ours)
    assert pid_alive(1)


def test_the_locks_of_a_study_in_a_folder_not_made_yet_make_it(tmp_path):
    journal = tmp_path / "a" / "b" / "s.journal"
    with BudgetLock(str(journal), "s").searching():
        assert Path(f"{journal}.search.lock").exists()
    budget = tmp_path / "c" / "d" / "s.journal"
    with BudgetLock(str(budget), "s").held():
        assert Path(f"{budget}.budget.lock").exists()


def test_a_server_other_than_postgresql_takes_no_lock_and_is_never_connected_to():
    lock = BudgetLock("mysql://u:pw@127.0.0.1:1/db", "s")  # nothing listens on port 1
    with lock.held(), lock.searching():
        pass
    assert lock._engine is None


def test_optuna_s_wrapper_alone_is_a_storage_that_stopped_answering_and_each_retry_is_counted():
    calls, said = [], []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.")
        return "ok"

    assert retrying(flaky, "taking a trial", "s.journal", delays=(0, 0), on_retry=said.append) == "ok"
    assert said == [f"storage not answering while taking a trial (StorageInternalError: An exception is raised "
                    f"during the commit.); retry {n}/2 in 0 s" for n in (1, 2)]


def test_a_lost_storage_names_the_driver_s_error_in_at_most_300_characters_however_it_was_wrapped():
    for wrapped in (_wrapped(OSError(28, "No space left on device"), explicit=True),
                    _wrapped(OSError(28, "No space left on device"), explicit=False)):
        with pytest.raises(StorageError, match=r"while recording a trial \(OSError: \[Errno 28\] No space left on "
                                               r"device\), after 1 retries"):
            retrying(lambda: (_ for _ in ()).throw(wrapped), "recording a trial", "s.journal", delays=(0,))
    with pytest.raises(StorageError) as info:
        retrying(lambda: (_ for _ in ()).throw(OSError("y" * 1000)), "recording a trial", "s.journal", delays=())
    assert f"(OSError: {'y' * 291}), after 0 retries" in str(info.value)


def test_a_lock_file_read_only_to_this_user_beside_a_study_is_said_before_anything_is_written(tmp_path, monkeypatch):
    from autotune.storage import check_writable

    journal = tmp_path / "s.journal"
    Path(f"{journal}.budget.lock").touch()
    check_writable(str(journal))
    # Root may write any file: this user is told the budget's lock file is not theirs to write.
    monkeypatch.setattr(storage.os, "access", lambda path, mode: not str(path).endswith(".budget.lock"))
    with pytest.raises(StorageError, match=r"s\.journal\.budget\.lock is read-only to this user"):
        check_writable(str(journal))
    assert not journal.exists()
