"""``autotune report``: one self-contained HTML file that shows why a config won.

Every figure is a ``_get_*_info`` function that computes its data from the study (unit-tested without rendering)
and a ``_draw_*`` function that turns it into a plotly figure. Optuna's own plot is used where it already does the
job (parallel coordinates); what Optuna lacks (failed and incorrect trials on the history, the winner against the
baseline, what each of the winner's values is worth: :mod:`autotune.knob_worth`) is drawn here. plotly.js is
inlined once, so the file opens with no network.
"""

from __future__ import annotations

import html
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from autotune._plotly_imports import go, plotly_js
from autotune.config import no_effect, show
from autotune.console import interval_said, rate, speedup_text
from autotune.explain_view import explain_section
from autotune.runner import STATUSES
from autotune.selection import failed_when_remeasured
from autotune.exceptions import AutotuneError
from autotune.explain import explain_path, read_explanation
from autotune.export import write_atomically
from autotune.knob_worth import worth_section
from autotune.stored import open_stored_study
from autotune.trial_table import described, inactive_knobs, render_table, table_rows
from autotune.trials import ended, feasible, outcomes, status_counts

if TYPE_CHECKING:
    import optuna

    from autotune.space import SearchSpace

__all__ = ["ReportInfo", "build_report", "write_report"]

# Colours per status, shared by every figure and the table.
STATUS_COLOURS = {"ok": "#1f77b4", "incorrect": "#d62728", "oom": "#9467bd", "timeout": "#8c564b", "crash": "#e377c2",
                  "error": "#7f7f7f", "lost": "#c7c7c7"}


def _trials(study: "optuna.Study") -> list["optuna.trial.FrozenTrial"]:
    """The study's outcomes: repeats of a config, and trials a retry replaced, are left out (as `search` counts)."""
    return outcomes(study.get_trials(deepcopy=False))


# -- header ---------------------------------------------------------------------------


def _get_header_info(study: "optuna.Study", document: dict[str, Any] | None) -> dict[str, Any]:
    trials = _trials(study)
    counts = {**dict.fromkeys(STATUSES, 0), **status_counts(trials)}  # lost apart, as search says
    starts = [t.datetime_start for t in trials if t.datetime_start]
    ends = [t.datetime_complete for t in trials if t.datetime_complete]
    tuning = sum(t.user_attrs.get("wall_seconds") or 0.0 for t in trials)
    attrs = study.user_attrs
    return {
        "title": f"{attrs.get('workload', study.study_name)} on {attrs.get('device', '?')}",
        "study": study.study_name, "workload": attrs.get("workload"), "device": attrs.get("device"),
        "device_name": (document or {}).get("device_name") or attrs.get("device_name"),
        "size": attrs.get("size"), "unit": attrs.get("unit", "items"),
        "trials": len(trials), "counts": counts, "tuning_seconds": tuning,
        "span": (min(starts).isoformat(" ", "seconds"), max(ends).isoformat(" ", "seconds")) if starts and ends else None,
        "environment": (document or {}).get("environment") or attrs.get("environment") or {},
    }


# -- winner against baseline ------------------------------------------------------------


def _get_winner_info(document: dict[str, Any] | None) -> dict[str, Any] | None:
    """Throughput and memory of the winner and the baseline, as re-measured side by side."""
    if not document or not document.get("measured") or not document.get("baseline"):
        return None
    rows = []
    for label, figures in (("tuned", document["measured"]), ("baseline", document["baseline"])):
        throughput = figures.get("throughput")
        spread = figures.get("relative_spread") or 0.0
        rows.append({"label": label, "throughput": throughput, "peak_memory_bytes": figures.get("peak_memory_bytes"),
                     # The spread of the times, carried to throughput: items / (median +- IQR/2).
                     "throughput_error": throughput * spread / 2 if throughput else 0.0})
    check = document.get("check") or {}
    return {
        "rows": rows, "unit": document["measured"].get("unit", "items"),
        "speedup": document.get("speedup"), "interval": interval_said(document),  # as the search's table says it
        "check_error": check.get("error"), "check_tolerance": check.get("tolerance"),
        "check_metric": check.get("metric"), "passed": check.get("passed"),
        "config": document.get("config", {}), "trial": document.get("trial"),
    }


