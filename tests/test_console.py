"""What a person reads (:mod:`autotune.console`): figures as text at their edges, and the lines of `autotune
devices` and `best`, from hand-made values whose every figure is known.

`tests/test_cli.py` and `tests/test_tuner.py` read these through whole commands and searches; these pin the
thresholds and fallbacks those cannot reach quickly.
"""

import math
from types import SimpleNamespace

import pytest

from autotune import console
from autotune.console import (borrowed_cores, candidate_json, devices_json, devices_text, figures_row, first_run_peak,
                              format_bytes, interval_said, one_off_line, plural, rate, seconds, speedup_text,
                              three_figures, tuned_with, warnings_only)
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
    assert peak(110 * 2**20, 100 * 2**20) == ""  # a tenth above exactly
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
    assert tuned_with({"python": "3.11.9"}, None) == ["  tuned with       Python 3.11.9"]  # no torch: nothing to compare
    assert tuned_with({"cpu_threads": 4}, "2026-11-25") == []  # threads alone say nothing of the setup
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
