"""Search spaces, declared in YAML files rather than coded.

A space file (``search_spaces/<workload>.yaml``) lists the knobs of a workload, the ``baseline`` its users
run today and the ``defaults`` used when nothing is tuned. Each parameter is a set of choices or an int/float
range, may be active only under a ``condition`` (see :mod:`autotune.conditions`), and may need device
capabilities (``requires``), either for the whole parameter or per choice. The README's "Adding a workload"
gives the format, with an example of every field.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import yaml

from autotune.conditions import parse_constraints, size_read, values_named
from autotune.config import Config, as_asked, show as _show
from autotune.devices import CAPABILITIES, DeviceProfile
from autotune.exceptions import InvalidConfigError, SearchSpaceError, UnknownNameError
from autotune.parameters import Parameter, asked_name, canonical_values, knob_of, parse_parameter, split_by
from autotune.registry import space_path, workload_facts
from autotune.strict import load_yaml

if TYPE_CHECKING:
    import optuna

__all__ = ["Parameter", "SearchSpace", "load_space"]

SCHEMA_VERSION = 1
_TOP_KEYS = {"schema_version", "workload", "description", "parameters", "baseline", "defaults", "reference",
             "constraints", "size_parameters"}


class SearchSpace:
    """The knobs of one workload, with its baseline and defaults.

    A space is immutable; :meth:`for_device` returns the space a device can
    run, with every choice it cannot run removed before sampling.
    """

    def __init__(
        self, parameters: Iterable[Parameter], defaults: Mapping[str, Any], baseline: Mapping[str, Any],
        source: str = "<memory>", workload: str | None = None, description: str = "",
        device: DeviceProfile | None = None, reference: Mapping[str, Any] | None = None,
        constraints: Iterable[Any] = (), facts: Mapping[str, Any] | None = None, size_parameters: Iterable[str] = (),
    ) -> None:
        self.parameters: dict[str, Parameter] = {p.name: p for p in parameters}
        self._split = split_by(self.parameters)  # knobs asked for under a name per value of what they depend on
        self.source, self.workload, self.description, self.device = source, workload, description, device
        self._defaults, self._baseline = (canonical_values(self.parameters, v) for v in (defaults, baseline))
        # The reference output's config, over the defaults; never moved to another value on a device.
        self._reference = canonical_values(self.parameters, reference or {})
        # Combinations that cannot run at all: each has ``text``, ``names`` and ``evaluate(values) -> bool``
        # (a Condition from the file's ``constraints:``, or the key set of a recorded space).
        self.constraints = tuple(constraints)
        # What a constraint may read besides the knobs: device capabilities (true where the device has them) and
        # the size parameters the file lists. One that reads a fact not known here (no device, no size) is not judged.
        self.facts = dict(facts or {})
        self.size_parameters = tuple(size_parameters)
        unknown = (set(self.size_parameters) | CAPABILITIES) - self.facts.keys() - self.parameters.keys()
        self._judged = tuple(c for c in self.constraints if not c.names & unknown)

    # -- reading ----------------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | Path) -> "SearchSpace":
        path = Path(path)
        try:
            data = load_yaml(path.read_text(encoding="utf-8"))  # a key given twice is an error, not the last one kept
        except FileNotFoundError:
            raise SearchSpaceError(f"{path}: search-space file not found") from None
        except (OSError, UnicodeDecodeError) as exc:  # a folder, or Latin-1 text: a traceback with Python's words
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise SearchSpaceError(f"{path}: cannot read the search-space file: {reason}") from None
        except yaml.YAMLError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise SearchSpaceError(f"{path}: not valid YAML: {first}") from None
        return values_named(cls.from_dict(data, source=str(path)))  # no misspelt value in a condition

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
            parameters.append(parse_parameter(str(name), spec, seen, fail))
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
                    raise fail(f"{section}.{key}", f"{_show(value)} is not allowed; allowed: "
                                                   f"{by_name[key].describe_allowed()}")
        baseline = {**defaults, **sections["baseline"]}
        sized = data.get("size_parameters", [])
        if not isinstance(sized, list) or not all(isinstance(n, str) and n not in by_name for n in sized):
            raise fail("size_parameters", "must list the size's parameters (not knobs) constraints read: [global_batch]")
        constraints = parse_constraints(data.get("constraints", []), set(names), CAPABILITIES, set(sized), fail)
        space = cls(parameters, defaults, baseline, source, data.get("workload"), data.get("description", ""),
                    reference=sections["reference"], constraints=constraints, size_parameters=sized)
        for section in ("defaults", "baseline", "reference"):
            broken = space.violated(space.complete({**defaults, **sections[section]}))
            if broken is not None:
                raise fail(section, f"breaks the constraint {broken!r}")
        return space

    # -- the space a device can run -------------------------------------------

    def for_device(self, device: DeviceProfile) -> "SearchSpace":
        """This space without the choices ``device`` cannot run.

        A parameter whose own requirements the device lacks is fixed at its
        default and no longer sampled. A default or baseline value the device
        cannot run moves to the parameter's first runnable choice.
        """
        parameters: list[Parameter] = []
        defaults, baseline = dict(self._defaults), dict(self._baseline)
        for param in self.parameters.values():
            if device.missing(param.requires):
                parameters.append(replace(param, type="categorical", choices=(defaults[param.name],),
                                          low=None, high=None, step=None, log=False))
                baseline[param.name] = defaults[param.name]
                continue
            if param.type == "categorical" and param.choice_requires:
                runnable = tuple(c for c in param.choices
                                 if not device.missing(param.choice_requires.get(_show(c), frozenset())))
                if not runnable:
                    raise SearchSpaceError(f"{self.source}: parameters.{param.name}: no choice runs on device "
                                           f"{device.name!r}")
                param = replace(param, choices=runnable)
                for values in (defaults, baseline):
                    if not param.allows(values[param.name]):
                        values[param.name] = runnable[0]
            parameters.append(param)
        facts = {**self.facts, **{name: name in device.capabilities for name in CAPABILITIES}}
        return SearchSpace(parameters, defaults, baseline, self.source, self.workload, self.description, device,
                           self._reference, self.constraints, facts, self.size_parameters)

    def left_out(self) -> list[str]:
        """The choices (or knobs, held at their default) this device's space left out for want of software alone
        (numba, a compiler), a line a knob: a search that never tried them said nothing of it."""
        said: list[str] = []
        if self.device is None or not self.device.lacks:
            return said
        for param in self.parameters.values():
            gone = {text: lacked for text, needs in [("", param.requires), *param.choice_requires.items()]
                    if (lacked := self.device.lacking(needs))}
            why = "; ".join(sorted({why for lacked in gone.values() for why in lacked.values()}))
            what = f" (held at {_show(param.choices[0])})" if "" in gone else f"={', '.join(gone)}"
            said += [f"{param.name}{what} left out of this search: {why}"] if gone else []
        return said

    def for_size(self, params: Mapping[str, Any], size: str = "this size") -> "SearchSpace":
        """This space with its constraints on the size's parameters enforced at ``params`` (``sizes[size]``)."""
        missing = [name for name in self.size_parameters if name not in params]
        if missing:
            raise SearchSpaceError(f"{self.source}: size_parameters: size {size!r} has no {', '.join(missing)}")
        facts = {**self.facts, **{name: params[name] for name in self.size_parameters}}
        space = SearchSpace(self.parameters.values(), self._defaults, self._baseline, self.source, self.workload,
                            self.description, self.device, self._reference, self.constraints, facts,
                            self.size_parameters)
        for section, values in (("defaults", self._defaults), ("baseline", self._baseline)):
            broken = space.violated(space.complete(values))
            if broken is not None:
                raise SearchSpaceError(f"{self.source}: {section} breaks the constraint {broken!r} at size {size!r}")
        return space

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

    def firsts(self) -> list[tuple[Config, str]]:
        """What a new study measures first, with its role: the baseline, the defaults, then each other choice of a
        ``probe`` knob on the defaults (one that breaks a constraint is left out; each config once).

        A probe is for a kernel choice whose worth depends on the other knobs: TPE judges a value by the trials
        it drew it in, and a 20-trial chmm search that drew numba only with the slow per-step count update
        (each slower than the loop kernel with batched counts) never drew it again and ended at 6.9x, where
        numba with the defaults' batched counts reached 57-69x in the runs timed (benchmarks/quick_start.md).
        """
        found = {self.baseline.key: (self.baseline, "baseline")}
        found.setdefault(self.defaults.key, (self.defaults, "defaults"))
        for param in self.tunable:
            for choice in param.choices if param.probe else ():
                config = self.complete({**self.defaults.to_dict(), param.name: choice})
                if self.violated(config) is None:
                    found.setdefault(config.key, (config, "probe"))
        return list(found.values())

    def first_params(self) -> list[tuple[dict[str, Any], str]]:
        """:meth:`firsts` as ``enqueue_trial`` takes them (:meth:`sampled_params`), with each one's role."""
        return [(self.sampled_params(config), role) for config, role in self.firsts()]

    def violated(self, config: Mapping[str, Any]) -> str | None:
        """The first constraint ``config`` breaks (its text), or None: such a config is never measured."""
        if not self._judged:
            return None
        active = self.active(config)
        values = {**self.facts, **{name: (value if active.get(name, True) else None) for name, value in config.items()}}
        return next((c.text for c in self._judged if not c.evaluate(values)), None)

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
            if self.is_active(name, seen):  # a range's value as spelled: a clamped float's 0 is 0.0, one config
                value, param = values.get(name, self._defaults[name]), self.parameters[name]
                seen[name] = result[name] = value if param.choices else param.canonical(value)
            else:
                seen[name], result[name] = None, self._defaults[name]
        return Config(result)

    def validate(self, values: Mapping[str, Any], what: str = "config") -> Config:
        """Check every key and value against the space; returns the completed config."""
        if not isinstance(values, Mapping):  # Tuner.run_config(5): "'int' object has no attribute 'items'"
            raise TypeError(f"{what} must be a mapping of knob names to values, not {type(values).__name__}")
        for name, value in values.items():
            if name not in self.parameters:
                raise UnknownNameError(f"parameter in {what}", name, self.parameters)
            param, device = self.parameters[name], self.device
            if not param.allows(value):
                where = f" on device {device.name!r}{param.why_left_out(_show(value), device)}" if device else ""
                raise InvalidConfigError(f"{what}: {name}={_show(value)} is not allowed{where}; allowed: "
                                         f"{param.describe_allowed()}")
        return self.complete(canonical_values(self.parameters, values))  # 64.0 from a JSON file runs as 64

    def allowed(self, values: Mapping[str, Any], what: str = "config") -> Config:
        """:meth:`validate`, and the config must keep the space's constraints: what a user hands in (``--set``,
        ``--config``, an export) is a config a search could have measured, or a one-line error."""
        return self._within_constraints(self.validate(values, what), what)

    def admits(self, values: Mapping[str, Any]) -> bool:
        """Whether :meth:`allowed` takes ``values`` (a study's config from before its space file changed may not)."""
        try:
            self.allowed(values)
        except (InvalidConfigError, UnknownNameError):
            return False
        return True

    def _within_constraints(self, config: Config, what: str) -> Config:
        broken = self.violated(config)
        if broken is not None:  # a search never measures it; run, it would fail or mislead
            read = next(c.names for c in self.constraints if c.text == broken)  # and what it read of the size
            raise InvalidConfigError(f"{what}: the config breaks the space's constraint \"{broken}\""
                                     + size_read(read, self.size_parameters, self.facts))
        return config

    def parse_assignments(self, assignments: Iterable[str], base: Mapping[str, Any] | None = None) -> Config:
        """``["dtype=float64", "update_c=grouped"]`` applied over ``base`` (the defaults)."""
        values = dict(base if base is not None else self.defaults)
        assignments, given = list(assignments), []
        for item in assignments:
            name, sep, text = item.partition("=")
            name = name.strip()
            if not sep or not name:
                raise InvalidConfigError(f"--set {item!r} must look like name=value")
            if name not in self.parameters:
                raise UnknownNameError("parameter in --set", name, self.parameters)
            if name in given:  # the last one would win silently: which did the user mean?
                raise InvalidConfigError(f"--set {name} is given twice; give each knob once")
            values[name] = self.parameters[name].parse(text.strip(), self.device)
            given.append(name)
        config = self.validate(values, "--set")
        as_asked(self, {name: values[name] for name in given}, config, "--set ", named=given)
        return self._within_constraints(config, f"--set {' '.join(assignments)}")

    def _choose(self, draw: Callable[[Parameter, str], Any]) -> Config:
        """A full config with ``draw(param, asked_name)`` for every active parameter, in declared order."""
        chosen: dict[str, Any] = {}
        seen: dict[str, Any] = {}  # what conditions see: inactive parameters are null
        for name, param in self.parameters.items():
            if not self.is_active(name, seen):
                seen[name] = None
                continue
            asked = asked_name(name, self._split, seen)
            seen[name] = chosen[name] = param.choices[0] if param.fixed else draw(param, asked)
        return self.complete(chosen)

    def sampled_params(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The part of ``config`` a sampler chooses (active, not fixed): what ``enqueue_trial`` takes."""
        active = self.active(config)
        return {asked_name(name, self._split, config): config[name] for name, param in self.parameters.items()
                if active[name] and not param.fixed}

    def active(self, config: Mapping[str, Any]) -> dict[str, bool]:
        """Which parameters are active under ``config`` (their conditions hold)."""
        seen: dict[str, Any] = {}
        active: dict[str, bool] = {}
        for name in self.parameters:
            active[name] = self.is_active(name, seen)
            seen[name] = config[name] if active[name] else None
        return active

    def unused(self, config: Mapping[str, Any]) -> tuple[str, ...]:
        """The knobs ``config`` leaves inactive: they hold their defaults and do nothing in its run."""
        return tuple(name for name, on in self.active(config).items() if not on)

    def check_study(self, study: "optuna.Study", where: str) -> None:
        """Refuse a study whose trials sampled a knob in a way this space cannot (a categorical with other
        choices, a range on another scale): Optuna would raise at the first ask, mid-search, with a traceback."""
        from optuna.distributions import CategoricalDistribution, check_distribution_compatibility

        recorded: dict[str, Any] = {}
        for trial in study.get_trials(deepcopy=False):
            for name, distribution in trial.distributions.items():
                recorded.setdefault(name, distribution)
        for name, before in recorded.items():
            param = self.parameters.get(knob_of(name, self.parameters))
            if param is None or param.fixed:
                continue  # never asked for again: its old values trouble no sampler
            try:
                check_distribution_compatibility(before, param.distribution())
            except ValueError:
                was = (", ".join(_show(c) for c in before.choices) if isinstance(before, CategoricalDistribution)
                       else f"{type(before).__name__}{' (log scale)' if getattr(before, 'log', False) else ''}")
                # A choice this device left out for want of software (a compiler gone since): not the file's doing.
                why = next((said for choice in getattr(before, "choices", ())
                            if (said := param.why_left_out(_show(choice), self.device))), "")
                now, mend = ((f"this device now runs {param.describe_allowed()}{why}", "install what it lacks") if why
                             else (f"{self.source} now says {param.describe_allowed()}", "restore the file"))
                raise SearchSpaceError(f"{where} was searched with {name}: {was}; {now}, which Optuna cannot take "
                                       f"within one study: name a new study with --study, or {mend}") from None

    def suggest(self, trial: "optuna.Trial") -> Config:
        """Sample a config for ``trial``; inactive and fixed parameters are not sampled."""
        return self._choose(lambda param, name: param.suggest(trial, name))

    def neighbour(self, config: Mapping[str, Any], rng: random.Random) -> Config:
        """``config`` with one active tunable knob (now and then two) moved to a neighbouring value."""
        active = self.active(config)
        knobs = [p for p in self.tunable if active.get(p.name)]
        values = dict(config)
        for param in rng.sample(knobs, min(len(knobs), 2 if rng.random() < 0.3 else 1)):
            values[param.name] = param.neighbour(values[param.name], rng)
        return self.complete(values)

    def repairs(self, config: Mapping[str, Any]) -> list[Config]:
        """The allowed configs one knob move from ``config`` (see ``Parameter.alternatives``), in knob order.

        How the loop mends a neighbour move that breaks a constraint with the
        least change (numba with bfloat16, which numba cannot run, becomes
        numba with float32 or float64, or another kernel with bfloat16).
        """
        active = self.active(config)
        found: dict[str, Config] = {}
        for param in self.tunable:
            if active.get(param.name):
                for value in param.alternatives(config[param.name]):
                    candidate = self.complete({**config, param.name: value})
                    if self.violated(candidate) is None:
                        found.setdefault(candidate.key, candidate)
        return list(found.values())

    def every_config(self, limit: int = 10_000) -> list[Config]:
        """Every allowed config, each once; none where a knob is a float range or the knobs' values combine more
        than ``limit`` ways. How a search knows it has measured them all (see ``loop.run_trials``)."""
        values = {p.name: p.values() for p in self.parameters.values()}
        if any(v is None for v in values.values()) or math.prod(len(v) for v in values.values()) > limit:  # type: ignore[arg-type]
            return []
        configs = (self.complete(dict(zip(values, c))) for c in itertools.product(*values.values()))  # type: ignore[arg-type]
        return list({c.key: c for c in configs if self.violated(c) is None}.values())  # equal keys: equal configs

    def sample(self, rng: random.Random) -> Config:
        """A config drawn at random (uniform choices; log-uniform where the range is log)."""
        return self._choose(lambda param, name: param.draw(rng))

    def describe(self) -> list[dict[str, Any]]:
        """One row per parameter, for ``autotune list``."""
        return [
            {
                "name": p.name,
                "values": p.describe_allowed(),
                "default": _show(self._defaults[p.name]),
                "baseline": _show(self._baseline[p.name]),
                "condition": p.condition.text if p.condition else "",
                # What the knob needs of a device, then what each value needs (numba: cpu, numba).
                "requires": "; ".join([", ".join(sorted(p.requires))] * bool(p.requires) + [
                    f"{choice}: {', '.join(sorted(needs))}" for choice, needs in p.choice_requires.items()]),
                "help": p.help, "probe": p.probe,
            }
            for p in self.parameters.values()
        ]


def load_space(workload: str, name: str | None = None) -> SearchSpace:
    """The space of ``workload`` (a built-in, a plug-in, or ``path/to/file.py:ClassName``) named ``name``, its own."""
    space, name = SearchSpace.from_file(space_path(workload)), name or workload_facts(workload).name
    if space.workload not in (None, name):  # copied from another: an explanation and its export named two
        raise SearchSpaceError(f"{space.source}: workload: {space.workload!r} is not this space's workload, {name!r}; "
                               f"write {name} there, or leave the line out")
    space.workload = name
    return space