def _draw_winner(info: dict[str, Any]) -> "go.Figure":
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=(f"throughput ({info['unit']}/s)", "peak memory (MiB)"))
    labels = [row["label"] for row in info["rows"]]
    colours = ["#2ca02c", "#7f7f7f"]
    fig.add_trace(go.Bar(x=labels, y=[r["throughput"] for r in info["rows"]], marker_color=colours,
                         error_y={"type": "data", "array": [r["throughput_error"] for r in info["rows"]]},
                         name="throughput"), row=1, col=1)
    fig.add_trace(go.Bar(x=labels, y=[(r["peak_memory_bytes"] or 0) / 2**20 for r in info["rows"]],
                         marker_color=colours, name="peak memory"), row=1, col=2)
    figures = [r["throughput"] for r in info["rows"] if r["throughput"]]
    if len(figures) == 2 and max(figures) > 10 * min(figures):  # at 270x the baseline's bar was a line at 0
        low, high = math.log10(min(figures)) - 1, math.log10(max(figures)) + 0.2  # a decade under the baseline
        fig.update_yaxes(type="log", range=[low, high], title_text="log scale", row=1, col=1)
    fig.update_layout(title=f"Tuned against baseline, re-measured side by side: speedup {speedup_text(info['speedup'])}"
                      + (f" ({info['interval']})" if info.get("interval") else ""),
                      showlegend=False, height=380)
    return fig


# -- optimisation history -------------------------------------------------------------------


def _get_history_info(study: "optuna.Study", space: "SearchSpace | None" = None, unit: str = "items") -> dict[str, Any]:
    """Throughput per trial, the best correct throughput so far, and every trial that failed."""
    points: dict[str, dict[str, list]] = {status: {"number": [], "throughput": [], "text": []} for status in STATUSES}
    best_number, best_value, best = [], [], None
    budget = study.user_attrs.get("memory_budget_bytes")  # the latest search's: what may win is judged by it
    for t in sorted(_trials(study), key=lambda t: t.number):
        status = ended(t, "error")  # a lost one apart from the errors, as the table and the header say
        throughput = t.user_attrs.get("throughput")
        bucket = points.setdefault(status, {"number": [], "throughput": [], "text": []})
        bucket["number"].append(t.number)
        # Failed trials measured nothing: they sit on the axis, marked by their status.
        bucket["throughput"].append(throughput if throughput is not None else 0.0)
        bucket["text"].append(_hover(t, space, unit))
        if feasible(t, budget) and throughput is not None and (best is None or throughput > best):
            best = throughput
        if best is not None:
            best_number.append(t.number)
            best_value.append(best)
    return {"points": {k: v for k, v in points.items() if v["number"]},
            "best_number": best_number, "best_value": best_value}


def _hover(t: "optuna.trial.FrozenTrial", space: "SearchSpace | None" = None, unit: str = "items") -> str:
    """A trial's hover text: its figure as `search` wrote it (a format of whole numbers read 0.4 steps/s as 0)."""
    config, figure = t.user_attrs.get("config", t.params), t.user_attrs.get("throughput")
    inactive = inactive_knobs(config, space)
    lines = [f"trial #{t.number}: {ended(t)}", *(f"{k}={show(v)}" for k, v in config.items() if k not in inactive)]
    lines += [no_effect(inactive)] if inactive else []
    lines += [rate(figure, unit)] if figure is not None else []
    lines += [html.escape(str(t.user_attrs["error"]))[:200]] if t.user_attrs.get("error") else []
    return "<br>".join(lines)


