"""How a stored explanation reads (:mod:`autotune.explain_view`): the claims table's cells, the warnings, the
waterfall's bars and the report's section, from hand-made explanations whose every figure is known.

`tests/test_explain.py` measures explanations of a synthetic workload and checks the text they give; these pin
the edges those cannot reach: a claim without a figure, a compile's cost at the threshold, a config exactly at
the target, a file the report cannot read.
"""

import pytest

from autotune.explain import NEGLIGIBLE
from autotune.explain_view import beaten_by, claims_html, explain_section, explain_text, get_explain_info

TARGET = {"value": 2.0, "low": 1.9, "high": 2.1}


def _fix(knob="kernel", **figures):
    return {"knob": knob, "from": "slow", "to": "fast", "verdict": "confirmed", **figures}


def _doc(*fixes, path=(), **more):
    """An explanation as `autotune explain` stores it, with the figures a test gives and nothing measured else."""
    return {"schema_version": 1, "workload": "fixes", "size": "tiny", "device": "cpu", "rounds": 2,
            "configs_measured": 3, "method": "a method", "measured_at": "2026-11-29T12:00:00+0000",
            "baseline": {"throughput": 10.0, "unit": "items", "config": {"kernel": "slow"}},
            "target": {"throughput": 20.0, "speedup": TARGET, "config": {"kernel": "fast"}},
            "fixes": list(fixes), "path": list(path), **more}


def _row(fix, baseline=None):
    doc = _doc(fix)
    if baseline is not None:
        doc["baseline"] = {**doc["baseline"], **baseline}
    return get_explain_info(doc)["rows"][0]


@pytest.mark.parametrize("claim, claimed", [
    (None, "-"),
    ({"text": "a guide: faster"}, "no figure"),
    ({"text": "a guide: faster", "gain": []}, "no figure"),
    ({"text": "a guide: 3x", "gain": [3, 3]}, "3x"),
    ({"text": "a guide: 5-20%", "gain": [1.05, 1.2]}, "1.05-1.2x"),
])
def test_a_claim_reads_as_its_one_figure_its_range_or_no_figure(claim, claimed):
    row = _row(_fix(claim=claim))
    assert (row["claimed"], row["claim"]) == (claimed, (claim or {}).get("text", ""))


@pytest.mark.parametrize("once, before, said", [
    (1.6, 0.5, "1.6 s once a job (the baseline's 0.5 s)"),  # 1.1 s more than the baseline's, once a job
    (1.5, 0.5, None),  # exactly ONE_OFF_SAID more: not said, as the summary does not say it
    (2.5, 2.0, None),  # both pay a build; the fix adds half a second
    (None, 0.5, None),
    (30.0, None, None),  # the baseline's not recorded: nothing to compare with
    (1234.4, 0.5, "1,234 s once a job (the baseline's 0.5 s)"),  # not "1.23e+03 s"
])
def test_a_fix_s_build_and_first_run_is_noted_only_above_one_second_over_the_baseline_s(once, before, said):
    row = _row(_fix(alone_one_off_seconds=once), baseline={"one_off_seconds": before})
    assert row["note"] == (f"alone, its build and first run take {said}" if said else "")


@pytest.mark.parametrize("figures, note", [
    ({"alone_with": ["dtype"], "verdict_from": "in_winner", "alone": TARGET},
     "alone with dtype, so the verdict is from in the winner"),
    ({"alone_with": ["dtype", "batch"]}, "alone with dtype, batch"),
    ({"alone_with": ["dtype"], "verdict_from": "in_winner"}, "alone with dtype"),  # no alone figure to set aside
    ({"alone_not_allowed": "dtype float16 needs kernel fast"}, "alone: dtype float16 needs kernel fast"),
    ({"removed_with": ["batch"]}, "removed with batch"),
    ({"removed_not_allowed": "kernel slow leaves batch without effect"},
     "removed: kernel slow leaves batch without effect"),
    ({"error": "incorrect: error 0.5 > tolerance 1e-05"}, "incorrect: error 0.5 > tolerance 1e-05"),
    ({"alone_with": ["dtype"], "removed_with": ["batch"], "error": "oom"}, "alone with dtype; removed with batch; oom"),
])
def test_a_fix_s_note_says_what_else_each_of_its_moves_took_and_why_one_could_not_be_made(figures, note):
    # The verdict's figures are only as good as these words: a move that brought another knob along, or could not
    # be made, reads as a plain "alone" or "in the winner" without them.
    assert _row(_fix(**figures))["note"] == note


