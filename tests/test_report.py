"""The report's data functions on studies with known trials, and the page they make."""

import html
import math
import re

import optuna
import pytest
from optuna.distributions import CategoricalDistribution

from autotune.config import Config
from autotune.report import (
    _get_header_info,
    _get_history_info,
    _get_winner_info,
    build_report,
    render_html,
    write_report,
)
from autotune.trial_table import render_table, table_rows

KERNEL = CategoricalDistribution(["loop", "numba", "scan"])
DTYPE = CategoricalDistribution(["float32", "float16"])


def add_trial(study, kernel, dtype, status, throughput=None, memory=None, error=None, busy=None, **more):
    trial = study.ask({"kernel": KERNEL, **({"dtype": DTYPE} if dtype else {})})  # no dtype: a knob inactive
    attrs = {"status": status, "config": {"kernel": kernel, "dtype": dtype}, "config_key": f"{kernel}-{dtype}",
             "throughput": throughput, "peak_memory_bytes": memory, "error": error, "wall_seconds": 2.0,
             "median_seconds": 1.0 / throughput if throughput else None, "iqr_seconds": 0.01 if throughput else None,
             "busy_elsewhere": busy, **more}
    if status == "incorrect":
        attrs["check"] = {"error": 0.5, "tolerance": 1e-5, "passed": False}
    elif status == "ok":
        attrs["check"] = {"error": 1e-7, "tolerance": 1e-5, "passed": True}
    for key, value in attrs.items():
        if value is not None:
            trial.set_user_attr(key, value)
    if status in ("ok", "incorrect"):
        trial.set_constraint("correct", 0.0 if status == "ok" else 1.0)
        study.tell(trial, [throughput, memory][: len(study.directions)])
    else:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)


def make_study(*trials, directions=("maximize", "minimize")):
    """A study of ``trials``; of two objectives (throughput, memory), as autotune made them before, by default."""
    study = optuna.create_study(directions=list(directions), study_name="chmm-cpu-tiny")
    for key, value in {"workload": "chmm", "device": "cpu", "size": "tiny", "unit": "timesteps"}.items():
        study.set_user_attr(key, value)
    for spec in trials:
        add_trial(study, *spec)
    return study


KNOWN = [
    ("loop", "float32", "ok", 10.0, 300),
    ("numba", "float32", "ok", 30.0, 400),
    ("scan", "float16", "incorrect", 40.0, 250, "output differs from the reference"),
    ("scan", "float32", "crash", None, None, "process died from SIGSEGV"),
    ("loop", "float16", "ok", 20.0, 280),
]

def known_space():
    """The workload space KNOWN's trials were sampled from."""
    from autotune.space import SearchSpace

    return SearchSpace.from_dict({"schema_version": 1, "parameters": {
        "kernel": {"choices": ["loop", "numba", "scan"]}, "dtype": {"choices": ["float32", "float16"]}},
        "defaults": {"kernel": "loop", "dtype": "float32"}, "baseline": {}})


DOCUMENT = {
    "schema_version": 1, "workload": "chmm", "device": "cpu", "device_name": "AMD EPYC", "size": "tiny",
    "config": {"kernel": "numba", "dtype": "float32"}, "trial": 1, "speedup": 3.0,
    "measured": {"throughput": 30.0, "unit": "timesteps", "relative_spread": 0.1, "peak_memory_bytes": 400 * 2**20},
    "baseline": {"throughput": 10.0, "unit": "timesteps", "relative_spread": 0.02, "peak_memory_bytes": 300 * 2**20},
    "check": {"error": 1e-7, "tolerance": 1e-5, "passed": True, "metric": "counts"},
    "environment": {"torch": "2.13.0", "cpu_threads": 2}, "study": {"name": "chmm-cpu-tiny"},
}


def test_history_marks_failures_and_best_ignores_incorrect():
    info = _get_history_info(make_study(*KNOWN))
    assert info["points"]["ok"]["number"] == [0, 1, 4]
    assert info["points"]["incorrect"]["throughput"] == [40.0]  # fast and wrong: shown, never best
    assert info["points"]["crash"] == {"number": [3], "throughput": [0.0], "text": info["points"]["crash"]["text"]}
    assert "SIGSEGV" in info["points"]["crash"]["text"][0]
    assert info["best_number"] == [0, 1, 2, 3, 4] and info["best_value"] == [10.0, 30.0, 30.0, 30.0, 30.0]


def test_history_and_pareto_judge_what_may_win_by_the_latest_searchs_memory_budget():
    from autotune.report import _draw_memory

    study = make_study(*KNOWN)
    study.set_user_attr("memory_budget_bytes", 350)  # numba (30/s) peaks at 400 bytes: it cannot win
    assert _get_history_info(study)["best_value"] == [10.0, 10.0, 10.0, 10.0, 20.0]
    figure = _draw_memory(study.trials, "timesteps", 350)
    names = {trace.name: list(trace.y) for trace in figure.data}
    assert names["correct, within the memory budget"] == [10.0, 20.0]
    assert sorted(names["wrong, or over the memory budget"]) == [0.0, 30.0, 40.0]
    assert names["Pareto front"] == [20.0]  # loop-float16 is faster and leaner than loop-float32
    assert list(figure.data[-1].x) == [280 / 2**20] and figure.layout.xaxis.title.text == "peak memory (MiB)"


def test_header_counts_statuses_and_tuning_time():
    info = _get_header_info(make_study(*KNOWN), DOCUMENT)
    assert info["counts"] == {"ok": 3, "incorrect": 1, "oom": 0, "timeout": 0, "crash": 1, "error": 0}
    assert info["tuning_seconds"] == 10.0 and info["device_name"] == "AMD EPYC"
    assert info["environment"]["torch"] == "2.13.0"


def test_header_counts_a_trial_a_stop_cut_short_as_lost_as_search_does():
    # The search said "ok 4, lost 1" and the report's header "error 1" for the same study.
    study = make_study(*KNOWN)
    trial = study.ask()
    for key, value in {"status": "error", "lost": True, "config": {"messages": "scan"},
                       "error": "interrupted before the trial finished"}.items():
        trial.set_user_attr(key, value)
    study.tell(trial, state=optuna.trial.TrialState.FAIL)
    info = _get_header_info(study, DOCUMENT)
    assert info["counts"] == {"ok": 3, "incorrect": 1, "oom": 0, "timeout": 0, "crash": 1, "error": 0, "lost": 1}
    row = table_rows(study)[-1]  # the trial table says so too
    assert row["status"] == "lost" and row["error"] == "interrupted before the trial finished"
    points = _get_history_info(study)["points"]  # and the history, which drew it among the errors
    assert points["lost"]["number"] == [trial.number] and "error" not in points
    assert points["lost"]["text"][0].startswith(f"trial #{trial.number}: lost<br>")


def test_the_tuning_time_of_a_short_search_is_not_rounded_to_nothing():
    # A 3 s search of quick trials read "0 s in trials".
    info = build_report(make_study(*KNOWN), DOCUMENT)
    for seconds, said in ((0.43, "0.4 s in trials"), (9.96, "10 s in trials"), (1234.4, "1,234 s in trials")):
        info.header["tuning_seconds"] = seconds
        assert f"<td>{said}" in render_html(info), seconds


