"""The ``autotune`` command: a thin click layer over the library.

Each command parses its options, calls one library function and prints.
Errors a user can fix are one line on stderr and exit status 2.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any, Callable

import click

from autotune._version import __version__
from autotune.exceptions import AutotuneError
from autotune.stopping import stop_on_sigterm
from autotune.console import (
    Progress, best_text, devices_json, devices_text, result_json, result_table, run_text, simulation_table,
    workload_text,
)
from autotune.storage import STORAGE_ENV

_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "kib": 2**10, "m": 1e6, "mb": 1e6, "mib": 2**20,
          "g": 1e9, "gb": 1e9, "gib": 2**30, "t": 1e12, "tb": 1e12, "tib": 2**40}


def parse_bytes(text: str) -> int:
    """``"4GiB"``, ``"500MB"``, ``"1e9"`` -> bytes."""
    match = re.fullmatch(r"\s*([0-9.]+(?:[eE][+-]?\d+)?)\s*([A-Za-z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS:
        raise click.BadParameter(f"{text!r} is not a size; use e.g. 4GiB, 512MB or a number of bytes")
    try:
        value = float(match.group(1)) * _UNITS[match.group(2).lower()]
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 1 or value > 2**62:
        raise click.BadParameter(f"{text!r} is not a size between 1 byte and 4 EiB; use e.g. 4GiB or 512MB")
    return int(value)


class _Seconds(click.ParamType):
    """A positive, finite number of seconds (click's FloatRange lets NaN through)."""

    name = "seconds"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds <= 0:
            self.fail(f"{value!r} is not a positive, finite number of seconds", param, ctx)
        return seconds


def _fail(message: str) -> None:
    click.echo(f"autotune: error: {message}", err=True)
    sys.exit(2)


def _writable_folder(path: Path | None, option: str) -> None:
    """Fail at once (exit 2, nothing written) when ``path`` could never be a folder: a file stands in its way.

    Checked before any trial runs, so that a search never ends by losing its
    re-measurement to an export it cannot write.
    """
    if path is None:
        return
    for parent in (path, *path.parents):
        if parent.exists():
            if not parent.is_dir():
                _fail(f"{option} {path} cannot be a folder: {parent} is a file; choose another path")
            return


def _library_call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return function(*args, **kwargs)
    except AutotuneError as exc:
        _fail(str(exc))


# -- options shared by several commands ----------------------------------------------

def _workload_option(f: Callable) -> Callable:
    return click.option("--workload", "-w", required=True,
                        help="A built-in workload (see `autotune list`), an installed one, or path/to/file.py:ClassName.")(f)


def _device_option(f: Callable) -> Callable:
    return click.option("--device", "-d", default="auto", show_default=True,
                        help="Device profile: cpu, v100, a100, h100, h200, rtx3090, rtx5000-ada, mps, or auto.")(f)


def _size_option(f: Callable) -> Callable:
    return click.option("--size", "-s", default=None, help="Workload size: tiny, small (default) or full.")(f)


def _studies_option(f: Callable) -> Callable:
    return click.option("--studies", type=click.Path(file_okay=False, path_type=Path), default=None,
                        help="Directory of studies and exported configs [default: $AUTOTUNE_STUDIES or ./studies].")(f)


def _measure_options(f: Callable) -> Callable:
    f = click.option("--min-time", type=_Seconds(), default=1.0, show_default=True,
                     help="Seconds of timed runs per measurement, at least (and at least 3 runs).")(f)
    f = click.option("--trial-timeout", type=_Seconds(), default=600.0, show_default=True,
                     help="Seconds before a trial is killed and recorded as a timeout.")(f)
    f = click.option("--isolation", type=click.Choice(["subprocess", "inprocess"]), default="subprocess", show_default=True,
                     help="Run each trial in a fresh process (default), or in this one (debugging only).")(f)
    f = click.option("--threads", type=click.IntRange(min=1), default=None,
                     help="CPU threads for torch [default: every core this process may use].")(f)
    return f


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="autotune")
def cli() -> None:
    """Find the fastest correct way to run a PyTorch workload on a device.

    \b
    autotune search --workload chmm --device cpu --trials 20
    autotune best   --workload chmm --device cpu
    autotune report --workload chmm --device cpu
    autotune run    --workload chmm --set dtype=float64 --json
    autotune simulate --recorded ../shared/recorded/pnpoly_RTX_3090.json.gz
    autotune list
    autotune devices
    """


