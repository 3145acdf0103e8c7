"""Recorded tuning spaces: every config of a space measured once, replayed to judge a search strategy.

A Kernel Tuner cache file (``.json`` or ``.json.gz``; see ``../shared/recorded/README.md``)
is read as a :class:`Recorded`: a :class:`~autotune.space.SearchSpace` whose
parameters are the file's ``tune_params``, whose restriction is the set of
recorded keys (a combination absent from the cache is not a config), and the
recorded outcome of every config: its objective (time, unless the file names
another), or the failure that a string there names. ``benchmarks/recorded/``
holds such files of autotune's own workloads too, written by
``benchmarks/record_space.py``.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

from autotune.exceptions import AutotuneError
from autotune.runner import TrialResult
from autotune.space import SearchSpace

__all__ = ["Recorded", "load_recorded"]


@dataclass(frozen=True)
class RecordedKeys:
    """The restriction of a recorded space: a config is one of the keys the file holds."""

    keys: frozenset[str]
    order: tuple[str, ...]
    text: str = "a config recorded in the file"

    def evaluate(self, values: Mapping[str, Any]) -> bool:
        return key_of(values, self.order) in self.keys


def key_of(values: Mapping[str, Any], order: tuple[str, ...]) -> str:
    """Kernel Tuner's cache key: the values in ``tune_params_keys`` order, joined by commas."""
    return ",".join(str(values[name]) for name in order)


def direction_of(objective: str, higher_is_better: Any = None) -> str:
    """Whether a recorded objective is minimised or maximised.

    A Kernel Tuner cache names its objective but not its direction (that is
    ``tune_kernel``'s ``objective_higher_is_better``, False by default). A
    file may say it (``objective_higher_is_better``); otherwise a rate (a
    name with "/s" or "flops": GFLOP/s, GB/s) is maximised, and anything
    else (time, energy) minimised, as Kernel Tuner does by default.
    """
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
        if not _is_time(value):
            return None
        return 1 / value if self.maximized else value

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
        entry = self.entries[key_of(config, self.order)]
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
        return float(self.entries[key_of(result.config, self.order)][self.objective])


#: What older Kernel Tuner versions record for a config that failed, in place of a string; the
#: scoring method's own code (autotuning_methodology 1.1.0, validators.py) reads it as a failure too.
KERNEL_TUNER_ERROR_VALUE = 1e20


def _is_time(value: Any) -> bool:
    """A recorded figure of a config that ran: a positive finite number other than Kernel Tuner's error value.

    A string names a failure; a time of 0 would be an infinite throughput, and a rate of 0 is nothing done.
    """
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
            and value != KERNEL_TUNER_ERROR_VALUE)


def _cost_seconds(entry: Mapping[str, Any]) -> float:
    """What evaluating the config cost when it was recorded (compile, benchmark, framework, verification, strategy)."""
    parts = ("compile_time", "benchmark_time", "framework_time", "verification_time", "strategy_time")
    return sum(float(entry.get(p) or 0.0) for p in parts) / 1000


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
        entries[key_of(entry, order)] = entry
    return entries


def load_recorded(path: str | Path) -> Recorded:
    """A Kernel Tuner cache file (``.json`` or ``.json.gz``) as a recorded space; one-line errors name the file."""
    path = Path(path)
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
    order = tuple(data["tune_params_keys"])
    unlisted = [name for name in order if name not in data["tune_params"]]
    if unlisted:
        raise AutotuneError(f"{path}: tune_params has no values for {', '.join(map(repr, unlisted))}; it needs the "
                            "values of every name in tune_params_keys")
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
        "workload": data.get("kernel_name", path.name),
        "description": f"recorded on {data.get('device_name', 'an unnamed device')}",
        "parameters": {name: {"choices": list(data["tune_params"][name])} for name in order},
        "defaults": {name: first[name] for name in order},
        "baseline": {},
    }, source=str(path))
    # The restriction is the key set: a combination absent from the cache is not a config at all.
    # A constraint sees an unused knob as null (SearchSpace.violated): so must the recorded keys.
    allowed = frozenset(key_of({name: entry[name] if used else None for name, used in space.active(entry).items()},
                               order) for entry in entries.values())
    space = SearchSpace(space.parameters.values(), space.defaults, space.baseline, space.source, space.workload,
                        space.description, constraints=[*space.constraints, RecordedKeys(allowed, order)])
    return Recorded(str(path), space, order, entries, objective, direction)
