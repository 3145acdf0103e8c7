"""The bounds of what a search may be asked: the command line's options and a Tuner's arguments alike.

A number past them is refused in one line before anything runs. From Python, ``remeasure_rounds=0`` found no
winner, a negative memory budget put every config over it and ``threads=1.5`` failed every trial, each without a
word; a wait longer than the system can take (``--trial-timeout 1e300``) was an OverflowError traceback.
"""

from __future__ import annotations

import numbers
import os
from typing import Any

from autotune.exceptions import AutotuneError
from autotune.storage_names import storage_problem

__all__ = ["EXPORT_MARK", "MAX_SECONDS", "WHOLE", "check_limits", "check_numbers", "names_nothing",
           "study_name_problem"]

#: Studies of this name pattern were made by earlier versions to elect a shared study's exporter; they are not
#: results, and are left out of a storage's study names (so no search may make one).
EXPORT_MARK = "@export-"

#: The longest wait a search may ask for (about 31 years): a thread's wait, select() and a timedelta each refuse
#: far less than a float can say (--trial-timeout 1e300 was an OverflowError traceback, --grace-period 1e14 killed
#: every worker).
MAX_SECONDS = 10**9

#: The bounds of each whole number a Tuner takes (None is "not set"), the options' where they have an upper one;
#: the others are seconds.
WHOLE = {"remeasure_top": (1, 2**62), "remeasure_rounds": (1, 2**62), "threads": (1, 2**62), "seed": (0, 2**32 - 1),
          "memory_budget_bytes": (1, 2**62), "memory_limit_bytes": (1, 2**62), "heartbeat": (1, MAX_SECONDS),
          "grace_period": (2, MAX_SECONDS), "n_trials": (0, 2**62)}


def check_numbers(**given: Any) -> None:
    """A Tuner's numbers held to what the command line's options allow: the whole numbers of ``WHOLE``, seconds
    (trial_timeout, time_budget), and the ``measurer``'s settings."""
    for name, value in given.items():
        if name == "measurer":
            _check_measurer(value)
            continue
        if name in ("study_name", "storage", "studies"):  # the options refuse "" too: it silently became the default
            if value is None or name == "studies" and isinstance(value, os.PathLike):
                continue
            if not isinstance(value, str):
                problem: str | None = "it is no string" if name != "studies" else "it is no path (a str or a Path)"
            elif name == "study_name":
                problem = study_name_problem(value)
            elif names_nothing(value):  # studies="" was this folder, " " or "-" a folder of that name
                problem = "it names no folder" if name == "studies" else "it names no storage"
            else:
                problem = f"it {said}" if name == "storage" and (said := storage_problem(value)) else None
            if problem:
                raise AutotuneError(f"{name} {value!r} is refused: {problem}")
            continue
        whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)
        if name in WHOLE:
            low, high = WHOLE[name]
            if value is None and name != "n_trials" or whole and low <= value <= high:  # a search needs a count
                continue
            wanted = f"a whole number of at least {low}" + (f", at most {high:,}" if high < 2**62 else "")
        else:
            seconds = isinstance(value, numbers.Real) and not isinstance(value, bool)
            if value is None or seconds and 0 < value <= MAX_SECONDS:  # NaN is neither
                continue
            wanted = f"a number of seconds over 0, at most {MAX_SECONDS:,}"
        raise AutotuneError(f"{name} must be {wanted}, not {value!r}")


def names_nothing(text: str) -> bool:
    """A path or storage given as "", blanks or "-": the default, this folder, or a file named "-", silently."""
    return text.strip() in ("", "-")


def study_name_problem(name: str) -> str | None:
    """Why ``name`` is no study name, or None: "" silently became the default name (an unset variable), "  " a
    study no one finds, and one holding EXPORT_MARK a study that report and simulate never list."""
    if not name.strip() or name != name.strip():
        return "it needs a character other than a space, and none at either end"
    return f"{EXPORT_MARK!r} marks autotune's own studies" if EXPORT_MARK in name else None


def _check_measurer(measurer: Any) -> None:
    """A Tuner's ``measurer``: settings of :class:`~autotune.measure.Measurer`, each a number over 0 (a whole one
    where it counts runs). A name it lacks failed every trial ("unexpected keyword argument"), and min_time=-1
    timed three runs a config, where --min-time must be over 0."""
    from dataclasses import fields

    from autotune.measure import Measurer

    if measurer is None:
        return
    settable = {f.name: f.default for f in fields(Measurer) if f.name not in ("clock", "other_work")}  # callables
    if not isinstance(measurer, dict) or set(measurer) - set(settable):
        raise AutotuneError(f"measurer must be a dict of Measurer settings ({', '.join(sorted(settable))}), not "
                            f"{measurer!r}")
    for name, value in measurer.items():
        whole, zero = isinstance(settable[name], int), name == "block_seconds"  # 0 blocks: each run timed alone
        if value is None and settable[name] is None:
            continue
        if (isinstance(value, bool) or not isinstance(value, numbers.Integral if whole else numbers.Real)
                or not (0 <= value if zero else 0 < value) or not value <= (2**62 if whole else MAX_SECONDS)):
            raise AutotuneError(f"measurer's {name} must be a {'whole ' if whole else ''}number "
                                f"{'0 or more' if zero else 'over 0'}, not {value!r}")


def check_limits(isolation: str, device_kind: str, memory_limit_bytes: int | None, trial_timeout: float | None) -> None:
    """Limits that apply to each trial's own process, refused where they cannot apply. With trials run in the
    tuning process, a memory limit went unapplied (a search with --memory-limit 100MiB measured 279 MiB configs
    without a word) and so did a trial timeout (nothing can stop a trial that hangs in this process). On a GPU a
    memory limit went unapplied too: RLIMIT_AS caps the address space, and a GPU driver maps more of it than any
    memory a trial uses."""
    if trial_timeout is not None and isolation == "inprocess":
        raise AutotuneError("--trial-timeout kills a trial's own process, and --isolation inprocess runs every trial "
                            "in this one, where nothing can stop it: leave one of them out")
    if memory_limit_bytes is not None and isolation == "inprocess":
        raise AutotuneError("--memory-limit caps each trial's own process, and --isolation inprocess runs every "
                            "trial in this one: leave one of them out")
    if memory_limit_bytes is not None and device_kind != "cpu":
        raise AutotuneError(f"--memory-limit caps a trial's address space, which a GPU's driver maps far beyond the "
                            f"memory it uses, so it applies on the CPU only, not on this {device_kind} device: leave "
                            f"it out (--memory-budget bounds the peak memory a config may use)")
