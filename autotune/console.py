"""What a person sees: progress lines while a search runs, and the tables and JSON of its result.

Nothing here computes a figure; it formats the ones the tuner and the export document hold.
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import sys
from typing import Any, Mapping

import click

from autotune.config import Config, show
from autotune.devices import cpu_threads
from autotune.environment import beyond_threads
from autotune.exceptions import SearchSpaceError
from autotune.export import is_number
from autotune.measure import IN_A_ROW_NOISE
from autotune.selection import beaten_in_a_row, in_a_row, quiet_everywhere, remeasure_failure

__all__ = ["best_text", "devices_json", "devices_text", "result_json", "result_table", "run_text",
           "tell", "to_devnull", "warnings_only", "workload_text"]


def tell(line: str) -> None:
    """``line`` on standard error, as far as it can be written. A full disk there (a log on it: ``2> log``) was a
    traceback that stopped the search at its first line, with no word and nothing exported; a line that cannot
    be written is now dropped, and so is every later one (stderr then writes to /dev/null), and the work goes on."""
    try:
        click.echo(line, err=True)
    except OSError:
        to_devnull(sys.stderr)


def to_devnull(stream: Any) -> None:
    """Point ``stream``'s file at /dev/null: what its buffer holds, and Python's flush at exit, go there too."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stream.fileno())
    os.close(devnull)


