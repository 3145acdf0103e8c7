"""Recorded tuning spaces: every config of a space measured once, replayed to judge a search strategy.

A Kernel Tuner cache file (``.json`` or ``.json.gz``; see ``../shared/recorded/README.md``)
is read as a :class:`Recorded`: a :class:`~autotune.space.SearchSpace` whose
parameters are the file's ``tune_params``, whose restriction is the set of
recorded keys (a combination absent from the cache is not a config), and the
recorded outcome of every config: its objective (time, unless the file names
another), or the failure that a string there names. ``benchmarks/recorded/``
holds such files of autotune's own workloads too, written by
``benchmarks/record_space.py``, and a study that ``search`` wrote is read
as one too (:func:`recorded_study`: the configs it measured are the space).
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from autotune.config import Config
from autotune.exceptions import AutotuneError
from autotune.export import is_number
from autotune.runner import TrialResult
from autotune.space import SearchSpace
from autotune.storage_names import sqlite_url

if TYPE_CHECKING:
    import optuna

__all__ = ["Recorded", "cache_entry", "load_recorded", "load_recorded_study", "recorded_study", "space_document"]


@dataclass(frozen=True)
class RecordedKeys:
    """The restriction of a recorded space: a config is one of the keys the file holds."""

    keys: frozenset[str]
    order: tuple[str, ...]
    text: str = "a config recorded in the file"

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.order)

    def evaluate(self, values: Mapping[str, Any]) -> bool:
        return key_of(values, self.order) in self.keys


def key_of(values: Mapping[str, Any], order: tuple[str, ...]) -> str:
    """Kernel Tuner's cache key: the values in ``tune_params_keys`` order, joined by commas."""
    return ",".join(str(values[name]) for name in order)


def used_key(space: SearchSpace, values: Mapping[str, Any], order: tuple[str, ...]) -> str:
    """The key of the knobs ``values`` uses, an unused one as null: it holds whatever it was recorded with (a
    study stores its device's default, which need not be the space file's) and is no part of the config."""
    active = space.active(values)
    return key_of({name: values[name] if active.get(name, True) else None for name in order}, order)


def direction_of(objective: str, higher_is_better: Any = None) -> str:
    """Whether a recorded objective is minimised or maximised. A Kernel Tuner cache names its objective but not its
    direction (``tune_kernel``'s ``objective_higher_is_better``, False by default). A file may say it; otherwise a
    rate (a name with "/s" or "flops": GFLOP/s, GB/s) is maximised, anything else (time, energy) minimised."""
    if isinstance(higher_is_better, bool):
        return "maximize" if higher_is_better else "minimize"
    name = objective.lower()
    return "maximize" if "/s" in name or "flops" in name else "minimize"