def _draw_history(info: dict[str, Any], unit: str) -> "go.Figure":
    fig = go.Figure()
    symbols = {"ok": "circle", "incorrect": "x", "oom": "triangle-up", "timeout": "hourglass",
               "crash": "star", "error": "diamond", "lost": "circle-open"}
    for status, data in info["points"].items():
        fig.add_trace(go.Scatter(
            x=data["number"], y=data["throughput"], mode="markers", name=status, text=data["text"],
            hovertemplate="%{text}<extra></extra>",
            marker={"color": STATUS_COLOURS.get(status, "#000"), "symbol": symbols.get(status, "circle"), "size": 8},
        ))
    if info["best_number"]:
        fig.add_trace(go.Scatter(x=info["best_number"], y=info["best_value"], mode="lines", name="best correct so far",
                                 line={"color": "#2ca02c", "shape": "hv"}))
    fig.update_layout(title="Optimisation history (failed trials on the axis, by status)",
                      xaxis_title="trial", yaxis_title=f"throughput ({unit}/s)", height=420)
    return fig


# -- figures Optuna already draws ---------------------------------------------------------------


def _draw_memory(trials: list["optuna.trial.FrozenTrial"], unit: str, memory_budget_bytes: int | None,
                 space: "SearchSpace | None" = None) -> "go.Figure":
    """Throughput against peak memory of every completed trial, the correct ones' Pareto front drawn; from the
    trial record, not the study's objectives: a study may have one objective (throughput) or two (and memory)."""
    # In MiB, as every other figure and table says it: an axis of bytes read "320M" for the table's 302.0 MiB.
    points = [(t.user_attrs.get("throughput") or 0.0, (t.user_attrs.get("peak_memory_bytes") or 0) / 2**20,
               feasible(t, memory_budget_bytes), t) for t in trials]
    fig = go.Figure()
    labels = ("correct, within the memory budget", "wrong, or over the memory budget") if memory_budget_bytes else (
        "correct", "infeasible")
    for label, ok, colour in ((labels[0], True, "#1f77b4"), (labels[1], False, "#cccccc")):
        mine = [p for p in points if p[2] is ok]
        if mine:
            fig.add_trace(go.Scatter(x=[p[1] for p in mine], y=[p[0] for p in mine], mode="markers", name=label,
                                     marker={"color": colour}, hoverinfo="text",
                                     text=[_hover(p[3], space, unit) for p in mine]))
    front, best = [], -1.0
    for throughput, memory, ok, _ in sorted((p for p in points if p[2]), key=lambda p: (p[1], -p[0])):
        if throughput > best:  # nothing needing less memory is as fast
            front.append((memory, throughput))
            best = throughput
    if front:
        fig.add_trace(go.Scatter(x=[m for m, _ in front], y=[v for _, v in front], mode="lines",
                                 name="Pareto front", line={"color": "#2ca02c", "shape": "hv"}))
    fig.update_layout(xaxis_title="peak memory (MiB)", yaxis_title=f"throughput ({unit}/s)", height=420)
    return fig


def _optuna_figure(draw: Callable[[], "go.Figure"], needs: int, have: int, what: str) -> tuple["go.Figure | None", str | None]:
    """An Optuna plot, or a clear message when the study cannot support it; what Optuna warns of while drawing
    it is a note under it, not a warning in the terminal."""
    if have < needs:
        return None, f"{what} needs at least {needs} completed trials; this study has {have}."
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            figure = draw()
        notes = dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, UserWarning))
        return figure, " ".join(notes) or None
    except (ValueError, RuntimeError, ZeroDivisionError) as exc:
        return None, f"{what} could not be computed: {exc}"


# -- the page -------------------------------------------------------------------------------------


@dataclass
class ReportInfo:
    """What a report holds: its sections, each a figure or a message saying why there is none."""

    header: dict[str, Any]
    sections: list[tuple[str, str, "go.Figure | None", str | None]] = field(default_factory=list)  # (id, title, figure, message)
    table: list[dict[str, Any]] = field(default_factory=list)
    extra_html: dict[str, str] = field(default_factory=dict)  # section id -> HTML drawn under its figure (tables)