SLOWER, FASTER = {"value": 0.8, "low": 0.78, "high": 0.86}, {"value": 2.13, "low": 2.11, "high": 2.22}
NONE = {"value": 1.01, "low": 0.99, "high": 1.04}


@pytest.mark.parametrize("figures, note", [
    ({"alone": SLOWER, "in_winner": FASTER}, "slower alone, faster in the winner: it pays beside the winner's other "
                                             "fixes"),
    ({"alone": FASTER, "in_winner": SLOWER}, "faster alone, slower in the winner: beside the winner's other fixes it "
                                             "costs"),
    ({"alone": SLOWER, "in_winner": SLOWER}, ""),
    ({"alone": SLOWER, "in_winner": NONE}, ""),  # no effect in the winner: nothing the verdict hides
    ({"alone": SLOWER, "in_winner": None}, ""),  # the winner without it failed
    ({"alone": SLOWER, "in_winner": FASTER, "alone_with": ["dtype"], "verdict_from": "in_winner"},
     "alone with dtype, so the verdict is from in the winner"),  # the verdict reads the winner's already
])
def test_a_fix_whose_two_figures_point_opposite_ways_says_so_beside_the_verdict_from_one(figures, note):
    # An MLP's bfloat16 on this CPU: 0.81x alone, 2.13x in the winner (large batches); its verdict, "slower",
    # stood beside a winner that holds it, with no word that it pays there.
    assert _row(_fix(**figures))["note"] == note


def test_the_steps_keep_a_path_step_without_a_figure_which_the_waterfall_leaves_out():
    pytest.importorskip("plotly")
    from autotune.explain_view import draw_waterfall

    path = [{"knob": "kernel", "speedup": None}, {"knob": "batch", "speedup": {"value": 2.0, "low": 1.9, "high": 2.1}}]
    info = get_explain_info(_doc(path=path))
    assert [(step["label"], step["speedup"]) for step in info["steps"]] == [
        ("baseline", 1.0), ("+ kernel", None), ("+ kernel + batch", 2.0)]
    assert list(draw_waterfall(info).data[0].x) == ["baseline", "+ kernel + batch"]


def test_a_config_above_the_target_is_said_only_where_its_interval_and_value_clear_the_target_s():
    above = {"value": 2.5, "low": 2.2, "high": 2.9}
    assert beaten_by(_doc(_fix(alone=above))).startswith(
        "warning: the baseline with kernel slow -> fast alone ran at 2.50x [2.20, 2.90] over the baseline, above the "
        "target's 2.00x [1.90, 2.10]: the target is not the fastest config")
    assert beaten_by(_doc(_fix(alone={**above, "low": TARGET["high"]}))) is None  # the intervals touch
    at_noise = {"value": TARGET["value"] * (1 + NEGLIGIBLE), "low": 2.11, "high": 2.2}
    assert beaten_by(_doc(_fix(alone=at_noise))) is None  # by no more than two runs of one config differ
    assert beaten_by(_doc(_fix(alone={**at_noise, "value": at_noise["value"] + 0.01}))) is not None
    # The fastest of several is named: the path's step here, over the target without the fix.
    doc = _doc(_fix(removed={**above, "value": 2.4}), path=[{"knob": "kernel", "speedup": above}])
    assert beaten_by(doc).startswith("warning: the path's step + kernel ran at 2.50x")
    assert beaten_by(_doc(_fix(alone=above), target={"speedup": None})) is None  # a target that failed


