"""The tuner: an Optuna study over a workload's space, and the re-measured winner.

One search is:

1. validate everything (workload, size, device, space) before writing anything;
2. open (or resume) the study ``<workload>-<device>-<size>`` in the storage;
3. make sure the reference output is cached (the workload's reference config);
4. enqueue the baseline, the defaults and any probes as the first trials of a new study (SearchSpace.firsts);
5. run the trial budget (the time budget starts once those two are measured): each config is measured and checked
   in a fresh process; an incorrect or out-of-memory result is infeasible, so it can never be chosen;
6. re-measure the best few feasible configs and the baseline interleaved, in rounds, pick the winner (ties within
   noise broken deterministically) and export it with its speedup.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from autotune.config import (Config, as_asked, config_path, default_storage, make_cache, studies_dir, writable,
                             writable_file)
from autotune.devices import DetectedDevice, cpu_threads, resolve_device
from autotune.environment import before_timing, busy_cores, threads_asked
from autotune.exceptions import AutotuneError, UnknownNameError
from autotune.export import ExportDocument
from autotune.loop import run_trials
from autotune.runner import Runner, TrialRequest, TrialResult, unless_lost
from autotune.search_result import SearchResult
from autotune.samplers import OBJECTIVES, SAMPLERS, make_sampler
from autotune.measure import Measurer
from autotune.choices import choice_outcomes
from autotune.selection import (REMEASURE_MIN_RUNS, Candidate, candidates as select, loaded_rounds, pick_winner,
                                remeasure, runs_per_round, speedup_interval)
from autotune.limits import check_limits, check_numbers
from autotune.shared_study import (FIRST_ROLES, NoLock, TrialBudget, claim_budget, elect_exporter, enqueue_first,
                                   exporting)
from autotune.space import SearchSpace, load_space
from autotune.storage import (BudgetLock, check_heartbeat, open_storage, redact_storage, retrying, storage_failure,
                              storage_kind, user_storage)
from autotune.stored import check_made_for, check_measured
from autotune.trials import TrialRecord, counted, feasible, so_far, status_counts
from autotune.twins import checked
from autotune.registry import (BUILTINS, WorkloadFacts, cache_folder, earlier_versions, measured_with,
                               numba_folder, trial_spec)
from autotune.tuned import known_workload

if TYPE_CHECKING:
    import optuna

__all__ = ["Candidate", "SearchResult", "TrialRecord", "Tuner", "redact_storage"]

# A config this many times slower than the study's best, on its first run and its first warm run, stops
# there (cut_short): a 100x slower config needs no median of five runs to lose (on a CPU, minutes a run).
HOPELESS_FACTOR = 20.0
# The race: a config whose warm-up has settled (two consecutive runs within 10%) more than this many times
# slower than the study's best stops there (cut_short). Its true median cannot reach the best's: one warm
# run lay within 0.79-1.81x of its config's median (298 runs of 45 trials, quick-start studies on the
# 2-core CPU; benchmarks/run_spread.py), so a config cut at 3x is at least 3 / 1.81 = 1.66x slower.
RACE_FACTOR = 3.0


class Tuner:
    """Searches the fastest correct config of one workload on one device.

    Construction validates the workload, size, device and space and writes
    nothing; :meth:`search` opens the study, runs trials and exports, and stops the process trials fork from;
    after :meth:`run_config` it runs until :meth:`close`, or the end of a ``with Tuner(...) as tuner:`` block.

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
        storage: str | None = None, study_name: str | None = None, studies: str | Path | None = None,
        isolation: str = "subprocess", trial_timeout: float | None = None, runner: Runner | None = None,
        memory_budget_bytes: int | None = None, memory_limit_bytes: int | None = None,
        measurer: dict[str, Any] | None = None, remeasure_top: int = 3, remeasure_rounds: int = 3,
        seed: int | None = None, sampler: "optuna.samplers.BaseSampler | str | None" = None, threads: int | None = None,
        on_trial: Callable[[TrialRecord, int, int], None] | None = None, on_stage: Callable[[str], None] | None = None,
        heartbeat: int | None = None, grace_period: int | None = None, time_budget: float | None = None,
    ) -> None:
        # As the command line's options allow (from Python, remeasure_rounds=0 found no winner without a word).
        check_numbers(remeasure_top=remeasure_top, remeasure_rounds=remeasure_rounds, threads=threads, seed=seed,
                      memory_budget_bytes=memory_budget_bytes, memory_limit_bytes=memory_limit_bytes, studies=studies,
                      heartbeat=heartbeat, grace_period=grace_period, trial_timeout=trial_timeout,
                      time_budget=time_budget, measurer=measurer, study_name=study_name, storage=storage)
        self.workload_spec = workload
        # A built-in's facts are read from its source: this process never imports it (nor torch, for the CPU),
        # so a bad name, size or --set is refused in half a second; the runner's children run the workload.
        self.workload: WorkloadFacts = known_workload(workload, studies)  # a file's by its name: says how to name it
        self.size = self.workload.size_named(size)
        self.detected: DetectedDevice = resolve_device(device)
        self.device = self.detected.profile
        self.space: SearchSpace = (load_space(workload, self.workload.name).for_device(self.device)
                                   .for_size(self.workload.sizes[self.size], self.size))
        self.reference_config = self.space.reference
        self.studies = Path(studies) if studies is not None else studies_dir()
        self.storage = user_storage(storage) if storage else default_storage(self.studies)
        self.study_name = study_name or f"{self.workload.name}-{self.device.name}-{self.size}"
        self.cache_dir = self.studies / "cache" / self.workload.name / cache_folder(workload, self.workload, self.size)
        self.runner = runner or Runner(isolation, trial_timeout)  # given: its server may be starting already
        self.trial_workload = trial_spec(workload) if self.runner.isolation != "inprocess" else workload
        check_limits(self.runner.isolation, self.device.kind, memory_limit_bytes, trial_timeout)
        self.memory_budget_bytes = memory_budget_bytes
        self.memory_limit_bytes = memory_limit_bytes  # a hard limit on a trial's address space (CPU only)
        self.measurer = dict(measurer or {})
        self.remeasure_top, self.remeasure_rounds, self.seed = remeasure_top, remeasure_rounds, seed
        self.sampler = sampler  # a sampler, or a strategy's name (autotune.samplers); default samplers.DEFAULT
        if isinstance(sampler, str) and sampler not in SAMPLERS:
            raise UnknownNameError("sampler", sampler, SAMPLERS)
        self.threads, self.on_trial = threads or threads_asked(), on_trial  # $OMP_NUM_THREADS, as torch takes it
        self.measured_with = measured_with(workload, self.reference_config, self.threads or cpu_threads())
        self.on_stage = on_stage or (lambda message: None)
        # A trial silent for minutes (ten's cold compile at small, 615 s) is said to run, every minute.
        self.runner.on_wait = self._still_running
        self.stop_requested = False  # set by a caller (or the time budget): no new trial is taken
        self.time_budget = time_budget  # seconds, then no new trial (the running one finishes; re-measure, export)
        self._deadline: float | None = None
        self._held = contextlib.ExitStack()  # the shared search lock of workers' studies (claim_budget)
        self.firsts_left = 0  # the baseline and defaults still to measure before the time budget starts
        check_heartbeat(heartbeat, grace_period)  # heartbeats: other workers re-queue a dead one's trial
        self.heartbeat, self.grace_period = heartbeat, grace_period
        self._storage_object: Any = None
        # What an out-of-memory trial is recorded as needing: all the memory there was.
        self.memory_bytes = int(self.detected.memory_bytes or self.device.memory_bytes or 0)

    # -- pieces ------------------------------------------------------------------

    def _still_running(self, request: TrialRequest | None, seconds: float) -> None:
        self.on_stage(f"the fork server, which every trial forks from, is still importing torch after {seconds:.0f} s "
                      "(a first import from a cold disk or a network file system can take a minute)" if request is None
                      else f"{request.purpose} still running after {seconds:.0f} s (a first run that compiles can "
                      f"take minutes): {(config := Config(request.config)).describe(self.space.unused(config))}")

    export_path = property(lambda self: config_path(self.workload.name, self.device.name, self.size, self.studies))

    def request(self, config: Config, purpose: str = "trial", min_runs: int | None = None,
                best_throughput: float | None = None, warm_seconds: float | None = None) -> TrialRequest:
        measurer = dict(self.measurer, warm_seconds=warm_seconds)  # a run time it is known to settle at
        if min_runs is not None:
            measurer["min_runs"] = max(min_runs, measurer.get("min_runs", 0))
        if best_throughput:
            measurer["hopeless_below"] = best_throughput / HOPELESS_FACTOR
            measurer["race_below"] = best_throughput / RACE_FACTOR
        return TrialRequest(
            workload=self.trial_workload,  # as a trial's process finds it
            size=self.size, device=self.device.name, torch_device=self.device.torch_device,
            config=config.to_dict(), reference=self.reference_config.to_dict(),  # names the reference's file
            cache_dir=str(self.cache_dir), measurer=measurer, threads=self.threads, purpose=purpose,
            memory_limit_bytes=self.memory_limit_bytes if purpose == "trial" else None,
        )

    def configs(self) -> list[Config]:
        """Every allowed config, where the space can list them (``SearchSpace.every_config``); else none."""
        return self.space.every_config()

    def ensure_reference(self) -> None:
        """Compute and cache the reference output once per workload, size, version and device. Every command
        that times configs calls it first, so it is also where a busy CPU is reported."""
        writable(numba_folder(self.cache_dir), "numba's compiled kernels", within=True)  # else numba trials fail
        busy = None
        if self.device.torch_device == "cpu":
            self.runner.wait_ready()  # a fork server still importing torch is no other work
            busy = busy_cores()
        for warning in before_timing(busy, builtin=self.workload_spec in BUILTINS, threads=self.threads):
            self.on_stage(f"warning: {warning}")
        request = self.request(self.reference_config, "reference")
        timeout = max(self.runner.timeout * 4, 600)  # a reference's run, or its load, is no trial: no trial timeout
        if request.reference_path.is_file():
            cached = self.runner.run(self.request(self.reference_config, "cached reference"), timeout=timeout)
            if cached.status == "ok":
                return
            warnings.warn(f"the cached reference {request.reference_path} is not plain tensor data "
                          f"(corrupt, or not written by autotune: {cached.error}); computing it again", stacklevel=2)
            request.reference_path.unlink()
        self.on_stage(f"computing the reference output "
                      f"({self.reference_config.describe(self.space.unused(self.reference_config))})")
        make_cache(self.cache_dir)
        result = self.runner.run(request, timeout=timeout)
        if result.status != "ok":
            raise AutotuneError(f"the reference config of {self.workload.name!r} failed ({result.status}): "
                                f"{result.error}")
        for line in earlier_versions(self.workload_spec, self.cache_dir):  # a file edited: said once per edit
            self.on_stage(f"warning: {line}")

    def run_config(self, config: Mapping[str, Any]) -> TrialResult:
        """Measure and check one config the space allows (the knobs it leaves out at their defaults)."""
        # A value it refuses ran ("KeyError: 'bogus'"), and one it would run as another (an inactive knob's) ran so.
        config = as_asked(self.space, config, self.space.allowed(config), "")
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

    def _sampler(self) -> "optuna.samplers.BaseSampler":
        if self.sampler is not None and not isinstance(self.sampler, str):
            return self.sampler
        return make_sampler(self.sampler, self.seed, self.space, parallel=storage_kind(self.storage) != "sqlite")

    def open_study(self) -> "optuna.Study":
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = self._sampler()  # outside the try: a sampler's error is not the storage's
        try:
            study = optuna.create_study(
                storage=self.storage_object(), study_name=self.study_name,
                # One objective: the sampler chases throughput alone; peak memory is a constraint (--memory-budget)
                # and breaks ties at the re-measurement. Two objectives made the search near random on recorded
                # spaces (benchmarks/search_quality.py). An older version's study keeps its two (loaded as stored).
                directions=OBJECTIVES, sampler=sampler, load_if_exists=True,
            )
        except Exception as exc:  # noqa: BLE001 - any driver error means the same to the user
            raise storage_failure(self.storage, exc) from None
        where = f"study {self.study_name} in {redact_storage(self.storage)}"
        made_for = {"workload": self.workload.name, "device": self.device.name, "size": self.size,
                    "workload_version": self.workload.version}
        check_made_for(study, where, **made_for)
        self.space.check_study(study, where)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(["throughput", "peak_memory_bytes"][: len(study.directions)])
        # The budget of the latest search: the report judges which trials may win by it, as the search did.
        latest = {"unit": self.workload.unit, "space": str(self.space.source),
                  "memory_budget_bytes": self.memory_budget_bytes, "facts": self.space.facts}
        for key, value in {**made_for, **latest}.items():
            if study.user_attrs.get(key) != value:
                study.set_user_attr(key, value)
        return study

    # -- the search ----------------------------------------------------------------

    def search(self, n_trials: int = 20) -> SearchResult:
        """Measure ``n_trials`` more configs (resuming the study), re-measure the best and export.

        A config the study has measured is a trial that reuses the earlier figures (``duplicate_of``), uncounted."""
        check_numbers(n_trials=n_trials)  # as --trials: -1 and 2.5 ran, "3" was a TypeError from inside
        writable_file(self.export_path, "the export")  # refused now, not after every trial and the re-measurement
        if n_trials == 0:  # re-measure and export alone: a study with nothing measured is refused, nothing written
            check_measured(self.storage, self.study_name, self.export_path)
        try:
            with self._lock().searching():  # another search of the study now: refused before anything is written
                return self._search(n_trials, time.perf_counter())
        finally:
            # A search is one job: its fork server (torch imported, 230 MB) stops with it. Left to the collector, a
            # notebook's first Tuner kept it: Optuna keeps an ImportError (redis) with the stack that imported it.
            self.runner.close()

    def _search(self, n_trials: int, started: float) -> SearchResult:
        study = self.open_study()
        self.on_stage(f"study {self.study_name} in {redact_storage(self.storage)} ({self.trials_so_far(study)})")
        inprocess = self.runner.isolation == "inprocess"  # chmm's baseline at tiny read 401 MiB so, 183 MiB alone
        for warning in self.space.left_out() + ["--isolation inprocess runs every trial in this process: a peak memory "
                                                "is this process's, and what one compiled is warm for the next "
                                                "(debugging only; its export says so)"] * inprocess:
            self.on_stage(f"warning: {warning}")
        if warm := self.runner.warm_up():  # the wait: the server started with the command ("ready in 0.0 s" misread)
            self.on_stage(f"fork server ready (waited {warm:.1f} s; torch imported once, each trial forks from it)")
        self.ensure_reference()
        lock = NoLock()
        with lock.held():
            # The baseline (what users run) and the defaults (untuned) first: every study reports both.
            self._retry(lambda: enqueue_first(study, self.space.first_params()), "queueing the first configs")
        self.firsts_left = sum(t.user_attrs.get("role") in FIRST_ROLES
                               for t in study.get_trials(deepcopy=False) if t.state.name == "WAITING")
        done = len(counted(study.get_trials(deepcopy=False)))
        budget = TrialBudget(study, done + n_trials, lock, self.storage_object(), None, self.grace_period, shared=False)
        self._start_clock(time.perf_counter())  # the time budget is for trials: the reference is made by now
        records = run_trials(self, study, budget, self._retry, every=self.configs())
        return self.finish(study, records, started)

    def _retry(self, action: Callable[[], Any], what: str) -> Any:
        # One process or many, a storage that stops answering a while (a SQLite file another program holds past
        # its 5 s busy wait, a server restarting) is waited for, then a clean stop: not a traceback.
        return retrying(action, what, self.storage, on_retry=self.on_stage)

    # -- many workers on one study ----------------------------------------------------

    def claim_budget(self, n_trials: int) -> int:
        """Open the shared study and settle its trial budget (see :func:`autotune.shared_study.claim_budget`); a
        lone search of the study is refused from now until :meth:`close`, as this is while one runs."""
        writable_file(self.export_path, "the export")  # refused now: one of them exports at the end
        self._held.enter_context(self._lock().searching(shared=True))
        return claim_budget(self.open_study(), self._lock(), n_trials, self.space.first_params(), self.grace_period)

    def work(self, budget: int, poll_seconds: float = 2.0) -> list[TrialRecord]:
        """One worker's loop on a shared study, until it holds ``budget`` counted trials."""
        self._start_clock(time.perf_counter())
        study = self.open_study()
        trials = TrialBudget(study, budget, self._lock(), self.storage_object(), self.heartbeat, self.grace_period,
                             shared=True)
        return run_trials(self, study, trials, self._retry, poll_seconds, self.configs())

    def trials_so_far(self, study: "optuna.Study | None" = None, threads: int | None = None) -> str:
        """The trials the study counts ("4 trials so far"), those measured otherwise (``threads``: a worker's cores)."""
        own = self.threads if self.threads != threads_asked() else None  # --threads; else $OMP_NUM_THREADS, or none
        worker = threads and (own or min(threads, self.threads or threads))  # a worker's cores hold the rest
        mine = {**self.measured_with, **({"threads": str(worker)} if worker else {})}
        return so_far((study or self.open_study()).get_trials(deepcopy=False), mine)

    def budget_done(self, budget: int) -> bool:
        return len(counted(self.open_study().get_trials(deepcopy=False))) >= budget

    def finish_shared(self, budget: int, started: float | None = None) -> "SearchResult | None":
        """Re-measure and export, by exactly one of the processes that worked to ``budget`` (else None); the
        result's time counts from ``started`` (``time.perf_counter()``; default: now)."""
        started = time.perf_counter() if started is None else started
        study = self.open_study()
        if not elect_exporter(study, self._lock(), budget, self.grace_period):
            return None
        with exporting(study, self._lock(), self.heartbeat):  # beats on a database server: a dead host is seen
            return self.finish(study, [], started)

    def _lock(self) -> BudgetLock:
        return BudgetLock(self.storage, self.study_name)

    def _start_clock(self, started: float) -> None:
        self._deadline = started + self.time_budget if self.time_budget else None

    def first_measured(self) -> None:
        """Once the baseline and defaults are measured (every study reports both), the time budget starts.

        On an H100, chmm's baseline at `small` spent a 25 s budget alone: its "winner" was the baseline."""
        if self.firsts_left > 0:
            self.firsts_left -= 1
            if self.firsts_left == 0:
                self._start_clock(time.perf_counter())

    def should_stop(self) -> bool:
        """A stop was asked for, or the time budget (``--timeout``) is spent: take no new trial."""
        if self._deadline is not None and not self.firsts_left and time.perf_counter() >= self._deadline:
            if not self.stop_requested:
                self.on_stage(f"time budget of {self.time_budget:g} s spent: no new trials")
            self.stop_requested = True
        return self.stop_requested

    # -- the winner --------------------------------------------------------------------

    pick_winner = staticmethod(pick_winner)

    def remeasure(self, candidates: list[Candidate]) -> None:
        # The candidates' pooled runs decide the winner (their notches): REMEASURE_MIN_RUNS a round. The baseline's
        # set the speedup: the trials' minimum (3 runs) pooled over the rounds, as its runs are the longest (4 s, chmm).
        baseline_runs = runs_per_round(int(self.measurer.get("min_runs", Measurer.min_runs)), self.remeasure_rounds)

        def run(candidate: Candidate) -> TrialResult:
            request = self.request(candidate.config, min_runs=REMEASURE_MIN_RUNS, warm_seconds=candidate.warm_seconds)
            if candidate.role == "baseline":
                request.measurer["min_runs"] = baseline_runs
            return unless_lost(self.runner.run(request))  # a full disk's failure is no candidate's

        remeasure(candidates, checked(run, self.on_stage), self.remeasure_rounds, self.on_stage)  # a twin first

    def finish(self, study: "optuna.Study", records: list[TrialRecord], started: float) -> SearchResult:
        trials = study.get_trials(deepcopy=False)
        candidates = select(trials, self.space.baseline, self.remeasure_top, self.memory_budget_bytes,
                            allows=self.space.admits, on_stage=self.on_stage, timeout=self.runner.timeout,
                            reference=self.reference_config)
        winner = baseline = speedup = document = export_path = None
        # Re-measure when something may win: a baseline alone only if its trial was feasible (not wrong, not over budget).
        if len(candidates) > 1 or any(feasible(t, self.memory_budget_bytes) for t in trials if t.number == candidates[0].trial):
            self.remeasure(candidates)
            winner = self.pick_winner(candidates, self.memory_budget_bytes)
            baseline = candidates[0]

        def note(key: str, value: Any) -> None:  # after minutes of re-measuring: a storage held a while is waited for
            self._retry(lambda: study.set_user_attr(key, value), "recording the winner")

        environment = next((r.environment for c in candidates for r in c.results if r.environment), None)
        if environment:
            note("environment", environment)  # the report shows it even without an export
        note("device_name", self.detected.name)
        if winner is not None and baseline is not None:
            base_m, win_m = baseline.measurement, winner.measurement
            if base_m is not None and win_m is not None and baseline.passed:
                speedup = win_m.throughput / base_m.throughput
            document = self._document(study, winner, baseline, speedup, candidates)
            path = self.export_path
            try:
                export_path = document.write(path)
            except OSError as exc:
                # Every trial is in the study; say what won, so the re-measurement is not lost with the file.
                figure = f", {speedup:.2f}x the baseline" if speedup else ""  # none: a baseline failed or unmeasured
                raise AutotuneError(
                    f"cannot write the export {path}: {exc.strerror or exc}; the winner was trial #{winner.trial} "
                    f"({winner.config.describe()}{figure}); fix the path and run `autotune search` again") from None
            note("winner_trial", winner.trial)
            note("speedup", speedup)
        return SearchResult(
            workload=self.workload.name, device=self.device.name, size=self.size,
            study_name=self.study_name, storage=redact_storage(self.storage), unit=self.workload.unit,
            trials=records, counts=(counts := status_counts(study.get_trials(deepcopy=False))), candidates=candidates,
            winner=winner, baseline=baseline, speedup=speedup, export_path=export_path, document=document,
            seconds=time.perf_counter() - started, restricted=sum("restricted" in t.user_attrs for t in trials),
            choices=choice_outcomes(study, self.space, winner.config if winner else None, self.memory_budget_bytes,
                                    {c.trial: c.passed for c in candidates if c.results and c is not winner}),
            unused=self.space.unused(winner.config) if winner else (),
            only_baseline=sum(counts.values()) == 1 and winner is baseline and winner is not None
            and winner.config.key != self.space.defaults.key,  # a one-config space's defaults are its baseline
        )

    def _document(self, study: "optuna.Study", winner: Candidate, baseline: Candidate, speedup: float | None,
                  candidates: list[Candidate]) -> ExportDocument:
        return ExportDocument(
            workload=self.workload.name, device=self.device.name, device_name=self.detected.name,
            size=self.size, workload_version=self.workload.version,
            config=winner.config.to_dict(), measured=winner.figures(), check=winner.check,
            baseline={"config": baseline.config.to_dict(), **(baseline.figures() or {})}, speedup=speedup,
            remeasure={"rounds": len(winner.results), "speedup_interval": speedup_interval(baseline, winner),
                       "beside_other_work": loaded_rounds(c.results for c in candidates), "candidates": [
                {"trial": c.trial, "role": c.role, "passed": c.passed,
                 "throughput": (c.measurement.throughput if c.measurement else None),
                 "statuses": [r.status for r in c.results], "error": c.error} for c in candidates]},
            environment={**next((r.environment for r in winner.results if r.environment), {}),
                         **({"isolation": "inprocess"} if self.runner.isolation == "inprocess" else {}),
                         "workload_code": self.measured_with["workload"]},  # load_config tells an edited file
            # Its trials that count: measured (a first config queued, a restricted ask, a lost trial is none).
            study={"name": self.study_name, "storage": redact_storage(self.storage),
                   "trials": len(counted(study.get_trials(deepcopy=False))),
                   "memory_budget_bytes": self.memory_budget_bytes},  # a config over it could not win: `best` says so
            trial=winner.trial, exported_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        )

    def close(self) -> None:
        self.runner.close()
        self._held.close()

    def __enter__(self) -> "Tuner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
