"""Selection: the best configs re-measured beside the baseline, and the winner picked from their pooled runs.

Everything here is pure but :func:`remeasure` (which runs configs through a
callable): the winner follows from the figures alone, so the same figures
always give the same winner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from autotune.check import share_of_tolerance
from autotune.config import Config
from autotune.environment import beside_other_work
from autotune.measure import IN_A_ROW_NOISE, Measurement, ratio_interval
from autotune.runner import TrialResult
from autotune.trials import counted, feasible, latest_by_config, under_a_tighter_limit
from autotune.twins import Twins

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

__all__ = ["Candidate", "candidates", "failed_when_remeasured", "loaded_rounds", "next_round", "pick_winner",
           "quiet_everywhere", "quiet_rounds", "remeasure", "runs_per_round"]

# A measured config within this share of the best is a tie, unless the medians'
# uncertainty is wider (see pick_winner).
TIE_TOLERANCE = 0.02
# ... but never wider than this share: a tie trades speed for memory only near the best. Honest pooled runs
# (at least 15, their spread under 10%, "noisy" above) give medians' notches of a few percent; three runs
# spread 14% give 13%. Notches past this cap come from runs slowed by other work: a 15 s busy loop during the
# re-measurement spread numba's 324 pooled runs 72-fold at tiny, its notch 6.2, and the scan kernel, 17x
# slower but leaner, won the "tie" on memory (this CPU, 2026-11-26; test_tuner).
TIE_CAP = 0.25
# Among configs tied on speed, memory decides only when it differs by more than this share.
MEMORY_TOLERANCE = 0.05
# Runs per re-measurement round, at least: the pooled rounds decide the winner.
REMEASURE_MIN_RUNS = 5


def _median_uncertainty(m: Measurement) -> float:
    """Relative half-width of a box plot's notch, 1.57 IQR / sqrt(n) (McGill et al. 1978)."""
    return 1.57 * m.relative_spread / math.sqrt(len(m.times))


@dataclass
class Candidate:
    """A config re-measured at the end, with all its rounds pooled."""

    config: Config
    trial: int | None
    role: str  # "baseline" or "candidate"
    results: list[TrialResult] = field(default_factory=list)
    warm_seconds: float | None = None  # its median run in the search: a round's first run that agrees needs no warm-up
    search_status: str | None = None  # how its trial in the search ended (None: it had none)
    search_one_off: float | None = None  # its build and first run in the search, compile caches as they were then
    twin: Config | None = None  # measured once before its rounds: the same config at the reference's tolerance

    @property
    def name(self) -> str:
        return "the baseline" if self.role == "baseline" else f"#{self.trial}"

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.status == "ok" for r in self.results)

    @property
    def failure(self) -> str | None:
        """Why it has no figures to trust: a round that failed, or a timeout in the search (then it is not run)."""
        failed = next((r.status for r in self.results if r.status != "ok"), None)
        if failed is not None:  # with what it said: the table's row said "(incorrect when re-measured)", not why
            return remeasure_failure(failed, self.error)
        return "timeout in the search, not re-measured" if self.search_status == "timeout" else None

    @property
    def error(self) -> str | None:
        """What its first failed round said: the export keeps it, as the report's row said "incorrect when
        re-measured" and not why (the search had said it, as the round ended)."""
        return next((r.error for r in self.results if r.status != "ok" and r.error), None)

    @property
    def measurement(self) -> Measurement | None:
        """Its rounds' runs pooled: those timed beside other work left out where a quiet round remains."""
        parts = [m for m in (r.measurement() for r in quiet_rounds([r for r in self.results if r.status == "ok"]))
                 if m is not None]
        return Measurement.pooled(parts) if parts else None

    @property
    def one_off_seconds(self) -> float | None:
        """What a job pays once before its runs: the build and the first run (a compile), the most that any of its
        processes took, the search's trial and each round (a later one finds its compile cached)."""
        return most_one_off(self.results, self.search_one_off)

    @property
    def peak_memory_bytes(self) -> int | None:
        peaks = [r.peak_memory_bytes for r in self.results if r.peak_memory_bytes is not None]
        return max(peaks) if peaks else None

    @property
    def check(self) -> dict[str, Any] | None:
        checks = [r.check for r in self.results if r.check]
        if not checks:
            return None
        return max(checks, key=lambda c: (not c["passed"], share_of_tolerance(c["error"], c["tolerance"])))

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
            "runs": m.runs,
            "peak_memory_bytes": self.peak_memory_bytes,
            "warmup_seconds": self.results[0].warmup_seconds,
            "build_seconds": self.results[0].build_seconds,
            "one_off_seconds": self.one_off_seconds,
            "threads": self.results[0].threads,
            # The most its timed runs kept busy: above its threads, a thread or process of its own borrowed cores.
            "cores_used": max((r.cores_used for r in self.results if r.cores_used is not None), default=None),
        }