def test_the_text_names_the_size_asked_for_else_the_stored_one():
    assert explain_text(_doc()).startswith("fixes (tiny) on cpu: baseline 10 items/s, target 20 items/s, 2.00x")
    assert explain_text(_doc(), size="small").startswith("fixes (small) on cpu: ")


def test_the_waterfall_starts_at_1x_and_each_later_bar_is_its_step_s_change():
    pytest.importorskip("plotly")
    from autotune.explain_view import draw_waterfall

    path = [{"knob": "kernel", "speedup": {"value": 1.5, "low": 1.4, "high": 1.6}},
            {"knob": "batch", "speedup": {"value": 2.0, "low": 1.9, "high": 2.1}}]
    bars = draw_waterfall(get_explain_info(_doc(path=path)))
    assert list(bars.data[0].measure) == ["absolute", "relative", "relative"]
    assert list(bars.data[0].y) == pytest.approx([1.0, 0.5, 0.5])
    assert list(bars.data[0].text) == ["1.00x", "1.50x", "2.00x"]
    assert bars.layout.showlegend is False  # one trace: a legend would say "trace 0" and nothing else
    # Each bar named by its fix, its figure above it, the axis and the figure saying what they show.
    assert list(bars.data[0].x) == ["baseline", "+ kernel", "+ batch"] and bars.data[0].textposition == "outside"
    assert (bars.layout.yaxis.title.text, bars.layout.title.text) == (
        "speedup over the baseline", "From the baseline to the winner, one fix at a time")


def test_the_report_s_section_says_what_it_explains_against_the_export():
    pytest.importorskip("plotly")
    doc = _doc()

    def described(config):
        return f"kernel {config.get('kernel')}"

    title, figure, note, table = explain_section(doc, {"kernel": "fast"}, described)
    assert (title, note) == ("What each fix bought (autotune explain)", None) and figure is not None
    assert "Measured 2026-11-29T12:00:00+0000 by autotune explain" in table
    note = explain_section(doc, {"kernel": "slow"}, described)[2]
    assert note == "This explains kernel fast, not the exported winner: run `autotune explain` for it."
    note = explain_section(doc, None, described)[2]
    assert note == "This explains kernel fast; this study has no export of its own to compare with."
    # A warning is added to the note, as the text says it.
    note = explain_section(_doc(_fix(alone={"value": 2.5, "low": 2.2, "high": 2.9})), None, described)[2]
    assert note.startswith("This explains kernel fast; this study has no export of its own to compare with. "
                           "Warning: the baseline with kernel slow -> fast alone ran at 2.50x")
    # A file without the time it was measured says neither "None" nor a gap.
    assert "<small>Measured by autotune explain;" in claims_html(get_explain_info({**doc, "measured_at": None}))


def test_the_report_s_section_without_an_explanation_or_with_an_unreadable_one_is_a_note_alone():
    title, figure, note, table = explain_section(None, {"kernel": "fast"}, str)
    assert (title, figure, table) == ("What each fix bought", None, None)
    assert note.startswith("No explanation of this study yet: `autotune explain` measures each fix alone")
    for unreadable, said in [({"schema_version": 0}, "ValueError: not JSON of an explanation this version reads"),
                             ({**_doc(_fix()), "path": 5}, "TypeError: 'int' object is not iterable"),
                             ({k: v for k, v in _doc().items() if k != "rounds"} | {"stopped": True}, "KeyError")]:
        title, figure, note, table = explain_section(unreadable, None, str)
        assert (title, figure, table) == ("What each fix bought", None, None)
        assert note.startswith(f"The stored explanation could not be read ({said}"), note
        assert note.endswith("): run `autotune explain` again to measure it anew.")
