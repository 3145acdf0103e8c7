"""Where studies live, and what lets several workers share one.

A ``--storage`` value is one of:

* an SQLAlchemy URL: ``sqlite:///path.db`` (the single-process default; SQLite
  locks under concurrent writers, so several workers are refused on it) or a
  database server, ``postgresql://user:password@host/db`` (several hosts);
* a file path with no ``://``: an Optuna journal file, for several workers on
  one machine without a database server (the file optuna-dashboard reads).

Workers on a server database record heartbeats; a trial whose worker stopped
beating for the grace period is failed and queued once more. A journal file
has no heartbeats, so a worker fails the running trials of dead processes on
its own host instead. :class:`BudgetLock` makes "is there trial budget left?
then take a trial" one step across every worker: a PostgreSQL advisory lock
(the server drops it when the holder's connection dies) or ``flock`` on a file
beside the journal (the kernel drops it when the holder dies).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import math
import os
import socket
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from autotune.exceptions import AutotuneError, StorageError
from autotune.journal import mending_journal
from autotune.limits import MAX_SECONDS
from autotune.storage_names import redact_storage, same_storage, sqlite_path, storage_kind, storage_problem

__all__ = [
    "BudgetLock",
    "DEFAULT_GRACE_PERIOD",
    "DEFAULT_HEARTBEAT",
    "STORAGE_ENV",
    "check_heartbeat",
    "check_writable",
    "open_storage",
    "owner_alive",
    "process_start",
    "redact_storage",
    "retrying",
    "same_storage",
    "storage_failure",
    "storage_kind",
    "study_file",
    "user_storage",
    "with_installed_driver",
    "worker_identity",
]

#: Environment variable read for --storage when the option is not given: a URL
#: with a password stays off command lines, where `ps` shows it to every user.
STORAGE_ENV = "AUTOTUNE_STORAGE"

#: Seconds between a worker's heartbeats, and without one before its trial is stale.
DEFAULT_HEARTBEAT = 10
DEFAULT_GRACE_PERIOD = 60


def check_heartbeat(heartbeat: int | None, grace_period: int | None) -> None:
    """A grace period at least twice the heartbeat (Optuna's own default ratio): a shorter one would take a live
    worker, between two of its beats or with one a moment late, for dead, and re-run its trial beside it."""
    grace = grace_period or DEFAULT_GRACE_PERIOD
    if heartbeat and grace < 2 * heartbeat:
        raise StorageError(f"--grace-period {grace} is under twice --heartbeat {heartbeat}: a live worker beats every "
                           f"{heartbeat} s and would be taken for dead; use --grace-period {2 * heartbeat} or more")


#: Waits between attempts when the storage stops answering mid-study (then a clean stop);
#: AUTOTUNE_STORAGE_RETRY_DELAYS="1,2,4" sets others (a flaky network may want longer).
RETRY_DELAYS = (1.0, 2.0, 4.0, 8.0, 16.0)


def _retry_delays() -> tuple[float, ...]:
    text = os.environ.get("AUTOTUNE_STORAGE_RETRY_DELAYS")
    if not text:
        return RETRY_DELAYS
    try:
        delays = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        delays = (math.nan,)
    if not all(0 <= delay <= MAX_SECONDS for delay in delays):  # 1e300 was an OverflowError from time.sleep
        raise StorageError(f"AUTOTUNE_STORAGE_RETRY_DELAYS={text!r} is not a list of seconds, e.g. 1,2,4, each at "
                           f"most {MAX_SECONDS:,}")
    return delays


T = TypeVar("T")


def user_storage(storage: str) -> str:
    """``storage`` as a user gave it: a journal's ``~`` is the home folder (a quoted ``"~/s.journal"`` in
    ``$AUTOTUNE_STORAGE`` made a folder named ``~``), and an SQLite file's (``sqlite:///~/s.db`` made ``./~/s.db``,
    which no search run elsewhere found); any other URL as it is."""
    if storage_kind(storage) == "journal":
        return str(Path(storage).expanduser())
    sqlite = "sqlite:///"
    return sqlite + str(Path(storage[len(sqlite):]).expanduser()) if storage.startswith(sqlite + "~") else storage


def storage_failure(storage: str, exc: BaseException) -> StorageError:
    """One line for a storage that cannot be opened: the masked URL and the driver's first line, said once."""
    if isinstance(exc, StorageError):
        return exc
    exc = _driver_error(exc)
    said = f"{type(exc).__name__}: {_words(exc)}"
    if type(exc).__name__ == "NoSuchModuleError":  # journal://, redis://: "Can't load plugin: sqlalchemy.dialects:..."
        said = (f"'{storage.partition('://')[0]}' is no database SQLAlchemy knows; give a journal file's path "
                "(studies/chmm.journal), sqlite:///studies/autotune.db, or postgresql://USER@HOST/DATABASE")
    return StorageError(f"cannot open storage {redact_storage(storage)}: {said}"[:400])