def test_winner_against_baseline_with_spread():
    info = _get_winner_info(DOCUMENT)
    tuned, baseline = info["rows"]
    assert (tuned["label"], tuned["throughput"], baseline["throughput"]) == ("tuned", 30.0, 10.0)
    assert tuned["throughput_error"] == pytest.approx(1.5) and info["speedup"] == 3.0
    assert info["check_error"] == 1e-7 and info["check_tolerance"] == 1e-5
    assert _get_winner_info(None) is None
    # The speedup's interval, where the export holds one, in the figure's title as in the search's table.
    from autotune.report import _draw_winner

    assert info["interval"] is None and "interval" not in _draw_winner(info).layout.title.text
    info = _get_winner_info({**DOCUMENT, "remeasure": {"speedup_interval": [2.8, 3.3]}})
    assert _draw_winner(info).layout.title.text.endswith("speedup 3.00x (95% interval [2.8, 3.3])")
    # Over 10x apart, throughput on a log scale: at 270x the baseline's bar was a line at 0.
    assert _draw_winner(info).layout.yaxis.type is None
    far = {**DOCUMENT, "measured": {**DOCUMENT["measured"], "throughput": 2700.0}, "speedup": 270.0}
    assert _draw_winner(_get_winner_info(far)).layout.yaxis.type == "log"


def test_a_trial_measured_with_another_workload_file_or_torch_is_marked_in_the_trials_table():
    # A study resumed after its file was edited holds a config twice, its old outcome and its new
    # (trials.measured_here), and nothing in the table told them apart.

    now = {"workload": "fixw.py 222222222222", "torch": "2.13.0+cpu"}
    study = optuna.create_study(direction="maximize")
    for status, measured_with in (("error", {**now, "workload": "fixw.py 111111111111"}), ("ok", now),
                                  ("ok", {**now, "torch": "2.11.0"}), ("ok", now)):
        trial = study.ask()
        for key, value in {"status": status, "config": {"kernel": "fast"}, "measured_with": measured_with}.items():
            trial.set_user_attr(key, value)
        study.tell(trial, 1.0)
    rows = table_rows(study)
    assert [row["setup"] for row in rows] == ["another fixw.py", None, "torch 2.11.0", None]
    assert "kernel=fast (measured with another fixw.py)" in render_table(rows, "items")
    assert [row["setup"] for row in table_rows(make_study(*KNOWN))] == [None] * len(KNOWN)  # nothing recorded


def test_the_trials_table_gives_each_trial_s_build_and_first_run():
    # What a job pays once (ten's cold compile at `tiny`: 37 s against 1.08 s) was in no view of the report.

    study = optuna.create_study(direction="maximize")
    for attrs in ({"status": "ok", "config": {"k": 1}, "warmup_seconds": 35.0, "build_seconds": 2.0},
                  {"status": "ok", "config": {"k": 2}, "warmup_seconds": 0.5}, {"status": "error", "config": {"k": 3}}):
        trial = study.ask()
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        study.tell(trial, 1.0)
    rows = table_rows(study)
    assert [row["one_off"] for row in rows] == [37.0, 0.5, None]
    table = render_table(rows, "items")
    assert "<th>build and first run</th>" in table and "<td>37 s</td>" in table and "<td>0.5 s</td>" in table


def test_a_repeat_of_a_measured_config_is_said_in_that_trial_s_row_not_in_a_row_of_its_own():
    # A search of mine measured 20 configs in 102 trials: 79 rows of two configs asked for again, their figures the
    # measured trials', each "(repeat of #5)", between the 23 rows of configs measured or restricted.
    study = optuna.create_study(direction="maximize")
    for number, repeat_of in enumerate([None, None, 1, 0, 1, 1, 1, 1, 1, 1, 1, None]):
        trial = study.ask()
        config = {"k": 9} if repeat_of is None and number == 11 else {"k": 1 if (repeat_of or number) == 1 else 0}
        for key, value in {"status": "ok", "config": config, "throughput": 2.0, "median_seconds": 0.5,
                           **({"duplicate_of": repeat_of} if repeat_of is not None else {})}.items():
            trial.set_user_attr(key, value)
        study.tell(trial, 2.0)
    table = render_table(table_rows(study), "items")
    assert table.count("<tr class=") == 3  # trials #0, #1 and #11
    assert "<td>k=0 (asked again 1 time: #3)</td>" in table
    assert "<td>k=1 (asked again 8 times: #2, #4, #5, #6, #7, #8 and 2 more)</td>" in table
    assert "<td>k=9</td>" in table and "repeat of" not in table


def test_the_report_says_why_there_is_no_speedup_where_the_baseline_failed():
    # Its figure read "speedup -" with a bar of nothing, and no word why; the search had said "oom when re-measured".
    document = {**DOCUMENT, "baseline": {"config": {"dtype": "float32"}}, "speedup": None,
                "remeasure": {"rounds": 3, "candidates": [{"trial": 0, "role": "baseline", "statuses": ["oom"]}]}}
    message = {section_id: m for section_id, _, _, m in build_report(make_study(*KNOWN), document).sections}["winner"]
    assert message.endswith("; the baseline: oom when re-measured, so no speedup"), message


def test_the_report_says_which_config_won_not_only_by_how_much():
    # The winner's config and trial were read from the export but never shown: only the trials table, where the
    # winner is not marked, named any config.
    document = {**DOCUMENT, "check": {**DOCUMENT["check"], "metrics": {"counts": [1e-7, 1e-5], "loss": [2e-9, 1e-8]}}}
    info = build_report(make_study(*KNOWN), document)
    _, figure, message = {section_id: (title, f, m) for section_id, title, f, m in info.sections}["winner"]
    said = "Trial #1 won, exported as: dtype=float32 kernel=numba; check passed: counts 1e-07 &lt;= 1e-05, loss 2e-09 &lt;= 1e-08"
    assert figure is not None and message == html.unescape(said)  # the README says the section shows the check too
    assert f"<p class='note' id='note-winner'>{said}</p>" in render_html(info)
    # A knob the winner's others leave inactive is named, not shown with the value that does nothing; so in the
    # trials table.
    from autotune.space import SearchSpace

    space = SearchSpace.from_dict({"schema_version": 1, "parameters": {
        "kernel": {"choices": ["loop", "numba", "scan"]},
        "dtype": {"choices": ["float32", "float16"], "condition": "kernel != 'numba'"},
        "chunk": {"choices": [64, 128], "condition": "kernel == 'scan'"}},
        "defaults": {"kernel": "loop", "dtype": "float32", "chunk": 64}, "baseline": {}})
    document["config"] = {**document["config"], "chunk": 64}
    info = build_report(make_study(*KNOWN), document, None, space)
    message = {section_id: m for section_id, _, _, m in info.sections}["winner"]
    assert message.startswith("Trial #1 won, exported as: kernel=numba (no effect under these: chunk, dtype); check")
    # The trials recorded no chunk (made before the knob, say): only what a record holds is named.
    assert [row["described"] for row in info.table][:3] == [
        "dtype=float32 kernel=loop", "kernel=numba (no effect under these: dtype)", "dtype=float16 kernel=scan"]
    assert "<td>kernel=numba (no effect under these: dtype)</td>" in render_html(info)
    # And in the plots' hover texts, a knob a line.
    numba = _get_history_info(make_study(*KNOWN), space, "timesteps")["points"]["ok"]["text"][1]
    assert numba == "trial #1: ok<br>kernel=numba<br>(no effect under these: dtype)<br>30 timesteps/s", numba
    figure = {section_id: f for section_id, _, f, _ in info.sections}["pareto"]
    assert numba in [text for trace in figure.data if trace.text for text in trace.text]


