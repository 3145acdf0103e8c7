"""The GPU campaign: tune the built-in workloads on one GPU within a short lease, and weigh each guide's claim.

A GPU machine is lent for 15 to 30 minutes of device time, 10 minutes a command. The
campaign therefore runs in parts, a workload or two a command, each part
writing only under ``--out`` (what comes back from the machine, at most 8
files): a summary (markdown and JSON), the search's log, its study database,
the exported configs laid out as presets (``presets/<workload>/<device>-<size>.json``,
to commit under ``studies/presets/``), and the output of ``pytest -m gpu`` when asked.

On an H100 (2026-11-23) one baseline run took 4-7 s at these sizes (chmm and
ten at `small` through their per-step loops, lsd at `full`, vlm_mc at `small`
through its CPU decoding), so a workload's reference, baseline and
re-measurement alone take 2-3 minutes: one workload a part, back to back
(about 40 minutes in all: more than one lease; each part stands alone)::

    python3 benchmarks/gpu_campaign.py --out $OUT --pytest --workloads chmm --size small --timeout 120 --deadline 470
    python3 benchmarks/gpu_campaign.py --out $OUT --workloads lsd --size full --timeout 200
    python3 benchmarks/gpu_campaign.py --out $OUT --workloads ten --size small --timeout 200
    python3 benchmarks/gpu_campaign.py --out $OUT --workloads vlm_mc latentwire --size small --timeout 90

(see ../shared/gpu/README.md for the wheels they need).

Dry run on the CPU (what the test suite does):

    python benchmarks/gpu_campaign.py --device cpu --size tiny --workloads chmm --timeout 5 --trials 3 --out /tmp/c

Each workload is one `autotune search` with ``--timeout`` (then the side-by-side
re-measurement of the best beside the baseline, and the export), run as a
child process that the part's ``--deadline`` kills, so a hung workload costs
its own part and not the lease; its study database comes back all the same. The verdict on a guide's claim compares the
claimed gain with the measured speedup of the tuned config over the
baseline, both in the same run; it is a whole-search figure. ``--explain``
adds the per-fix ablation: after each search that exported, ``autotune
explain`` measures each of the winner's fixes alone and inside the winner,
side by side with the baseline, against the guide's claim for that fix
(lsd's "fp16 + channels_last + SDPA: 1.96x" is a claim about the fixes
alone). Its stored explanation comes back as ``explain-<workload>.json``,
and its table is in the markdown summary.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
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


def per_workload(values: list[str], workload: str, kind: type) -> Any:
    """``VALUE`` for every workload, ``WORKLOAD=VALUE`` for one: the last that applies wins."""
    chosen = None
    for item in values:
        name, _, value = item.rpartition("=")
        if name in ("", workload):
            chosen = kind(value)
    if chosen is None:
        raise SystemExit(f"no value for {workload} in {values}: give one for all (VALUE) or for it ({workload}=VALUE)")
    return chosen


#: Seconds before its limit at which a child is asked to stop (SIGTERM), and then given to do so before it is killed.
#: A search stopped once a re-measurement round is whole exports from the whole rounds, in well under a second.
STOP_GRACE = 15.0


def run_child(command: list[str], work: Path, log: Path, title: str, limit: float,
              stdout: Any = None) -> subprocess.CompletedProcess | None:
    """``python -m autotune ...`` in a child with this checkout on its path, its stderr (and its stdout, unless
    ``stdout`` says otherwise) appended to ``log`` under ``title``; None when it had to be killed at ``limit``
    seconds. At ``limit - STOP_GRACE`` it is stopped as Ctrl-C stops it: a search late in its re-measurement then
    still exports (killed there, an lsd search on the H200 exported nothing, 2026-11-27)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with log.open("a") as stream:
        stream.write(f"\n## {title}: {' '.join(command[1:])}\n")
        stream.flush()
        with subprocess.Popen(command, cwd=work, env=env, stdout=stream if stdout is None else stdout,
                              stderr=stream, text=True) as child:
            try:
                out, _ = child.communicate(timeout=max(limit - STOP_GRACE, 1.0))
            except subprocess.TimeoutExpired:
                child.send_signal(signal.SIGTERM)
                try:
                    out, _ = child.communicate(timeout=STOP_GRACE)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.communicate()
                    return None
                stream.write(f"(stopped at {limit - STOP_GRACE:.0f} s: the part's deadline)\n")
            return subprocess.CompletedProcess(command, child.returncode, out, None)


