"""The command line's shared pieces: value types, option groups, and how a failure is reported.

A bad value is one line on stderr, what is wrong and what is allowed, and
exit status 2, before anything is written.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

import click

from autotune.console import tell, to_devnull
from autotune.devices import cpu_threads
from autotune.exceptions import AutotuneError, UnknownNameError
from autotune.limits import MAX_SECONDS, WHOLE, names_nothing, study_name_problem
from autotune.runner import TRIAL_TIMEOUT
from autotune.storage import STORAGE_ENV
from autotune.storage_names import storage_problem
from autotune.shipped import take_builtin_names

# WHOLE: the bounds of the whole-number options, autotune.limits' (a Tuner's arguments are held to the same).
__all__ = ["WHOLE", "Count", "FilePath", "Seconds", "Size", "Storage", "StudyName", "device_option", "fail",
           "library_call", "measure_options", "parse_gpus", "run_group", "say", "show_warning", "size_option",
           "studies_option", "worker_plan", "workload_option", "writable_folder", "writable_studies"]

_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "kib": 2**10, "m": 1e6, "mb": 1e6, "mib": 2**20,
          "g": 1e9, "gb": 1e9, "gib": 2**30, "t": 1e12, "tb": 1e12, "tib": 2**40}


class Size(click.ParamType):
    """A size in bytes: ``"4GiB"``, ``"500MB"``, ``"1e9"``; an error names the option it was given to."""

    name = "size"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int):
            return value
        match = re.fullmatch(r"\s*([0-9.]+(?:[eE][+-]?\d+)?)\s*([A-Za-z]*)\s*", value)
        if not match or match.group(2).lower() not in _UNITS:
            self.fail(f"{value!r} is not a size; use e.g. 4GiB, 512MB or a number of bytes", param, ctx)
        try:
            size = float(match.group(1)) * _UNITS[match.group(2).lower()]
        except ValueError:
            size = math.nan
        if not math.isfinite(size) or size < 1 or size > 2**62:
            self.fail(f"{value!r} is not a size between 1 byte and 4 EiB; use e.g. 4GiB or 512MB", param, ctx)
        return int(size)


class Count(click.IntRange):
    """A whole number in a range: click's own says "'1.5' is not a valid integer range", as if a range were asked."""

    name = "whole number"


class FilePath(click.Path):
    """A file's path (``Path``): an empty one names none, where ``Path("")`` is this folder ("Is a directory"); a
    ``~`` is the home folder, as a shell makes it (none expands one after "=": ``-o=~/r.html`` wrote a folder "~").
    ``-`` is ``dash`` (``/dev/stdout`` for a file written), or refused: ``report -o -`` wrote a file named "-"."""

    def __init__(self, dash: str | None = None) -> None:
        super().__init__(dir_okay=False, path_type=Path)
        self.dash = dash

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail(f"{value!r} names no file; give a file's path", param, ctx)
        if value == "-":
            if self.dash is None:
                self.fail("'-' names no file here (standard input is not read); give a file's path", param, ctx)
            return Path(self.dash)
        return super().convert(os.path.expanduser(value) if isinstance(value, str) else value, param, ctx)


class Seconds(click.ParamType):
    """A positive, finite number of seconds up to MAX_SECONDS (click's FloatRange lets NaN through)."""

    name = "seconds"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds <= 0:
            self.fail(f"{value!r} is not a positive, finite number of seconds", param, ctx)
        if seconds > MAX_SECONDS:
            self.fail(f"{value!r} is over the longest wait autotune takes, {MAX_SECONDS:,} seconds", param, ctx)
        return seconds


class StudyName(click.ParamType):
    """A study's name as storage keys it: "" would silently become the default name, "  " a study no one finds,
    and one holding "@export-" (the mark of the studies earlier versions made to elect an exporter) a study that
    report and simulate never list."""

    name = "name"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        problem = study_name_problem(value)
        if problem:
            self.fail(f"{value!r} is not a study name: {problem}", param, ctx)
        return value


class Storage(click.ParamType):
    """A study storage's URL or journal path: "" (an unset variable) silently became the default storage."""

    name = "url"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        problem = ("names no storage; give an SQLAlchemy URL or a journal file's path, or leave the option out for "
                   "the default" if names_nothing(value) else storage_problem(value))  # "-" made a journal "-"
        if problem:
            # Click names the option alone; a value set in a shell's profile long ago was looked for on the line.
            where = f" (the value of ${STORAGE_ENV})" if os.environ.get(STORAGE_ENV) == value else ""
            self.fail(f"{value!r}{where} {problem}", param, ctx)
        return value