def test_table_keeps_every_trial_with_its_error():
    rows = table_rows(make_study(*KNOWN))
    assert [r["status"] for r in rows] == ["ok", "ok", "incorrect", "crash", "ok"]
    assert rows[3]["error"] == "process died from SIGSEGV" and rows[2]["check_error"] == 0.5


def test_the_tables_check_reads_as_its_figures_compare():
    # The tolerance was written to one digit: a failed 1.7e-6 against 1.5e-6 read "1.7e-06 / 2e-06", within it.
    study = make_study(*KNOWN)
    trial = study.ask({"kernel": KERNEL, "dtype": DTYPE})
    for key, value in {"status": "incorrect", "config": {"kernel": "scan", "dtype": "float32"},
                       "check": {"error": 1.7e-6, "tolerance": 1.5e-6, "passed": False}}.items():
        trial.set_user_attr(key, value)
    trial.set_constraint("correct", 1.0)
    study.tell(trial, [20.0, 300])
    page = render_html(build_report(study, DOCUMENT))
    assert "<td>1.7e-06 / 1.5e-06</td>" in page and "2e-06" not in page
    assert "<td>0.5 / 1e-05</td>" in page  # KNOWN's incorrect trial
    # An unbounded error (a NaN in the output) is stored as null: "inf" where it had a tolerance, as the search says.
    trial = study.ask({"kernel": KERNEL, "dtype": DTYPE})
    for key, value in {"status": "incorrect", "config": {"kernel": "scan", "dtype": "float16"},
                       "check": {"error": None, "tolerance": 1.5e-6, "passed": False}}.items():
        trial.set_user_attr(key, value)
    study.tell(trial, [20.0, 300])
    page = render_html(build_report(study, DOCUMENT))
    table = page[page.index("<table class='trials'>"):]
    rows = table[:table.index("</table>")].split("<tr class=")
    assert [row.count("<td>inf</td>") for row in rows[1:]] == [0] * 6 + [1]  # none for KNOWN's crash: it had no check


def test_a_trial_timed_beside_other_work_is_marked_in_the_table():
    # Its figure may be far off (numba's probe read 74x too slow under a busy loop): the search's progress line
    # and table say so, and the report's table must too.
    study = make_study(*KNOWN)
    add_trial(study, "numba", "float16", "ok", 36.0, 400, busy=1.04)
    add_trial(study, "scan", "float16", "ok", 25.0, 400, busy=0.2)  # below BUSY_CORES: quiet
    page = render_html(build_report(study, DOCUMENT))
    assert page.count("timed beside other work") == 1
    assert "<td>36 timesteps/s (timed beside other work: 1.0 cores busy)</td>" in page


def test_a_trial_that_kept_more_cores_busy_than_its_threads_is_marked_in_the_table():
    # chmm's overlap_passes under --threads 1 kept 1.25 cores busy, 9% faster on a core it borrowed: the search's
    # progress line and table say so, and the report's table must too.
    study = make_study(*KNOWN)
    add_trial(study, "numba", "float16", "ok", 36.0, 400, cores_used=1.25, threads=1)
    add_trial(study, "scan", "float16", "ok", 25.0, 400, cores_used=1.004, threads=1)  # the rounding: its own
    page = render_html(build_report(study, DOCUMENT))
    assert page.count("more than its") == 1
    assert "<td>36 timesteps/s (its timed runs kept 1.2 cores busy, more than its 1 thread)</td>" in page


def test_a_restricted_ask_is_listed_as_never_measured_not_as_a_failure():
    # The loop records a config that breaks a constraint (asked for, never run) as a failed trial, so that the
    # sampler steers away from it; the table must not show it as a config that failed with no error.
    study = make_study(*KNOWN)
    trial = study.ask({"kernel": KERNEL, "dtype": DTYPE})
    trial.set_user_attr("config", {"kernel": "numba", "dtype": "float16"})
    trial.set_user_attr("restricted", "kernel != 'numba' or dtype == 'float32'")
    study.tell(trial, state=optuna.trial.TrialState.FAIL)
    row = table_rows(study)[-1]
    assert row["status"] == "restricted"
    assert row["error"] == "breaks kernel != 'numba' or dtype == 'float32': never measured"
    page = render_html(build_report(study, DOCUMENT))
    assert "<tr class='status-restricted'>" in page and "tr.status-restricted td" in page


def explanation():
    """An `autotune explain` of a synthetic space whose effects are known (tests/test_explain.py)."""
    from autotune.explain import explain
    from autotune.space import SearchSpace
    from tests.test_explain import SPACE, fake_run

    space = SearchSpace.from_dict(SPACE)
    target = space.validate({"kernel": "fast", "tile": 4, "batch": 16, "noop": True})
    return explain(space, space.baseline, target, fake_run(space), rounds=2)


def test_full_report_has_every_figure():
    info = build_report(make_study(*KNOWN), DOCUMENT, explanation(), known_space())
    figures = {section_id: figure for section_id, _, figure, _ in info.sections}
    assert set(figures) == {"winner", "explain", "history", "pareto", "worth", "parallel"}
    assert all(figure is not None for figure in figures.values())
    page = render_html(info)
    assert page.count('class="plotly-graph-div"') == 6 and "<script src=" not in page
    # One page holding plotly.js once (4.8 MB), each figure a piece of it under its section's id, without the logo.
    assert page.count("<html") == 1 and len(re.findall(r"plotly\.js v\d", page)) == 1
    assert all(f'id="plot-{section_id}"' in page for section_id in figures)
    assert page.count('"displaylogo": false') == 6
    assert "process died from SIGSEGV" in page
    # the claims table under the waterfall: the guide's words, the measurement and the verdict
    assert "<table id='claims'>" in page and "fix 1: 2-3x" in page and "verdict-confirmed" in page
    assert 'The verdict reads "alone" unless its note says otherwise.' in page
    # Without an export of this study (another storage's was there, say), the explanation says what it explains.
    notes = {section_id: note for section_id, _, _, note in build_report(make_study(*KNOWN), None, explanation(),
                                                                         known_space()).sections}
    assert notes["explain"].startswith("This explains ") and "this study has no export of its own" in notes["explain"]


