"""How often a config wrong one run in K is caught: the checks after the timed runs against the first and last alone.

A planted bug that strikes at random (a race, a buffer read before its copy
landed): chmm under a config, its ``counts`` output doubled in one run in
``--every`` (drawn from the OS in each trial's process, as a race would be).
Each config is measured as a search measures it (a fresh process from the
fork server, the default measurer), ``--trials`` times with the checks of the
untimed runs after the timed ones (``Measurer.check_share``, the default) and
as many times without them (the first and the last output alone), side by
side; the table says how many trials each caught and the mean wall time.

    python benchmarks/intermittent.py                      # chmm, tiny, one run in 5, 20 trials each
    python benchmarks/intermittent.py --size small --every 10 --trials 10
    python benchmarks/intermittent.py --dtype float64 --trials 10   # every config at that precision
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.runner import Runner, TrialRequest  # noqa: E402
from autotune.space import SearchSpace  # noqa: E402

#: The configs timed: the baseline, and the fastest kernels of each kind on this CPU.
CONFIGS = {
    "baseline": {},
    "numba, batched counts": {"messages": "numba", "update_c": "batched", "debug_asserts": False},
    "scan, float32": {"messages": "scan", "dtype": "float32", "debug_asserts": False},
}

FLAKY = '''
import os
import random

from workloads.chmm import ChmmWorkload

EVERY = {every}


class FlakyChmm(ChmmWorkload):
    """chmm with its counts doubled in one run in EVERY, at random (a race)."""

    name = "chmm_flaky"

    def build(self, config):
        run = super().build(config)
        draw = random.Random(os.urandom(8))  # each trial's process its own: a fork shares the module's

        def flaky():
            output = run()
            if draw.randrange(EVERY) == 0:
                output = {{**output, "counts": output["counts"] * 2}}
            return output
        return flaky
'''


def workload_file(folder: Path, every: int) -> str:
    """chmm's flaky copy and its space, as a workload in ``folder``."""
    root = Path(__file__).resolve().parent.parent
    (folder / "flaky.py").write_text(FLAKY.format(every=every))
    space = (root / "search_spaces" / "chmm.yaml").read_text().replace("workload: chmm\n", "workload: chmm_flaky\n")
    (folder / "flaky.yaml").write_text(space)
    return f"{folder / 'flaky.py'}:FlakyChmm"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--every", type=int, default=5, help="one run in this many is wrong [5]")
    parser.add_argument("--trials", type=int, default=20, help="trials of each config and setting [20]")
    parser.add_argument("--dtype", default=None,
                        help="every config at this precision (numba is left out where it cannot run it) [as listed]")
    args = parser.parse_args(argv)
    # Its workload files and cache (300 KB) are gone at the end: the default test run left one folder a run in /tmp.
    with tempfile.TemporaryDirectory(prefix="intermittent-") as name:
        return _measure(args, Path(name))


def _measure(args: argparse.Namespace, folder: Path) -> int:
    spec = workload_file(folder, args.every)
    space = SearchSpace.from_file(folder / "flaky.yaml")
    runner = Runner()
    # The reference from a run that is never wrong: EVERY of 1 << 62 draws none.
    (folder / "exact.py").write_text(FLAKY.format(every=1 << 62))
    (folder / "exact.yaml").write_text((folder / "flaky.yaml").read_text())

    def request(workload: str, config: dict, measurer: dict, purpose: str = "trial") -> TrialRequest:
        return TrialRequest(workload, args.size, "cpu", "cpu", config, str(folder / "cache"), measurer,
                            purpose=purpose, reference=space.reference.to_dict())

    reference = runner.run(request(f"{folder / 'exact.py'}:FlakyChmm", space.reference.to_dict(), {}, "reference"))
    assert reference.status == "ok", reference.error
    print(f"chmm at {args.size}, its counts doubled in one run in {args.every}; {args.trials} trials each, this "
          "machine, one after another\n")
    print(f"{'config':<24} {'checks':<34} {'caught':>8} {'wall a trial':>13}")
    for name, values in CONFIGS.items():
        if args.dtype is not None:
            if values.get("messages") == "numba" and args.dtype not in ("float32", "float64"):
                continue  # numba's kernel runs float32 and float64 only (a constraint of the space)
            values, name = {**values, "dtype": args.dtype}, f"{name.split(',')[0]}, {args.dtype}"
        config = space.validate({**space.baseline, **values}).to_dict()
        for label, measurer in (("first, last and after (default)", {}),
                                ("first and last alone", {"check_share": 1e-12})):
            caught, walls = 0, []
            for _ in range(args.trials):
                started = time.perf_counter()
                result = runner.run(request(spec, config, measurer))
                walls.append(time.perf_counter() - started)
                assert result.status in ("ok", "incorrect"), result.error
                caught += result.status == "incorrect"
            print(f"{name:<24} {label:<34} {caught:>3} of {args.trials:<2} {statistics.mean(walls):>11.2f} s",
                  flush=True)
    runner.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
