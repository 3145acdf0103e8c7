"""The export document: the winner of a search with the figures it was chosen on, as one JSON file.

The tuner writes it (:meth:`ExportDocument.write`); ``load_config``,
``autotune best`` and the report read it (:func:`read_document`). Its fields
are named here once. Reading one imports neither torch nor optuna.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from autotune.exceptions import InvalidConfigError
from autotune.storage_names import same_storage
from autotune.strict import load_json

__all__ = ["SCHEMA_VERSION", "ExportDocument", "is_number", "read_document", "read_json", "write_atomically", "write_json",
           "written_through"]

#: Version of the exported JSON layout; bumped when a field changes meaning.
SCHEMA_VERSION = 1

_RERUN = "re-run `autotune search` to write it anew"


@dataclass(frozen=True)
class ExportDocument:
    """One exported config. ``config`` is the winner; ``measured`` and ``baseline`` its re-measured figures."""

    config: dict[str, Any]
    workload: str | None = None
    device: str | None = None
    size: str | None = None
    workload_version: int | None = None  # the workload's data and outputs it was tuned and checked on
    device_name: str | None = None  # what the driver calls the device it was measured on
    measured: dict[str, Any] | None = None
    baseline: dict[str, Any] | None = None  # the baseline's config and figures, re-measured beside the winner
    speedup: float | None = None
    check: dict[str, Any] | None = None  # the winner's worst check over its re-measurements
    remeasure: dict[str, Any] | None = None  # rounds, and every candidate's outcome
    environment: dict[str, Any] = field(default_factory=dict)  # device, torch, CUDA: the fingerprint
    study: dict[str, Any] | None = None  # name, storage (redacted), trials
    trial: int | None = None  # the winner's trial
    exported_at: str | None = None
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        return {"schema_version": data.pop("schema_version"), **data}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "document") -> "ExportDocument":
        """A document from its JSON object, or one line naming ``source`` and what is wrong with it."""
        if not isinstance(data, Mapping) or not isinstance(data.get("config"), dict):
            raise InvalidConfigError(f"{source}: not an exported config (a JSON object with a 'config' mapping); "
                                     f"{_RERUN}")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise InvalidConfigError(f"{source}: schema_version must be {SCHEMA_VERSION}, got {version!r}; {_RERUN}")
        problem = _figures_problem(data)
        if problem:
            raise InvalidConfigError(f"{source}: {problem}; {_RERUN}")
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def write(self, path: Path) -> Path:
        """Write to ``path``, with a warning where it held another study's winner: one export per workload,
        device and size, and a search of another study (``--study``: a three-trial experiment, say) replaced a long
        search's winner there without a word."""
        earlier, ours = _earlier_study(path), self.study or {}
        theirs, mine = (earlier.study if earlier is not None else {}), ours.get("name")
        name = theirs.get("name")
        # By name, and by storage where the name is the same: a search with `--storage studies/chmm.journal`
        # replaced the winner of the study of that name in SQLite without a word. A storage has several
        # spellings (relative, absolute): same_storage tells only those that cannot be one.
        elsewhere = name == mine and ours.get("storage") and not same_storage(theirs.get("storage"), ours["storage"])
        if name is not None and mine is not None and (name != mine or elsewhere):
            won = earlier.speedup and earlier.trial is not None  # type: ignore[union-attr]
            was = f" (trial #{earlier.trial}, {earlier.speedup:.2f}x)" if won else ""  # type: ignore[union-attr]
            where = f" in {theirs.get('storage')}" if elsewhere else ""
            now = f"the study of that name in {ours['storage']}" if elsewhere else f"study {mine!r}"
            warnings.warn(f"{path} held the export of study {name!r}{where}{was}; it now holds the export of {now} "
                          f"(a search of {'the other' if elsewhere else repr(name)} exports its winner again)",
                          stacklevel=2)
        return write_json(self.to_json(), path)


def _earlier_study(path: Path) -> "ExportDocument | None":
    """The export at ``path``, where there is a valid one that names its study."""
    try:
        earlier = read_document(Path(path))
    except InvalidConfigError:  # none there (or none readable): nothing replaced to name
        return None
    return earlier if isinstance(earlier.study, dict) and earlier.study.get("name") else None


