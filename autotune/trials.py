"""The trial record: what one trial of a study holds, written and read in this module alone.

A trial's figures live in Optuna user attributes (every storage keeps them,
and optuna-dashboard shows them). :func:`to_attrs` writes them and
:func:`result_of` reads them back; the questions every reader asks of a
study's trials (is it a repeat, does it count toward the budget, is it
feasible, how did the study's trials end) are answered here once, so the
search, the workers and the report cannot disagree.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from autotune.config import Config
from autotune.parameters import knob_of
from autotune.runner import STATUSES, TrialResult

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

    from autotune.space import SearchSpace

__all__ = [
    "TrialRecord", "best_throughput", "counted", "ended", "feasible", "in_flight", "is_repeat", "latest_by_config",
    "measured_configs",
    "measured_here", "never_measured", "outcomes",
    "other_setups", "result_of", "retried", "so_far", "status_counts", "to_attrs", "under_a_tighter_limit",
]

#: Long tracebacks are cut to their end (the raising frame) before they are stored.
TRACEBACK_CHARS = 4000


@dataclass
class TrialRecord:
    """One finished trial, as the progress callback and the result see it."""

    number: int
    config: Config
    result: TrialResult
    role: str = "search"  # "baseline", "defaults", "probe": enqueued first (SearchSpace.firsts); "random" after a repeat
    duplicate_of: int | None = None
    study_best: float = 0.0  # the best that may win among the study's other trials as this one ended (workers')
    fits_memory: bool = True  # within --memory-budget (see loop.tell); one over it can never win
    unused: tuple[str, ...] = ()  # knobs with no effect under the others (SearchSpace.unused): progress names them
    loose: str | None = None  # passed only under a looser tolerance than its failed twin's (twins.loose_pass): why


def to_attrs(result: TrialResult, config: Config, role: str, duplicate_of: int | None,
             measured_with: Mapping[str, str] | None = None, memory_limit: int | None = None) -> dict[str, Any]:
    """The user attributes of a finished trial: every figure of its result (None values left out), what it was
    ``measured_with`` (``registry.measured_with``), and the --memory-limit it ran out of memory under."""
    attrs = result.to_dict()
    attrs.pop("environment", None)  # one per study, not per trial (see Tuner.finish)
    attrs.pop("relative_spread", None)  # derived from iqr and median
    if attrs.get("traceback"):
        attrs["traceback"] = attrs["traceback"][-TRACEBACK_CHARS:]
    attrs.update(role=role, config=config.to_dict(), config_key=config.key, measured_with=measured_with,
                 memory_limit_bytes=memory_limit if result.status == "oom" else None)
    if duplicate_of is not None:
        attrs["duplicate_of"] = duplicate_of
    return {key: value for key, value in attrs.items() if value is not None and value != []}


def result_of(trial: "FrozenTrial", config: Config | None = None) -> TrialResult:
    """The :class:`TrialResult` a trial recorded (a repeat reuses it under its own ``config``)."""
    data = {k: v for k, v in trial.user_attrs.items() if k in TrialResult.__dataclass_fields__}
    asked = {knob_of(name): value for name, value in trial.params.items()}
    data["config"] = config.to_dict() if config is not None else trial.user_attrs.get("config", asked)
    data.setdefault("status", "error")
    return TrialResult.from_dict(data)


def is_repeat(trial: "FrozenTrial") -> bool:
    """A trial whose config the study had measured already: it reuses those figures and is no new outcome."""
    return "duplicate_of" in trial.user_attrs


def never_measured(trial: "FrozenTrial") -> str | None:
    """Why a trial's config was never measured (no outcome, no trial of the budget), else None: it broke a
    constraint of the space, or another worker's trial was measuring it (a config is measured once)."""
    if "restricted" in trial.user_attrs:
        return f"breaks {trial.user_attrs['restricted']}"
    if "in_flight" in trial.user_attrs:
        return f"being measured by trial #{trial.user_attrs['in_flight']}"
    return None


