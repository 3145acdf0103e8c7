import hashlib
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autotune.measure import Measurement, Measurer, deferred_part


class FakeClock:
    """Time moves only when the fake run says so."""

    def __init__(self, durations):
        self.now = 0.0
        self.durations = list(durations)
        self.calls = 0

    def __call__(self):
        return self.now

    def run(self):
        self.now += self.durations[min(self.calls, len(self.durations) - 1)]
        self.calls += 1
        return self.calls


def test_first_run_is_kept_apart_and_warm_up_stops_when_runs_agree():
    clock = FakeClock([5.0, 1.5, 1.0, 1.0625, 0.5, 0.5, 0.5, 0.5])  # binary-exact
    outputs = []
    m = Measurer(min_time=1.2, min_runs=3, clock=clock).measure(clock.run, 100, on_output=lambda w, o: outputs.append((w, o)))
    assert m.first_run_seconds == 5.0
    assert m.warmup_times == [1.5, 1.0, 1.0625]  # 1.0 and 1.0625 agree within 10%
    assert m.times == [0.5, 0.5, 0.5]  # 3 runs and 1.5 s >= min_time
    assert m.throughput == 200.0 and m.median == 0.5 and m.iqr == 0.0 and not m.noisy
    # Then runs after the last, untimed, checked: two fit a tenth of the 10 s measured so far.
    assert outputs == [("first", 1), ("last", 7), ("run", 8), ("run", 9)]


def test_after_the_timed_runs_more_runs_are_checked_untimed_within_a_share_of_the_measurement_s_time():
    # Before, only the first and the last outputs were checked: a config wrong one run in five passed two times
    # in three. A check between timed runs slowed the next one, so the runs checked come after them.
    clock = FakeClock([0.125] * 100)  # binary-exact
    seen = []

    def check(which, output):  # each check takes half a run
        clock.now += 0.0625
        seen.append((which, output))

    m = Measurer(min_time=2.0, min_runs=3, max_warmup_runs=1, check_share=0.5, clock=clock).measure(
        clock.run, 1, on_output=check)
    assert m.times == [0.125] * 16 and seen[:2] == [("first", 1), ("last", 18)]  # timed: runs 3 to 18
    # Each one more costs a run and a check (0.1875 s): six fit half the measurement's 2.375 s (its first run,
    # warm-up run, timed runs and two checks).
    assert seen[2:] == [("run", 19), ("run", 20), ("run", 21), ("run", 22), ("run", 23), ("run", 24)]
    # None where one would cost more than the share (0.3125 s against a tenth of 2.625 s), nor after a wrong
    # output.
    clock, seen = FakeClock([0.25] * 100), []
    Measurer(min_time=2.0, min_runs=3, max_warmup_runs=1, clock=clock).measure(clock.run, 1, on_output=check)
    assert [which for which, _ in seen] == ["first", "last"]
    clock, seen = FakeClock([0.125] * 100), []
    Measurer(min_time=2.0, max_warmup_runs=1, check_share=0.5, clock=clock).measure(
        clock.run, 1, on_output=lambda w, o: seen.append(o) or o != 20)
    assert seen == [1, 18, 19, 20]


def test_runs_continue_until_minimum_time():
    clock = FakeClock([0.125] * 100)
    m = Measurer(min_time=1.0, min_runs=3, clock=clock).measure(clock.run, 1)
    assert len(m.times) == 8 and m.median == 0.125


def test_runs_shorter_than_a_share_of_the_minimum_time_are_timed_in_blocks_that_span_it(monkeypatch):
    # 200 runs of 50 us, each timed alone, spanned 10 ms of the second asked for: a fresh process's first tens
    # of ms ran a compiled MLP of mine up to 1.7x slower, at a pace its runs agreed on (README, "Honest timing").
    clock = FakeClock([2.0 ** -10] * 10_000)  # binary-exact: 32 of them are 1/32 s
    m = Measurer(min_time=0.5, max_runs=16, max_warmup_runs=1, clock=clock).measure(clock.run, 1)
    assert m.times == [2.0 ** -10] * 16  # each the mean of a block of 32 runs, min_time / max_runs = 1/32 s long
    assert m.runs == 16 * 32 and sum(m.times) * 32 == 0.5 and m.throughput == 1024
    # Each run timed alone (block_seconds=0), as before: 16 runs, 1/32 of the minimum time.
    clock = FakeClock([2.0 ** -10] * 10_000)
    m = Measurer(min_time=0.5, max_runs=16, max_warmup_runs=1, block_seconds=0, clock=clock).measure(clock.run, 1)
    assert m.times == [2.0 ** -10] * 16 and m.runs == 16
    # Runs as long as a block are timed one by one.
    clock = FakeClock([0.125] * 100)
    m = Measurer(min_time=1.0, max_runs=8, max_warmup_runs=1, clock=clock).measure(clock.run, 1)
    assert m.times == [0.125] * 8 and m.runs == 8
    # A clock that does not move (a run too short for it) ends a block at BLOCK_RUNS runs, not never.
    monkeypatch.setattr("autotune.measure.BLOCK_RUNS", 50)
    clock = FakeClock([1.0] + [0.0] * 10_000)
    m = Measurer(min_time=0.5, max_runs=16, max_warmup_runs=1, clock=clock).measure(clock.run, 1)
    assert m.runs == 16 * 50 and m.times == [0.0] * 16


def test_a_block_s_time_is_the_mean_of_its_runs_and_each_run_is_synchronised():
    clock = FakeClock([1.0] + [2.0 ** -10, 3 * 2.0 ** -10] * 5_000)  # first run, then runs of 1 and 3 ms in turn
    synced = []
    m = Measurer(min_time=0.25, max_runs=8, max_warmup_runs=0, clock=clock).measure(
        clock.run, 1, sync=lambda: synced.append(clock.calls))
    assert m.times == [2 * 2.0 ** -10] * 8 and m.runs == 8 * 16  # blocks of 1/32 s: 16 runs, their mean 2 ms
    assert synced == [c for n in range(1 + 8 * 16) for c in (n, n + 1)]  # before and after every run, blocks too
    pooled = Measurement.pooled([m, Measurement([0.5], 1, 0.5)])
    assert pooled.runs == 8 * 16 + 1 and pooled.rounds == [8, 1]