def _driver_error(exc: BaseException) -> BaseException:
    """The error a driver raised, where Optuna wrapped it: its StorageInternalError says "invalid data in the
    commit, e.g. exceeding max length" whatever the cause (a full disk, a database read-only to this user)."""
    cause = exc.__cause__ or exc.__context__
    return cause if type(exc).__name__ == "StorageInternalError" and cause is not None else exc


def _words(exc: BaseException) -> str:
    """The first line of an error, the driver's own words where SQLAlchemy wrapped them."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return first.split(") ", 1)[1] if first.startswith("(") and ") " in first else first


def with_installed_driver(storage: str) -> str:
    """``postgresql://...`` with the PostgreSQL driver that is installed named in it.

    SQLAlchemy 2.1 reads a bare ``postgresql://`` as psycopg 3, while the
    ``postgres`` extra (and most systems) have psycopg2: a bare URL then
    fails with "Failed to import DB access module". Any driver named
    explicitly (``postgresql+psycopg2://``) is kept as it is.
    """
    import importlib.util

    head, sep, tail = storage.partition("://")
    if not sep or head not in ("postgresql", "postgres"):
        return storage
    for module, driver in (("psycopg", "psycopg"), ("psycopg2", "psycopg2")):
        if importlib.util.find_spec(module) is not None:
            return f"postgresql+{driver}://{tail}"
    raise StorageError("no PostgreSQL driver is installed for --storage postgresql://...: "
                       "pip install 'autotune[postgres]' (psycopg2) or psycopg")


def open_storage(storage: str, heartbeat: int | None = None, grace_period: int | None = None,
                 read_only: bool = False) -> Any:
    """An Optuna storage object for ``storage``; heartbeats on server databases when ``heartbeat`` is set.

    ``read_only`` (reports) never creates Optuna's tables in a database that has none.
    """
    import optuna

    _retry_delays()  # a bad value is an error now, not at the storage's first fault in place of its retries
    check_named(storage)
    kind = storage_kind(storage)
    if kind == "journal":
        from optuna.storages.journal import JournalStorage

        path = Path(storage)
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(mending_journal(path))
    if kind == "sqlite":
        path = sqlite_path(storage)
        if read_only:
            return optuna.storages.RDBStorage(storage, skip_table_creation=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Two searches creating one new database at once would both create its tables
        # (an IntegrityError on alembic_version): the creation is serialised. A process
        # that is not autotune takes no lock (Optuna itself, a script polling the study):
        # one creating the tables at that instant is waited out too.
        with open(path.with_name(path.name + ".lock"), "a") as lock:
            _lock(lambda: fcntl.flock(lock, fcntl.LOCK_EX), lock.name)
            return _created_once(lambda: optuna.storages.RDBStorage(storage))
    storage = with_installed_driver(storage)
    if heartbeat is None:
        return _created_once(lambda: optuna.storages.RDBStorage(storage, engine_kwargs={"pool_pre_ping": True},
                                                                skip_table_creation=read_only))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1)
        return _created_once(lambda: optuna.storages.RDBStorage(
            storage,
            engine_kwargs={"pool_pre_ping": True},
            heartbeat_interval=heartbeat,
            grace_period=grace_period or DEFAULT_GRACE_PERIOD,
            # A trial whose worker died is queued once more; a second death ends it as failed.
            heartbeat_stale_trial_callback=retry,
        ))


def _created_once(make: Callable[[], T], attempts: int = 4) -> T:
    """``make()``, again after a moment when another process was creating the same tables at that instant.

    Two hosts opening one new database at once both create Optuna's tables;
    the loser's CREATE fails on a duplicate name (PostgreSQL's pg_type;
    SQLite's "table studies already exists", an OperationalError, or its
    alembic_version row), and on its next try the tables are simply there.
    """
    import sqlalchemy.exc

    for attempt in range(attempts):
        try:
            return make()
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError, sqlalchemy.exc.OperationalError) as exc:
            racing = any(sign in str(exc) for sign in ("already exists", "duplicate key", "UNIQUE constraint failed"))
            if not racing or attempt == attempts - 1:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def worker_identity() -> dict[str, Any]:
    """Who runs a trial: recorded on it so that a dead worker's trial can be found (its start tells it from a later
    process given the same pid)."""
    started = process_start(os.getpid())
    return {"host": socket.gethostname(), "pid": os.getpid(), **({"started": started} if started else {})}


def process_start(pid: int) -> str | None:
    """When process ``pid`` started, as this boot of the kernel counts it ("BOOT-ID:TICKS"); None where ``/proc``
    does not say. A container restarted gives its first process the pid its last one had (1, say)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        with open(f"/proc/{pid}/stat") as stat:
            return f"{boot}:{stat.read().rsplit(')', 1)[1].split()[19]}"
    except (OSError, IndexError):
        return None


