"""Configurations: the frozen mapping a trial runs, and where exported configs live.

:class:`Config` is the value of every knob for one run; :func:`config_path`
is where a search exports its winner (see :mod:`autotune.export`), and
:mod:`autotune.tuned` reads it back for users' scripts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Collection, Iterator, Mapping

from autotune.exceptions import AutotuneError, InvalidConfigError
from autotune.export import SCHEMA_VERSION, ExportDocument, write_json
from autotune.limits import names_nothing
from autotune.storage_names import sqlite_url

__all__ = ["SCHEMA_VERSION", "Config", "as_asked", "cannot_write", "config_path", "default_storage", "no_effect",
           "show", "studies_dir", "writable", "writable_file", "write_tuned_config"]

_DEFAULT_STUDIES = "studies"


class Config(Mapping[str, Any]):
    """An immutable, hashable mapping of knob names to JSON values.

    It is a mapping rather than a frozen dataclass because its keys are the
    search space's parameters, which differ per workload. Equal configs hash
    equal, so a config can key a cache.

    Example::

        >>> cfg = Config({"dtype": "float32", "update_c": "grouped"})
        >>> cfg["dtype"], cfg.replace(dtype="float64")["dtype"]
        ('float32', 'float64')
    """

    __slots__ = ("_values", "_key")

    def __init__(self, values: Mapping[str, Any] | None = None, **more: Any) -> None:
        merged = dict(values or {}, **more)
        for name, value in merged.items():
            if not isinstance(name, str):
                raise InvalidConfigError(f"config keys must be strings, got {name!r}")
            if not isinstance(value, (str, int, float, bool, type(None))):
                raise InvalidConfigError(
                    f"config value {name}={value!r} must be a string, number, boolean or null"
                )
        self._values = dict(sorted(merged.items()))
        self._key = json.dumps(self._values, sort_keys=True)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Config):
            return self._key == other._key
        if isinstance(other, Mapping):
            return self._values == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"Config({self._values!r})"

    @property
    def key(self) -> str:
        """A canonical JSON string of the config (sorted keys)."""
        return self._key

    def to_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def replace(self, **changes: Any) -> "Config":
        return Config(self._values, **changes)

    def describe(self, unused: Collection[str] = ()) -> str:
        """``name=value`` pairs on one line, for progress output; the knobs in ``unused`` (inactive under the
        others, so holding their defaults) are named after the pairs, not shown with a value that does nothing."""
        pairs = " ".join(f"{name}={show(value)}" for name, value in self._values.items() if name not in unused)
        return pairs + (f" {no_effect(unused)}" if unused else "")


def show(value: Any) -> str:
    """A knob's value as a user writes it (YAML's, --set's): true, null, float16."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def no_effect(unused: Collection[str]) -> str:
    """How a config's inactive knobs are named wherever it is shown: "(no effect under these: a, b)"."""
    return f"(no effect under these: {', '.join(sorted(unused))})"


def as_asked(space: Any, values: Mapping[str, Any], config: Config, what: str, named: Collection[str] = ()) -> Config:
    """``config`` (``space``'s completion of ``values``) where it runs each knob of ``values`` as asked, else an
    error: a knob inactive there holds its default, and one of ``named`` (``--set``) would do nothing. A value asked
    for is never silently replaced: ``{"recurrence": "chunked", "input_proj": "batched"}`` (ten) was explained, and
    run by ``Tuner.run_config``, as per_step."""
    active = space.active(config)
    for name, value in values.items():
        if not active.get(name, True) and (name in named or value != config[name]):
            condition = space.parameters[name].condition  # inactive: it has one
            names = sorted(condition.names)
            here = " ".join(f"{n}={show(config[n])}" if active[n] else f"{n} inactive" for n in names)
            raise InvalidConfigError(f"{what}{name}={show(value)} has no effect here: {name} applies only when "
                                     f"{condition.text}, and here {here}; leave {name} out, or set "
                                     f"{' and '.join(names)} so that it applies")
    return config


