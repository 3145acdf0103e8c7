"""The GPU campaign: tune the built-in workloads on one GPU within a short lease, and weigh each guide's claim.

A GPU machine is lent for about 30 minutes, 10 minutes a command. The
campaign therefore runs in parts, one or two workloads a command, each part
writing only under ``--out`` (what comes back from the machine): a summary
(markdown and JSON), the exported configs laid out as presets
(``presets/<workload>/<device>-<size>.json``, to commit under
``studies/presets/``), and the output of ``pytest -m gpu`` when asked.

On the GPU machine (see ../shared/gpu/README.md for the wheels), back to back:

    python3 benchmarks/gpu_campaign.py --out $OUT --pytest --workloads chmm lsd --timeout 200
    python3 benchmarks/gpu_campaign.py --out $OUT --workloads ten vlm_mc --timeout 200
    python3 benchmarks/gpu_campaign.py --out $OUT --workloads latentwire --timeout 400

Dry run on the CPU (what the test suite does):

    python benchmarks/gpu_campaign.py --device cpu --size tiny --workloads chmm --timeout 5 --trials 3 --out /tmp/c

Each workload is one `autotune search` with ``--timeout`` (then the side-by-side
re-measurement of the best beside the baseline, and the export), run as a
child process with a hard limit a little above it, so a hung workload costs
its own part and not the lease. The verdict on a guide's claim compares the
claimed gain with the measured speedup of the tuned config over the
baseline, both in the same run; it is a whole-search figure, not a per-fix
ablation (that is `autotune explain`'s job).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ("chmm", "lsd", "ten", "vlm_mc", "latentwire")

#: Each guide's headline GPU claim (../shared/seeds/), as a gain of the tuned config over the baseline.
CLAIMS: dict[str, dict[str, Any]] = {
    "chmm": {"text": "seed 000: the V100 port ran 33% slower than the CPU numba code; the fixes should win it back",
             "gain": None},
    "lsd": {"text": "seed 002: fp16 + channels_last + SDPA gives 1.96x", "gain": [1.96, 1.96]},
    "ten": {"text": "seed 003: vectorising the recurrence (a scan) gives 50-100x", "gain": [50.0, 100.0]},
    "vlm_mc": {"text": "seed 004: precomputed pixel tensors give 10-50x", "gain": [10.0, 50.0]},
    "latentwire": {"text": "seed 001: the quick wins (AMP, batch size, loader) give 2-3x", "gain": [2.0, 3.0]},
}


def verdict(speedup: float | None, gain: list[float] | None) -> str:
    if speedup is None:
        return "no result"
    if gain is None:
        return "faster" if speedup > 1 else "not faster"
    low, high = gain
    if speedup < low * 0.9:
        return "below claim"
    if speedup > high * 1.1:
        return "above claim"
    return "confirmed"


def run_pytest(out: Path, limit: float) -> dict[str, Any]:
    """``pytest -m gpu`` with its output kept: the CUDA paths' tests, run where they can run."""
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"],
                              cwd=ROOT, capture_output=True, text=True, timeout=limit)
        text, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        text, code = f"{exc.stdout or ''}\n(killed after {limit:.0f} s)", -9
    (out / "pytest-gpu.txt").write_text(text)
    last = next((line for line in reversed(text.splitlines()) if line.strip()), "")
    return {"exit": code, "last_line": last, "seconds": round(time.perf_counter() - started, 1)}


def search(workload: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """One search of one workload, in a child with a hard limit; its result JSON, or what went wrong."""
    command = [sys.executable, "-m", "autotune", "search", "-w", workload, "-d", args.device, "-s", args.size,
               "-n", str(args.trials), "--timeout", str(args.timeout), "--min-time", str(args.min_time),
               "--studies", str(work), "--json", "-q"]
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        # The search stops taking trials at --timeout; the re-measurement and export come after.
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                              timeout=args.timeout * 1.5 + 120)
    except subprocess.TimeoutExpired:
        return {"workload": workload, "error": f"killed after {args.timeout * 1.5 + 120:.0f} s",
                "seconds": round(time.perf_counter() - started, 1)}
    seconds = round(time.perf_counter() - started, 1)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        return {"workload": workload, "error": f"exit {done.returncode}: {tail}", "seconds": seconds}
    result = json.loads(done.stdout)
    result["seconds_total"] = seconds
    return result


