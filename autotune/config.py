"""Configurations: the frozen mapping a trial runs, and the tuned file users load.

:class:`Config` is the value of every knob for one run. :class:`TunedConfig`
is what :func:`load_config` returns: the winning config of a search plus the
figures it was chosen on. Reading a tuned config imports neither torch nor
optuna, so user scripts pay nothing for it.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Iterator, Mapping

from autotune.exceptions import ConfigNotFoundError, InvalidConfigError
from autotune.export import SCHEMA_VERSION, ExportDocument, read_document, write_json

__all__ = [
    "SCHEMA_VERSION",
    "Config",
    "TunedConfig",
    "config_path",
    "load_config",
    "studies_dir",
    "write_tuned_config",
]

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

    def describe(self) -> str:
        """``name=value`` pairs on one line, for progress output."""
        return " ".join(f"{name}={value}" for name, value in self._values.items())


def studies_dir() -> Path:
    """Where studies and exported configs live: ``$AUTOTUNE_STUDIES`` or ``./studies``."""
    return Path(os.environ.get("AUTOTUNE_STUDIES") or _DEFAULT_STUDIES)


def config_path(workload: str, device: str, size: str, root: Path | None = None) -> Path:
    """The exported config of ``workload`` at ``size`` on ``device``: ``<studies>/<workload>/<device>-<size>.json``.

    Each size has its own file: a quick `tiny` search never overwrites a `full` one.
    """
    return (root if root is not None else studies_dir()) / workload / f"{device}-{size}.json"


#: Which size ``load_config`` takes when none is named: the largest measured,
#: the one nearest a user's real run. A file of the older layout
#: (``<device>.json``, no size) comes last.
SIZE_PREFERENCE = ("full", "small", "tiny")


def _exports(folder: Path, device: str, size: str | None) -> list[Path]:
    """The exported configs of one device in ``folder``, in the order ``load_config`` prefers them."""
    if size is not None:
        return [folder / f"{device}-{size}.json"]
    found = sorted(folder.glob(f"{device}-*.json")) if folder.is_dir() else []
    rank = {name: i for i, name in enumerate(SIZE_PREFERENCE)}
    found.sort(key=lambda p: (rank.get(p.stem[len(device) + 1:], len(rank)), p.name))
    return found + [folder / f"{device}.json"]


class TunedConfig(Mapping[str, Any]):
    """A read-only mapping of the tuned knobs, with the figures behind them.

    ``cfg["dtype"]`` is a knob's value; ``cfg.speedup``, ``cfg.measured``,
    ``cfg.baseline``, ``cfg.check`` and ``cfg.environment`` come from the run
    that chose it. ``cfg.source`` says which file it came from, or
    ``"defaults"`` when nothing was tuned yet.
    """

    def __init__(self, document: ExportDocument | Mapping[str, Any], source: str) -> None:
        if not isinstance(document, ExportDocument):
            document = ExportDocument.from_json(document, source)
        self.export = document
        self._config = Config(document.config)
        self.source = source

    def __getitem__(self, name: str) -> Any:
        return self._config[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._config)

    def __len__(self) -> int:
        return len(self._config)

    def __repr__(self) -> str:
        return f"TunedConfig({self._config.to_dict()!r}, speedup={self.speedup}, source={self.source!r})"

    @property
    def config(self) -> Config:
        return self._config

    @property
    def document(self) -> dict[str, Any]:
        """The whole exported document, as JSON."""
        return self.export.to_json()

    workload = property(lambda self: self.export.workload)
    device = property(lambda self: self.export.device)
    size = property(lambda self: self.export.size)
    measured = property(lambda self: self.export.measured)
    baseline = property(lambda self: self.export.baseline)
    speedup = property(lambda self: self.export.speedup)
    check = property(lambda self: self.export.check)
    environment = property(lambda self: self.export.environment)


def _presets_root() -> Path | None:
    # Presets ship as package data of `studies.presets`; the import of a data
    # package is cheap and pulls in neither torch nor optuna.
    try:
        from importlib.resources import files

        root = files("studies.presets")
        return Path(str(root))
    except (ImportError, ModuleNotFoundError, TypeError):
        return None


def _is_file_workload(workload: str) -> bool:
    return workload.rpartition(":")[0].endswith(".py")


def _export_folder(workload: str) -> str:
    """The folder a workload's exports live in: its registered name (a ``file.py:Class`` names its class)."""
    if _is_file_workload(workload):
        from autotune.workload import get_workload_class

        return get_workload_class(workload).name
    return workload


def _space_of(workload: str) -> Any:
    from autotune.space import SearchSpace, load_space

    if _is_file_workload(workload):
        from autotune.workload import get_workload_class

        return SearchSpace.from_file(get_workload_class(workload).space_path())
    return load_space(workload)


def _validated(document: ExportDocument, workload: str, path: Path) -> ExportDocument:
    """The document, once its knob values are checked against the workload's space (no value comes back unchecked)."""
    from autotune.exceptions import AutotuneError

    try:
        _space_of(workload).validate(document.config, what=f"{path}: config")
    except AutotuneError as exc:
        raise InvalidConfigError(f"{exc}; re-run `autotune search` to write it anew") from None
    return document


def load_config(
    workload: str,
    device: str = "auto",
    size: str | None = None,
    *,
    strict: bool = False,
    studies: str | os.PathLike | None = None,
) -> TunedConfig:
    """The tuned configuration of ``workload`` for ``device`` (at ``size``, else the largest one exported).

    Looks in the studies directory (``studies``, else ``$AUTOTUNE_STUDIES``,
    else ``./studies``), then in the presets shipped with autotune; without
    either, returns the search space's defaults with a warning, or raises
    :class:`~autotune.exceptions.ConfigNotFoundError` when ``strict``.

    Example::

        import autotune
        cfg = autotune.load_config("chmm")          # device="auto"
        dtype = cfg["dtype"]
        print(cfg.speedup, cfg.measured)
    """
    if device == "auto":
        from autotune.devices import resolve_device

        device = resolve_device("auto", use_torch=False).profile.name
    root = Path(studies) if studies is not None else studies_dir()
    folders = [root / _export_folder(workload)]
    presets = _presets_root()
    if presets is not None:
        folders.append(presets / _export_folder(workload))
    candidates = [path for folder in folders for path in _exports(folder, device, size)]
    for path in candidates:
        if path.is_file():
            return TunedConfig(_validated(read_document(path), workload, path), str(path))
    looked = ", ".join(str(p) for p in candidates)
    if strict:
        raise ConfigNotFoundError(
            f"no tuned config for workload {workload!r} on device {device!r} (looked in {looked}); "
            f"run `autotune search --workload {workload} --device {device}`"
        )
    space = _space_of(workload)
    warnings.warn(
        f"no tuned config for {workload!r} on {device!r} (looked in {looked}); using the search "
        "space's defaults",
        stacklevel=2,
    )
    return TunedConfig(ExportDocument(space.defaults.to_dict(), workload, device), "defaults")


def write_tuned_config(document: ExportDocument | Mapping[str, Any], path: Path) -> Path:
    """Write an exported config atomically (a reader never sees half a file); a mapping is written as given."""
    return document.write(path) if isinstance(document, ExportDocument) else write_json(document, path)
