"""The worker protocol: how processes share one study without losing or double-counting a trial.

Every rule that more than one process must agree on lives here: the trial
budget a study is driven to (:func:`claim_budget`), taking a trial under the
budget lock (:class:`TrialBudget`), heartbeats while a trial runs
(:class:`Heartbeat`), failing the trials of processes that died
(:func:`fail_abandoned_trials`), releasing one's own trials on a stop, and
electing the one process that exports (:func:`elect_exporter`). A single
process follows the same rules with a lock nobody else takes.
"""

from __future__ import annotations

import contextlib
import datetime
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any, Callable, Iterator

from autotune.stopping import whole_step
from autotune.storage import DEFAULT_GRACE_PERIOD, owner_alive, storage_kind, worker_identity
from autotune.trials import counted

if TYPE_CHECKING:
    import optuna

__all__ = ["FIRST_ROLES", "Heartbeat", "NoLock", "TrialBudget", "claim_budget", "elect_exporter", "exported",
           "exporting", "fail_abandoned_trials", "release_dead_owners", "release_own_trials", "release_trial"]

#: What :meth:`TrialBudget.take` returns when other workers' trials fill the budget for now.
WAIT = None
#: ... and when the budget is reached.
DONE = False
#: Asks per trial of the budget before a search gives up finding configs it has not measured
#: (a sampler stuck on a small, exhausted space must still end). At least twice the asks a new config takes
#: once the sampler has converged (loop.REPEAT_LIMIT repeats, then the one the loop queues): at 5, a search of
#: mine of 20 trials ended at 19 so (78 repeats, 3 restricted asks: lse.py, -s small --seed 4).
DUPLICATE_ASK_FACTOR = 12
#: The study attribute that records which budget has been exported (set once, under the budget lock).
EXPORTED = "exported_budget"
#: ... and who exports it: its host and pid (and, on a database server, the time of its last beat) while it
#: re-measures, marked finished once it has exported.
EXPORTER = "exporter"


class NoLock:
    """The budget lock of a study only one process works on."""

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        yield


#: The roles of the trials every study measures first: what users run today, and autotune's untuned defaults.
FIRST_ROLES = ("baseline", "defaults")


def enqueue_first(study: "optuna.Study", firsts: list[tuple[dict[str, Any], str]]) -> None:
    """Queue the baseline, the defaults and the probes (``SearchSpace.firsts``) in a new study, and again where a
    stop lost them (call under the lock).

    Queued only in a new study, a defaults trial stopped mid-run left the resumed study without the config
    autotune recommends. A study that never had them (made outside autotune) is left as it is. A study holding
    nothing but some of them, queued, is new too: its queueing was cut short (a write retried on a full disk
    left the baseline queued and the defaults never).
    """
    trials = study.get_trials(deepcopy=False)
    roles = {role for _, role in firsts}
    new = all(t.state.name == "WAITING" and t.user_attrs.get("role") in roles for t in trials)
    for params, role in firsts:
        # A study has several probes: each is its own config. A queued trial has no params until it is asked,
        # only the ones it was queued with (read as Optuna's own enqueue_trial does): by its params alone, a
        # second call before the first trial ran queued every probe again.
        mine = [t for t in trials if t.user_attrs.get("role") == role
                and (role != "probe" or t.system_attrs.get("fixed_params", t.params) == params)]
        if (new and not mine) or (mine and all(t.user_attrs.get("lost") for t in mine)):
            study.enqueue_trial(params, user_attrs={"role": role})


def claim_budget(study: "optuna.Study", lock: Any, n_trials: int, firsts: list[tuple[dict[str, Any], str]],
                 grace_period: int | None = None) -> int:
    """Settle a shared study's trial budget: the total of counted trials it is driven to.

    The first process to open a study (or one that finds its budget reached)
    sets the budget to the trials counted so far plus ``n_trials``; every
    process that joins a study in progress works to the budget it finds, so
    hosts started with the same command agree.
    """
    with lock.held():
        done = len(counted(study.get_trials(deepcopy=False)))
        budget = study.user_attrs.get("trial_budget")
        # A budget reached but not exported (its exporter stopped or died) is resumed: to the export, not to more.
        if budget is None or (done >= budget and exported(study, budget, grace_period, _file_lock(lock))):
            budget = done + n_trials
            study.set_user_attr("trial_budget", budget)
        enqueue_first(study, firsts)
    return int(budget)


