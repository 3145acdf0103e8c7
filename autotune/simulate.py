"""Simulation: a search replayed on a recorded space, scored against the true optimum.

:func:`simulate` drives the search loop of ``autotune search``
(:func:`autotune.loop.run_trials`: the same sampler, repeat handling,
restrictions, enqueued baseline and stopping) with a runner that answers each
config from a :class:`~autotune.recorded.Recorded` space instead of running
it. A study lives in memory; one repeat takes a second or so.

:func:`score` is the method of ``../shared/recorded/README.md`` (Willemsen et
al., FGCS 2024): ``P(M) = (b(M) - best(M)) / (b(M) - optimum)``, where
``b(M)`` is the expected best of M configs drawn uniformly without replacement
from every recorded config. Random search scores 0 on average, the optimum 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from autotune.config import Config
from autotune.exceptions import AutotuneError
from autotune.loop import run_trials
from autotune.recorded import Recorded
from autotune.runner import TrialResult
from autotune.samplers import DEFAULT, OBJECTIVES, SAMPLERS, make_sampler
from autotune.shared_study import NoLock, TrialBudget, enqueue_first
from autotune.trials import TrialRecord

__all__ = ["Repeat", "expected_random_best", "repeats_json", "run_repeats", "score", "simulate", "simulation_table",
           "strategies_asked", "summary", "time_score"]


@dataclass
class Repeat:
    """One simulated search: its seed and the best recorded objective after each evaluation."""

    seed: int
    evaluations: int
    best_so_far: list[float | None]
    wall_seconds: float = 0.0
    #: The recorded cost of the evaluations so far (compile, benchmark, ...: seconds), after each one.
    seconds_so_far: list[float] = field(default_factory=list)


class _Replay:
    """The runner of a simulation: a config's recorded outcome, never a run."""

    timeout = None  # a recorded timeout is the config's, under whatever limit it was recorded

    def __init__(self, recorded: Recorded) -> None:
        self.recorded = recorded

    def run(self, config: Config) -> TrialResult:
        return self.recorded.result(config)


@dataclass
class _Simulation:
    """What the search loop asks of a tuner, for a recorded space (see :class:`autotune.tuner.Tuner`)."""

    recorded: Recorded
    seed: int
    on_trial: Callable[[TrialRecord, int, int], None] | None = None
    memory_budget_bytes: int | None = None
    memory_bytes: int = 0
    memory_limit_bytes: None = None
    measured_with: None = None  # every recorded outcome is of one setup
    runner: _Replay = field(init=False)

    def __post_init__(self) -> None:
        self.space = self.recorded.space
        self.runner = _Replay(self.recorded)

    def request(self, config: Config, best_throughput: float | None = None) -> Config:
        return config

    def should_stop(self) -> bool:
        return False

    def first_measured(self) -> None:
        """A simulation has no time budget to start."""

    def configs(self) -> list[Config]:
        """Every config of the space: those recorded that keep its constraints (see ``loop._next_unseen``)."""
        return self.recorded.configs

    def on_stage(self, message: str) -> None:
        """A replay says nothing of its stages."""


def simulate(recorded: Recorded, trials: int, seed: int, sampler: str | None = None,
             objectives: int | None = None,
             on_trial: Callable[[TrialRecord, int, int], None] | None = None) -> Repeat:
    """One search of ``trials`` evaluations on a recorded space, as ``autotune search`` would run it.

    ``objectives=2`` makes the study of two objectives (throughput, peak memory) that autotune made
    before; the default is the study ``search`` makes now. ``on_trial(record, done, total)`` hears of
    each evaluation, as ``search``'s progress line does.
    """
    import time

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    started = time.perf_counter()
    simulation = _Simulation(recorded, seed, on_trial)
    directions = OBJECTIVES if objectives is None else ["maximize", "minimize"][:objectives]
    study = optuna.create_study(directions=directions, sampler=make_sampler(sampler, seed, recorded.space))
    space = recorded.space
    enqueue_first(study, space.first_params())
    budget = TrialBudget(study, trials, NoLock(), None, None, None, shared=False)
    records = run_trials(simulation, study, budget)  # type: ignore[arg-type]
    best: float | None = None
    best_so_far: list[float | None] = []
    spent, seconds_so_far = 0.0, []
    for record in records:
        if record.duplicate_of is not None:
            continue  # a repeat is not evaluated again
        value = recorded.objective_of(record.result)
        if value is not None and recorded.better(value, best):
            best = value
        best_so_far.append(best)
        spent += record.result.wall_seconds or 0.0
        seconds_so_far.append(spent)
    return Repeat(seed, len(best_so_far), best_so_far, time.perf_counter() - started, seconds_so_far)