def summarise(workload: str, result: dict[str, Any], out: Path) -> dict[str, Any]:
    """One row: baseline, tuned, speedup, peak memory, the claim and its verdict; the export copied as a preset."""
    claim = CLAIMS.get(workload, {"text": "", "gain": None})
    row: dict[str, Any] = {"workload": workload, "claim": claim, "error": result.get("error")}
    if result.get("error"):
        row["verdict"] = "no result"
        return row
    winner, baseline = result.get("winner") or {}, result.get("baseline") or {}
    row.update(
        device=result["device"], size=result["size"], unit=result["unit"], counts=result["counts"],
        trials_run=result["trials_run"], seconds=result.get("seconds_total"),
        baseline=(baseline.get("measured") or {}).get("throughput"),
        tuned=(winner.get("measured") or {}).get("throughput"),
        peak_memory_bytes=(winner.get("measured") or {}).get("peak_memory_bytes"),
        speedup=result.get("speedup"), config=winner.get("config"),
        verdict=verdict(result.get("speedup"), claim["gain"]),
    )
    export = result.get("export")
    if export and Path(export).is_file():
        document = json.loads(Path(export).read_text())
        row["environment"] = {k: document.get("environment", {}).get(k)
                              for k in ("device_name", "compute_capability", "torch", "cuda", "driver")}
        preset = out / "presets" / workload / Path(export).name
        preset.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(export, preset)
        row["preset"] = str(preset.relative_to(out))
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| workload | size | baseline | tuned | speedup | peak memory | guide's claim | verdict |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['workload']} | | | | | | {r['claim']['text']} | no result: {r['error'][:120]} |")
            continue
        rate = (lambda v: f"{v:,.0f} {r['unit']}/s" if v else "-")
        memory = f"{r['peak_memory_bytes'] / 2**30:.2f} GiB" if r.get("peak_memory_bytes") else "-"
        speedup = f"{r['speedup']:.2f}x" if r.get("speedup") else "-"
        lines.append(f"| {r['workload']} | {r['size']} | {rate(r['baseline'])} | {rate(r['tuned'])} | {speedup} | "
                     f"{memory} | {r['claim']['text']} | {r['verdict']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for everything the part writes ($OUT)")
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--device", default="auto", help="device profile (default: the GPU found)")
    parser.add_argument("--size", default="full", help="workload size (default: full)")
    parser.add_argument("--timeout", type=float, default=200.0, help="seconds of searching per workload")
    parser.add_argument("--trials", type=int, default=500, help="at most this many trials per workload")
    parser.add_argument("--min-time", type=float, default=0.5, help="seconds of timed runs per measurement")
    parser.add_argument("--pytest", action="store_true", help="run `pytest -m gpu` first")
    parser.add_argument("--work", type=Path, default=None, help="studies folder (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.timeout <= 0 or args.trials < 1 or args.min_time <= 0:
        parser.error("--timeout and --min-time must be positive, --trials at least 1")
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="autotune-campaign-"))
    work.mkdir(parents=True, exist_ok=True)
    part = "-".join(args.workloads)
    report: dict[str, Any] = {"part": part, "device": args.device, "size": args.size, "timeout": args.timeout}
    if args.pytest:
        print("campaign: pytest -m gpu", file=sys.stderr, flush=True)
        report["pytest_gpu"] = run_pytest(args.out, limit=300)
    rows = []
    for workload in args.workloads:
        print(f"campaign: {workload} ({args.size}, {args.timeout:g} s of search)", file=sys.stderr, flush=True)
        rows.append(summarise(workload, search(workload, args, work), args.out))
        # Written after every workload: a part cut short still brings back what it finished.
        report["rows"] = rows
        (args.out / f"summary-{part}.json").write_text(json.dumps(report, indent=1))
        (args.out / f"summary-{part}.md").write_text(markdown(rows) + "\n")
    print(markdown(rows))
    return 0 if all(not r.get("error") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