class TrialBudget:
    """Hands out trials until the study holds ``budget`` counted trials.

    Under the lock it fails the stale trials of dead workers (which queues
    each once more), counts the finished trials and those in flight, and
    hands out a trial only while they leave budget. ``progress()`` is what
    the progress line shows: trials of this run for one process, the
    study's for a shared one.
    """

    def __init__(self, study: "optuna.Study", budget: int, lock: Any, storage: Any, heartbeat: int | None,
                 grace_period: int | None, shared: bool) -> None:
        self.study, self.budget, self.lock, self.storage = study, budget, lock, storage
        self.heartbeat, self.grace_period, self.shared = heartbeat, grace_period, shared
        self.start = len(counted(study.get_trials(deepcopy=False)))
        self.asks = 0
        self.max_asks = DUPLICATE_ASK_FACTOR * max(budget - self.start, 1)

    def take(self) -> "optuna.Trial | None | bool":
        """A claimed trial to run, ``WAIT`` (None) to wait, or ``DONE`` (False)."""
        # A stop waits until a trial is both taken and claimed: a trial taken but not
        # yet claimed could not be told apart from another worker's and released.
        with whole_step(), self.lock.held():
            return self._take()

    def release_dead(self) -> None:
        """Fail, and queue once more, the trials of workers that died (as :meth:`take` does first): a worker
        waiting for other workers' trials, without taking one, must still find one whose worker is gone."""
        with whole_step(), self.lock.held():
            self._release_dead()

    def _release_dead(self) -> None:
        import optuna
        from optuna.storages import fail_stale_trials

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            fail_stale_trials(self.study)
        fail_abandoned_trials(self.study, self.grace_period, one_machine=_one_machine(self.storage))

    def _take(self) -> "optuna.Trial | None | bool":
        self._release_dead()
        trials = self.study.get_trials(deepcopy=False)
        done = len(counted(trials))
        if done >= self.budget or self.asks >= self.max_asks:
            return DONE
        in_flight = sum(1 for t in trials if t.state.name == "RUNNING" and "claimed" in t.user_attrs)
        if done + in_flight >= self.budget:
            return WAIT
        self.asks += 1
        trial = self.study.ask()
        # The first heartbeat before the claim: a claimed trial always has one, so a worker
        # that dies from here on is found by its heartbeat going stale; one that died
        # before the claim leaves an unclaimed trial, failed once it is a grace period old.
        if self.heartbeat and hasattr(self.storage, "record_heartbeat"):
            self.storage.record_heartbeat(trial._trial_id)
        trial.set_user_attr("claimed", worker_identity())
        return trial

    def out_of_asks(self) -> str:
        """Why the budget ends before its trials are done, where its asks are spent; else ''."""
        done, total = self.progress()
        if self.asks < self.max_asks or done >= total:
            return ""
        return (f"{self.asks} asks of the sampler ({DUPLICATE_ASK_FACTOR} a trial of the budget) found no config to "
                f"measure for {total - done} of the {total} trials: each repeated a measured one or broke a "
                "constraint; no new trials (the space's allowed configs may be nearly all measured)")

    def progress(self, trials: "list[optuna.trial.FrozenTrial] | None" = None) -> tuple[int, int]:
        """Trials done and the budget; ``trials``: the study's, where they were just read."""
        done = len(counted(self.study.get_trials(deepcopy=False) if trials is None else trials))
        return (done, self.budget) if self.shared else (done - self.start, self.budget - self.start)


