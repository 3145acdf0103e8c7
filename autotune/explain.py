"""``autotune explain``: what each fix bought, measured alone and inside the winner, beside the guide's claim.

A search says which config is fastest, not what each of its knobs did: the
search's own per-choice figures are read off the trials the sampler happened
to draw, each confounded with every other knob of its trial. Explain measures
the answer directly, in one run and interleaved in rounds (so drift hits every
config alike), with the same measurer and checks as ``search``:

* the baseline and the target (the exported winner, or a given config);
* each fix **alone**: the baseline with one knob moved to the target's value;
* each fix **removed**: the target with that knob moved back to the baseline's;
* the **path**: the fixes applied one after another, largest solo gain first.

A move the space forbids on its own (the knob's condition does not hold, or a
constraint breaks) takes the knobs it needs along, and says which; a move that
activates another knob sets that knob too. Every figure is a speedup over the
baseline measured in the same run, with a 95% interval from a bootstrap of the
rounds and their run times (:func:`speedup`).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from autotune.config import Config, as_asked, show, writable_file
from autotune.environment import beyond_threads
from autotune.exceptions import AutotuneError, InvalidConfigError
from autotune.export import read_json, write_json
from autotune.measure import COVERAGE, RESAMPLES, Measurement, ratio_interval
from autotune.selection import (keep_whole_rounds, loaded_rounds, most_one_off, next_round, quiet_everywhere,
                                quiet_rounds)

if TYPE_CHECKING:
    from autotune.runner import TrialResult
    from autotune.space import SearchSpace

__all__ = ["SCHEMA_VERSION", "Fix", "explain_path", "plan", "read_explanation", "speedup", "verdict"]

#: Version of the explanation's JSON layout.
SCHEMA_VERSION = 1
#: An interval within this of 1 reads "no effect" though it leaves 1 out. Two explain runs of one config on this
#: CPU read speedups up to 4% apart (232.21x and 226.79x in another pair), each interval about +-0.5% (drawn from
#: the runs pooled, then: see measure.ratio_interval): effects of a few percent do not repeat from run to run.
#: lsd's SDPA alone on an H200 was "faster" at 1.003x [1.001, 1.004]. 3% stays below the smallest gain a guide
#: claims (5%).
NEGLIGIBLE = 0.03
METHOD = (f"speedup = throughput at the median run time over the baseline's; {COVERAGE:.0%} interval: percentile "
          f"bootstrap ({RESAMPLES} resamples) of each config's rounds, then of the runs of each round drawn")


@dataclass
class Fix:
    """One knob where the target differs from the baseline, and the configs that measure it."""

    knob: str
    start: Any  # the baseline's value
    end: Any  # the target's value
    alone: Config | None = None  # the baseline with this fix (None: the space forbids it)
    alone_with: tuple[str, ...] = ()  # knobs moved along with it
    alone_blocked: str | None = None
    removed: Config | None = None  # the target without this fix
    removed_with: tuple[str, ...] = ()
    removed_blocked: str | None = None

    def needs(self, space: "SearchSpace", baseline: Config) -> tuple[str, ...]:
        """Knobs the alone move changed that the baseline used (its condition's, a constraint's): their gain is
        in the alone figure too. A knob the move turns on (a kernel's tile) is part of the fix, not one of these."""
        used = space.active(baseline)
        return tuple(name for name in self.alone_with if used[name])

    def verdict_from(self, space: "SearchSpace", baseline: Config) -> str:
        """Which figure measures this fix's own gain: ``alone``, unless the alone move needs other knobs the
        baseline used and the removal from the target changes none the target keeps using (``in_winner``).

        Compile is not offered with ten's loop: alone, it brings the scan, and its 9.1x was the scan's
        (ruled "above claim" against compile's claimed 2-3x); inside the winner it is 1.4x."""
        if self.alone is None:
            return "in_winner"
        if self.removed is None or not self.needs(space, baseline):
            return "alone"
        kept = space.active(self.removed)
        return "alone" if any(kept[name] for name in self.removed_with) else "in_winner"


@dataclass
class Step:
    """One step of the path: the fixes applied so far, ending with ``knobs``."""

    knobs: tuple[str, ...]
    config: Config


def shift(space: "SearchSpace", start: Config, end: Config, knobs: Iterable[str]) -> tuple[Config | None, tuple[str, ...], str | None]:
    """``start`` with ``knobs`` moved to ``end``'s values: (config, knobs moved along, why not).

    A knob whose condition does not hold brings the knobs its condition reads;
    a broken constraint brings the knobs it names; a knob the move activates
    takes ``end``'s value. Without such help the move is refused, with why.
    """
    asked, active_start, config, broken = list(knobs), space.active(start), start, None
    moved = set(asked)
    for _ in range(len(space.parameters) + 1):
        config = space.complete({**start.to_dict(), **{name: end[name] for name in moved}})
        active = space.active(config)
        more = {read for name in moved if not active[name] and (condition := space.parameters[name].condition)
                is not None for read in condition.names}
        more |= {name for name, on in active.items()
                 if on and not active_start[name] and show(config[name]) != show(end[name])}
        broken = space.violated(config)
        if broken is not None:
            constraint = next(c for c in space.constraints if c.text == broken)
            # Its knobs, not what it reads of the size or the device (`global_batch`, `cpu`): those do not move.
            more |= constraint.names & space.parameters.keys()
        more -= moved
        if not more:
            break
        moved |= more
    if broken is not None:
        return None, (), f"breaks the constraint {broken!r}"
    if inactive := [name for name in asked if not space.active(config)[name]]:
        return None, (), f"{', '.join(inactive)} has no effect under the other knobs"
    return config, tuple(sorted(moved - set(asked))), None


def plan(space: "SearchSpace", baseline: Config, target: Config) -> list[Fix]:
    """The fixes from ``baseline`` to ``target``: knobs active in the target whose value differs, in space order.

    A knob the baseline does not use holds its default there; the target using
    it at that default is not a fix of its own (it comes with the knob that
    turns it on).
    """
    active, active_baseline = space.active(target), space.active(baseline)
    fixes = []
    for name in space.parameters:
        if not active[name] or show(baseline[name]) == show(target[name]):
            continue
        # A knob the baseline does not use starts from nothing (None), whatever default it holds.
        fix = Fix(name, baseline[name] if active_baseline[name] else None, target[name])
        fix.alone, fix.alone_with, fix.alone_blocked = shift(space, baseline, target, [name])
        fix.removed, fix.removed_with, fix.removed_blocked = shift(space, target, baseline, [name])
        fixes.append(fix)
    return fixes


def path(space: "SearchSpace", baseline: Config, target: Config, fixes: list[Fix], gains: Mapping[str, float]) -> list[Step]:
    """The fixes applied one after another, largest solo gain first, ending at the target."""
    order = sorted(fixes, key=lambda f: -gains.get(f.knob, -math.inf))
    steps: list[Step] = []
    current = baseline
    for fix in order:
        if show(current[fix.knob]) == show(target[fix.knob]) and space.active(current)[fix.knob]:
            continue  # moved along by an earlier step
        config, _, _ = shift(space, current, target, [fix.knob])
        if config is None or config.key == current.key:
            continue  # it will come with a later step
        steps.append(Step((fix.knob,), config))
        current = config
    if current.key != target.key:
        rest = tuple(n for n in space.parameters if show(current[n]) != show(target[n]))
        steps.append(Step(rest, target))
    return steps


# -- figures ----------------------------------------------------------------------------

def _pooled(results: list["TrialResult"]) -> Measurement | None:
    """A config's run times pooled over its rounds, kept round by round (its quiet ones where other work hit
    some: see :func:`measure`); None if any round failed."""
    if not results or any(r.status != "ok" or not r.times or not r.items_per_run for r in results):
        return None
    return Measurement.pooled([r.measurement() for r in quiet_rounds(results)])  # type: ignore[misc]


def speedup(base: list["TrialResult"], other: list["TrialResult"], seed: int = 0) -> dict[str, float] | None:
    """``other``'s throughput over ``base``'s, with a percentile-bootstrap interval (see :data:`METHOD`)."""
    a, b = _pooled(base), _pooled(other)
    if a is None or b is None:
        return None
    value, low, high = ratio_interval(a, b, seed)
    return {"value": value, "low": low, "high": high}


def verdict(interval: dict[str, float] | None, claim: Mapping[str, Any] | None) -> str:
    """``confirmed``/``below claim``/``above claim`` against a claimed gain, else ``faster``/``slower``; ``no effect``
    where the interval holds 1 or lies within :data:`NEGLIGIBLE` of it."""
    if interval is None:
        return "incorrect"
    low, high = interval["low"], interval["high"]
    if low <= 1.0 <= high or 1 / (1 + NEGLIGIBLE) <= low <= high <= 1 + NEGLIGIBLE:
        return "no effect"
    if high < 1.0:
        return "slower"
    gain = (claim or {}).get("gain")
    if not gain:
        return "faster"
    if high < gain[0]:
        return "below claim"
    if low > gain[1]:
        return "above claim"
    return "confirmed"


# -- one run ------------------------------------------------------------------------------

@dataclass
class Measured:
    """Every distinct config of an explanation, with its results over the rounds."""

    configs: dict[str, Config] = field(default_factory=dict)
    results: dict[str, list["TrialResult"]] = field(default_factory=dict)
    stopped: bool = False  # a stop ended its rounds: its figures come from the whole ones

    def add(self, config: Config | None) -> None:
        if config is not None:
            self.configs.setdefault(config.key, config)
            self.results.setdefault(config.key, [])

    def of(self, config: Config | None) -> list["TrialResult"]:
        return self.results.get(config.key, []) if config is not None else []


def measure(configs: Measured, run: Callable[[Config], "TrialResult"], rounds: int,
            on_progress: Callable[[int, int, str], None] = lambda done, total, what: None,
            unused: Callable[[Config], tuple[str, ...]] = lambda config: ()) -> int:
    """Measure every config ``rounds`` times, interleaved: each round starts one config later (``unused``:
    the knobs a config leaves inactive, named as such in the progress). Each round that other work hit
    (:class:`~autotune.environment.OtherWork`) is made up by one more, ``rounds`` more at most, as the
    search's re-measurement does; the figures pool each config's quiet rounds (:func:`_times`). A stop once a
    round is whole ends it there (as in :func:`~autotune.selection.remeasure`). Returns the measurements made."""
    keys = list(configs.configs)
    total, done, round_index = rounds * len(keys), 0, 0
    try:
        while (label := next_round(round_index, rounds, loaded_rounds(configs.results.values()))) is not None:
            if round_index >= rounds:
                total += len(keys)
            shift_by = round_index % len(keys)
            for key in keys[shift_by:] + keys[:shift_by]:
                config = configs.configs[key]
                on_progress(done, total, f"round {label}: {config.describe(unused(config))}")
                configs.results[key].append(run(config))
                done += 1
            round_index += 1
    except KeyboardInterrupt:
        if round_index == 0:
            raise
        keep_whole_rounds(configs.results.values(), round_index)
        configs.stopped = True
    return done


def _failure(results: list["TrialResult"]) -> str | None:
    bad = next((r for r in results if r.status != "ok"), None)
    return None if bad is None else f"{bad.status}: {bad.error or 'no error message'}"


def explain(space: "SearchSpace", baseline: Config, target: Config, run: Callable[[Config], "TrialResult"],
            rounds: int = 3, on_progress: Callable[[int, int, str], None] = lambda done, total, what: None,
            seed: int = 0) -> dict[str, Any]:
    """Measure the fixes from ``baseline`` to ``target`` with ``run`` and return the explanation (a JSON object).

    The path is planned from the solo gains, so it is measured after them, in
    rounds of its own beside the baseline.
    """
    if target.key == baseline.key:
        raise InvalidConfigError("the target config is the baseline: there is no fix to explain")
    fixes = plan(space, baseline, target)
    first = Measured()
    for config in (baseline, target, *(f.alone for f in fixes), *(f.removed for f in fixes)):
        first.add(config)
    # The path is planned from the solo gains; until they are known, its length is a guess for the progress.
    extra = [s for s in path(space, baseline, target, fixes, {}) if s.config.key not in first.configs]
    total = rounds * (len(first.configs) + (len(extra) + 1 if extra else 0))
    planned = rounds * len(first.configs)  # rounds made up for other work add to both
    made = measure(first, run, rounds, lambda done, own, what: on_progress(done, total + own - planned, what),
                   space.unused)
    base = first.of(baseline)
    alone = {f.knob: speedup(base, first.of(f.alone), seed) for f in fixes if f.alone is not None}
    steps = path(space, baseline, target, fixes, {k: v["value"] for k, v in alone.items() if v is not None})
    second = Measured()
    second.add(baseline)  # the path's own rounds have the baseline beside them
    for step in steps:
        if step.config.key not in first.configs:
            second.add(step.config)
    if len(second.configs) > 1 and not first.stopped:
        before = made
        try:
            made += measure(second, run, rounds, lambda done, own, what: on_progress(before + done, before + own, what),
                            space.unused)
        except KeyboardInterrupt:  # in the path's first round: its steps measured only here go without figures
            second.results, second.stopped = {key: [] for key in second.results}, True
    on_progress(made, made, "")

    def over_baseline(config: Config) -> dict[str, float] | None:
        if config.key in first.configs:
            return speedup(base, first.of(config), seed)
        return speedup(second.of(baseline), second.of(config), seed)

    target_results = first.of(target)
    rows = []
    for fix in fixes:
        claim = space.parameters[fix.knob].claim(fix.end)
        claim_json = claim.to_json() if claim else None
        # What the fix buys inside the target: the target's throughput over the target without it.
        in_target = speedup(first.of(fix.removed), target_results, seed) if fix.removed is not None else None
        source = fix.verdict_from(space, baseline)
        basis = alone.get(fix.knob) if source == "alone" else in_target
        failure = _failure(first.of(fix.alone if source == "alone" else fix.removed))
        if fix.alone is None and fix.removed is None:
            ruling = "not allowed"
        elif failure is not None:
            ruling = "incorrect" if failure.startswith("incorrect") else "failed"
        else:
            ruling = verdict(basis, claim_json)
        rows.append({
            "knob": fix.knob, "from": fix.start, "to": fix.end, "claim": claim_json,
            "alone": alone.get(fix.knob), "alone_with": list(fix.alone_with), "alone_not_allowed": fix.alone_blocked,
            "removed": speedup(base, first.of(fix.removed), seed) if fix.removed is not None else None,
            "removed_with": list(fix.removed_with), "removed_not_allowed": fix.removed_blocked,
            "in_winner": in_target, "verdict": ruling, "verdict_from": source, "error": failure,
            "alone_one_off_seconds": most_one_off(first.of(fix.alone)) if fix.alone is not None else None,
        })
    return {
        "schema_version": SCHEMA_VERSION,
        "workload": space.workload, "device": space.device.name if space.device else None,
        "baseline": _figures(baseline, base), "fixes": rows,
        "target": {**_figures(target, target_results), "speedup": speedup(base, target_results, seed),
                   "error": _failure(target_results)},
        "path": [{"knob": "+".join(step.knobs), "config": step.config.to_dict(), "speedup": over_baseline(step.config)}
                 for step in steps],
        # The rounds of the configs that passed every one (made-up ones included; a stop's cut round excluded).
        "rounds": max((len(r) for r in first.results.values() if not _failure(r)), default=1), "method": METHOD,
        "stopped": first.stopped or second.stopped,  # by Ctrl-C: the whole rounds, the path perhaps not measured
        "configs_measured": len(first.configs) + sum(map(bool, second.results.values())) - bool(second.of(baseline)),
        "beside_other_work": _beside_other_work(first, second), "beyond_threads": _beyond_threads(first, second),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def _beside_other_work(*measured: Measured) -> dict[str, Any] | None:
    """The rounds whose runs other processes slowed (:class:`~autotune.environment.OtherWork`), whether every
    config has a quiet round its figures come from, or None."""
    hit = [r.busy_elsewhere for m in measured for results in m.results.values() for r in results
           if r.beside_other_work]
    if not hit:
        return None
    rounds_of = [results for m in measured for results in m.results.values()]
    return {"rounds": loaded_rounds(rounds_of), "runs": len(hit), "cores": max(hit),
            "made_up": quiet_everywhere(rounds_of)}


def _beyond_threads(*measured: Measured) -> dict[str, Any] | None:
    """The most cores a config's timed runs kept busy beyond its threads (a thread or process of its own), or None."""
    hit = [(r.cores_used, r.threads) for m in measured for results in m.results.values() for r in results
           if beyond_threads(r.cores_used, r.threads)]
    return {"cores": max(hit)[0], "threads": max(hit)[1], "runs": len(hit)} if hit else None


def _figures(config: Config, results: list["TrialResult"]) -> dict[str, Any]:
    pooled = _pooled(results)
    return {"config": config.to_dict(), "throughput": pooled.throughput if pooled else None,
            "unit": results[0].unit if results else None, "runs": pooled.runs if pooled else 0,
            "one_off_seconds": most_one_off(results)}  # as search's winner


# -- where it is kept ------------------------------------------------------------------------

def explain_path(root: Path, workload: str, device: str, size: str) -> Path:
    """``<studies>/<workload>/explain/<device>-<size>.json``: beside the export, never mistaken for one."""
    return root / workload / "explain" / f"{device}-{size}.json"


def read_explanation(path: Path) -> dict[str, Any] | None:
    """The explanation in ``path``, or None when there is none (or one this version cannot read)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("schema_version") == SCHEMA_VERSION else None


def target_config(tuner: Any, path: Path | None) -> Config:
    """What to explain: ``--config FILE``, else the export of the tuner's workload, device and size."""
    from autotune.tuned import load_config

    if path is not None:
        return target_from_file(tuner.space, path)
    # The workload as the user named it: a path/to/file.py:Class is no name load_config can find by its class name.
    tuned = load_config(tuner.workload_spec, tuner.device.name, tuner.size, strict=True, studies=tuner.studies)
    if (target := tuner.space.allowed(tuned.export.config, "the exported config")).key == tuner.space.baseline.key:
        raise InvalidConfigError(f"the exported winner ({tuned.source}) is the baseline: its search found nothing "
                                 "faster, so there is no fix to explain; give --config FILE to explain another config")
    return target


def target_from_file(space: "SearchSpace", path: Path, base: Config | None = None) -> Config:
    """``--config FILE``: an exported document (its ``config``), or knob values moved from ``base``'s (the
    baseline's: what explain measures the fixes against)."""
    # "--config messages=numba" (knobs as --set takes them) read "No such file or directory" alone.
    knob = next(iter(space.tunable), None)
    example = f'{{"{knob.name}": {json.dumps(knob.choices[0] if knob.choices else knob.low)}}}' if knob else "{}"
    typed = "=" in path.name and not path.exists()
    data = read_json(path, f"--config {path}", f"--config takes a JSON file: an export, or knob values such as "
                     f"{example}; `autotune run --set` takes knob=value" if typed else "")
    # An explanation (explain's file) gives its target ("unknown parameter 'schema_version'" before).
    held = data.get("target") if isinstance(data, dict) and "fixes" in data else data
    if isinstance(held, dict) and isinstance(held.get("config"), dict):
        if data.get("workload") not in (None, space.workload):  # else the first knob of the other one is "unknown"
            raise InvalidConfigError(f"--config {path} is {'an explanation' if held is not data else 'an export'} "
                                     f"of workload {data['workload']!r}, not {space.workload!r}")
        return space.allowed(held["config"], f"--config {path}")
    if not isinstance(data, dict):
        raise InvalidConfigError(f"--config {path}: must hold a JSON object of knob values, or an exported config")
    # A guide's fixes; filled from the defaults, {"dtype": "float64"} explained four fixes the user never named.
    config = space.allowed({**(base or space.baseline).to_dict(), **data}, f"--config {path}")
    return as_asked(space, data, config, f"--config {path}: ")


def explain_workload(tuner: Any, target: Config, rounds: int,
                     on_progress: Callable[[int, int, str], None] = lambda done, total, what: None) -> tuple[dict[str, Any], Path]:
    """Explain ``target`` of ``tuner``'s workload against its baseline; store the explanation beside the export."""
    from autotune.runner import unless_lost
    from autotune.selection import REMEASURE_MIN_RUNS

    if target.key == tuner.space.baseline.key:  # before the reference is computed: nothing to do
        raise InvalidConfigError("the target config is the baseline: there is no fix to explain")
    path = explain_path(tuner.studies, tuner.workload.name, tuner.device.name, tuner.size)
    writable_file(path, "the explanation")  # refused now, not once every config is measured
    tuner.ensure_reference()  # computed once and cached: every config is checked against it
    settled: dict[str, float] = {}  # a config's median run in its first good round

    def run(config: Config) -> "TrialResult":
        # A later round whose first run agrees with that median needs no warm-up (Measurer.warm_seconds).
        result = tuner.runner.run(tuner.request(config, min_runs=REMEASURE_MIN_RUNS, warm_seconds=settled.get(config.key)))
        if result.status == "ok" and result.median_seconds:
            settled.setdefault(config.key, result.median_seconds)
        return unless_lost(result)  # a full disk failed it, not its config: it would have ruled the fix "failed"

    doc = explain(tuner.space, tuner.space.baseline, target, run, rounds, on_progress)
    doc.update(workload=tuner.workload.name, device=tuner.device.name, size=tuner.size, study=tuner.study_name)
    try:
        return doc, write_json(doc, path)
    except OSError as exc:  # the studies folder was checked writable before; a full disk, say
        raise AutotuneError(f"cannot store the explanation in {path}: {exc.strerror or exc}; fix that or choose "
                            "another --studies, and run `autotune explain` again") from None