def in_flight(space: "SearchSpace", trials: Iterable["FrozenTrial"], mine: int | None = None) -> dict[str, int]:
    """Config key -> the running trial measuring it (another worker's, or another process's), once its config is
    suggested; ``mine``, the trial asking, is left out. The loop does not measure such a config again, and the
    linear model does not pick it."""
    return {space.complete({knob_of(k, space.parameters): v for k, v in t.params.items()}).key: t.number for t in trials
            if t.state.name == "RUNNING" and t.number != mine and t.params}


def retried(trials: Iterable["FrozenTrial"]) -> set[int]:
    """Numbers of trials failed with their dead worker and queued again (Optuna's retry history)."""
    return {n for t in trials for n in t.system_attrs.get("retry_history", ())}


def outcomes(trials: list["FrozenTrial"]) -> list["FrozenTrial"]:
    """Finished trials that are outcomes of a config: not repeats, not trials whose retry replaced them."""
    again = retried(trials)
    return [t for t in trials
            if t.state.is_finished() and not is_repeat(t) and not never_measured(t) and t.number not in again]


def counted(trials: list["FrozenTrial"]) -> list["FrozenTrial"]:
    """Outcomes that count toward the trial budget: recorded, and not lost to a stop or a dead worker.

    A dead worker's trial is failed and re-queued; its retry counts, the
    trial itself does not, even where the worker died after recording its
    figures but before finishing it.
    """
    return [t for t in outcomes(trials) if "status" in t.user_attrs and not t.user_attrs.get("lost")]


def ended(trial: "FrozenTrial", unknown: str = "unknown") -> str:
    """How a trial ended: its status, or "lost" where a stop or a full disk cut it short (re-run on resume), which
    is no outcome of its config."""
    return "lost" if trial.user_attrs.get("lost") else trial.user_attrs.get("status", unknown)


def status_counts(trials: list["FrozenTrial"]) -> dict[str, int]:
    """How the study's outcomes ended; an interrupted trial is "lost" (re-run on resume), not its config's error."""
    tally = Counter(ended(t) for t in outcomes(trials))
    return {status: tally[status] for status in (*STATUSES, "lost") if tally.get(status)}


def feasible(trial: "FrozenTrial", memory_budget_bytes: int | None) -> bool:
    """Measured, correct and within ``memory_budget_bytes`` (None: no budget): a config that may win.

    The budget is the one the search runs under now, judged by the peak the
    trial recorded, not by its ``fits_memory`` constraint: that was computed
    under the budget of the run that measured it, and a study resumed with
    another budget (or none) would keep judging by the old one.
    """
    # Finished as COMPLETE, as every measured trial is told: a worker killed while it recorded its figures leaves
    # a failed trial with only some of them ("status" without "config_key"), and its retry measures it again.
    if trial.user_attrs.get("status") != "ok" or is_repeat(trial) or trial.state.name != "COMPLETE":
        return False
    return memory_budget_bytes is None or (trial.user_attrs.get("peak_memory_bytes") or 0) <= memory_budget_bytes


def best_throughput(trials: Iterable["FrozenTrial"], memory_budget_bytes: int | None) -> float:
    """The best throughput of a :func:`feasible` trial so far (0 before any): the best that may win.

    The progress line shows it, and a config is cut short against it: a
    config 3x slower than one over the budget may still be the best that fits.
    """
    return max((t.user_attrs.get("throughput") or 0.0 for t in trials
                if feasible(t, memory_budget_bytes) and "loose" not in t.user_attrs), default=0.0)  # twins.loose_pass


#: What a trial's ``measured_with`` holds since 2026-11-28: one recorded before says nothing of them, and is taken
#: as measured with this search's.
LATER = ("reference", "threads")


def measured_here(trial: "FrozenTrial", measured_with: Mapping[str, str] | None) -> bool:
    """Whether a trial was measured with the workload code, torch, numba, reference config and CPU threads of
    ``measured_with`` (None: any). A trial that does not say (a study of an older autotune) is taken as measured with
    them, and so is one that does not name its reference config or threads (recorded before they were: ``LATER``)."""
    if measured_with is None:
        return True
    recorded = trial.user_attrs.get("measured_with", measured_with)
    if isinstance(recorded, dict):
        measured_with = {key: value for key, value in measured_with.items() if key in recorded or key not in LATER}
    return recorded == measured_with


