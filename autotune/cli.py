"""The ``autotune`` command: a thin click layer over the library.

Each command parses its options, calls one library function and prints.
Errors a user can fix are one line on stderr and exit status 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from autotune._version import __version__
from autotune.cli_options import (
    WHOLE, Count, FilePath, Seconds, Size, Storage, StudyName, device_option, fail, library_call, measure_options,
    run_group, say, size_option, studies_option, worker_plan, workload_option, writable_folder, writable_studies,
)
from autotune.stopping import stop_on_sigterm
from autotune.console import (
    best_text, devices_json, devices_text, result_json, result_table, run_text, tell, warnings_only, workload_text,
)
from autotune.progress import Progress
from autotune.samplers import DEFAULT, SAMPLERS
from autotune.storage import DEFAULT_GRACE_PERIOD, DEFAULT_HEARTBEAT, STORAGE_ENV

@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="autotune")
def cli() -> None:
    """Find the fastest correct way to run a PyTorch workload on a device.

    \b
    autotune search --workload chmm --device cpu --trials 20
    autotune best   --workload chmm --device cpu
    autotune report --workload chmm --device cpu
    autotune run    --workload chmm --set dtype=float64 --json
    autotune simulate --recorded benchmarks/recorded/chmm_cpu_tiny.json.gz   # in a clone of the repository
    autotune list
    autotune devices
    """


# -- search -----------------------------------------------------------------------------

@cli.command()
@workload_option
@device_option
@size_option
@click.option("--trials", "-n", type=Count(min=0), default=20, show_default=True,
              help="Configs to measure in this run (fewer where a small space has no more; 0: none, re-measure the "
                   "study's best and export); one the study measured is not re-run nor counted. A re-run resumes it.")
@click.option("--storage", type=Storage(), default=None, envvar=STORAGE_ENV,
              help="Study storage: an SQLAlchemy URL (sqlite:///f.db, postgresql://user:pw@host/db) or a journal "
                   "file path (several workers on one machine); also read from $AUTOTUNE_STORAGE, which keeps a "
                   "password off the command line [default: sqlite:///<studies>/autotune.db].")
@click.option("--study", "study_name", type=StudyName(), default=None, help="Study name [default: <workload>-<device>-<size>].")
@studies_option
@click.option("--workers", type=Count(min=1), default=None,
              help="Worker processes on the study (needs a journal file or a database server) [default: 1, "
                   "or one per --gpus].")
@click.option("--gpus", default=None, help="GPU indices, one worker each, e.g. 0,1,2,3 (each worker sees only its own).")
@click.option("--heartbeat", type=Count(*WHOLE["heartbeat"]), default=DEFAULT_HEARTBEAT, show_default=True,
              help="Seconds between a worker's heartbeats on a database server.")
@click.option("--grace-period", type=Count(*WHOLE["grace_period"]), default=DEFAULT_GRACE_PERIOD, show_default=True,
              help="Seconds without a heartbeat before a trial's worker counts as dead; its trial is re-run once.")
@click.option("--memory-budget", type=Size(), default=None, help="Peak memory a config may use, e.g. 8GiB (a constraint).")
@click.option("--memory-limit", type=Size(), default=None,
              help="Cap on a trial's address space on a CPU device, e.g. 16GiB (RLIMIT_AS): beyond it a trial is "
                   "oom, measured again under a higher cap. Must exceed what a trial maps at start (~630 MiB).")
@measure_options
@click.option("--remeasure-top", type=Count(min=1), default=3, show_default=True,
              help="Top configs re-measured beside the baseline at the end, and up to as many timed beside other work.")
@click.option("--remeasure-rounds", type=Count(min=1), default=3, show_default=True,
              help="Interleaved rounds of that re-measurement (Ctrl-C after the first: the winner of the whole ones).")
@click.option("--timeout", "time_budget", type=Seconds(), default=None,
              help="Seconds of searching once the baseline and defaults are measured: then no new trial starts "
                   "(the running one finishes; re-measurement and export still happen) [default: no limit].")
@click.option("--seed", type=Count(*WHOLE["seed"]), default=None,
              help="Seed of the sampler: one seed asks the same configs while the measurements rank them the same.")
@click.option("--sampler", default=None,
              help=f"Search strategy: {', '.join(SAMPLERS)} [default: {DEFAULT}: TPE for the first 30 configs, "
                   "then a linear model; scored on recorded GPU spaces in benchmarks/search_quality.md].")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines; only the final table.")
@click.option("--json", "as_json", is_flag=True, help="Print the final result as JSON instead of a table.")
def search(workload: str, device: str, size: str | None, trials: int, storage: str | None, study_name: str | None,
           studies: Path | None, workers: int | None, gpus: str | None, heartbeat: int, grace_period: int,
           memory_budget: int | None, memory_limit: int | None, min_time: float, trial_timeout: float | None,
           isolation: str, threads: int | None, remeasure_top: int, remeasure_rounds: int, time_budget: float | None,
           seed: int | None, sampler: str | None, quiet: bool, as_json: bool) -> None:
    """Tune WORKLOAD on DEVICE: run trials, re-measure the best beside the baseline, export.

    The study lives in the storage (SQLite under the studies directory by default); running the same command again
    adds trials to it. The winner is written to <studies>/<workload>/<device>-<size>.json for `autotune.load_config`.

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

    writable_studies(studies)
    gpu_list, n_workers, shared = worker_plan(workers, gpus, storage, workload, studies, trials)
    settings = SearchSettings(
        workload, device, size, storage=storage, study_name=study_name, sampler=sampler, quiet=quiet,
        studies=str(studies) if studies is not None else None, isolation=isolation, trial_timeout=trial_timeout,
        memory_budget_bytes=memory_budget, memory_limit_bytes=memory_limit, min_time=min_time, seed=seed,
        remeasure_top=remeasure_top, remeasure_rounds=remeasure_rounds, time_budget=time_budget,
        threads=threads, heartbeat=heartbeat, grace_period=grace_period)
    progress = Progress(settings.quiet, trials, memory_budget_bytes=settings.memory_budget_bytes)
    tuner = library_call(settings.tuner, on_trial=progress.trial, on_stage=progress.stage)
    progress.best_unit = tuner.workload.unit  # a resumed study's first trial may time out and report none
    stop_on_sigterm()
    try:
        if shared:
            result = _shared_search(tuner, settings, trials, n_workers, gpu_list, progress)
        else:
            result = library_call(tuner.search, trials)
    except KeyboardInterrupt:
        progress.close()
        # Workers resume to the study's trial budget; one process measures --trials more on every run.
        again = "resume" if shared else f"go on: it measures {trials} more configs (--trials; 0 re-measures alone)"
        tell(f"\nautotune: interrupted; every completed trial is stored. Run the same command again to {again}.")
        sys.exit(130)
    finally:
        progress.close()
        tuner.close()
    if result is None:
        say(f"{tuner.study_name}: its trials are done; another process re-measures and exports the winner.")
    else:
        say(json.dumps(result_json(result), indent=2) if as_json else result_table(result, shared))
        if result.winner is None:
            sys.exit(1)  # nothing exported: a script must not go on to load_config an older export