def owner_alive(owner: dict[str, Any]) -> bool:
    """Whether the process a :func:`worker_identity` of this host names still runs: its pid, started when it was."""
    pid = int(owner["pid"])
    return pid_alive(pid) and ("started" not in owner or process_start(pid) in (None, owner["started"]))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    # A zombie (exited, not yet reaped by its parent) is dead for our purpose.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def study_file(storage: str) -> Path | None:
    """The file a study lives in (SQLite, a journal); None for a database server."""
    kind = storage_kind(storage)
    return Path(storage) if kind == "journal" else sqlite_path(storage) if kind == "sqlite" else None


def _lock(take: Callable[[], Any], path: str) -> None:
    """``take()``, a lock of the file ``path``; one held by another process raises as it does (BlockingIOError or
    PermissionError), a file system that takes no lock at all raises a StorageError that says so (a network file
    system without its lock service said "OSError: [Errno 37] No locks available" alone)."""
    try:
        take()
    except (BlockingIOError, PermissionError):
        raise
    except OSError as exc:
        raise StorageError(f"cannot lock {path}: {exc.strerror or exc} (a network file system without file locks?); "
                           "keep the studies on a local disk (--studies DIR), or the study on a database server "
                           "(--storage postgresql://...)") from None


def check_named(storage: str) -> None:
    """Raise where ``storage`` names no study storage (:func:`storage_problem`)."""
    problem = storage_problem(storage)
    if problem:
        raise StorageError(f"{storage} {problem}")  # as typed: a URL SQLAlchemy renders has its ":" as %3A


def check_writable(storage: str) -> None:
    """Raise where this user cannot write a study's file, its folder (SQLite's journal of each write, a new lock
    file) or a lock file beside it. As another user of a studies folder that root made, a search said
    "StorageInternalError: ... e.g. exceeding max length" for a database read-only to it, and "autotune.db.search
    .lock: Permission denied" for a lock file."""
    from autotune.config import cannot_write

    check_named(storage)  # before a lock file is written beside what it names
    path = study_file(storage)
    if path is None:
        return
    files = [path, *(Path(f"{path}{suffix}") for suffix in (".lock", ".budget.lock", ".search.lock"))]
    reason = cannot_write(path.parent) or next((f"{file.resolve()} is read-only to this user" for file in files
                                                if file.exists() and not os.access(file, os.W_OK)), None)
    if reason:
        raise StorageError(f"cannot write the study in {path}: {reason} (made by another user? give it to this one, "
                           "or choose another --storage or --studies)")


