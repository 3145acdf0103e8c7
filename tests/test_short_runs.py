"""benchmarks/short_runs.py: fresh trials of one config, its runs timed one by one and in blocks."""

import pytest

from tests.conftest import TESTS, load_benchmark


def test_it_times_a_config_s_short_runs_each_way_and_says_their_spread(capsys):
    workload = f"{TESTS / 'workloads' / 'steady.py'}:SteadyWorkload"
    main = load_benchmark("short_runs").main
    # Sleeps of 0.02 ms or so: a 200th of 0.05 s is 0.25 ms, so blocks hold several of them.
    assert main(["--workload", workload, "--set", "work=1", "--trials", "2", "--min-time", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "steady (tiny) on cpu work=1: 2 fresh trials each way, in turn" in out
    alone, blocks = (int(line.split(": ")[1].split(" runs")[0].replace(",", "")) for line in out.splitlines()[1:3])
    assert alone <= 200 < blocks and "x apart, sd" in out


def test_it_needs_two_trials_to_say_a_spread():
    with pytest.raises(SystemExit) as exited:
        load_benchmark("short_runs").main(["--trials", "1"])
    assert exited.value.code == 2
