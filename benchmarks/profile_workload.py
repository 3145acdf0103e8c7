"""Where the time of one run goes: the baseline and the tuned config of a workload, side by side.

For each config: its median run time over a few runs, then one run under
``torch.profiler`` with the operators that took the most time (self time, on
the CPU and the GPU). This is the measured profile behind a ratio: what the
winner removed, and what is left that no knob of the space can remove.

Examples::

    python benchmarks/profile_workload.py --workload ten
    python benchmarks/profile_workload.py --workload vlm_mc --tuned studies/vlm_mc/cpu-small.json --top 12
    python benchmarks/profile_workload.py --workload ten --set recurrence=scan --set chunk_size=16
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune.config import config_path  # noqa: E402
from autotune.devices import cpu_threads, resolve_device  # noqa: E402
from autotune.space import load_space  # noqa: E402
from autotune.registry import get_workload_class  # noqa: E402


def time_runs(workload, run, runs: int) -> tuple[float, float]:
    """(first run seconds, median of ``runs`` warm runs) of a built run."""
    workload.synchronize()
    start = time.perf_counter()
    run()
    workload.synchronize()
    first = time.perf_counter() - start
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        workload.synchronize()
        times.append(time.perf_counter() - start)
    return first, statistics.median(times)


def profile_run(workload, run, top: int) -> str:
    """The operators of one warm run (the same built run as timed: one compilation)."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if workload.device.startswith("cuda"):
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        run()
        workload.synchronize()
    sort = "self_cuda_time_total" if workload.device.startswith("cuda") else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=sort, row_limit=top, max_name_column_width=48)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", required=True)
    parser.add_argument("--size", default="small")
    parser.add_argument("--device", default="cpu", help="a device profile (cpu, h100, ...)")
    parser.add_argument("--tuned", type=Path, help="an exported config (default: studies/<workload>/<device>.json)")
    parser.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE", help="the tuned config by hand")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--cache", type=Path, help="data cache (default: a temporary directory)")
    args = parser.parse_args()

    torch.set_num_threads(cpu_threads())
    detected = resolve_device(args.device)
    device = detected.profile
    cls = get_workload_class(args.workload)
    space = load_space(cls.name).for_device(device)
    if args.set:
        tuned = space.parse_assignments(args.set)
    else:
        path = args.tuned or config_path(cls.name, device.name, args.size, ROOT / "studies")
        tuned = space.allowed(json.loads(path.read_text())["config"], str(path))
    cache = args.cache or Path(tempfile.mkdtemp(prefix=f"profile-{cls.name}-"))
    workload = cls(args.size, device.torch_device, cache)
    workload.prepare()
    print(f"{cls.name} ({args.size}) on {device.name}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    medians = {}
    for name, config in (("baseline", space.baseline), ("tuned", tuned)):
        run = workload.build(config)
        first, median = time_runs(workload, run, args.runs)
        medians[name] = median
        items = workload.items_per_run(config)
        print(f"\n== {name}: {config.describe()}")
        print(f"first run {first:.3f} s, median of {args.runs} warm runs {median:.3f} s, "
              f"{items / median:,.0f} {cls.unit}/s")
        print(profile_run(workload, run, args.top))
    print(f"tuned / baseline: {medians['baseline'] / medians['tuned']:.2f}x")


if __name__ == "__main__":
    main()
