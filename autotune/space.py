"""Search spaces, declared in YAML files rather than coded.

A space file (``search_spaces/<workload>.yaml``) lists the knobs of a
workload, the ``baseline`` its users run today and the ``defaults`` used when
nothing is tuned. Each parameter is a set of choices or an int/float range,
may be active only under a ``condition`` (see :mod:`autotune.conditions`),
and may need device capabilities (``requires``), either for the whole
parameter or per choice. Example::

    schema_version: 1
    parameters:
      dtype:
        choices: [float64, float32, bfloat16, float16]
        requires: {bfloat16: [bf16], float16: [fp16]}
      chunk_size:
        type: int
        low: 16
        high: 4096
        log: true
        condition: "kernel == 'scan'"
    defaults: {dtype: float32, chunk_size: 256}
    baseline: {dtype: float32}
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import yaml

from autotune.conditions import Condition
from autotune.config import Config
from autotune.devices import CAPABILITIES, DeviceProfile
from autotune.exceptions import InvalidConfigError, SearchSpaceError, UnknownNameError
from autotune.registry import space_path

if TYPE_CHECKING:
    import optuna

__all__ = ["Parameter", "SearchSpace", "load_space"]

SCHEMA_VERSION = 1
_TYPES = ("categorical", "int", "float")
_PARAM_KEYS = {"type", "choices", "low", "high", "step", "log", "condition", "requires", "help"}
_TOP_KEYS = {"schema_version", "workload", "description", "parameters", "baseline", "defaults", "reference"}
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


@dataclass(frozen=True)
class Parameter:
    """One knob: its values, when it is active and what a device needs to run it."""

    name: str
    type: str
    choices: tuple[Any, ...] = ()
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    condition: Condition | None = None
    requires: frozenset[str] = frozenset()  # for the whole parameter
    choice_requires: Mapping[Any, frozenset[str]] = field(default_factory=dict, hash=False)
    help: str = ""

    def allows(self, value: Any) -> bool:
        if self.type == "categorical":
            return any(_same(value, choice) for choice in self.choices)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.type == "int" and not float(value).is_integer():
            return False
        assert self.low is not None and self.high is not None
        if not self.low <= value <= self.high:
            return False
        if self.step is not None and not self.log:
            offset = (value - self.low) / self.step
            return math.isclose(offset, round(offset), abs_tol=1e-9)
        return True

    def describe_allowed(self) -> str:
        if self.type == "categorical":
            return ", ".join(_show(choice) for choice in self.choices)
        text = f"{self.type} in [{_show(self.low)}, {_show(self.high)}]"
        if self.step is not None:
            text += f" step {_show(self.step)}"
        return text + (" (log scale)" if self.log else "")

    def parse(self, text: str) -> Any:
        """A ``--set name=text`` value as this parameter's type; raises if not allowed."""
        value: Any
        if self.type == "categorical":
            matches = [choice for choice in self.choices if _show(choice) == text]
            lowered = text.strip().lower()
            if not matches and lowered in _TRUE | _FALSE:
                matches = [c for c in self.choices if isinstance(c, bool) and c == (lowered in _TRUE)]
            if not matches:
                for choice in self.choices:
                    if isinstance(choice, (int, float)) and not isinstance(choice, bool):
                        try:
                            if float(text) == choice:
                                matches = [choice]
                        except ValueError:
                            pass
            if not matches:
                raise InvalidConfigError(
                    f"{self.name}={text!r} is not allowed; choose one of: {self.describe_allowed()}"
                )
            return matches[0]
        try:
            value = int(text) if self.type == "int" else float(text)
        except ValueError:
            raise InvalidConfigError(
                f"{self.name}={text!r} is not a valid {self.type}; allowed: {self.describe_allowed()}"
            ) from None
        if not self.allows(value):
            raise InvalidConfigError(
                f"{self.name}={text!r} is out of range; allowed: {self.describe_allowed()}"
            )
        return value

    @property
    def fixed(self) -> bool:
        """Only one value left (for example after a device removed the others): never sampled."""
        return self.type == "categorical" and len(self.choices) == 1

    def draw(self, rng: random.Random) -> Any:
        """A value drawn at random: uniform, or log-uniform on a log range, on the step grid."""
        if self.type == "categorical":
            return rng.choice(self.choices)
        low, high = float(self.low), float(self.high)  # type: ignore[arg-type]
        value = math.exp(rng.uniform(math.log(low), math.log(high))) if self.log else rng.uniform(low, high)
        if self.step is not None and not self.log:
            value = low + round((value - low) / self.step) * self.step
        return min(max(int(round(value)) if self.type == "int" else value, self.low), self.high)

    def suggest(self, trial: "optuna.Trial") -> Any:
        if self.type == "categorical":
            return trial.suggest_categorical(self.name, list(self.choices))
        if self.type == "int":
            return trial.suggest_int(
                self.name, int(self.low), int(self.high), step=int(self.step or 1), log=self.log  # type: ignore[arg-type]
            )
        return trial.suggest_float(self.name, self.low, self.high, step=self.step, log=self.log)  # type: ignore[arg-type]


