"""benchmarks/allocator_regimes.py: one config in fresh processes of three kinds, each figure printed."""

import re
from pathlib import Path

import pytest

from tests.conftest import load_benchmark

ROOT = Path(__file__).resolve().parent.parent


def test_each_kind_of_process_measures_the_config_and_the_summary_reads_them(capsys, monkeypatch):
    monkeypatch.chdir(ROOT / "tests" / "workloads")  # the steady workload, as a user names a file of theirs
    main = load_benchmark("allocator_regimes").main
    assert main(["-w", "steady.py:SteadyWorkload", "-s", "tiny", "--set", "work=50", "--processes", "2",
                 "--min-time", "0.05", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    row = r"^process \d: autotune ([\d,]+), pinned ([\d,]+), script ([\d,]+) items/s \(([\d,]+) page faults"
    rows = re.findall(row, out, re.M)
    assert len(rows) == 2, out
    # 100 items a run of 1 ms (work 50): each kind near 100,000 items/s, whatever its allocator does
    assert all(50_000 < int(figure.replace(",", "")) < 110_000 for row in rows for figure in row[:3]), out
    for kind in ("autotune", "pinned", "script"):
        assert re.search(rf"^{kind} +smallest [\d,]+ +median [\d,]+ +largest [\d,]+ items/s", out, re.M), out


def test_a_run_that_fails_ends_the_benchmark_with_its_error(monkeypatch):
    monkeypatch.chdir(ROOT / "tests" / "workloads")
    main = load_benchmark("allocator_regimes").main
    with pytest.raises(SystemExit, match="autotune run failed .*work"):
        main(["-w", "steady.py:SteadyWorkload", "-s", "tiny", "--set", "work=0", "--processes", "1"])
