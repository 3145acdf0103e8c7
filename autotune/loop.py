"""The search loop: take a trial, measure its config (or reuse a repeat's figures), record it, tell the sampler.

One loop serves one process and many workers alike: what differs is the
:class:`~autotune.shared_study.TrialBudget` it takes trials from (a lock
nobody else takes, or the study's budget lock) and whether storage writes
are retried while a database server is away. Stops are handled here and in
:mod:`autotune.stopping`: a stop between taking and finishing a trial fails
it as lost, so it counts toward no budget and a resumed search re-runs it.
"""

from __future__ import annotations

import os
import random
import time
from typing import TYPE_CHECKING, Any, Callable

from autotune.config import Config
from autotune.environment import thread_pools
from autotune.exceptions import DiskFullError
from autotune.runner import TrialResult
from autotune.twins import loose_pass
from autotune.shared_study import DONE, FIRST_ROLES, WAIT, Heartbeat, TrialBudget, release_own_trials
from autotune.trials import (TrialRecord, best_throughput, in_flight, measured_configs, measured_here, never_measured,
                             result_of, to_attrs)

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from autotune.tuner import Tuner

__all__ = ["run_trials", "tell"]

Retry = Callable[[Callable[[], Any], str], Any]

#: Repeats of measured configs in a row before the loop enqueues an unseen allowed config (see _next_unseen);
#: a restricted config does so at once. A repeat costs nothing (its figures are reused), and the sampler,
#: told the repeat, asks again elsewhere. Measured on the recorded GPU spaces (benchmarks/search_quality.py,
#: 100-200 repeats, mean score at 20/50/100 evaluations): 5 (and 20) gave 0.29/0.53/0.66, moving on after
#: every repeat 0.28/0.47/0.63 (benchmarks/search_quality.md, "Letting the sampler ask again after a repeat").
REPEAT_LIMIT = 5


def run_trials(tuner: "Tuner", study: "optuna.Study", budget: TrialBudget, retry: Retry | None = None,
               poll_seconds: float = 2.0, every: list[Config] | None = None) -> list[TrialRecord]:
    """Run trials from ``budget`` until it is done, a stop is asked for, the time budget is spent, or each of
    ``every`` allowed config (where the space is small enough to list them: ``Tuner.configs``) is measured."""
    # The sampler's arithmetic (the linear model's solves) on one BLAS thread while trials are timed: after each
    # call OpenBLAS's threads spin about 0.1 s of a core (0.11 s of an idle process's CPU after a 300x300 solve,
    # none on one thread; this CPU), taken from the trial timed next and read as other work on an idle machine.
    with thread_pools(1, "blas"):
        return _run_trials(tuner, study, budget, retry, poll_seconds, every)


def _run_trials(tuner: "Tuner", study: "optuna.Study", budget: TrialBudget, retry: Retry | None,
                poll_seconds: float, every: list[Config] | None) -> list[TrialRecord]:
    guard: Retry = retry or (lambda action, what: action())
    # Workers on one study draw different fresh configs after a repeat.
    rng = random.Random(None if tuner.seed is None else tuner.seed + (os.getpid() if budget.shared else 0))
    records: list[TrialRecord] = []
    repeats = 0
    # Once all are measured the search ends, rather than ask its sampler for repeats until it gives up
    # (DUPLICATE_ASK_FACTOR asks per trial of the budget). A replay needs no such end: its budget is at most
    # the configs it has, and listing 300,000 of them up front cost 5 s and 130 MiB (benchmarks/large_space.py).
    every = every or []
    try:
        while not tuner.should_stop():
            if every:
                trials = guard(lambda: study.get_trials(deepcopy=False), "reading the study")
                known = measured_configs(trials, tuner.measured_with, tuner.runner.timeout, tuner.memory_limit_bytes)
                busy = in_flight(tuner.space, trials)
                left = [c for c in every if c.key not in known] if len(known) + len(busy) >= len(every) else every
                if not left:
                    tuner.on_stage(f"all {len(every)} allowed configs of the space are measured: no new trials"
                                   if len(every) > 1 else "the space's one allowed config is measured: no new trials")
                    break
                if left is not every and all(c.key in busy for c in left):
                    # The rest are other workers' trials now: wait, as one may die and its retry needs a worker.
                    time.sleep(poll_seconds)
                    guard(budget.release_dead, "failing dead workers' trials")  # as take() would: this worker takes none
                    continue
            trial = guard(budget.take, "taking a trial")
            if trial is DONE:
                if said := budget.out_of_asks():  # else a search of 20 trials ended at 15 without a word
                    tuner.on_stage(said)
                break
            if trial is WAIT:
                # Other workers' trials fill the budget for now; one of them may die, and its retry needs a worker.
                time.sleep(poll_seconds)
                continue
            trials = guard(lambda: study.get_trials(deepcopy=False), "reading the study")
            known = measured_configs(trials, tuner.measured_with, tuner.runner.timeout, tuner.memory_limit_bytes)
            # A config is cut short against a best measured as it is now, not with another torch or workload code.
            here = [t for t in trials if measured_here(t, tuner.measured_with)]
            best = best_throughput(here, tuner.memory_budget_bytes)
            with Heartbeat.of_trial(budget.storage, trial._trial_id, budget.heartbeat):
                record = run_trial(tuner, study, trial, trials, known, best, guard)
            repeats = repeats + 1 if record is not None and record.duplicate_of is not None else 0
            if record is None or repeats >= REPEAT_LIMIT:
                unseen = {**known, **in_flight(tuner.space, trials, trial.number)}  # nor another worker's
                fresh, role = _next_unseen(tuner, study, unseen, rng, every)
                if fresh is not None:
                    guard(lambda: study.enqueue_trial(tuner.space.sampled_params(fresh), user_attrs={"role": role}),
                          "queueing an unseen config")
                repeats = 0
            if record is None:  # not measured by this trial (see run_trial): not a trial of the budget
                tuner.on_stage(f"trial #{trial.number} not measured, not counted: {never_measured(trial)}")
                continue
            after = None  # the study as this trial ended, where workers share it
            if budget.shared:  # other workers' trials that ended meanwhile: a worker's line showed its own best alone
                after = guard(lambda: study.get_trials(deepcopy=False), "reading the study")
                here = [t for t in after if t.number != trial.number and measured_here(t, tuner.measured_with)]
            record.study_best = best_throughput(here, tuner.memory_budget_bytes)  # a resumed study's best, too
            if record.role in FIRST_ROLES:
                tuner.first_measured()
            records.append(record)
            if tuner.on_trial is not None:
                done, total = guard(lambda: budget.progress(after), "reading the study")
                tuner.on_trial(record, done, total)
    except KeyboardInterrupt:
        # A stop can land between taking a trial and measuring it: fail every trial this
        # process holds, so none is left RUNNING and none counts.
        release_own_trials(study)
        raise
    return records