def _in_memory(study: "optuna.Study") -> "optuna.Study":
    """A copy of ``study`` in memory: every plot reads all trials, and SQL would be asked each time."""
    import optuna
    copy = optuna.create_study(directions=study.directions, study_name=study.study_name)
    for key, value in study.user_attrs.items():
        copy.set_user_attr(key, value)
    copy.add_trials(study.get_trials(deepcopy=False))
    return copy


def build_report(study: "optuna.Study", document: dict[str, Any] | None = None,
                 explanation: dict[str, Any] | None = None, space: "SearchSpace | None" = None,
                 export_problem: str | None = None) -> ReportInfo:
    """Compute every section of the report of ``study`` (``document``: its exported config; ``explanation``:
    the latest ``autotune explain`` of it; ``space``: the workload's, to name the knobs a config leaves inactive;
    ``export_problem``: why an export there could not be read; each may be None)."""
    import optuna.visualization as ov
    study = _in_memory(study)
    header = _get_header_info(study, document)
    unit = header["unit"]
    info = ReportInfo(header, table=table_rows(study, space, failed := failed_when_remeasured(document)))
    complete = [t for t in _trials(study) if t.state.name == "COMPLETE"]
    correct = [t for t in complete if feasible(t, None)]

    winner = _get_winner_info(document)
    if winner is None:
        info.sections.append(("winner", "Tuned against baseline", None, export_problem or "No exported config for "
                              "this study yet: the search ended without a config that passed its check, or it has not "
                              "finished."))
    else:
        from autotune.console import baseline_failure, check_line  # each reads as it does in the terminal

        # The figure shows how much faster; the note says what won (the knobs that act, as `best` says) and its check,
        # and why there is no speedup where the baseline failed ("oom when re-measured").
        failure = baseline_failure(document.get("baseline") or {}, document.get("remeasure"))
        info.sections.append(("winner", "Tuned against baseline", _draw_winner(winner), f"Trial #{winner['trial']} won, "
                              "exported as: " + described(winner["config"], space)
                              + f"; check {check_line(document.get('check'))}"
                              + (f"; the baseline: {failure}, so no speedup" if failure else "")))
    # Of the exported winner, or said to be of another config (--config, or an earlier search's winner).
    title, figure, note, table = explain_section(explanation, document.get("config") if document else None,
                                                 lambda config: described(dict(config), space))
    info.sections.append(("explain", title, figure, note))
    if table is not None:
        info.extra_html["explain"] = table

    history = _get_history_info(study, space, unit)
    empty = None if history["points"] else "The study has no finished trials."
    info.sections.append(("history", "Optimisation history", None if empty else _draw_history(history, unit), empty))

    figure, message = _optuna_figure(lambda: _draw_memory(complete, unit, study.user_attrs.get("memory_budget_bytes"), space), 1, len(complete), "The Pareto front")
    info.sections.append(("pareto", "Throughput against peak memory (Pareto front; infeasible trials apart)", figure, message))

    info.sections.append(("worth", "What the winner's value of each knob is worth", *worth_section(
        _trials(study), (document or {}).get("config"), space, study.user_attrs.get("memory_budget_bytes"), unit,
        failed)))

    figure, message = _optuna_figure(
        lambda: ov.plot_parallel_coordinate(study, target=lambda t: t.values[0], target_name="throughput"), 2, len(complete),
        "The parallel-coordinates plot")
    info.sections.append(("parallel", "Knobs against throughput", figure, message))
    if not correct and complete:
        info.sections.append(("feasible", "Correct configurations", None,
                              "No completed trial passed its correctness check: every figure above shows failures only."))
    return info


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 2em; }
table { border-collapse: collapse; font-size: 0.85em; }
td, th { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }
table.header td:first-child { font-weight: bold; }
tr.status-incorrect td { background: #fde8e8; } tr.status-ok td { background: #fff; }
tr.status-oom td, tr.status-timeout td, tr.status-crash td, tr.status-error td { background: #eee; }
tr.status-restricted td, tr.status-skipped td, tr.status-lost td { background: #eee; } p.empty, p.note { color: #555; font-style: italic; border-left: 4px solid #ccc; padding-left: 0.8em; }
"""


def render_html(info: ReportInfo) -> str:
    h = info.header
    counts = ", ".join(f"{status} {n}" for status, n in h["counts"].items())
    env = ", ".join(f"{k}={v}" for k, v in h["environment"].items())
    header_rows = [
        ("workload", h["workload"]), ("device", f"{h['device']} ({h['device_name'] or 'name not recorded'})"),
        ("size", h["size"]), ("study", h["study"]), ("trials", f"{h['trials']} ({counts})"),
        ("tuning time", f"{h['tuning_seconds']:,.{1 if h['tuning_seconds'] < 9.95 else 0}f} s in trials"  # 0.4 s, not 0 s
         + (f", from {h['span'][0]} to {h['span'][1]}" if h["span"] else "")),
        ("environment", env or "not recorded")]
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>autotune report: {html.escape(h['title'])}</title>",
        f"<script type='text/javascript'>{plotly_js()}</script>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>autotune report: {html.escape(h['title'])}</h1>",
        "<table class='header'>" + "".join(
            f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>" for k, v in header_rows) + "</table>",
    ]
    for section_id, title, figure, message in info.sections:
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if figure is not None:
            parts.append(figure.to_html(full_html=False, include_plotlyjs=False, div_id=f"plot-{section_id}",
                                        config={"displaylogo": False}))
            if message:
                parts.append(f"<p class='note' id='note-{section_id}'>{html.escape(message)}</p>")
        else:
            parts.append(f"<p class='empty' id='empty-{section_id}'>{html.escape(message or '')}</p>")
        parts.append(info.extra_html.get(section_id, ""))
    parts.append("<h2>Every trial</h2>")
    parts.append(render_table(info.table, h["unit"]) if info.table else "<p class='empty'>No finished trials.</p>")
    parts.append(f"<p><small>Written by autotune on {time.strftime('%Y-%m-%d %H:%M:%S')}.</small></p></body></html>")
    return "".join(parts)


def write_report(study: "optuna.Study", path: Path, document: dict[str, Any] | None = None,
                 explanation: dict[str, Any] | None = None, space: "SearchSpace | None" = None,
                 export_problem: str | None = None) -> Path:
    """Write the report of ``study`` to ``path`` (atomically) and return the path."""
    try:
        return write_atomically(render_html(build_report(study, document, explanation, space, export_problem)), path)
    except OSError as exc:  # one line, not a traceback; write_atomically leaves no half-written file
        raise AutotuneError(f"cannot write the report {path}: {exc.strerror or exc}; choose another --output") from None


def report(workload: str, device: str = "auto", size: str | None = None, *, storage: str | None = None,
           study_name: str | None = None, studies: str | Path | None = None, output: str | Path | None = None) -> Path:
    """Write the report of a study; the device need not be on this machine.

    Example::

        from autotune.report import report
        report("chmm", "cpu")      # -> studies/chmm/cpu-small-report.html
    """
    found = open_stored_study(workload, device, size, storage=storage, study_name=study_name, studies=studies)
    out = Path(output) if output is not None else found.root / found.workload / f"{found.device}-{found.size}-report.html"
    where = explain_path(found.root, found.workload, found.device, found.size)
    explanation = read_explanation(where)
    if explanation is None and where.is_file():
        explanation = {}  # there, but not JSON this version reads: said under its section, as a shape it cannot read
    if explanation and explanation.get("study") not in (None, found.study.study_name):
        explanation = None  # an explanation of another study of the same workload, device and size
    return write_report(found.study, out, found.document, explanation, found.space, found.export_problem)
