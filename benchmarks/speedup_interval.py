"""Whether the search's 95% interval of its speedup holds the speedup that searches find again.

Runs the same search several times, each in a fresh studies folder (chmm at ``tiny`` on the CPU by default: the
baseline, the defaults and the two kernel probes, re-measured in 3 rounds), and keeps every round of the
baseline's and the winner's runs. Then it computes each search's interval two ways from the same runs: the runs
pooled over the rounds and drawn as one sample (the search's interval until 2026-11-28), and the rounds drawn
first, then the runs of each round drawn (:func:`autotune.measure.ratio_interval` now). An interval that says
how far off the speedup may be should hold the mean of the searches' speedups about 95% of the time.

Example::

    python benchmarks/speedup_interval.py --searches 10
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile

from autotune.measure import Measurement, ratio_interval


def pooled_runs_interval(base: Measurement, other: Measurement) -> tuple[float, float]:
    """The interval drawn from the runs pooled over the rounds, as one sample (the search's until 2026-11-28):
    :func:`ratio_interval` of the same runs taken as one round."""
    def one_round(m: Measurement) -> Measurement:
        return Measurement(m.times, m.items_per_run, m.first_run_seconds)

    return ratio_interval(one_round(base), one_round(other))[1:]


def score(pairs: list[tuple[Measurement, Measurement]]) -> dict[str, dict[str, float]]:
    """For each way: how many intervals hold the mean speedup, and their half-widths as a share of it."""
    values = [ratio_interval(base, winner)[0] for base, winner in pairs]
    mean = statistics.fmean(values)
    ways = {"runs pooled": [pooled_runs_interval(b, w) for b, w in pairs],
            "rounds, then runs": [ratio_interval(b, w)[1:] for b, w in pairs]}
    return {way: {"held": sum(low <= mean <= high for low, high in intervals), "of": len(intervals),
                  "narrowest": min((high - low) / 2 / mean for low, high in intervals),
                  "widest": max((high - low) / 2 / mean for low, high in intervals)}
            for way, intervals in ways.items()} | {"speedups": {"mean": mean, "sd": statistics.stdev(values) / mean}}


def search_once(workload: str, size: str, trials: int, min_time: float,
                rounds: int = 3) -> tuple[Measurement, Measurement]:
    """One search in a folder of its own: the baseline's and the winner's runs, round by round."""
    from autotune.settings import SearchSettings

    with tempfile.TemporaryDirectory(prefix="speedup-interval-") as studies:
        settings = SearchSettings(workload, "cpu", size, studies=studies, min_time=min_time, quiet=True,
                                  remeasure_rounds=rounds)
        tuner = settings.tuner(on_trial=None, on_stage=lambda message: None)
        try:
            result = tuner.search(trials)
        finally:
            tuner.close()
    if result.winner is None or result.winner is result.baseline:
        raise SystemExit("the search found no winner over the baseline: nothing to compare")
    return result.baseline.measurement, result.winner.measurement


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--searches", type=int, default=10)
    parser.add_argument("--workload", default="chmm")
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--min-time", type=float, default=0.2)
    parser.add_argument("--rounds", type=int, default=3, help="re-measurement rounds (--remeasure-rounds)")
    args = parser.parse_args(argv)
    if args.searches < 2:
        parser.error("--searches must be 2 or more: a spread needs two speedups")
    pairs = []
    for i in range(args.searches):
        pairs.append(search_once(args.workload, args.size, args.trials, args.min_time, args.rounds))
        base, winner = pairs[-1]
        value, low, high = ratio_interval(base, winner)
        print(f"search {i + 1}/{args.searches}: {value:.2f}x [{low:.2f}, {high:.2f}], rounds {len(base.by_round())}",
              file=sys.stderr)
    scores = score(pairs)
    speedups = scores.pop("speedups")
    print(f"{args.searches} searches of {args.workload} at {args.size}, {args.rounds} rounds: speedup mean "
          f"{speedups['mean']:.2f}x, sd {100 * speedups['sd']:.2f}%")
    for way, figures in scores.items():
        print(f"  {way:<18} held the mean in {figures['held']} of {figures['of']}; half-widths "
              f"{100 * figures['narrowest']:.2f}-{100 * figures['widest']:.2f}% of it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
