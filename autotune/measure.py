"""Timing a run honestly: warm-up, synchronisation, repetition, median and spread.

The measurer follows ``torch.utils.benchmark``'s ``blocked_autorange`` and
triton's ``do_bench``: the first run (which pays for compilation and caches)
is recorded on its own, warm-up continues until two runs agree (or, when a
config is re-measured, until one agrees with its known warm time), then timed
runs repeat until both a minimum time and a minimum count are reached, and
while they are few and noisy, up to ten runs or three times that minimum
time. Every raw time is kept; the figures are computed from them.
"""

from __future__ import annotations

import itertools
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Measurement", "Measurer", "deferred_part", "ratio_interval"]

#: Stretches of runs in a row that :attr:`Measurement.sustained_throughput` takes the median of: a cost paid
#: once every fifth of the runs at most is in each. Against the median run, on the trials of the studies kept
#: (1,616 on this CPU, 212 on the GPUs), the stretches' figure was within 10% in 99% (GPU: 12% at most); the
#: most, 2.7x, numba's 0.12 ms runs at chmm's tiny, stalled 4 ms every 30 runs or so in a trial by torch's thread
#: count set again (since set only where it differs: runner.py).
STRETCHES = 5
#: Runs in a row slower than the median run by more than this share say a cost the median leaves out (the 99% above).
IN_A_ROW_NOISE = 0.1
#: The most runs a block of short runs holds (Measurer.block_seconds): 100,000 runs of 0.05 us span 5 ms.
BLOCK_RUNS = 100_000