@dataclass(frozen=True)
class Recorded:
    """A recorded space: the space, and every config's recorded objective (a time in ms, by default) or failure."""

    source: str
    space: SearchSpace
    order: tuple[str, ...]
    entries: Mapping[str, Mapping[str, Any]]
    objective: str = "time"
    direction: str = "minimize"

    # Read once: a benchmark scores thousands of searches against the same file.
    @cached_property
    def times(self) -> list[float]:
        """The recorded objective of every config that ran (failed ones have none): times, unless the file names another."""
        return [e[self.objective] for e in self.entries.values() if _is_time(e.get(self.objective))]

    @property
    def maximized(self) -> bool:
        return self.direction == "maximize"

    def better(self, value: float, than: float | None) -> bool:
        """Whether recorded objective ``value`` beats ``than`` (anything beats None)."""
        return than is None or (value > than if self.maximized else value < than)

    def loss_of(self, entry: Mapping[str, Any]) -> float | None:
        """What a search minimises for a recorded entry: its time, or 1/rate for a maximised objective (None: failed)."""
        value = entry.get(self.objective)
        return None if not _is_time(value) else 1 / value if self.maximized else value

    def best_first(self) -> list[float]:
        """The recorded objective of every config that ran, the best first."""
        return sorted(self.times, reverse=self.maximized)

    @cached_property
    def optimum(self) -> float:
        return max(self.times) if self.maximized else min(self.times)

    @cached_property
    def worst(self) -> float:
        return min(self.times) if self.maximized else max(self.times)

    @cached_property
    def mean_cost_seconds(self) -> float:
        """What evaluating a config cost on average when the space was recorded (failed ones included)."""
        return sum(_cost_seconds(e) for e in self.entries.values()) / len(self.entries)

    def result(self, config: Mapping[str, Any]) -> TrialResult:
        """What measuring ``config`` gave when it was recorded: a throughput of 1/time, or a failure.

        The tuner maximises throughput. A maximised objective (GFLOP/s) is the
        throughput itself, and its runs are then timed in units of 1/objective.
        """
        entry = self.entry_of(config)
        value = entry.get(self.objective)
        seconds = _cost_seconds(entry)
        if not _is_time(value):
            return TrialResult(status="error", config=dict(config), error=f"recorded as {value}", wall_seconds=seconds)
        if self.maximized:
            throughput, times = float(value), [1 / value]
        else:
            throughput, times = 1000 / value, [t / 1000 for t in entry.get("times") or [value]]
        return TrialResult(status="ok", config=dict(config), unit="runs", items_per_run=1, throughput=throughput,
                           median_seconds=1 / throughput, times=times, peak_memory_bytes=0, wall_seconds=seconds)

    def objective_of(self, result: TrialResult) -> float | None:
        """The recorded objective (in the file's units) behind a replayed result, or None for a failure.

        Read from the file, not inverted back from the throughput: 1000 / (1000 / t) can miss t by a rounding.
        """
        if result.status != "ok" or not result.throughput:
            return None
        return float(self.entry_of(result.config)[self.objective])

    def entry_of(self, config: Mapping[str, Any]) -> Mapping[str, Any]:
        """The recorded entry of ``config``, by the knobs it uses (KeyError: not a recorded config)."""
        return self._by_use[used_key(self.space, config, self.order)]

    @cached_property
    def configs(self) -> list[Config]:
        """Every recorded config that keeps the space's constraints, in the file's order."""
        completed = (self.space.complete({name: entry[name] for name in self.order}) for entry in self.entries.values())
        return [config for config in completed if self.space.violated(config) is None]

    @cached_property
    def _by_use(self) -> dict[str, Mapping[str, Any]]:
        found: dict[str, Mapping[str, Any]] = {}
        for entry in self.entries.values():
            found.setdefault(used_key(self.space, entry, self.order), entry)
        return found


#: What older Kernel Tuner versions record for a config that failed, in place of a string; the
#: scoring method's own code (autotuning_methodology 1.1.0, validators.py) reads it as a failure too.
KERNEL_TUNER_ERROR_VALUE = 1e20


def _is_time(value: Any) -> bool:
    """A recorded figure of a config that ran: a positive finite number other than Kernel Tuner's error value.

    A string names a failure; a time of 0 would be an infinite throughput, and a rate of 0 is nothing done.
    """
    return _is_number(value) and value > 0 and value != KERNEL_TUNER_ERROR_VALUE


_COST_PARTS = ("compile_time", "benchmark_time", "framework_time", "verification_time", "strategy_time")


def _cost_seconds(entry: Mapping[str, Any]) -> float:
    """What evaluating the config cost when it was recorded (compile, benchmark, framework, verification, strategy)."""
    return sum(float(entry.get(p) or 0.0) for p in _COST_PARTS) / 1000


def _is_number(value: Any) -> bool:
    return is_number(value) and math.isfinite(value)


def _entries(path: Path, data: Mapping[str, Any], order: tuple[str, ...]) -> dict[str, Mapping[str, Any]]:
    """The cache's entries, keyed by their own parameter values, so that a lookup never depends on how the file
    wrote its keys; an entry without its parameter values takes them from its key."""
    spelled = {name: {str(v): v for v in data["tune_params"][name]} for name in order}
    entries: dict[str, Mapping[str, Any]] = {}
    for key, entry in data["cache"].items():
        if not isinstance(entry, dict):
            continue
        if not all(name in entry for name in order):
            parts = str(key).split(",")
            if len(parts) != len(order) or not all(part in spelled[name] for name, part in zip(order, parts)):
                missing = next(name for name in order if name not in entry)
                raise AutotuneError(f"{path}: the cache entry {key!r} has no value for {missing!r}, and its key "
                                    "does not name one; every entry needs a value for each of tune_params_keys")
            entry = {**entry, **{name: spelled[name][part] for name, part in zip(order, parts)}}
        _check_entry(path, key, entry, data["tune_params"], order)
        entries[key_of(entry, order)] = entry
    return entries


