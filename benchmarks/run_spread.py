"""How far one warm run strays from its config's median: the noise the race's factor must sit above.

Reads the trials of every study in the given SQLite files (``studies/autotune.db``
after a search) and prints, over every fully measured trial, the ratio of each
warm run (warm-up runs after the first, and timed runs) to the trial's median
time: its smallest and largest value and the 1st and 99th percentiles. The
race (``autotune/tuner.py``, ``RACE_FACTOR``) cuts a config that is warm and
more than RACE_FACTOR times slower than the study's best; it is safe while the
largest ratio here stays well below RACE_FACTOR. Since 2026-12-08 runs shorter
than a 200th of ``--min-time`` are timed in blocks, each time a block's mean,
which strays less than one run does; the race judges runs of 0.1 s or more,
which are timed one by one.

Example::

    autotune search --workload chmm --device cpu --trials 20
    python benchmarks/run_spread.py studies/autotune.db
"""

from __future__ import annotations

import argparse
import statistics
import sys


def main(argv: list[str] | None = None) -> int:
    import optuna

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("databases", nargs="+", help="SQLite study files (studies/autotune.db)")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    ratios: list[float] = []
    trials = 0
    for path in args.databases:
        storage = f"sqlite:///{path}"
        for name in optuna.get_all_study_names(storage):
            for trial in optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False):
                attrs = trial.user_attrs
                times = attrs.get("times") or []
                if len(times) < 3 or attrs.get("cut_short"):
                    continue
                median = statistics.median(times)
                trials += 1
                # The first warm-up run may still carry compilation; the race never judges it alone.
                ratios += [t / median for t in (attrs.get("warmup_times") or [])[1:] + times]
    if not ratios:
        print("no fully measured trials in these studies", file=sys.stderr)
        return 1
    ratios.sort()
    tail = max(len(ratios) // 100, 1)
    print(f"{len(ratios)} warm runs of {trials} trials: run time / its trial's median "
          f"min {ratios[0]:.2f}, 1st percentile {ratios[tail - 1]:.2f}, "
          f"99th percentile {ratios[-tail]:.2f}, max {ratios[-1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
