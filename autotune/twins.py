"""A config's twin: the same config with the knobs that set its check's tolerance at the reference config's values.

A looser tolerance (a lower precision's) passes any other mistake below it. A training step of mine whose batch size
changed its SGD steps failed in float32 (parameters 8.3e-4 against 1e-4) and passed under bfloat16 autocast's 2e-2,
and the search exported such a config at 1.54x (this CPU). Its twin, the same config without autocast, is judged by
the tighter bound: where the twin fails, the knobs the two share are wrong beyond it, and the config may not win.

Which knobs set the tolerance is read two ways, and a twin holds every knob either shows at the reference's. Each
trial asks its own check (:func:`knobs_that_loosen`): of its output, under its config with one knob at a time at
the reference's, a knob whose value there tightens a bound sets it. And the study shows them (:func:`tolerance_knobs`):
a knob does where two trials that differ in it alone were judged by other bounds, and the knobs so shown give each
trial's bound; this alone was read before, and a study with no such pair (a search of two trials: the baseline, and
defaults of both bfloat16 and tanh's GELU) exported a GELU wrong beyond float32's bound at 2.74x (this CPU).
"""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from autotune.config import Config, show

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

    from autotune.runner import TrialResult
    from autotune.selection import Candidate

__all__ = ["Twins", "checked", "knobs_that_loosen", "loose_pass", "loose_passes", "passed_only_loosely",
           "tolerance_knobs"]

Run = Callable[["Candidate"], "TrialResult"]  # one round of one candidate's re-measurement


def _bounds(trial: "FrozenTrial") -> dict[str, list[Any]]:
    return (trial.user_attrs.get("check") or {}).get("metrics") or {}


def tolerance_knobs(trials: Iterable["FrozenTrial"]) -> tuple[str, ...]:
    """The knobs that set the check's tolerances, as ``trials`` show them: for each metric, the knobs in which
    alone two trials differ that were judged by other bounds of it, where those knobs determine its bound over
    every trial (one bound for each of their values, one of them shared by two configs). A bound that is a
    statistic of the output (vlm_mc's, 7-18x apart at one precision) is set so by every knob that moves the
    output's random stream (its batch size, its compile mode): its twins hold those at the reference's too."""
    judged = [(t.user_attrs["config"], _bounds(t)) for t in trials if _bounds(t) and t.user_attrs.get("config")]
    knobs: set[str] = set()
    for metric in sorted({m for _, bounds in judged for m in bounds}):
        rows = [(config, bounds[metric][1]) for config, bounds in judged if metric in bounds]
        shown = {knob for knob in sorted({k for config, _ in rows for k in config}) if _differ(rows, knob)}
        if shown and _determined(rows, sorted(shown)):
            knobs |= shown
    return tuple(sorted(knobs))


def knobs_that_loosen(check: Callable[[Any, Any, Any], Any], judged: Mapping[str, Any], output: Any, reference: Any,
                      config: Config, reference_config: Mapping[str, Any] | None) -> list[str] | None:
    """The knobs of ``config`` each of which, set alone to the ``reference_config``'s value, tightens a bound of the
    ``check`` of this ``output`` (a trial's first, whose check passed with the metrics ``judged``): its twin holds
    them at the reference's. The same output is judged under each, so a bound that is a statistic of the output
    moves with the config alone. None where there is no reference config; a knob under which the check raises is
    left out (its value there may be one the check was never written for).

    The check is asked once with every such knob at the reference's, and one knob at a time only where that is
    tighter: a config at the reference's precision costs one more check, not one a knob (a check of mine may take
    seconds)."""
    if reference_config is None:
        return None
    differ = sorted(k for k in config.to_dict() if k in reference_config and config[k] != reference_config[k])
    bounds = {name: pair[1] for name, pair in judged.items()}

    def tighter(knobs: list[str]) -> bool:
        try:
            theirs = check(output, reference, config.replace(**{k: reference_config[k] for k in knobs})).metrics
        except Exception:  # noqa: BLE001 - the check's own failure under a config it never judges says nothing here
            return False
        return any(name in bounds and pair[1] < bounds[name] for name, pair in theirs.items())

    if len(differ) > 1 and not tighter(differ):
        return []
    return [knob for knob in differ if tighter([knob])]


