"""A knob of a search space: its values, and how a space file declares them.

A parameter is a set of choices or an int/float range, may be active only
under a ``condition`` (see :mod:`autotune.conditions`), and may need device
capabilities (``requires``), either for the whole parameter or per choice.
:func:`parse_parameter` reads one from a space file, with an error that names
the file, the key and what is allowed.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import re
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Callable, Collection, Mapping, Sequence

from autotune.conditions import Condition, name_problem
from autotune.config import show
from autotune.devices import CAPABILITIES, DeviceProfile
from autotune.exceptions import InvalidConfigError, SearchSpaceError

if TYPE_CHECKING:
    import optuna

__all__ = ["Claim", "Parameter", "asked_name", "canonical_values", "knob_of", "parse_parameter", "split_by"]

_TYPES = ("categorical", "int", "float")
_PARAM_KEYS = {"type", "choices", "low", "high", "step", "log", "condition", "requires", "help", "claims", "probe"}
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}
#: A number as typed: ASCII digits, a point, an exponent. Python's int() and float() took `64_0` as 640, and
#: full-width digits (`６４`) as 64.
_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*", re.ASCII)

#: Makes the error of a space file: ``fail(where, problem)``.
Fail = Callable[[str, str], SearchSpaceError]


@dataclass(frozen=True)
class Claim:
    """What a performance guide promised for one knob value: its words, and the gain it named (if any)."""

    text: str
    gain: tuple[float, float] | None = None  # a speedup range, e.g. (1.2, 1.3) for "20-30% faster"

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "gain": list(self.gain) if self.gain else None}


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
    # A guide's claim per choice (keyed by show(choice)), read by `autotune explain`.
    claims: Mapping[str, Claim] = field(default_factory=dict, hash=False)
    # Each choice is measured once with the defaults early in a new study (a kernel choice: see SearchSpace.firsts).
    probe: bool = False

    def claim(self, value: Any) -> Claim | None:
        return self.claims.get(show(value))

    def canonical(self, value: Any) -> Any:
        """``value`` as the space spells it: a choice as its own object (``1.0`` names the choice ``1``), an int
        knob's whole float as an int, a float knob's int as a float; a value it does not allow, as it is."""
        if self.type == "categorical":
            return next((choice for choice in self.choices if _same(value, choice)), value)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not self.allows(value):
            return value
        if self.step is not None and not self.log:  # the grid's value in decimal: 0.9, not Optuna's 0.8999999999999999
            value = _decimal(self.low) + round((value - self.low) / self.step) * _decimal(self.step)
        return int(value) if self.type == "int" else float(value)

    def allows(self, value: Any) -> bool:
        if self.type == "categorical":
            return any(_same(value, choice) for choice in self.choices)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.type == "int" and isinstance(value, float) and not value.is_integer():  # 10**400: no float
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
            return ", ".join(show(choice) for choice in self.choices)
        text = f"{self.type} in [{show(self.low)}, {show(self.high)}]"
        if self.step is not None:
            text += f" step {show(self.step)}"
        return text + (" (log scale)" if self.log else "")

    def why_left_out(self, text: str, device: DeviceProfile | None) -> str:
        """Why ``device`` left choice ``text`` out where it lacks software alone (numba, a compiler), else ""."""
        why = device.lacking(self.choice_requires.get(text, ())) if device else {}
        return f" ({'; '.join(why.values())})" if why else ""

    def parse(self, text: str, device: DeviceProfile | None = None) -> Any:
        """A ``--set name=text`` value as this parameter's type; raises if not allowed."""
        value: Any
        if self.type == "categorical":
            matches = [choice for choice in self.choices if show(choice) == text]
            lowered = text.strip().lower()
            if not matches and lowered in _TRUE | _FALSE:
                matches = [c for c in self.choices if isinstance(c, bool) and c == (lowered in _TRUE)]
            if not matches:
                for choice in self.choices:
                    if isinstance(choice, (int, float)) and not isinstance(choice, bool) and _NUMBER.fullmatch(text) \
                            and float(text) == choice:
                        matches = [choice]
            if not matches:
                needs = self.choice_requires.get(text)
                if needs:  # a choice of the space that this device's space left out
                    raise InvalidConfigError(f"{self.name}={text!r} needs {', '.join(sorted(needs))}, which this "
                                             f"device lacks{self.why_left_out(text, device)}; choose one of: "
                                             f"{self.describe_allowed()}")
                raise InvalidConfigError(
                    f"{self.name}={text!r} is not allowed; choose one of: {self.describe_allowed()}"
                )
            return matches[0]
        try:
            if not _NUMBER.fullmatch(text):
                raise ValueError(text)
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

    def values(self) -> Sequence[Any] | None:
        """Every value, in order, where they can be listed (choices, an int range, a float range's grid or its one
        value); None for a float range of any value, or a grid of more than 10,000."""
        if self.type == "categorical":
            return self.choices
        if self.type == "int":
            return range(int(self.low), int(self.high) + 1, 1 if self.log else int(self.step or 1))  # type: ignore[arg-type]
        if self.low != self.high and (self.step is None or self.log):
            return None
        low, step = _decimal(self.low), _decimal(self.step or 1)
        count = int((_decimal(self.high) - low) / step) + 1  # the grid ends at high (parse_parameter checks it)
        return [float(low + k * step) for k in range(count)] if count <= 10_000 else None

    def draw(self, rng: random.Random) -> Any:
        """A value drawn at random: uniform, or log-uniform on a log range, on the step grid."""
        if self.type == "categorical":
            return rng.choice(self.choices)
        low, high = float(self.low), float(self.high)  # type: ignore[arg-type]
        value = math.exp(rng.uniform(math.log(low), math.log(high))) if self.log else rng.uniform(low, high)
        if self.step is not None and not self.log:
            value = low + round((value - low) / self.step) * self.step
        return min(max(int(round(value)) if self.type == "int" else value, self.low), self.high)

    def neighbour(self, value: Any, rng: random.Random) -> Any:
        """A value next to ``value``: the adjacent number of ordered numeric choices or of a range (a step, or a
        factor of 2 on a log scale), another choice of unordered ones."""
        if self.type == "categorical":
            ordered = self._ordered_choices(value)
            if ordered is None:
                others = [c for c in self.choices if not _same(c, value)]
                return rng.choice(others) if others else value
            choices, index = ordered
            return choices[min(max(index + rng.choice((-1, 1)), 0), len(choices) - 1)]
        if self.log:
            return self._on_range(value * 2.0 if rng.random() < 0.5 else value / 2.0)
        return self._on_range(value + rng.choice((-1, 1)) * self._step())

    def alternatives(self, value: Any) -> list[Any]:
        """Every value one move from ``value`` (each value :meth:`neighbour` may give, other than ``value``)."""
        if self.type == "categorical":
            ordered = self._ordered_choices(value)
            if ordered is None:
                return [c for c in self.choices if not _same(c, value)]
            choices, index = ordered
            return [choices[i] for i in (index - 1, index + 1) if 0 <= i < len(choices)]
        moved = [value / 2.0, value * 2.0] if self.log else [value - self._step(), value + self._step()]
        return [v for v in dict.fromkeys(self._on_range(v) for v in moved) if v != value]

    def _ordered_choices(self, value: Any) -> tuple[list[Any], int] | None:
        """Numeric choices in order and ``value``'s place among them; None for named choices, which have no order."""
        if not all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in self.choices):
            return None
        ordered = sorted(self.choices)
        return ordered, next((i for i, c in enumerate(ordered) if _same(c, value)), 0)

    def _step(self) -> Any:
        """One move on a linear range: its step, else 1 for an int and a tenth of the range for a float."""
        return self.step or (1 if self.type == "int" else (float(self.high) - float(self.low)) / 10)

    def _on_range(self, value: Any) -> Any:
        """``value`` rounded for an int range and clamped to the range."""
        value = int(round(value)) if self.type == "int" else value
        return min(max(value, self.low), self.high)

    def distribution(self) -> Any:
        """The Optuna distribution :meth:`suggest` asks for: the one place its bounds are made (a study refuses
        another for the same name; :meth:`SearchSpace.check_study` compares the two)."""
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

        if self.type == "categorical":
            return CategoricalDistribution(list(self.choices))
        if self.type == "int":
            return IntDistribution(int(self.low), int(self.high), step=int(self.step or 1), log=self.log)  # type: ignore[arg-type]
        return FloatDistribution(self.low, self.high, step=self.step, log=self.log)  # type: ignore[arg-type]

    def suggest(self, trial: "optuna.Trial", name: str | None = None) -> Any:
        """This knob's value for ``trial``, asked for under ``name`` (default: its own; see :func:`split_by`)."""
        from optuna.distributions import CategoricalDistribution, IntDistribution

        asked, name = self.distribution(), name or self.name
        if isinstance(asked, CategoricalDistribution):
            return trial.suggest_categorical(name, asked.choices)
        suggest = trial.suggest_int if isinstance(asked, IntDistribution) else trial.suggest_float
        return suggest(name, asked.low, asked.high, step=asked.step, log=asked.log)