def candidates(trials: list["FrozenTrial"], baseline: Config, top: int, memory_budget_bytes: int | None = None,
               allows: Callable[[Mapping[str, Any]], bool] = lambda config: True,
               on_stage: Callable[[str], None] = lambda message: None, timeout: float | None = None,
               reference: Mapping[str, Any] | None = None) -> list[Candidate]:
    """The baseline, then the ``top`` fastest configs of a study (each config once, by its latest outcome)
    :func:`feasible` under ``memory_budget_bytes`` that the space ``allows``: a study resumed after its space
    file changed holds configs the space no longer has, and the export of one would be refused by
    ``load_config``. Then up to ``top`` more whose trials were timed beside other work. None whose measured twin
    failed a tighter bound (:mod:`autotune.twins`); each with the twin to measure first where the study has none."""
    # A config measured again (its workload file edited, torch upgraded: trials.measured_here) stands by its latest
    # outcome: its old figure is no reason to re-measure it, and its old pass none where it fails now.
    latest = latest_by_config(counted(trials))
    fits = [t for t in latest.values() if feasible(t, memory_budget_bytes)]
    stale = {t.user_attrs["config_key"] for t in fits if not allows(t.user_attrs["config"])}  # configs, not trials
    if stale:
        on_stage(f"warning: the study holds {len(stale)} config{'' if len(stale) == 1 else 's'} outside its space "
                 "as this device runs it now (its space file changed since they ran, or the device lacks what they "
                 "need now): they cannot win; a new --study starts afresh")
    best = sorted((t for t in fits if t.user_attrs["config_key"] not in stale),
                  key=lambda t: (-(t.user_attrs.get("throughput") or 0.0), t.number))
    chosen: list[Candidate] = []
    seen: set[str] = set()
    twins = Twins(latest.values(), reference, allows, on_stage)  # a pass a looser tolerance alone allowed
    for t in best:
        key = t.user_attrs["config_key"]
        if key in seen or key == baseline.key:
            continue
        seen.add(key)
        if twins.hidden(t):
            continue
        chosen.append(Candidate(Config(t.user_attrs["config"]), t.number, "candidate",
                                twin=twins.of(t.user_attrs["config"], t.user_attrs.get("tolerance_knobs")),
                                warm_seconds=t.user_attrs.get("median_seconds"), search_one_off=one_off(t.user_attrs)))
        if len(chosen) >= top:
            break
    # A trial timed beside other work may have read far too slow (numba's probe at chmm's tiny, 74x under a busy
    # loop: not re-measured, a config 16x slower was exported), so its figure is no reason to leave it out: up to
    # ``top`` of those join, fastest first, and the quiet re-measurement decides. Its median in the search is not
    # its warm time either.
    wanted = len(chosen) + top
    for t in best:
        key = t.user_attrs["config_key"]
        if len(chosen) < wanted and key not in seen and key != baseline.key and \
                beside_other_work(t.user_attrs.get("busy_elsewhere")):
            seen.add(key)
            if twins.hidden(t):
                continue
            chosen.append(Candidate(Config(t.user_attrs["config"]), t.number, "candidate",
                                    twin=twins.of(t.user_attrs["config"], t.user_attrs.get("tolerance_knobs")),
                                    search_one_off=one_off(t.user_attrs)))
    first = latest.get(baseline.key) or next((t for t in trials if t.user_attrs.get("config_key") == baseline.key),
                                             None)
    # A baseline that timed out under a shorter trial timeout than now's may finish now: re-measured, not skipped.
    status = first.user_attrs.get("status") if first and not under_a_tighter_limit(first, timeout, None) else None
    warm = first.user_attrs.get("median_seconds") if status == "ok" else None
    return [Candidate(baseline, first.number if first else None, "baseline", warm_seconds=warm, search_status=status,
                      search_one_off=one_off(first.user_attrs) if status == "ok" else None), *chosen]


def remeasure_failure(status: str, error: str | None) -> str:
    """How a re-measurement failed (``status``: a round's), with what the round said where that was kept."""
    return f"{status} when re-measured" + (f": {error}" if error else "")


def failed_when_remeasured(document: Mapping[str, Any] | None) -> dict[int, str]:
    """The candidates of a study's export that failed a round of their re-measurement, by trial, each with how
    ("incorrect when re-measured": one whose twin fails is that too). In the study each is its trial's figures,
    which passed: the report's table said `ok` of a config wrong in bfloat16, and weighed the winner's values
    against it."""
    found = {}
    for candidate in ((document or {}).get("remeasure") or {}).get("candidates") or []:
        failed = next((status for status in candidate.get("statuses") or [] if status != "ok"), None)
        if candidate.get("role") == "candidate" and failed and isinstance(candidate.get("trial"), int):
            found[candidate["trial"]] = f"{failed} when re-measured" + (f" ({candidate['error']})"
                                                                         if candidate.get("error") else "")
    return found