def search(workload: str, size: str, timeout: float, args: argparse.Namespace, work: Path, log: Path,
           seconds_left: float) -> dict[str, Any]:
    """One search of one workload, in a child with a hard limit; its result JSON, or what went wrong."""
    # The search takes trials for --timeout once the baseline and defaults are measured; the reference before
    # and the re-measurement after take as long again at a GPU size (an H100 killed chmm at `small` in its last
    # round when this limit was 1.5 x --timeout + 120 s). So a search may use all the part has left, and the
    # part's deadline alone stops it: what the part finished must come back.
    limit = seconds_left - 10
    if limit < 60:
        return {"workload": workload, "size": size, "error": f"skipped: {seconds_left:.0f} s left in the part"}
    command = [sys.executable, "-m", "autotune", "search", "-w", workload, "-d", args.device, "-s", size,
               "-n", str(args.trials), "--timeout", f"{timeout:g}", "--min-time", str(args.min_time),
               "--trial-timeout", f"{args.trial_timeout:g}",
               "--studies", str(work), "--json", "--remeasure-top", str(args.remeasure_top),
               "--remeasure-rounds", str(args.remeasure_rounds)]
    started = time.perf_counter()
    done = run_child(command, work, log, f"{workload} {size}", limit, stdout=subprocess.PIPE)
    if done is None:
        return {"workload": workload, "size": size, "error": f"killed after {limit:.0f} s",
                "seconds": round(time.perf_counter() - started, 1)}
    seconds = round(time.perf_counter() - started, 1)
    if done.returncode == 1 and done.stdout.lstrip().startswith("{"):
        # The search ran and exported nothing (no config passed its check, or none fit): its counts say why.
        counts = ", ".join(f"{status} {n}" for status, n in json.loads(done.stdout)["counts"].items())
        return {"workload": workload, "size": size, "error": f"nothing exported; trials: {counts}", "seconds": seconds}
    if done.returncode == 130:  # the deadline's stop came before a whole re-measurement round: nothing exported
        return {"workload": workload, "size": size, "error": f"stopped after {limit - STOP_GRACE:.0f} s",
                "seconds": seconds}
    if done.returncode != 0:
        tail = "\n".join(log.read_text().strip().splitlines()[-5:])
        return {"workload": workload, "size": size, "error": f"exit {done.returncode}: {tail}", "seconds": seconds}
    result = json.loads(done.stdout)
    result["seconds_total"] = seconds
    return result


def explain(workload: str, result: dict[str, Any], args: argparse.Namespace, work: Path, out: Path, log: Path,
            seconds_left: float) -> dict[str, Any]:
    """`autotune explain` of the search's winner, in a child with what the part has left: each fix alone and
    inside the winner, against the guide's claim. Its stored explanation is copied to ``out``."""
    limit = seconds_left - 10
    if limit < 30:
        return {"error": f"skipped: {seconds_left:.0f} s left in the part"}
    command = [sys.executable, "-m", "autotune", "explain", "-w", workload, "-d", result["device"], "-s",
               result["size"], "--studies", str(work), "--rounds", str(args.explain_rounds), "--min-time",
               str(args.min_time), "--trial-timeout", f"{args.trial_timeout:g}"]
    done = run_child(command, work, log, f"explain {workload}", limit)
    if done is None:
        return {"error": f"killed after {limit:.0f} s"}
    stored = work / workload / "explain" / f"{result['device']}-{result['size']}.json"
    if done.returncode != 0 or not stored.is_file():  # its last line says why (the log holds the rest)
        return {"error": f"exit {done.returncode}: " + log.read_text().strip().splitlines()[-1]}
    shutil.copy(stored, out / f"explain-{workload}.json")
    return {"file": f"explain-{workload}.json", "document": json.loads(stored.read_text())}