def _shared_search(tuner: Any, settings: Any, trials: int, n_workers: int, gpus: list[int] | None,
                   progress: Progress) -> Any:
    """Drive worker processes on a shared study; the result if this process is elected to export, else None."""
    import tempfile
    import time

    from autotune.shared_study import release_dead_owners
    from autotune.storage import redact_storage
    from autotune.devices import detect
    from autotune.workers import check_gpus, pinned_threads, plan_workers, run_workers

    started = time.perf_counter()  # the summary's time, as one process's search counts it: the trials included
    if gpus is not None:  # before the study is touched: a refused --gpus writes nothing
        cuda_count = sum(found.profile.kind == "cuda" for found in detect())
        why = check_gpus(gpus, settings.device, tuner.device, cuda_count)
        if why:
            fail(why)
    budget = library_call(tuner.claim_budget, trials)
    plans, warning = plan_workers(n_workers, gpus)
    for said in [warning] * bool(warning) + tuner.space.left_out():  # as a search by one process says them
        progress.stage(f"warning: {said}")
    so_far = tuner.trials_so_far(threads=pinned_threads(plans))  # as the workers measure: on their own cores
    progress.stage(f"study {tuner.study_name} in {redact_storage(tuner.storage)} ({so_far}): budget "
                   f"{budget} trials, {len(plans)} worker(s) here")
    library_call(tuner.ensure_reference)
    with tempfile.TemporaryDirectory(prefix="autotune-workers-") as folder:
        path = settings.write(Path(folder) / "settings.json")
        try:
            # The storage reaches the workers in their environment: a password on a command line is shown by `ps`.
            codes = run_workers(path, budget, plans, progress.stage, {STORAGE_ENV: tuner.storage})
        except KeyboardInterrupt:
            release_dead_owners(tuner.open_study())  # the workers have exited: none of their trials stays RUNNING
            raise
    failed = [f"worker {i} exited {c}" for i, c in enumerate(codes) if c != 0]
    done = library_call(tuner.budget_done, budget)
    if failed and not done:
        fail("; ".join(failed) + "; every finished trial is stored: run the same command again to resume")
    if failed:
        progress.stage("; ".join(failed) + f"; the other workers finished all {budget} trials")
    return library_call(tuner.finish_shared, budget, started)