def format_bytes(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{int(value)} B"


def three_figures(value: float) -> str:
    """Three significant digits with no exponent at any size: 0.0123, 37.5, 615, 1,457 (``.3g`` alone writes
    1.23e+03: a one-off of 1,234 s, a cold compile at a larger size, read so)."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def seconds(value: float) -> str:
    return f"{three_figures(value)} s"


def rate(value: float | None, unit: str | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{three_figures(value)} {unit or 'items'}/s"


def warnings_only(message: str) -> None:
    """A stage message of a command that shows no progress (`autotune run`): its warnings alone, on stderr."""
    if message.startswith("warning: "):
        tell(f"autotune: {message}")


def plural(n: int, noun: str) -> str:
    """``1 config``, ``14,163 runs`` (not :func:`autotune.trials.counted`, the trials a budget counts)."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}" if isinstance(n, int) else f"{n} {noun}s"


def configs_measured(trials: Any, when: str = "") -> str:
    """``20 configs measured this run (+1 repeat not re-run)``: a repeat of a measured config is no trial."""
    repeats = sum(1 for record in trials if record.duplicate_of is not None)
    return f"{plural(len(trials) - repeats, 'config')} measured{when}" + (
        f" (+{plural(repeats, 'repeat')} not re-run)" if repeats else "")


def speedup_text(value: float | None) -> str:
    return f"{value:.2f}x" if value else "-"


def error_against(error: float | None, tolerance: float) -> tuple[str, str]:
    """An error and its tolerance as text that compares as the numbers do: two significant digits, more where
    those make a failed check read as equal ("counts 1e-06 > 1e-06" for 1.04e-6 against 1e-6)."""
    if error is None:
        return "inf", f"{tolerance:.2g}"
    digits = 2
    while digits < 17 and error > tolerance and float(f"{error:.{digits}g}") <= float(f"{tolerance:.{digits}g}"):
        digits += 1
    return f"{error:.{digits}g}", f"{tolerance:.{digits}g}"


def check_line(check: dict[str, Any] | None) -> str:
    if not check:
        return "not checked"
    parts = []
    for name, (error, tolerance) in check.get("metrics", {}).items():
        shown, bound = error_against(error, tolerance)
        parts.append(f"{name} {shown} {'<=' if error is not None and error <= tolerance else '>'} {bound}")
    return ("passed" if check["passed"] else "FAILED") + (": " + ", ".join(parts) if parts else "")


def interval_said(doc: Any) -> str | None:
    """``95% interval [52.1, 57.3]`` from an export's re-measurement, or None where it gives none (an older export,
    a hand-written one, a baseline that won): a speedup of a noisy winner (±12%) was one figure, with no word of it."""
    remeasure = doc.get("remeasure") if isinstance(doc, Mapping) else getattr(doc, "remeasure", None)  # the JSON too
    low_high = (remeasure.get("speedup_interval") if isinstance(remeasure, Mapping) else None) or ()
    if not isinstance(low_high, list) or len(low_high) != 2 or not all(is_number(v) for v in low_high):
        return None
    # "[272, 1,457]" beside a "275.03x", not "[272, 1.46e+03]".
    return f"95% interval [{three_figures(low_high[0])}, {three_figures(low_high[1])}]"


#: Seconds of one-off cost (build and first run) the winner adds to the baseline's that the summary says.
ONE_OFF_SAID = 1.0


def one_off_line(ours: Mapping[str, Any] | None, theirs: Mapping[str, Any] | None) -> str | None:
    """The table's line of :func:`one_off_words`, or None."""
    said = one_off_words(ours, theirs)
    return None if said is None else f"  {'one-off':<16} {seconds(said[0]):>24}   build and first run, {said[1]}"


def one_off_words(ours: Mapping[str, Any] | None, theirs: Mapping[str, Any] | None) -> tuple[float, str] | None:
    """Where the winner (its figures: ``ours``) pays more than ``ONE_OFF_SAID`` once a job (a compile, a precompute)
    than the baseline (``theirs``): its seconds, and "once a job (the baseline's ...): ahead of the baseline after
    ...". A speedup of runs told nothing of a cold compile of 37 s (ten at `tiny`, this CPU; 615 s at `small`)."""
    if not ours or not theirs or not ours.get("one_off_seconds") or not ours.get("throughput") \
            or not theirs.get("throughput"):
        return None
    once, before = ours["one_off_seconds"], theirs.get("one_off_seconds") or 0.0
    saved = 1 / theirs["throughput"] - 1 / ours["throughput"]  # seconds a unit of work
    if once - before <= ONE_OFF_SAID or saved <= 0:
        return None
    items, unit = (once - before) / saved, ours.get("unit") or "items"
    return once, (f"once a job (the baseline's {seconds(before)}): ahead of the baseline after {items:,.0f} {unit}, "
                  f"{seconds(items / theirs['throughput'])} of its runs")


def other_work_line(candidates: list[Any]) -> str | None:
    """Which re-measurement rounds were timed beside other work, and whether quiet rounds made them up; or None."""
    hit = [(i + 1, r.busy_elsewhere) for c in candidates for i, r in enumerate(c.results) if r.beside_other_work]
    if not hit:
        return None
    busy = (f"other processes kept up to {max(b for _, b in hit):.1f} of {cpu_threads()} cores busy in re-measurement "
            f"round {', '.join(str(n) for n in sorted({n for n, _ in hit}))}")
    if quiet_everywhere(c.results for c in candidates):
        return f"  note: {busy}; each config's figures come from its quiet rounds"
    return f"  warning: {busy}, and some config had no quiet round: the figures above may be off; run alone to trust them"


def borrowed_cores(cores_used: float | None, threads: int | None) -> str:
    """What timed runs kept busy beyond their ``threads`` ("1.2 cores busy, more than its 1 thread"), or ''."""
    return (f"{cores_used:.1f} cores busy, more than its {plural(threads, 'thread')}"  # type: ignore[arg-type]
            if beyond_threads(cores_used, threads) else "")


def borrowed_cores_line(winner: Any) -> str | None:
    """A warning where the winner's re-measured runs kept more cores busy than its threads, or None."""
    said = next(filter(None, (borrowed_cores(r.cores_used, r.threads) for r in winner.results)), "")
    return (f"  warning: the winner's timed runs kept {said}: a thread or process of its own ran on cores "
            "--threads left idle, so it may not be as fast within them; to compare configs within N cores, "
            "run the search under `taskset -c` or a container's --cpus") if said else None


def candidate_json(candidate: Any) -> dict[str, Any] | None:
    if candidate is None:
        return None
    return {"trial": candidate.trial, "config": candidate.config.to_dict(), "passed": candidate.passed,
            "measured": candidate.figures(), "check": candidate.check,
            "statuses": [r.status for r in candidate.results], "error": candidate.error}


def result_json(result: Any) -> dict[str, Any]:
    return {
        "workload": result.workload, "device": result.device, "size": result.size,
        "study": result.study_name, "storage": result.storage, "unit": result.unit, "unused": list(result.unused),
        "trials_run": len(result.trials), "counts": result.counts, "restricted_asks": result.restricted,
        "winner": candidate_json(result.winner), "baseline": candidate_json(result.baseline),
        "speedup": result.speedup, "export": str(result.export_path) if result.export_path else None,
        "speedup_interval": (getattr(result.document, "remeasure", None) or {}).get("speedup_interval"),
        "choices": [{"parameter": o.parameter, "value": o.value, "verdict": o.verdict, "measured": o.measured,
                     "best_throughput": o.best_throughput, "statuses": o.statuses, "ruled_out": o.ruled_out}
                    for o in result.choices],
        "candidates": [candidate_json(c) for c in result.candidates], "seconds": result.seconds}


def figures_row(label: str, figures: dict[str, Any] | None, failure: str | None = None) -> str:
    why = f"  ({failure})" if failure else ""
    if not figures:
        return f"  {label:<16} -{why}"
    # A hand-written export may lack a figure (export.py checks the types of those it has): "-" stands for it.
    spread = "-" if figures.get("relative_spread") is None else f"±{100 * figures['relative_spread']:.1f}%"
    spread += " (noisy)" if figures.get("noisy") else ""
    return (f"  {label:<16} {rate(figures.get('throughput'), figures.get('unit')):>24}  "
            f"{format_bytes(figures.get('peak_memory_bytes')):>10}  {spread}{why}")


def result_table(result: Any, workers: bool = False) -> str:
    """A search's summary; ``workers``: its trials were run by worker processes, which the result does not hold."""
    counts = ", ".join(f"{status} {n}" for status, n in result.counts.items())
    measured = "measured by its workers" if workers else configs_measured(result.trials, " this run")
    restricted = (f" (and {plural(result.restricted, 'ask')} for a config that breaks a constraint: never measured)"
                  if result.restricted else "")
    lines = [f"{result.workload} ({result.size}) on {result.device}: study {result.study_name}, {measured}"
             f"; in the study: {counts}{restricted}; {result.seconds:.0f} s"]
    if result.winner is None and result.counts.get("ok") and not any(c.results for c in result.candidates):
        # Over --memory-budget, or outside the space as this device runs it now: neither may win (selection.py).
        lines.append(f"{plural(result.counts['ok'], 'config')} passed their check, but none may win: each is over the memory "
                     "budget or outside the space as this device runs it now (see `autotune report`): nothing "
                     "re-measured, nothing exported.")
        return "\n".join(lines)
    if result.winner is None and result.counts.get("ok"):
        # Why, in the first failed candidate's words: it read "...and fit the memory budget" where none was given
        # and every round had failed (a workload file edited during the search).
        failed = next((c for c in result.candidates if c.role != "baseline" and c.failure), None)
        why = f" (candidate #{failed.trial}: {failed.failure})" if failed else " within the memory budget"
        lines.append(f"{plural(result.counts['ok'], 'config')} passed their check, but none of them passed again when "
                     f"re-measured{why}: nothing exported.")
        return "\n".join(lines)
    if result.winner is None and not result.counts.get("incorrect"):
        # Every trial killed at its timeout (a workload too slow at this size): the way on is the user's to take.
        slow = (" Each ran past the trial timeout: a measurement takes a first run, a warm-up and 3 timed runs at "
                "least, so raise --trial-timeout or take a smaller --size.") if set(result.counts) == {"timeout"} else ""
        lines.append("No configuration came through its trial with figures and a check (each failed: an error, such "
                     "as a check that passed a plainly wrong output, or a crash, oom or timeout; see each above or in "
                     f"`autotune report`): nothing exported.{slow}")
        return "\n".join(lines)
    if result.winner is None:
        lines.append("No configuration passed its correctness check: nothing exported.")
        return "\n".join(lines)
    winner, baseline = result.winner, result.baseline
    lines += [
        f"Best config (trial #{winner.trial}): {winner.config.describe(result.unused)}",
        "",
        f"  {'':<16} {'throughput':>24}  {'peak memory':>10}  spread",
        figures_row(f"best #{winner.trial}", winner.figures()),
        figures_row(f"baseline #{baseline.trial}" if baseline.trial is not None else "baseline", baseline.figures(),
                    baseline.failure),
        f"  {'speedup':<16} {speedup_text(result.speedup):>24}   ("
        + "; ".join(filter(None, [interval_said(getattr(result, "document", None)),
                                  f"re-measured side by side, {plural(len(winner.results), 'interleaved round')}"]))
        + ")",
        f"  {'check':<16} {check_line(winner.check)}",
        "",
        f"Exported to {result.export_path}",
    ]
    # The speedup is the median runs' ratio; where runs in a row say clearly less (beyond the noise between the two
    # figures: measure.IN_A_ROW_NOISE), a job gets that, and is told; so where the baseline lost by those alone.
    share = in_a_row(winner, baseline) if winner.passed else None
    if share is not None and result.speedup and (share < (1 - IN_A_ROW_NOISE) * result.speedup
                                                 or winner is not baseline and beaten_in_a_row(baseline, [winner])):
        lines.insert(-3, f"  {'':<16} {share:>23.2f}x   over runs in a row: a cost paid every few runs is in it, left "
                         "out of a median run")
    said = one_off_line(winner.figures(), baseline.figures()) if winner is not baseline else None
    if said:
        lines.insert(-3, said)
    for warning in (other_work_line(result.candidates), borrowed_cores_line(winner)):
        if warning:
            lines.insert(-2, warning)
    # selection.pick_winner gives a tie to the baseline: "#3 323,110 items/s" beside it read as a loss unsaid.
    top = max((c.figures()["throughput"] for c in result.candidates
               if c.figures() and not beaten_in_a_row(c, result.candidates)), default=0.0)
    if winner.role == "baseline" and top > winner.figures()["throughput"]:
        faster = 100 * (top / winner.figures()["throughput"] - 1)
        lines.insert(-2, f"  a candidate's median was {three_figures(faster)}% faster: within the runs' noise, so no "
                         "config measurably beats the baseline")
    if result.only_baseline:  # `-n 1` on a new study
        lines.insert(-2, "  warning: the study measured only the baseline, so its config is exported, and load_config "
                         "now gives it in place of the space's defaults, which were never measured; search with "
                         "--trials 2 or more")
    if result.choices:
        lines.insert(-2, "")
        lines.insert(-2, "What each choice did (best correct throughput in the study; how its trials ended):")
        width = max(12, *(len(show(o.value)) for o in result.choices))  # compile=max-autotune-no-cudagraphs
        said = max(10, *(len(o.verdict) for o in result.choices))
        for outcome in result.choices:
            ended = ", ".join(f"{status} {n}" for status, n in sorted(outcome.statuses.items()))
            if outcome.verdict == "ruled out":
                ended = f"breaks {outcome.ruled_out}"
            lines.insert(-2, f"  {outcome.parameter:<16} {show(outcome.value):<{width}} {outcome.verdict:<{said}} "
                             f"{rate(outcome.best_throughput, result.unit):>22}  {ended}".rstrip())
    # Fastest re-measured first (a failed one last), as the line reads: the search's order, with a config timed beside
    # other work after the rest, read "#18 2,515,850; #28 2,516,246".
    losers = sorted((c for c in result.candidates if c is not winner and c.role != "baseline"),
                    key=lambda c: -c.figures()["throughput"] if c.figures() else math.inf)
    if losers:
        lines.insert(-2, "  other candidates: " + "; ".join(
            f"#{c.trial} {rate(c.figures()['throughput'], c.figures()['unit']) if c.figures() else c.results[-1].status}"
            + (f" (over runs in a row {b[1]:.2f}x {b[0].name}: a cost paid every few runs, left out of a median)"
               if (b := beaten_in_a_row(c, result.candidates)) else "")
            for c in losers))
    return "\n".join(lines)


def best_text(doc: Any, source: str, unused: tuple[str, ...] = ()) -> str:
    """`autotune best`: an export document (:class:`~autotune.export.ExportDocument`) as a table; ``unused``
    are the knobs with no effect under its config."""
    # A hand-written export may say no more than its config: what it leaves out is left out here too. Whose it is,
    # where it says: one file per workload, device and size takes the winner of whichever study searched last.
    study = doc.study if isinstance(getattr(doc, "study", None), Mapping) else {}
    whose = (f", study {study['name']}" + (f" in {study['storage']}" if isinstance(study.get("storage"), str) else "")
             if isinstance(study.get("name"), str) else "")
    measured = doc.measured or {}
    borrowed = borrowed_cores(measured.get("cores_used"), measured.get("threads"))
    return "\n".join([
        f"{doc.workload}{f' ({doc.size})' if doc.size else ''} on {doc.device}"
        f"{f' ({doc.device_name})' if doc.device_name else ''}, from {source}{whose}",
        f"Best config{f' (trial #{doc.trial})' if doc.trial is not None else ''}: {Config(doc.config).describe(unused)}",
        "",
        figures_row("best", doc.measured),
        figures_row("baseline", doc.baseline, baseline_failure(doc.baseline or {}, doc.remeasure)),
        f"  {'speedup':<16} {speedup_text(doc.speedup):>24}" + (f"   ({said})" if (said := interval_said(doc)) else ""),
        *filter(None, [one_off_line(doc.measured, doc.baseline)]),
        f"  {'check':<16} {check_line(doc.check)}",
        *tuned_with(doc.environment or {}, doc.exported_at, study.get("memory_budget_bytes")),
        *([f"  warning: its timed runs kept {borrowed}: a thread or process of its own ran on cores --threads left "
            "idle"] if borrowed else []),
    ])


def baseline_failure(baseline: Mapping[str, Any], remeasure: Mapping[str, Any] | None) -> str | None:
    """Why an export's ``baseline`` has no figures to trust, as its ``remeasure`` recorded it ("oom when
    re-measured", as the search said): `best` showed dashes, or figures and no speedup, and no word why."""
    rounds = next((c for c in (remeasure or {}).get("candidates", []) if c.get("role") == "baseline"), None)
    if rounds is None:
        return None  # a hand-written export, or one from before re-measurements were recorded
    failed = next((status for status in rounds.get("statuses", []) if status != "ok"), None)
    if failed is not None:  # with what it said (an export written before 2026-12-07 has no word of it)
        return remeasure_failure(failed, rounds.get("error"))
    return None if baseline.get("throughput") is not None else "not re-measured: it failed in the search"


def tuned_with(environment: Mapping[str, Any], exported_at: str | None, budget: Any = None) -> list[str]:
    """What an export was measured with (its CPU threads too: --threads 1 went unsaid; the memory budget, over which
    a faster config could not win), and this machine's torch where it is another: the figures are that setup's (the
    presets': torch 2.11, CUDA 13.0). A line, or none if unsaid."""
    said = ", ".join(f"{label} {environment[key]}" for key, label in (("torch", "torch"), ("cuda", "CUDA"),
                                                                      ("python", "Python")) if environment.get(key))
    said += f", {plural(environment['cpu_threads'], 'CPU thread')}" if said and environment.get("cpu_threads") else ""
    try:
        here = importlib.metadata.version("torch")  # read, not imported: best imports no torch
    except importlib.metadata.PackageNotFoundError:
        here = None
    other = f" (here: torch {here})" if here and environment.get("torch") and here != environment["torch"] else ""
    when = f", on {exported_at[:10]}" if exported_at else ""
    when += f", under --memory-budget {format_bytes(budget)}" if is_number(budget) and budget > 0 else ""
    return [f"  {'tuned with':<16} {said}{when}{other}"] if said else []


def first_run_peak(result: Any) -> str:
    """`` (its first run: 134.6 MiB)`` where its own peak (ten's H200 preset's cold compile) is over 1.1x the runs'."""
    first, peak = result.first_run_peak_memory_bytes, result.peak_memory_bytes
    return f" (its first run: {format_bytes(first)})" if first and peak and first > 1.1 * peak else ""


def run_text(result: Any, config: Any, workload: str, device: str, size: str, unused: tuple[str, ...] = ()) -> str:
    """`autotune run`: one config's measurement and check; ``unused`` are the knobs with no effect under it."""
    lines = [f"{workload} ({size}) on {device}: {result.status}", f"  config       {config.describe(unused)}"]
    if result.throughput is not None:
        ran = result.environment.get("cpu_threads") or result.threads  # after its run: a workload may set its own
        own = f" (the workload's own; autotune gave it {result.threads})" if result.threads not in (None, ran) else ""
        started = f" with the {n} process{'es' * (n != 1)} it started" if (n := result.processes) else ""  # its workers
        knobs = ", ".join(result.tolerance_knobs or []) if result.status == "ok" else ""  # see autotune.twins
        looser = f" (its bound is looser than with {knobs} at the reference's: a mistake below it passes)" * bool(knobs)
        lines += [
            f"  throughput   {rate(result.throughput, result.unit)} (median {result.median_seconds:.4g} s over "
            f"{plural(result.timed_runs or len(result.times), 'run')}, spread ±{result.relative_spread or 0:.1%}"
            f"{', noisy' if result.noisy else ''}); first run {seconds(result.warmup_seconds)}"
            f"{f', after a build of {seconds(result.build_seconds)}' if result.build_seconds else ''}",
            f"  peak memory  {format_bytes(result.peak_memory_bytes)}{first_run_peak(result)}{started}, "
            f"{plural(ran, 'thread')}{own}",
            f"  check        {check_line(result.check)}{looser}",
        ]
        if result.beside_other_work:
            lines.append(f"  warning      other processes kept {result.busy_elsewhere:.1f} of {cpu_threads()} cores busy "
                         "while it was timed: its figures may be off; run alone to trust them")
        if borrowed := borrowed_cores(result.cores_used, result.threads):
            lines.append(f"  warning      its timed runs kept {borrowed}: a thread or process of its own ran on "
                         "cores --threads left idle")
    if result.error and result.status != "ok":
        lines.append(f"  error        {result.error}")
    return "\n".join(lines)


def workload_text(cls: Any, space: Any, sizes: bool = False) -> str:
    """`autotune list`: a workload and its knobs (values, default, baseline, device needs); with ``sizes``, what
    each size runs (`autotune list -w NAME`: "small" was a name, with nothing of the job it stands for)."""
    lines = [f"{cls.name}  (unit: {cls.unit}; sizes: {', '.join(cls.sizes)}; default {cls.default_size})"]
    if space.description:
        lines.append(f"  {space.description}")
    if sizes:
        named = max(map(len, cls.sizes))
        lines += [f"  size {size:<{named}}  " + " ".join(f"{k}={v}" for k, v in params.items())
                  for size, params in cls.sizes.items()]
    rows = space.describe()
    # Columns as wide as their widest entry, so that a long value (lsd's compile modes) shifts no other row.
    width = {key: max(len(str(row[key])) for row in rows) for key in ("name", "values", "default", "baseline")}
    for row in rows:
        extra = [f"when {row['condition']}"] if row["condition"] else []
        extra += [f"needs {row['requires']}"] if row["requires"] else []
        extra += ["each choice measured on the defaults in a new study"] if row["probe"] else []
        line = (f"  {row['name']:<{width['name']}}  {row['values']:<{width['values']}}  "
                f"default {row['default']:<{width['default']}}  baseline {row['baseline']:<{width['baseline']}}")
        lines.append((line + (f"  ({'; '.join(extra)})" if extra else "")).rstrip())
    for constraint in space.constraints:  # with the value each size gives a size parameter it reads
        sized = [f"{name}: " + ", ".join(f"{size} {params[name]}" for size, params in cls.sizes.items())
                 for name in space.size_parameters if name in constraint.names]
        sized += [f"{name}: true on a device that has it" for name in sorted(constraint.names)
                  if name not in space.parameters and name not in space.size_parameters]
        lines.append(f"  never run unless: {constraint.text}" + (f"  ({'; '.join(sized)})" if sized else ""))
    for size, params in cls.sizes.items():  # a search, run or explain at that size is refused with this error
        try:
            space.for_size(params, size)
        except SearchSpaceError as exc:
            lines.append(f"  warning: {str(exc).removeprefix(f'{space.source}: ')}")
    return "\n".join(lines)


def devices_json(found: list[Any], profiles: dict[str, Any]) -> dict[str, Any]:
    return {
        # A detected device's capabilities are its profile's and what was found here (bf16 on this CPU, numba).
        "detected": [{"profile": d.profile.name, "name": d.name, "memory_bytes": d.memory_bytes, **d.details,
                      "capabilities": sorted(d.profile.capabilities), "lacks": dict(d.profile.lacks)} for d in found],
        "profiles": {p.name: {"kind": p.kind, "description": p.description, "memory_bytes": p.memory_bytes,
                              "capabilities": sorted(p.capabilities)} for p in profiles.values()}}


def devices_text(found: list[Any], profiles: dict[str, Any]) -> str:
    """`autotune devices`: what was found here (auto takes the first), then every profile."""
    lines = ["Detected (--device auto picks the first, --device cuda the first CUDA GPU):"]
    lines += [f"  {d.profile.name:<12} {d.name}  {format_bytes(d.memory_bytes)}"
              + "".join(f"  {k}={v}" for k, v in d.details.items())
              + f"\n  {'':<12} capabilities here: {', '.join(sorted(d.profile.capabilities))}"
              + "".join(f"\n  {'':<12} lacks {name}: {why}" for name, why in d.profile.lacks) for d in found]
    lines += ["", "Profiles:"]
    lines += [f"  {p.name:<12} {p.description:<58} {format_bytes(p.memory_bytes):>10}  {', '.join(sorted(p.capabilities))}"
              for p in profiles.values()]
    return "\n".join(lines)