#: The figures ``autotune best`` shows from ``measured`` and ``baseline``: each a number when present.
_NUMBERS = ("throughput", "median_seconds", "iqr_seconds", "relative_spread", "peak_memory_bytes", "runs",
            "warmup_seconds", "build_seconds", "one_off_seconds", "threads", "cores_used")


def is_number(value: Any) -> bool:
    """An int or a float, not a bool (JSON's numbers, and the condition language's)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _figures_problem(data: Mapping[str, Any]) -> str | None:
    """What is wrong with a document's figures, in a few words, or None. A figure may be missing (a hand-written
    export may hold its config alone) but not of another type: ``autotune best`` would fail on it with a traceback."""
    for section in ("measured", "baseline", "check", "remeasure", "environment", "study"):
        if data.get(section) is not None and not isinstance(data[section], Mapping):
            return f"{section} must be a JSON object, got {data[section]!r}"
    if data.get("speedup") is not None and not is_number(data["speedup"]):
        return f"speedup must be a number, got {data['speedup']!r}"
    for name in ("workload_version", "trial"):
        if data.get(name) is not None and not (is_number(data[name]) and float(data[name]).is_integer()):
            return f"{name} must be a whole number, got {data[name]!r}"
    for section in ("measured", "baseline"):
        for name, value in (data.get(section) or {}).items():
            if name in _NUMBERS and value is not None and not is_number(value):
                return f"{section}.{name} must be a number, got {value!r}"
    check = data.get("check")
    if check is not None:
        if not isinstance(check.get("passed"), bool):
            return f"check.passed must be true or false, got {check.get('passed')!r}"
        metrics = check.get("metrics", {})
        pairs = metrics.values() if isinstance(metrics, Mapping) else [None]
        if not all(isinstance(pair, list) and len(pair) == 2 and (pair[0] is None or is_number(pair[0]))
                   and is_number(pair[1]) for pair in pairs):
            return "check.metrics must map each metric's name to [error or null, tolerance]"
    return None


def write_atomically(text: str, path: Path) -> Path:
    """Write ``text`` to ``path`` atomically: a reader never sees half a file, and a failed write (a full disk, a
    folder read-only to this user) leaves none behind.

    A symbolic link keeps pointing where it did: its file is the one replaced. A stream (:func:`written_through`)
    is written through: replacing it, as root, put a file where ``/dev/full`` was.
    """
    if written_through(path):  # appended: `-o /dev/stdout >> log` kept what the log held
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
        return path
    target = path.resolve() if path.is_symlink() else path
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")  # one per writer: two may export at once
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    return path


def written_through(path: Path) -> bool:
    """A device or a pipe, or an open stream's name (``/dev/stdout``, ``/dev/fd/1``, ``/proc/self/fd/1``) whatever
    it points to: such a path is written, never replaced. ``-o /dev/stdout > page.html`` replaced page.html (the
    link's file), which another user's folder (or ``>>``) does not allow: "--output's folder /dev cannot be
    written" first. A file under ``/dev/shm`` is a file."""
    stream = re.fullmatch(r"/dev/(stdout|stderr|fd/\d+)|/proc/[^/]+/fd/\d+", str(path)) is not None
    return stream or path.exists() and not path.is_file()


def write_json(data: Mapping[str, Any], path: Path) -> Path:
    return write_atomically(json.dumps(dict(data), indent=2) + "\n", path)


def read_json(path: Path, what: str, advice: str = "") -> Any:
    """The JSON in ``path``, or one line: ``what`` (naming the file), what is wrong, and ``advice``."""
    try:
        # utf-8-sig: a file a Windows editor saved starts with a BOM ("Unexpected UTF-8 BOM"), as YAML reads it.
        return load_json(path.read_text(encoding="utf-8-sig"))  # a key given twice is an error, not the last one kept
    except OSError as exc:
        reason = exc.strerror
    except UnicodeDecodeError:  # a ValueError too: before the next
        reason = "not UTF-8 JSON"
    except ValueError as exc:  # bad syntax (a JSONDecodeError) or a key given twice
        where = f" at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
        reason = f"not valid JSON ({getattr(exc, 'msg', exc)}{where})"
    raise InvalidConfigError(f"{what}: {reason}" + (f"; {advice}" if advice else ""))


def read_document(path: Path) -> ExportDocument:
    """The export document in ``path``, or one line that names the file and what is wrong with it."""
    return ExportDocument.from_json(read_json(path, str(path), _RERUN), str(path))