def _studies_folder(ctx: Any, param: Any, value: str | None) -> Path | None:
    try:  # every command with studies runs trials or reads ./studies: a shell left in a removed folder has neither
        os.getcwd()
    except FileNotFoundError:
        raise click.ClickException("the working directory no longer exists (removed while this shell stayed in "
                                   "it): cd into a folder that exists and run the command again") from None
    if value is not None and names_nothing(value):  # Path("") is ".": the studies were written into this folder
        raise click.BadParameter(f"{value!r} names no folder; give one (. for this one), or leave the option out "
                                 "for the default", ctx, param)
    return Path(value).expanduser() if value is not None else None


def say(text: str) -> None:
    """``text`` on standard output. A full disk there, or a reader gone (``| head -1``), is one line (none for a
    closed pipe: its reader asked for no more) and exit status 1, not a traceback: the work done is kept."""
    try:
        click.echo(text)
    except OSError as exc:
        to_devnull(sys.stdout)  # Python's own flush at exit would fail again
        if exc.errno != errno.EPIPE:
            tell(f"autotune: error: cannot write to standard output: {exc.strerror}")
        sys.exit(1)


def fail(message: str) -> None:
    tell(f"autotune: error: {message}")
    sys.exit(2)


_PACKAGE = Path(__file__).resolve().parent
_python_shows_warning = warnings.showwarning


def show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
                 line: str | None = None) -> None:
    """A warning of autotune's own is one line, as its errors are; another library's, as Python shows it."""
    if Path(filename).resolve().is_relative_to(_PACKAGE):
        tell(f"autotune: warning: {message}")
    else:
        _python_shows_warning(message, category, filename, lineno, file, line)


def _open_standard_streams() -> None:
    """A closed stdin, stdout or stderr (``2>&-``, a supervisor's) reads or writes /dev/null. Left closed, the
    next file opened took its number: the study's lock file became the fork server's stderr, every trial (whose
    stdout is that stderr) crashed, and the search ended with no trial and no word."""
    for fd, mode in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, mode)  # the lowest free number: fd itself, as the lower ones are open
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
            os.set_inheritable(fd, True)  # os.open's are not: the fork server would start without it again
    sys.stdout = sys.stdout or open(1, "w", closefd=False)  # Python leaves them None when it starts without them
    sys.stderr = sys.stderr or open(2, "w", closefd=False)


def run_group(group: click.Group, argv: list[str] | None) -> None:
    """Run the command line: click's usage errors become one line and exit status 2."""
    _open_standard_streams()
    warnings.showwarning = show_warning
    take_builtin_names()  # `python -m autotune` has the working directory first on its path
    try:
        # click (8.2 and on) returns, not raises, an Exit in this mode: --help's and --version's 0. No command of
        # autotune's exits through click with a code of its own; each calls sys.exit.
        group.main(args=argv, prog_name="autotune", standalone_mode=False)
    except click.exceptions.Abort:
        tell("autotune: aborted")
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as exc:
        # `autotune` alone: the help, not an error line wrapped round it; still 2, as nothing ran.
        click.echo(exc.ctx.get_help())
        sys.exit(2)
    except click.exceptions.UsageError as exc:
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
        fail(exc.format_message() + hint)
    except click.exceptions.ClickException as exc:
        fail(exc.format_message())
    except AutotuneError as exc:  # one a command did not pass through library_call: `devices` with a broken torch
        fail(str(exc))
    except OSError as exc:  # a path the system refuses: a name too long (a traceback from every command), a loop
        fail(f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else f"{type(exc).__name__}: {exc}")
    sys.exit(0)


def parse_gpus(gpus: str | None) -> list[int] | None:
    """``--gpus 0,1,2,3`` -> [0, 1, 2, 3]: distinct indices, or one line and exit status 2."""
    if gpus is None:
        return None
    try:
        found = [int(g) for g in gpus.split(",") if g.strip()]
    except ValueError:
        found = []
    if not found or any(g < 0 for g in found) or len(set(found)) != len(found):
        fail(f"--gpus {gpus!r} is not a list of distinct GPU indices; use e.g. --gpus 0,1,2,3")
    return found


def worker_plan(workers: int | None, gpus: str | None, storage: str | None, workload: str,
                studies: Path | None, trials: int = 1) -> tuple[list[int] | None, int, bool]:
    """``--gpus`` as indices, the number of workers ``search`` starts, and whether its trials run in workers on a
    shared study; or one line and exit status 2."""
    from autotune.config import studies_dir
    from autotune.registry import workload_facts
    from autotune.storage import storage_kind

    gpu_list = parse_gpus(gpus)
    if gpu_list and workers is not None and workers != len(gpu_list):
        fail(f"--workers {workers} and --gpus {gpus} disagree: --gpus starts one worker per GPU ({len(gpu_list)})")
    n_workers = len(gpu_list) if gpu_list else (workers or 1)
    kind = storage_kind(storage) if storage else "sqlite"
    # --gpus runs workers even on SQLite: one per GPU, each shown only its own (never this process's cuda:0).
    shared = kind != "sqlite" or gpu_list is not None
    if n_workers > 1 and kind == "sqlite":
        journal = Path(studies or studies_dir()) / f"{workload_facts(workload).name}.journal"  # beside its exports
        fail(f"{n_workers} workers cannot share an SQLite study (it locks under concurrent writers); use a journal "
             f"file, e.g. --storage {journal} (one machine), or a database server, e.g. --storage "
             "postgresql://user:password@host/db (several machines)")
    if trials == 0 and shared:
        fail("--trials 0 re-measures and exports a study searched by one process in its SQLite file; workers on a "
             "journal or database server re-measure and export when the study's trial budget is done")
    return gpu_list, n_workers, shared