class BudgetLock:
    """A lock over one study shared by every worker on every host (see the module docstring)."""

    def __init__(self, storage: str, study_name: str) -> None:
        self.storage, self.study_name = storage, study_name
        self.kind = storage_kind(storage)
        self._engine = None
        file = study_file(storage)
        self._path, self._search_path = (None, None) if file is None else (Path(f"{file}.budget.lock"),
                                                                          Path(f"{file}.search.lock"))
        # A 63-bit key per study for pg_advisory_lock (and its record in the search lock's file: 62 bits, an off_t).
        self._key = int.from_bytes(hashlib.sha256(f"autotune:{study_name}".encode()).digest()[:8], "big") >> 1
        self._search_key = int.from_bytes(hashlib.sha256(f"autotune-search:{study_name}".encode()).digest()[:8],
                                          "big") >> 2

    def _server(self) -> Any:
        """The engine of this lock's PostgreSQL server, made once."""
        import sqlalchemy

        if self._engine is None:
            self._engine = sqlalchemy.create_engine(with_installed_driver(self.storage), pool_pre_ping=True)
        return self._engine

    @contextlib.contextmanager
    def searching(self, shared: bool = False) -> Iterator[None]:
        """Held for a whole search, or ``shared`` by the processes that run workers on the study; a second search
        of the study while it is held is refused before it writes anything. Two searches at once each re-measured
        and exported, the last one's winner kept (a config 43x slower than the other's, chmm at tiny), and timed
        their configs beside each other's. A record lock (the kernel drops it when its holder dies) or a
        PostgreSQL session's advisory lock; other servers take none."""
        busy = AutotuneError(f"study {self.study_name!r} in {redact_storage(self.storage)} is being searched by "
                             "another autotune process now (one stopped with Ctrl-Z too); two at once would time "
                             "their configs beside each other's, and each export its own winner: wait for it to end, "
                             "or share the study as workers (--workers, on a journal file or PostgreSQL)")
        check_writable(self.storage)  # before its lock file is opened
        if self._search_path is not None:
            self._search_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self._search_path, "a+") as handle:
                try:
                    _lock(lambda: fcntl.lockf(handle, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB,
                                              1, self._search_key), handle.name)
                except (BlockingIOError, PermissionError):
                    raise busy from None
                yield  # closing the file releases it
            return
        if not self.storage.startswith("postgresql"):
            yield
            return
        import sqlalchemy

        kind = "_shared" * shared
        try:
            connection = self._server().connect()
        except Exception as exc:  # noqa: BLE001 - any driver error means the same to the user
            raise storage_failure(self.storage, exc) from None
        with connection:  # the session holds the lock until it closes, or is unlocked
            if not connection.execute(sqlalchemy.text(f"SELECT pg_try_advisory_lock{kind}(:key)"),
                                      {"key": self._search_key}).scalar():
                raise busy
            try:
                yield
            finally:
                with contextlib.suppress(Exception):  # a server gone has dropped it: the storage's own error is said
                    connection.execute(sqlalchemy.text(f"SELECT pg_advisory_unlock{kind}(:key)"),
                                       {"key": self._search_key})

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        if self._path is not None:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            with open(self._path, "a") as handle:
                _lock(lambda: fcntl.flock(handle, fcntl.LOCK_EX), handle.name)
                try:
                    yield
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
            return
        if not self.storage.startswith("postgresql"):
            # Other servers (MySQL...): no portable session lock here; the budget
            # may then be overshot by a trial when two workers take one at once.
            yield
            return
        import sqlalchemy

        with self._server().connect() as connection:
            connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), {"key": self._key})
            try:
                yield
            finally:
                connection.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"), {"key": self._key})


def _transient(exc: BaseException) -> bool:
    """Errors of a storage that stopped answering (a server down, a network gone, a journal's disk full)."""
    import optuna
    import sqlalchemy.exc

    # Optuna's RDB storage wraps a driver's error in StorageInternalError: look at the cause too. An OSError is a
    # journal file's (ConnectionError and TimeoutError among them): a full disk ended a worker in a traceback.
    for error in (exc, exc.__cause__, exc.__context__):
        if isinstance(error, (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError, OSError)):
            return True
    return isinstance(exc, optuna.exceptions.StorageInternalError)


def retrying(action: Callable[[], T], what: str, storage: str, delays: tuple[float, ...] | None = None,
             on_retry: Callable[[str], None] | None = None) -> T:
    """``action()``, retried with backoff while the storage does not answer; then a :class:`StorageError`."""
    delays = _retry_delays() if delays is None else delays
    for attempt, delay in enumerate((*delays, None)):
        try:
            return action()
        except Exception as exc:  # noqa: BLE001 - sorted below
            if not _transient(exc):
                raise
            # Optuna's wrapper says "invalid data ... e.g. exceeding max length" whatever the cause: a full disk
            # was "lost the storage ... (StorageInternalError)". The driver's words say which it is.
            cause = next((e for e in (exc.__cause__, exc.__context__) if e is not None), exc)
            why = f"{type(cause).__name__}: {_words(cause)}"[:300]
            if delay is None:
                raise StorageError(
                    f"lost the storage {redact_storage(storage)} while {what} ({why}), after {len(delays)} "
                    f"retries; every finished trial is kept there: run the same command again to resume"
                ) from None
            if on_retry is not None:
                on_retry(f"storage not answering while {what} ({why}); retry {attempt + 1}/{len(delays)} in "
                         f"{delay:g} s")
            time.sleep(delay)
    raise AssertionError("unreachable")