def _one_machine(storage: Any) -> bool:
    """Whether ``storage`` (an Optuna storage object) is a file for one machine: SQLite, a journal file."""
    url = getattr(storage, "url", None)
    return url is None or storage_kind(str(url)) != "server"


def _judged_here(owner: dict[str, Any], host: str, one_machine: bool) -> bool:
    """Whether this process tells by itself if ``owner`` (a trial's claim, an exporter) still runs: it is of this
    ``host``, or, in a file for ``one_machine``, it recorded its start (boot id, ticks), checked whatever host name
    it gives: a host renamed mid-search still runs its trials."""
    return owner.get("host") == host or (one_machine and "started" in owner)


def fail_abandoned_trials(study: "optuna.Study", grace_period: int | None, one_machine: bool = False) -> None:
    """Fail (and queue once more) running trials that nobody will finish, on every storage.

    Three kinds: a trial claimed by a process on this host that is gone (a
    journal file or SQLite has no heartbeats, and a dead process is plain
    to see, told from a later one given its pid by its start), a trial taken
    but never claimed, a grace period after it started (its process died
    between taking and claiming it, on any host), and, in a file for
    ``one_machine``, a trial claimed by another host: no other host shares
    such a file, so a host name that changed left it (a container of the
    job killed and started anew, a renamed laptop); every later search
    waited for it without a word. Heartbeats find the rest on server
    databases.
    """
    import optuna
    from optuna.trial import TrialState

    me = worker_identity()
    grace = datetime.timedelta(seconds=grace_period or DEFAULT_GRACE_PERIOD)
    now = datetime.datetime.now()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = t.user_attrs.get("claimed")
        if owner:
            if _judged_here(owner, me["host"], one_machine):  # else, without one, another host's claim is gone
                if owner_alive(owner):
                    continue
            elif not one_machine:
                continue
        elif t.datetime_start is None or now - t.datetime_start.replace(tzinfo=None) < grace:
            continue
        try:
            study._storage.set_trial_state_values(t._trial_id, state=TrialState.FAIL)
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # another worker got there first
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1)
        retry(study, study._storage.get_trial(t._trial_id))


def release_own_trials(study: "optuna.Study") -> None:
    """Fail every running trial this process holds (a stop): none is left RUNNING and none counts."""
    from optuna.trial import TrialState

    me = worker_identity()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if t.user_attrs.get("claimed") == me:
            release_trial(study, t._trial_id)


def release_dead_owners(study: "optuna.Study") -> None:
    """After a stop: fail as lost every running trial whose owner on this host is gone.

    Each worker releases its own trial when it stops; this is the driver's
    second look once its workers have exited, so that a worker stopped at
    an unlucky instant leaves no trial RUNNING.
    """
    from optuna.trial import TrialState

    me = worker_identity()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = t.user_attrs.get("claimed") or {}
        if owner.get("host") == me["host"] and "pid" in owner and not owner_alive(owner):
            release_trial(study, t._trial_id)


def release_trial(study: "optuna.Study", trial_id: int) -> None:
    """Fail a trial that a stop interrupted, marked lost so that it counts toward no budget."""
    from optuna.trial import TrialState

    try:
        study._storage.set_trial_user_attr(trial_id, "lost", True)
        study._storage.set_trial_state_values(trial_id, state=TrialState.FAIL)
    except Exception:  # noqa: BLE001 - finished meanwhile, or the storage is gone
        pass


def elect_exporter(study: "optuna.Study", lock: Any, budget: int, grace_period: int | None = None) -> bool:
    """Whether this process re-measures and exports the study's winner for ``budget``: exactly one does.

    The first process to find the budget unexported, under the budget lock,
    marks it exported and is elected; every other process finds the mark.
    """
    with lock.held():
        if exported(study, budget, grace_period, _file_lock(lock)):
            return False
        study.set_user_attr(EXPORTED, budget)
        study.set_user_attr(EXPORTER, worker_identity())
        return True