def writable_folder(path: Path | None, option: str, advice: str = "choose another path") -> None:
    """Fail at once (exit 2, nothing written) when ``path`` could never be a folder this user writes in: a file
    stands in its way, or the nearest part of it that exists is a folder read-only to this user.

    Checked before any trial runs, so that a search never ends by losing its
    re-measurement to an export it cannot write.
    """
    from autotune.config import cannot_write

    reason = cannot_write(path) if path is not None else None
    if reason:
        be = "a folder" if reason.endswith("is a file") else "written"
        fail(f"{option} {path} cannot be {be}: {reason}; {advice}")


def writable_studies(studies: Path | None, advice: str | None = None, workload: str | None = None) -> None:
    """:func:`writable_folder` of the studies folder (``--studies``, else ``$AUTOTUNE_STUDIES``, else
    ``./studies``), named as the user named it: the commands that measure keep their reference output there,
    and ``report`` its page when no ``-o`` is given, in the folder of ``workload`` there (one another user made
    let the page be built, then refused it)."""
    from autotune.config import studies_dir
    from autotune.registry import workload_facts

    named = ("--studies" if studies is not None else "$AUTOTUNE_STUDIES" if os.environ.get("AUTOTUNE_STUDIES")
             else "the studies folder")
    default = "pass --studies DIR, or set $AUTOTUNE_STUDIES" if named == "the studies folder" else "choose another path"
    root = studies if studies is not None else studies_dir()
    writable_folder(root, named, advice or default)
    if workload is not None:
        with contextlib.suppress(AutotuneError):  # a workload that is none: the command's own error says so
            writable_folder(root / workload_facts(workload).name, "the report's folder", advice or default)


def library_call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return function(*args, **kwargs)
    except UnknownNameError as exc:  # a file workload by its name alone: say how its search named it
        from autotune.tuned import named_by_its_file

        fail(str(named_by_its_file(exc, kwargs.get("studies"))))
    except AutotuneError as exc:
        fail(str(exc))


# -- options shared by several commands ----------------------------------------------

def workload_option(f: Callable) -> Callable:
    return click.option("--workload", "-w", required=True,
                        help="A built-in workload (see `autotune list`), an installed one, or path/to/file.py:ClassName.")(f)


def device_option(f: Callable) -> Callable:
    return click.option("--device", "-d", default="auto", show_default=True,
                        help="Device profile (cpu, v100, a100, h100, h200, rtx3090, rtx5000-ada, mps), auto (the first "
                             "accelerator here, else the CPU) or cuda (the first CUDA GPU here).")(f)


def size_option(f: Callable) -> Callable:
    return click.option("--size", "-s", default=None, help="Workload size: tiny, small or full [default: the workload's; small for the built-ins].")(f)


def studies_option(f: Callable) -> Callable:
    return click.option("--studies", type=click.Path(file_okay=False), default=None, callback=_studies_folder,
                        help="Directory of studies and exported configs [default: $AUTOTUNE_STUDIES or ./studies].")(f)


def measure_options(f: Callable) -> Callable:
    f = click.option("--min-time", type=Seconds(), default=1.0, show_default=True,
                     help="Seconds of timed runs per measurement, at least (and at least 3 runs; runs shorter "
                     "than a 200th of it are timed in blocks).")(f)
    f = click.option("--trial-timeout", type=Seconds(), default=None,
                     help="Seconds before a trial is killed and recorded as a timeout, measured again under a "
                          f"longer one [default: {TRIAL_TIMEOUT:g}].")(f)
    f = click.option("--isolation", type=click.Choice(["subprocess", "inprocess"]), default="subprocess", show_default=True,
                     help="Run each trial in a fresh process (default), or in this one (debugging only).")(f)
    # More threads than cores only time the OS scheduler: a bound, not a silent cap.
    f = click.option("--threads", type=Count(min=1, max=cpu_threads()), default=None,
                     help="CPU threads of a trial: torch's, numpy's BLAS and other OpenMP pools; a trial whose own "
                          "threads or processes keep more cores busy says so (hold it with taskset -c) [default: "
                          "$OMP_NUM_THREADS where set, as torch takes it, else every core this process may use].")(f)
    return f
