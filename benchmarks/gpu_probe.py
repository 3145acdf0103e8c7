"""Seconds per run of each workload's baseline and defaults at a size: the figures a campaign is planned from.

A GPU lease is short, and a search spends most of its time on the baseline
(measured in full, several runs, then re-measured beside the winner). Before
choosing sizes and time limits, this times one cold and one warm run of the
baseline and of the defaults of each workload, in this process, and writes
the figures as JSON. It checks nothing: that is what a search does.

Examples::

    python benchmarks/gpu_probe.py --device cpu --runs chmm:tiny lsd:tiny --out /tmp/probe
    python3 benchmarks/gpu_probe.py --out $OUT --runs chmm:full lsd:full ten:full vlm_mc:small latentwire:small
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune.devices import resolve_device  # noqa: E402
from autotune.space import load_space  # noqa: E402
from autotune.registry import get_workload_class  # noqa: E402


def time_runs(workload: Any, config: Any, slow: float) -> dict[str, Any]:
    """One cold run and, unless it took more than ``slow`` seconds, one warm run."""
    started = time.perf_counter()
    run = workload.build(config)
    figures: dict[str, Any] = {"build_s": round(time.perf_counter() - started, 3)}
    for label in ("cold_s", "warm_s"):
        workload.synchronize()
        start = time.perf_counter()
        run()
        workload.synchronize()
        figures[label] = round(time.perf_counter() - start, 3)
        if figures[label] > slow:
            break
    if torch.cuda.is_available() and workload.device.startswith("cuda"):
        figures["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--runs", nargs="+", required=True, metavar="WORKLOAD:SIZE")
    parser.add_argument("--slow", type=float, default=20.0, help="skip the warm run after a cold run this long")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    found = resolve_device(args.device)
    profile = found.profile
    results: dict[str, Any] = {"device": profile.name, "torch": torch.__version__, "cuda": torch.version.cuda}
    if torch.cuda.is_available():
        results["gpu"] = torch.cuda.get_device_name()
    cache = Path(tempfile.mkdtemp(prefix="autotune-probe-"))
    for item in args.runs:
        name, size = item.split(":")
        space = load_space(name).for_device(profile)
        for role, config in (("baseline", space.baseline), ("defaults", space.defaults)):
            key = f"{name}:{size}:{role}"
            print(f"probe: {key} {config.describe()}", file=sys.stderr, flush=True)
            try:
                workload = get_workload_class(name)(size, profile.torch_device, cache / name / size)
                workload.prepare()
                if torch.cuda.is_available():
                    torch.cuda.reset_peak_memory_stats()
                results[key] = time_runs(workload, config, args.slow)
            except Exception as exc:  # noqa: BLE001 - a probe reports every failure and goes on
                results[key] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-2000:]}
            print(f"probe: {key} {results[key]}", file=sys.stderr, flush=True)
            (args.out / "probe.json").write_text(json.dumps(results, indent=1))
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