def test_noisy_runs_go_on_until_they_settle_and_quiet_ones_stop_at_the_minimum_time():
    # Two of the first three timed runs slowed by other work on the machine: their median was 18x the config's
    # time (vlm_mc's defaults at tiny in a search on this CPU: runs of 0.68, 0.83 and 0.049 s; alone, 0.037 s).
    clock = FakeClock([0.1, 0.04, 0.04, 0.68, 0.83, 0.049] + [0.037] * 100)
    m = Measurer(min_time=1.0, min_runs=3, clock=clock).measure(clock.run, 1)
    assert m.times[:3] == pytest.approx([0.68, 0.83, 0.049]) and m.median == pytest.approx(0.037)
    assert len(m.times) == 10  # its median outvotes the burst
    # Noisy to the end: long runs stop at three times the minimum time, short ones at ten runs.
    clock = FakeClock([0.5, 0.5, 0.5] + [0.5, 1.0] * 100)
    m = Measurer(min_time=1.0, min_runs=3, clock=clock).measure(clock.run, 1)
    assert m.noisy and m.times == [0.5, 0.5, 1.0, 0.5, 1.0]  # 3.5 s: past 3 s, it stops
    clock = FakeClock([0.125, 0.125, 0.125] + [0.125, 0.25] * 100)
    m = Measurer(min_time=1.0, min_runs=3, clock=clock).measure(clock.run, 1)
    assert m.noisy and len(m.times) == 10
    # Quiet runs stop at the minimum time, as before.
    clock = FakeClock([0.125] * 100)
    assert len(Measurer(min_time=1.0, min_runs=3, clock=clock).measure(clock.run, 1).times) == 8
    # What is noisy is the measurer's to say: at a threshold of 1, the runs above are quiet and stop at the minimum.
    clock = FakeClock([0.125, 0.125, 0.125] + [0.125, 0.25] * 100)
    m = Measurer(min_time=1.0, min_runs=3, noisy_threshold=1.0, clock=clock).measure(clock.run, 1)
    assert not m.noisy and len(m.times) == 6


def test_spread_and_noise_come_from_the_raw_times():
    m = Measurement([1.0, 1.0, 2.0, 2.0, 1.0], items_per_run=10, first_run_seconds=3.0)
    assert m.median == 1.0 and m.iqr == 1.0 and m.noisy and m.throughput == 10.0
    pooled = Measurement.pooled([m, Measurement([1.0], 10, 1.0)])
    assert len(pooled.times) == 6
    # Quartiles of the runs themselves (inclusive): with few runs, the exclusive method reaches past the fastest and
    # the slowest (1.25 and 3.75 of runs 1-4), and a spread of 2.5 where the middle runs lie 1 apart.
    assert Measurement([1.0, 2.0, 3.0, 4.0], 1, 0.0).iqr == 1.5
    # A measurer's threshold of noise holds for its rounds pooled: a spread of 40% is noise at 0.1, not at 0.5.
    loose = Measurement([1.0, 1.0, 1.4, 1.4, 1.0], 1, 0.0, noisy_threshold=0.5)
    assert not loose.noisy and not Measurement.pooled([loose, loose]).noisy


def test_the_sustained_figure_keeps_a_cost_paid_every_few_runs_and_drops_a_rare_stall():
    every_fourth = Measurement([0.001, 0.001, 0.001, 0.020] * 10, items_per_run=2, first_run_seconds=0.1)
    assert every_fourth.throughput == 2 / 0.001  # the median run leaves the cost out
    assert every_fourth.sustained_throughput == pytest.approx(2 / 0.00575)  # a job of many runs pays it
    stalled = Measurement([0.002] * 29 + [0.2], items_per_run=1, first_run_seconds=0.1)  # one run in 30, 100x
    assert stalled.sustained_throughput == pytest.approx(1 / 0.002)  # one stretch of five spoilt
    assert Measurement([0.5, 0.7], 1, 0.5).sustained_throughput == pytest.approx(1 / 0.6)  # few runs: a stretch each


def test_synchronises_around_every_timed_run():
    clock = FakeClock([0.2] * 20)
    events = []

    def sync():
        events.append("sync")

    def run():
        events.append("run")
        return clock.run()

    Measurer(min_time=0.0, min_runs=3, max_warmup_runs=1, clock=clock).measure(run, 1, sync)
    # sync, run, sync for the first run, the one warm-up run and three timed runs
    assert events == ["sync", "run", "sync"] * 5


def test_a_workload_s_own_synchronize_is_followed_by_its_device_s(monkeypatch):
    # A GPU workload whose synchronize waits for its own stream alone (or for nothing) timed each run's launch while
    # the work ran on: the device's own synchronize follows it.
    import torch

    from autotune.workload import Workload, synchronizer

    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append("device"))

    class Plain(Workload):
        name, unit, sizes = "plain", "items", {"tiny": {}}
        build = items_per_run = check = lambda *args: None

    class OwnStream(Plain):
        def synchronize(self):
            calls.append("own stream")

    plain, own = Plain("tiny", "cuda"), OwnStream("tiny", "cuda")
    assert synchronizer(plain) == plain.synchronize  # the device's alone, as before
    synchronizer(plain)()
    synchronizer(own)()
    assert calls == ["device", "own stream", "device"]
    synchronizer(OwnStream("tiny", "cpu"))()  # a CPU has nothing to wait for
    assert calls == ["device", "own stream", "device", "own stream"]
    monkeypatch.setattr(torch.mps, "synchronize", lambda: calls.append("apple gpu"))
    synchronizer(OwnStream("tiny", "mps"))()  # an Apple GPU queues its work as a CUDA one does
    assert calls[4:] == ["own stream", "apple gpu"]