def run_trial(tuner: "Tuner", study: "optuna.Study", trial: "optuna.Trial", trials: list["FrozenTrial"],
              known: dict[str, int], best: float, guard: Retry) -> TrialRecord | None:
    """Suggest, measure (or reuse a repeat's figures), record and tell one trial; None for a config not measured
    by it (one that breaks a constraint, or that another worker is measuring)."""
    config = tuner.space.suggest(trial)
    role = trial.user_attrs.get("role", "search")
    broken = tuner.space.violated(config)
    if broken is not None:
        _skip(study, trial, {"restricted": broken, "config": config.to_dict()}, guard)
        return None
    duplicate_of = known.get(config.key)
    measuring = None if duplicate_of is not None else in_flight(tuner.space, trials, trial.number).get(config.key)
    if measuring is not None:
        # Another worker is measuring this config now: measured twice, it would cost a trial of the budget and
        # the time of one. Two workers on a five-config space measured the baseline's config twice this way.
        _skip(study, trial, {"in_flight": measuring, "config": config.to_dict()}, guard)
        return None
    if duplicate_of is not None:
        # Measured already: reuse its figures rather than spend the time again (see REPEAT_LIMIT).
        # Read from the trials already fetched (``known`` came from them), never `study.trials`: that deep-copies
        # every trial, which made a search of n trials O(n^2) per trial late in a space (280 s for 1,000).
        result = result_of(trials[duplicate_of], config)
    else:
        try:
            # The baseline is always measured in full: every ratio is taken against it.
            result = tuner.runner.run(tuner.request(config, best_throughput=None if role == "baseline" else best))
        except KeyboardInterrupt:
            # The trial's child is gone; say so in the study rather than leave it RUNNING.
            # "lost" keeps it out of the trial budget: a resumed search measures another.
            from optuna.trial import TrialState

            for key, value in {"status": "error", "lost": True, "config": config.to_dict(),
                               "error": "interrupted before the trial finished"}.items():
                trial.set_user_attr(key, value)
            study.tell(trial, state=TrialState.FAIL)
            raise
        known[config.key] = trial.number
    attrs = to_attrs(result, config, role, duplicate_of, tuner.measured_with, tuner.memory_limit_bytes)
    reference = getattr(tuner, "reference_config", None) if result.status == "ok" else None  # none in a replay
    here = [t for t in trials if measured_here(t, tuner.measured_with)] if reference is not None else []
    if loose := loose_pass(attrs, here, reference):  # its twin measured as the code is now
        attrs["loose"] = loose
    guard(lambda: _record(trial, attrs), "recording a trial")
    fits = guard(lambda: tell(study, trial, result, tuner.memory_budget_bytes, tuner.memory_bytes, "loose" in attrs),
                 "finishing a trial")
    if result.lost:  # every next trial would fail as this one did, and be recorded as its config's error
        raise DiskFullError(f"trial #{trial.number} could not write to a disk ({result.error}); it is kept as lost, "
                            "not as its config's error: free space, then run the same command again to resume")
    return TrialRecord(trial.number, config, result, role, duplicate_of, fits_memory=fits,
                       unused=tuner.space.unused(config), loose=attrs.get("loose"))