def split_by(parameters: Mapping[str, Parameter]) -> dict[str, tuple[str, ...]]:
    """The conditional knobs asked for under one name per value of the knobs their condition reads, with those.

    A sampler models a knob from every trial that asked for it. chmm's chunk_size serves the scan, fastest at
    the largest chunks, and the chained kernel, fastest near 64: under one name TPE drew the scan at the
    chained kernel's chunks (an H200 search of 65 trials measured no scan chunk over 297 and ended 2.4x below
    one of 24 that did). Split, each kernel's chunks get their own model. A knob is split where its condition
    holds under two or more values of the knobs it reads, each a knob with choices.
    """
    split = {}
    for name, param in parameters.items():
        if param.condition is None or param.fixed:
            continue
        parents = [p for p in parameters if p in param.condition.names]
        if any(parameters[p].type != "categorical" for p in parents):
            continue
        held = [values for values in itertools.product(*(parameters[p].choices for p in parents))
                if param.condition.evaluate(dict(zip(parents, values)))]
        if len(held) >= 2:
            split[name] = tuple(parents)
    return split


def asked_name(name: str, split: Mapping[str, tuple[str, ...]], values: Mapping[str, Any]) -> str:
    """The name knob ``name`` is asked for under, given the values of the knobs before it: ``chunk_size`` or
    ``chunk_size[messages=scan]`` (see :func:`split_by`)."""
    parents = split.get(name)
    return f"{name}[{','.join(f'{p}={show(values[p])}' for p in parents)}]" if parents else name


