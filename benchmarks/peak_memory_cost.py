"""What sampling a CPU trial's processes for its peak memory costs its timed runs (autotune.peak_memory).

A run is timed with the sampler's thread on and off, in interleaved rounds, side by side in one process: a Python
loop (which holds the GIL the sampler's thread takes) and a matrix product (torch's threads, on every core), each
with no process of its own (the sampler reads its threads' children alone) and beside a forked process holding
200 MiB (the sampler then reads that process's smaps_rollup and this one's status). Prints the median run time of
each, and on/off as a ratio: 1.00 is free.

    python benchmarks/peak_memory_cost.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time

import numpy
import torch

from autotune.peak_memory import SAMPLE_SECONDS, PeakMemory


def python_loop() -> float:
    total = 0.0
    for i in range(400_000):
        total += i * 0.5
    return total


A = torch.randn(1024, 1024)


def matrix_product() -> torch.Tensor:
    return A @ A


def _hold(parent: int) -> None:
    held = numpy.ones(200 * 2**20 // 8)  # written: the process's own pages
    while os.getppid() == parent:
        time.sleep(0.05)
    del held


def timed(run, sampled: bool, runs: int = 40) -> list[float]:
    """``runs`` runs' times (about a second: ten samples), the sampler's thread on or off."""
    memory = PeakMemory("cpu") if sampled else None
    try:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        return times
    finally:
        if memory is not None:
            memory.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    print(f"sampling every {SAMPLE_SECONDS} s; {os.cpu_count()} cores; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; {args.rounds} interleaved rounds of 40 runs each way")
    print(f"{'run':<16} {'processes':<10} {'off (s)':>10} {'on (s)':>10} {'on/off':>7} {'mean on/off':>12} "
          f"{'a sample (ms)':>14}")
    for with_child in (False, True):
        child = None
        if with_child:
            child = multiprocessing.get_context("fork").Process(target=_hold, args=(os.getpid(),), daemon=True)
            child.start()
            time.sleep(1.0)  # its 200 MiB written
        try:
            for name, run in (("python loop", python_loop), ("matrix product", matrix_product)):
                run()
                off, on = [], []
                for round_ in range(args.rounds):  # which goes first alternates
                    for sampled in ((False, True) if round_ % 2 == 0 else (True, False)):
                        (on if sampled else off).extend(timed(run, sampled))
                memory = PeakMemory("cpu")
                start = time.perf_counter()
                for _ in range(20):
                    memory.sample()
                sample = (time.perf_counter() - start) / 20
                memory.close()
                print(f"{name:<16} {int(with_child):<10} {statistics.median(off):>10.5f} "
                      f"{statistics.median(on):>10.5f} {statistics.median(on) / statistics.median(off):>7.3f} "
                      f"{statistics.fmean(on) / statistics.fmean(off):>12.3f} {1000 * sample:>14.3f}")
        finally:
            if child is not None:
                child.kill()
                child.join(timeout=10)


if __name__ == "__main__":
    main()