def _file_lock(lock: Any) -> bool:
    """Whether ``lock`` is the budget lock of a study file for one machine (SQLite, a journal file)."""
    return getattr(lock, "kind", "server") != "server"


def exported(study: "optuna.Study", budget: int, grace_period: int | None = None, one_machine: bool = False) -> bool:
    """Whether ``budget`` is exported, or being exported by a process that may be alive.

    An exporter that a stop or an error interrupted gives the budget back
    (:func:`exporting`); one that died on this host (SIGKILL, a crash) is
    seen to be gone, as a dead worker's trial is; so is one on another host
    in a file for ``one_machine``, which no other host shares (a host name
    that changed marked it: see :func:`fail_abandoned_trials`); one on
    another host that beats (a database server's heartbeat) is gone once
    its last beat is ``grace_period`` seconds old, as a worker's trial is.
    One that does not beat, or marked before exporters were recorded, is
    trusted.
    """
    if study.user_attrs.get(EXPORTED) != budget:
        return False
    owner = study.user_attrs.get(EXPORTER) or {}
    if owner.get("finished") or "pid" not in owner:
        return True
    if _judged_here(owner, worker_identity()["host"], one_machine):
        return owner_alive(owner)
    if one_machine:
        return False
    # The hosts' clocks must agree within the grace period, as for Optuna's own heartbeats.
    return "beat" not in owner or time.time() - float(owner["beat"]) <= (grace_period or DEFAULT_GRACE_PERIOD)


@contextlib.contextmanager
def exporting(study: "optuna.Study", lock: Any, heartbeat: int | None = None) -> Iterator[None]:
    """The elected exporter's re-measurement and export: marked finished when it ends, the budget given back
    when it raises (Ctrl-C in the first round, an unwritable export), so that the same command resumes to the
    export rather than measuring more trials. Every ``heartbeat`` seconds (a database server's) it records a
    beat, so that a host it died on leaves the budget to another after the grace period (:func:`exported`)."""
    me = worker_identity()

    def mine() -> bool:
        owner = study.user_attrs.get(EXPORTER) or {}
        return (owner.get("host"), owner.get("pid")) == (me["host"], me["pid"])

    def beat() -> bool:
        try:
            if not mine():
                return False  # taken over (this process's beats stalled past the grace period): not overwritten
            study.set_user_attr(EXPORTER, {**me, "beat": time.time()})
        except Exception:  # noqa: BLE001 - a missed beat is retried next interval
            pass
        return True

    try:
        with Heartbeat(beat, heartbeat):
            yield
    except BaseException:
        try:
            with lock.held():
                if mine():
                    study.set_user_attr(EXPORTED, None)
        except Exception:  # noqa: BLE001 - the storage is gone: the mark stays, and more trials come first
            pass
        raise
    try:
        study.set_user_attr(EXPORTER, {**me, "finished": True})
    except Exception:  # noqa: BLE001 - exported all the same; unmarked, a re-run after this process exits re-exports
        pass


class Heartbeat:
    """Calls ``beat`` now, then every ``interval`` seconds from a thread while the block runs (no ``interval``:
    never), until the block ends or ``beat`` returns False. A trial's: :meth:`of_trial`; the exporter's:
    :func:`exporting`."""

    def __init__(self, beat: Callable[[], "bool | None"], interval: int | None) -> None:
        self.beat, self.interval = beat, interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def of_trial(cls, storage: Any, trial_id: int, interval: int | None) -> "Heartbeat":
        """A trial's heartbeat on a storage that records them (a database server's)."""
        recorded = interval if hasattr(storage, "record_heartbeat") else None
        return cls(lambda: storage.record_heartbeat(trial_id), recorded)

    def __enter__(self) -> "Heartbeat":
        if self.interval:
            self.beat()  # before the block: a claimed trial always has a heartbeat
            self._thread = threading.Thread(target=self._beat, daemon=True)
            self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if self.beat() is False:
                    return
            except Exception:  # noqa: BLE001 - a missed beat is retried next interval
                pass

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