def test_a_hopeless_config_stops_after_one_warm_run():
    clock = FakeClock([10.0])
    measurement = Measurer(min_time=1.0, hopeless_below=1.0, clock=clock).measure(clock.run, items_per_run=5)
    # 5 items in 10 s is 0.5/s, below 1/s on the first run and the first warm run: stop.
    assert measurement.cut_short and measurement.times == [10.0] and measurement.warmup_times == []


def test_a_slow_first_run_alone_does_not_cut_a_config_short():
    # Compilation makes the first run slow; the warm runs decide.
    clock = FakeClock([100.0, 0.125])
    measurement = Measurer(min_time=0.3, hopeless_below=1.0, clock=clock).measure(clock.run, items_per_run=5)
    assert not measurement.cut_short and len(measurement.times) >= 3


def test_the_race_stops_a_config_once_it_is_warm_and_too_slow():
    # 4 items in 2 s is 2/s once warm (2.0 and 2.0 agree), below the race's 3/s: stop, figure and output kept.
    clock = FakeClock([6.0, 2.0, 2.0, 2.0])
    outputs = []
    m = Measurer(min_time=1.0, race_below=3.0, clock=clock).measure(clock.run, 4, on_output=lambda w, o: outputs.append((w, o)))
    assert m.cut_short and m.times == [2.0] and m.warmup_times == [2.0] and m.first_run_seconds == 6.0
    assert outputs == [("first", 1), ("last", 3)]  # the output it is judged by is checked
    assert clock.calls == 3


def test_the_race_waits_for_the_warm_up_to_settle():
    # Still speeding up (CUDA graphs, autotuning): slow runs that do not agree never cut a config.
    clock = FakeClock([4.0, 2.0, 1.0, 0.25, 0.25])
    m = Measurer(min_time=1.0, race_below=3.0, clock=clock).measure(clock.run, 4)
    assert not m.cut_short and m.warmup_times == [2.0, 1.0, 0.25, 0.25] and m.median == 0.25


def test_the_race_lets_a_config_at_the_best_s_pace_run_in_full():
    clock = FakeClock([0.5] * 20)
    m = Measurer(min_time=1.0, race_below=3.0, clock=clock).measure(clock.run, 4)  # 8/s: above the race
    assert not m.cut_short and len(m.times) == 3


def test_the_cuts_judge_no_run_shorter_than_cut_min_seconds():
    # A fresh trial's first runs stall (chmm's 3.8 ms scan runs at tiny took 24 ms, its 8 ms loop runs 32 ms):
    # three 62.5 ms runs of a 1 ms config agree, 64/s against a best of 4,096/s, below both the race and the
    # hopeless cut. They are not judged: the config runs in full, and its figure is its own pace.
    cuts = {"race_below": 4096 / 3, "hopeless_below": 4096 / 20}
    clock = FakeClock([0.0625, 0.0625, 0.0625] + [2 ** -10] * 1000)
    m = Measurer(min_time=0.1, clock=clock, **cuts).measure(clock.run, 4)
    assert not m.cut_short and m.median == 2 ** -10
    # The same runs 0.2 s long are judged, and cut.
    clock = FakeClock([0.2, 0.2, 0.2] + [2 ** -10] * 1000)
    assert Measurer(min_time=0.1, clock=clock, **cuts).measure(clock.run, 4).cut_short
    # Each cut alone (found by mutating measure.py: the hopeless cut held back below 1 s passed every test).
    for cut in cuts:
        clock = FakeClock([0.2, 0.2, 0.2] + [2 ** -10] * 1000)
        assert Measurer(min_time=0.1, clock=clock, **{cut: cuts[cut]}).measure(clock.run, 4).cut_short, cut


def test_a_warm_up_that_never_settles_stops_at_its_run_cap():
    clock = FakeClock([2.0 ** -k for k in range(8)] + [2.0 ** -8] * 100)  # halving: no two runs agree
    m = Measurer(min_time=0.1, min_runs=3, max_warmup_runs=3, clock=clock).measure(clock.run, 1)
    assert m.warmup_times == [0.5, 0.25, 0.125] and m.times[:3] == [2 ** -4, 2 ** -5, 2 ** -6]


def test_a_wrong_first_output_stops_the_measurement():
    clock = FakeClock([3.0, 1.0])
    seen = []

    def wrong(which, output):
        seen.append(which)
        return False  # the check failed: more runs cannot make the config correct

    m = Measurer(min_time=1.0, clock=clock).measure(clock.run, 4, on_output=wrong)
    assert m.cut_short and m.times == [3.0] and seen == ["first"] and clock.calls == 1


def test_the_race_judges_the_first_timed_run_when_a_long_first_run_left_no_warm_up():
    # 13 s runs leave no warm-up (max_warmup_time 10 s); 4 items in 13 s is below the race's 3/s, and the
    # first timed run agrees with the first run: stop after it, its output checked.
    clock = FakeClock([13.0, 12.5, 12.5, 12.5])
    outputs = []
    m = Measurer(min_time=1.0, race_below=3.0, clock=clock).measure(clock.run, 4, on_output=lambda w, o: outputs.append((w, o)))
    assert m.cut_short and m.times == [12.5] and m.warmup_times == [] and clock.calls == 2
    assert outputs == [("first", 1), ("last", 2)]


def test_a_long_first_run_still_slowing_down_is_not_raced():
    # The first timed run does not agree with the first (20 s against 13 s): not yet warm, so no cut.
    clock = FakeClock([13.0, 20.0, 20.0, 20.0])
    m = Measurer(min_time=1.0, race_below=3.0, clock=clock).measure(clock.run, 4)
    assert not m.cut_short and len(m.times) == 3


def test_a_first_run_at_the_known_warm_time_needs_no_warm_up():
    # A re-measurement round: the config settled at 4 s in the search, and this fresh process's first run is there.
    clock = FakeClock([4.25, 4.0, 4.0, 4.0])
    m = Measurer(min_time=0.0, min_runs=1, warm_seconds=4.0, clock=clock).measure(clock.run, 1)
    assert m.first_run_seconds == 4.25 and m.warmup_times == [] and m.times == [4.0]


