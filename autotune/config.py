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

__all__ = [
    "SCHEMA_VERSION",
    "Config",
    "TunedConfig",
    "config_path",
    "load_config",
    "studies_dir",
    "write_tuned_config",
]

#: Version of the exported JSON layout; bumped when a field changes meaning.
SCHEMA_VERSION = 1

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


def config_path(workload: str, device: str, root: Path | None = None) -> Path:
    """The exported config of ``workload`` on ``device``: ``<studies>/<workload>/<device>.json``."""
    return (root if root is not None else studies_dir()) / workload / f"{device}.json"


class TunedConfig(Mapping[str, Any]):
    """A read-only mapping of the tuned knobs, with the figures behind them.

    ``cfg["dtype"]`` is a knob's value; ``cfg.speedup``, ``cfg.measured``,
    ``cfg.baseline``, ``cfg.check`` and ``cfg.environment`` come from the run
    that chose it. ``cfg.source`` says which file it came from, or
    ``"defaults"`` when nothing was tuned yet.
    """

    def __init__(self, document: Mapping[str, Any], source: str) -> None:
        self._document = dict(document)
        self._config = Config(document.get("config", {}))
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
        """The whole exported document, as written."""
        return dict(self._document)

    workload = property(lambda self: self._document.get("workload"))
    device = property(lambda self: self._document.get("device"))
    size = property(lambda self: self._document.get("size"))
    measured = property(lambda self: self._document.get("measured"))
    baseline = property(lambda self: self._document.get("baseline"))
    speedup = property(lambda self: self._document.get("speedup"))
    check = property(lambda self: self._document.get("check"))
    environment = property(lambda self: self._document.get("environment"))


def _presets_root() -> Path | None:
    # Presets ship as package data of `studies.presets`; the import of a data
    # package is cheap and pulls in neither torch nor optuna.
    try:
        from importlib.resources import files

        root = files("studies.presets")
        return Path(str(root))
    except (ImportError, ModuleNotFoundError, TypeError):
        return None


def _read_document(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text())
    version = document.get("schema_version")
    if version != SCHEMA_VERSION:
        raise InvalidConfigError(
            f"{path}: schema_version must be {SCHEMA_VERSION}, got {version!r}; "
            "re-run `autotune search` to write it anew"
        )
    return document


def load_config(
    workload: str,
    device: str = "auto",
    *,
    strict: bool = False,
    studies: str | os.PathLike | None = None,
) -> TunedConfig:
    """The tuned configuration of ``workload`` for ``device``.

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
    candidates = [config_path(workload, device, root)]
    presets = _presets_root()
    if presets is not None:
        candidates.append(presets / workload / f"{device}.json")
    for path in candidates:
        if path.is_file():
            return TunedConfig(_read_document(path), str(path))
    looked = ", ".join(str(p) for p in candidates)
    if strict:
        raise ConfigNotFoundError(
            f"no tuned config for workload {workload!r} on device {device!r} (looked in {looked}); "
            f"run `autotune search --workload {workload} --device {device}`"
        )
    from autotune.space import load_space

    space = load_space(workload)
    warnings.warn(
        f"no tuned config for {workload!r} on {device!r} (looked in {looked}); using the search "
        "space's defaults",
        stacklevel=2,
    )
    return TunedConfig(
        {"schema_version": SCHEMA_VERSION, "workload": workload, "device": device, "config": space.defaults.to_dict()},
        "defaults",
    )


def write_tuned_config(document: Mapping[str, Any], path: Path) -> Path:
    """Write an exported config atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(dict(document), indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)
    return path
