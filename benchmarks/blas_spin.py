"""What a trial's own BLAS calls cost its timed runs (why ``thread_pools`` leaves a pool at its count alone,
``relative_error`` sums its squares without BLAS, and a trial waits for its threads to sleep before timing).

Every trial runs in a process forked from the fork server, where OpenBLAS's threads do not survive the fork. Setting
OpenBLAS's thread count in such a process starts them afresh, and a BLAS call (``np.linalg.norm``'s dot) wakes them;
either way they spin a tenth of a second or more in case another call follows, on the cores the runs timed next
need. Each round forks a child of a fresh process (numpy and torch imported, as the fork server has them) per way;
the child sets its pools as a trial did before (``threadpool_limits`` on every pool) or as it does now
(:func:`autotune.environment.thread_pools`), then measures 0.2 ms steps on every core (a matrix product and
dropout, as a transformer block's) with autotune's own :class:`autotune.measure.Measurer` (a first run, warm-up,
200 timed runs), checking the first output with ``np.linalg.norm`` (as ``relative_error`` did before, and as a
workload's own check may) or with :func:`autotune.check.relative_error` as it is now, and waiting for its threads to
sleep after that check (:func:`autotune.environment.settle_threads`) or not. A plain process, which never forked,
has its threads asleep: so has a user's script.

Example::

    python benchmarks/blas_spin.py --rounds 10
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys

#: Each way: its pools set (every one, or those off the count), its check's sum (BLAS's, or not), and its threads
#: left to sleep after the check, or not.
WAYS = {"as before": (False, "norm", False), "pools as now": (True, "norm", False),
        "check as now": (False, "relative_error", False), "pools and check": (True, "relative_error", False),
        "norm, settled": (True, "norm", True), "as now": (True, "relative_error", True)}


def _child(way: str, write_fd: int) -> None:
    import numpy as np
    import torch

    from autotune.check import relative_error
    from autotune.devices import cpu_threads
    from autotune.environment import settle_threads, thread_pools
    from autotune.measure import Measurer

    threads = cpu_threads()
    torch.set_num_threads(threads)
    generator = torch.Generator().manual_seed(0)
    x, w = torch.randn(256, 64, generator=generator), torch.randn(64, 64, generator=generator) / 8

    def step() -> torch.Tensor:
        torch.manual_seed(0)
        return torch.nn.functional.dropout(x @ w, p=0.1, training=True)

    new_pools, check, settled = WAYS[way]
    if new_pools:
        thread_pools(threads)
    else:
        from threadpoolctl import threadpool_limits

        threadpool_limits(threads)
    reference = step()

    def on_output(which: str, output: torch.Tensor) -> bool:
        if check == "relative_error":
            relative_error(output, reference)
        else:
            float(np.linalg.norm(output.double().numpy() - reference.double().numpy())
                  / np.linalg.norm(reference.double().numpy()))
        if which == "first" and settled:
            settle_threads()
        return True

    measurement = Measurer(min_time=0.0, min_runs=200, max_runs=200).measure(step, 1, on_output=on_output)
    os.write(write_fd, json.dumps(measurement.times).encode())


def _forking(rounds: int) -> dict[str, list[list[float]]]:
    """Each round's runs, by way, from a child forked per round and way. Run in a fresh process (see ``main``): a
    process that has run torch's threads (pytest's, after other tests) forks children that deadlock."""
    for module in ("numpy", "torch"):  # as the fork server has them: OpenBLAS's threads started as numpy loads
        importlib.import_module(module)
    runs: dict[str, list[list[float]]] = {way: [] for way in WAYS}
    for _ in range(rounds):
        for way in WAYS:
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child's exit is its own
                code = 1
                try:
                    os.close(read_fd)
                    _child(way, write_fd)
                    code = 0
                finally:
                    os._exit(code)
            os.close(write_fd)
            with os.fdopen(read_fd, "rb") as pipe:
                text = pipe.read()
            _, status = os.waitpid(pid, 0)
            if os.waitstatus_to_exitcode(status) != 0 or not text:
                raise RuntimeError(f"the child of way {way!r} failed (exit {os.waitstatus_to_exitcode(status)})")
            runs[way].append(json.loads(text))
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10, help="rounds of each way (default 10)")
    parser.add_argument("--forking", action="store_true", help=argparse.SUPPRESS)  # the fresh process's part
    args = parser.parse_args(argv)
    if args.forking:
        print(json.dumps(_forking(args.rounds)))
        return 0
    done = subprocess.run([sys.executable, __file__, "--rounds", str(args.rounds), "--forking"], capture_output=True,
                          text=True, timeout=60 + 30 * args.rounds)
    if done.returncode != 0:
        print(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}",
              file=sys.stderr)
        return 1
    runs = json.loads(done.stdout)
    print(f"200 timed runs of a 0.2 ms step in a forked process after its set-up, first run, check and warm-up, "
          f"{args.rounds} rounds each way:")
    for way, held in runs.items():
        mean_over_median = statistics.median(statistics.fmean(r) / statistics.median(r) for r in held)
        stalls = statistics.median(sum(t > 2e-3 for t in r) for r in held)
        print(f"  {way:<15} median run {1e3 * statistics.median(t for r in held for t in r):.3f} ms; mean run "
              f"{mean_over_median:.2f}x the median; runs over 2 ms: {stalls:g} (medians over rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