def one_off(figures: Mapping[str, Any]) -> float | None:
    """The build and first run of a trial's figures (a result's, a trial's attributes); None before it ran."""
    first = figures.get("warmup_seconds")
    return None if first is None else (figures.get("build_seconds") or 0.0) + first


def most_one_off(results: list[TrialResult], *also: float | None) -> float | None:
    """The most that any passing result (a round) paid once, build and first run, and ``also`` (the search's)."""
    seen = [one_off(vars(r)) for r in results if r.status == "ok"] + list(also)
    return max((s for s in seen if s is not None), default=None)


def runs_per_round(runs: int, rounds: int) -> int:
    """The fewest runs a round that still pool to ``runs`` over ``rounds`` rounds (at least one)."""
    return max(1, -(-runs // max(rounds, 1)))


def loaded_rounds(rounds_of: Iterable[list[TrialResult]]) -> list[int]:
    """The rounds (from 1) in which some config, given by its results round by round, was timed beside other work."""
    return sorted({i + 1 for results in rounds_of for i, r in enumerate(results) if r.beside_other_work})


def next_round(done: int, rounds: int, loaded: list[int]) -> str | None:
    """How round ``done + 1`` is named, or None when it is not run: the ``rounds`` planned, then one more for each
    of the ``loaded`` rounds (:func:`loaded_rounds`), ``rounds`` more at most."""
    if done < rounds:
        return f"{done + 1}/{rounds}"
    if done < 2 * rounds and len(loaded) > done - rounds:
        return f"{done + 1} (again: other work ran beside round {', '.join(map(str, loaded))})"
    return None


def quiet_rounds(results: list[TrialResult]) -> list[TrialResult]:
    """A config's rounds that other work did not hit; all of them where it hit every one."""
    return [r for r in results if not r.beside_other_work] or results


def quiet_everywhere(rounds_of: Iterable[list[TrialResult]]) -> bool:
    """Every config with a passing round has one that other work did not hit: its figures come from those."""
    return all(any(r.status == "ok" and not r.beside_other_work for r in results)
               for results in rounds_of if any(r.status == "ok" for r in results))


def remeasure(candidates: list[Candidate], run: Callable[[Candidate], TrialResult], rounds: int,
              on_stage: Callable[[str], None] = lambda message: None) -> int:
    """Measure every candidate in rounds, interleaved, so drift hits them all alike; the whole rounds run.

    A candidate that failed a round is not run again: it needs every round to
    pass, so more rounds could not change that. Neither is one that timed out
    in the search (a baseline slower than --trial-timeout): each round would
    sit through the timeout again, three rounds of 600 s for nothing.

    Each round in which other work kept the machine busy while a candidate ran
    (:class:`~autotune.environment.OtherWork`) is made up by one more round,
    ``rounds`` more at most, and a candidate's figures leave such rounds out
    where it has a quiet one (:attr:`Candidate.measurement`): a 15 s busy loop
    slowed numba's runs over 100-fold in the rounds it met (README, "Other work
    on the machine").

    A stop (Ctrl-C, SIGTERM) once a round is whole ends the re-measurement
    there rather than losing it: the figures come from the whole rounds, so
    every candidate's were still timed side by side, and a check that failed
    in the round cut short still counts. A stop in the first round raises.
    """
    done = 0
    try:
        while (label := next_round(done, rounds, loaded_rounds(c.results for c in candidates))) is not None:
            shift = done % len(candidates)
            for candidate in candidates[shift:] + candidates[:shift]:
                if candidate.failure is not None:
                    continue
                trial = f"#{candidate.trial}" if candidate.trial is not None else ""
                on_stage(f"re-measuring round {label}: {candidate.role} {trial}".rstrip())
                candidate.results.append(run(candidate))
            done += 1
    except KeyboardInterrupt:
        if done == 0:
            raise
        keep_whole_rounds((c.results for c in candidates), done)
        on_stage(f"stopped: the re-measurement ends with {done} whole round{'s' if done > 1 else ''}, "
                 "the winner picked from them (a second stop aborts)")
    return done


def keep_whole_rounds(rounds_of: Iterable[list[TrialResult]], whole: int) -> None:
    """After a stop in round ``whole + 1``: each config's passing results of that round are dropped, so every
    figure comes from rounds run side by side; a check it failed there still counts."""
    for results in rounds_of:
        results[whole:] = [r for r in results[whole:] if r.status != "ok"]


def pick_winner(candidates: list[Candidate], memory_budget_bytes: int | None = None) -> Candidate | None:
    """The fastest candidate that passed every re-measurement (and fits the memory budget).

    A candidate is tied with the fastest when their medians differ by less
    than ``TIE_TOLERANCE`` or than their notches (the medians' uncertainty)
    together, up to ``TIE_CAP``. Among tied candidates, one that needs
    clearly less memory (``MEMORY_TOLERANCE``) wins; otherwise the baseline
    where it is within ``TIE_TOLERANCE`` of the fastest, then the faster
    median, then the earlier trial, so the same figures give the same winner.
    A change that buys no measurable speed is no speedup: a knob with no
    effect exported one of its values at "1.00x", by the noise of a median
    (three of four seeds of a space of four equal kernels). Not within the
    notches: the baseline's are wide (one run a round), and a candidate 15%
    faster than a baseline of four runs spread 25% (vlm_mc's on the H200)
    would be no speedup by them.
    """
    passed = [
        c for c in candidates
        if c.passed and c.measurement is not None
        and (memory_budget_bytes is None or (c.peak_memory_bytes or 0) <= memory_budget_bytes)
    ]
    # By its median, a config of 1 ms runs that rebuilt its cache every 4th run (20 ms: 5.75 ms a run over a job)
    # was exported at 2.81x over steady 3 ms runs: one whose runs in a row are no faster than those of a config it
    # beats by its median run loses to it, however fast its typical run.
    passed = [c for c in passed if beaten_in_a_row(c, passed) is None]
    if not passed:
        return None
    best = max(passed, key=lambda c: c.measurement.throughput)  # type: ignore[union-attr]
    top = best.measurement.throughput  # type: ignore[union-attr]

    def within_noise(c: Candidate) -> bool:
        m = c.measurement
        assert m is not None
        notches = _median_uncertainty(m) + _median_uncertainty(best.measurement)  # type: ignore[arg-type]
        margin = max(TIE_TOLERANCE, min(notches, TIE_CAP))
        return m.throughput >= top * (1 - margin)

    tied = [c for c in passed if within_noise(c)]
    peaks = [c.peak_memory_bytes for c in tied if c.peak_memory_bytes is not None]
    if peaks:
        leanest = min(peaks)
        tied = [c for c in tied if c.peak_memory_bytes is not None and c.peak_memory_bytes <= leanest * (1 + MEMORY_TOLERANCE)]
    base = next((c for c in tied if c.role == "baseline"), None)
    if base is not None and base.measurement.throughput >= top * (1 - TIE_TOLERANCE):  # type: ignore[union-attr]
        return base
    return min(
        tied,
        key=lambda c: (
            -c.measurement.throughput,  # type: ignore[union-attr]
            c.trial if c.trial is not None else math.inf,
            c.config.key,
        ),
    )


def speedup_interval(baseline: Candidate, winner: Candidate) -> list[float] | None:
    """The 95% interval of ``winner``'s speedup over ``baseline`` as `autotune explain` gives each fix's (a percentile
    bootstrap of their rounds and runs: :func:`autotune.measure.ratio_interval`), ``[low, high]``; None for the baseline
    itself, or where a round failed."""
    ours, theirs = winner.measurement, baseline.measurement
    if winner is baseline or not (winner.passed and baseline.passed) or ours is None or theirs is None:
        return None
    return list(ratio_interval(theirs, ours)[1:])


def in_a_row(candidate: Candidate, other: Candidate) -> float | None:
    """``candidate``'s throughput over runs in a row (its sustained throughput) as a share of ``other``'s; None
    where either has no figures or ``other`` failed a round."""
    ours, theirs = candidate.measurement, other.measurement if other.passed else None
    return None if ours is None or theirs is None else ours.sustained_throughput / theirs.sustained_throughput


def beaten_in_a_row(candidate: Candidate, others: list[Candidate]) -> tuple[Candidate, float] | None:
    """The first of ``others`` (that passed every round) that ``candidate`` beats by its median run and not by its
    runs in a row, these clearly slower than its median says (``IN_A_ROW_NOISE``: a cost paid every few runs), with
    :func:`in_a_row` of the two; None where there is none. Noise is no such cost: a numba config 4% faster by its
    median and 0.99x in a row was dropped, "a cost paid every few runs", in a quick start."""
    ours = candidate.measurement
    for other in others:
        share = in_a_row(candidate, other) if other is not candidate else None
        ratio = ours.throughput / other.measurement.throughput if share is not None else 0.0  # type: ignore[union-attr]
        if share is not None and share <= 1 < ratio and share < (1 - IN_A_ROW_NOISE) * ratio:
            return other, share
    return None
