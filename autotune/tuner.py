"""The tuner: an Optuna study over a workload's space, and the re-measured winner.

One search is:

1. validate everything (workload, size, device, space) before writing anything;
2. open (or resume) the study ``<workload>-<device>-<size>`` in the storage;
3. make sure the reference output is cached (the workload's reference config);
4. enqueue the baseline as the first trial of a new study;
5. run the trial budget: each trial's config is measured and checked in a
   fresh process; its figures, status and error become trial attributes, and
   an incorrect or out-of-memory result is infeasible through Optuna's
   constraint API, so it can never be chosen;
6. re-measure the best few feasible configs and the baseline interleaved, in
   rounds, pick the winner (ties within noise broken deterministically) and
   export it with its speedup.
"""

from __future__ import annotations

import math
import os
import random
import threading
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from autotune.config import SCHEMA_VERSION, Config, config_path, studies_dir, write_tuned_config
from autotune.devices import DetectedDevice, resolve_device
from autotune.exceptions import AutotuneError
from autotune.measure import Measurement
from autotune.runner import STATUSES, Runner, TrialRequest, TrialResult
from autotune.space import SearchSpace
from autotune.stopping import whole_step
from autotune.storage import (
    DEFAULT_GRACE_PERIOD,
    BudgetLock,
    open_storage,
    pid_alive,
    redact_storage,
    retrying,
    storage_failure,
    storage_kind,
    worker_identity,
)
from autotune.workload import Workload, get_workload_class

if TYPE_CHECKING:
    import optuna

__all__ = ["Candidate", "ChoiceOutcome", "SearchResult", "TrialRecord", "Tuner", "choice_outcomes", "redact_storage"]

# A measured config within this share of the best is a tie, unless the medians'
# uncertainty is wider (see Tuner.pick_winner).
TIE_TOLERANCE = 0.02
# Among configs tied on speed, memory decides only when it differs by more than this share.
MEMORY_TOLERANCE = 0.05
# Runs per re-measurement round, at least: the pooled rounds decide the winner.
REMEASURE_MIN_RUNS = 5
# Asks per counted trial before a search gives up finding configs it has not measured.
DUPLICATE_ASK_FACTOR = 5
# A config this many times slower than the study's best, on its first run and its
# first warm run, stops there (cut_short): a 100x slower config needs no median of
# five runs to lose, and on a CPU one such config can cost minutes a run.
HOPELESS_FACTOR = 20.0


def _median_uncertainty(m: Measurement) -> float:
    """Relative half-width of a box plot's notch, 1.57 IQR / sqrt(n) (McGill et al. 1978)."""
    return 1.57 * m.relative_spread / math.sqrt(len(m.times))


@dataclass
class TrialRecord:
    """One finished trial, as the progress callback and the result see it."""

    number: int
    config: Config
    result: TrialResult
    role: str = "search"  # "baseline" and "defaults" for the two enqueued first
    duplicate_of: int | None = None


@dataclass
class Candidate:
    """A config re-measured at the end, with all its rounds pooled."""

    config: Config
    trial: int | None
    role: str  # "baseline" or "candidate"
    results: list[TrialResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.status == "ok" for r in self.results)

    @property
    def measurement(self) -> Measurement | None:
        parts = [m for m in (r.measurement() for r in self.results if r.status == "ok") if m is not None]
        return Measurement.pooled(parts) if parts else None

    @property
    def peak_memory_bytes(self) -> int | None:
        peaks = [r.peak_memory_bytes for r in self.results if r.peak_memory_bytes is not None]
        return max(peaks) if peaks else None

    @property
    def check(self) -> dict[str, Any] | None:
        checks = [r.check for r in self.results if r.check]
        if not checks:
            return None
        return max(checks, key=lambda c: (not c["passed"], (c["error"] if c["error"] is not None else math.inf) / c["tolerance"]))

    def figures(self) -> dict[str, Any] | None:
        m = self.measurement
        if m is None:
            return None
        return {
            "throughput": m.throughput,
            "unit": self.results[0].unit,
            "median_seconds": m.median,
            "iqr_seconds": m.iqr,
            "relative_spread": m.relative_spread,
            "noisy": m.noisy,
            "runs": len(m.times),
            "peak_memory_bytes": self.peak_memory_bytes,
            "warmup_seconds": self.results[0].warmup_seconds,
            "threads": self.results[0].threads,
        }


@dataclass
class SearchResult:
    """What a search found; ``winner`` is ``None`` when no config passed its check."""

    workload: str
    device: str
    size: str
    study_name: str
    storage: str  # redacted
    unit: str
    trials: list[TrialRecord]
    counts: dict[str, int]  # statuses over the whole study
    candidates: list[Candidate]
    winner: Candidate | None
    baseline: Candidate | None
    speedup: float | None
    export_path: Path | None
    document: dict[str, Any] | None
    seconds: float
    choices: list[ChoiceOutcome] = field(default_factory=list)