def _check_entry(path: Path, key: str, entry: Mapping[str, Any], values: Mapping[str, list[Any]],
                 order: tuple[str, ...]) -> None:
    """Refuse an entry whose values tune_params does not list, or whose costs or run times are not numbers:
    replaying it would otherwise fail with Python's words, mid-search, or be scored against a space it is not in."""
    name = next((name for name in order if entry[name] not in values[name]), None)
    if name is not None:
        raise AutotuneError(f"{path}: the cache entry {key!r} has {name}={entry[name]!r}, which tune_params does not "
                            f"list; allowed: {', '.join(map(repr, values[name]))}")
    costs = [entry.get(part) for part in _COST_PARTS if entry.get(part) is not None]
    times = entry.get("times") if _is_time(entry.get("time")) else None  # a failed config's runs are not read
    if not all(_is_number(c) and c >= 0 for c in costs) or not (
            times is None or isinstance(times, list) and all(_is_number(t) and t >= 0 for t in times)):
        raise AutotuneError(f"{path}: the cache entry {key!r} has a cost or run time that is not a number of 0 or "
                            f"more: {', '.join(f'{p}={entry[p]!r}' for p in (*_COST_PARTS, 'times') if p in entry)}")


def load_recorded(path: str | Path) -> Recorded:
    """A Kernel Tuner cache file (``.json`` or ``.json.gz``) as a recorded space; one-line errors name the file."""
    path = Path(path)
    study = _study_storage(path)
    if study:  # the study replays with --study: say so rather than "cannot decode byte 0xf7"
        raise AutotuneError(f"{path} is a study's storage, not a Kernel Tuner cache file: replay its study with "
                            f"--storage {study} (and --study NAME where it holds several)")
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, EOFError) as exc:
        raise AutotuneError(f"{path}: cannot read a recorded space ({type(exc).__name__}: {exc}); "
                            "give a Kernel Tuner cache file (.json or .json.gz)") from None
    if not isinstance(data, dict) or not all(k in data for k in ("tune_params", "tune_params_keys", "cache")):
        raise AutotuneError(f"{path}: not a Kernel Tuner cache file (it needs tune_params, tune_params_keys "
                            "and cache)")
    return _from_cache(path, data)


def _study_storage(path: Path) -> str | None:
    """The ``--storage`` of an autotune study's file given as a recorded space (a SQLite database, an Optuna journal),
    else None."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return None  # load_recorded says why it cannot be read
    if head.startswith(b"SQLite format 3\0"):
        return sqlite_url(path.resolve())
    try:  # a journal's every line is one JSON record of an operation
        record = json.loads(head.partition(b"\n")[0])
    except (ValueError, UnicodeDecodeError):
        return None
    return str(path) if isinstance(record, dict) and "op_code" in record and b"\n" in head else None


def _from_cache(path: Path | str, data: Mapping[str, Any]) -> Recorded:
    """A Kernel Tuner cache's mapping as a recorded space (``path`` names it in errors)."""
    keys, params, cache = data["tune_params_keys"], data["tune_params"], data["cache"]
    if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys) and isinstance(params, dict)
            and isinstance(cache, dict)):
        raise AutotuneError(f"{path}: not a Kernel Tuner cache file: tune_params_keys must be a list of names, "
                            "tune_params a mapping of each name to its values, and cache a mapping of keys to entries")
    order = tuple(keys)
    unlisted = [name for name in order if not isinstance(params.get(name), list) or not params[name]]
    if unlisted:
        raise AutotuneError(f"{path}: tune_params has no values for {', '.join(map(repr, unlisted))}; it needs the "
                            "values of every name in tune_params_keys, as a list")
    if not isinstance(higher := data.get("objective_higher_is_better", False), bool):
        raise AutotuneError(f"{path}: objective_higher_is_better must be true or false, not {higher!r}")
    entries = _entries(path, data, order)
    if not entries:
        raise AutotuneError(f"{path}: the cache holds no configurations")
    objective = data.get("objective", "time")
    if not isinstance(objective, str):
        raise AutotuneError(f"{path}: the objective must be the name of a recorded figure, not {objective!r}")
    direction = direction_of(objective, data.get("objective_higher_is_better"))
    if not any(_is_time(e.get(objective)) for e in entries.values()):
        raise AutotuneError(f"{path}: no configuration has a recorded {objective!r}")
    first = next(iter(entries.values()))
    # A space of autotune's own (benchmarks/record_space.py) keeps its conditions, defaults and baseline.
    space = SearchSpace.from_dict(data.get("autotune_space") or {
        "schema_version": 1,
        "workload": data.get("kernel_name", Path(path).name),
        "description": f"recorded on {data.get('device_name', 'an unnamed device')}",
        "parameters": {name: {"choices": list(data["tune_params"][name])} for name in order},
        "defaults": {name: first[name] for name in order}, "baseline": {},
    }, source=str(path))
    # The restriction is the key set: a combination absent from the cache is not a config at all.
    # A constraint sees an unused knob as null (SearchSpace.violated): so must the recorded keys.
    allowed = frozenset(used_key(space, entry, order) for entry in entries.values())
    # What the space's constraints read of the size and device it was recorded at (``global_batch``, ``cpu``):
    # without it a constraint over them is not judged, and only the key set restricts.
    space = SearchSpace(space.parameters.values(), space.defaults, space.baseline, space.source, space.workload,
                        space.description, constraints=[*space.constraints, RecordedKeys(allowed, order)],
                        facts=data.get("autotune_facts") or {}, size_parameters=space.size_parameters)
    return Recorded(str(path), space, order, entries, objective, direction)