def studies_dir() -> Path:
    """Where studies and exported configs live: ``$AUTOTUNE_STUDIES`` or ``./studies`` (also where it is "")."""
    value = os.environ.get("AUTOTUNE_STUDIES")
    if value and names_nothing(value):  # as --studies refuses: a folder named " " or "-" was made, silently
        raise AutotuneError(f"$AUTOTUNE_STUDIES={value!r} names no folder; set it to one (. for this one), or unset "
                            "it")
    return Path(value or _DEFAULT_STUDIES).expanduser()  # a quoted "~/studies" too


def default_storage(root: Path | None = None) -> str:
    """The study storage when none is named: ``<studies>/autotune.db`` (SQLite)."""
    return sqlite_url((root if root is not None else studies_dir()) / "autotune.db")


def config_path(workload: str, device: str, size: str, root: Path | None = None) -> Path:
    """The exported config of ``workload`` at ``size`` on ``device``: ``<studies>/<workload>/<device>-<size>.json``.

    Each size has its own file: a quick `tiny` search never overwrites a `full` one.
    """
    return (root if root is not None else studies_dir()) / workload / f"{device}-{size}.json"


def cannot_write(folder: Path) -> str | None:
    """Why ``folder`` could never be a folder this user writes in (a file stands in its way, or the nearest part
    of it that exists is a folder read-only to this user), or None."""
    for part in (folder, *folder.parents):
        if part.exists():
            if not part.is_dir():
                return f"{part} is a file"
            return None if os.access(part, os.W_OK | os.X_OK) else f"{part.resolve()} is read-only to this user"
    return None


def writable(folder: Path, holds: str, within: bool = False) -> None:
    """Raise before anything is measured where ``folder`` (and, ``within``, each folder in it), which ``holds`` what
    a command writes at its end or in its trials, cannot be written: a studies folder that another user made (a
    container run as root) let a search measure its trials and re-measure its winner, then refused the export
    (and every numba trial failed, numba's cache being one of its folders)."""
    inside = sorted(path for path in folder.iterdir() if path.is_dir()) if within and folder.is_dir() else []
    for path in (folder, *inside):
        reason = cannot_write(path)
        if reason:
            fix = ("move it away, or choose another --studies" if reason.endswith(" is a file") else
                   "made by another user? give it to this one, or choose another --studies")
            raise AutotuneError(f"cannot write {holds} in {path}: {reason} ({fix})")


#: What marks ``<studies>/cache`` as a cache: git leaves it out, and so do backup tools (the CACHEDIR.TAG convention).
CACHE_MARKS = {".gitignore": "# autotune's cache: data, references and compiled kernels, remade when needed\n*\n",
               "CACHEDIR.TAG": "Signature: 8a477f597d28d172789f06886806bc55\n# autotune's cache: remade when needed\n"}


def make_cache(folder: Path) -> None:
    """Make a workload's cache ``folder`` (``<studies>/cache/<workload>/<size>``), the cache marked as one: a search
    in a project's repository left its reference outputs and numba's kernels for `git add .` to take."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in CACHE_MARKS.items():
        mark = folder.parent.parent / name
        if not mark.exists():
            try:
                mark.write_text(text)
            except OSError:  # a mark is a courtesy: a cache without one works as well
                pass


def writable_file(path: Path, holds: str) -> None:
    """:func:`writable` for the folder of ``path``, and a folder standing at ``path`` itself refused too: a search
    measured its trials and re-measured its winner, then could not write its export ("Is a directory")."""
    writable(path.parent, holds)
    if path.is_dir():
        raise AutotuneError(f"cannot write {holds} {path}: a folder stands there; move it away, or choose another "
                            "--studies")


def write_tuned_config(document: ExportDocument | Mapping[str, Any], path: Path) -> Path:
    """Write an exported config atomically (a reader never sees half a file); a mapping is written as given."""
    return document.write(path) if isinstance(document, ExportDocument) else write_json(document, path)