def expected_random_best(recorded: Recorded, m: int) -> float:
    """b(M): the expected best of M configs drawn uniformly without replacement from every recorded config.

    Failed configs are drawn too but are never best; with probability
    C(N - i, M - 1) / C(N, M) the i-th best value is the best of the draw.
    """
    times = recorded.best_first()
    n = len(recorded.entries)
    m = min(m, n)
    log_total = _log_comb(n, m)
    weights = [math.exp(_log_comb(n - i, m - 1) - log_total) if n - i >= m - 1 else 0.0
               for i in range(1, len(times) + 1)]
    # Conditional on the draw holding a config that ran (a draw of failures alone has no best).
    return sum(w * t for w, t in zip(weights, times)) / sum(weights)


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def score(recorded: Recorded, best_so_far: list[float | None], m: int) -> float:
    """P(M) of one search: 0 is random search on average, 1 the optimum (a search with no success scores as the worst)."""
    return _score(recorded, _found(best_so_far, m), expected_random_best(recorded, m))


def time_score(recorded: Recorded, repeat: Repeat, m: int) -> float:
    """P(T) for T = the time M evaluations take on average (the recorded mean cost of a config, M times).

    ``best(T)`` is the best found by the evaluations whose recorded costs add up to T at most;
    random search evaluates M configs in T on average, so it scores 0 here too. A strategy that
    picks configs slow to compile or to run is charged for them, and one that picks cheap configs
    gets more of them. A search whose evaluations end before T is scored on all of them (a lower
    bound: it stopped for want of trials, not of time).
    """
    return _score(recorded, _found_in_time(recorded, repeat, m), expected_random_best(recorded, m))


def _found(best_so_far: list[float | None], m: int) -> float | None:
    """The best of the first M evaluations (None: nothing that ran)."""
    return best_so_far[min(m, len(best_so_far)) - 1] if best_so_far else None


def _found_in_time(recorded: Recorded, repeat: Repeat, m: int) -> float | None:
    """The best of the evaluations within the time of M average evaluations (None: nothing that ran)."""
    budget = m * recorded.mean_cost_seconds
    within = sum(1 for spent in repeat.seconds_so_far if spent <= budget)
    return repeat.best_so_far[within - 1] if within else None


def _score(recorded: Recorded, found: float | None, b: float) -> float:
    """P(M) of a search that found ``found`` (None: nothing that ran), against b(M) = ``b``."""
    if found is None:
        found = recorded.worst
    # The same formula for a maximised objective: numerator and denominator both change sign.
    if not recorded.better(recorded.optimum, b):  # M covers the whole space: random search finds the optimum too
        return 0.0 if recorded.better(recorded.optimum, found) else 1.0
    return (b - found) / (b - recorded.optimum)


def strategies_asked(samplers: tuple[str, ...], as_json: bool, recorded: bool, study: bool) -> list[str]:
    """The strategies `autotune simulate` compares (the default where none is named), once its options agree."""
    names = list(dict.fromkeys(samplers)) or [DEFAULT]
    unknown = [n for n in names if n not in SAMPLERS]
    if unknown:
        raise AutotuneError(f"--sampler {unknown[0]!r} is not a search strategy; use one of: {', '.join(SAMPLERS)}")
    if as_json and len(names) > 1:
        raise AutotuneError("--json prints one strategy's repeats: give at most one --sampler")
    if recorded == study:
        raise AutotuneError("give one of --recorded FILE (a Kernel Tuner cache) or --study NAME [--storage URL] (an "
                            "autotune study)")
    return names


def budgets_for(trials: int) -> tuple[int, ...]:
    """The budgets a table scores a search of ``trials`` evaluations at: 20, 50 and 100 where it reaches them, and
    ``trials`` itself (``--trials 30`` -> 20 and 30; 200 -> 20, 50, 100 and 200)."""
    return tuple(sorted({m for m in (20, 50, 100) if m <= trials} | {trials}))


def summary(recorded: Recorded, repeats: list[Repeat], budgets: tuple[int, ...] = (20, 50, 100)) -> dict[str, Any]:
    """Mean and standard deviation of the score at each budget of evaluations (``"50"``) and of time (``"time 50"``:
    the time of 50 average evaluations, see :func:`time_score`), and the strategy's own seconds per evaluation."""
    out: dict[str, Any] = {}
    for m in budgets:
        b = expected_random_best(recorded, m)  # once per budget, not once per repeat
        out[str(m)] = _mean_and_spread([_score(recorded, _found(r.best_so_far, m), b)
                                        for r in repeats if r.evaluations >= m])
        out[f"time {m}"] = _mean_and_spread([_score(recorded, _found_in_time(recorded, r, m), b) for r in repeats])
    evaluations = sum(r.evaluations for r in repeats)
    out["seconds_per_evaluation"] = sum(r.wall_seconds for r in repeats) / max(evaluations, 1)
    return out