@dataclass
class ChoiceOutcome:
    """What one value of one knob did over a study: its best correct throughput and its failures."""

    parameter: str
    value: Any
    measured: int  # trials (repeats not counted) that ran with this value
    best_throughput: float | None  # best among those that passed their check
    statuses: dict[str, int]  # how those trials ended
    in_winner: bool

    @property
    def verdict(self) -> str:
        if self.in_winner:
            return "winner"
        if self.best_throughput is not None:
            return "slower"
        failed = {k: v for k, v in self.statuses.items() if k != "ok"}
        return ("incorrect" if set(failed) == {"incorrect"} else "failed") if failed else "not tried"


def choice_outcomes(study: "optuna.Study", space: SearchSpace, winner: Config | None) -> list[ChoiceOutcome]:
    """For each tunable categorical knob and each of its values: how its trials ended.

    This is how a search says which kernels lost and why: slower than the
    winner, incorrect, or failed (error, crash, timeout, oom).
    """
    every = study.get_trials(deepcopy=False)
    retried = _retried(every)
    trials = [
        t for t in every
        if t.state.is_finished() and "config" in t.user_attrs and "duplicate_of" not in t.user_attrs
        and t.number not in retried
    ]
    outcomes = []
    # A conditional knob counts only where it was active (an inactive one holds its default).
    active = {t.number: space.active(t.user_attrs["config"]) for t in trials if set(space.parameters) <= set(t.user_attrs["config"])}
    winner_active = space.active(winner) if winner is not None else {}
    for param in space.tunable:
        if param.type != "categorical":
            continue
        for value in param.choices:
            mine = [
                t for t in trials
                if active.get(t.number, {}).get(param.name) and t.user_attrs["config"].get(param.name) == value
            ]
            correct = [t.user_attrs["throughput"] for t in mine if t.user_attrs.get("status") == "ok" and t.user_attrs.get("throughput")]
            outcomes.append(
                ChoiceOutcome(
                    param.name, value, len(mine), max(correct) if correct else None,
                    dict(Counter(t.user_attrs.get("status", "unknown") for t in mine)),
                    bool(winner_active.get(param.name)) and winner.get(param.name) == value,  # type: ignore[union-attr]
                )
            )
    return outcomes


def _study_counts(study: "optuna.Study") -> dict[str, int]:
    trials = study.get_trials(deepcopy=False)
    retried = _retried(trials)  # a dead worker's trial: its retry is the outcome
    counts = Counter(
        "lost" if t.user_attrs.get("lost") else t.user_attrs.get("status", "unknown")
        for t in trials
        if t.state.is_finished() and "duplicate_of" not in t.user_attrs  # a repeat is not a new outcome
        and t.number not in retried
    )
    # An interrupted trial is "lost" (re-run on resume), not an error of its config.
    return {status: counts.get(status, 0) for status in (*STATUSES, "lost") if counts.get(status)}


