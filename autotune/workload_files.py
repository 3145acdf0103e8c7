"""A workload file as a module every process can import by its name, a process started afresh too.

A file given as ``--workload path/to/mine.py:Mine`` is imported under a name of its own, not ``mine`` (two
files named alike in two folders are two workloads), and once it was a name only the process that imported
the file knew. A process started afresh rather than forked unpickles the file's classes by that name: a
DataLoader's workers under ``spawn`` (the default on macOS) or ``forkserver`` (Python 3.14's on Linux) each
failed with "No module named 'autotune_user_workload_...'", and every config with workers failed as an error.
The names are this module's submodules now; the environment, which such processes inherit, says which file
each one is, and importing one, in any process, imports that file.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Sequence

__all__ = ["FILES", "is_file_module", "module_name"]

#: The files imported under this module's names, as ``name=path`` entries, one a line (a path may hold ``:``).
FILES = "AUTOTUNE_WORKLOAD_FILES"

#: A module with a __path__ is a package to the import system: its submodules are the workload files.
__path__: list[str] = []


def module_name(path: Path) -> str:
    """The name ``path`` is imported under, here and in every process started from here after this call: one per
    file, the same in every process (Python's own hash of a string differs from one process to the next)."""
    path = path.resolve()
    name = f"{__name__}.file_{hashlib.sha256(str(path).encode()).hexdigest()[:16]}"
    entry = f"{name.rpartition('.')[2]}={path}"
    known = os.environ.get(FILES, "")
    if entry not in known.split("\n"):
        os.environ[FILES] = "\n".join(e for e in (known, entry) if e)
    return name


def is_file_module(name: str) -> bool:
    """Whether the module ``name`` is a workload file's, imported under :func:`module_name`."""
    return name.startswith(f"{__name__}.")


def _files() -> dict[str, str]:
    entries = (e.partition("=") for e in os.environ.get(FILES, "").split("\n") if "=" in e)
    return {name: path for name, _, path in entries}


class _Finder(importlib.abc.MetaPathFinder):
    """Finds this module's submodules by the files the environment names for them."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: Any = None) -> Any:
        parent, _, name = fullname.rpartition(".")
        file = _files().get(name) if parent == __name__ else None
        return importlib.util.spec_from_file_location(fullname, file) if file else None


if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
    sys.meta_path.append(_Finder())