def _mean_and_spread(scores: list[float]) -> dict[str, float | None]:
    if not scores:  # fewer evaluations than this budget (or an exhausted space): no score
        return {"mean": None, "std": None}
    mean = sum(scores) / len(scores)
    return {"mean": mean, "std": math.sqrt(sum((s - mean) ** 2 for s in scores) / max(len(scores) - 1, 1))}


def run_repeats(recorded: Recorded, sampler: str, trials: int, repeats: int, seed: int,
                progress: Callable[[str], None] | None = None, every_seconds: float = 10.0) -> list[Repeat]:
    """``repeats`` simulated searches with seeds ``seed``, ``seed + 1``, ...

    ``progress`` hears of each repeat done and, within a repeat that runs long (thousands of
    evaluations with a model-based sampler take minutes), of its evaluations every ``every_seconds``.
    """
    import time

    if seed + repeats - 1 >= 2**32:  # a sampler's generator takes 32 bits
        raise AutotuneError(f"--seed {seed} with --repeats {repeats} needs seeds up to {seed + repeats - 1}, past the "
                            f"largest, {2**32 - 1}; give --seed {2**32 - repeats} or less")
    done = []
    for index in range(repeats):
        said = time.monotonic()

        def evaluated(record: TrialRecord, count: int, total: int) -> None:
            nonlocal said
            if time.monotonic() - said >= every_seconds:
                said = time.monotonic()
                progress(f"{sampler}: repeat {index + 1}/{repeats}: {count}/{total} evaluations")  # type: ignore[misc]

        done.append(simulate(recorded, trials, seed + index, sampler,
                             on_trial=None if progress is None else evaluated))
        if progress is not None:
            progress(f"{sampler}: repeat {index + 1}/{repeats} done")
    return done


def repeats_json(recorded: Recorded, source: str, sampler: str, repeats: list[Repeat]) -> dict[str, Any]:
    """`autotune simulate --json`: the best recorded objective after each evaluation of each repeat."""
    return {"recorded": source, "objective": recorded.objective, "direction": recorded.direction,
            "optimum": recorded.optimum, "sampler": sampler,
            "repeats": [{"seed": r.seed, "evaluations": r.evaluations, "best_so_far": r.best_so_far,
                         "seconds_so_far": r.seconds_so_far} for r in repeats]}


def _and(items: list[str]) -> str:
    """"20", "20 and 30", "20, 50 and 100"."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def simulation_table(recorded: Any, summaries: dict[str, dict[str, Any]], repeats: int) -> str:
    """`autotune simulate`: each strategy's mean score (and spread) at each budget of its summary, and at its time."""
    budgets = [key for key in next(iter(summaries.values())) if key.isdigit()]  # "20", "50"... as summary made them
    unit = " in ms" if recorded.objective == "time" else ""  # Kernel Tuner's, and a study's per item of its unit
    lines = [f"{recorded.source}: optimum {recorded.optimum:.4g} ({recorded.objective}{unit}, {recorded.direction}d); "
             f"score 0 = random search, 1 = the optimum; mean ± sd over {repeats} repeat{'s' * (repeats != 1)}",
             f"  {'strategy':<18} " + " ".join(f"{'at ' + m:>13}" for m in budgets) + f" {'ms/evaluation':>14}"]
    for name, figures in summaries.items():
        for label, keys in (("", budgets), ("  by time", [f"time {m}" for m in budgets])):
            cells = [f"{figures[m]['mean']:>6.2f} ± {figures[m]['std']:<4.2f}" if figures[m]["mean"] is not None
                     else "-" for m in keys]
            cost = f"{1000 * figures['seconds_per_evaluation']:>14.1f}" if not label else ""
            lines.append(f"  {label or name:<18} " + " ".join(f"{cell:>13}" for cell in cells) + f" {cost}".rstrip())
    lines.append(f"  (by time: at the time that {_and(budgets)} evaluation{'s' * (budgets != ['1'])} take"
                 f"{'s' * (budgets == ['1'])} on average, by the recorded costs; "
                 "a search that ran out of evaluations first is scored on all of them, a lower bound)")
    return "\n".join(lines)
