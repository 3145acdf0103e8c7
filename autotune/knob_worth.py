"""What each knob's winning value is worth in a study: the best config with it against the best config without it.

The report drew Optuna's parameter importances (PED-ANOVA) here. On a chmm study at tiny (40 trials, this CPU) they
rated overlap_passes 0.70 and messages 0.13, where the study's best config without messages=numba was 20x slower
than the winner and its best without overlap_passes=false 1.5x slower. An importance compares the sampler's top
trials (4 of 40) with what the sampler chose to try, and its order changed with the top's share (at a quarter
messages read 0.67, overlap_passes 0.04). These are the search's own figures, in its unit: a knob's winning value
is worth what the best config the study measured without it lacks.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterable

from autotune._plotly_imports import go
from autotune.config import show
from autotune.console import format_bytes, rate
from autotune.trials import feasible, latest_by_config
from autotune.twins import loose_passes

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

    from autotune.space import SearchSpace

__all__ = ["draw_worth", "get_worth_info", "worth_section"]


def get_worth_info(trials: list["FrozenTrial"], winner: dict[str, Any], space: "SearchSpace",
                   memory_budget_bytes: int | None = None, failed: Iterable[int] = ()) -> dict[str, Any]:
    """For each knob the winner uses: the best correct throughput with its value and without it, where the knob acts.

    ``rows`` holds the knobs with both (``worth``: with over without, highest first); ``alone`` the knobs whose other
    values were never measured correct where they act; ``unused`` the knobs the winner leaves inactive. A config
    measured again stands by its latest trial, as the search's choice table reads it. A pass that only a looser
    tolerance than its failed twin's allowed (:mod:`autotune.twins`), and a trial whose config ``failed`` its
    re-measurement, are no rival: a bfloat16 config of tanh's GELU, wrong beyond float32's bound, drew the float32
    winner's ``dtype`` at 0.37x.
    """
    left_out = set(loose_passes(trials, space.reference)) | set(failed)
    correct = [t for t in latest_by_config(trials).values() if feasible(t, memory_budget_bytes)
               and t.user_attrs.get("throughput") and set(space.parameters) <= set(t.user_attrs.get("config", {}))
               and t.number not in left_out]
    acting = {t.number: space.active(t.user_attrs["config"]) for t in correct}
    winner = {**space.defaults, **winner}
    uses = space.active(winner)
    rows, alone = [], []
    for param in space.tunable:
        if not uses[param.name]:
            continue
        value = winner[param.name]
        mine = [t for t in correct if acting[t.number][param.name]]
        best = {same: max((t for t in mine if (t.user_attrs["config"][param.name] == value) is same),
                          key=lambda t: (t.user_attrs["throughput"], -t.number), default=None)
                for same in (True, False)}
        if best[True] is None or best[False] is None:
            alone.append(f"{param.name}={show(value)}")
            continue
        with_it, without = best[True].user_attrs["throughput"], best[False].user_attrs["throughput"]
        rows.append({"knob": param.name, "value": value, "with": with_it, "without": without,
                     "worth": with_it / without, "with_trial": best[True].number, "without_trial": best[False].number,
                     "other": best[False].user_attrs["config"][param.name]})
    rows.sort(key=lambda r: (-r["worth"], r["knob"]))
    unused = [p.name for p in space.tunable if not uses[p.name]]
    return {"rows": rows, "alone": alone, "unused": unused}


def draw_worth(info: dict[str, Any], unit: str) -> "go.Figure":
    rows = info["rows"][::-1]  # plotly draws the first bar at the bottom
    hover = [f"{r['knob']}={show(r['value'])}: best {rate(r['with'], unit)} (trial #{r['with_trial']})<br>"
             f"best without it: {rate(r['without'], unit)} ({r['knob']}={show(r['other'])}, "
             f"trial #{r['without_trial']})"
             for r in rows]
    fig = go.Figure(go.Bar(
        x=[r["worth"] for r in rows], y=[f"{r['knob']}={show(r['value'])}" for r in rows], orientation="h",
        text=[f"{r['worth']:.2f}x" for r in rows], textposition="outside", hovertext=hover, hoverinfo="text",
        marker_color=["#2ca02c" if r["worth"] > 1 else "#7f7f7f" for r in rows]))
    largest = max((r["worth"] for r in rows), default=1.0)
    fig.update_layout(
        title="The winner's value of each knob: its best throughput over the best without it (measured in the search)",
        xaxis={"type": "log", "title": "times faster than the best config without it",
               "range": [math.log10(min([0.9, *(r["worth"] for r in rows)])), math.log10(largest * 2)]},
        height=max(260, 60 + 40 * len(rows)), margin={"l": 220})
    return fig


def worth_section(trials: list["FrozenTrial"], winner: dict[str, Any] | None, space: "SearchSpace | None",
                  memory_budget_bytes: int | None, unit: str, failed: Iterable[int] = ()
                  ) -> tuple["go.Figure | None", str | None]:
    """The report's figure of the ``winner``'s values (its export's config; None: the study's fastest correct
    config) and a note under it, or no figure and why."""
    if not winner:
        best = max((t for t in trials if feasible(t, memory_budget_bytes) and t.user_attrs.get("throughput")),
                   key=lambda t: t.user_attrs["throughput"], default=None)
        winner = best.user_attrs.get("config") if best is not None else None
    if not winner:
        return None, "No config in this study passed its check: there is no winner to weigh."
    if space is None:
        return None, "The workload's space could not be loaded here: which knobs act under the winner is unknown."
    info = get_worth_info(trials, winner, space, memory_budget_bytes, failed)
    # Over the budget a config passed its check and cannot win: "measured correct" alone said no other ran correct.
    within = f" within the memory budget ({format_bytes(memory_budget_bytes)})" if memory_budget_bytes else ""
    notes = [f"Only the winner's value was measured correct{within} where the knob acts: {', '.join(info['alone'])}."
             if info["alone"] else "",
             f"Knobs the winner leaves inactive: {', '.join(info['unused'])}." if info["unused"] else ""]
    note = " ".join(filter(None, notes))
    if not info["rows"]:
        return None, f"No other value of a knob the winner uses was measured correct{within}. " + note
    # Read off configs that differ in other knobs too, as the search's choice table is: said, and where to look.
    return draw_worth(info, unit), " ".join(filter(None, [
        f"Each bar compares the best configs the search measured{within} with and without the value, which may "
        "differ in other knobs too; `autotune explain` measures each change alone and inside the winner.", note]))
