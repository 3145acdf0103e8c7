"""One knob for two kernels, or one per kernel: what the search finds on a model of chmm's GPU space.

chmm's ``chunk_size`` serves two GPU kernels whose best chunks lie at the two ends of its range. On an H200
(2026-11-26, ``benchmarks/gpu_runs/2026-11-26-h200/``) the scan ran 23,449-38,679 timesteps/s at chunk 64,
296,905 at 792 and 717,132-1,077,668 near 3,700 (bfloat16); the chained kernel 305,644-449,546 near 64-78 and
9,659 at 3,780. A sampler models a knob from every trial that asked for it: under one name, the chained
kernel's good trials pulled the scan's chunks down with them. One search of 65 trials measured no scan chunk
over 297 and ended at 449,546; one of 24 met the scan at 792 early and ended at 1.07 million.
``autotune.parameters.split_by`` now asks for such a knob under one name per kernel.

This script runs the search loop of ``autotune simulate`` (the default strategy, the probes, repeat handling)
on chmm's GPU space, answering each config from a model fitted by eye to those figures (below), with the
split and without it, seeds 0, 1, ... side by side. It prints, at 20, 30 and 50 evaluations, the mean of the
best config found as a fraction of the model's optimum, its standard error, and how many searches came within
80% of the optimum. The model is a sketch: its figures say how much the split matters where two kernels want
opposite chunks, not what a GPU search will find.

    python benchmarks/split_knobs.py --repeats 40                 # the README's figures for the default (7 min)
    python benchmarks/split_knobs.py --repeats 20 --sampler tpe   # and for plain TPE
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.config import Config  # noqa: E402
from autotune.devices import PROFILES  # noqa: E402
from autotune.recorded import Recorded  # noqa: E402
from autotune.runner import TrialResult  # noqa: E402
from autotune.samplers import DEFAULT  # noqa: E402
from autotune.simulate import simulate  # noqa: E402
from autotune.space import SearchSpace, load_space  # noqa: E402

#: Relative speed per precision (float16 with the per-step count update fails chmm's check: no speed at all).
PRECISION = {"float64": 0.55, "float32": 0.9, "bfloat16": 1.0, "float16": 1.0}
#: Relative speed per count update: grouped ran 111,255 where batched ran 517,027-631,753 (scan, bfloat16,
#: chunks 1,747-2,430); the per-step updates 10,302 where batched ran 1,077,668 (chunk 3,689-3,696).
UPDATE = {"batched": 1.0, "grouped": 0.2, "loop": 0.01, "loop_outer": 0.01}


def throughput(config: Mapping[str, Any]) -> float:
    """Timesteps/s of ``config`` in the model (0: a config chmm's check rejects)."""
    if config["dtype"] == "float16" and config["update_c"] in ("loop", "loop_outer"):
        return 0.0
    chunk = config["chunk_size"]
    kernel = {"loop": 12_000.0,
              "scan": 35_000.0 * (chunk / 64) ** 0.85,  # 30k at 64, 298k at 792, 1.1M at 3,792
              "chained": 450_000.0 * 0.6 ** abs(math.log2(chunk / 70))}[config["messages"]]
    return kernel * PRECISION[config["dtype"]] * UPDATE[config["update_c"]] * (0.95 if config["debug_asserts"] else 1.0)


@dataclass(frozen=True)
class Modelled(Recorded):
    """A recorded space whose every config is answered by :func:`throughput` (a time per timestep, in ms)."""

    def result(self, config: Mapping[str, Any]) -> TrialResult:
        rate = throughput(config)
        if not rate:
            return TrialResult(status="incorrect", config=dict(config), error="rejected by the check")
        return TrialResult(status="ok", config=dict(config), unit="timesteps", items_per_run=1, throughput=rate,
                           median_seconds=1 / rate, times=[1 / rate], peak_memory_bytes=0, wall_seconds=1.0)

    def objective_of(self, result: TrialResult) -> float | None:
        return None if result.status != "ok" or not result.throughput else 1000 / result.throughput

    @property
    def configs(self) -> list[Config]:  # type: ignore[override]
        return []


def gpu_space(split: bool) -> SearchSpace:
    """chmm's space on a GPU; without ``split``, every knob asked for under its own name, as before the split."""
    space = load_space("chmm").for_device(PROFILES["h100"])
    if split:
        return space
    flat = copy.copy(space)
    flat._split = {}
    return flat


def optimum(space: SearchSpace) -> float:
    params = space.parameters
    return max(throughput(space.complete({"messages": m, "chunk_size": c, "dtype": d, "update_c": u,
                                          "debug_asserts": False}))
               for m in params["messages"].choices for c in range(8, 4097) if m != "loop" or c == 8
               for d in params["dtype"].choices for u in params["update_c"].choices)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20, help="searches per arm (seeds 0, 1, ...)")
    parser.add_argument("--trials", type=int, default=50, help="evaluations per search")
    parser.add_argument("--sampler", default=DEFAULT, help=f"search strategy (default: {DEFAULT})")
    args = parser.parse_args(argv)
    if args.repeats < 2 or args.trials < 20:
        parser.error("--repeats must be at least 2 and --trials at least 20")
    best = optimum(gpu_space(True))
    budgets = [m for m in (20, 30, 50, args.trials) if m <= args.trials]
    print(f"model optimum {best:,.0f} timesteps/s; {args.repeats} searches an arm, {args.sampler}")
    for split in (False, True):
        recorded = Modelled(source="model", space=gpu_space(split), order=(), entries={})
        found = []
        for seed in range(args.repeats):
            repeat = simulate(recorded, args.trials, seed, args.sampler)
            found.append([1000 / b / best if b else 0.0 for b in repeat.best_so_far])
        for m in sorted(set(budgets)):
            at = [f[min(m, len(f)) - 1] for f in found]
            se = statistics.stdev(at) / math.sqrt(len(at))
            print(f"{'one name per kernel' if split else 'one name':<20} at {m:>3}: {statistics.mean(at):.2f} "
                  f"+- {se:.2f} of the optimum, {sum(v >= 0.8 for v in at)}/{len(at)} within 80%", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
