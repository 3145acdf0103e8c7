"""Time and peak memory of `autotune simulate` on a large recorded space, loading included.

The recorded spaces here hold 4,000 to 11,000 configs; others of the same
format (Kernel Tuner caches of GEMM or hotspot kernels) hold hundreds of
thousands. This writes a synthetic cache of that size: ten knobs of 2 to 8
values each (2,211,840 combinations), ``--configs`` of them recorded at
random (the rest break a restriction), 5% of those failed, and a run time
that depends on every knob plus noise. Then it runs the command a user
would, in a child process, and prints its wall time and peak memory.

    python benchmarks/large_space.py                       # 300,000 configs, 100 trials, 2 repeats
    python benchmarks/large_space.py --configs 20000 --trials 50 --repeats 1
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Knob name -> its number of values (powers of two): 2,211,840 combinations in all.
KNOBS = {f"p{i}": n for i, n in enumerate([8, 8, 6, 6, 5, 4, 4, 3, 2, 2])}


def write_cache(path: Path, configs: int, seed: int = 0) -> int:
    """A Kernel Tuner cache of ``configs`` random combinations of :data:`KNOBS`; returns the number of combinations."""
    rng = random.Random(seed)
    params = {name: [2 ** k for k in range(n)] for name, n in KNOBS.items()}
    combinations = math.prod(KNOBS.values())
    cache: dict[str, dict] = {}
    while len(cache) < configs:
        values = [rng.choice(choices) for choices in params.values()]
        key = ",".join(map(str, values))
        if key in cache:
            continue
        # Every knob matters, later ones more: a landscape with a single best corner, blurred by noise.
        ms = 1 + sum(0.1 * (i + 1) * math.log2(v) for i, v in enumerate(values)) + rng.random()
        entry: dict = dict(zip(params, values))
        entry.update(time=ms if rng.random() > 0.05 else "RuntimeFailedConfig", times=[ms] * 7,
                     compile_time=800.0, benchmark_time=50.0, framework_time=10.0, verification_time=0,
                     strategy_time=0)
        cache[key] = entry
    document = {"device_name": "synthetic", "kernel_name": "large_space", "problem_size": [1],
                "tune_params_keys": list(params), "tune_params": params, "objective": "time", "cache": cache}
    with gzip.open(path, "wt") as out:
        json.dump(document, out)
    return combinations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", type=int, default=300_000, help="recorded configs (default 300,000)")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    if not 0 < args.configs <= math.prod(KNOBS.values()):
        parser.error(f"--configs must be between 1 and {math.prod(KNOBS.values()):,}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "large_space.json.gz"
        combinations = write_cache(path, args.configs)
        print(f"synthetic cache: {combinations:,} combinations, {args.configs:,} recorded, "
              f"{path.stat().st_size / 2**20:.1f} MiB gzipped", flush=True)
        command = [sys.executable, "-m", "autotune", "simulate", "--recorded", str(path),
                   "--trials", str(args.trials), "--repeats", str(args.repeats)]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        seconds = time.perf_counter() - started
    if done.returncode != 0:
        print(done.stdout + done.stderr, file=sys.stderr)
        return 1
    print(done.stdout, end="")
    # ru_maxrss of children is in KiB on Linux: the largest child, here the only one.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"autotune simulate: {seconds:.1f} s, peak memory {peak:.0f} MiB "
          f"({args.trials} trials x {args.repeats} repeats, loading included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