def _key(config: Mapping[str, Any], knobs: Iterable[str]) -> str:
    return json.dumps({k: config.get(k) for k in knobs}, sort_keys=True, default=str)


def _differ(rows: list[tuple[Mapping[str, Any], Any]], knob: str) -> bool:
    """Whether two configs that differ in ``knob`` alone were judged by other bounds."""
    seen: dict[str, Any] = {}
    for config, bound in rows:
        if seen.setdefault(_key(config, sorted(k for k in config if k != knob)), bound) != bound:
            return True
    return False


def _determined(rows: list[tuple[Mapping[str, Any], Any]], knobs: list[str]) -> bool:
    """Whether ``knobs`` give every row's bound (one for each of their values), one bound shared by two configs."""
    bounds: dict[str, set[Any]] = {}
    configs: dict[str, set[str]] = {}
    for config, bound in rows:
        bounds.setdefault(_key(config, knobs), set()).add(bound)
        configs.setdefault(_key(config, knobs), set()).add(_key(config, sorted(config)))
    return all(len(b) == 1 for b in bounds.values()) and any(len(c) > 1 for c in configs.values())


def passed_only_loosely(trial: "FrozenTrial", others: Iterable["FrozenTrial"],
                        reference: Mapping[str, Any]) -> str | None:
    """Why a trial that passed its check passed only under a looser tolerance than its knobs earn, or None.

    One of ``others`` is its twin where it is this config with some knobs at the ``reference`` config's values
    (a precision, say), was judged by a tighter tolerance of every metric, and failed one: the knobs the two
    share are then wrong beyond the tighter bound, and the looser one let them through.
    """
    config, bounds = trial.user_attrs.get("config") or {}, _bounds(trial)
    for other in others:
        twin, tight = other.user_attrs.get("config") or {}, _bounds(other)
        if other.user_attrs.get("status") != "incorrect" or twin == config or set(twin) != set(config) or not \
                bounds or set(tight) != set(bounds) or any(twin[k] not in (config[k], reference.get(k)) for k in twin):
            continue
        failed = [m for m in tight if not (isinstance(tight[m][0], (int, float)) and tight[m][0] <= tight[m][1])]
        if failed and all(tight[m][1] <= bounds[m][1] for m in bounds) and \
                any(tight[m][1] < bounds[m][1] for m in bounds):
            moved = " ".join(f"{k}={show(twin[k])}" for k in sorted(twin) if twin[k] != config[k])
            error, tolerance = tight[failed[0]]
            return (f"#{other.number}, the same config with {moved}, fails its check ({failed[0]} error "
                    f"{error if error is None else format(error, '.3g')} > tolerance {tolerance:.3g}), which this "
                    f"one's tolerance of {bounds[failed[0]][1]:.3g} lets through")
    return None


def loose_pass(attrs: Mapping[str, Any], trials: Iterable["FrozenTrial"], reference: Mapping[str, Any] | None,
               ) -> str | None:
    """Where a trial of ``attrs`` (its user attributes) passed only under a looser tolerance than a twin among
    ``trials`` that failed: that it did, with why (:func:`passed_only_loosely`), which the search tells its sampler
    as wrong (a block of mine whose tanh GELU failed in float64 and passed in bfloat16 was the study's best, and the
    sampler asked for it 10 times of 34); None where it did not, or where there is no ``reference`` (a replay)."""
    wrong = [t for t in trials if t.user_attrs.get("status") == "incorrect"] if reference is not None else []
    why = passed_only_loosely(SimpleNamespace(user_attrs=attrs), wrong, reference) if wrong else None  # type: ignore
    return f"passed only under a looser tolerance: {why}; it cannot win" if why else None


