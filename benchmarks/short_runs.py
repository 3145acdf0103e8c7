"""Short runs timed one by one or in blocks: how far one fresh trial's figure strays from another's.

A measurement makes at most 200 timings (``Measurer.max_runs``). Timed one by
one, as until 2026-12-08, runs shorter than a 200th of ``--min-time`` were
timed for less than it: 200 runs of 0.05 ms, 10 ms. Timed in blocks of runs in
a row (``Measurer.block_seconds``, the default), each timing is a block's mean
and the 200 of them span ``--min-time``. This script measures one config
``--trials`` times each way, in turn, through autotune's runner (a fresh child
of the fork server each time, as in a search), and prints for each way the
runs and seconds timed a trial and the spread of the trials' throughputs.

Example::

    python benchmarks/short_runs.py --workload chmm --size tiny --trials 20 \\
        --set messages=numba --set update_c=batched --set debug_asserts=false
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile

#: The two ways: each run timed alone (block_seconds 0), and in blocks (the Measurer's default).
WAYS = {"one by one": {"block_seconds": 0.0}, "in blocks": {}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="chmm", help="workload (a name or FILE.py:Class) [default: chmm]")
    parser.add_argument("--size", default="tiny", help="size [default: tiny]")
    parser.add_argument("--device", default="cpu", help="device profile, or auto or cuda [default: cpu]")
    parser.add_argument("--set", dest="assignments", action="append", default=[],
                        help="knob=value over the defaults (repeatable)")
    parser.add_argument("--trials", type=int, default=20, help="trials each way [default: 20]")
    parser.add_argument("--min-time", type=float, default=1.0, help="timed seconds a measurement [default: 1]")
    args = parser.parse_args(argv)
    if args.trials < 2:
        parser.error(f"--trials must be 2 or more (a spread needs two figures), got {args.trials}")

    from autotune.tuner import Tuner

    results: dict[str, list] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory() as studies:
        with Tuner(args.workload, device=args.device, size=args.size, studies=studies,
                   measurer={"min_time": args.min_time}) as tuner:
            config = tuner.space.parse_assignments(tuple(args.assignments), tuner.space.defaults)
            first = tuner.run_config(config)  # writes the reference
            if first.status != "ok":
                print(f"the config did not pass: {first.status} {first.error}", file=sys.stderr)
                return 1
            for _ in range(args.trials):
                for way, measurer in WAYS.items():  # in turn: a slow hour of the machine falls on both
                    request = tuner.request(config)
                    request.measurer.update(measurer)
                    results[way].append(tuner.runner.run(request))
    failed = [r for rs in results.values() for r in rs if r.status != "ok"]
    if failed:
        print(f"{len(failed)} trials failed: {failed[0].status} {failed[0].error}", file=sys.stderr)
        return 1
    print(f"{tuner.workload.name} ({args.size}) on {tuner.device.name} {config.describe()}: {args.trials} fresh trials "
          "each way, in turn")
    for way, rs in results.items():
        figures = sorted(r.throughput for r in rs)
        runs = statistics.median(r.timed_runs for r in rs)
        timed = statistics.median(r.median_seconds * r.timed_runs for r in rs)  # about: a block's mean times its runs
        spread = statistics.stdev(figures) / statistics.fmean(figures)
        print(f"{way:>10}: {runs:,.0f} runs (about {timed:.3f} s) timed a trial; throughput min {figures[0]:,.0f}, "
              f"median {statistics.median(figures):,.0f}, max {figures[-1]:,.0f} {first.unit}/s: "
              f"{figures[-1] / figures[0]:.2f}x apart, sd {spread:.1%} of the mean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