def test_each_figure_draws_what_its_titles_and_axes_say():
    from autotune.report import _draw_winner

    info = build_report(make_study(*KNOWN), DOCUMENT, explanation(), known_space())
    figures = {section_id: figure for section_id, _, figure, _ in info.sections}
    winner = figures["winner"]  # throughput with its spread, then memory, tuned (green) beside the baseline
    assert [note.text for note in winner.layout.annotations] == ["throughput (timesteps/s)", "peak memory (MiB)"]
    rows = _get_winner_info(DOCUMENT)["rows"]
    assert (winner.data[0].x, winner.data[0].y, winner.data[0].marker.color) == (
        ("tuned", "baseline"), (30.0, 10.0), ("#2ca02c", "#7f7f7f"))
    assert winner.data[0].error_y.array == tuple(r["throughput_error"] for r in rows)
    assert (winner.data[1].x, winner.data[1].xaxis, winner.data[1].marker.color) == (("tuned", "baseline"), "x2",
                                                                                    ("#2ca02c", "#7f7f7f"))
    assert (winner.data[0].name, winner.data[1].name, winner.layout.showlegend) == ("throughput", "peak memory", False)
    far = _draw_winner(_get_winner_info({**DOCUMENT, "measured": {**DOCUMENT["measured"], "throughput": 2700.0}}))
    assert far.layout.yaxis.title.text == "log scale"  # from a decade under the baseline's bar
    assert far.layout.yaxis.range == pytest.approx((0.0, math.log10(2700) + 0.2)) and far.layout.yaxis2.type is None
    history = figures["history"]  # each status its markers, and the best correct so far as steps
    assert (history.layout.title.text, history.layout.xaxis.title.text, history.layout.yaxis.title.text) == (
        "Optimisation history (failed trials on the axis, by status)", "trial", "throughput (timesteps/s)")
    assert [(t.name, t.mode) for t in history.data] == [("ok", "markers"), ("incorrect", "markers"),
                                                       ("crash", "markers"), ("best correct so far", "lines")]
    ok, best = history.data[0], history.data[-1]
    assert (ok.x, ok.y, ok.marker.color, ok.hovertemplate) == ((0, 1, 4), (10.0, 30.0, 20.0), "#1f77b4",
                                                              "%{text}<extra></extra>")
    assert ok.text[0] == "trial #0: ok<br>kernel=loop<br>dtype=float32<br>10 timesteps/s"
    assert (best.x, best.y, best.line.shape, best.line.color) == ((0, 1, 2, 3, 4), (10.0, 30.0, 30.0, 30.0, 30.0),
                                                                 "hv", "#2ca02c")
    pareto = figures["pareto"]
    assert (pareto.layout.xaxis.title.text, pareto.layout.yaxis.title.text) == ("peak memory (MiB)",
                                                                                "throughput (timesteps/s)")
    assert [(t.name, t.mode, t.marker.color, t.hoverinfo) for t in pareto.data[:2]] == [
        ("correct", "markers", "#1f77b4", "text"), ("infeasible", "markers", "#cccccc", "text")]
    assert pareto.data[0].text[0].startswith("trial #0: ok")
    assert (pareto.data[2].name, pareto.data[2].mode, pareto.data[2].line.shape) == ("Pareto front", "lines", "hv")
    # The parallel plot's axis of outcomes is throughput, not Optuna's "Objective Value".
    lines = [trace for trace in figures["parallel"].data if trace.customdata is not None]
    assert lines and all(trace.customdata[0][0] == "throughput" for trace in lines)


def test_a_study_of_one_objective_as_search_makes_now_has_every_figure_drawn_from_its_trials():
    from autotune.report import _draw_winner

    info = build_report(make_study(*KNOWN, directions=["maximize"]), DOCUMENT, explanation(), known_space())
    figures = {section_id: figure for section_id, _, figure, _ in info.sections}
    notes = {section_id: note for section_id, _, _, note in info.sections}
    assert all(figure is not None for figure in figures.values()), notes  # the parallel plot reads throughput
    assert "no speedup" not in notes["winner"]  # the baseline was measured
    assert [trace.name for trace in figures["history"].data][-1] == "best correct so far"
    # Throughput against memory in MiB: the correct configs' front, each one needing more memory and faster.
    front = next(trace for trace in figures["pareto"].data if trace.name == "Pareto front")
    assert list(front.x) == [280 / 2**20, 400 / 2**20] and list(front.y) == [20.0, 30.0]
    correct = next(trace for trace in figures["pareto"].data if trace.name == "correct")
    assert sorted(zip(correct.x, correct.y)) == [(280 / 2**20, 20.0), (300 / 2**20, 10.0), (400 / 2**20, 30.0)]
    # The winner's memory beside the baseline's, and each trial's in the table, in MiB; its spread in percent.
    assert list(_draw_winner(_get_winner_info(DOCUMENT)).data[1].y) == [400.0, 300.0]
    table = render_table(table_rows(make_study(("loop", "float32", "ok", 10.0, 300 * 2**20))), "timesteps")
    assert "<td>300.0 MiB</td>" in table and "<td>±10.0%</td>" in table


def test_an_explanation_of_another_config_than_the_winner_says_so():
    # `explain --config`, or an explanation of an earlier search's winner: its "in the winner" column was shown
    # under "Trial #1 won, exported as: ..." as if it measured that winner.
    explained = explanation()
    target = explained["target"]["config"]
    notes = {section_id: note for section_id, _, _, note in build_report(make_study(*KNOWN), DOCUMENT, explained).sections}
    assert notes["explain"] == (f"This explains {Config(target).describe()}, not the exported winner: run `autotune "
                                "explain` for it.")
    winner = dict(DOCUMENT, config=target)
    notes = {section_id: note for section_id, _, _, note in build_report(make_study(*KNOWN), winner, explained).sections}
    assert notes["explain"] is None


def test_a_report_that_cannot_be_written_is_one_line_and_leaves_no_file(tmp_path, monkeypatch):
    import errno
    from pathlib import Path

    from autotune.exceptions import AutotuneError

    def full_disk(self, text, encoding=None):
        with open(self, "w") as half:
            half.write(text[:100])  # what a disk that fills mid-write keeps
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(AutotuneError, match=r"cannot write the report .*r\.html: No space left on device; choose "):
        write_report(make_study(*KNOWN), tmp_path / "r.html", DOCUMENT)
    assert list(tmp_path.iterdir()) == []


def test_what_optuna_warns_of_while_drawing_is_a_note_under_the_figure_not_a_terminal_warning(monkeypatch):
    import warnings

    import optuna.visualization as ov

    def warns(study, **kwargs):  # as PED-ANOVA's importances warned on every call, raw, with its source line
        warnings.warn("Some regimes for parameter `dtype` have less than 2 trials", UserWarning)
        return plot(study, **kwargs)

    plot = ov.plot_parallel_coordinate
    monkeypatch.setattr(ov, "plot_parallel_coordinate", warns)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        info = build_report(make_study(*KNOWN), DOCUMENT)
    figure, message = {section_id: (f, m) for section_id, _, f, m in info.sections}["parallel"]
    assert figure is not None and "`dtype` have less than 2 trials" in message
    assert "<p class='note' id='note-parallel'>Some regimes for parameter" in render_html(info)