def measured_configs(trials: Iterable["FrozenTrial"], measured_with: Mapping[str, str] | None = None,
                     timeout: float | None = None, memory_limit: int | None = None) -> dict[str, int]:
    """Config key -> the trial that measured it (with ``measured_with``, and not :func:`under_a_tighter_limit` than
    ``timeout`` and ``memory_limit``): a config asked for again is a repeat of that trial."""
    return {t.user_attrs["config_key"]: t.number for t in trials  # a lost trial's config is measured again
            if t.state.is_finished() and "config_key" in t.user_attrs and not is_repeat(t)
            and not t.user_attrs.get("lost") and measured_here(t, measured_with)
            and not under_a_tighter_limit(t, timeout, memory_limit)}


def under_a_tighter_limit(trial: "FrozenTrial", timeout: float | None, memory_limit: int | None) -> bool:
    """Whether a trial was killed at a trial timeout shorter than ``timeout`` (its wall time under it), or ran out of
    memory under a --memory-limit lower than ``memory_limit`` (None: no limit now). Raised, as such a search's
    messages advise, every config stayed a repeat of its failure: "all 2 allowed configs of the space are measured:
    no new trials", the baseline not re-measured, nothing exported."""
    status, limit = trial.user_attrs.get("status"), trial.user_attrs.get("memory_limit_bytes")
    if status == "timeout":
        return timeout is not None and (trial.user_attrs.get("wall_seconds") or 0.0) < timeout
    return status == "oom" and limit is not None and (memory_limit is None or limit < memory_limit)


def latest_by_config(trials: Iterable["FrozenTrial"]) -> dict[Any, "FrozenTrial"]:
    """Config key -> its latest trial among ``trials``: a config measured again (its workload file edited, torch
    upgraded: :func:`measured_here`) stands by its latest outcome. A lost trial stands only where its config has no
    other (a stop's, which never measured it)."""
    latest: dict[Any, "FrozenTrial"] = {}
    for t in sorted(trials, key=lambda t: t.number):
        if not t.user_attrs.get("lost") or t.user_attrs.get("config_key") not in latest:
            latest[t.user_attrs.get("config_key")] = t
    return latest


def so_far(trials: list["FrozenTrial"], measured_with: Mapping[str, str]) -> str:
    """How many trials the study counts ("4 trials so far"), and how many of them were measured with other workload
    code, torch or numba, and which ("..., 2 of them with another fixw.py, torch 2.11.0: ...")."""
    done = counted(trials)  # as the budget counts: no repeats, no restricted asks
    text = f"{len(done)} trial{'' if len(done) == 1 else 's'} so far"
    others = [t.user_attrs["measured_with"] for t in done if not measured_here(t, measured_with)]
    if not others:
        return text
    return f"{text}, {len(others)} of them with {other_setups(others, measured_with)}: their configs are measured " \
           "again when asked"


def other_setups(others: list[Any], measured_with: Mapping[str, str]) -> str:
    """What sets trials' ``others`` (their ``measured_with``) apart from ``measured_with``: "another fixw.py, torch
    2.11.0" (the study's message when resumed, and the report's trials table)."""
    others = [other if isinstance(other, dict) else {} for other in others]  # another autotune's form: unknown
    said = []
    for key in ("workload", "torch", "numba", *LATER):
        old = sorted({other.get(key, "") for other in others if other.get(key) != measured_with.get(key)
                      and (key not in LATER or key in other)})  # not recorded before: taken as the same
        if not old:
            continue
        if key == "reference":
            said += [f"the reference config {config}" for config in old]
        elif key == "threads":
            said += [f"{n} thread{'' if n == '1' else 's'}" for n in old]
        elif key == "workload":
            file = measured_with[key].split()[0]  # "fixw.py", or "autotune" for a built-in or a plug-in
            said.append(f"another {file}" if file.endswith(".py")
                        else " or ".join(v or "unknown workload code" for v in old))  # "autotune 0.0.9"
        else:
            said += [f"{key} {version}" if version else f"no {key}" for version in old]
    return ", ".join(said)