# -- simulate ---------------------------------------------------------------------------

@cli.command()
@click.option("--recorded", "recorded_path", type=FilePath(),
              help="A recorded space: a Kernel Tuner cache file (.json or .json.gz).")
@click.option("--study", "study_name", type=StudyName(), help="Or a study of autotune's, replayed as the space of the configs it measured.")
@click.option("--storage", type=Storage(),
              help="Storage of --study [default: $AUTOTUNE_STORAGE, else sqlite:///<studies>/autotune.db].")
@click.option("--trials", "-n", type=Count(min=1), default=100, show_default=True,
              help="Configs evaluated per simulated search.")
@click.option("--repeats", type=Count(min=1), default=20, show_default=True,
              help="Simulated searches per strategy, with seeds S, S+1, ...")
@click.option("--seed", type=Count(*WHOLE["seed"]), default=0, show_default=True, help="Seed of the first repeat.")
@click.option("--sampler", "samplers", multiple=True,
              help=f"Search strategy (repeatable, to compare): {', '.join(SAMPLERS)} "
                   "[default: the default of `search`].")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (one strategy only).")
def simulate(recorded_path: Path | None, study_name: str | None, storage: str | None, trials: int, repeats: int,
             seed: int, samplers: tuple[str, ...], as_json: bool) -> None:
    """Replay searches on a recorded space and score them against its true optimum.

    The search loop of `autotune search` (sampler, repeats, restrictions,
    enqueued baseline) runs with each config answered from the file instead
    of run. Scores: 0 is random search on average, 1 the optimum.

    \b
    Examples:
      autotune simulate --recorded benchmarks/recorded/chmm_cpu_tiny.json.gz   # chmm at tiny, every config
      autotune simulate --recorded conv.json.gz --trials 50 --sampler tpe --sampler random
      autotune simulate --recorded pnpoly.json.gz --trials 100 --repeats 20 --json
      autotune simulate --study chmm-cpu-tiny --storage sqlite:///studies/autotune.db
    """
    from autotune.recorded import load_recorded, load_recorded_study
    from autotune.simulate import budgets_for, repeats_json, run_repeats, simulation_table, strategies_asked, summary

    names = library_call(strategies_asked, samplers, as_json, recorded_path is not None,
                         study_name is not None or storage is not None)
    recorded = (library_call(load_recorded, recorded_path) if recorded_path is not None
                else library_call(load_recorded_study, storage, study_name))
    progress = None if as_json else (lambda line: tell(f"autotune: {line}"))
    if trials > len(recorded.entries):  # past that, a search asks only for configs it has (for minutes)
        tell(f"autotune: --trials {trials} is more than the {len(recorded.entries)} configs of "
             f"{recorded.source}: a search evaluates {len(recorded.entries)} at most")
        trials = len(recorded.entries)
    if progress and recorded_path is None:  # a partial study is a smaller space, with the best it found as optimum
        progress(f"{recorded.source}: {len(recorded.entries)} configs measured, the space its searches replay")
    results = {name: library_call(run_repeats, recorded, name, trials, repeats, seed, progress) for name in names}
    if as_json:
        say(json.dumps(repeats_json(recorded, recorded.source, names[0], results[names[0]]), indent=1))
    else:
        summaries = {n: summary(recorded, r, budgets_for(trials)) for n, r in results.items()}
        say(simulation_table(recorded, summaries, repeats))