def test_a_first_run_off_the_known_warm_time_warms_up_until_a_run_agrees_with_it():
    # Compilation in the first run: one warm-up run at the known warm time is enough (two agreeing runs are not needed).
    clock = FakeClock([9.0, 1.0625, 1.0, 1.0, 1.0])
    m = Measurer(min_time=0.0, min_runs=2, warm_seconds=1.0, clock=clock).measure(clock.run, 1)
    assert m.warmup_times == [1.0625] and m.times == [1.0, 1.0]
    # Far from it (the machine is slower now, or the search's figure was off): the usual warm-up decides.
    clock = FakeClock([5.0, 2.0, 2.0, 2.0, 2.0])
    m = Measurer(min_time=0.0, min_runs=2, warm_seconds=1.0, clock=clock).measure(clock.run, 1)
    assert m.warmup_times == [2.0, 2.0] and m.times == [2.0, 2.0]


def test_a_measurement_records_the_cores_other_work_kept_busy_meanwhile():
    class Meter:
        started = []

        def __init__(self):
            Meter.started.append(self)

        def cores(self):
            return 1.3

        def own_cores(self):
            return 1.25 if self is Meter.started[-1] else None

    clock = iter(range(1000)).__next__
    measured = Measurer(min_time=0, min_runs=3, clock=clock, other_work=Meter).measure(lambda: None, items_per_run=1)
    # One meter over the whole measurement for other work, and one over the timed runs alone for the trial's own
    # cores: a compile's worker processes, or the checks after, are no part of what the runs' figures rest on.
    assert measured.busy_elsewhere == 1.3 and measured.cores_used == 1.25 and len(Meter.started) == 2
    plain = Measurer(min_time=0, min_runs=3, clock=iter(range(1000)).__next__).measure(lambda: None, items_per_run=1)
    assert plain.busy_elsewhere is None and plain.cores_used is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("helper", [False, True])
def test_own_cores_are_what_the_trial_s_process_group_keeps_busy(helper):
    # chmm's overlap_passes runs its backward pass on a thread of its own: under --threads 1 on this 2-core CPU
    # it read 9% faster than without, and no faster held to one core (taskset -c 0), without a word.
    from autotune.environment import OWN_CORES_MARGIN, beyond_threads
    from tests.conftest import fresh_process_json

    script = (
        "import json, subprocess, sys, time\n"
        "from autotune.environment import OtherWork\n"
        f"helper = subprocess.Popen([sys.executable, '-c', 'while True: pass']) if {helper} else None\n"
        "time.sleep(0.3 if helper else 0)\n"
        "meter = OtherWork(1)\n"
        "end = time.monotonic() + 1.0\n"
        "while time.monotonic() < end: pass\n"
        "cores = meter.own_cores()\n"
        "helper and helper.kill()\n"
        "print(json.dumps(cores))\n")
    cores = fresh_process_json(f"import os; os.setsid()\n{script}")
    if helper:  # a process of its own beside its one thread, as a DataLoader worker or a second thread would be
        assert cores >= 1 + 4 * OWN_CORES_MARGIN and beyond_threads(cores, 1), cores
    else:
        assert 0.8 <= cores < 1 + OWN_CORES_MARGIN and not beyond_threads(cores, 1), cores


def test_beyond_threads_allows_the_rounding_and_nothing_more():
    from autotune.environment import beyond_threads

    assert beyond_threads(1.25, 1) and beyond_threads(2.2, 2)
    assert not any(beyond_threads(cores, threads) for cores, threads in
                   [(1.0096, 1), (1.05, 1), (2.0, 2), (None, 1), (1.5, None)])


def test_other_work_of_half_a_core_is_said_and_less_or_unread_is_not():
    from autotune.environment import BUSY_CORES, beside_other_work

    assert BUSY_CORES == 0.5 and beside_other_work(0.5) and beside_other_work(1.7)
    assert not any(beside_other_work(cores) for cores in (0.49, 0.0, None))


def _cores_busy_beside(loop: str, own_group: bool = False, threads: int | None = None) -> float | None:
    """What :class:`OtherWork` reads over 1 s while ``loop`` (Python code) runs in another process."""
    from autotune.environment import OtherWork

    process = subprocess.Popen([sys.executable, "-c", loop], start_new_session=not own_group)
    try:
        time.sleep(0.3)  # started
        meter = OtherWork(threads)
        time.sleep(1.0)
        return meter.cores()
    finally:
        process.kill()
        process.wait(timeout=30)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_other_work_is_what_processes_outside_this_process_group_keep_busy():
    busy = "while True: pass"
    beside_other, beside_own = _cores_busy_beside(busy), _cores_busy_beside(busy, own_group=True)
    # A busy loop elsewhere keeps about one core busy; one in this group (a DataLoader worker's place) is ours.
    assert beside_other >= 0.7 and beside_other - beside_own >= 0.6, (beside_other, beside_own)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_measurement_of_a_few_milliseconds_on_an_idle_machine_reads_no_other_work():
    # /proc/stat counts whole ticks: a 2 ms window read 0.5 cores or more (2.0 the most) in 12 of 40 tries on
    # this idle CPU, and a workload of microsecond runs was re-measured again and again "beside other work".
    from autotune.environment import BUSY_CORES, OtherWork

    readings = []
    for _ in range(20):
        meter = OtherWork()
        end = time.perf_counter() + 0.002
        while time.perf_counter() < end:
            pass
        readings.append(meter.cores())
    assert sum(r is not None and r >= BUSY_CORES for r in readings) <= 1, readings


