"""A trial's peak memory: its device's high-water mark, and on a CPU what the processes it started hold too.

On a CPU the peak was the trial process's own high-water RSS, and a DataLoader's workers are processes of their
own: their memory was in no figure, nor under ``--memory-budget``. A loader of mine over a dataset kept as a Python
list of 4 million floats read 330 MiB with 2 workers as with none, where the trial and its workers held 534 MiB
(their proportional set sizes summed, sampled: each worker's reads of the list write its objects' reference counts,
so each copies the pages it reads; this CPU).

While the trial has processes of its own, :class:`PeakMemory` samples every :data:`SAMPLE_SECONDS`: the trial's
resident memory, plus each descendant's private memory (pages it alone maps: the ones it copied or allocated; the
pages it shares with the trial are in the trial's figure already). The kernel keeps no high-water mark of a sum, so
a peak between samples is missed: the figure is never more than the processes held at once. A trial with no such
process reads one small file a thread per sample (its children), and nothing else.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import sys
import threading
import time
from pathlib import Path

__all__ = ["SAMPLE_SECONDS", "SAMPLING_SHARE", "PeakMemory", "descendants", "peak_memory", "reset_peak_memory",
           "wait_after"]

#: Seconds between samples of a CPU trial's processes, at least: a sample without descendants reads a few bytes a
#: thread (0.05 ms, this 2-core CPU), one beside a process that holds 200 MiB walks both processes' memory (2.5 ms).
SAMPLE_SECONDS = 0.1

#: The samples' own time is at most one part in this many of one core's: a wait after a sample is this many times
#: its length, where that is longer (eight such processes: a sample of 20 ms, one a second).
SAMPLING_SHARE = 50


def reset_peak_memory(torch_device: str) -> None:
    """The peak anew after a config's first run: its one-off memory (a compile, cuDNN's search) is as large as the
    caches are cold (ten's preset on the H200: 134.6 MiB on a cold compile cache, 74.2 warm, its runs alike)."""
    import torch

    if torch_device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    elif torch_device == "cpu":
        with contextlib.suppress(OSError, AttributeError):  # glibc: freed heap (a check's) back to the system; kept,
            ctypes.CDLL(None).malloc_trim(0)  # it was in the runs' peak (one chmm config: 279-357 MiB, 257-276 now)
        with contextlib.suppress(OSError):  # Linux: the high-water RSS (ru_maxrss) from now; elsewhere the whole life
            Path("/proc/self/clear_refs").write_text("5")


def peak_memory(torch_device: str) -> int:
    """The device's high-water mark since :func:`reset_peak_memory`: this process's alone on a CPU."""
    import torch

    if torch_device.startswith("cuda"):
        return int(torch.cuda.max_memory_allocated())
    if torch_device == "mps":
        return int(torch.mps.driver_allocated_memory())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # KiB on Linux, bytes on macOS


def wait_after(sample_seconds: float) -> float:
    """Seconds to wait after a sample that took ``sample_seconds``: :data:`SAMPLE_SECONDS`, or :data:`SAMPLING_SHARE`
    times the sample's own time where that is longer."""
    return max(SAMPLE_SECONDS, SAMPLING_SHARE * sample_seconds)


def descendants(pid: int) -> list[int]:
    """The live processes ``pid`` started, and theirs (Linux; none where ``/proc`` cannot say)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{parent}/task"):
                with contextlib.suppress(OSError):  # a thread that ended meanwhile
                    children = [int(c) for c in Path(f"/proc/{parent}/task/{task}/children").read_text().split()]
                    found += children
                    todo += children
    return found


def _kib(path: str, fields: tuple[str, ...]) -> int | None:
    """The sum of ``fields`` (KiB) in a /proc file of ``Name: N kB`` lines, in bytes; None where it is gone."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    return 1024 * sum(int(line.split()[1]) for line in text.splitlines() if line.split(":")[0] in fields)


class PeakMemory:
    """The peak of :func:`peak_memory`, and on a CPU of this process's resident memory plus its descendants' own.

    Example::

        peak = PeakMemory("cpu")
        run()
        print(peak.read(), peak.processes)
        peak.reset()   # the peak anew
        peak.close()
    """

    def __init__(self, torch_device: str) -> None:
        self.torch_device = torch_device
        self.processes = 0  # the most descendants one sample found since the start (not reset)
        self._tree = 0  # the highest sum sampled since the last reset
        self._period = 0  # how many resets: a sample taken across one belongs to neither period
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        if torch_device == "cpu" and Path("/proc/self/task").is_dir():
            self._thread = threading.Thread(target=self._sample_until_closed, name="autotune-peak-memory", daemon=True)
            self._thread.start()

    def _sample_until_closed(self) -> None:
        wait = SAMPLE_SECONDS
        while not self._stopped.wait(wait):
            started = time.perf_counter()
            self.sample()
            wait = wait_after(time.perf_counter() - started)

    def sample(self) -> None:
        """Add one sample of this process and its descendants (nothing where it has none)."""
        period = self._period
        pids = descendants(os.getpid())
        if not pids:
            return
        total = _kib("/proc/self/status", ("VmRSS",)) or 0
        for pid in pids:  # a process that ended meanwhile holds nothing now
            total += _kib(f"/proc/{pid}/smaps_rollup", ("Private_Clean", "Private_Dirty")) or 0
        with self._lock:
            if self._period == period:
                self._tree = max(self._tree, total)
            self.processes = max(self.processes, len(pids))

    def read(self) -> int:
        """The peak since the start or the last :meth:`reset`, in bytes (a sample taken now included)."""
        if self._thread is not None:
            self.sample()
        with self._lock:
            return max(peak_memory(self.torch_device), self._tree)

    def reset(self) -> None:
        reset_peak_memory(self.torch_device)
        with self._lock:
            self._tree, self._period = 0, self._period + 1

    def close(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