# -- autotune's own spaces: written by benchmarks/record_space.py, or read from a study ------------------------


def cache_entry(config: Mapping[str, Any], result: TrialResult) -> dict[str, Any]:
    """A config's cache entry: its knob values, time (ms per item) or failure, and what measuring it cost."""
    out: dict[str, Any] = dict(config)
    if result.status == "ok" and result.throughput:
        out["time"] = 1000.0 / result.throughput
        out["times"] = [1000.0 * t / result.items_per_run for t in result.times]
    else:
        out["time"] = "IncorrectConfig" if result.status == "incorrect" else "RuntimeFailedConfig"
        out["error"] = result.error or (result.check or {}).get("message")
    out["benchmark_time"] = 1000.0 * (result.wall_seconds or 0.0)
    return out


def space_document(space: SearchSpace, grids: Mapping[str, list[Any]]) -> dict[str, Any]:
    """The recorded knobs as a space file's mapping: their grids, conditions, constraints, defaults and baseline.

    A Kernel Tuner cache cannot say that a knob is unused under a condition;
    without this a reader sees a flat product in which most combinations are
    absent (restricted), and a sampler spends its asks on them.
    """
    parameters: dict[str, Any] = {}
    for name, values in grids.items():
        condition, probe = space.parameters[name].condition, space.parameters[name].probe
        parameters[name] = {"choices": list(values), **({"condition": condition.text} if condition else {}),
                            **({"probe": True} if probe else {})}
    return {"schema_version": 1, "workload": space.workload, "parameters": parameters,
            "constraints": [c.text for c in space.constraints],
            **({"size_parameters": list(space.size_parameters)} if space.size_parameters else {}),
            "defaults": {name: space.defaults[name] for name in grids},
            "baseline": {name: space.baseline[name] for name in grids}}  # a space's baseline names every knob


def load_recorded_study(storage: str | None = None, study_name: str | None = None) -> Recorded:
    """A study of ``storage`` (``$AUTOTUNE_STORAGE``, else the studies' database) as a recorded space; see
    :func:`recorded_study`. Without ``study_name``, the one study the storage holds."""
    import os

    from autotune.config import default_storage
    from autotune.storage import STORAGE_ENV, redact_storage
    from autotune.stored import open_study

    storage = storage or os.environ.get(STORAGE_ENV) or default_storage()
    study = open_study(storage, study_name)
    return recorded_study(study, f"{redact_storage(storage)} study {study.study_name}")


