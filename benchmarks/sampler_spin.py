"""What the search's own BLAS threads cost the trial timed next (why ``autotune.loop`` holds them to one).

After a BLAS call OpenBLAS keeps its threads spinning, a tenth of a second of a core, in case another call
follows. The search's sampler (the linear model's solves) runs in the search's process just before each trial:
a trial that uses every core then shares one with a spinning thread. A child process stands in for the trial:
after each solve of the parent's it times 15 runs of a matrix product on two threads (about 1 ms each). Rounds
alternate the parent's solve as numpy runs it (threads spinning after) and under the search's limit
(``autotune.environment.thread_pools``, as ``autotune.loop`` holds it).

Example::

    python benchmarks/sampler_spin.py --rounds 20
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time

CHILD = r"""
import json, sys, time, torch
torch.set_num_threads(2)
a = torch.rand(400, 400)
for _ in range(20):
    a @ a
for line in sys.stdin:
    times = []
    for _ in range(15):
        start = time.perf_counter(); a @ a; a @ a; times.append(time.perf_counter() - start)
    print(json.dumps(times), flush=True)
"""


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    from autotune.environment import thread_pools

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20, help="rounds of each way (default 20)")
    args = parser.parse_args(argv)
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    matrix = np.random.default_rng(0).random((300, 300))
    runs: dict[str, list[list[float]]] = {"numpy's threads": [], "one BLAS thread": []}
    try:
        for _ in range(args.rounds):
            for way, held in runs.items():
                time.sleep(0.4)  # the last round's threads asleep
                with thread_pools(1, "blas") if way == "one BLAS thread" else contextlib.nullcontext():
                    np.linalg.solve(matrix @ matrix.T + np.eye(300), np.ones(300))
                child.stdin.write("go\n")
                child.stdin.flush()
                held.append(json.loads(child.stdout.readline()))
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    print(f"15 runs of a 2-thread product just after the sampler's solve, {args.rounds} rounds each way:")
    for way, held in runs.items():
        total = statistics.median(sum(r) for r in held)
        print(f"  {way:<16} median run {1e3 * statistics.median(t for r in held for t in r):.2f} ms; the 15 take "
              f"{1e3 * total:.1f} ms; slowest run {1e3 * statistics.median(max(r) for r in held):.1f} ms (medians "
              "over rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