def test_each_of_the_winners_values_is_weighed_against_the_best_config_without_it():
    # Optuna's importances (PED-ANOVA) drew here: on a chmm study at tiny (40 trials, this CPU) overlap_passes read
    # 0.70 and messages 0.13, where the best config without messages=numba was 20x slower and without
    # overlap_passes=false 1.5x. The figure is now what the search measured.
    from autotune.knob_worth import draw_worth, get_worth_info
    from autotune.space import SearchSpace

    space = SearchSpace.from_dict({"schema_version": 1, "parameters": {
        "kernel": {"choices": ["loop", "numba", "scan"]},
        "overlap": {"choices": [False, True], "condition": "kernel == 'numba'"},
        "dtype": {"choices": ["float32", "float16"]},
        "chunk": {"choices": [64, 128], "condition": "kernel == 'scan'"}},
        "defaults": {"kernel": "loop", "overlap": False, "dtype": "float32", "chunk": 64}, "baseline": {}})
    study = optuna.create_study(directions=["maximize", "minimize"])
    for number, (config, status, throughput) in enumerate([
            ({"kernel": "loop", "dtype": "float32"}, "ok", 10.0),
            ({"kernel": "numba", "overlap": False, "dtype": "float32"}, "ok", 200.0),
            ({"kernel": "numba", "overlap": True, "dtype": "float32"}, "ok", 130.0),
            ({"kernel": "numba", "overlap": True, "dtype": "float16"}, "incorrect", 120.0),
            ({"kernel": "scan", "chunk": 64, "dtype": "float16"}, "incorrect", 900.0),  # wrong: never "without"
            ({"kernel": "numba", "overlap": True, "dtype": "float32"}, "ok", 125.0)]):  # one measured again
        full = {**space.defaults, **config}
        trial = study.ask()
        for key, value in {"status": status, "config": full, "config_key": Config(full).key,
                           "throughput": throughput, "peak_memory_bytes": 100}.items():
            trial.set_user_attr(key, value)
        study.tell(trial, [throughput, 100])
    info = get_worth_info(study.trials, {"kernel": "numba", "overlap": False, "dtype": "float32"}, space)
    rows = {r["knob"]: r for r in info["rows"]}
    assert rows["kernel"]["worth"] == 200.0 / 10.0 and rows["kernel"]["other"] == "loop"  # the wrong scan is no rival
    assert rows["overlap"]["worth"] == 200.0 / 125.0 and rows["overlap"]["without_trial"] == 5  # the latest of #2
    assert "dtype" not in rows and info["alone"] == ["dtype=float32"]  # float16 never ran correct
    assert [r["knob"] for r in info["rows"]] == ["kernel", "overlap"] and info["unused"] == ["chunk"]
    assert [(r["with_trial"], r["without_trial"]) for r in info["rows"]] == [(1, 0), (1, 5)]  # the hover's trials
    # A winner (an export's) whose value of a knob no correct trial had: that knob has nothing to weigh.
    info = get_worth_info(study.trials, {"kernel": "numba", "overlap": True, "dtype": "float16"}, space)
    assert info["alone"] == ["dtype=float16"] and [r["knob"] for r in info["rows"]] == ["kernel", "overlap"]
    # A value that bought nothing (worth 1.0: a tie with the best without it) is drawn grey, not as a gain.
    figure = draw_worth({"rows": [{**row, "worth": worth} for row, worth in zip(info["rows"], (1.5, 1.0))]}, "items")
    assert figure.data[0].marker.color == ("#7f7f7f", "#2ca02c")  # drawn bottom-up: overlap, then kernel
    # Each bar as long as its value's worth, named by it and labelled with it, on a log axis that says what it is.
    bars = figure.data[0]
    assert (bars.orientation, bars.x, bars.text, bars.textposition) == ("h", (1.0, 1.5), ("1.00x", "1.50x"), "outside")
    assert bars.y == ("overlap=true", "kernel=numba") and bars.hoverinfo == "text"
    assert bars.hovertext[1].startswith("kernel=numba: best 200 items/s (trial #1)<br>best without it: 10 items/s")
    assert (figure.layout.xaxis.type, figure.layout.xaxis.title.text) == ("log", "times faster than the best config "
                                                                                "without it")
    assert figure.layout.title.text.startswith("The winner's value of each knob: its best throughput over the best")


def test_the_worth_figure_says_why_it_is_missing():
    from autotune.knob_worth import worth_section

    trials = make_study(*KNOWN).trials
    assert worth_section(trials, None, None, None, "items")[1].startswith("The workload's space could not be loaded")
    assert "no winner" in worth_section([], None, known_space(), None, "items")[1]
    figure, note = worth_section(trials, None, known_space(), None, "items")  # the fastest correct config: numba
    assert figure is not None and figure.data[0].y == ("kernel=numba", "dtype=float32")  # 1.5x each
    assert note.startswith("Each bar compares the best configs the search measured with and without the value")
    alone = make_study(("numba", "float32", "ok", 30.0, 400))
    assert worth_section(alone.trials, None, known_space(), None, "items") == (
        None, "No other value of a knob the winner uses was measured correct. Only the winner's value was measured "
        "correct where the knob acts: kernel=numba, dtype=float32.")


def test_without_an_explanation_the_report_says_how_to_get_one():
    info = build_report(make_study(*KNOWN), DOCUMENT)
    messages = {section_id: message for section_id, _, figure, message in info.sections if figure is None}
    assert "autotune explain" in messages["explain"]


def test_only_failed_trials_give_messages_not_crashes():
    study = make_study(("scan", "float32", "crash", None, None, "SIGSEGV"), ("loop", "float16", "timeout", None, None, "killed"))
    info = build_report(study, None)
    messages = {section_id: message for section_id, _, figure, message in info.sections if figure is None}
    assert "No exported config" in messages["winner"]
    assert "needs at least 1 completed trials; this study has 0" in messages["pareto"]
    assert "no winner" in messages["worth"]
    assert "id='empty-pareto'" in render_html(info)


def test_a_plot_optuna_fails_to_draw_is_a_message_in_its_place_and_the_rest_of_the_report_stands(monkeypatch):
    import optuna.visualization

    def fails(study, **options):
        raise ValueError("Cannot evaluate the importance of a constant parameter")

    monkeypatch.setattr(optuna.visualization, "plot_parallel_coordinate", fails)
    info = build_report(make_study(*KNOWN), DOCUMENT)
    sections = {section_id: (figure, message) for section_id, _, figure, message in info.sections}
    assert sections["parallel"] == (None, "The parallel-coordinates plot could not be computed: Cannot evaluate the "
                                          "importance of a constant parameter")
    assert sections["pareto"][0] is not None and "could not be computed" in render_html(info)


def test_single_trial_gives_a_clear_message_for_the_parallel_plot():
    info = build_report(make_study(("loop", "float32", "ok", 10.0, 300)), None)
    sections = {section_id: (figure, message) for section_id, _, figure, message in info.sections}
    assert sections["history"][0] is not None and sections["pareto"][0] is not None
    assert sections["parallel"][0] is None and "this study has 1" in sections["parallel"][1]


def test_empty_study():
    info = build_report(make_study(), None)
    assert all(figure is None for _, _, figure, _ in info.sections)
    messages = {section_id: message for section_id, _, _, message in info.sections}
    assert messages["history"] == "The study has no finished trials."
    page = render_html(info)
    assert "No finished trials" in page
    # One whole page: each section under its heading, in order, then the trials' table, then the end of the page.
    headings = re.findall(r"<h2>(.*?)</h2>", page)
    assert headings == [html.escape(title) for _, title, _, _ in info.sections] + ["Every trial"]
    assert re.search(r"<p><small>Written by autotune on \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.</small></p>"
                     r"</body></html>$", page), page[-200:]


def test_a_study_whose_measured_configs_all_failed_their_check_says_so_under_its_figures():
    # Figures drawn from incorrect trials alone look like a search's results; the page says they are failures.
    info = build_report(make_study(("scan", "float16", "incorrect", 40.0, 250), ("loop", "float32", "incorrect", 10.0,
                                                                              300)), None)
    sections = {section_id: (title, figure, message) for section_id, title, figure, message in info.sections}
    assert sections["feasible"] == ("Correct configurations", None, "No completed trial passed its correctness "
                                    "check: every figure above shows failures only.")
    assert "feasible" not in {section_id for section_id, *_ in build_report(make_study(*KNOWN), None).sections}
    assert "<h2>Correct configurations</h2><p class='empty' id='empty-feasible'>" in render_html(info)


