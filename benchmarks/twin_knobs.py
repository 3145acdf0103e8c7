"""Which knobs each built-in's own check names as setting its tolerance, and what asking it costs a trial.

Each trial that passes asks its check, of the same output, under its config with one knob at a time at the
reference's (autotune.twins.knobs_that_loosen). This builds each built-in's defaults and baseline on the CPU profile
with bf16 (as the planted bugs are run), runs each once, and prints the check's time, the time of those asks and the
knobs they name.

    python benchmarks/twin_knobs.py [--sizes tiny small]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.mutants.harness: the planted bugs' bench

from autotune.twins import knobs_that_loosen  # noqa: E402
from tests.mutants.harness import Bench  # noqa: E402

WORKLOADS = ("chmm", "ten", "vlm_mc", "latentwire", "lsd")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS))
    parser.add_argument("--sizes", nargs="+", default=["tiny"])
    args = parser.parse_args()
    print(f"{'workload':<11} {'size':<6} {'config':<9} {'check (ms)':>10} {'asks (ms)':>10} {'knobs asked':>11}  names")
    for name in args.workloads:
        for size in args.sizes:
            bench = Bench.open(name, size)
            reference = bench.space.reference.to_dict()
            for label, values in (("defaults", bench.space.defaults), ("baseline", bench.space.baseline)):
                config = bench.space.validate(dict(values))
                output = bench.workload.build(config)()
                start = time.perf_counter()
                check = bench.workload.check(output, bench.reference, config)
                checked = time.perf_counter() - start
                start = time.perf_counter()
                knobs = knobs_that_loosen(bench.workload.check, check.metrics, output, bench.reference, config,
                                          reference)
                asked = time.perf_counter() - start
                differ = sum(1 for k in config.to_dict() if k in reference and config[k] != reference[k])
                print(f"{name:<11} {size:<6} {label:<9} {1000 * checked:>10.1f} {1000 * asked:>10.1f} {differ:>11}  "
                      f"{', '.join(knobs or []) or '-'}", flush=True)


if __name__ == "__main__":
    main()
