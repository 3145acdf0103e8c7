"""benchmarks/cold_start.py: trials of a config at the best's pace, through autotune's runner, and how many are cut."""

from tests.conftest import TESTS, load_benchmark


def test_it_measures_a_config_then_counts_the_trials_at_its_pace_cut_short(capsys):
    workload = f"{TESTS / 'workloads' / 'steady.py'}:SteadyWorkload"
    # 10 ms sleeps: under cut_min_seconds, so never judged by the cuts, whatever the machine does.
    main = load_benchmark("cold_start").main
    assert main(["--workload", workload, "--set", "work=500", "--trials", "3", "--min-time", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "steady (tiny) work=500" in out
    assert "0 of 3 trials at the best's pace cut short" in out
    assert "longest of each trial's first 5 runs" in out and "throughput of the trials measured in full" in out
