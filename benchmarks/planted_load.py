"""Other work on the machine during a search: what the search exports, and what it says.

A search on a shared machine meets other work: a build, another job, a
neighbour on the hypervisor. This script plants it: it starts ``autotune
search`` in a new folder, and busy loops (each in a session of its own, one
core each) from ``--start`` seconds after the search starts, for
``--seconds``. It prints the search's exported config and speedup, the
trials and re-measurement rounds the search said were timed beside other
work, and how long it took. Run it again with no load (``--loops 0``) for
the search alone.

The figures in the README ("Other work on the machine is measured, and
said"), on this 2-core CPU::

    # the load over the search's first five trials
    python benchmarks/planted_load.py --start 3 --seconds 10
    # the load over the re-measurement of the 10-trial search
    python benchmarks/planted_load.py --start 12 --seconds 15
    # alone
    python benchmarks/planted_load.py --loops 0
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def plant(loops: int, start: float, seconds: float, stop: threading.Event) -> None:
    """``loops`` busy loops from ``start`` to ``start + seconds`` (or until ``stop``), each in a session of its own."""
    if loops <= 0 or stop.wait(start):
        return
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True) for _ in range(loops)]
    try:
        stop.wait(seconds)
    finally:
        for process in busy:
            process.kill()
            process.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="chmm", help="workload (a name or FILE.py:Class) [default: chmm]")
    parser.add_argument("--size", default="tiny", help="size [default: tiny]")
    parser.add_argument("--trials", type=int, default=10, help="trials of the search [default: 10]")
    parser.add_argument("--seed", type=int, default=3, help="the search's seed [default: 3]")
    parser.add_argument("--loops", type=int, default=2, help="busy loops, one core each [default: 2]")
    parser.add_argument("--start", type=float, default=3.0, help="seconds after the search starts [default: 3]")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long they run [default: 10]")
    parser.add_argument("--timeout", type=float, default=900.0, help="the search's limit in seconds [default: 900]")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="planted-load-") as folder:
        stop = threading.Event()
        loader = threading.Thread(target=plant, args=(args.loops, args.start, args.seconds, stop), daemon=True)
        started = time.perf_counter()
        loader.start()
        try:
            search = subprocess.run(
                [sys.executable, "-m", "autotune", "search", "-w", args.workload, "-d", "cpu", "-s", args.size,
                 "-n", str(args.trials), "--seed", str(args.seed)],
                cwd=folder, capture_output=True, text=True, timeout=args.timeout)
        finally:
            stop.set()
            loader.join(timeout=60)
        seconds = time.perf_counter() - started
        if search.returncode != 0:
            print(search.stdout + search.stderr, file=sys.stderr)
            return 1
        export = json.loads(next(Path(folder, "studies").glob(f"*/cpu-{args.size}.json")).read_text())
    said = search.stdout + search.stderr
    beside = re.findall(r"trial #(\d+) .*\(timed beside other work: ([\d.]+) of", said)
    # What the study (and the sampler) was told of each trial: its progress line's figure.
    figures = dict(re.findall(r"trial #(\d+) +(?:\w+ +)?ok +([\d,]+ \w+/s)", said))
    load = f"{args.loops} busy loops from {args.start:g} s for {args.seconds:g} s" if args.loops else "no load"
    print(f"{args.workload} ({args.size}), {args.trials} trials, seed {args.seed}, {load}: {seconds:.0f} s")
    print(f"  exported: {export['speedup']:.2f}x over the baseline, {export['measured']['relative_spread']:.1%} "
          f"spread; {' '.join(f'{k}={v}' for k, v in sorted(export['config'].items()))}")
    print("  trials timed beside other work: "
          + (", ".join(f"#{n} ({c} cores): {figures.get(n, '-')}" for n, c in beside) or "none"))
    remeasure = export.get("remeasure") or {}
    print(f"  re-measurement: {remeasure.get('rounds')} rounds; beside other work: "
          f"{remeasure.get('beside_other_work') or 'none'}")
    for line in said.splitlines():
        if line.strip().startswith(("note:", "warning: other processes kept")):
            print(f"  {line.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