def test_a_window_of_a_few_ticks_is_read_on_until_rounding_cannot_reach_busy_cores(monkeypatch):
    from autotune import environment

    samples = iter([(0, 0), (2, 0), (18, 16)])  # (all, idle) ticks of 2 cores: the first 2 ticks both busy
    slept = []
    monkeypatch.setattr(environment, "_cpu_jiffies", lambda cpus: next(samples))
    monkeypatch.setattr(environment, "_group_jiffies", lambda group: 0)
    monkeypatch.setattr(environment.time, "sleep", slept.append)
    monkeypatch.setattr(environment.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    meter = environment.OtherWork()
    # 2 ticks of 2 cores read 2.0 cores; it waits for 2 * 2 / 0.5 = 8 ticks a core, 7 more (70 ms at 100 Hz).
    assert meter.cores() == pytest.approx(2 / 18 * 2)
    assert slept == [pytest.approx(7 / environment._TICKS_PER_SECOND)]
    samples = iter([(0, 0), (2, 2)])  # as short, but quiet: read as it is, no wait
    assert environment.OtherWork().cores() == 0.0 and len(slept) == 1
    # A trial's own cores are read over OWN_TICKS (50) ticks a core or more, 100 on these 2 cores; over fewer,
    # rounding to whole ticks could make them up.
    for ticks, own in ((99, None), (100, 0.5)):
        samples = iter([(0, 0), (ticks, 0)])
        group = iter([0, ticks / 4])  # a quarter of the cores' ticks: half of one of the two
        monkeypatch.setattr(environment, "_group_jiffies", lambda pgrp: next(group))
        assert environment.OtherWork().own_cores() == own, ticks


def test_proc_s_figures_are_read_per_core_and_per_process_group(monkeypatch):
    # What every "beside other work" and "kept N cores busy" figure is made of, from /proc as Linux writes it.
    import io
    from types import SimpleNamespace

    from autotune import environment

    files = {
        # user nice system idle iowait irq softirq steal guest guest_nice: guest time is in user time already
        "/proc/stat": "cpu  10 0 10 100 20 0 0 0 5 0\ncpu0 4 0 6 60 10 0 0 0 5 0\ncpu1 6 0 4 40 10 0 0 0 0 0\n"
                      "intr 1 2 3\n",
        # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
        "/proc/100/stat": "100 (python) R 1 42 42 0 -1 0 0 0 0 0 7 3 2 1 20 0 4 0 5000",
        "/proc/101/stat": "101 (a) b) 7) S 100 42 42 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5001",  # a name may hold ")"
        "/proc/102/stat": "102 (other) S 1 9 9 0 -1 0 0 0 0 0 50 50 0 0 20 0 1 0 5002",
    }

    def read(path, encoding=None, errors=None):
        if path not in files:
            raise FileNotFoundError(path)  # a process that exited meanwhile
        return io.StringIO(files[path])

    monkeypatch.setattr(environment, "open", read, raising=False)
    assert environment._cpu_jiffies() == (80 + 60, 70 + 50)  # the cores, not the "cpu" line of their sum
    assert environment._cpu_jiffies({1}) == (60, 50)  # idle and iowait are idle
    entries = [SimpleNamespace(name=name) for name in ("self", "100", "101", "102", "103")]
    monkeypatch.setattr(environment.os, "scandir", lambda path: iter(entries))
    assert environment._group_jiffies(42) == (7 + 3 + 2 + 1) + (1 + 1)


def test_without_proc_stat_or_cpu_affinity_other_work_and_own_cores_are_unread(monkeypatch):
    # Not Linux: nothing is said of other work or borrowed cores, rather than a figure of nothing (0.0 read quiet).
    from autotune import environment

    def no_proc(cpus=None):
        raise FileNotFoundError("/proc/stat")

    monkeypatch.setattr(environment, "_cpu_jiffies", no_proc)
    meter = environment.OtherWork()
    assert meter.cores() is None and meter.own_cores() is None and environment.busy_cores(0.0) is None
    monkeypatch.undo()
    monkeypatch.delattr(environment.os, "sched_getaffinity")  # macOS: the process may run on every core
    monkeypatch.setattr(environment.os, "cpu_count", lambda: 3)
    meter = environment.OtherWork()
    assert meter.cpus == set() and meter.cores() is None and meter.own_cores() is None
    assert environment._core_count(environment._own_cpus()) == 3
    monkeypatch.setattr(environment.os, "cpu_count", lambda: None)  # "undetermined"
    assert environment._core_count(None) == 1


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two cores and CPU affinity")
def test_other_work_counts_only_the_cores_this_process_may_run_on():
    # A --workers worker is pinned to its own cores: the others' trials on theirs do not slow its runs.
    allowed = os.sched_getaffinity(0)
    mine, other = sorted(allowed)[:2]
    os.sched_setaffinity(0, {mine})
    try:
        on_other, on_mine = (_cores_busy_beside(f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass")
                             for cpu in (other, mine))
    finally:
        os.sched_setaffinity(0, allowed)
    assert on_other < 0.3 and on_mine >= 0.7, (on_other, on_mine)


def test_each_variable_that_turns_a_knob_value_into_another_is_named_with_what_it_does(monkeypatch):
    # A search of a user's workload says them before it times anything (test_tuner); here, each one's words.
    from autotune.environment import knob_variables

    for name in ("TORCH_COMPILE_DISABLE", "TORCHINDUCTOR_MAX_AUTOTUNE", "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM",
                 "TORCHINDUCTOR_MAX_AUTOTUNE_POINTWISE", "NUMBA_DISABLE_JIT", "NVIDIA_TF32_OVERRIDE"):
        monkeypatch.delenv(name, raising=False)
    assert knob_variables() == []
    for name, value in (("TORCH_COMPILE_DISABLE", "1"), ("TORCHINDUCTOR_MAX_AUTOTUNE_GEMM", "1"),
                        ("NUMBA_DISABLE_JIT", "2"), ("NVIDIA_TF32_OVERRIDE", "0")):
        monkeypatch.setenv(name, value)
    assert knob_variables() == [
        "TORCH_COMPILE_DISABLE=1 (torch.compile returns the model uncompiled)",
        "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM=1 (torch.compile's default and reduce-overhead modes autotune as "
        "max-autotune does)",
        "NUMBA_DISABLE_JIT=2 (numba runs its kernels in the interpreter)",
        "NVIDIA_TF32_OVERRIDE=0 (cuBLAS and cuDNN run fp32 where TF32 is asked for)"]
    for name, value in (("TORCH_COMPILE_DISABLE", "0"), ("NUMBA_DISABLE_JIT", " 0 "), ("NVIDIA_TF32_OVERRIDE", "1")):
        monkeypatch.setenv(name, value)  # each as its library reads it: off
    assert knob_variables() == [
        "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM=1 (torch.compile's default and reduce-overhead modes autotune as "
        "max-autotune does)"]


def test_the_fingerprint_records_the_variables_that_change_how_fast_torch_runs(monkeypatch):
    # CUDA_LAUNCH_BLOCKING=1, NVIDIA_TF32_OVERRIDE=0 or ATEN_CPU_CAPABILITY=default change every figure (or what
    # a knob does), and an export said nothing of them: its figures read as the machine's own.
    from autotune.environment import SPEED_VARIABLES, fingerprint

    for name in SPEED_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert "variables" not in fingerprint()
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    monkeypatch.setenv("HOME", "/elsewhere")  # not one of them
    assert fingerprint()["variables"] == {"ATEN_CPU_CAPABILITY": "default", "CUDA_LAUNCH_BLOCKING": "1"}


def test_the_nvidia_driver_and_the_oom_kills_are_read_from_proc_and_an_apple_gpu_is_named(monkeypatch):
    # An export's driver is read from the kernel module's version line; the CPU names itself where that is all.
    from autotune import environment

    text = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build  "
            "(dvs-builder@U16-I1-N07-12-3)  Fri Feb 28 22:35:46 UTC 2025\nGCC version:  gcc version 12.3.0\n")

    class Proc:  # each file of /proc read here holds `text`
        def __init__(self, path):
            self.path = path

        def read_text(self):
            if text is None:
                raise FileNotFoundError(self.path)
            return text

    monkeypatch.setattr(environment, "Path", Proc)
    assert environment._nvidia_driver() == "570.124.06"  # not x86_64, 22:35:46, nor gcc's 12.3.0 after it
    text = "NVRM version: NVIDIA UNIX Kernel Module  390.157  Wed Oct 12 09:19:07 UTC 2022\n"  # a legacy one
    assert environment._nvidia_driver() == "390.157"
    text = "NVRM version: none that reads as one\n"
    assert environment._nvidia_driver() is None
    text = None  # no NVIDIA driver loaded
    assert environment._nvidia_driver() is None
    # The OOM killer's count, which tells a trial SIGKILLed by it from one killed otherwise, is read the same way.
    for text, kills in (("pgfault 10\noom_kill 3\nthp_fault_alloc 0\n", 3), ("pgfault 10\n", None),
                        ("oom_kill many\n", None), (None, None)):
        assert environment.oom_kills() == kills, text
    assert environment.fingerprint("mps")["device_name"] == "Apple GPU (MPS)"
    cpu = environment.fingerprint("cpu")
    assert cpu["device_name"] == cpu["cpu"] and "driver" not in cpu
    import torch  # what an export's environment says it ran with (a CPU build: no CUDA, said as None)

    assert (cpu["torch"], cpu["cuda"], cpu["cpu_threads"]) == (str(torch.__version__), torch.version.cuda,
                                                               torch.get_num_threads())


def test_the_busy_check_before_timing_reads_the_cores_this_process_may_use_alone(monkeypatch):
    # Pinned to cpu0 (taskset -c 0) beside a busy loop pinned to cpu1, a run warned "other processes keep 1.0 of
    # this machine's 2 cores busy; timings taken beside them are wrong", and its product ran as fast as alone
    # (63 and 63.7 a second): the loop's core was never the trial's.
    import autotune.environment as environment

    asked = []
    samples = iter([(1000, 500), (1100, 600)])  # over the window: the cores asked for were idle throughout
    monkeypatch.setattr(environment.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(environment, "_cpu_jiffies", lambda cpus=None: (asked.append(cpus), next(samples))[1])
    assert environment.busy_cores(0.0) == 0.0 and asked == [{0}, {0}]
    samples = iter([(1000, 500), (1100, 550)])  # half busy: half of the one core
    assert environment.busy_cores(0.0) == 0.5
    said = environment.before_timing(1.0, builtin=True)
    assert said[0].startswith("other processes keep 1.0 of the 1 core this process may use busy;"), said
    monkeypatch.setattr(environment.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    samples = iter([(1000, 500), (1200, 600)])  # two cores half busy: one core's worth
    assert environment.busy_cores(0.0) == 1.0
    samples = iter([(1000, 500), (1000, 500)])  # no tick between the two reads: nothing to say, not 0 / 0
    assert environment.busy_cores(0.0) is None


@pytest.mark.skipif(not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) != 2,
                    reason="reads /proc; two cores, one left idle by a trial of one thread")
def test_other_work_on_the_cores_a_trial_leaves_idle_is_none_of_its(monkeypatch):
    # --threads 1 on 2 cores beside a busy loop, as autotune's own advice ("give every job --threads that add up
    # to the cores") has it: the product ran at 59.9 a second against 61.3 alone, yet the run was warned that
    # its timings were wrong and its figures flagged "beside other work: 1.0 of 2 cores busy".
    from autotune import environment

    busy = "while True: pass"
    assert _cores_busy_beside(busy, threads=1) < 0.3 <= 0.7 <= _cores_busy_beside(busy, threads=2)
    monkeypatch.setattr(environment.os, "sched_getaffinity", lambda pid: {0, 1})
    assert environment.before_timing(1.0, builtin=True, threads=1) == []
    [said] = environment.before_timing(1.7, builtin=True, threads=1)
    assert said.startswith("other processes keep 1.7 of the 2 cores this process may use busy, more than the 1 "
                           "a trial's 1 thread leaves idle;"), said
    assert environment.before_timing(1.0, builtin=True)[0].startswith("other processes keep 1.0 of the 2 cores")


def test_thread_pools_hold_and_restore_and_say_nothing_of_the_libraries(monkeypatch):
    # threadpoolctl warns, in two lines, where two OpenMP libraries are loaded at once (Intel's and LLVM's): a
    # trial would print it every time it held its pools.
    import warnings

    threadpoolctl = pytest.importorskip("threadpoolctl")
    from autotune.environment import thread_pools

    def blas():
        return max(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas")

    real = threadpoolctl.threadpool_limits

    def noisy(*args, **kwargs):
        warnings.warn("Found Intel OpenMP ('libiomp') and LLVM OpenMP ('libomp') loaded at the same time",
                      RuntimeWarning)
        return real(*args, **kwargs)

    monkeypatch.setattr(threadpoolctl, "threadpool_limits", noisy)
    with real(2, user_api="blas"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            monkeypatch.setenv("NUMBA_NUM_THREADS", "2")
            with thread_pools(1, "blas"):  # the check's pool alone (loop.py): a trial's numba keeps its threads
                assert blas() == 1 and os.environ["NUMBA_NUM_THREADS"] == "2"
        assert blas() == 2
    # Without threadpoolctl (a checkout run from PYTHONPATH, as on the GPU machine) a hold is one that holds nothing.
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)
    with thread_pools(1, "blas"):
        pass


def test_thread_pools_leave_a_pool_at_the_count_alone(monkeypatch):
    # Setting OpenBLAS's count in a forked process (every trial's) starts its threads afresh, and they spin a tenth
    # of a second on the cores the runs timed next need: a 0.2 ms run stalled 4 ms every 15 or so, its mean twice
    # its median, where its pools were set to the counts they had (benchmarks/blas_spin.py).
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from autotune.environment import thread_pools

    pools = threadpoolctl.ThreadpoolController().lib_controllers
    blas = [pool for pool in pools if pool.user_api == "blas"]  # numpy's OpenBLAS, and scipy's where it is loaded
    if not blas:
        pytest.skip("no BLAS that threadpoolctl knows is loaded")
    with threadpoolctl.threadpool_limits(2, user_api="blas"):  # each at one count before the calls are counted
        set_to = []
        for kind in {type(pool) for pool in pools}:
            monkeypatch.setattr(kind, "set_num_threads", lambda self, n, real=kind.set_num_threads: (
                set_to.append((self.filepath, n)), real(self, n))[1])
        with thread_pools(2, "blas"):
            assert set_to == []
        with thread_pools(3, "blas"):
            assert set(set_to) == {(pool.filepath, 3) for pool in blas}
            assert [pool.num_threads for pool in blas] == [3] * len(blas)
        assert [pool.num_threads for pool in blas] == [2] * len(blas)


@pytest.mark.parametrize("numba_first", [False, True])
def test_a_trial_s_threads_hold_numba_s_pool_imported_before_or_after(numba_first, monkeypatch):
    # A kernel of numba's parallel=True ran on both cores under --threads 1 (623,800 items a second, 626,300
    # under 2; this CPU); numba's pool is none of threadpoolctl's. A fresh process: this one may hold numba's.
    from tests.conftest import fresh_process_json

    pytest.importorskip("numba")
    # Not inherited from this process, where an in-process trial may have held numba's pool before.
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    imports = ["import numba", "from autotune.environment import thread_pools; thread_pools(1)"]
    script = "; ".join(imports[::-1] if not numba_first else imports) + (
        "; import numba, json; print(json.dumps([numba.get_num_threads(), numba.config.NUMBA_NUM_THREADS]))")
    threads, pool = fresh_process_json(script)
    assert threads == 1 and (pool >= 1 if numba_first else pool == 1)


def test_the_busy_check_counts_the_threads_a_trial_gets_by_default_under_a_cpu_quota(monkeypatch):
    # Without --threads a trial takes cpu_threads(): under a 1-CPU quota on 2 cores, one thread. The check before
    # timing took "every core", warned of a loop on the core the trial leaves idle, while the trial's own
    # measurement (OtherWork given its real count) did not.
    import autotune.devices as devices
    from autotune import environment

    monkeypatch.setattr(environment.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(devices, "cgroup_cpu_quota", lambda: 1.0)
    assert environment.before_timing(1.0, builtin=True) == []
    assert environment.before_timing(1.7, builtin=True)[0].startswith(
        "other processes keep 1.7 of the 2 cores this process may use busy, more than the 1 a trial's 1 thread")


def test_a_speedups_interval_draws_rounds_first_then_their_runs():
    # Each round is a process of its own: chmm's medians moved 2-3% from one to the next, its runs within one well
    # under 1% apart. Drawn from the runs pooled, 20 searches' intervals held their mean speedup 10 times in 20.
    from autotune.measure import ratio_interval

    def pooled(medians, items=1):
        return Measurement.pooled([Measurement([m * (1 + 0.001 * (i % 3 - 1)) for i in range(30)], items, 0.0)
                                   for m in medians])

    base, other = pooled([1.00, 1.03, 0.97]), pooled([0.5, 0.5, 0.5])
    assert base.rounds == [30, 30, 30] and base.by_round()[1][0] == 1.03 * 0.999
    value, low, high = ratio_interval(base, other)
    assert value == 2.0 and low <= 2 * 0.98 and high >= 2 * 1.02  # the rounds' spread, not the runs' 0.1%
    # Each resample draws as many rounds as there were: their median moves less than one round's does. Drawing one
    # round a resample reached about the fastest and slowest rounds' ratios, 2/1.05 and 2/0.95 (1.90 and 2.10).
    _, low, high = ratio_interval(pooled([0.95 + 0.01 * i for i in range(11)]), pooled([0.5] * 11))
    assert 2 / 1.05 + 0.02 < low <= 2.0 <= high < 2 / 0.95 - 0.02
    # One round has no spread of rounds: its interval is its runs', as one measurement's
    one = ratio_interval(pooled([1.0]), other)
    assert 2 * 0.995 < one[1] <= one[2] < 2 * 1.005 and Measurement([1.0] * 5, 1, 0.0).by_round() == [[1.0] * 5]


def test_a_run_that_returns_work_not_yet_done_is_refused():
    # A run that returns a generator is timed doing nothing: its work is done where the check reads it. A lazy
    # kernel of mine (8 steps of 2 ms) ran at 22 million items/s where the eager one ran at 480, passed and won.
    import concurrent.futures
    import dataclasses

    import torch

    async def later():
        return torch.ones(2)

    @dataclasses.dataclass
    class Out:
        loss: object

    coroutine = later()
    outputs = {"a generator": (x for x in range(3)), "a map": map(float, [1, 2]),
               "a coroutine at output['loss']": {"loss": coroutine},
               "a Future at output[1]": [torch.ones(1), concurrent.futures.Future()],
               "a Future at output.loss": Out(torch.futures.Future()), "a list_iterator": iter([torch.ones(1)])}
    for said, output in outputs.items():
        assert deferred_part(output) == said
        with pytest.raises(ValueError, match=re.escape(f"the run returned {said}: its work happens where the output "
                                                       "is read, after the clock stops")):
            Measurer(min_time=0.01, min_runs=3).measure(lambda: output, 8)
    coroutine.close()  # never awaited: closed, so that no warning is left behind
    for output in (torch.ones(3), {"x": [1.0, "text", (torch.arange(2),)]}, None, range(3), {"k": {}.items()}):
        assert deferred_part(output) == ""


ALLOCATOR_FAULTS = """
import ctypes, json, resource
from autotune.environment import settle_allocator
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes, libc.memset.argtypes = [ctypes.c_void_p], [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]

def faults_a_run():  # a run's four temporaries of MIB MiB each, written, then freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        blocks = [libc.malloc(MIB << 20) for _ in range(4)]
        for block in blocks:
            libc.memset(block, 1, MIB << 20)
        for block in blocks:
            libc.free(block)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10

unsettled = faults_a_run()
settle_allocator()
print(json.dumps([unsettled, faults_a_run()]))
"""


@pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc", reason="glibc's allocator alone")
@pytest.mark.parametrize("mib", [4, 20])
def test_a_settled_allocator_reuses_a_run_s_large_buffers_rather_than_faulting_them_in_anew(mib):
    # The README's distances example ran its expansion at 0.18 or 0.95 billion pairs/s by trial: its 4 MiB
    # temporaries given back to the kernel after each run (16 MiB freed at the heap's top is past a trim threshold
    # of twice the largest block freed, 8 MiB) and faulted in anew (4,096 page faults), or kept in the heap, as the
    # process's history had set glibc's thresholds. Every trial's child is forked from a fork server that settled
    # them (autotune/_child_preload.py). Lifted as far as glibc lifts them (a 32 MiB block freed), 80 MiB freed at
    # the top was still past them: a conv net of mine, some 50 MiB a run, read 1,158 to 3,670 images/s by trial.
    from tests.conftest import fresh_process_json

    unsettled, settled = fresh_process_json(ALLOCATOR_FAULTS.replace("MIB", str(mib)))
    pages = 4 * (mib << 20) // 4096
    assert unsettled >= 0.75 * pages and settled <= 0.1 * pages, (unsettled, settled)  # the first run faults them in
    preload = (Path(__file__).resolve().parent.parent / "autotune" / "_child_preload.py").read_text()
    assert "\nsettle_allocator()\n" in preload


@pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc", reason="glibc's allocator alone")
def test_thresholds_the_user_set_are_left_as_they_are(monkeypatch):
    import ctypes
    from types import SimpleNamespace

    from autotune import environment

    calls = []
    monkeypatch.setattr(ctypes, "CDLL", lambda name: SimpleNamespace(mallopt=lambda *args: calls.append(args)))
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "0")
    environment.settle_allocator()
    assert calls == []
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_")
    environment.settle_allocator()
    assert calls == [(-3, 32 * 2**20), (-1, 2**30)]


def _spinner(megabytes: int) -> tuple[threading.Thread, threading.Event]:
    """A thread that keeps a core busy, the GIL let go (as a BLAS pool's threads spin after a call), until it has
    hashed ``megabytes`` of zeros; started and spinning when this returns, its event set once it has hashed them."""
    begun, hashed = threading.Event(), threading.Event()

    def spin() -> None:
        data = bytes(megabytes << 20)
        begun.set()
        hashlib.sha256(data).digest()  # holds no GIL from here: this thread's state stays running
        hashed.set()

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    begun.wait()
    return thread, hashed


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="Linux's /proc lists a process's threads")
def test_settling_threads_waits_for_a_spinning_thread_and_no_longer():
    # OpenBLAS's threads spin a tenth of a second after a check's np.linalg.norm: beside the runs timed next, a
    # 0.26 ms run's mean was twice its median (benchmarks/blas_spin.py).
    from autotune.environment import settle_threads

    asleep = threading.Event()
    sleeper = threading.Thread(target=asleep.wait, daemon=True)
    sleeper.start()
    try:
        assert settle_threads(limit=5.0) < 0.5  # a thread that waits is asleep
        thread, hashed = _spinner(256)
        settle_threads(limit=30.0)
        assert hashed.wait(0.05), "settled while the thread still spun"
        thread.join(5)
        thread, hashed = _spinner(1024)  # seconds of hashing: the limit comes first
        assert 0.05 <= settle_threads(limit=0.05) < 0.5 and not hashed.is_set()
        thread.join(30)
    finally:
        asleep.set()


def test_settling_threads_where_no_proc_lists_them_waits_for_nothing(monkeypatch, tmp_path):
    import autotune.environment as environment

    monkeypatch.setattr(environment, "Path", lambda _: tmp_path / "no-proc")
    assert environment.settle_threads(limit=5.0) < 0.5
