"""How an explanation (:mod:`autotune.explain`) reads: the claims table and path as text, and in the report.

``get_explain_info`` computes a report section's data from the stored
explanation (unit-tested apart from the drawing); ``draw_waterfall`` and
``claims_html`` turn it into a plotly waterfall and an HTML table, as the
rest of the report does.
"""

from __future__ import annotations

import html
from typing import Any, Callable, Mapping

from autotune.config import show
from autotune.console import ONE_OFF_SAID, one_off_words, plural, rate, seconds
from autotune.explain import NEGLIGIBLE, verdict

__all__ = ["beaten_by", "claims_html", "draw_waterfall", "explain_section", "explain_text", "get_explain_info",
           "interval_text"]


def interval_text(interval: Mapping[str, float] | None) -> str:
    if interval is None:
        return "-"
    low, high = interval["low"], interval["high"]
    # Three decimals where two would print 1.00 at an end of an interval that leaves 1 out: a verdict of
    # "faster" beside "1.00x [1.00, 1.00]" reads as a contradiction (lsd's SDPA alone on an H200: 1.001-1.004).
    digits = 3 if (low > 1 and round(low, 2) <= 1) or (high < 1 and round(high, 2) >= 1) else 2
    return f"{interval['value']:.{digits}f}x [{low:.{digits}f}, {high:.{digits}f}]"


def beaten_by(doc: Mapping[str, Any]) -> str | None:
    """A warning where a config this run measured beat the target, their intervals apart: the target is then not
    the fastest config it knows of. Measured so (latentwire at tiny, this CPU): the search's winner at 2.47x [2.45,
    2.50], the baseline with its batch size alone at 4.24x [4.18, 4.30], and no word of it."""
    target = (doc.get("target") or {}).get("speedup")
    if not target or target.get("high") is None:
        return None
    measured = [(f"the baseline with {fix['knob']} {show(fix['from'])} -> {show(fix['to'])} alone", fix.get("alone"))
                for fix in doc.get("fixes", [])]
    measured += [(f"the target without {fix['knob']} ({show(fix['to'])} -> {show(fix['from'])})", fix.get("removed"))
                 for fix in doc.get("fixes", [])]
    measured += [(f"the path's step + {step['knob']}", step.get("speedup")) for step in doc.get("path", [])]
    # Apart, and by more than two explain runs of one config differ (NEGLIGIBLE: a few percent do not repeat).
    above = [(what, figure) for what, figure in measured if figure and figure.get("low") is not None
             and figure["low"] > target["high"] and figure["value"] > target["value"] * (1 + NEGLIGIBLE)]
    if not above:
        return None
    what, figure = max(above, key=lambda pair: pair[1]["value"])
    return (f"warning: {what} ran at {interval_text(figure)} over the baseline, above the target's "
            f"{interval_text(target)}: the target is not the fastest config this run measured (its search chose it "
            "from noisier runs, or never tried the other); search again with more trials, or at a larger size")


def _claimed(claim: Mapping[str, Any] | None) -> str:
    if not claim:
        return "-"
    gain = claim.get("gain")
    if not gain:
        return "no figure"
    return f"{gain[0]:g}x" if gain[0] == gain[1] else f"{gain[0]:g}-{gain[1]:g}x"


def _move(fix: Mapping[str, Any]) -> str:
    start = "(unused)" if fix["from"] is None else show(fix["from"])
    return f"{fix['knob']} {start} -> {show(fix['to'])}"


def _note(fix: Mapping[str, Any], base: Mapping[str, Any] | None = None) -> str:
    notes = []
    if fix.get("alone_with") and fix.get("verdict_from") == "in_winner" and fix.get("alone") is not None:
        # Its alone figure holds the gain of the knobs it brought: the verdict reads the other column.
        notes.append(f"alone with {', '.join(fix['alone_with'])}, so the verdict is from in the winner")
    elif fix.get("alone_with"):
        notes.append(f"alone with {', '.join(fix['alone_with'])}")
    if fix.get("alone_not_allowed"):
        notes.append(f"alone: {fix['alone_not_allowed']}")
    directions = (verdict(fix.get("alone"), None), verdict(fix.get("in_winner"), None))
    if fix.get("verdict_from", "alone") == "alone" and set(directions) == {"faster", "slower"}:
        # mlp's bfloat16 on this CPU: 0.78x alone, 2.17x in the winner (large batches), and its verdict "slower"
        # stood beside a winner that holds it, without a word.
        notes.append(f"{directions[0]} alone, {directions[1]} in the winner: "
                     + ("it pays beside the winner's other fixes" if directions[1] == "faster" else
                        "beside the winner's other fixes it costs"))
    if fix.get("removed_with"):
        notes.append(f"removed with {', '.join(fix['removed_with'])}")
    if fix.get("removed_not_allowed"):
        notes.append(f"removed: {fix['removed_not_allowed']}")
    if fix.get("error"):
        notes.append(fix["error"])
    once, before = fix.get("alone_one_off_seconds"), (base or {}).get("one_off_seconds")
    if once is not None and before is not None and once - before > ONE_OFF_SAID:  # a compile's cost, once a job
        notes.append(f"alone, its build and first run take {seconds(once)} once a job (the baseline's "
                     f"{seconds(before)})")
    return "; ".join(notes)