# -- search -----------------------------------------------------------------------------

@cli.command()
@_workload_option
@_device_option
@_size_option
@click.option("--trials", "-n", type=click.IntRange(min=1), default=20, show_default=True,
              help="Configs to measure in this run; a config the study already measured is not re-run "
                   "and not counted. A re-run resumes the study.")
@click.option("--storage", default=None, envvar=STORAGE_ENV,
              help="Study storage: an SQLAlchemy URL (sqlite:///f.db, postgresql://user:pw@host/db) or a journal "
                   "file path (several workers on one machine); also read from $AUTOTUNE_STORAGE, which keeps a "
                   "password off the command line [default: sqlite:///<studies>/autotune.db].")
@click.option("--study", "study_name", default=None, help="Study name [default: <workload>-<device>-<size>].")
@_studies_option
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Worker processes on the study (needs a journal file or a database server) [default: 1, "
                   "or one per --gpus].")
@click.option("--gpus", default=None, help="GPU indices, one worker each, e.g. 0,1,2,3 (each worker sees only its own).")
@click.option("--heartbeat", type=click.IntRange(min=1), default=10, show_default=True,
              help="Seconds between a worker's heartbeats on a database server.")
@click.option("--grace-period", type=click.IntRange(min=2), default=60, show_default=True,
              help="Seconds without a heartbeat before a trial's worker counts as dead; its trial is re-run once.")
@click.option("--memory-budget", default=None, help="Peak memory a config may use, e.g. 8GiB (a constraint).")
@click.option("--memory-limit", default=None,
              help="Hard cap on a trial's address space on the CPU, e.g. 16GiB (RLIMIT_AS): beyond it a trial is "
                   "recorded as oom instead of exhausting the machine.")
@_measure_options
@click.option("--remeasure-top", type=click.IntRange(min=1), default=3, show_default=True,
              help="How many of the best configs to re-measure beside the baseline at the end.")
@click.option("--remeasure-rounds", type=click.IntRange(min=1), default=3, show_default=True,
              help="Interleaved rounds of that re-measurement.")
@click.option("--timeout", "time_budget", type=_Seconds(), default=None,
              help="Seconds of searching: after them no new trial starts (the running one finishes, and the "
                   "re-measurement and export still happen) [default: no limit; --trials still applies].")
@click.option("--seed", type=click.IntRange(min=0, max=2**32 - 1), default=None,
              help="Seed of the sampler, for a repeatable sequence of trials.")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines; only the final table.")