def test_a_study_named_with_study_is_reported_as_what_it_measured(tmp_path):
    from autotune.exceptions import StorageError
    from autotune.stored import open_stored_study

    storage = f"sqlite:///{tmp_path / 'autotune.db'}"
    study = optuna.create_study(storage=storage, study_name="mine", directions=["maximize"])
    for key, value in {"workload": "chmm", "device": "cpu", "size": "tiny"}.items():
        study.set_user_attr(key, value)
    # -s defaults to small: the study measured tiny, and its page says so (it said small).
    stored = open_stored_study("chmm", "cpu", storage=storage, study_name="mine", studies=tmp_path)
    assert (stored.workload, stored.device, stored.size) == ("chmm", "cpu", "tiny")
    with pytest.raises(StorageError, match="study mine is a study of workload chmm, not workload ten"):
        open_stored_study("ten", "cpu", storage=storage, study_name="mine", studies=tmp_path)
    # A size or device given (not left to its default) that the study did not measure is refused, not replaced.
    with pytest.raises(StorageError, match="mine is a study of size tiny, not size small; leave out -d and -s"):
        open_stored_study("chmm", "auto", "small", storage=storage, study_name="mine", studies=tmp_path)
    with pytest.raises(StorageError, match="mine is a study of device cpu, not device h100; leave out -d and -s"):
        open_stored_study("chmm", "h100", storage=storage, study_name="mine", studies=tmp_path)
    assert open_stored_study("chmm", "auto", "tiny", storage=storage, study_name="mine", studies=tmp_path).size == "tiny"


def stored_known(folder):
    """KNOWN's study, stored in ``folder``'s SQLite as `search` leaves it (chmm at tiny on the CPU)."""
    stored = optuna.create_study(directions=["maximize", "minimize"], study_name="chmm-cpu-tiny",
                                 storage=f"sqlite:///{folder / 'autotune.db'}")
    memory = make_study(*KNOWN)
    for key, value in memory.user_attrs.items():
        stored.set_user_attr(key, value)
    stored.add_trials(memory.trials)
    return stored


def test_a_report_outlives_its_workload_s_space_file(tmp_path, monkeypatch):
    # The space names the knobs a config leaves inactive; a study whose space file is gone still has its report,
    # each config then shown whole, as its trials recorded it.
    import autotune.stored
    from autotune.exceptions import AutotuneError
    from autotune.report import report

    stored_known(tmp_path)
    page = report("chmm", "cpu", "tiny", studies=tmp_path, output=tmp_path / "now.html").read_text()
    assert "<td>dtype=float32 kernel=loop</td>" in page  # chmm's space has no `kernel`: both act, as far as it knows
    assert "exported as: dtype=float32 kernel=numba; check" not in page  # no export: no winner named

    def gone(workload, name=None):  # load_space, as the space file gone makes it
        raise AutotuneError(f"workload {workload!r} has no search-space file; define space_path()")

    monkeypatch.setattr(autotune.stored, "load_space", gone)
    written = report("chmm", "cpu", "tiny", studies=tmp_path)  # no output named: beside the study's export
    assert written == tmp_path / "chmm" / "cpu-tiny-report.html"
    assert "<td>dtype=float32 kernel=loop</td>" in written.read_text()


def test_an_explanation_the_report_cannot_read_is_said_under_its_section(tmp_path):
    # One whose fixes were not a list (a hand edit) stopped `autotune report` with a TypeError; one that was not
    # JSON read "No explanation of this study yet".
    from autotune.report import report

    stored_known(tmp_path)
    (tmp_path / "chmm" / "explain").mkdir(parents=True)
    for text, said in (('{"schema_version": 1, "fixes": "x"}', "(TypeError: "), ('{"schema_version": 1, "tar', "")):
        (tmp_path / "chmm" / "explain" / "cpu-tiny.json").write_text(text)
        page = report("chmm", "cpu", "tiny", studies=tmp_path, output=tmp_path / "r.html").read_text()
        assert "The stored explanation could not be read " + said in page and "No explanation of this study" not in page
        assert "run `autotune explain` again to measure it anew" in page


def test_an_export_the_report_cannot_read_is_said_not_taken_for_none(tmp_path):
    # An export whose `remeasure` a hand edit broke read "No exported config for this study yet".
    import json

    from autotune.report import report

    stored_known(tmp_path)
    export = {**DOCUMENT, "study": {"name": "chmm-cpu-tiny"}, "remeasure": "x"}
    (tmp_path / "chmm").mkdir()
    (tmp_path / "chmm" / "cpu-tiny.json").write_text(json.dumps(export))
    page = report("chmm", "cpu", "tiny", studies=tmp_path, output=tmp_path / "r.html").read_text()
    assert "The export could not be read: " in page and "remeasure must be a JSON object, got &#x27;x&#x27;" in page
    assert "No exported config" not in page


def test_the_export_of_a_study_of_the_same_name_in_another_storage_is_not_this_ones(tmp_path):
    # A search with `--storage studies/chmm.journal` exported after one in the default SQLite: the SQLite study's
    # report showed the journal's winner, "Trial #2 won", a trial that in SQLite never ran.
    import json

    from autotune.report import report
    from autotune.stored import same_storage

    stored_known(tmp_path)
    (tmp_path / "chmm").mkdir()
    for storage, ours in (("studies/chmm.journal", False), ("sqlite:///x/other.db", False),
                          (f"sqlite:///{tmp_path / 'autotune.db'}", True), ("sqlite:///studies/autotune.db", True)):
        export = {**DOCUMENT, "study": {"name": "chmm-cpu-tiny", "storage": storage}}
        (tmp_path / "chmm" / "cpu-tiny.json").write_text(json.dumps(export))
        page = report("chmm", "cpu", "tiny", studies=tmp_path, output=tmp_path / "r.html").read_text()
        assert ("Trial #1 won, exported as:" in page) is ours, storage
        assert (f"is of the study of this name in {storage}, another storage" in page) is not ours, storage
    assert same_storage(None, "sqlite:///a.db")  # an export made before it said its storage
    assert same_storage("postgresql://u:***@db/autotune", "postgresql://u:pw@db/autotune")
    assert not same_storage("postgresql://u:***@db/autotune", "postgresql://u:pw@other/autotune")


def test_without_study_the_report_draws_the_study_whose_winner_the_export_holds(tmp_path):
    # `search --study trial-run` wrote studies/chmm/cpu-tiny.json; `report -w chmm -d cpu -s tiny` said "unknown
    # study 'chmm-cpu-tiny'; valid: trial-run", the study it could have drawn, named in the export.
    import json

    from autotune.exceptions import UnknownNameError
    from autotune.storage import open_storage
    from autotune.stored import open_stored_study

    made_for = {"workload": "chmm", "device": "cpu", "size": "tiny"}
    storage = f"sqlite:///{tmp_path / 'autotune.db'}"
    study = optuna.create_study(storage=storage, study_name="trial-run", directions=["maximize"])
    for key, value in made_for.items():
        study.set_user_attr(key, value)
    (tmp_path / "chmm").mkdir()
    export = tmp_path / "chmm" / "cpu-tiny.json"
    for named, found in (("trial-run", True), ("another", False)):
        export.write_text(json.dumps({**DOCUMENT, "study": {"name": named, "storage": storage}}))
        if found:
            stored = open_stored_study("chmm", "cpu", "tiny", studies=tmp_path)
            assert stored.study.study_name == "trial-run" and stored.document is not None
        else:
            with pytest.raises(UnknownNameError, match="unknown study 'chmm-cpu-tiny'; valid: trial-run"):
                open_stored_study("chmm", "cpu", "tiny", studies=tmp_path)
    # Of the same name in another storage, it is not this one's.
    export.write_text(json.dumps({**DOCUMENT, "study": {"name": "trial-run", "storage": "studies/x.journal"}}))
    with pytest.raises(UnknownNameError):
        open_stored_study("chmm", "cpu", "tiny", studies=tmp_path)
    # In the storage given (--storage), the study the export names is drawn from it, not from the default one.
    journal = str(tmp_path / "elsewhere.journal")
    other = optuna.create_study(storage=open_storage(journal), study_name="trial-run", directions=["maximize"])
    for key, value in made_for.items():
        other.set_user_attr(key, value)
    (tmp_path / "own" / "chmm").mkdir(parents=True)
    (tmp_path / "own" / "chmm" / "cpu-tiny.json").write_text(json.dumps({**DOCUMENT, "study": {
        "name": "trial-run", "storage": journal}}))
    stored = open_stored_study("chmm", "cpu", "tiny", storage=journal, studies=tmp_path / "own")
    assert stored.study.study_name == "trial-run" and stored.document is not None