def trial_figures(database: Path, workload: str, device: str, size: str) -> dict[str, Any] | None:
    """What a search that exported nothing (killed by the part's deadline, say) did measure: its baseline trial
    and its fastest correct trial, each a trial's own figure, not re-measured side by side. No preset and no
    verdict comes of them; they say what the next lease should look at."""
    sys.path.insert(0, str(ROOT))
    from autotune.exceptions import AutotuneError
    from autotune.stored import open_stored_study

    try:  # read-only, the study named as search names it: no such file or study is nothing to report
        study = open_stored_study(workload, device, size, storage=f"sqlite:///{database}").study
    except AutotuneError:
        return None
    trials = [t.user_attrs for t in study.get_trials(deepcopy=False)]
    correct = [a for a in trials if a.get("status") == "ok" and a.get("throughput")]
    baseline = next((a for a in correct if a.get("role") == "baseline"), None)
    if baseline is None:
        return None
    best = max(correct, key=lambda a: a["throughput"])
    return {"study": study.study_name, "trials": len(trials), "unit": baseline.get("unit"), "baseline": baseline["throughput"],
            "best": best["throughput"], "speedup": best["throughput"] / baseline["throughput"],
            "config": best.get("config")}


def summarise(workload: str, result: dict[str, Any], out: Path, rounds: int | None = None) -> dict[str, Any]:
    """One row: baseline, tuned, speedup, peak memory, the claim and its verdict; the export copied as a preset.
    A winner re-measured in fewer rounds than the ``rounds`` asked (a search that the part's deadline stopped
    late in its re-measurement: :func:`run_child`) says so beside its speedup."""
    claim = CLAIMS.get(workload, {"text": "", "gain": None})
    row: dict[str, Any] = {"workload": workload, "claim": claim, "error": result.get("error")}
    if result.get("error"):
        row.update(verdict="no result", size=result.get("size"), trial_figures=result.get("trial_figures"))
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
    whole = len(winner.get("statuses") or [])
    if rounds is not None and 0 < whole < rounds:
        row["rounds"] = f"{whole} of {rounds} rounds"
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
    from autotune.console import rate as figure  # 8.52 frames/s, as autotune prints it (":,.0f" read 9)

    lines = ["| workload | size | baseline | tuned | speedup | peak memory | guide's claim | verdict |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r.get("error"):
            seen = r.get("trial_figures")  # a trial's figures: not re-measured, so they get no verdict
            cells = (f"{figure(seen['baseline'], seen['unit'])} (trial) | {figure(seen['best'], seen['unit'])} "
                     f"(trial) | {seen['speedup']:.2f}x, not re-measured" if seen else " | ")
            lines.append(f"| {r['workload']} | {r.get('size') or ''} | {cells} | | {r['claim']['text']} | "
                         f"no result: {r['error'][:120]} |")
            continue
        rate = (lambda v: figure(v, r['unit']) if v else "-")
        memory = f"{r['peak_memory_bytes'] / 2**30:.2f} GiB" if r.get("peak_memory_bytes") else "-"
        speedup = f"{r['speedup']:.2f}x" if r.get("speedup") else "-"
        speedup += f" ({r['rounds']})" if r.get("rounds") else ""  # re-measured in fewer rounds than asked
        lines.append(f"| {r['workload']} | {r['size']} | {rate(r['baseline'])} | {rate(r['tuned'])} | {speedup} | "
                     f"{memory} | {r['claim']['text']} | {r['verdict']} |")
    for r in rows:  # --explain: what each fix bought, as `autotune explain` prints it
        if r.get("explain"):
            lines += ["", f"### {r['workload']}: what each fix bought", ""]
            if r["explain"].get("error"):
                lines.append(f"explain: {r['explain']['error'][:300]}")
            else:
                sys.path.insert(0, str(ROOT))
                from autotune.explain_view import explain_text

                lines += ["```", explain_text(r["explain"]["document"], r.get("size")), "```"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for everything the part writes ($OUT)")
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--device", default="auto", help="device profile (default: the GPU found)")
    parser.add_argument("--size", nargs="+", default=["full"], metavar="[WORKLOAD=]SIZE",
                        help="workload size, for all or for one workload (default: full)")
    parser.add_argument("--timeout", nargs="+", default=["200"], metavar="[WORKLOAD=]SECONDS",
                        help="seconds of searching, for all or for one workload (default: 200)")
    parser.add_argument("--deadline", type=float, default=570.0,
                        help="seconds the whole part may take: a device command's limit is 600 (default: 570)")
    parser.add_argument("--trials", type=int, default=500, help="at most this many trials per workload")
    parser.add_argument("--min-time", type=float, default=0.5, help="seconds of timed runs per measurement")
    parser.add_argument("--trial-timeout", type=float, default=120.0,
                        help="seconds one trial may take (max-autotune compiled lsd's convolutions for over 60 s)")
    parser.add_argument("--remeasure-top", type=int, default=3, help="candidates re-measured beside the baseline")
    parser.add_argument("--remeasure-rounds", type=int, default=3, help="rounds of that re-measurement")
    parser.add_argument("--pytest", action="store_true", help="run `pytest -m gpu` first")
    parser.add_argument("--explain", action="store_true",
                        help="after each search that exported, `autotune explain` its winner (each fix alone and "
                             "inside the winner, against the guide's claim)")
    parser.add_argument("--explain-rounds", type=int, default=2, help="interleaved rounds of that explanation")
    parser.add_argument("--work", type=Path, default=None, help="studies folder (default: a temporary one)")
    args = parser.parse_args(argv)
    try:
        sizes = {w: per_workload(args.size, w, str) for w in args.workloads}
        timeouts = {w: per_workload(args.timeout, w, float) for w in args.workloads}
    except (SystemExit, ValueError) as exc:
        parser.error(str(exc))
    if min(timeouts.values()) <= 0 or min(args.trials, args.explain_rounds) < 1 or \
            min(args.min_time, args.deadline, args.trial_timeout) <= 0:
        parser.error("--timeout, --min-time, --trial-timeout and --deadline must be positive, --trials and "
                     "--explain-rounds at least 1")
    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="autotune-campaign-"))
    work.mkdir(parents=True, exist_ok=True)
    part = "-".join(args.workloads)
    report: dict[str, Any] = {"part": part, "device": args.device, "size": args.size, "timeout": args.timeout,
                              "deadline": args.deadline}
    if args.pytest:
        print("campaign: pytest -m gpu", file=sys.stderr, flush=True)
        report["pytest_gpu"] = run_pytest(args.out, limit=min(300.0, args.deadline / 3))
    rows = []
    for workload in args.workloads:
        print(f"campaign: {workload} ({sizes[workload]}, {timeouts[workload]:g} s of search)", file=sys.stderr,
              flush=True)
        seconds_left = args.deadline - (time.perf_counter() - started)
        result = search(workload, sizes[workload], timeouts[workload], args, work, args.out / f"log-{part}.txt",
                        seconds_left)
        if result.get("error"):
            result["trial_figures"] = trial_figures(work / "autotune.db", workload, args.device, sizes[workload])
        rows.append(summarise(workload, result, args.out, args.remeasure_rounds))
        if args.explain and not result.get("error"):
            print(f"campaign: explain {workload}", file=sys.stderr, flush=True)
            rows[-1]["explain"] = explain(workload, result, args, work, args.out, args.out / f"log-{part}.txt",
                                          args.deadline - (time.perf_counter() - started))
        # Written after every workload: a part cut short still brings back what it finished.
        report["rows"] = rows
        (args.out / f"summary-{part}.json").write_text(json.dumps(report, indent=1))
        (args.out / f"summary-{part}.md").write_text(markdown(rows) + "\n")
        if (work / "autotune.db").is_file():  # the trials themselves, for `autotune report` back home
            shutil.copy(work / "autotune.db", args.out / f"studies-{part}.db")
    print(markdown(rows))
    return 0 if all(not r.get("error") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