@click.option("--json", "as_json", is_flag=True, help="Print the final result as JSON instead of a table.")
def search(workload: str, device: str, size: str | None, trials: int, storage: str | None, study_name: str | None,
           studies: Path | None, workers: int | None, gpus: str | None, heartbeat: int, grace_period: int,
           memory_budget: str | None, memory_limit: str | None, min_time: float, trial_timeout: float, isolation: str,
           threads: int | None, remeasure_top: int, remeasure_rounds: int, time_budget: float | None, seed: int | None, quiet: bool,
           as_json: bool) -> None:
    """Tune WORKLOAD on DEVICE: run trials, re-measure the best beside the baseline, export.

    The study lives in the storage (SQLite under the studies directory by
    default); running the same command again adds trials to it. The winner
    is written to <studies>/<workload>/<device>-<size>.json for `autotune.load_config`.

    \b
    Examples:
      autotune search --workload chmm --device cpu --trials 20
      autotune search -w chmm -d cpu -s tiny -n 5 --min-time 0.2
      autotune search -w lsd -n 500 --timeout 600       # search for ten minutes
      autotune search -w chmm --memory-budget 2GiB --storage sqlite:///my.db
      autotune search -w chmm -n 40 --workers 4 --storage studies/chmm.journal
      autotune search -w lsd -d h100 -n 100 --gpus 0,1,2,3 --storage postgresql://tuner:pw@db-host/autotune
    """
    from autotune.settings import SearchSettings
    from autotune.storage import storage_kind

    _writable_folder(studies, "--studies")
    gpu_list = _parse_gpus(gpus)
    if gpu_list and workers is not None and workers != len(gpu_list):
        _fail(f"--workers {workers} and --gpus {gpus} disagree: --gpus starts one worker per GPU ({len(gpu_list)})")
    n_workers = len(gpu_list) if gpu_list else (workers or 1)
    kind = storage_kind(storage) if storage else "sqlite"
    if n_workers > 1 and kind == "sqlite":
        _fail(f"{n_workers} workers cannot share an SQLite study (it locks under concurrent writers); use a journal "
              f"file, e.g. --storage studies/{workload.rpartition(':')[2].lower()}.journal (one machine), or a "
              f"database server, e.g. --storage postgresql://user:password@host/db (several machines)")
    settings = SearchSettings(
        workload, device, size, storage=storage, study_name=study_name,
        studies=str(studies) if studies is not None else None, isolation=isolation, trial_timeout=trial_timeout,
        memory_budget_bytes=parse_bytes(memory_budget) if memory_budget else None,
        memory_limit_bytes=parse_bytes(memory_limit) if memory_limit else None, min_time=min_time,
        remeasure_top=remeasure_top, remeasure_rounds=remeasure_rounds, time_budget=time_budget, seed=seed,
        threads=threads, heartbeat=heartbeat, grace_period=grace_period, quiet=quiet or as_json,
    )
    progress = Progress(settings.quiet, trials)
    tuner = _library_call(settings.tuner, on_trial=progress.trial, on_stage=progress.stage)
    stop_on_sigterm()
    try:
        if kind != "sqlite":
            result = _shared_search(tuner, settings, trials, n_workers, gpu_list, progress)
        else:
            result = _library_call(tuner.search, trials)
    except KeyboardInterrupt:
        progress.close()
        click.echo("\nautotune: interrupted; every completed trial is stored. Run the same command again to resume.",
                   err=True)
        sys.exit(130)
    finally:
        progress.close()
        tuner.close()
    if result is None:
        click.echo(f"{tuner.study_name}: its trials are done; another process re-measures and exports the winner.")
    elif as_json:
        click.echo(json.dumps(result_json(result), indent=2))
    else:
        click.echo(result_table(result))


def _parse_gpus(gpus: str | None) -> list[int] | None:
    if gpus is None:
        return None
    try:
        found = [int(g) for g in gpus.split(",") if g.strip()]
    except ValueError:
        found = []
    if not found or any(g < 0 for g in found) or len(set(found)) != len(found):
        _fail(f"--gpus {gpus!r} is not a list of distinct GPU indices; use e.g. --gpus 0,1,2,3")
    return found


def _shared_search(tuner: Any, settings: Any, trials: int, n_workers: int, gpus: list[int] | None,
                   progress: Progress) -> Any:
    """Drive worker processes on a shared study; the result if this process is elected to export, else None."""
    import tempfile

    from autotune.storage import redact_storage
    from autotune.workers import plan_workers, run_workers

    budget = _library_call(tuner.claim_budget, trials)
    plans, warning = plan_workers(n_workers, gpus)
    if warning:
        progress.stage(f"warning: {warning}")
    progress.stage(f"study {tuner.study_name} in {redact_storage(tuner.storage)}: budget {budget} trials, "
                   f"{len(plans)} worker(s) here")
    _library_call(tuner.ensure_reference)
    with tempfile.TemporaryDirectory(prefix="autotune-workers-") as folder:
        path = settings.write(Path(folder) / "settings.json")
        # The storage reaches the workers in their environment: a password on a command line is shown by `ps`.
        codes = run_workers(path, budget, plans, progress.stage, {STORAGE_ENV: tuner.storage})
    failed = [f"worker {i} exited {c}" for i, c in enumerate(codes) if c != 0]
    done = _library_call(tuner.budget_done, budget)
    if failed and not done:
        _fail("; ".join(failed) + "; every finished trial is stored: run the same command again to resume")
    if failed:
        progress.stage("; ".join(failed) + f"; the other workers finished all {budget} trials")
    return _library_call(tuner.finish_shared, budget)


# -- simulate ---------------------------------------------------------------------------

