"""A trial's peak memory: its own high-water mark, and on a CPU the memory of the processes it started."""

import importlib
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from autotune.peak_memory import PeakMemory, descendants, peak_memory
from autotune.runner import TrialRequest
from tests.conftest import FAST_MEASURER
from tests.test_runner import _steady_variant

linux = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="the processes are read from Linux's /proc")

#: A build that starts a process (as a DataLoader's worker is) holding ``MIB`` MiB of its own until the trial ends.
WORKER = """        import multiprocessing, numpy
        parent, ready = os.getpid(), multiprocessing.get_context('fork').Event()

        def hold():
            held = numpy.ones({mib} * 2**20 // 8)  # written: the worker's own pages
            ready.set()
            while os.getppid() == parent:
                time.sleep(0.02)

        multiprocessing.get_context('fork').Process(target=hold, daemon=True).start()
        ready.wait(30)

        def run():
"""


def test_a_cpu_s_peak_memory_is_in_bytes():
    importlib.import_module("torch")  # as the peak's reading does: its memory in before the high-water mark is read

    status = Path("/proc/self/status")
    if not status.exists():
        pytest.skip("no /proc: the peak's unit is checked on Linux")
    high_water = next(int(line.split()[1]) for line in status.read_text().splitlines() if line.startswith("VmHWM:"))
    assert 0.8 < peak_memory("cpu") / (high_water * 1024) < 1.25  # ru_maxrss in KiB, as /proc's high-water mark


def _trial(runner, folder: Path, mib: int):
    folder.mkdir()
    workload = _steady_variant(folder, "        def run():\n", WORKER.format(mib=mib),
                               ("import time", "import os, time"))
    for purpose in ("reference", "trial"):
        result = runner.run(TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 1000}, str(folder),
                                         {**FAST_MEASURER, "min_runs": 3}, purpose=purpose))
        assert result.status == "ok", result.error
    return result


@linux
def test_the_memory_of_the_processes_a_trial_started_is_in_its_peak(runner, tmp_path):
    # A DataLoader's workers were in no figure: a loader of mine over a Python list of 4 million floats read
    # 330 MiB with 2 workers as with none, where they held 534 MiB together. Here the worker holds 300 MiB.
    from autotune.console import run_text

    small, large = (_trial(runner, tmp_path / str(mib), mib) for mib in (0, 300))
    assert 250 < (large.peak_memory_bytes - small.peak_memory_bytes) / 2**20 < 400, (small, large)
    assert large.processes == small.processes == 1
    shown = SimpleNamespace(**{**vars(large), "environment": {}, "unit": "items", "noisy": False,
                               "beside_other_work": False})
    text = run_text(shown, SimpleNamespace(describe=lambda unused: "work=1000"), "steady", "cpu", "tiny")
    assert " with the 1 process it started, " in text.splitlines()[3], text


@linux
def test_a_sample_without_processes_of_its_own_adds_nothing_and_a_reset_forgets_the_last_period(monkeypatch):
    monkeypatch.setattr("autotune.peak_memory.descendants", lambda pid: [])  # this test process's own are a runner's
    memory = PeakMemory("cpu")
    try:
        assert memory.read() <= peak_memory("cpu") and memory.processes == 0 and memory._tree == 0
        monkeypatch.setattr("autotune.peak_memory.descendants", lambda pid: [os.getpid()])  # as if it were its own
        memory.sample()
        assert memory.processes == 1 and memory._tree > 0
        memory.reset()
        assert memory._tree == 0 and memory.processes == 1  # the count is of the whole trial
    finally:
        memory.close()
    assert not memory._thread.is_alive()


@linux
def test_descendants_are_found_at_every_depth_and_none_once_they_end():
    import select
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
                              "print(p.pid, flush=True); time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        assert select.select([child.stdout], [], [], 30)[0], "the child said nothing in 30 s"
        grandchild = int(child.stdout.readline())
        assert set(descendants(os.getpid())) >= {child.pid, grandchild}
        assert descendants(grandchild) == []
    finally:
        os.kill(grandchild, 9)
        child.kill()
        child.wait(timeout=10)
    deadline = time.monotonic() + 10
    while child.pid in descendants(os.getpid()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child.pid not in descendants(os.getpid())


def test_a_gpu_s_peak_is_its_allocator_s_and_no_thread_samples(monkeypatch):
    monkeypatch.setattr("autotune.peak_memory.peak_memory", lambda device: 123)
    memory = PeakMemory("cuda")
    assert memory._thread is None and memory.read() == 123
    memory.close()


def test_sampling_waits_fifty_times_a_sample_s_own_time_where_that_is_over_a_tenth_of_a_second():
    from autotune.peak_memory import SAMPLE_SECONDS, SAMPLING_SHARE, wait_after

    assert (SAMPLE_SECONDS, SAMPLING_SHARE) == (0.1, 50)
    assert wait_after(0.00005) == 0.1 and wait_after(0.002) == 0.1  # no process of its own; one of 200 MiB
    assert wait_after(0.02) == pytest.approx(1.0)  # eight such processes: a fiftieth of a core


@linux
def test_the_thread_samples_while_the_runs_run_and_a_read_samples_at_once(monkeypatch):
    monkeypatch.setattr("autotune.peak_memory.descendants", lambda pid: [os.getpid()])  # as if it were its own
    memory = PeakMemory("cpu")
    try:
        memory.reset()  # the high-water mark from now: an earlier test's may lie above all this process holds now
        assert memory.read() > peak_memory("cpu")  # read within the first wait: its own sample, no thread's yet
        memory.reset()
        deadline = time.monotonic() + 10
        while memory._tree == 0 and time.monotonic() < deadline:  # the thread's, with no read
            time.sleep(0.02)
        assert memory._tree > 0
    finally:
        memory.close()


@linux
def test_a_process_that_ended_before_its_sample_holds_nothing(monkeypatch):
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=30)
    monkeypatch.setattr("autotune.peak_memory.descendants", lambda pid: [gone.pid])  # a worker that exited since
    memory = PeakMemory("cuda")  # no thread: this test samples by hand
    memory.sample()  # its smaps_rollup is gone: nothing to read
    assert memory.processes == 1 and 0 < memory._tree < 2 * peak_memory("cpu")
    memory.close()