@dataclass
class Measurement:
    """Raw times of one measured configuration and the statistics derived from them."""

    times: list[float]  # seconds per timed run (per run of a block, where short runs were timed in blocks)
    items_per_run: int
    first_run_seconds: float  # includes compilation and cold caches
    warmup_times: list[float] = field(default_factory=list)
    noisy_threshold: float = 0.1
    cut_short: bool = False  # stopped early: far slower than the study's best once warm, or a wrong first output
    busy_elsewhere: float | None = None  # cores other processes kept busy meanwhile (Measurer.other_work)
    cores_used: float | None = None  # cores its own process group kept busy over the timed runs (Measurer.other_work)
    rounds: list[int] = field(default_factory=list)  # pooled: how many of ``times`` each round gave, in order
    timed_runs: int | None = None  # runs timed, where blocks of them made ``times`` (Measurer.block_seconds)

    @property
    def runs(self) -> int:
        """How many runs were timed: one a time, or more where short runs were timed in blocks."""
        return self.timed_runs or len(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def iqr(self) -> float:
        """Interquartile range of the run times (0 with fewer than 2 runs)."""
        if len(self.times) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.times, n=4, method="inclusive")
        return q3 - q1

    @property
    def relative_spread(self) -> float:
        return self.iqr / self.median if self.median > 0 else 0.0

    @property
    def noisy(self) -> bool:
        """The spread is a large share of the median: treat small differences as ties."""
        return self.relative_spread > self.noisy_threshold

    @property
    def throughput(self) -> float:
        """Items per second at the median run time."""
        return self.items_per_run / self.median if self.median > 0 else float("inf")

    @property
    def sustained_throughput(self) -> float:
        """Items per second over runs in a row: the median of the mean run times of ``STRETCHES`` stretches of
        consecutive runs. A cost paid every few runs (a cache rebuilt every 4th) is in each stretch, as it is in
        a job of many runs; the median run leaves it out. A run slowed by other work, or a stall, spoils one
        stretch, which the median leaves out (a mean of all runs took it in: one 10x run in 30 read 30% slower)."""
        size = max(1, len(self.times) // STRETCHES)
        means = [statistics.fmean(self.times[i:i + size]) for i in range(0, len(self.times) - size + 1, size)]
        seconds = statistics.median(means)
        return self.items_per_run / seconds if seconds > 0 else float("inf")

    @classmethod
    def pooled(cls, parts: list["Measurement"]) -> "Measurement":
        """One measurement from several (re-measurement rounds): all raw times together."""
        return cls(
            times=[t for part in parts for t in part.times],
            items_per_run=parts[0].items_per_run,
            first_run_seconds=parts[0].first_run_seconds,
            warmup_times=[t for part in parts for t in part.warmup_times],
            noisy_threshold=parts[0].noisy_threshold,
            rounds=[n for part in parts for n in (part.rounds or [len(part.times)])],
            timed_runs=sum(part.runs for part in parts),
        )

    def by_round(self) -> list[list[float]]:
        """Its times round by round (one round where it was not pooled)."""
        ends = list(itertools.accumulate(self.rounds)) if sum(self.rounds) == len(self.times) else [len(self.times)]
        return [self.times[start:end] for start, end in zip([0, *ends[:-1]], ends)]


#: Bootstrap resamples per interval of a speedup, and the interval's coverage (the search's and `autotune explain`'s).
RESAMPLES = 2000
COVERAGE = 0.95


def deferred_part(output: Any, where: str = "output") -> str:
    """What in ``output`` holds work not yet done (``a generator at output['tokens']``), else ''.

    A run that returns a generator, a coroutine or a future is timed doing nothing: the work is done where the
    output is read, by the check. A lazy kernel of mine (a generator of 8 steps of 2 ms) ran at 22 million items/s
    where the eager one ran at 480, its check passed, and it won.
    """
    import collections.abc
    import concurrent.futures
    import dataclasses
    import sys

    futures: tuple[type, ...] = (concurrent.futures.Future, collections.abc.Iterator, collections.abc.Awaitable)
    torch = sys.modules.get("torch")
    futures += (torch.futures.Future,) if torch is not None and hasattr(torch, "futures") else ()
    if isinstance(output, futures):
        return f"a {type(output).__name__}{'' if where == 'output' else f' at {where}'}"
    items: Any = ()
    if isinstance(output, dict):
        items = output.items()
    elif isinstance(output, (list, tuple)):
        items = enumerate(output)
    elif dataclasses.is_dataclass(output) and not isinstance(output, type):
        items = ((f.name, getattr(output, f.name)) for f in dataclasses.fields(output))
    for key, item in items:
        found = deferred_part(item, f"{where}.{key}" if isinstance(key, str) and not isinstance(output, dict)
                              else f"{where}[{key!r}]")
        if found:
            return found
    return ""


def ratio_interval(base: Measurement, other: Measurement, seed: int = 0) -> tuple[float, float, float]:
    """``other``'s throughput over ``base``'s at their median runs, and its ``COVERAGE`` percentile-bootstrap interval
    (``RESAMPLES`` resamples of each one's rounds, then of the runs of each round drawn): ``(value, low, high)``.

    Rounds first: each round is a process of its own, and a config's median moved 2-3% from one to the next where
    its runs within one agreed to well under 1% (chmm at tiny, this CPU). A resample of the runs pooled took them
    for one sample: of 20 searches' speedups (mean 269.71x, sd 0.97%), the mean lay within 10 of their intervals,
    half-widths 0.32-1.72%; drawn by round, within 16, half-widths 0.63-3.13% (benchmarks/speedup_interval.py; with
    6 rounds 16 too: the rest moves from search to search, each forking its rounds from one server). One round has
    no spread of rounds to draw on: its interval is its runs' alone."""
    def ratio(xa: list[float], xb: list[float]) -> float:
        return (other.items_per_run / statistics.median(xb)) / (base.items_per_run / statistics.median(xa))

    def draw(rounds: list[list[float]]) -> list[float]:
        picked = rng.choices(rounds, k=len(rounds))
        return [t for times in picked for t in rng.choices(times, k=len(times))]

    rng, ra, rb = random.Random(seed), base.by_round(), other.by_round()
    draws = sorted(ratio(draw(ra), draw(rb)) for _ in range(RESAMPLES))
    tail = (1 - COVERAGE) / 2
    return ratio(base.times, other.times), draws[int(tail * RESAMPLES)], draws[int((1 - tail) * RESAMPLES) - 1]


@dataclass
class Measurer:
    """Times a run: ``Measurer(min_time=1.0).measure(run, items, sync)``.

    ``clock`` is injectable so that tests can drive time by hand. ``on_output``
    sees the output of the first run ("first"), of the last timed run
    ("last") and of the untimed runs after it (``check_share``: "run"),
    which is where the runner checks correctness; when it returns False for
    the first output (wrong), the measurement stops there, and for another,
    no more runs are checked.
    """

    min_time: float = 1.0  # seconds of timed runs, at least
    min_runs: int = 3
    max_runs: int = 200
    #: A timing's least length: runs shorter are timed in blocks of runs in a row (each synchronised), a block's
    #: mean one of the times, so that ``max_runs`` of them span ``min_time`` (None: ``min_time / max_runs``; 0:
    #: each run alone). Timed alone, 200 runs of 50-120 us spanned 10-24 ms of the second asked for, and a fresh
    #: process may run slow for its first tens of ms at a pace its runs agree on, or still be warming up: 10
    #: fresh trials of chmm's numba at tiny read 1.06x apart timed alone, 1.03x in blocks; a compiled MLP's 1.09x
    #: and 1.06x, its median 6% higher (benchmarks/short_runs.py; README, "Honest timing").
    block_seconds: float | None = None
    max_warmup_runs: int = 5
    warmup_agreement: float = 0.1  # two consecutive warm-up runs within 10% count as stable
    max_warmup_time: float = 10.0
    noisy_threshold: float = 0.1
    #: Fewer timed runs than this that are noisy (their interquartile range over a tenth of their median) go on
    #: until they are not, or are this many, or take ``noisy_time_factor`` times ``min_time``: a median of three
    #: runs, two of them slowed by other work on the machine, was 18x a config's time (vlm_mc's defaults at tiny:
    #: 0.68 s a run against 0.037 s, this CPU). Many runs need no more: their median already outvotes a burst,
    #: and going on while noisy at any count cost a seeded quick start 12 s (117 s against 104 s) on configs
    #: whose 20-40 ms runs spread 14% however long they ran; with this limit it took 105 s.
    noisy_runs: int = 10
    noisy_time_factor: float = 3.0
    #: After the last timed run, more runs, untimed, each output checked, while they and their checks cost at
    #: most this share of the measurement so far (its first run, warm-up, timed runs and checks): a config wrong
    #: one run in five passed the first and the last checks alone two times in three. Of the measurement, not of
    #: the timed runs alone: numba's 0.1 ms runs at tiny time 22 ms, less than one check, after a first run of
    #: 0.25 s; no more of them than timed runs (a first run that compiles for a minute leaves a large share).
    #: Run after the timing, not between: a check between timed runs slowed the next one (chmm's scan at
    #: tiny, float32: runs of 2.3 ms, up to 28 ms after a check; their sum doubled).
    check_share: float = 0.1
    #: A config whose first run and first warm run both fall below this
    #: throughput stops after them: its figure only needs to say "far slower".
    hopeless_below: float | None = None
    #: The race: a config whose warm-up has settled (two consecutive runs agree) at a
    #: throughput below this stops there; it cannot reach the study's best.
    race_below: float | None = None
    #: Both cuts judge only runs at least this long. A trial starts in a fresh process, and there short runs
    #: stall: on this 2-core CPU, chmm at tiny as fast as the best ran its 3.8 ms scan runs at 24 ms and its 8 ms
    #: loop runs at 32 ms, runs that agreed, and the race cut 2 of 40 trials of each as over 3x slower
    #: (benchmarks/cold_start.py; 9 of 40 of the scan in another run). The longest stalled run was 36 ms, and
    #: runs under this cost little to measure in full (min_time's worth).
    cut_min_seconds: float = 0.1
    #: A run time this config is known to settle at (its median in the search, for a re-measurement): a run
    #: within ``warmup_agreement`` of it is warm, so a first run that already agrees needs no warm-up.
    warm_seconds: float | None = None
    clock: Callable[[], float] = time.perf_counter
    #: Started as the measurement starts; its ``cores()`` at the end are the cores other processes kept busy
    #: meanwhile (:class:`autotune.environment.OtherWork`), recorded, not acted on: the figures say so.
    other_work: Callable[[], Any] | None = None

    def timed(self, run: Callable[[], Any], sync: Callable[[], None]) -> tuple[float, Any]:
        """One run, synchronised before and after: its seconds and its output."""
        sync()
        start = self.clock()
        output = run()
        sync()
        return self.clock() - start, output

    def measure(
        self,
        run: Callable[[], Any],
        items_per_run: int,
        sync: Callable[[], None] = lambda: None,
        on_output: Callable[[str, Any], None] | None = None,
    ) -> Measurement:
        meter = self.other_work() if self.other_work is not None else None
        measurement = self._measure(run, items_per_run, sync, on_output)
        measurement.busy_elsewhere = meter.cores() if meter is not None else None
        return measurement

    def _measure(self, run: Callable[[], Any], items_per_run: int, sync: Callable[[], None],
                 on_output: Callable[[str, Any], None] | None) -> Measurement:
        def hopeless(seconds: float) -> bool:
            return (self.hopeless_below is not None and seconds > 0 and seconds >= self.cut_min_seconds
                    and items_per_run / seconds < self.hopeless_below)

        def settled(seconds: float, previous: float) -> bool:
            return abs(seconds - previous) <= self.warmup_agreement * max(seconds, previous)

        def known_warm(seconds: float) -> bool:
            return self.warm_seconds is not None and settled(seconds, self.warm_seconds)

        def raced(seconds: float, previous: float) -> bool:
            """Warm (two consecutive runs agree) and still slower than the race allows."""
            return (self.race_below is not None and settled(seconds, previous)
                    and min(seconds, previous) >= self.cut_min_seconds
                    and items_per_run / min(seconds, previous) < self.race_below)

        begun = self.clock()
        first, output = self.timed(run, sync)
        if deferred := deferred_part(output):  # a generator's run took 0.36 us where its work took 17 ms
            raise ValueError(f"the run returned {deferred}: its work happens where the output is read, after the "
                             "clock stops, so the time measured none of it; return the data itself (a tensor, a list)")
        if on_output is not None and on_output("first", output) is False:
            # Its first output is already wrong: more runs cannot make the config correct.
            return Measurement([first], items_per_run, first, [], self.noisy_threshold, cut_short=True)
        del output
        # Warm up until two consecutive runs agree (compilation, caches, allocator), or one agrees with the known
        # warm time: the baseline's 4 s warm-up run was a third of each re-measurement round of chmm at small.
        warmup: list[float] = []
        previous = first
        spent = first
        while (len(warmup) < self.max_warmup_runs and spent < self.max_warmup_time and not hopeless(first)
               and not known_warm(first)):
            seconds, output = self.timed(run, sync)
            warmup.append(seconds)
            spent += seconds
            if raced(seconds, previous):
                # Warm and still too slow: its last warm run is its figure, and its output is checked.
                if on_output is not None:
                    on_output("last", output)
                return Measurement([seconds], items_per_run, first, warmup[:-1], self.noisy_threshold, cut_short=True)
            del output  # not held while the next run allocates its own (peak memory)
            if settled(seconds, previous) or known_warm(seconds):
                break
            previous = seconds
        times: list[float] = []
        total = 0.0
        output = None
        own = self.other_work() if self.other_work is not None else None  # the timed runs' own cores, apart
        def more(times: list[float], total: float) -> bool:
            if len(times) < self.min_runs or total < self.min_time:
                return True
            return (len(times) < self.noisy_runs and total < self.noisy_time_factor * self.min_time
                    and Measurement(times, items_per_run, first, noisy_threshold=self.noisy_threshold).noisy)

        block = self.min_time / self.max_runs if self.block_seconds is None else self.block_seconds
        runs = 0
        while len(times) < self.max_runs and more(times, total):
            took, count = 0.0, 0
            # One run, or a block of short ones (of at most BLOCK_RUNS: a clock that does not move ends it too).
            while count == 0 or took < block and count < BLOCK_RUNS:
                output = None  # the last run's output is not held while the next allocates its own, as in warm-up
                seconds, output = self.timed(run, sync)
                took, count = took + seconds, count + 1
            seconds = took / count
            times.append(seconds)
            runs += count
            total += took
            # A first run over max_warmup_time leaves no warm-up: the first timed run is its first warm run,
            # and the hopeless cut and the race judge it (a 13 s run of chmm at small ran three times before).
            if len(times) == 1 and not warmup and (hopeless(first) and hopeless(seconds) or raced(seconds, first)):
                if on_output is not None:
                    on_output("last", output)
                return Measurement(times, items_per_run, first, warmup, self.noisy_threshold, cut_short=True,
                                   timed_runs=runs)
        cores_used = own.own_cores() if own is not None else None
        if on_output is not None:
            started = self.clock()
            passed = on_output("last", output) is not False
            del output
            cost = statistics.median(times) + self.clock() - started  # of one more checked run
            budget, spent, more_runs = self.check_share * (self.clock() - begun), 0.0, 0
            while passed and spent + cost <= budget and more_runs < len(times):  # no more than its timings
                more_runs += 1
                started = self.clock()
                _, output = self.timed(run, sync)
                passed = on_output("run", output) is not False
                del output
                spent += self.clock() - started
        return Measurement(times, items_per_run, first, warmup, self.noisy_threshold, cores_used=cores_used,
                           timed_runs=runs)