# -- report -----------------------------------------------------------------------------

@cli.command()
@workload_option
@click.option("--device", "-d", default="auto", show_default=True,
              help="Device profile of the study; it need not be on this machine.")
@size_option
@click.option("--storage", type=Storage(), default=None, envvar=STORAGE_ENV,
              help="SQLAlchemy URL or journal file of the study storage; also read from $AUTOTUNE_STORAGE "
                   "[default: sqlite:///<studies>/autotune.db].")
@click.option("--study", "study_name", type=StudyName(), default=None, help="Study name [default: <workload>-<device>-<size>].")
@studies_option
@click.option("--output", "-o", type=FilePath(dash="/dev/stdout"), default=None,
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
    from autotune.export import written_through
    from autotune.report import report as write_report
    if output is None:
        writable_studies(studies, "write the report elsewhere with -o FILE", workload)  # beside the export
    elif not written_through(output):  # a device or a pipe (/dev/stdout) is written through
        writable_folder(output.parent, "--output's folder")
    path = library_call(write_report, workload, device, size, storage=storage, study_name=study_name,
                         studies=studies, output=output)
    click.echo(f"Report written to {path}", err=written_through(path))  # not into a page sent to /dev/stdout


# -- best -------------------------------------------------------------------------------

@cli.command()
@workload_option
@device_option
@click.option("--size", "-s", default=None,
              help="Size the config was tuned at [default: the largest exported: full, then small, then tiny].")
@studies_option
@click.option("--json", "as_json", is_flag=True, help="Print the exported document as JSON, as load_config reads it.")
def best(workload: str, device: str, size: str | None, studies: Path | None, as_json: bool) -> None:
    """Print the tuned config of WORKLOAD on DEVICE (from the exported file).

    \b
    Examples:
      autotune best --workload chmm --device cpu
      autotune best -w chmm -s tiny --json
    """
    from autotune.tuned import load_config
    from autotune.devices import filed_under

    device = library_call(filed_under, device)
    cfg = library_call(load_config, workload, device, size, strict=True, studies=studies)
    if as_json:
        say(json.dumps(cfg.document, indent=2))
        return
    say(best_text(cfg.export, cfg.source, cfg.unused))


# -- run ----------------------------------------------------------------------------------

@cli.command()
@workload_option
@device_option
@size_option
@click.option("--set", "assignments", multiple=True, metavar="NAME=VALUE",
              help="Set a knob (repeatable); values are parsed by the knob's declared type.")
@click.option("--baseline", "from_baseline", is_flag=True, help="Start from the baseline config instead of the defaults.")
@click.option("--config", "config_file", type=FilePath(), default=None,
              help="JSON file: an exported config (a preset of another machine's, say), an explanation's target, or "
                   "knob values over the defaults (the baseline with --baseline); --set applies over it.")
@studies_option
@measure_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
def run(workload: str, device: str, size: str | None, assignments: tuple[str, ...], from_baseline: bool,
        config_file: Path | None, studies: Path | None, min_time: float, trial_timeout: float | None, isolation: str,
        threads: int | None, as_json: bool) -> None:
    """Measure and check one config of WORKLOAD: throughput, peak memory and correctness.

    Exit status 0 when the config ran and passed its check, 1 otherwise.

    \b
    Examples:
      autotune run --workload chmm --device cpu
      autotune run -w chmm --baseline --set debug_asserts=false
      autotune run -w chmm -s tiny --set dtype=float16 --set update_c=loop --json
      autotune run -w chmm --config studies/chmm/cpu-small.json   # an exported config, measured again
    """
    from autotune.explain import target_from_file
    from autotune.settings import SearchSettings

    writable_studies(studies)
    settings = SearchSettings(workload, device, size, studies=str(studies) if studies is not None else None,
                              isolation=isolation, trial_timeout=trial_timeout, min_time=min_time, threads=threads)
    tuner = library_call(settings.tuner, on_stage=warnings_only)  # other work busy before it is timed, say
    base = tuner.space.baseline if from_baseline else tuner.space.defaults
    base = library_call(target_from_file, tuner.space, config_file, base) if config_file else base
    config = library_call(tuner.space.parse_assignments, assignments, base)
    try:
        result = library_call(tuner.run_config, config)
    finally:
        tuner.close()
    heading = {"workload": tuner.workload.name, "device": tuner.device.name, "size": tuner.size}
    if as_json:
        say(json.dumps({**result.to_dict(), **heading, "unused": list(tuner.space.unused(config))}, indent=2))
    else:
        say(run_text(result, config, **heading, unused=tuner.space.unused(config)))
    sys.exit(0 if result.status == "ok" else 1)


# -- explain ---------------------------------------------------------------------------

@cli.command()
@workload_option
@device_option
@size_option
@click.option("--config", "config_file", type=FilePath(), default=None,
              help="JSON file: an exported config, an explanation's target, or knob values (the rest as in the "
                   "baseline) [default: the export of this workload, device and size].")
@click.option("--from-export", is_flag=True, help="Explain the exported winner (the default without --config).")
@click.option("--rounds", type=Count(min=1), default=3, show_default=True,
              help="Interleaved rounds; every config once a round (Ctrl-C after the first keeps the whole ones).")
@studies_option
@measure_options
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as one JSON object.")
def explain(workload: str, device: str, size: str | None, config_file: Path | None, from_export: bool, rounds: int,
            studies: Path | None, min_time: float, trial_timeout: float | None, isolation: str, threads: int | None,
            as_json: bool) -> None:
    """Measure what each fix of the winner bought: alone, inside the winner, and against the guide's claim.

    Runs 2k+2 configs for k differing knobs (and the path between), in interleaved rounds, with the checks of
    `search`; stores the result beside the export, where `autotune report` shows it.

    \b
    Examples:
      autotune explain --workload chmm --device cpu
      autotune explain -w chmm -d cpu -s small --rounds 5 --json
      autotune explain -w ten --config my-config.json --min-time 0.5
    """
    from autotune.explain import explain_workload, target_config
    from autotune.explain_view import beaten_by, explain_text
    from autotune.settings import SearchSettings

    if config_file is not None and from_export:
        fail("--config and --from-export exclude each other: give one target")
    writable_studies(studies)
    settings = SearchSettings(workload, device, size, studies=str(studies) if studies is not None else None,
                              isolation=isolation, trial_timeout=trial_timeout, min_time=min_time, threads=threads)
    progress = Progress(as_json, None, unit="config")  # a bar (total known at the first measurement), else lines
    tuner = library_call(settings.tuner, on_stage=progress.stage)  # says when it computes the reference
    target = library_call(target_config, tuner, config_file)
    stop_on_sigterm()  # a stop once a round is whole keeps the whole rounds (a GPU campaign's deadline sends one)
    try:
        doc, path = library_call(explain_workload, tuner, target, rounds, progress.step)
    except KeyboardInterrupt:
        tell("\nautotune: explain stopped before it had a whole round to store; nothing was written.")
        sys.exit(130)
    finally:
        progress.close()
        tuner.close()
    warnings = [said for said in [beaten_by(doc)] if said]  # as the text says them (a script read none before)
    say(json.dumps({**doc, "warnings": warnings}, indent=2) if as_json else explain_text(doc) + f"\n\nStored in {path}")


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
    from autotune.registry import workload_facts, workload_names
    from autotune.space import load_space

    for name in [workload] if workload else workload_names():
        facts = library_call(workload_facts, name)  # a built-in's without importing torch
        say(workload_text(facts, library_call(load_space, name, facts.name), sizes=bool(workload)) + "\n")


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
    say(json.dumps(devices_json(found, PROFILES), indent=2) if as_json else devices_text(found, PROFILES))


def main(argv: list[str] | None = None) -> None:
    """The `autotune` entry point (pyproject's [project.scripts])."""
    run_group(cli, argv)