def loose_passes(trials: Iterable["FrozenTrial"], reference: Mapping[str, Any]) -> dict[int, str]:
    """The trials of ``trials`` that passed only under a looser tolerance than a twin among them that failed, by
    number, each with why (:func:`loose_pass`): none of them may win, nor stand for its values."""
    trials = list(trials)
    wrong = [t for t in trials if t.user_attrs.get("status") == "incorrect"]  # once: each pass is read against them
    found = {t.number: loose_pass(t.user_attrs, wrong, reference) for t in trials if t.user_attrs.get("status") == "ok"}
    return {number: why for number, why in found.items() if why}


class Twins:
    """The twins of a study's configs (``latest``: each config's latest counted trial) for choosing the candidates:
    one whose measured twin failed is no candidate (:meth:`hidden`), and one whose twin was never measured has it
    measured once before it is re-measured (:func:`checked`)."""

    def __init__(self, latest: Iterable["FrozenTrial"], reference: Mapping[str, Any] | None,
                 admits: Callable[[Mapping[str, Any]], bool], on_stage: Callable[[str], None]) -> None:
        latest = list(latest)
        self.reference, self.admits, self.on_stage = reference, admits, on_stage
        self.wrong = [t for t in latest if t.user_attrs.get("status") == "incorrect"]
        self.knobs = tolerance_knobs(latest) if reference is not None else ()
        self.measured = {t.user_attrs.get("config_key") for t in latest}

    def hidden(self, trial: "FrozenTrial") -> bool:
        """Whether ``trial`` passed only under a looser tolerance than its measured twin's, which failed (said)."""
        if self.reference is not None and (why := passed_only_loosely(trial, self.wrong, self.reference)):
            self.on_stage(f"warning: trial #{trial.number} passed its check only under a looser tolerance: {why}; "
                          "it cannot win")
            return True
        return False

    def of(self, config: Mapping[str, Any], own: Iterable[str] | None = ()) -> Config | None:
        """The twin to measure before ``config`` may win: None where the study measured it (:meth:`hidden` read
        it), where the space does not allow it, or where no knob of the config sets a looser tolerance: neither one
        the study shows nor one of its ``own`` (its trial's :func:`knobs_that_loosen`)."""
        reference = self.reference or {}
        moved = {k: reference[k] for k in sorted({*self.knobs, *(own or ())})
                 if k in reference and config.get(k) != reference[k]}
        twin = Config({**config, **moved})
        return twin if moved and twin.key not in self.measured and self.admits(twin.to_dict()) else None


def checked(run: "Run", on_stage: Callable[[str], None]) -> "Run":
    """``run`` for the re-measurement, where a candidate with a twin (``Candidate.twin``) has it measured once
    first, by ``run`` as a candidate of its own: a twin that fails its check fails each of the candidate's rounds,
    unrun, with why."""
    twins: dict[str, TrialResult] = {}
    warned: set[int | None] = set()

    def each_round(candidate: "Candidate") -> TrialResult:
        twin = candidate.twin
        if twin is None:
            return run(candidate)
        moved = " ".join(f"{k}={show(v)}" for k, v in sorted(twin.to_dict().items()) if candidate.config.get(k) != v)
        if twin.key not in twins:  # candidates that share a twin share its one measurement
            on_stage(f"checking candidate #{candidate.trial}'s twin ({moved}: the knobs that set its tolerance at "
                     "the reference's)")
            twins[twin.key] = run(replace(candidate, config=twin, role="twin", results=[], warm_seconds=None,
                                          twin=None))
        measured = twins[twin.key]
        if measured.status != "incorrect":
            return run(candidate)
        if candidate.trial not in warned:
            warned.add(candidate.trial)
            on_stage(f"warning: candidate #{candidate.trial} passed its check only under a looser tolerance: its "
                     f"twin with {moved} fails its check ({measured.error}); it cannot win")
        # A TrialResult, made by its class: the runner imports this module (knobs_that_loosen), not it the runner.
        return type(measured)("incorrect", candidate.config.to_dict(), error=(
            f"its twin ({twin.describe()}) fails its check ({measured.error}): it passed only under a looser "
            "tolerance"))

    return each_round
