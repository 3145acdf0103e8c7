"""The report's table of every trial: a row a trial, as its progress line said it, each repeat of a config folded
into the row of the trial that measured it."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from autotune.config import Config
from autotune.console import borrowed_cores, error_against, plural, rate, seconds
from autotune.environment import beside_other_work
from autotune.progress import over_budget
from autotune.selection import one_off
from autotune.trials import ended, measured_here, never_measured, other_setups
from autotune.twins import loose_passes

if TYPE_CHECKING:
    import optuna

    from autotune.space import SearchSpace

__all__ = ["described", "inactive_knobs", "render_table", "table_rows"]

#: The trial numbers of a config's repeats its row names; the rest are counted.
SHOWN_REPEATS = 6


def inactive_knobs(config: dict[str, Any], space: "SearchSpace | None") -> list[str]:
    """The knobs of ``config`` (those recorded) its others leave inactive under the workload's space now."""
    unused = space.unused({**space.defaults, **config}) if space is not None else ()
    return [name for name in unused if name in config]


def described(config: dict[str, Any], space: "SearchSpace | None") -> str:
    """``config`` as `search` and `best` print it: the knobs inactive under its others named, without a value."""
    return Config(config).describe(inactive_knobs(config, space))


def table_rows(study: "optuna.Study", space: "SearchSpace | None" = None,
               failed: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """A row a trial; ``failed``: the candidates that failed their re-measurement (its export's), each with how."""
    rows, trials = [], sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    # A trial measured with another workload file, torch or numba than the latest (trials.measured_here) is marked.
    latest = next((t.user_attrs["measured_with"] for t in reversed(trials) if "measured_with" in t.user_attrs), None)
    loose = loose_passes(trials, space.reference) if space is not None else {}  # as the search said: it cannot win
    budget = study.user_attrs.get("memory_budget_bytes")  # the latest search's, said as its progress line said it
    over = {t.number: over_budget(budget) for t in trials if budget
            and t.user_attrs.get("status") == "ok" and (t.user_attrs.get("peak_memory_bytes") or 0) > budget}
    for t in trials:
        if not t.state.is_finished():
            continue
        check, config = t.user_attrs.get("check") or {}, t.user_attrs.get("config", t.params)
        why = never_measured(t)  # asked for, never measured: not a failure of its config
        status = ("restricted" if "restricted" in t.user_attrs else "skipped") if why else t.state.name.lower()
        rows.append({
            "number": t.number, "status": ended(t, status), "role": t.user_attrs.get("role", ""),  # lost: re-run
            "repeat_of": t.user_attrs.get("duplicate_of"),
            "setup": None if latest is None or measured_here(t, latest) else other_setups([t.user_attrs.get(
                "measured_with")], latest),
            "config": config, "described": described(config, space),  # as its progress line said it
            "throughput": t.user_attrs.get("throughput"), "peak_memory_bytes": t.user_attrs.get("peak_memory_bytes"),
            "spread": ((t.user_attrs.get("iqr_seconds") or 0) / t.user_attrs["median_seconds"]
                       if t.user_attrs.get("median_seconds") else None),
            "check_error": check.get("error"), "check_tolerance": check.get("tolerance"),
            "error": t.user_attrs.get("error", f"{why}: never measured" if why
                                      else loose.get(t.number) or over.get(t.number) or (f"{failed[t.number]}: it "
                                      "cannot win" if t.number in (failed or {}) else None)),
            "busy_elsewhere": t.user_attrs.get("busy_elsewhere"), "one_off": one_off(t.user_attrs),  # build, first run
            "borrowed": borrowed_cores(t.user_attrs.get("cores_used"), t.user_attrs.get("threads")),  # as the search's
        })
    return rows


def render_table(rows: list[dict[str, Any]], unit: str) -> str:
    def cell(value: Any) -> str:
        return f"<td>{html.escape(str(value)) if value is not None else ''}</td>"

    out = ["<table class='trials'><thead><tr><th>#</th><th>status</th><th>config</th>"
           "<th>throughput</th><th>peak memory</th><th>spread</th><th>build and first run</th>"
           "<th>check error / tolerance</th><th>error</th></tr></thead><tbody>"]
    # A repeat holds its measured trial's figures again: said in that trial's row, it is no row of its own (79 of
    # the 102 rows of a search of mine, 20 configs measured, were two configs asked for again).
    shown, again = {row["number"] for row in rows}, {}
    for row in rows:
        if row["repeat_of"] is not None:
            again.setdefault(row["repeat_of"], []).append(row["number"])
    for row in rows:
        if row["repeat_of"] in shown:
            continue
        config = row["described"] + (f" (repeat of #{row['repeat_of']})" if row["repeat_of"] is not None else "")
        if asked := again.get(row["number"]):
            named = ", ".join(f"#{n}" for n in asked[:SHOWN_REPEATS])
            more = f" and {len(asked) - SHOWN_REPEATS} more" if len(asked) > SHOWN_REPEATS else ""
            config += f" (asked again {plural(len(asked), 'time')}: {named}{more})"
        config += f" (measured with {row['setup']})" if row.get("setup") else ""  # its file edited since, say
        if row["role"] in ("baseline", "defaults", "probe"):
            config = f"[{row['role']}] {config}"
        throughput = rate(row["throughput"], unit) if row["throughput"] else None
        if throughput and beside_other_work(row["busy_elsewhere"]):  # as the search's progress line says
            throughput += f" (timed beside other work: {row['busy_elsewhere']:.1f} cores busy)"
        if throughput and row.get("borrowed"):  # more cores than its threads: a thread or process of its own
            throughput += f" (its timed runs kept {row['borrowed']})"
        memory = f"{row['peak_memory_bytes'] / 2**20:.1f} MiB" if row["peak_memory_bytes"] else None
        spread = f"±{100 * row['spread']:.1f}%" if row["spread"] is not None else None
        one_off_text = seconds(row["one_off"]) if row.get("one_off") is not None else None  # a compile's, say
        check = (" / ".join(error_against(row["check_error"], row["check_tolerance"]))  # as the terminal says it
                 if row["check_error"] is not None else ("inf" if row["check_tolerance"] else None))
        out.append(f"<tr class='status-{html.escape(row['status'])}'>" + cell(row["number"]) + cell(row["status"])
                   + cell(config) + cell(throughput) + cell(memory) + cell(spread) + cell(one_off_text) + cell(check)
                   + cell(row["error"]) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)