def test_a_study_not_in_the_storage_read_says_where_its_export_says_it_is(tmp_path):
    # `search --workers 2 --storage /tmp/j.journal`, then `report` without --storage: "no study storage at
    # sqlite:///studies/autotune.db; run `autotune search` first", though the export beside it named the journal.
    import json

    from autotune.exceptions import StorageError, UnknownNameError
    from autotune.stored import open_stored_study

    (tmp_path / "chmm").mkdir()
    export = tmp_path / "chmm" / "cpu-tiny.json"
    journal = str(tmp_path / "j.journal")
    export.write_text(json.dumps({**DOCUMENT, "study": {"name": "chmm-cpu-tiny", "storage": journal}}))
    said = f"the export {export} is of study chmm-cpu-tiny in {journal}: pass --storage {journal}"
    with pytest.raises(StorageError) as raised:
        open_stored_study("chmm", "cpu", "tiny", studies=tmp_path)
    assert str(raised.value) == f"no study storage at sqlite:///{tmp_path / 'autotune.db'}; {said}"
    optuna.create_study(storage=f"sqlite:///{tmp_path / 'autotune.db'}", study_name="other")
    with pytest.raises(UnknownNameError) as raised:
        open_stored_study("chmm", "cpu", "tiny", studies=tmp_path)
    assert str(raised.value) == "unknown study 'chmm-cpu-tiny'; valid: other. T" + said[1:]
    masked = "postgresql://u:***@db/autotune"  # as an export keeps it
    export.write_text(json.dumps({**DOCUMENT, "study": {"name": "chmm-cpu-tiny", "storage": masked}}))
    with pytest.raises(UnknownNameError, match=r"pass --storage postgresql://u:\*\*\*@db/autotune \(its password"):
        open_stored_study("chmm", "cpu", "tiny", studies=tmp_path)
    # A study named with --study, or an export of the storage read, gives no such hint.
    with pytest.raises(UnknownNameError) as raised:
        open_stored_study("chmm", "cpu", "tiny", studies=tmp_path, study_name="chmm-cpu-tiny")
    assert "export" not in str(raised.value)
    export.write_text(json.dumps({**DOCUMENT, "study": {"name": "chmm-cpu-tiny",
                                                        "storage": f"sqlite:///{tmp_path / 'autotune.db'}"}}))
    with pytest.raises(UnknownNameError) as raised:
        open_stored_study("chmm", "cpu", "tiny", studies=tmp_path)
    assert "export" not in str(raised.value)


def test_a_search_of_no_new_trial_of_a_study_elsewhere_says_where_its_export_says_it_is(tmp_path):
    # `search -n 0` after workers searched into a journal said "it has measured none in sqlite:///...: give
    # --trials 1 or more", which would have measured the study's configs again in the wrong storage.
    import json

    from autotune.exceptions import AutotuneError
    from autotune.stored import check_measured

    export = tmp_path / "chmm" / "cpu-tiny.json"
    export.parent.mkdir()
    journal = str(tmp_path / "j.journal")
    export.write_text(json.dumps({**DOCUMENT, "study": {"name": "chmm-cpu-tiny", "storage": journal}}))
    storage = f"sqlite:///{tmp_path / 'autotune.db'}"
    with pytest.raises(AutotuneError) as raised:
        check_measured(storage, "chmm-cpu-tiny", export)
    assert str(raised.value).endswith(f"measured none in {storage}: the export {export} is of study chmm-cpu-tiny "
                                      f"in {journal}: pass --storage {journal}")
    with pytest.raises(AutotuneError, match="measured none in .*: give --trials 1 or more$"):
        check_measured(storage, "chmm-cpu-tiny")


def test_a_storage_of_several_studies_opens_the_one_named_and_refuses_to_guess(tmp_path):
    import json

    from autotune.exceptions import StorageError
    from autotune.stored import open_stored_study, open_study

    storage = f"sqlite:///{tmp_path / 'autotune.db'}"
    optuna.create_study(storage=storage, study_name="other").set_user_attr("workload", "chmm")
    assert open_study(storage).study_name == "other"  # the one it holds, unnamed
    stored_known(tmp_path)
    with pytest.raises(StorageError, match=r"holds 2 studies \(chmm-cpu-tiny, other\); name one with --study"):
        open_study(storage)
    assert open_study(storage, "chmm-cpu-tiny").study_name == "chmm-cpu-tiny"  # named: the others are no matter
    # The export in its place is another study's (a later `--study other` search): not this study's winner, and
    # nothing wrong with it to say.
    (tmp_path / "chmm").mkdir()
    (tmp_path / "chmm" / "cpu-tiny.json").write_text(json.dumps({**DOCUMENT, "study": {"name": "other"}}))
    stored = open_stored_study("chmm", "cpu", "tiny", studies=tmp_path)
    assert stored.study.study_name == "chmm-cpu-tiny" and (stored.document, stored.export_problem) == (None, None)


def test_a_slow_workloads_figures_and_odd_values_read_as_search_writes_them():
    # One full-size step in 2.5 s is 0.4 steps/s: the table and the hover text read "0" (a format of whole numbers),
    # and a null knob value read as Python's "None", which `--set` refuses (it takes "null", as the space file).
    study = make_study(("loop", None, "ok", 0.4, 300), ("numba", None, "ok", 12345.6, 300))
    info = build_report(study)
    assert [row["described"] for row in info.table] == ["dtype=null kernel=loop", "dtype=null kernel=numba"]
    page = render_html(info)
    assert "<td>0.4 timesteps/s</td>" in page and "<td>12,346 timesteps/s</td>" in page
    texts = _get_history_info(study, unit="timesteps")["points"]["ok"]["text"]
    assert [text.rsplit("<br>", 1)[1] for text in texts] == ["0.4 timesteps/s", "12,346 timesteps/s"]


def test_a_broken_install_without_plotly_is_told_how_to_mend_it(monkeypatch):
    # plotly is a dependency, but a broken environment lacks it: one line with the command, not an ImportError.
    import importlib
    import sys

    from autotune.exceptions import AutotuneError

    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)  # as if not installed: its import fails
    monkeypatch.delitem(sys.modules, "autotune._plotly_imports")
    with pytest.raises(AutotuneError, match=r"^autotune report needs plotly \(import of plotly.graph_objects halted; "
                                            r"None in sys.modules\); install it with `pip install plotly`$"):
        importlib.import_module("autotune._plotly_imports")