def recorded_study(study: "optuna.Study", source: str) -> Recorded:
    """A study of autotune's as a recorded space: every config it measured, with its outcome.

    A study that measured every config of its space is that space. A partial
    one replays as the space of the configs it measured: one it never measured
    is not a config here, as a combination absent from a Kernel Tuner cache is
    not, and its optimum is the best config it found. The workload's space
    file (named by the study) gives the knobs' conditions, constraints,
    defaults and baseline; each knob takes the values measured, and its
    default and baseline value (a config of them that was never measured is
    restricted like any other).
    """
    from autotune.trials import counted, result_of

    configs = [(t.user_attrs["config"], result_of(t)) for t in counted(study.get_trials(deepcopy=False))
               if isinstance(t.user_attrs.get("config"), dict)]
    if not configs:
        raise AutotuneError(f"{source}: the study has measured no config yet")
    attrs = study.user_attrs
    space = _space_of_study(study, [config for config, _ in configs])
    if space is not None and attrs.get("facts"):
        space = _as_searched(space, attrs["facts"], attrs.get("device", "the study's device"), attrs.get("size"),
                             [config for config, _ in configs])
    # The knobs `benchmarks/record_space.py` records: all of them, one the device fixes at its one value.
    order = tuple(space.parameters) if space is not None else tuple(configs[0][0])
    cache: dict[str, Any] = {}
    for config, result in configs:
        cache[key_of(config, order)] = cache_entry(config, result)  # measured again (its file edited): the latest
    seen = {name: {entry[name] for entry in cache.values()} for name in order}
    data: dict[str, Any] = {
        "device_name": attrs.get("device_name") or attrs.get("device", "an unnamed device"),
        "kernel_name": f"{attrs.get('workload', study.study_name)} ({attrs.get('size', '?')})", "objective": "time",
        "tune_params_keys": list(order), "cache": cache}
    if space is None:  # a space file that is gone or has changed: the configs' knobs, flat, as a Kernel Tuner cache
        data["tune_params"] = {name: sorted(values, key=_by_value) for name, values in seen.items()}
    else:
        data["tune_params"] = {name: _ordered(space.parameters[name],
                                              seen[name] | {space.defaults[name], space.baseline[name]})
                               for name in order}
        data["autotune_space"] = space_document(space, data["tune_params"])
        data["autotune_facts"] = attrs.get("facts") or {}  # as the search judged its constraints
    return _from_cache(source, data)


def _space_of_study(study: "optuna.Study", configs: list[Mapping[str, Any]]) -> SearchSpace | None:
    """The space file the study was searched in (the one it names, else its workload's), if its knobs are the configs'."""
    from autotune.registry import space_path

    candidates = []
    if study.user_attrs.get("space"):
        candidates.append(Path(study.user_attrs["space"]))
    try:
        candidates.append(space_path(study.user_attrs.get("workload", "")))
    except AutotuneError:
        pass
    for path in candidates:
        try:
            space = SearchSpace.from_file(path)
        except (AutotuneError, OSError):
            continue
        params = space.parameters
        if all(set(config) == set(params) and all(params[name].type != "categorical" or value in params[name].choices
                                                  for name, value in config.items()) for config in configs):
            return space
    return None


def _as_searched(space: SearchSpace, facts: Mapping[str, Any], device: str, size: str | None,
                 configs: list[Mapping[str, Any]]) -> SearchSpace:
    """The space as the search had it, from what the study keeps of its device and size (``facts``): the choices
    the device could not run gone, their defaults moved as the search moved them, the size's constraints bound.
    What the study's ``configs`` needed, the device had then (a compiler gone since refused them)."""
    from autotune.config import show
    from autotune.devices import CAPABILITIES, DeviceProfile

    used = {need for config in configs for name, param in space.parameters.items() if name in config
            for need in param.choice_requires.get(show(config[name]), ())}
    capabilities = frozenset(name for name in CAPABILITIES if facts.get(name)) | used
    kind = "cuda" if "cuda" in capabilities else "mps" if "mps" in capabilities else "cpu"
    profile = DeviceProfile(device, kind, f"{device}, as the study recorded it", capabilities)
    return space.for_device(profile).for_size(facts, size or "the study's size")


def _ordered(param: Any, values: set[Any]) -> list[Any]:
    """A knob's values in the space's order: its choices' order, or by size for a range."""
    if param.type == "categorical":
        return [v for v in param.choices if v in values]
    return sorted(values)


def _by_value(value: Any) -> tuple[int, Any]:
    """Numbers by size, then anything else by its text (None included)."""
    return (0, value) if isinstance(value, (int, float)) else (1, str(value))
