"""Record a workload's whole space: every allowed config measured once, written as a Kernel Tuner cache file.

The file is a recorded space like those of ``../shared/recorded/``:
``autotune simulate --recorded FILE`` replays searches on it and
``benchmarks/search_quality.py`` scores strategies on it (it reads every
``benchmarks/recorded/*.json.gz``). Unlike the GPU spaces there, ours are
conditional and have correctness failures, so a strategy is judged on those
too.

How the space is written down:

- A knob with a range is recorded on a grid: powers of two for a log range,
  at most 8 evenly spaced values otherwise, plus its default. A knob the
  device fixes is recorded at its one value (a condition may read it), and
  ``autotune_facts`` holds what the constraints read of the size and device.
- A knob a config does not use (its condition is false) is recorded at its
  default value, as ``search`` stores it. The file's ``autotune_space`` holds
  the knobs' conditions, constraints, defaults and baseline, so that
  ``autotune.recorded`` reads it back as the conditional space it is.
- ``--leave-out NAME=VALUE`` drops a value from the grid (say why where the
  file is used): on this CPU a float16 config of ``chmm`` costs about 30 s,
  a hundred times a float32 one, in software half precision.
- A config is measured with the runner and check of ``autotune run``. Its
  ``time`` is milliseconds per item (1000 / throughput). A config that fails
  its check is recorded as ``"IncorrectConfig"``; a crash, timeout or
  out-of-memory as ``"RuntimeFailedConfig"``. Either way it is a failed config
  to a reader.

Examples::

    python benchmarks/record_space.py --workload chmm --size tiny --leave-out dtype=float16 --out benchmarks/recorded/chmm_cpu_tiny.json.gz
    python benchmarks/record_space.py --workload lsd --size tiny --leave-out compile=default --out lsd.json.gz
    python benchmarks/record_space.py --workload chmm --size tiny --limit 5 --out /tmp/try.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune.config import Config  # noqa: E402
from autotune.parameters import Parameter  # noqa: E402
from autotune.recorded import cache_entry, key_of, space_document  # noqa: E402
from autotune.settings import SearchSettings  # noqa: E402
from autotune.space import SearchSpace  # noqa: E402

#: The most values a linear range is recorded at.
LINEAR_POINTS = 8


def grid(param: Parameter, default: Any) -> list[Any]:
    """The values a knob is recorded at (see the module docstring)."""
    if param.type == "categorical":
        return list(param.choices)
    low, high = param.low, param.high
    if param.log:
        values, value = [], float(low)
        while value <= high:
            values.append(value)
            value *= 2
    else:
        count = min(LINEAR_POINTS, int((high - low) / (param.step or 1)) + 1 if param.type == "int" else LINEAR_POINTS)
        values = [low + (high - low) * i / max(count - 1, 1) for i in range(count)]
    if param.type == "int":
        values = [int(round(v)) for v in values]
    return sorted(set(values) | {default})


def configs(space: SearchSpace, leave_out: dict[str, list[Any]] | None = None,
            ) -> tuple[dict[str, list[Any]], list[Config]]:
    """Every allowed config of ``space`` on the grid, each once, and the grid of each knob.

    A knob the device fixes (lsd's ``cuda_graph`` on a CPU) is recorded at its one value: a condition or a
    constraint may read it (``compile`` is used only where ``cuda_graph == false``), so the file's space needs it.
    """
    defaults = space.defaults
    leave_out = leave_out or {}
    grids = {p.name: [v for v in grid(p, defaults[p.name]) if v not in leave_out.get(p.name, [])]
             for p in space.parameters.values()}
    seen: dict[str, Config] = {}
    for values in itertools.product(*grids.values()):
        config = space.complete(dict(zip(grids, values)))
        if config.key not in seen and space.violated(config) is None:
            seen[config.key] = config
    return grids, list(seen.values())


def write(path: Path, settings: SearchSettings, device: str, grids: dict[str, list[Any]],
          cache: dict[str, Any], space: dict[str, Any], facts: dict[str, Any] | None = None) -> None:
    # ``facts``: what the space's constraints read of this size and device (``global_batch``, ``cpu``).
    data = {"device_name": f"{device} ({platform.processor() or platform.machine()})",
            "kernel_name": f"{settings.workload} ({settings.size})", "objective": "time",
            "problem_size": settings.size, "tune_params_keys": list(grids), "tune_params": grids, "cache": cache,
            "autotune_space": space, "autotune_facts": dict(facts or {})}
    partial = path.with_name(path.name + ".partial")
    with gzip.open(partial, "wt", encoding="utf-8") as handle:
        json.dump(data, handle)
    partial.replace(path)  # a reader never sees half a file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="chmm")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--min-time", type=float, default=0.2, help="seconds of timed runs per config")
    parser.add_argument("--limit", type=int, default=None, help="record only the first N configs (a dry run)")
    parser.add_argument("--leave-out", action="append", default=[], metavar="NAME=VALUE",
                        help="a knob value not to record (repeatable)")
    parser.add_argument("--out", type=Path, required=True, help="the cache file to write (.json.gz)")
    args = parser.parse_args(argv)

    settings = SearchSettings(args.workload, args.device, args.size, min_time=args.min_time,
                              studies=str(Path(tempfile.gettempdir()) / "autotune-record-space"))
    tuner = settings.tuner()
    try:
        leave_out: dict[str, list[Any]] = {}
        for item in args.leave_out:
            name, _, text = item.partition("=")
            if name not in tuner.space.parameters:
                parser.error(f"--leave-out {item!r}: no knob {name!r}; knobs: {', '.join(tuner.space.parameters)}")
            leave_out.setdefault(name, []).append(tuner.space.parameters[name].parse(text))
        grids, todo = configs(tuner.space, leave_out)
        todo = todo[: args.limit] if args.limit is not None else todo
        print(f"{len(todo)} configs of {args.workload} ({args.size}) on {tuner.device.name}; "
              f"grid: {json.dumps(grids)}", file=sys.stderr, flush=True)
        space = space_document(tuner.space, grids)
        cache: dict[str, Any] = {}
        started = time.perf_counter()
        for index, config in enumerate(todo, 1):
            result = tuner.run_config(config)
            key = key_of(config, tuple(grids))
            cache[key] = cache_entry(config, result)
            shown = cache[key]["time"]
            shown = f"{shown:.4g} ms" if isinstance(shown, float) else shown
            print(f"[{index}/{len(todo)}] {key}: {shown}", file=sys.stderr, flush=True)
            if index % 20 == 0 or index == len(todo):
                write(args.out, settings, tuner.device.name, grids, cache, space, tuner.space.facts)
        elapsed = time.perf_counter() - started
        ok = sum(isinstance(e["time"], float) for e in cache.values())
        print(f"recorded {len(cache)} configs ({ok} ran and passed) in {elapsed:.0f} s: {args.out}", file=sys.stderr)
    finally:
        tuner.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
