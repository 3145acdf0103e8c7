"""What a person reads (:mod:`autotune.console`): figures as text at their edges, and the lines of `autotune
devices` and `best`, from hand-made values whose every figure is known.

`tests/test_cli.py` and `tests/test_tuner.py` read these through whole commands and searches; these pin the
thresholds and fallbacks those cannot reach quickly.
"""

import math
import os
from types import SimpleNamespace

import pytest

from autotune import console
from autotune.config import Config
from autotune.console import (best_text, borrowed_cores, candidate_json, check_line, devices_json, devices_text,
                              error_against, figures_row, first_run_peak, format_bytes, interval_said, one_off_line,
                              one_off_words, plural, rate, result_json, result_table, run_text, seconds, speedup_text,
                              three_figures, tuned_with, warnings_only)
from autotune.runner import TrialResult
from autotune.choices import ChoiceOutcome
from autotune.selection import Candidate
from autotune.devices import DetectedDevice, DeviceProfile


@pytest.mark.parametrize("value, text", [
    (None, "-"), (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (2**20 - 1, "1024.0 KiB"), (2**20, "1.0 MiB"),
    (1.5 * 2**30, "1.5 GiB"), (2**40, "1024.0 GiB"),
])
def test_bytes_read_in_the_largest_unit_they_fill(value, text):
    assert format_bytes(value) == text


@pytest.mark.parametrize("value, unit, text", [
    (None, "items", "-"), (math.nan, "items", "-"), (math.inf, "items", "-"), (-math.inf, "items", "-"),
    (100.0, "images", "100 images/s"), (12345.6, "images", "12,346 images/s"),
    (99.4, "images", "99.4 images/s"), (0.012345, None, "0.0123 items/s"), (250.0, None, "250 items/s"),
])
def test_a_rate_has_no_decimals_from_100_up_and_three_figures_below(value, unit, text):
    assert rate(value, unit) == text


@pytest.mark.parametrize("value, text", [
    (0.012345, "0.0123"), (37.46, "37.5"), (99.94, "99.9"), (99.96, "100"), (615.2, "615"), (999.6, "1,000"),
    (1234.4, "1,234"), (86400.0, "86,400"),
])
def test_three_figures_never_take_an_exponent(value, text):
    assert three_figures(value) == text and seconds(value) == f"{text} s"


def test_a_one_off_of_over_1000_s_reads_in_seconds_not_an_exponent():
    # A cold compile at a larger size (615 s for ten at small on this CPU) read "1.23e+03 s" past 1,000 s, and so
    # did the runs that pay it back.
    said = one_off_line({"one_off_seconds": 1234.0, "throughput": 100.0, "unit": "items"},
                        {"one_off_seconds": 0.5, "throughput": 10.0})
    assert said == (f"  {'one-off':<16} {'1,234 s':>24}   build and first run, once a job (the baseline's 0.5 s): "
                    "ahead of the baseline after 13,706 items, 1,371 s of its runs")


def test_counts_speedups_and_interval_edges():
    assert [plural(n, "round") for n in (0, 1, 2)] == ["0 rounds", "1 round", "2 rounds"]
    assert [speedup_text(v) for v in (None, 0.0, 2.0, 1.005)] == ["-", "-", "2.00x", "1.00x"]
    # The re-measurement's interval is read from an export's JSON (a mapping) or its document (an attribute).
    # No exponent at any size: 999.6 read "1e+03" (three significant digits below 1,000).
    assert interval_said({"remeasure": {"speedup_interval": [999.6, 1000.0]}}) == "95% interval [1,000, 1,000]"
    assert interval_said({"remeasure": {"speedup_interval": [99.96, 272.4]}}) == "95% interval [100, 272]"
    assert interval_said(SimpleNamespace(remeasure={"speedup_interval": [0.5, 2]})) == "95% interval [0.5, 2]"
    assert interval_said(SimpleNamespace(remeasure=None)) is None
    assert interval_said({"remeasure": {"speedup_interval": [1.0, 2.0, 3.0]}}) is None
    assert interval_said({"remeasure": [1.0, 2.0]}) is None


def test_only_warnings_are_told_where_a_command_shows_no_progress(capsys):
    warnings_only("measuring the reference")
    warnings_only("note: a note")
    warnings_only("warning: the winner is noisy")
    assert capsys.readouterr().err == "autotune: warning: the winner is noisy\n"


@pytest.mark.parametrize("cores, threads, said", [
    (1.25, 1, "1.2 cores busy, more than its 1 thread"), (3.0, 2, "3.0 cores busy, more than its 2 threads"),
    (1.004, 1, ""), (None, 1, ""), (1.5, None, ""),
])
def test_cores_beyond_a_trial_s_threads(cores, threads, said):
    assert borrowed_cores(cores, threads) == said


def test_a_first_run_s_peak_is_said_only_over_a_tenth_above_the_runs():
    def peak(first, runs):
        return first_run_peak(SimpleNamespace(first_run_peak_memory_bytes=first, peak_memory_bytes=runs))

    assert peak(134.6 * 2**20, 74.2 * 2**20) == " (its first run: 134.6 MiB)"
    assert 1.1 * 10 == 11 and peak(11, 10) == ""  # a tenth above exactly
    assert peak(111 * 2**20, 100 * 2**20) == " (its first run: 111.0 MiB)"
    assert peak(None, 100) == "" and peak(200, None) == "" and peak(200, 0) == ""


def test_a_row_of_figures_says_what_it_lacks_and_why():
    assert figures_row("baseline", None, "oom when re-measured") == "  baseline         -  (oom when re-measured)"
    assert figures_row("baseline", {}) == "  baseline         -"
    row = figures_row("best", {"throughput": 250.0, "unit": "images", "peak_memory_bytes": 2**20,
                               "relative_spread": 0.034, "noisy": True})
    assert row == f"  {'best':<16} {'250 images/s':>24}  {'1.0 MiB':>10}  ±3.4% (noisy)"
    assert figures_row("best", {"throughput": 5.0}).endswith(f"{'5 items/s':>24}  {'-':>10}  -")
    assert candidate_json(None) is None


def test_tuned_with_names_the_export_s_setup_and_this_machine_s_torch_where_it_differs(monkeypatch):
    monkeypatch.setattr(console.importlib.metadata, "version", lambda name: "2.13.0")
    full = {"torch": "2.11.0+cu130", "cuda": "13.0", "python": "3.12.3", "cpu_threads": 1}
    assert tuned_with(full, "2026-11-25T10:00:00+0000") == [
        "  tuned with       torch 2.11.0+cu130, CUDA 13.0, Python 3.12.3, 1 CPU thread, on 2026-11-25 "
        "(here: torch 2.13.0)"]
    assert tuned_with({"torch": "2.13.0", "cpu_threads": 2}, None) == ["  tuned with       torch 2.13.0, 2 CPU threads"]
    assert tuned_with({"python": "3.11.9"}, None) == ["  tuned with       Python 3.11.9"]  # no torch to compare
    assert tuned_with({"cpu_threads": 4}, "2026-11-25") == []  # threads alone say nothing of the setup
    # The budget the winner was chosen under: `best` showed a loader's 1.00x and no word that its faster configs,
    # with workers, were over --memory-budget 400MiB.
    assert tuned_with({"torch": "2.13.0"}, "2026-12-07", 400 * 2**20) == [
        "  tuned with       torch 2.13.0, on 2026-12-07, under --memory-budget 400.0 MiB"]
    assert tuned_with({"torch": "2.13.0"}, None, None) == tuned_with({"torch": "2.13.0"}, None, "x") == [
        "  tuned with       torch 2.13.0"]  # none, or a hand-written export's word: said as none
    assert tuned_with({}, None) == []

    def no_torch(name):
        raise console.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(console.importlib.metadata, "version", no_torch)
    assert tuned_with({"torch": "2.11.0"}, None) == ["  tuned with       torch 2.11.0"]


def test_devices_lists_what_was_found_then_every_profile():
    profile = DeviceProfile("h200", "cuda", "NVIDIA H200", frozenset({"cuda", "bf16"}), memory_bytes=141 * 2**30,
                            lacks=(("compile", "torch.compile needs a C++ compiler"),))
    found = [DetectedDevice(profile, "NVIDIA H200", 139 * 2**30, 0, {"cc": "9.0"})]
    other = DeviceProfile("cpu", "cpu", "the host CPU", frozenset({"cpu", "fp64"}))
    text = devices_text(found, {"h200": profile, "cpu": other})
    assert text.splitlines() == [
        "Detected (--device auto picks the first, --device cuda the first CUDA GPU):",
        "  h200         NVIDIA H200  139.0 GiB  cc=9.0",
        "               capabilities here: bf16, cuda",
        "               lacks compile: torch.compile needs a C++ compiler",
        "",
        "Profiles:",
        f"  h200         {'NVIDIA H200':<58} {'141.0 GiB':>10}  bf16, cuda",
        f"  cpu          {'the host CPU':<58} {'-':>10}  cpu, fp64",
    ]
    assert devices_json(found, {"cpu": other}) == {
        "detected": [{"profile": "h200", "name": "NVIDIA H200", "memory_bytes": 139 * 2**30, "cc": "9.0",
                      "capabilities": ["bf16", "cuda"], "lacks": {"compile": "torch.compile needs a C++ compiler"}}],
        "profiles": {"cpu": {"kind": "cpu", "description": "the host CPU", "memory_bytes": None,
                             "capabilities": ["cpu", "fp64"]}}}


@pytest.mark.parametrize("once, before, ours, theirs, said", [
    (2.6, 1.0, 100.0, 10.0, (2.6, "once a job (the baseline's 1 s): ahead of the baseline after 18 images, 1.78 s "
                                   "of its runs")),
    (2.0, 1.0, 100.0, 10.0, None),  # exactly ONE_OFF_SAID more
    (1.5, 0.6, 100.0, 10.0, None),  # 0.9 s more
    (2.0, None, 100.0, 10.0, (2.0, "once a job (the baseline's 0 s): ahead of the baseline after 22 images, 2.22 s "
                                    "of its runs")),  # the baseline's unrecorded: nothing paid once
    (30.0, 1.0, 10.0, 10.0, None),  # no faster a run: never ahead
    (30.0, 1.0, 5.0, 10.0, None),  # slower a run: never ahead
    (None, 1.0, 100.0, 10.0, None),
])
def test_a_one_off_is_said_where_it_costs_over_a_second_more_with_when_it_is_gained_back(once, before, ours, theirs,
                                                                                        said):
    winner = {"one_off_seconds": once, "throughput": ours, "unit": "images"}
    assert one_off_words(winner, {"one_off_seconds": before, "throughput": theirs}) == said
    assert one_off_words({**winner, "unit": None}, {"one_off_seconds": before, "throughput": theirs}) == (
        said and (said[0], said[1].replace("images", "items")))
    assert one_off_words(winner, None) is None and one_off_words(None, {"throughput": theirs}) is None
    assert one_off_line(winner, {"one_off_seconds": before, "throughput": theirs}) == (
        said and f"  {'one-off':<16} {seconds(said[0]):>24}   build and first run, {said[1]}")


def test_an_error_reads_with_the_digits_that_tell_it_from_its_tolerance():
    assert error_against(0.0123, 0.1) == ("0.012", "0.1")  # two, where two tell them apart
    assert error_against(1.04e-6, 1e-6) == ("1.04e-06", "1e-06")
    assert error_against(1.00041e-6, 1e-6) == ("1.0004e-06", "1e-06")  # one digit more at a time, no more
    assert error_against(None, 0.02) == ("inf", "0.02")
    assert check_line(None) == "not checked"
    assert check_line({"passed": True, "metrics": {"output": [0.02, 0.02]}}) == "passed: output 0.02 <= 0.02"
    assert check_line({"passed": False, "metrics": {"output": [None, 0.02]}}) == "FAILED: output inf > 0.02"


def _result(status="ok", error=None, **figures):
    return TrialResult(status, {"x": 1}, unit="items", items_per_run=1, throughput=10.0, times=[0.1] * 3,
                       median_seconds=0.1, warmup_seconds=0.25, error=error, **figures)


def test_run_says_its_spread_and_its_error_only_where_it_failed():
    text = run_text(_result(relative_spread=0.034), Config(x=1), "w", "cpu", "tiny")
    assert "over 3 runs, spread ±3.4%); first run 0.25 s\n" in text and "error" not in text
    assert "spread ±0.0%)" in run_text(_result(), Config(x=1), "w", "cpu", "tiny")  # a spread not recorded
    assert run_text(_result("crash", "process died from SIGSEGV"), Config(x=1), "w", "cpu", "tiny").endswith(
        "\n  error        process died from SIGSEGV")
    assert "error" not in run_text(_result(error="a note the runner kept"), Config(x=1), "w", "cpu", "tiny")
    assert "error" not in run_text(_result("crash"), Config(x=1), "w", "cpu", "tiny")


def test_best_names_the_trial_where_the_export_has_one():
    def first_lines(trial):
        doc = SimpleNamespace(workload="w", size=None, device="cpu", device_name=None, trial=trial, config={"x": 1},
                              measured=None, baseline=None, speedup=None, check=None, environment=None,
                              exported_at=None, remeasure=None)
        return best_text(doc, "x.json").splitlines()[:2]

    assert first_lines(7) == ["w on cpu, from x.json", "Best config (trial #7): x=1"]
    assert first_lines(0)[1] == "Best config (trial #0): x=1"
    assert first_lines(None)[1] == "Best config: x=1"


def _rounds(seconds_each, n=3):
    return [TrialResult("ok", {}, unit="items", items_per_run=1, times=[seconds_each] * 5) for _ in range(n)]


def _table(**changes):
    baseline = Candidate(Config(x=0), 0, "baseline", _rounds(1.0))
    winner = Candidate(Config(x=1), 3, "candidate", _rounds(0.25))
    fields = dict(workload="w", size="tiny", device="cpu", study_name="s", seconds=12.4, counts={"ok": 4},
                  trials=[SimpleNamespace(duplicate_of=None)] * 4, winner=winner, baseline=baseline, speedup=4.0,
                  choices=[], candidates=[baseline, winner], export_path="x.json", unused=(), restricted=0,
                  only_baseline=False, storage="sqlite:///s.db", unit="items", document=None)
    return SimpleNamespace(**{**fields, **changes})


def test_a_search_s_summary_puts_each_line_where_it_belongs():
    # Every optional line at once, in the order they read: each was inserted counting from the end.
    result = _table()
    result.winner.search_one_off = 30.0
    slower = Candidate(Config(x=2), 5, "candidate", _rounds(0.5))
    result.candidates.append(slower)
    result.choices = [ChoiceOutcome("x", 1, 1, 4.0, {"ok": 1}, True),
                      ChoiceOutcome("x", 9, 0, None, {}, False, ruled_out="x * 2 <= 10")]
    result.trials = [SimpleNamespace(duplicate_of=None)] * 3 + [SimpleNamespace(duplicate_of=1)] * 2
    result.restricted = 1
    lines = result_table(result).splitlines()
    assert lines[0] == ("w (tiny) on cpu: study s, 3 configs measured this run (+2 repeats not re-run); in the study: "
                        "ok 4 (and 1 ask for a config that breaks a constraint: never measured); 12 s")
    assert [line.split()[0] if line.strip() else "" for line in lines[1:]] == [
        "Best", "", "throughput", "best", "baseline", "speedup", "one-off", "check", "", "What", "x", "x",
        "other", "", "Exported"]
    assert lines[-6:-3] == ["What each choice did (best correct throughput in the study; how its trials ended):",
                            "  x                1            winner                  4 items/s  ok 1",
                            "  x                9            ruled out                       -  breaks x * 2 <= 10"]
    assert lines[-3] == "  other candidates: #5 2 items/s"
    assert lines[5] == f"  {'baseline #0':<16} {'1 items/s':>24}  {'-':>10}  ±0.0%"
    # A tie the baseline won, the only-baseline warning and a warning of other work, from the end too.
    tie = _table(winner=None, only_baseline=True, speedup=1.0)
    tie.winner = tie.baseline
    tie.candidates[1].results = _rounds(0.99)
    tie.baseline.results[0].busy_elsewhere = 1.5
    lines = result_table(tie).splitlines()
    assert [line.split(":")[0].strip() for line in lines[-7:-3]] == [
        "check            not checked", "note", "a candidate's median was 1.01% faster", "warning"]
    assert lines[-4].startswith("  warning: the study measured only the baseline")
    assert lines[-3:] == ["  other candidates: #3 1.01 items/s", "", "Exported to x.json"]
    # Within the noise of runs spread wide (vlm_mc's on the H200: 25%), a median may be 100% faster or more: it
    # read "1.5e+02% faster".
    tie.candidates[1].results = _rounds(0.4)
    assert "  a candidate's median was 150% faster: within the runs' noise" in result_table(tie)


def test_a_search_that_exports_nothing_says_why_in_one_line():
    none_may_win = _table(winner=None, counts={"ok": 2})
    for candidate in none_may_win.candidates:
        candidate.results = []
    assert result_table(none_may_win).splitlines()[1].startswith(
        "2 configs passed their check, but none may win: each is over the memory budget")
    # Re-measured, none passed again: the first failed candidate's words, not the baseline's, not an ok round's.
    failed = _table(winner=None, counts={"ok": 2})
    failed.candidates[0].results = [_result("oom", "baseline out of memory")]
    failed.candidates[1].results = [_result(error="an ok round's note"), _result("crash", "process died from SIGSEGV")]
    assert result_table(failed).splitlines()[1] == (
        "2 configs passed their check, but none of them passed again when re-measured (candidate #3: crash when "
        "re-measured: process died from SIGSEGV): nothing exported.")
    failed.candidates[1].results = [_result("crash")]
    assert result_table(failed).splitlines()[1] == (
        "2 configs passed their check, but none of them passed again when re-measured (candidate #3: crash when "
        "re-measured): nothing exported.")
    timeouts = _table(winner=None, counts={"timeout": 3})
    assert result_table(timeouts).splitlines()[1].endswith(
        "nothing exported. Each ran past the trial timeout: a measurement takes a first run, a warm-up and 3 timed "
        "runs at least, so raise --trial-timeout or take a smaller --size.")
    crashed = _table(winner=None, counts={"timeout": 3, "crash": 1})
    assert result_table(crashed).splitlines()[1].endswith("`autotune report`): nothing exported.")
    wrong = _table(winner=None, counts={"incorrect": 3, "ok": 0})
    assert result_table(wrong).splitlines()[1:] == ["No configuration passed its correctness check: nothing exported."]


def test_the_json_of_a_search_holds_its_winner_baseline_and_candidates():
    result = _table(document=SimpleNamespace(remeasure={"speedup_interval": [3.9, 4.1]}), unused=("y",))
    said = result_json(result)
    assert said["winner"] == {"trial": 3, "config": {"x": 1}, "passed": True, "measured": result.winner.figures(),
                              "check": None, "statuses": ["ok", "ok", "ok"], "error": None}
    assert said["baseline"]["trial"] == 0 and [c["trial"] for c in said["candidates"]] == [0, 3]
    assert (said["speedup"], said["speedup_interval"], said["unused"], said["trials_run"]) == (4.0, [3.9, 4.1],
                                                                                            ["y"], 4)
    assert result_json(_table(document=None))["speedup_interval"] is None
    assert (said["export"], result_json(_table(export_path=None))["export"]) == ("x.json", None)  # nothing exported
    assert result_json(_table(document=SimpleNamespace(remeasure=None)))["speedup_interval"] is None


def test_a_stream_sent_to_dev_null_writes_there_and_leaves_no_descriptor_open(tmp_path):
    # The stream's own descriptor now reads /dev/null (a dup of one opened for it); the one opened is closed, not
    # left open for the life of the process.
    with open(tmp_path / "log", "w") as stream:
        before = sorted(os.listdir("/proc/self/fd"))
        console.to_devnull(stream)
        assert sorted(os.listdir("/proc/self/fd")) == before
        assert os.readlink(f"/proc/self/fd/{stream.fileno()}") == os.devnull
        stream.write("dropped")
    assert (tmp_path / "log").read_text() == ""