def claims_rows(doc: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per fix: the move, the claim, alone, in the winner, the verdict, and notes."""
    return [
        {"fix": _move(fix), "claim": (fix.get("claim") or {}).get("text", ""), "claimed": _claimed(fix.get("claim")),
         "alone": interval_text(fix.get("alone")), "in_winner": interval_text(fix.get("in_winner")),
         "verdict": fix["verdict"], "note": _note(fix, doc.get("baseline"))}
        for fix in doc.get("fixes", [])
    ]


def explain_text(doc: Mapping[str, Any], size: str | None = None) -> str:
    """The claims table and the path, as ``autotune explain`` prints them."""
    base, target = doc["baseline"], doc["target"]
    unit = base.get("unit")
    lines = [
        f"{doc.get('workload')} ({size or doc.get('size')}) on {doc.get('device')}: baseline "
        f"{rate(base.get('throughput'), unit)}, target {rate(target.get('throughput'), unit)}, "
        f"{interval_text(target.get('speedup'))} over the baseline",
        f"({plural(doc['rounds'], 'interleaved round')}, {plural(doc['configs_measured'], 'config')}; {doc['method']})",
    ]
    if target.get("error"):
        lines.append(f"The target failed: {target['error']}")
    lines += [beaten] if (beaten := beaten_by(doc)) else []
    said = one_off_words(target, base)  # what a job pays once before the speedup starts to count
    lines += [f"one-off: the target's build and first run take {seconds(said[0])} {said[1]}"] if said else []
    if doc.get("stopped"):
        lines.append(f"note: {_stopped(doc)}; a path step without a figure was not measured")
    busy = doc.get("beside_other_work")
    if busy:
        hit = (f"other processes kept up to {busy['cores']:.1f} cores busy while {plural(busy['runs'], 'config')} "
               f"ran in round {', '.join(map(str, busy['rounds']))}")
        lines.append(f"note: {hit}; each config's figures come from its quiet rounds" if busy.get("made_up") else
                     f"warning: {hit}, and some config had no quiet round: its figures may be off; run alone to "
                     "trust them")
    beyond = doc.get("beyond_threads")
    if beyond:
        lines.append(f"warning: a config's timed runs kept up to {beyond['cores']:.1f} cores busy, more than its "
                     f"{plural(beyond['threads'], 'thread')}: a thread or process of its own ran on cores --threads "
                     "left idle, and what it buys may not hold within them")
    rows = claims_rows(doc)
    headers = {"fix": "fix", "claimed": "claimed", "alone": "alone", "in_winner": "in the winner", "verdict": "verdict"}
    widths = {k: max([len(h)] + [len(r[k]) for r in rows]) for k, h in headers.items()}
    lines += ["", "  ".join(h.ljust(widths[k]) for k, h in headers.items()).rstrip()]
    for row in rows:
        lines.append("  ".join(row[k].ljust(widths[k]) for k in headers).rstrip())
    notes = [(row["fix"], row["claim"], row["note"]) for row in rows if row["claim"] or row["note"]]
    if notes:
        lines += ["", "Claims and notes:"]
        lines += [f"  {fix}: " + "; ".join(part for part in (claim, note) if part) for fix, claim, note in notes]
    lines += ["", "Path from the baseline (each step over the baseline):", f"  {'baseline':<40} 1.00x"]
    lines += [f"  {'+ ' + step['knob']:<40} {interval_text(step.get('speedup'))}" for step in doc.get("path", [])]
    lines += ["", "Every speedup is over the baseline measured in the same run; \"alone\" is the baseline with that "
              "fix, \"in the winner\" the winner over the winner without it. The verdict reads \"alone\" unless "
              "its note says otherwise."]
    return "\n".join(lines)


# -- the report's section -----------------------------------------------------------------

def get_explain_info(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The waterfall's steps (label, speedup after it, its change) and the claims rows."""
    steps = [{"label": "baseline", "speedup": 1.0, "change": 1.0, "low": 1.0, "high": 1.0}]
    last, unmeasured = 1.0, []  # a step without a figure (failed, or not reached before a stop): the next bar holds it
    for step in doc.get("path", []):
        figure = step.get("speedup")
        if figure is None:
            steps.append({"label": f"+ {step['knob']}", "speedup": None, "change": None, "low": None, "high": None})
            unmeasured.append(step["knob"])
            continue
        steps.append({"label": "+ " + " + ".join([*unmeasured, step["knob"]]), "speedup": figure["value"],
                      "low": figure["low"], "high": figure["high"], "change": figure["value"] - last})
        last, unmeasured = figure["value"], []
    return {"steps": steps, "rows": claims_rows(doc), "measured_at": doc.get("measured_at"),
            "target": doc.get("target", {}).get("speedup"),
            "stopped": f" {_stopped(doc, 'Stopped')}." if doc.get("stopped") else ""}


def _stopped(doc: Mapping[str, Any], word: str = "stopped") -> str:
    """What a stopped explanation holds, in the text and in the report alike."""
    return f"{word} (Ctrl-C) after {plural(doc['rounds'], 'whole round')}: the figures come from those"


def draw_waterfall(info: Mapping[str, Any]) -> Any:
    """A plotly waterfall from the baseline (1x) to the winner: each bar one fix's change in speedup."""
    from autotune._plotly_imports import go

    steps = [s for s in info["steps"] if s["speedup"] is not None]
    figure = go.Figure(go.Waterfall(
        x=[s["label"] for s in steps],
        y=[s["speedup"] if i == 0 else s["change"] for i, s in enumerate(steps)],
        measure=["absolute"] + ["relative"] * (len(steps) - 1),
        text=[f"{s['speedup']:.2f}x" for s in steps], textposition="outside",
        hovertext=[f"{interval_text({'value': s['speedup'], 'low': s['low'], 'high': s['high']})} over the baseline"
                   for s in steps],
    ))
    figure.update_layout(yaxis_title="speedup over the baseline", showlegend=False,
                         title="From the baseline to the winner, one fix at a time")
    return figure


def claims_html(info: Mapping[str, Any]) -> str:
    """The claims table of the report."""
    cells = ("fix", "claim", "claimed", "alone", "in_winner", "verdict", "note")
    head = ["fix", "the guide's claim", "claimed", "alone", "in the winner", "verdict", "note"]
    rows = "".join(
        f"<tr class='verdict-{html.escape(row['verdict'].replace(' ', '-'))}'>"
        + "".join(f"<td>{html.escape(row[c])}</td>" for c in cells) + "</tr>"
        for row in info["rows"])
    at = info.get("measured_at")  # always stored; a hand-edited file may lack it
    return (f"<table id='claims'><tr>{''.join(f'<th>{h}</th>' for h in head)}</tr>{rows}</table>"
            f"<p><small>Measured {html.escape(str(at)) + ' ' if at else ''}by autotune explain; every "
            f"speedup is over the baseline measured in the same run, with a 95% bootstrap interval. The verdict "
            f"reads \"alone\" unless its note says otherwise.{html.escape(info.get('stopped', ''))}</small></p>")


def explain_section(explanation: Mapping[str, Any] | None, exported: Mapping[str, Any] | None,
                    described: Callable[[Mapping[str, Any]], str]) -> tuple[str, Any, str | None, str | None]:
    """The report's section of the stored explanation: its title, waterfall, note and claims table (HTML), or a
    note alone where there is none. ``exported``: the export's config (None: no export); ``described``: a config
    as `best` prints it. A file the report cannot read (a hand edit, another version's) is said, not a traceback:
    an explanation whose fixes were not a list stopped `autotune report` with a TypeError."""
    if explanation is None:
        return "What each fix bought", None, ("No explanation of this study yet: `autotune explain` measures each "
                                              "fix alone and inside the winner, beside the guide's claim."), None
    try:
        if not explanation.get("schema_version"):  # a file there that read_explanation could not read
            raise ValueError("not JSON of an explanation this version reads")
        explained, target = get_explain_info(explanation), (explanation.get("target") or {}).get("config")
        figure, table = draw_waterfall(explained), claims_html(explained)
        other = (f"This explains {described(target or {})}; this study has no export of its own to compare with."
                 if exported is None else None if target == exported else
                 f"This explains {described(target or {})}, not the exported winner: run `autotune explain` for it.")
        if beaten := beaten_by(explanation):  # the report says what the text says
            said = beaten[0].upper() + beaten[1:] + "."
            other = f"{other} {said}" if other else said
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        return "What each fix bought", None, (f"The stored explanation could not be read ({type(exc).__name__}: "
                                              f"{exc}): run `autotune explain` again to measure it anew."), None
    return "What each fix bought (autotune explain)", figure, other, table