def test_an_unreadable_export_beside_a_study_of_another_name_is_no_guide_to_which_study(tmp_path):
    # Without --study, an export names the study whose winner it holds; one that cannot be read names none, and the
    # report says which studies there are, not the export's JSON error.
    from autotune.config import config_path
    from autotune.exceptions import UnknownNameError
    from autotune.stored import open_stored_study

    storage = f"sqlite:///{tmp_path / 'autotune.db'}"
    optuna.create_study(storage=storage, study_name="other", directions=["maximize"])
    export = config_path("chmm", "cpu", "tiny", tmp_path)
    export.parent.mkdir(parents=True)
    export.write_text("{half written")
    with pytest.raises(UnknownNameError, match=r"^unknown study 'chmm-cpu-tiny'; valid: other"):
        open_stored_study("chmm", "cpu", "tiny", storage=storage, studies=tmp_path)


def test_a_study_named_that_is_not_there_lists_the_workload_s_studies_alone(tmp_path):
    # `report -w lse --study nosuch` listed every study in the storage as valid, another workload's too, which it
    # refuses ("is a study of workload poolfeat, not workload lse").
    from autotune.exceptions import UnknownNameError
    from autotune.stored import open_stored_study

    storage = f"sqlite:///{tmp_path / 'autotune.db'}"
    for name, workload in (("mine", "chmm"), ("theirs", "ten"), ("unsaid", None)):
        study = optuna.create_study(storage=storage, study_name=name, directions=["maximize"])
        if workload:
            study.set_user_attr("workload", workload)
    with pytest.raises(UnknownNameError) as raised:
        open_stored_study("chmm", "cpu", "tiny", storage=storage, study_name="nosuch", studies=tmp_path)
    assert str(raised.value) == (f"unknown study 'nosuch'; valid: mine, unsaid. Those are chmm's in {storage}: run "
                                 "`autotune search` for it first, or pass --storage or --study")


def test_the_trials_table_says_which_pass_only_a_looser_tolerance_allowed():
    # A block of mine with tanh's GELU passed in bfloat16 and failed in float64: its table row read "ok" with no
    # word that its twin failed, though the search had said it could not win.
    from autotune.devices import PROFILES
    from autotune.space import load_space

    space = load_space("chmm").for_device(PROFILES["cpu"])
    study = optuna.create_study(direction="maximize")
    scan = space.defaults.replace(messages="scan")
    for config, status, bound in ((scan.replace(dtype="float16"), "ok", [1e-3, 2e-2]),
                                  (scan.replace(dtype="float64"), "incorrect", [3e-4, 1e-9])):
        trial = study.ask()
        for key, value in {"status": status, "config": config.to_dict(), "config_key": config.key,
                           "check": {"error": bound[0], "tolerance": bound[1], "metrics": {"ll": bound}}}.items():
            trial.set_user_attr(key, value)
        study.tell(trial, 1.0)
    rows = table_rows(study, space)
    assert rows[0]["status"] == "ok" and rows[0]["error"] == (
        "passed only under a looser tolerance: #1, the same config with dtype=float64, fails its check (ll error "
        "0.0003 > tolerance 1e-09), which this one's tolerance of 0.02 lets through; it cannot win")
    assert "passed only under a looser tolerance" in render_table(rows, "items")
    assert table_rows(study)[0]["error"] is None  # no space, no reference: nothing said


def test_a_config_over_the_memory_budget_is_said_so_in_the_table_and_is_no_rival_that_never_ran_correct():
    # A loader of mine whose workers ran correct over --memory-budget 400MiB: the search said "over --memory-budget
    # 400.0 MiB: it cannot win" of each, where the report's table said nothing, and its knob figure "No other value
    # of a knob the winner uses was measured correct", though two had passed.
    from autotune.knob_worth import worth_section

    study = make_study(("loop", "float32", "ok", 10.0, 300 * 2**20), ("numba", "float32", "ok", 30.0, 500 * 2**20),
                       ("scan", "float32", "incorrect", 40.0, 600 * 2**20))
    study.set_user_attr("memory_budget_bytes", 400 * 2**20)
    rows = table_rows(study, known_space())
    assert [row["error"] for row in rows] == [None, "over --memory-budget 400.0 MiB: it cannot win", None]
    assert "over --memory-budget 400.0 MiB: it cannot win" in render_table(rows, "timesteps")
    figure, note = worth_section(study.trials, {"kernel": "loop", "dtype": "float32"}, known_space(), 400 * 2**20,
                                 "timesteps")
    assert figure is None and note == (
        "No other value of a knob the winner uses was measured correct within the memory budget (400.0 MiB). Only the "
        "winner's value was measured correct within the memory budget (400.0 MiB) where the knob acts: kernel=loop, "
        "dtype=float32.")
    study.set_user_attr("memory_budget_bytes", None)  # a search without one: nothing is over it
    assert [row["error"] for row in table_rows(study, known_space())] == [None, None, None]
    assert worth_section(study.trials, {"kernel": "loop", "dtype": "float32"}, known_space(), None,
                         "timesteps")[0] is not None  # numba, 3x: a rival


def test_a_candidate_that_failed_its_re_measurement_says_so_in_the_table_and_is_no_rival_of_the_winner():
    # A search of two trials exported the float32 baseline once the bfloat16 defaults' twin (tanh's GELU in float64)
    # failed at re-measurement: the report's table read `ok` for the defaults, with no word, and weighed the
    # winner's float32 at 0.37x against them.
    from autotune.knob_worth import get_worth_info
    from autotune.selection import failed_when_remeasured

    study = make_study(("loop", "float32", "ok", 10.0, 300), ("numba", "float16", "ok", 30.0, 250),
                       ("scan", "float16", "ok", 5.0, 250))
    document = {**DOCUMENT, "config": {"kernel": "loop", "dtype": "float32"}, "trial": 0, "remeasure": {"candidates": [
        {"trial": 0, "role": "baseline", "passed": True, "statuses": ["ok", "ok"]},
        {"trial": 1, "role": "candidate", "passed": False, "statuses": ["incorrect"], "error": "its twin fails"},
        {"trial": 2, "role": "candidate", "passed": True, "statuses": ["ok", "ok"]}]}}
    failed = failed_when_remeasured(document)
    # With what it said (the row said "incorrect when re-measured", not why); an export before 2026-12-07 had none.
    assert failed == {1: "incorrect when re-measured (its twin fails)"} and failed_when_remeasured(None) == {}
    before = {"remeasure": {"candidates": [{k: v for k, v in c.items() if k != "error"}
                                           for c in document["remeasure"]["candidates"]]}}
    assert failed_when_remeasured(before) == {1: "incorrect when re-measured"}
    rows = table_rows(study, known_space(), failed)
    assert [row["error"] for row in rows] == [None, "incorrect when re-measured (its twin fails): it cannot win", None]
    assert [row["error"] for row in build_report(study, document, space=known_space()).table] == [
        row["error"] for row in rows]
    info = get_worth_info(study.trials, document["config"], known_space(), None, failed)
    assert [(r["knob"], r["without_trial"]) for r in info["rows"]] == [("dtype", 2), ("kernel", 2)]  # not #1
    assert [r["without_trial"] for r in get_worth_info(study.trials, document["config"], known_space())[
        "rows"]] == [1, 1]  # as it read before
