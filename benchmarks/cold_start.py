"""Short runs stall at a trial's start: how often the race stops a config that is as fast as the best.

A search hands each trial the study's best throughput; the race
(``tuner.RACE_FACTOR``) stops a config whose warm-up settles over 3x slower,
and the hopeless cut (``HOPELESS_FACTOR``) one whose first two runs are over
20x slower. This script measures one config fully (``autotune run``'s path),
then measures it ``--trials`` more times through autotune's own runner (a
fresh child of the fork server each time, as in a search) with that figure as
the study's best. The config cannot be slower than itself, so every trial cut
short is a false cut: a config at the best's pace recorded as "over 3x
slower", which the sampler then avoids and the re-measurement only sees again
if it ranks among the top few.

It prints the config's median run time, the trials cut short, the longest
of each trial's first five runs (the cold run, the warm-up, the first timed
runs: what the cuts judge), as a multiple of the median, and the spread of
the figures of the trials measured in full.

Example::

    python benchmarks/cold_start.py --workload chmm --size tiny --trials 40 \\
        --set messages=numba --set update_c=batched --set debug_asserts=false
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="chmm", help="workload (a name or FILE.py:Class) [default: chmm]")
    parser.add_argument("--size", default="tiny", help="size [default: tiny]")
    parser.add_argument("--set", dest="assignments", action="append", default=[],
                        help="knob=value over the defaults (repeatable)")
    parser.add_argument("--trials", type=int, default=40, help="trials measured with the race on [default: 40]")
    parser.add_argument("--min-time", type=float, default=1.0, help="timed seconds a measurement [default: 1]")
    args = parser.parse_args(argv)

    from autotune.tuner import Tuner

    with tempfile.TemporaryDirectory() as studies:
        tuner = Tuner(args.workload, device="cpu", size=args.size, studies=studies,
                      measurer={"min_time": args.min_time})
        try:
            config = tuner.space.parse_assignments(tuple(args.assignments), tuner.space.defaults)
            full = tuner.run_config(config)
            if full.status != "ok":
                print(f"the config did not pass: {full.status} {full.error}", file=sys.stderr)
                return 1
            results = [tuner.runner.run(tuner.request(config, best_throughput=full.throughput))
                       for _ in range(args.trials)]
        finally:
            tuner.close()
    failed = [r for r in results if r.status != "ok"]
    if failed:  # the same config failing once is news of its own: say it rather than count around it
        print(f"{len(failed)} of {len(results)} trials failed: {failed[0].status} {failed[0].error}", file=sys.stderr)
        return 1
    median = full.median_seconds
    cut = [r for r in results if r.cut_short]
    longest = [max(([r.warmup_seconds] + list(r.warmup_times or []) + list(r.times or []))[:5]) for r in results]
    print(f"{tuner.workload.name} ({args.size}) {config.describe()}")
    print(f"median run {median * 1e3:.3f} ms ({full.throughput:,.0f} {full.unit}/s); "
          f"{len(cut)} of {len(results)} trials at the best's pace cut short"
          + (f" (recorded at {', '.join(f'{r.throughput:,.0f}' for r in cut)} {full.unit}/s)" if cut else ""))
    print(f"longest of each trial's first 5 runs: median {statistics.median(longest) * 1e3:.2f} ms "
          f"({statistics.median(longest) / median:.1f}x its median run), "
          f"max {max(longest) * 1e3:.2f} ms ({max(longest) / median:.1f}x)")
    in_full = [r for r in results if not r.cut_short]
    whole = sorted(r.throughput for r in in_full)
    if whole:  # how far one trial's figure strays from another's, each in a fresh process
        print(f"throughput of the trials measured in full: min {whole[0]:,.0f}, median {statistics.median(whole):,.0f}, "
              f"max {whole[-1]:,.0f} {full.unit}/s ({whole[-1] / whole[0]:.2f}x); timed runs a trial: "
              f"median {statistics.median(r.timed_runs or len(r.times) for r in in_full):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