class Tuner:
    """Searches the fastest correct config of one workload on one device.

    Construction validates the workload, size, device and space and writes
    nothing; :meth:`search` opens the study, runs trials and exports.

    Example::

        tuner = Tuner("chmm", device="cpu", size="small")
        result = tuner.search(n_trials=20)
        print(result.winner.config, result.speedup)
    """

    def __init__(
        self,
        workload: str,
        device: str = "auto",
        size: str | None = None,
        *,
        storage: str | None = None,
        study_name: str | None = None,
        studies: str | Path | None = None,
        isolation: str = "subprocess",
        trial_timeout: float = 600.0,
        memory_budget_bytes: int | None = None,
        memory_limit_bytes: int | None = None,
        measurer: dict[str, Any] | None = None,
        remeasure_top: int = 3,
        remeasure_rounds: int = 3,
        seed: int | None = None,
        sampler: "optuna.samplers.BaseSampler | None" = None,
        threads: int | None = None,
        on_trial: Callable[[TrialRecord, int, int], None] | None = None,
        on_stage: Callable[[str], None] | None = None,
        heartbeat: int | None = None,
        grace_period: int | None = None,
        time_budget: float | None = None,
    ) -> None:
        self.workload_spec = workload
        self.workload_class: type[Workload] = get_workload_class(workload)
        self.size = size or self.workload_class.default_size
        if self.size not in self.workload_class.sizes:
            from autotune.exceptions import UnknownNameError

            raise UnknownNameError(f"size of workload {self.workload_class.name!r}", self.size, self.workload_class.sizes)
        self.detected: DetectedDevice = resolve_device(device)
        self.device = self.detected.profile
        self.space: SearchSpace = SearchSpace.from_file(self.workload_class.space_path()).for_device(self.device)
        self.reference_config = self.space.validate(dict(self.workload_class.reference_config), "reference_config")
        self.studies = Path(studies) if studies is not None else studies_dir()
        self.storage = storage or f"sqlite:///{self.studies / 'autotune.db'}"
        self.study_name = study_name or f"{self.workload_class.name}-{self.device.name}-{self.size}"
        self.cache_dir = self.studies / "cache" / self.workload_class.name / f"{self.size}-v{self.workload_class.version}"
        self.runner = Runner(isolation, trial_timeout)
        self.memory_budget_bytes = memory_budget_bytes
        # A hard limit on a trial's address space (CPU only: RLIMIT_AS would also cap a GPU driver's mappings).
        self.memory_limit_bytes = memory_limit_bytes if self.device.kind == "cpu" else None
        self.measurer = dict(measurer or {})
        self.remeasure_top = remeasure_top
        self.remeasure_rounds = remeasure_rounds
        self.seed = seed
        self.sampler = sampler  # default: TPE (Optuna 5 handles constraints and two objectives)
        self.threads = threads
        self.on_trial = on_trial
        self.on_stage = on_stage or (lambda message: None)
        self.stop_requested = False
        # Seconds after which no new trial is taken (the running one finishes; re-measure and export still happen).
        self.time_budget = time_budget
        self._deadline: float | None = None
        # Heartbeats (server databases) let other workers re-queue this worker's trial if it dies.
        self.heartbeat = heartbeat
        self.grace_period = grace_period
        self._storage_object: Any = None

    # -- pieces ------------------------------------------------------------------

    def request(self, config: Config, purpose: str = "trial", min_runs: int | None = None,
                best_throughput: float | None = None) -> TrialRequest:
        measurer = dict(self.measurer)
        if min_runs is not None:
            measurer["min_runs"] = max(min_runs, measurer.get("min_runs", 0))
        if best_throughput:
            measurer["hopeless_below"] = best_throughput / HOPELESS_FACTOR
        return TrialRequest(
            workload=self.workload_spec,
            size=self.size,
            device=self.device.name,
            torch_device=self.device.torch_device,
            config=config.to_dict(),
            cache_dir=str(self.cache_dir),
            measurer=measurer,
            threads=self.threads,
            purpose=purpose,
            memory_limit_bytes=self.memory_limit_bytes if purpose == "trial" else None,
        )

    def ensure_reference(self) -> None:
        """Compute and cache the reference output once per workload, size, version and device."""
        request = self.request(self.reference_config, "reference")
        if request.reference_path.is_file():
            if _loads_as_data(request.reference_path):
                return
            warnings.warn(f"the cached reference {request.reference_path} is not plain tensor data "
                          "(corrupt, or not written by autotune); computing it again", stacklevel=2)
            request.reference_path.unlink()
        self.on_stage(f"computing the reference output ({self.reference_config.describe()})")
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        result = self.runner.run(request, timeout=max(self.runner.timeout * 4, 600))
        if result.status != "ok":
            raise AutotuneError(
                f"the reference config of {self.workload_class.name!r} failed ({result.status}): {result.error}"
            )

    def run_config(self, config: Config) -> TrialResult:
        """Measure and check one config (reference cached first)."""
        self.ensure_reference()
        return self.runner.run(self.request(config))

    def storage_object(self) -> Any:
        """The Optuna storage (opened once): an RDB storage with heartbeats, or a journal file."""
        if self._storage_object is None:
            try:
                self._storage_object = open_storage(self.storage, self.heartbeat, self.grace_period)
            except Exception as exc:  # noqa: BLE001 - any driver error means the same to the user
                raise storage_failure(self.storage, exc) from None
        return self._storage_object

    def _default_sampler(self) -> "optuna.samplers.BaseSampler":
        import optuna

        if storage_kind(self.storage) == "sqlite":
            return optuna.samplers.TPESampler(seed=self.seed)
        # Workers in parallel: the constant liar counts running trials as bad, so that
        # workers asking at once are steered to different configs.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(seed=self.seed, constant_liar=True)

    def _open_study(self) -> "optuna.Study":
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        try:
            study = optuna.create_study(
                storage=self.storage_object(),
                study_name=self.study_name,
                directions=["maximize", "minimize"],
                sampler=self.sampler or self._default_sampler(),
                load_if_exists=True,
            )
        except Exception as exc:  # noqa: BLE001 - any driver error means the same to the user
            raise storage_failure(self.storage, exc) from None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(["throughput", "peak_memory_bytes"])
        for key, value in {
            "workload": self.workload_class.name,
            "device": self.device.name,
            "size": self.size,
            "unit": self.workload_class.unit,
            "space": str(self.space.source),
        }.items():
            if study.user_attrs.get(key) != value:
                study.set_user_attr(key, value)
        return study

    def _record(self, trial: "optuna.Trial", result: TrialResult, config: Config, role: str, duplicate_of: int | None) -> None:
        attrs = {
            "status": result.status,
            "role": role,
            "config": config.to_dict(),
            "config_key": config.key,
            "throughput": result.throughput,
            "unit": result.unit,
            "peak_memory_bytes": result.peak_memory_bytes,
            "median_seconds": result.median_seconds,
            "iqr_seconds": result.iqr_seconds,
            "noisy": result.noisy,
            "cut_short": result.cut_short,
            "warmup_seconds": result.warmup_seconds,
            "times": result.times,
            "threads": result.threads,
            "check": result.check,
            "error": result.error,
            "wall_seconds": result.wall_seconds,
        }
        if duplicate_of is not None:
            attrs["duplicate_of"] = duplicate_of
        for key, value in attrs.items():
            if value is not None:
                trial.set_user_attr(key, value)

    def _tell(self, study: "optuna.Study", trial: "optuna.Trial", result: TrialResult) -> None:
        from optuna.trial import TrialState

        if result.status in ("ok", "incorrect", "oom"):
            check = result.check or {}
            if result.status == "ok":
                correct = 0.0
            elif result.status == "incorrect" and check.get("error") is not None:
                correct = max(check["error"] / check["tolerance"] - 1.0, 1e-9) if check["tolerance"] else 1.0
            else:
                correct = 1.0  # out of memory, or an unbounded error (NaN output)
            trial.set_constraint("correct", correct)
            if result.status == "oom":
                # Nothing was produced; the run needed at least all the memory there was.
                throughput, memory = 0.0, float(self.detected.memory_bytes or self.device.memory_bytes or 0)
            else:
                throughput, memory = float(result.throughput or 0.0), float(result.peak_memory_bytes or 0)
            trial.set_constraint("fits_memory", (memory - self.memory_budget_bytes) / self.memory_budget_bytes if self.memory_budget_bytes else 0.0)
            study.tell(trial, [throughput, memory])
        else:
            study.tell(trial, state=TrialState.FAIL)

    # -- the search ----------------------------------------------------------------

    def search(self, n_trials: int = 20) -> SearchResult:
        """Measure ``n_trials`` more configs (resuming the study), re-measure the best and export.

        A config the study has measured already is recorded as a trial that
        reuses the earlier figures (``duplicate_of``) and does not count.
        """
        started = time.perf_counter()
        study = self._open_study()
        self.on_stage(f"study {self.study_name} in {redact_storage(self.storage)} ({len(study.trials)} trials so far)")
        warm = self.runner.warm_up()
        if warm:
            self.on_stage(f"fork server ready in {warm:.1f} s (torch imported once; each trial forks from it)")
        self.ensure_reference()
        baseline = self.space.baseline
        # A search killed outright (SIGKILL, a lost machine) left its trial RUNNING: fail and queue it again.
        self._fail_abandoned_trials(study)
        if not study.trials:
            # The baseline (what users run today) and the defaults (what autotune
            # recommends untuned) are measured first: every study reports both,
            # and the sampler starts from a known-good point, not only random ones.
            study.enqueue_trial(self.space.sampled_params(baseline), user_attrs={"role": "baseline"})
            if self.space.defaults != baseline:
                study.enqueue_trial(self.space.sampled_params(self.space.defaults), user_attrs={"role": "defaults"})
        known: dict[str, int] = {
            t.user_attrs["config_key"]: t.number
            for t in study.get_trials(deepcopy=False)
            if t.state.is_finished() and "config_key" in t.user_attrs and "duplicate_of" not in t.user_attrs
        }
        records: list[TrialRecord] = []
        rng = random.Random(self.seed)
        best = _best_throughput(study)
        measured = 0
        # A repeated config costs no budget, but a sampler stuck on a small, exhausted
        # space must still end: at most this many asks in one search.
        max_asks = DUPLICATE_ASK_FACTOR * n_trials
        asks = 0
        self._start_clock(time.perf_counter())  # the time budget is for trials: the reference is made by now
        while measured < n_trials and asks < max_asks and not self._should_stop():
            asks += 1
            with whole_step():
                trial = study.ask()
                trial.set_user_attr("claimed", worker_identity())
            try:
                record = self._run_trial(study, trial, known, rng, best)
            except KeyboardInterrupt:
                # A stop before the measurement began (while suggesting): release the trial.
                self._release_trial(study, trial._trial_id)
                raise
            if record.duplicate_of is None:
                measured += 1
                if record.result.status == "ok":
                    best = max(best, record.result.throughput or 0.0)
            records.append(record)
            if self.on_trial is not None:
                self.on_trial(record, measured, n_trials)
        return self.finish(study, records, started)

    def _run_trial(self, study: "optuna.Study", trial: "optuna.Trial", known: dict[str, int], rng: random.Random,
                   best: float, guard: Callable[[Callable[[], Any], str], Any] | None = None) -> TrialRecord:
        """Suggest, measure (or reuse a repeat's figures), record and tell one trial.

        ``guard(action, what)`` wraps each storage write after the measurement
        (workers pass one that retries while a database server is away).
        """
        guard = guard or (lambda action, what: action())
        config = self.space.suggest(trial)
        role = trial.user_attrs.get("role", "search")
        duplicate_of = known.get(config.key)
        if duplicate_of is not None:
            # Measured already: reuse its figures rather than spend the time again, and
            # give the sampler a config it has not seen next, so that a sampler stuck
            # on a small space still explores.
            previous = study.trials[duplicate_of]
            result = _result_from_attrs(previous.user_attrs, config)
            fresh = self._unseen_config(known, rng)
            if fresh is not None:
                study.enqueue_trial(self.space.sampled_params(fresh), user_attrs={"role": "random"})
        else:
            try:
                # The baseline is always measured in full: every ratio is taken against it.
                result = self.runner.run(self.request(config, best_throughput=None if role == "baseline" else best))
            except KeyboardInterrupt:
                # The trial's child is gone; say so in the study rather than leave it RUNNING.
                # "lost" keeps it out of the trial budget: a resumed search measures another.
                from optuna.trial import TrialState

                trial.set_user_attr("status", "error")
                trial.set_user_attr("lost", True)
                trial.set_user_attr("error", "interrupted before the trial finished")
                trial.set_user_attr("config", config.to_dict())
                study.tell(trial, state=TrialState.FAIL)
                raise
            known[config.key] = trial.number
        guard(lambda: self._record(trial, result, config, role, duplicate_of), "recording a trial")
        guard(lambda: self._tell(study, trial, result), "finishing a trial")
        return TrialRecord(trial.number, config, result, role, duplicate_of)

    # -- many workers on one study ----------------------------------------------------

    def claim_budget(self, n_trials: int) -> int:
        """Open the shared study and settle its trial budget: the total of counted trials it is driven to.

        The first process to open a study (or one that finds its budget reached)
        sets the budget to the trials counted so far plus ``n_trials``; every
        process that joins a study in progress works to the budget it finds, so
        hosts started with the same command agree. The baseline and the
        defaults are queued once, under the lock.
        """
        study = self._open_study()
        with BudgetLock(self.storage, self.study_name).held():
            counted = len(_counted(study.get_trials(deepcopy=False)))
            budget = study.user_attrs.get("trial_budget")
            if budget is None or counted >= budget:
                budget = counted + n_trials
                study.set_user_attr("trial_budget", budget)
            if not study.trials:
                baseline = self.space.baseline
                study.enqueue_trial(self.space.sampled_params(baseline), user_attrs={"role": "baseline"})
                if self.space.defaults != baseline:
                    study.enqueue_trial(self.space.sampled_params(self.space.defaults), user_attrs={"role": "defaults"})
        return int(budget)

    def work(self, budget: int, poll_seconds: float = 2.0) -> list[TrialRecord]:
        """One worker's loop on a shared study, until it holds ``budget`` counted trials.

        Under the budget lock a worker fails the stale trials of dead workers
        (which queues each once more), counts the finished trials and those in
        flight, and takes a trial only while they leave budget; then it
        measures without the lock. A worker with nothing to take waits while
        other workers' trials are in flight: one of them may die, and its
        retry needs a worker.
        """
        import optuna
        from optuna.storages import fail_stale_trials

        self._start_clock(time.perf_counter())
        study = self._open_study()
        storage = self.storage_object()
        lock = BudgetLock(self.storage, self.study_name)
        rng = random.Random(None if self.seed is None else self.seed + os.getpid())
        records: list[TrialRecord] = []

        def take() -> "optuna.Trial | None | bool":
            """A trial to run, None to wait, False when the budget is done."""
            with lock.held():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    fail_stale_trials(study)
                self._fail_abandoned_trials(study)
                trials = study.get_trials(deepcopy=False)
                counted = len(_counted(trials))
                if counted >= budget:
                    return False
                in_flight = sum(1 for t in trials if t.state.name == "RUNNING" and "claimed" in t.user_attrs)
                if counted + in_flight >= budget:
                    return None
                trial = study.ask()
                # The first heartbeat before the claim: a claimed trial always has one, so a worker
                # that dies from here on is found by its heartbeat going stale; one that died
                # before the claim leaves an unclaimed trial, failed once it is a grace period old.
                if hasattr(storage, "record_heartbeat") and self.heartbeat:
                    storage.record_heartbeat(trial._trial_id)
                trial.set_user_attr("claimed", worker_identity())
                return trial

        def guard(action: Callable[[], Any], what: str) -> Any:
            return retrying(action, what, self.storage, on_retry=self.on_stage)

        def known_and_best() -> tuple[dict[str, int], float]:
            trials = study.get_trials(deepcopy=False)
            known = {t.user_attrs["config_key"]: t.number for t in trials
                     if t.state.is_finished() and "config_key" in t.user_attrs and "duplicate_of" not in t.user_attrs}
            return known, _best_throughput(study)

        try:
            self._work_loop(study, storage, budget, poll_seconds, take, guard, known_and_best, rng, records)
        except KeyboardInterrupt:
            # A stop can land between taking a trial and measuring it: fail every trial this
            # process holds, so none is left RUNNING and none counts.
            self._release_own_trials(study)
            raise
        return records

    def _release_own_trials(self, study: "optuna.Study") -> None:
        from optuna.trial import TrialState

        me = worker_identity()
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if t.user_attrs.get("claimed") == me:
                self._release_trial(study, t._trial_id)

    @staticmethod
    def _release_trial(study: "optuna.Study", trial_id: int) -> None:
        """Fail a trial that a stop interrupted, marked lost so that it counts toward no budget."""
        from optuna.trial import TrialState

        try:
            study._storage.set_trial_user_attr(trial_id, "lost", True)
            study._storage.set_trial_state_values(trial_id, state=TrialState.FAIL)
        except Exception:  # noqa: BLE001 - finished meanwhile, or the storage is gone
            pass

    def _work_loop(self, study, storage, budget, poll_seconds, take, guard, known_and_best, rng, records) -> None:
        def take_whole() -> Any:
            # A stop waits until a trial is both taken and claimed: a trial taken but not
            # yet claimed could not be told apart from another worker's and released.
            with whole_step():
                return take()

        while not self._should_stop():
            trial = guard(take_whole, "taking a trial")
            if trial is False:
                break
            if trial is None:
                time.sleep(poll_seconds)
                continue
            known, best = guard(known_and_best, "reading the study")
            with _Heartbeat(storage, trial._trial_id, self.heartbeat):
                record = self._run_trial(study, trial, known, rng, best, guard)
            records.append(record)
            if self.on_trial is not None:
                counted = guard(lambda: len(_counted(study.get_trials(deepcopy=False))), "reading the study")
                self.on_trial(record, counted, budget)

    def _start_clock(self, started: float) -> None:
        self._deadline = started + self.time_budget if self.time_budget else None

    def _should_stop(self) -> bool:
        """A stop was asked for, or the time budget (``--timeout``) is spent: take no new trial."""
        if self._deadline is not None and time.perf_counter() >= self._deadline:
            if not self.stop_requested:
                self.on_stage(f"time budget of {self.time_budget:g} s spent: no new trials")
            self.stop_requested = True
        return self.stop_requested

    def _fail_abandoned_trials(self, study: "optuna.Study") -> None:
        """Fail (and queue once more) running trials that nobody will finish, on every storage.

        Two kinds: a trial claimed by a process on this host that is gone (a
        journal file or SQLite has no heartbeats, and a dead process is plain
        to see), and a trial taken but never claimed, a grace period after it
        started (its process died between taking and claiming it, on any
        host). Heartbeats find the rest on server databases.
        """
        import datetime

        import optuna
        from optuna.trial import TrialState

        me = worker_identity()
        grace = datetime.timedelta(seconds=self.grace_period or DEFAULT_GRACE_PERIOD)
        now = datetime.datetime.now()
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            owner = t.user_attrs.get("claimed")
            if owner:
                if owner.get("host") != me["host"] or pid_alive(int(owner["pid"])):
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

    def budget_done(self, budget: int) -> bool:
        return len(_counted(self._open_study().get_trials(deepcopy=False))) >= budget

    def finish_shared(self, budget: int) -> "SearchResult | None":
        """Re-measure and export, by exactly one of the processes that worked to ``budget``.

        Creating a study is atomic in every storage (the name is unique), so the
        process that creates ``<study>@export-<budget>`` is the one that exports;
        the others return None.
        """
        import optuna

        started = time.perf_counter()
        try:
            optuna.create_study(storage=self.storage_object(), study_name=f"{self.study_name}{EXPORT_MARK}{budget}")
        except optuna.exceptions.DuplicatedStudyError:
            return None
        return self.finish(self._open_study(), [], started)

    def _unseen_config(self, known: dict[str, int], rng: random.Random, tries: int = 200) -> Config | None:
        for _ in range(tries):
            config = self.space.sample(rng)
            if config.key not in known:
                return config
        return None  # the space is (nearly) exhausted

    def _candidates(self, study: "optuna.Study") -> list[Candidate]:
        feasible = [
            t for t in study.get_trials(deepcopy=False)
            if t.user_attrs.get("status") == "ok" and "duplicate_of" not in t.user_attrs
            and all(value <= 0 for value in t.constraints.values())
        ]
        feasible.sort(key=lambda t: (-(t.user_attrs.get("throughput") or 0.0), t.number))
        candidates: list[Candidate] = []
        seen: set[str] = set()
        baseline = self.space.baseline
        for t in feasible:
            key = t.user_attrs["config_key"]
            if key in seen or key == baseline.key:
                continue
            seen.add(key)
            candidates.append(Candidate(Config(t.user_attrs["config"]), t.number, "candidate"))
            if len(candidates) >= self.remeasure_top:
                break
        baseline_trial = next(
            (t.number for t in study.get_trials(deepcopy=False) if t.user_attrs.get("config_key") == baseline.key), None
        )
        return [Candidate(baseline, baseline_trial, "baseline"), *candidates]

    def remeasure(self, candidates: list[Candidate]) -> None:
        """Measure every candidate in rounds, interleaved, so drift hits them all alike."""
        for round_index in range(self.remeasure_rounds):
            order = candidates[round_index % len(candidates):] + candidates[: round_index % len(candidates)]
            for candidate in order:
                self.on_stage(
                    f"re-measuring round {round_index + 1}/{self.remeasure_rounds}: "
                    f"{candidate.role} {'#' + str(candidate.trial) if candidate.trial is not None else ''}".rstrip()
                )
                candidate.results.append(self.runner.run(self.request(candidate.config, min_runs=REMEASURE_MIN_RUNS)))

    @staticmethod
    def pick_winner(candidates: list[Candidate], memory_budget_bytes: int | None = None) -> Candidate | None:
        """The fastest candidate that passed every re-measurement (and fits the memory budget).

        A candidate is tied with the fastest when their medians differ by less
        than ``TIE_TOLERANCE`` or than their notches (the medians' uncertainty)
        together. Among tied candidates, one that needs clearly less memory
        (``MEMORY_TOLERANCE``) wins; otherwise the faster median, then the
        earlier trial, so the same figures give the same winner.
        """
        passed = [
            c for c in candidates
            if c.passed and c.measurement is not None
            and (memory_budget_bytes is None or (c.peak_memory_bytes or 0) <= memory_budget_bytes)
        ]
        if not passed:
            return None
        best = max(passed, key=lambda c: c.measurement.throughput)  # type: ignore[union-attr]
        top = best.measurement.throughput  # type: ignore[union-attr]

        def within_noise(c: Candidate) -> bool:
            m = c.measurement
            assert m is not None
            margin = max(TIE_TOLERANCE, _median_uncertainty(m) + _median_uncertainty(best.measurement))  # type: ignore[arg-type]
            return m.throughput >= top * (1 - margin)

        tied = [c for c in passed if within_noise(c)]
        peaks = [c.peak_memory_bytes for c in tied if c.peak_memory_bytes is not None]
        if peaks:
            leanest = min(peaks)
            tied = [c for c in tied if c.peak_memory_bytes is not None and c.peak_memory_bytes <= leanest * (1 + MEMORY_TOLERANCE)]
        return min(
            tied,
            key=lambda c: (
                -c.measurement.throughput,  # type: ignore[union-attr]
                c.trial if c.trial is not None else math.inf,
                c.config.key,
            ),
        )

    def finish(self, study: "optuna.Study", records: list[TrialRecord], started: float) -> SearchResult:
        candidates = self._candidates(study)
        winner = baseline = None
        speedup = None
        document = export_path = None
        if len(candidates) > 1 or (candidates and candidates[0].trial is not None):
            self.remeasure(candidates)
            winner = self.pick_winner(candidates, self.memory_budget_bytes)
            baseline = candidates[0]
        environment = next((r.environment for c in candidates for r in c.results if r.environment), None)
        if environment:
            study.set_user_attr("environment", environment)  # the report shows it even without an export
        study.set_user_attr("device_name", self.detected.name)
        if winner is not None and baseline is not None:
            base_m, win_m = baseline.measurement, winner.measurement
            if base_m is not None and win_m is not None and baseline.passed:
                speedup = win_m.throughput / base_m.throughput
            document = self._document(study, winner, baseline, speedup, candidates)
            path = config_path(self.workload_class.name, self.device.name, self.size, self.studies)
            try:
                export_path = write_tuned_config(document, path)
            except OSError as exc:
                # Every trial is in the study; say what won, so the re-measurement is not lost with the file.
                raise AutotuneError(
                    f"cannot write the export {path}: {exc.strerror or exc}; the winner was trial #{winner.trial} "
                    f"({winner.config.describe()}, {speedup or 0:.2f}x the baseline); fix the path and run "
                    "`autotune search` again"
                ) from None
            study.set_user_attr("winner_trial", winner.trial)
            study.set_user_attr("speedup", speedup)
        return SearchResult(
            workload=self.workload_class.name,
            device=self.device.name,
            size=self.size,
            study_name=self.study_name,
            storage=redact_storage(self.storage),
            unit=self.workload_class.unit,
            trials=records,
            counts=_study_counts(study),
            candidates=candidates,
            winner=winner,
            baseline=baseline,
            speedup=speedup,
            export_path=export_path,
            document=document,
            seconds=time.perf_counter() - started,
            choices=choice_outcomes(study, self.space, winner.config if winner else None),
        )

    def _document(
        self, study: "optuna.Study", winner: Candidate, baseline: Candidate, speedup: float | None,
        candidates: list[Candidate],
    ) -> dict[str, Any]:
        environment = next((r.environment for r in winner.results if r.environment), {})
        return {
            "schema_version": SCHEMA_VERSION,
            "workload": self.workload_class.name,
            "device": self.device.name,
            "device_name": self.detected.name,
            "size": self.size,
            "config": winner.config.to_dict(),
            "measured": winner.figures(),
            "baseline": {"config": baseline.config.to_dict(), **(baseline.figures() or {})},
            "speedup": speedup,
            "check": winner.check,
            "remeasure": {
                "rounds": self.remeasure_rounds,
                "candidates": [
                    {
                        "trial": c.trial,
                        "role": c.role,
                        "passed": c.passed,
                        "throughput": (c.measurement.throughput if c.measurement else None),
                        "statuses": [r.status for r in c.results],
                    }
                    for c in candidates
                ],
            },
            "environment": environment,
            "study": {"name": self.study_name, "storage": redact_storage(self.storage), "trials": len(study.trials)},
            "trial": winner.trial,
            "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }

    def close(self) -> None:
        self.runner.close()


#: Marks the study whose creation elects the process that exports a shared study's winner.
EXPORT_MARK = "@export-"


def _retried(trials: list[Any]) -> set[int]:
    """Numbers of trials failed with their dead worker and queued again (Optuna's retry history)."""
    return {n for t in trials for n in t.system_attrs.get("retry_history", ())}


def _counted(trials: list[Any]) -> list[Any]:
    """Finished trials that count toward the budget: measured, not a repeat, not lost to a dead worker.

    A dead worker's trial is failed and re-queued; its retry counts, the
    trial itself does not, even where the worker died after recording its
    figures but before finishing it.
    """
    retried = _retried(trials)
    return [t for t in trials if t.state.is_finished() and "status" in t.user_attrs and t.number not in retried
            and "duplicate_of" not in t.user_attrs and not t.user_attrs.get("lost")]


def _loads_as_data(path: Path) -> bool:
    """Whether a cached reference loads as tensors and containers alone (never running pickled code)."""
    import torch

    try:
        torch.load(path, weights_only=True)
    except Exception:  # noqa: BLE001 - any failure means: do not use this file
        return False
    return True


def _best_throughput(study: "optuna.Study") -> float:
    return max((t.user_attrs.get("throughput") or 0.0 for t in study.get_trials(deepcopy=False)
                if t.user_attrs.get("status") == "ok"), default=0.0)


class _Heartbeat:
    """Records a trial's heartbeat every ``interval`` seconds from a thread, while the trial runs."""

    def __init__(self, storage: Any, trial_id: int, interval: int | None) -> None:
        self.storage, self.trial_id, self.interval = storage, trial_id, interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "_Heartbeat":
        if self.interval and hasattr(self.storage, "record_heartbeat"):
            self.storage.record_heartbeat(self.trial_id)
            self._thread = threading.Thread(target=self._beat, daemon=True)
            self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.storage.record_heartbeat(self.trial_id)
            except Exception:  # noqa: BLE001 - a missed beat is retried next interval
                pass

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _result_from_attrs(attrs: dict[str, Any], config: Config) -> TrialResult:
    known = TrialResult.__dataclass_fields__
    data = {k: v for k, v in attrs.items() if k in known}
    data["config"] = config.to_dict()
    data.setdefault("status", "error")
    return TrialResult.from_dict(data)