def _skip(study: "optuna.Study", trial: "optuna.Trial", attrs: dict[str, Any], guard: Retry) -> None:
    """A config that breaks a constraint, or that another worker is measuring, is not measured by this trial and
    never counts (``trials.never_measured``): the sampler is told the trial failed, and the loop moves on."""
    from optuna.trial import TrialState

    guard(lambda: _record(trial, attrs), "recording a trial")
    guard(lambda: study.tell(trial, state=TrialState.FAIL), "finishing a trial")


def _record(trial: "optuna.Trial", attrs: dict[str, Any]) -> None:
    for key, value in attrs.items():
        trial.set_user_attr(key, value)


def tell(study: "optuna.Study", trial: "optuna.Trial", result: TrialResult, memory_budget_bytes: int | None,
         memory_bytes: int, loose: bool = False) -> bool:
    """Finish a trial in the study: its objectives, and constraints that make wrong or oversized configs infeasible
    (a pass only a looser tolerance than its failed twin's allowed, ``loose``, is wrong: see twins.loose_pass).

    Returns whether it fits ``--memory-budget`` (the rule the progress line shows, kept in one place)."""
    from optuna.trial import TrialState

    if result.status not in ("ok", "incorrect", "oom"):
        study.tell(trial, state=TrialState.FAIL)
        return True
    check = result.check or {}
    if result.status == "ok":
        correct = 1.0 if loose else 0.0
    elif result.status == "incorrect" and check.get("error") is not None:
        correct = max(check["error"] / check["tolerance"] - 1.0, 1e-9) if check["tolerance"] else 1.0
    else:
        correct = 1.0  # out of memory, or an unbounded error (NaN output)
    trial.set_constraint("correct", correct)
    if result.status == "oom":
        # Nothing was produced; the run needed at least all the memory there was.
        throughput, memory = 0.0, float(memory_bytes)
    else:
        throughput, memory = float(result.throughput or 0.0), float(result.peak_memory_bytes or 0)
    over = (memory - memory_budget_bytes) / memory_budget_bytes if memory_budget_bytes else 0.0
    trial.set_constraint("fits_memory", over)
    # A study of one objective (throughput) leaves memory to the constraint and the tie-break.
    study.tell(trial, [throughput, memory][: len(study.directions)])
    return over <= 0


def _next_unseen(tuner: "Tuner", study: "optuna.Study", known: dict[str, int], rng: random.Random,
                 every: list[Config], tries: int = 200) -> tuple[Config | None, str]:
    """An allowed config not measured yet, after a restricted ask or a sampler that keeps asking for measured ones.

    A sampler that repeats itself has converged on the best configs found:
    a neighbour of the best one (one knob moved to an adjacent value) is
    measured next ("neighbour"); where none is left, a config at random
    ("random"), so that a sampler stuck on a small space still moves on.

    A move that breaks a constraint is mended by one more move, not thrown
    away, so that a neighbourhood reaches across a constraint: from chmm's
    loop kernel in bfloat16, a move to numba (which runs float32 and
    float64 only) becomes numba in float32 or float64. On a CPU with
    bfloat16, one quick start in six stopped at that loop kernel (6.6x)
    while the sampler asked six times for numba in bfloat16; single moves
    from there reached numba in 5 of 531 allowed neighbours, mended ones in
    43 of 600. Measured on the recorded GPU spaces (benchmarks/search_quality.md,
    "Mending a neighbour move"): within noise.
    """
    from optuna.trial import TrialState

    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.user_attrs.get("status") == "ok" and "config" in t.user_attrs]
    if done:
        best = Config(max(done, key=lambda t: t.user_attrs.get("throughput") or 0.0).user_attrs["config"])
        for _ in range(tries):
            config = tuner.space.neighbour(best, rng)
            if tuner.space.violated(config) is not None:
                mended = [c for c in tuner.space.repairs(config) if c.key not in known]
                if not mended:
                    continue
                config = rng.choice(mended)
            if config.key not in known:
                return config, "neighbour"
    for _ in range(tries):
        config = tuner.space.sample(rng)
        if config.key not in known and tuner.space.violated(config) is None:
            return config, "random"
    # A sparse space, where random draws miss: a recorded one lists its configs (a study's 8 configs of lsd
    # are 8 of 19,200 combinations of their knobs' values), and its replay goes on to the last of them; so
    # does a search of a space small enough to list.
    listed = every or tuner.configs()
    if listed:
        left = [config for config in listed if config.key not in known]
        return (rng.choice(left) if left else None), "random"  # None: the space is (nearly) exhausted
    # A space too large to list, whose allowed configs random draws miss: a chunk that must divide a length of 2**20,
    # drawn from 16..65536, divides it at 13 of 65,521 values. A search of mine ended at 15 of its 20 trials, its asks
    # spent on repeats and broken constraints. The allowed moves from each measured config, fastest first, reach them.
    for trial in sorted(done, key=lambda t: t.user_attrs.get("throughput") or 0.0, reverse=True):
        if moves := [config for config in tuner.space.repairs(Config(trial.user_attrs["config"]))
                     if config.key not in known]:
            return rng.choice(moves), "neighbour"  # workers on one study draw different ones
    return None, "random"
