"""One config measured in many fresh processes: does its figure depend on the process it ran in?

A config whose runs allocate large fresh buffers (a 1024x1024 float32 output and its temporaries: 4 MiB each)
spends much of a run in page faults where glibc hands its buffers back to the kernel after each run: a block over
its mmap threshold is mapped afresh, and the free top of its heap is given back past its trim threshold. glibc
lifts both as the process frees large mapped blocks, so two processes of one config could sit in different
regimes for their whole life, each with a tight spread. Since 2026-12-07 the fork server fixes them before any
trial forks from it (``autotune.environment.settle_allocator``): the ``autotune`` figures should agree with the
``pinned`` ones, where a plain script's may not.

For each of ``--processes`` rounds this runs, in turn:

* ``autotune``: ``autotune run --json`` of the config (a trial's process, forked from its fork server);
* ``pinned``: the same with the allocator's thresholds fixed (``MALLOC_MMAP_THRESHOLD_`` 32 MiB,
  ``MALLOC_TRIM_THRESHOLD_`` 256 MiB: every buffer stays in the heap);
* ``script``: a plain Python process as a user's script runs it: the workload built, 3 runs of warm-up, then
  runs for ``--min-time`` seconds, with the page faults a run took (``ru_minflt``).

and prints every figure, then each kind's smallest, median and largest throughput.

Example (the README's "Adding a workload" example, saved as distances.py and distances.yaml)::

    python benchmarks/allocator_regimes.py -w distances.py:DistancesWorkload -s small \\
        --set method=expand --set dtype=float32 --processes 8
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

PINNED = {"MALLOC_MMAP_THRESHOLD_": str(32 * 2**20), "MALLOC_TRIM_THRESHOLD_": str(256 * 2**20)}

# A user's script: the workload's own build and run, timed with nothing of autotune's around it.
SCRIPT = """
import json, resource, statistics, sys, time
from autotune.registry import get_workload_class, space_path
from autotune.space import SearchSpace
spec, size, sets, min_time, threads = json.loads(sys.argv[1])
import torch
torch.set_num_threads(threads)
workload = get_workload_class(spec)(size, "cpu")
workload.prepare()
space = SearchSpace.from_file(space_path(spec))
config = space.parse_assignments(sets, space.defaults)
run = workload.build(config)
for _ in range(3):
    run()
times, faults = [], resource.getrusage(resource.RUSAGE_SELF).ru_minflt
while sum(times) < min_time or len(times) < 3:
    start = time.perf_counter()
    run()
    times.append(time.perf_counter() - start)
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / len(times)
print(json.dumps({"throughput": workload.items_per_run(config) / statistics.median(times), "faults": faults}))
"""


def autotune_run(args: argparse.Namespace, env: dict[str, str]) -> float:
    command = [sys.executable, "-m", "autotune", "run", "-w", args.workload, "-d", "cpu", "-s", args.size,
               "--min-time", str(args.min_time), "--threads", str(args.threads), "--json"]
    for assignment in args.set:
        command += ["--set", assignment]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env={**os.environ, **env})
    if done.returncode != 0:
        raise SystemExit(f"autotune run failed (exit {done.returncode}): {done.stderr.strip()[-1000:]}")
    return json.loads(done.stdout)["throughput"]


def script_run(args: argparse.Namespace) -> tuple[float, float]:
    payload = json.dumps([args.workload, args.size, args.set, args.min_time, args.threads])
    done = subprocess.run([sys.executable, "-c", SCRIPT, payload], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"the script failed (exit {done.returncode}): {done.stderr.strip()[-1000:]}")
    found = json.loads(done.stdout.splitlines()[-1])
    return found["throughput"], found["faults"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-w", "--workload", required=True, help="a workload, as --workload names it")
    parser.add_argument("-s", "--size", default="small")
    parser.add_argument("--set", action="append", default=[], help="name=value, as `autotune run --set`")
    parser.add_argument("--processes", type=int, default=8, help="fresh processes of each kind (default 8)")
    parser.add_argument("--min-time", type=float, default=0.3, help="seconds of timed runs a process")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    if args.processes < 1 or args.min_time <= 0 or args.threads < 1:
        parser.error("--processes and --threads must be 1 or more, --min-time over 0")
    figures: dict[str, list[float]] = {"autotune": [], "pinned": [], "script": []}
    for index in range(args.processes):
        figures["autotune"].append(autotune_run(args, {}))
        figures["pinned"].append(autotune_run(args, PINNED))
        throughput, faults = script_run(args)
        figures["script"].append(throughput)
        print(f"process {index + 1}: autotune {figures['autotune'][-1]:,.0f}, pinned {figures['pinned'][-1]:,.0f}, "
              f"script {throughput:,.0f} items/s ({faults:,.0f} page faults a run)", flush=True)
    for kind, values in figures.items():
        print(f"{kind:9} smallest {min(values):,.0f}  median {statistics.median(values):,.0f}  "
              f"largest {max(values):,.0f} items/s  (largest/smallest {max(values) / min(values):.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
