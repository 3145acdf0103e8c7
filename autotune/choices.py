"""What each choice did: each value of each categorical knob over a study, its best correct throughput and why
it is not the winner's (slower, incorrect, failed, over the memory budget, beaten or failed when re-measured,
ruled out by a constraint at this size).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from autotune.conditions import size_read
from autotune.config import Config
from autotune.trials import ended, feasible, latest_by_config, outcomes
from autotune.twins import loose_passes

if TYPE_CHECKING:
    import optuna

    from autotune.space import SearchSpace

__all__ = ["ChoiceOutcome", "choice_outcomes"]


@dataclass
class ChoiceOutcome:
    """What one value of one knob did over a study: its best correct throughput and its failures."""

    parameter: str
    value: Any
    measured: int  # configs (each by its latest trial; repeats not counted) that ran with this value
    best_throughput: float | None  # best among those that passed their check (that may win, where one may)
    statuses: dict[str, int]  # how those trials ended ("passed loosely": see choice_outcomes)
    in_winner: bool
    over_budget: bool = False  # it passed its check, but only over the memory budget
    lost_remeasure: bool = False  # its best trial beat the winner's in the search, then lost to it side by side
    failed_remeasure: bool = False  # each of its passes was a candidate that failed a round, or whose twin failed
    ruled_out: str | None = None  # the constraint no config with this value keeps here (batch 16 of a batch of 8)

    @property
    def verdict(self) -> str:
        # Each says why a value is not the winner's, even where its best in the search was faster.
        if self.in_winner:
            return "winner"
        if self.ruled_out:  # not "not tried": no search of this size and device may try it
            return "ruled out"
        if self.over_budget:
            return "over budget"
        if self.failed_remeasure:
            return "failed re-measure"
        if self.lost_remeasure:
            return "lost re-measure"
        if self.best_throughput is not None:
            return "slower"
        failed = {k: v for k, v in self.statuses.items() if k not in ("ok", "lost")}
        if failed and set(failed) <= {"incorrect", "passed loosely"}:
            return "incorrect" if "incorrect" in failed else "passed loosely"
        return "failed" if failed else "not tried"


def choice_outcomes(study: "optuna.Study", space: "SearchSpace", winner: Config | None,
                    memory_budget_bytes: int | None = None, lost: Mapping[int, bool] | None = None,
                    ) -> list[ChoiceOutcome]:
    """For each tunable categorical knob and each of its values: how its trials ended.

    This is how a search says which kernels lost and why: slower than the winner, incorrect, failed (error, crash,
    timeout, oom), over the memory budget, faster in the search than the winner but slower when re-measured beside
    it, or failed there (its best trial among the ``lost`` candidates, each mapped to whether it passed its rounds).
    A trial that passed only under a looser tolerance than its twin's, which failed (:mod:`autotune.twins`), is
    "passed loosely", no figure of its values: a block of mine with tanh's GELU, wrong in float64 and passed in
    bfloat16, read "gelu tanh slower 163,543 tokens/s" beside the winner's "none" at 56,472.
    """
    lost = lost or {}
    # Each config by its latest outcome, as the candidates are: a kernel that passed against a reference since found
    # wrong read "slower" at its old figure beside its new "incorrect" (registry.measured_with).
    measured = [t for t in outcomes(study.get_trials(deepcopy=False)) if "config" in t.user_attrs]
    trials = list(latest_by_config(measured).values())
    loose = loose_passes(trials, space.reference)
    found = []
    # A conditional knob counts only where it was active (an inactive one holds its default).
    active = {t.number: space.active(t.user_attrs["config"]) for t in trials if set(space.parameters) <= set(t.user_attrs["config"])}
    winner_active = space.active(winner) if winner is not None else {}
    beaten = max((t.user_attrs.get("throughput") or 0.0 for t in trials
                  if winner is not None and t.user_attrs.get("config_key") == winner.key), default=math.inf)
    for param in space.tunable:
        if param.type != "categorical":
            continue
        for value in param.choices:
            mine = [
                t for t in trials
                if active.get(t.number, {}).get(param.name) and t.user_attrs["config"].get(param.name) == value
            ]
            # A pass that failed its re-measurement (a round, or its twin) is no correct figure of its value's: the
            # row gave that pass's figure, under "best correct throughput".
            failed_again = {t.number for t in mine if lost.get(t.number) is False}
            correct = [t for t in mine if t.user_attrs.get("status") == "ok" and t.user_attrs.get("throughput")
                       and t.number not in loose and t.number not in failed_again]
            fits = [t for t in correct if feasible(t, memory_budget_bytes)]
            best = max(fits or correct, key=lambda t: (t.user_attrs["throughput"], -t.number), default=None)
            found.append(
                ChoiceOutcome(
                    param.name, value, len(mine), best.user_attrs["throughput"] if best else None,
                    dict(Counter("passed loosely" if t.number in loose else "failed re-measure"
                                 if t.number in failed_again else ended(t) for t in mine)),  # lost: none
                    bool(winner_active.get(param.name)) and winner.get(param.name) == value,  # type: ignore[union-attr]
                    over_budget=bool(correct) and not fits,
                    lost_remeasure=best is not None and best.number in lost and best.user_attrs["throughput"] > beaten,
                    failed_remeasure=best is None and bool(failed_again),
                    ruled_out=_ruled_out(space, param.name, value),
                )
            )
    return found


def _ruled_out(space: "SearchSpace", name: str, value: Any) -> str | None:
    """The constraint that every config with ``name=value`` breaks, where one reads that knob alone besides the
    size and the device (``global_batch % batch_size == 0`` at a batch of 8 rules out 16): such a value is never
    measured here. A constraint over several knobs (numba with bfloat16) rules out a combination, not a value."""
    known = (set(space.facts) - set(space.parameters)) | {name}  # a knob hides a capability of its name (compile)
    for constraint in space.constraints:
        if name in constraint.names and constraint.names <= known and not constraint.evaluate({**space.facts, name: value}):
            return constraint.text + size_read(constraint.names, space.size_parameters, space.facts)
    return None