def knob_of(asked: str, knobs: Collection[str] = ()) -> str:
    """The knob a name in a study's trials stands for (the inverse of :func:`asked_name`); one of ``knobs``, the
    space's, is itself (a Kernel Tuner cache may name a knob ``a[0]``)."""
    return asked[:asked.index("[")] if asked not in knobs and asked.endswith("]") and "[" in asked else asked


def _same(a: Any, b: Any) -> bool:
    # True == 1 in Python, but a bool choice and an int choice are different knob values.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b and type(a) is type(b) or (
        isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b
    )


def canonical_values(parameters: Mapping[str, Parameter], values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` each as its parameter spells it (:meth:`Parameter.canonical`); a name it lacks, as it is."""
    return {name: parameters[name].canonical(v) if name in parameters else v for name, v in values.items()}


def _decimal(number: Any) -> Decimal:
    """``number`` as written (``0.3``, not the binary float's 0.299999...): grid arithmetic, as Optuna's own."""
    return Decimal(repr(number))


def parse_parameter(name: str, spec: Any, earlier: set[str], fail: Fail) -> Parameter:
    """One parameter of a space file; ``earlier`` are the names declared above it (a condition may use them)."""
    where = f"parameters.{name}"
    if problem := name_problem(name):
        raise fail(where, f"{problem}; conditions and --set could not name it")
    if not isinstance(spec, dict):
        raise fail(where, "must be a mapping with 'choices' or 'low'/'high'")
    unknown = set(spec) - _PARAM_KEYS
    if unknown:
        raise fail(f"{where}.{sorted(unknown, key=str)[0]}", f"unknown key; allowed: {', '.join(sorted(_PARAM_KEYS))}")
    kind = spec.get("type", "categorical" if "choices" in spec else None)
    if kind not in _TYPES:
        raise fail(f"{where}.type", f"must be one of {', '.join(_TYPES)}, got {kind!r}")
    condition = _condition(spec, where, earlier, fail)
    requires, choice_requires = _requires(spec, kind, where, fail)
    if kind == "categorical":
        param = _categorical(name, spec, where, fail, condition, requires, choice_requires)
    else:
        param = _numeric(name, kind, spec, where, fail, condition, requires)
    probe = spec.get("probe", False)
    if not isinstance(probe, bool) or (probe and kind != "categorical"):
        raise fail(f"{where}.probe", "must be true or false, and true only for a parameter with choices")
    return replace(param, claims=_claims(param, spec.get("claims", {}), f"{where}.claims", fail), probe=probe)


def _claims(param: Parameter, raw: Any, where: str, fail: Fail) -> dict[str, Claim]:
    """``claims: {value: {text: "...", gain: [low, high]}}``: what a guide promised for each value."""
    if not isinstance(raw, dict):
        raise fail(where, "must be a mapping of a value to {text: ..., gain: [low, high]}")
    claims = {}
    for value, spec in raw.items():
        if not param.allows(value):
            raise fail(f"{where}.{show(value)}", f"is not a value of {param.name}; allowed: {param.describe_allowed()}")
        if not isinstance(spec, dict) or not isinstance(spec.get("text"), str) or set(spec) - {"text", "gain"}:
            raise fail(f"{where}.{show(value)}", "must be a mapping with 'text' (a string) and optionally 'gain'")
        gain = spec.get("gain")
        if gain is not None:
            if (not isinstance(gain, list) or len(gain) != 2
                    or not all(isinstance(g, (int, float)) and not isinstance(g, bool) and 0 < g < math.inf for g in gain)
                    or gain[0] > gain[1]):
                raise fail(f"{where}.{show(value)}.gain", f"must be [low, high], two positive speedups with low <= high, got {gain!r}")
            gain = (float(gain[0]), float(gain[1]))
        claims[show(value)] = Claim(spec["text"], gain)
    return claims


def _condition(spec: dict, where: str, earlier: set[str], fail: Fail) -> Condition | None:
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
    return condition


def _requires(spec: dict, kind: str, where: str, fail: Fail) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    requires: frozenset[str] = frozenset()
    choice_requires: dict[str, frozenset[str]] = {}
    raw_requires = spec.get("requires", [])
    if isinstance(raw_requires, list):
        requires = _capabilities(raw_requires, f"{where}.requires", fail)
    elif isinstance(raw_requires, dict) and kind == "categorical":
        for choice, caps in raw_requires.items():
            if not isinstance(caps, list):
                caps = [caps]
            choice_requires[show(choice)] = _capabilities(caps, f"{where}.requires.{choice}", fail)
    else:
        raise fail(f"{where}.requires", "must be a list of capabilities, or for choices a mapping choice: [capabilities]")
    return requires, choice_requires


def _categorical(name: str, spec: dict, where: str, fail: Fail, condition: Condition | None,
                 requires: frozenset[str], choice_requires: dict[str, frozenset[str]]) -> Parameter:
    choices = spec.get("choices")
    if not isinstance(choices, list) or not choices:
        raise fail(f"{where}.choices", "must be a non-empty list")
    for choice in choices:
        infinite = isinstance(choice, float) and not math.isfinite(choice)  # nan is no value; a config could not match
        if not isinstance(choice, (str, int, float, bool, type(None))) or infinite:
            raise fail(f"{where}.choices", f"{choice!r} must be a string, finite number, boolean or null")
    shown: dict[str, Any] = {}
    for choice in choices:  # "1" and 1 are both 1 to --set and in a config's description: which one is asked for?
        if show(choice) in shown:
            same = json.dumps(shown[show(choice)]) == json.dumps(choice)
            raise fail(f"{where}.choices", f"must not repeat a choice: {json.dumps(choice)} is there twice" if same else
                       f"must not repeat a choice: {json.dumps(shown[show(choice)])} and {json.dumps(choice)} are both "
                       f"written {show(choice)}")
        shown[show(choice)] = choice
    equal = next(((a, b) for i, a in enumerate(choices) for b in choices[i + 1:] if a == b), None)
    if equal:  # Optuna stores a choice by its index in the list, found by ==: a trial of the second reads as the first
        raise fail(f"{where}.choices", f"{show(equal[0])} and {show(equal[1])} are one value to Python (and to the "
                   "study, which would read a trial of one as the other); give distinct values, or strings")
    for choice in choice_requires:
        if choice not in shown:
            raise fail(f"{where}.requires.{choice}", f"is not one of the choices {', '.join(sorted(shown))}")
    for key in ("low", "high", "step", "log"):
        if key in spec:
            raise fail(f"{where}.{key}", "only int and float parameters take a range")
    return Parameter(name, "categorical", tuple(choices), condition=condition, requires=requires,
                     choice_requires=choice_requires, help=str(spec.get("help", "")))


def _numeric(name: str, kind: str, spec: dict, where: str, fail: Fail, condition: Condition | None,
             requires: frozenset[str]) -> Parameter:
    low, high, step, log = spec.get("low"), spec.get("high"), spec.get("step"), spec.get("log", False)
    if not isinstance(log, bool):  # YAML's 'no' is a string here: never read a string as true
        raise fail(f"{where}.log", f"must be true or false, got {log!r}")
    number = int if kind == "int" else (int, float)
    for key, value in (("low", low), ("high", high)):
        if isinstance(value, bool) or not isinstance(value, number) or not math.isfinite(value):
            raise fail(f"{where}.{key}", f"must be a finite {'integer' if kind == 'int' else 'number'}, got {value!r}")
    if low > high:  # type: ignore[operator]
        raise fail(where, f"low must not exceed high, but got low={low} and high={high}")
    if kind == "int" and max(-low, high) > 2**53:  # type: ignore[operator]
        raise fail(where, f"an int range must lie within -2**53 and 2**53 ({2**53}): a study stores a value as a "
                   f"float, which holds no other integer exactly beyond (2**60 - 1 reads back as 2**60); got "
                   f"low={low} and high={high}")
    if log and low <= 0:  # type: ignore[operator]
        raise fail(f"{where}.low", f"must be > 0 on a log scale, got {low}")
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, number) or not math.isfinite(step) or step <= 0:
            raise fail(f"{where}.step", f"must be a positive {'integer' if kind == 'int' else 'number'}, got {step!r}")
        if log and not (kind == "int" and step == 1):
            raise fail(f"{where}.step", "cannot be combined with log: true")
        span, grid = _decimal(high) - _decimal(low), _decimal(step)
        if span % grid:  # Optuna would narrow the range to the grid's end without a word to the file's author
            top = show(_decimal(low) + span // grid * grid)
            raise fail(f"{where}.high", f"{high} is not on the grid of step {step} from low {low}: the grid ends at "
                       f"{top}; write high: {top}, or a step that divides high - low")
    return Parameter(name, kind, (), low, high, step, log, condition, requires, {}, str(spec.get("help", "")))


def _capabilities(names: list, where: str, fail: Fail) -> frozenset[str]:
    for name in names:
        if not isinstance(name, str) or name not in CAPABILITIES:  # [[bf16]] was a TypeError, "unhashable type"
            raise fail(where, f"unknown capability {name!r}; known: {', '.join(sorted(CAPABILITIES))}")
    return frozenset(names)