@cli.command()
@click.option("--recorded", "recorded_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="A recorded space: a Kernel Tuner cache file (.json or .json.gz).")
@click.option("--trials", "-n", type=click.IntRange(min=1), default=100, show_default=True,
              help="Configs evaluated per simulated search.")
@click.option("--repeats", type=click.IntRange(min=1), default=20, show_default=True,
              help="Simulated searches per strategy, with seeds S, S+1, ...")
@click.option("--seed", type=click.IntRange(min=0, max=2**32 - 1), default=0, show_default=True,
              help="Seed of the first repeat.")
@click.option("--sampler", "samplers", multiple=True,
              help="Search strategy (repeatable, to compare): tpe, tpe-multivariate, genetic, random "
                   "[default: the default of `search`].")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (one strategy only).")
def simulate(recorded_path: Path, trials: int, repeats: int, seed: int, samplers: tuple[str, ...],
             as_json: bool) -> None:
    """Replay searches on a recorded space and score them against its true optimum.

    The search loop of `autotune search` (sampler, repeats, restrictions,
    enqueued baseline) runs with each config answered from the file instead
    of run. Scores: 0 is random search on average, 1 the optimum.

    \b
    Examples:
      autotune simulate --recorded ../shared/recorded/pnpoly_RTX_3090.json.gz
      autotune simulate --recorded conv.json.gz --trials 50 --sampler tpe --sampler random
      autotune simulate --recorded pnpoly.json.gz --trials 100 --repeats 20 --json
    """
    from autotune.recorded import load_recorded
    from autotune.samplers import DEFAULT, SAMPLERS
    from autotune.simulate import simulate as replay
    from autotune.simulate import summary

    names = list(dict.fromkeys(samplers)) or [DEFAULT]
    unknown = [n for n in names if n not in SAMPLERS]
    if unknown:
        _fail(f"--sampler {unknown[0]!r} is not a search strategy; use one of: {', '.join(SAMPLERS)}")
    if as_json and len(names) > 1:
        _fail("--json prints one strategy's repeats: give at most one --sampler")
    recorded = _library_call(load_recorded, recorded_path)
    results = {}
    for name in names:
        results[name] = []
        for index in range(repeats):
            results[name].append(replay(recorded, trials, seed + index, name))
            if not as_json:
                click.echo(f"autotune: {name}: repeat {index + 1}/{repeats} done", err=True)
    if as_json:
        click.echo(json.dumps({
            "recorded": str(recorded_path), "objective": recorded.objective, "direction": recorded.direction,
            "optimum": recorded.optimum, "sampler": names[0],
            "repeats": [{"seed": r.seed, "evaluations": r.evaluations, "best_so_far": r.best_so_far}
                        for r in results[names[0]]],
        }, indent=1))
        return
    click.echo(simulation_table(recorded, {name: summary(recorded, reps) for name, reps in results.items()}, repeats))


# -- report -----------------------------------------------------------------------------

@cli.command()
@_workload_option
@click.option("--device", "-d", default="auto", show_default=True,
              help="Device profile of the study; it need not be on this machine.")
@_size_option
@click.option("--storage", default=None, envvar=STORAGE_ENV,
              help="SQLAlchemy URL or journal file of the study storage; also read from $AUTOTUNE_STORAGE "
                   "[default: sqlite:///<studies>/autotune.db].")
@click.option("--study", "study_name", default=None, help="Study name [default: <workload>-<device>-<size>].")
@_studies_option
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="HTML file to write [default: <studies>/<workload>/<device>-<size>-report.html].")
def report(workload: str, device: str, size: str | None, storage: str | None, study_name: str | None,
           studies: Path | None, output: Path | None) -> None:
    """Write a self-contained HTML report of a study (plotly inlined: it opens offline).

    It shows the trials by status, the winner against the baseline, the
    optimisation history, throughput against memory, which knobs matter, and
    a table of every trial with its error.

    \b
    Examples:
      autotune report --workload chmm --device cpu
      autotune report -w chmm -d h100 -s full -o chmm-h100.html
    """
    from autotune.report import report as write_report

    _writable_folder(studies, "--studies")
    _writable_folder(output.parent if output is not None else None, "--output's folder")

    path = _library_call(write_report, workload, device, size, storage=storage, study_name=study_name,
                         studies=studies, output=output)
    click.echo(f"Report written to {path}")


# -- best -------------------------------------------------------------------------------