def _same(a: Any, b: Any) -> bool:
    # True == 1 in Python, but a bool choice and an int choice are different knob values.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b and type(a) is type(b) or (
        isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b
    )


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


class SearchSpace:
    """The knobs of one workload, with its baseline and defaults.

    A space is immutable; :meth:`for_device` returns the space a device can
    run, with every choice it cannot run removed before sampling.
    """

    def __init__(
        self,
        parameters: Iterable[Parameter],
        defaults: Mapping[str, Any],
        baseline: Mapping[str, Any],
        source: str = "<memory>",
        workload: str | None = None,
        description: str = "",
        device: DeviceProfile | None = None,
        reference: Mapping[str, Any] | None = None,
    ) -> None:
        self.parameters: dict[str, Parameter] = {p.name: p for p in parameters}
        self.source = source
        self.workload = workload
        self.description = description
        self.device = device
        self._defaults = dict(defaults)
        self._baseline = dict(baseline)
        # The reference output's config, over the defaults; never moved to another value on a device.
        self._reference = dict(reference or {})

    # -- reading ----------------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | Path) -> "SearchSpace":
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text())
        except FileNotFoundError:
            raise SearchSpaceError(f"{path}: search-space file not found") from None
        except yaml.YAMLError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise SearchSpaceError(f"{path}: not valid YAML: {first}") from None
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: Any, source: str = "<memory>") -> "SearchSpace":
        def fail(where: str, problem: str) -> SearchSpaceError:
            return SearchSpaceError(f"{source}: {where}: {problem}")

        if not isinstance(data, dict):
            raise fail("top level", "must be a mapping with 'parameters', 'defaults' and 'baseline'")
        unknown = set(data) - _TOP_KEYS
        if unknown:
            raise fail(sorted(unknown)[0], f"unknown key; allowed: {', '.join(sorted(_TOP_KEYS))}")
        if data.get("schema_version") != SCHEMA_VERSION:
            raise fail("schema_version", f"must be {SCHEMA_VERSION}, got {data.get('schema_version')!r}")
        raw_params = data.get("parameters")
        if not isinstance(raw_params, dict) or not raw_params:
            raise fail("parameters", "must be a non-empty mapping of parameter names")
        parameters: list[Parameter] = []
        seen: set[str] = set()
        for name, spec in raw_params.items():
            parameters.append(_parse_parameter(str(name), spec, seen, fail))
            seen.add(str(name))
        names = [p.name for p in parameters]
        sections = {}
        for section in ("defaults", "baseline", "reference"):
            raw = data.get(section, {} if section == "reference" else None)
            if not isinstance(raw, dict):
                raise fail(section, "must be a mapping of parameter names to values")
            sections[section] = raw
        defaults = sections["defaults"]
        missing = [n for n in names if n not in defaults]
        if missing:
            raise fail("defaults", f"must give every parameter a value; missing: {', '.join(missing)}")
        by_name = {p.name: p for p in parameters}
        for section, raw in sections.items():
            for key, value in raw.items():
                if key not in by_name:
                    raise fail(f"{section}.{key}", f"unknown parameter; parameters: {', '.join(names)}")
                if not by_name[key].allows(value):
                    raise fail(
                        f"{section}.{key}",
                        f"{_show(value)} is not allowed; allowed: {by_name[key].describe_allowed()}",
                    )
        baseline = {**defaults, **sections["baseline"]}
        return cls(parameters, defaults, baseline, source, data.get("workload"), data.get("description", ""),
                   reference=sections["reference"])

    # -- the space a device can run -------------------------------------------

    def for_device(self, device: DeviceProfile) -> "SearchSpace":
        """This space without the choices ``device`` cannot run.

        A parameter whose own requirements the device lacks is fixed at its
        default and no longer sampled. A default or baseline value the device
        cannot run moves to the parameter's first runnable choice.
        """
        parameters = []
        defaults = dict(self._defaults)
        baseline = dict(self._baseline)
        for param in self.parameters.values():
            if device.missing(param.requires):
                parameters.append(
                    replace(param, type="categorical", choices=(defaults[param.name],),
                            low=None, high=None, step=None, log=False)
                )
                baseline[param.name] = defaults[param.name]
                continue
            if param.type == "categorical" and param.choice_requires:
                runnable = tuple(
                    c for c in param.choices
                    if not device.missing(param.choice_requires.get(_show(c), frozenset()))
                )
                if not runnable:
                    raise SearchSpaceError(
                        f"{self.source}: parameters.{param.name}: no choice runs on device {device.name!r}"
                    )
                param = replace(param, choices=runnable)
                for values in (defaults, baseline):
                    if not param.allows(values[param.name]):
                        values[param.name] = runnable[0]
            parameters.append(param)
        return SearchSpace(parameters, defaults, baseline, self.source, self.workload, self.description, device,
                           self._reference)

    # -- configs ----------------------------------------------------------------

    @property
    def defaults(self) -> Config:
        return self.complete(self._defaults)

    @property
    def baseline(self) -> Config:
        return self.complete(self._baseline)

    @property
    def reference(self) -> Config:
        """The config whose output every other is checked against (the file's ``reference`` over the defaults).

        Validated, never moved: a reference this space's device cannot run is an error, not another reference.
        """
        return self.validate(dict(self._reference), "reference")

    @property
    def tunable(self) -> list[Parameter]:
        """Parameters with more than one value on this space's device."""
        return [p for p in self.parameters.values() if not p.fixed]

    def is_active(self, name: str, values: Mapping[str, Any]) -> bool:
        condition = self.parameters[name].condition
        return condition is None or condition.evaluate(values)

    def complete(self, values: Mapping[str, Any]) -> Config:
        """A full config: inactive parameters take their default so equal runs have equal configs."""
        seen: dict[str, Any] = {}  # what conditions see: inactive parameters are null
        result: dict[str, Any] = {}
        for name in self.parameters:  # declared order: conditions only read earlier parameters
            if self.is_active(name, seen):
                seen[name] = result[name] = values.get(name, self._defaults[name])
            else:
                seen[name], result[name] = None, self._defaults[name]
        return Config(result)

    def validate(self, values: Mapping[str, Any], what: str = "config") -> Config:
        """Check every key and value against the space; returns the completed config."""
        for name, value in values.items():
            if name not in self.parameters:
                raise UnknownNameError(f"parameter in {what}", name, self.parameters)
            param = self.parameters[name]
            if not param.allows(value):
                raise InvalidConfigError(
                    f"{what}: {name}={_show(value)} is not allowed"
                    + (f" on device {self.device.name!r}" if self.device else "")
                    + f"; allowed: {param.describe_allowed()}"
                )
        return self.complete(values)

    def parse_assignments(self, assignments: Iterable[str], base: Mapping[str, Any] | None = None) -> Config:
        """``["dtype=float64", "update_c=grouped"]`` applied over ``base`` (the defaults)."""
        values = dict(base if base is not None else self.defaults)
        given = []
        for item in assignments:
            name, sep, text = item.partition("=")
            name = name.strip()
            if not sep or not name:
                raise InvalidConfigError(f"--set {item!r} must look like name=value")
            if name not in self.parameters:
                raise UnknownNameError("parameter in --set", name, self.parameters)
            values[name] = self.parameters[name].parse(text.strip())
            given.append(name)
        config = self.validate(values, "--set")
        active = self.active(config)
        for name in given:
            # An inactive knob would run as its default under the name asked for: refuse it.
            if not active[name]:
                condition = self.parameters[name].condition
                raise InvalidConfigError(
                    f"--set {name}={_show(values[name])} has no effect here: {name} applies only when "
                    f"{condition.text if condition else 'active'}; set that too"
                )
        return config

    def _choose(self, draw: Callable[[Parameter], Any]) -> Config:
        """A full config with ``draw(param)`` for every active parameter, in declared order."""
        chosen: dict[str, Any] = {}
        seen: dict[str, Any] = {}  # what conditions see: inactive parameters are null
        for name, param in self.parameters.items():
            if not self.is_active(name, seen):
                seen[name] = None
                continue
            seen[name] = chosen[name] = param.choices[0] if param.fixed else draw(param)
        return self.complete(chosen)

    def sampled_params(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The part of ``config`` a sampler chooses (active, not fixed): what ``enqueue_trial`` takes."""
        active = self.active(config)
        return {name: config[name] for name, param in self.parameters.items() if active[name] and not param.fixed}

    def active(self, config: Mapping[str, Any]) -> dict[str, bool]:
        """Which parameters are active under ``config`` (their conditions hold)."""
        seen: dict[str, Any] = {}
        active: dict[str, bool] = {}
        for name in self.parameters:
            active[name] = self.is_active(name, seen)
            seen[name] = config[name] if active[name] else None
        return active

    def suggest(self, trial: "optuna.Trial") -> Config:
        """Sample a config for ``trial``; inactive and fixed parameters are not sampled."""
        return self._choose(lambda param: param.suggest(trial))

    def sample(self, rng: random.Random) -> Config:
        """A config drawn at random (uniform choices; log-uniform where the range is log)."""
        return self._choose(lambda param: param.draw(rng))

    def describe(self) -> list[dict[str, Any]]:
        """One row per parameter, for ``autotune list``."""
        return [
            {
                "name": p.name,
                "values": p.describe_allowed(),
                "default": _show(self._defaults[p.name]),
                "baseline": _show(self._baseline[p.name]),
                "condition": p.condition.text if p.condition else "",
                "requires": ", ".join(sorted(p.requires)),
                "help": p.help,
            }
            for p in self.parameters.values()
        ]


def _parse_parameter(name: str, spec: Any, earlier: set[str], fail) -> Parameter:
    where = f"parameters.{name}"
    if not isinstance(spec, dict):
        raise fail(where, "must be a mapping with 'choices' or 'low'/'high'")
    unknown = set(spec) - _PARAM_KEYS
    if unknown:
        raise fail(f"{where}.{sorted(unknown)[0]}", f"unknown key; allowed: {', '.join(sorted(_PARAM_KEYS))}")
    kind = spec.get("type", "categorical" if "choices" in spec else None)
    if kind not in _TYPES:
        raise fail(f"{where}.type", f"must be one of {', '.join(_TYPES)}, got {kind!r}")
    condition = None
    if "condition" in spec:
        try:
            condition = Condition.parse(spec["condition"])
        except SearchSpaceError as exc:
            raise fail(f"{where}.condition", str(exc)) from None
        unknown_names = condition.names - earlier
        if unknown_names:
            raise fail(
                f"{where}.condition",
                f"names {', '.join(sorted(unknown_names))}, which is not a parameter declared above it",
            )
    requires: frozenset[str] = frozenset()
    choice_requires: dict[str, frozenset[str]] = {}
    raw_requires = spec.get("requires", [])
    if isinstance(raw_requires, list):
        requires = _capabilities(raw_requires, f"{where}.requires", fail)
    elif isinstance(raw_requires, dict) and kind == "categorical":
        for choice, caps in raw_requires.items():
            if not isinstance(caps, list):
                caps = [caps]
            choice_requires[_show(choice)] = _capabilities(caps, f"{where}.requires.{choice}", fail)
    else:
        raise fail(f"{where}.requires", "must be a list of capabilities, or for choices a mapping choice: [capabilities]")
    if kind == "categorical":
        choices = spec.get("choices")
        if not isinstance(choices, list) or not choices:
            raise fail(f"{where}.choices", "must be a non-empty list")
        for choice in choices:
            if not isinstance(choice, (str, int, float, bool, type(None))):
                raise fail(f"{where}.choices", f"{choice!r} must be a string, number, boolean or null")
        if len({_show(c) for c in choices}) != len(choices):
            raise fail(f"{where}.choices", "must not repeat a choice")
        shown = {_show(c) for c in choices}
        for choice in choice_requires:
            if choice not in shown:
                raise fail(f"{where}.requires.{choice}", f"is not one of the choices {', '.join(sorted(shown))}")
        for key in ("low", "high", "step", "log"):
            if key in spec:
                raise fail(f"{where}.{key}", "only int and float parameters take a range")
        return Parameter(name, kind, tuple(choices), condition=condition, requires=requires,
                         choice_requires=choice_requires, help=str(spec.get("help", "")))
    low, high, step, log = spec.get("low"), spec.get("high"), spec.get("step"), spec.get("log", False)
    if not isinstance(log, bool):  # YAML's 'no' is a string here: never read a string as true
        raise fail(f"{where}.log", f"must be true or false, got {log!r}")
    number = int if kind == "int" else (int, float)
    for key, value in (("low", low), ("high", high)):
        if isinstance(value, bool) or not isinstance(value, number) or not math.isfinite(value):
            raise fail(f"{where}.{key}", f"must be a finite {'integer' if kind == 'int' else 'number'}, got {value!r}")
    if low > high:  # type: ignore[operator]
        raise fail(where, f"low must not exceed high, but got low={low} and high={high}")
    if log and low <= 0:  # type: ignore[operator]
        raise fail(f"{where}.low", f"must be > 0 on a log scale, got {low}")
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, number) or not math.isfinite(step) or step <= 0:
            raise fail(f"{where}.step", f"must be a positive {'integer' if kind == 'int' else 'number'}, got {step!r}")
        if log and not (kind == "int" and step == 1):
            raise fail(f"{where}.step", "cannot be combined with log: true")
    return Parameter(name, kind, (), low, high, step, log, condition, requires, {}, str(spec.get("help", "")))


def _capabilities(names: list, where: str, fail) -> frozenset[str]:
    for name in names:
        if name not in CAPABILITIES:
            raise fail(where, f"unknown capability {name!r}; known: {', '.join(sorted(CAPABILITIES))}")
    return frozenset(names)


def load_space(workload: str) -> SearchSpace:
    """The search space of ``workload`` (a built-in name, a plug-in, or ``path/to/file.py:ClassName``)."""
    return SearchSpace.from_file(space_path(workload))
