"""benchmarks/planted_load.py: a search beside planted busy loops, and what it exports and says."""

import pytest

from tests.conftest import TESTS, load_benchmark


@pytest.mark.slow  # 27 s on this 2-core CPU: every round beside the loop is made up
def test_a_search_beside_a_busy_loop_says_which_trials_it_met(capsys):
    workload = f"{TESTS / 'workloads' / 'steady.py'}:SteadyWorkload"
    main = load_benchmark("planted_load").main
    # The loop runs through the whole search (started at once, for longer than it takes), on one core of its own.
    assert main(["--workload", workload, "--trials", "3", "--loops", "1", "--start", "0", "--seconds", "600"]) == 0
    out = capsys.readouterr().out
    assert "1 busy loops from 0 s for 600 s" in out and "exported:" in out
    assert "trials timed beside other work: #0 (" in out


def test_the_busy_loops_stop_when_told(capsys):
    import threading
    import time

    plant = load_benchmark("planted_load").plant
    stop = threading.Event()
    loader = threading.Thread(target=plant, args=(1, 0.0, 600.0, stop))
    started = time.perf_counter()
    loader.start()
    time.sleep(0.5)
    stop.set()
    loader.join(timeout=60)
    assert not loader.is_alive() and time.perf_counter() - started < 30