@cli.command()
@_workload_option
@_device_option
@click.option("--size", "-s", default=None,
              help="Size the config was tuned at [default: the largest exported: full, then small, then tiny].")
@_studies_option
@click.option("--json", "as_json", is_flag=True, help="Print the exported document as JSON.")
def best(workload: str, device: str, size: str | None, studies: Path | None, as_json: bool) -> None:
    """Print the tuned config of WORKLOAD on DEVICE (from the exported file).

    \b
    Examples:
      autotune best --workload chmm --device cpu
      autotune best -w chmm -s tiny --json
    """
    from autotune.tuned import load_config
    from autotune.devices import get_profile, resolve_device

    if device == "auto":
        device = _library_call(resolve_device, "auto").profile.name
    else:
        _library_call(get_profile, device)
    cfg = _library_call(load_config, workload, device, size, strict=True, studies=studies)
    if as_json:
        click.echo(json.dumps(cfg.document, indent=2))
        return
    click.echo(best_text(cfg.export, cfg.source))


# -- run ----------------------------------------------------------------------------------

@cli.command()
@_workload_option
@_device_option
@_size_option
@click.option("--set", "assignments", multiple=True, metavar="NAME=VALUE",
              help="Set a knob (repeatable); values are parsed by the knob's declared type.")
@click.option("--baseline", "from_baseline", is_flag=True, help="Start from the baseline config instead of the defaults.")
@_studies_option
@_measure_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
def run(workload: str, device: str, size: str | None, assignments: tuple[str, ...], from_baseline: bool,
        studies: Path | None, min_time: float, trial_timeout: float, isolation: str, threads: int | None,
        as_json: bool) -> None:
    """Measure and check one config of WORKLOAD: throughput, peak memory and correctness.

    Exit status 0 when the config ran and passed its check, 1 otherwise.

    \b
    Examples:
      autotune run --workload chmm --device cpu
      autotune run -w chmm --baseline --set debug_asserts=false
      autotune run -w chmm -s tiny --set dtype=float16 --set update_c=loop --json
    """
    from autotune.settings import SearchSettings

    _writable_folder(studies, "--studies")
    settings = SearchSettings(workload, device, size, studies=str(studies) if studies is not None else None,
                              isolation=isolation, trial_timeout=trial_timeout, min_time=min_time, threads=threads)
    tuner = _library_call(settings.tuner)
    base = tuner.space.baseline if from_baseline else tuner.space.defaults
    config = _library_call(tuner.space.parse_assignments, assignments, base)
    try:
        result = _library_call(tuner.run_config, config)
    finally:
        tuner.close()
    heading = {"workload": tuner.workload_class.name, "device": tuner.device.name, "size": tuner.size}
    if as_json:
        click.echo(json.dumps({**result.to_dict(), **heading}, indent=2))
    else:
        click.echo(run_text(result, config, **heading))
    sys.exit(0 if result.status == "ok" else 1)


# -- list and devices -------------------------------------------------------------------

@cli.command("list")
@click.option("--workload", "-w", default=None, help="Show only this workload.")
def list_workloads(workload: str | None) -> None:
    """List the workloads and their knobs (values, default, baseline, device needs).

    \b
    Examples:
      autotune list
      autotune list --workload chmm
    """
    from autotune.registry import get_workload_class, space_path, workload_names
    from autotune.space import SearchSpace

    for name in [workload] if workload else workload_names():
        cls = _library_call(get_workload_class, name)
        click.echo(workload_text(cls, _library_call(SearchSpace.from_file, space_path(name))) + "\n")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def devices(as_json: bool) -> None:
    """Show the devices found on this machine and every device profile.

    \b
    Examples:
      autotune devices
      autotune devices --json
    """
    from autotune.devices import PROFILES, detect

    found = detect()
    click.echo(json.dumps(devices_json(found, PROFILES), indent=2) if as_json else devices_text(found, PROFILES))


def main(argv: list[str] | None = None) -> None:
    """Entry point: click's usage errors become one line and exit status 2."""
    try:
        cli.main(args=argv, prog_name="autotune", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("autotune: aborted", err=True)
        sys.exit(130)
    except click.exceptions.UsageError as exc:
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
        _fail(exc.format_message() + hint)
    except click.exceptions.ClickException as exc:
        _fail(exc.format_message())
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    sys.exit(0)
