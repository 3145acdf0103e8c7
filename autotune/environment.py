"""The environment fingerprint stored with every exported config.

A speedup measured with one torch, driver or device says little about
another; the fingerprint says what a figure was measured on. Other work on
the machine while a config is timed says so too (:class:`OtherWork`).
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import time
import warnings
from pathlib import Path
from typing import Any

__all__ = ["BUSY_CORES", "OWN_CORES_MARGIN", "SPEED_VARIABLES", "OtherWork", "before_timing", "beside_other_work",
           "beyond_threads", "busy_cores", "fingerprint", "knob_variables", "oom_kills", "settle_allocator",
           "settle_threads", "thread_pools", "threads_asked"]

#: Other work keeping this many cores busy is reported: before a CPU search or explain, and while a config is timed.
BUSY_CORES = 0.5
#: A trial's own cores are read over its timed runs when they took this many ticks (1/100 s) a core or more: each
#: process's time is cut to whole ticks at each end, 2 in 50 at most (0.04 of a core).
OWN_TICKS = 50
#: Cores beyond its threads that a trial's timed runs may keep busy unsaid: the rounding above, and what the trial's
#: own bookkeeping costs. Honest configs of chmm at small under --threads 1 read 1.0035-1.0096 cores (1-2 s of
#: runs, this 2-core CPU); overlap_passes, whose backward pass runs on a thread of its own, 1.25.
OWN_CORES_MARGIN = 0.1


#: Variables that change how fast torch or numba runs, or what a knob does, recorded with a measurement where
#: set: CUDA_LAUNCH_BLOCKING=1 makes every kernel launch wait (what overlaps work measures nothing),
#: ATEN_CPU_CAPABILITY=default drops torch's AVX2/AVX-512 CPU kernels. Where one turns a built-in knob's value
#: into another (TORCH_COMPILE_DISABLE, TORCHINDUCTOR_MAX_AUTOTUNE, NUMBA_DISABLE_JIT, NVIDIA_TF32_OVERRIDE),
#: that trial fails instead, saying so (workloads._torch, workloads.chmm, workloads.lsd).
SPEED_VARIABLES = ("ATEN_CPU_CAPABILITY", "CUBLAS_WORKSPACE_CONFIG", "CUDA_LAUNCH_BLOCKING", "DNNL_MAX_CPU_ISA",
                   "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",  # in place of settle_allocator's
                   "MKL_NUM_THREADS", "NUMBA_DISABLE_JIT", "NUMBA_OPT", "NVIDIA_TF32_OVERRIDE", "OMP_NUM_THREADS",
                   "ONEDNN_MAX_CPU_ISA", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING",
                   "TORCH_COMPILE_DISABLE", "TORCHINDUCTOR_FREEZING", "TORCHINDUCTOR_MAX_AUTOTUNE")


def threads_asked() -> int | None:
    """The CPU threads ``$OMP_NUM_THREADS`` asks for (a whole number, 1 or more), at most the cores this process
    may use; None where it is unset or no such number. torch takes it as its count, so a user's script in the same
    shell runs on it: a search that took every core instead measured 2 threads under OMP_NUM_THREADS=1 (a
    cluster's default), and its export recorded OMP_NUM_THREADS=1 beside "2 threads"."""
    from autotune.devices import cpu_threads

    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    return min(int(value), cpu_threads()) if value.isdigit() and int(value) > 0 else None


def knob_variables() -> list[str]:
    """The variables set under which a knob's value runs as another without a word, each with what it does.

    Read as torch, inductor, numba and the CUDA libraries read them. A built-in workload fails such a trial,
    saying why (workloads._torch, workloads.chmm, workloads.lsd); of another workload autotune cannot tell which
    knob a variable touches, so a search says so before it times anything (:func:`before_timing`).
    """
    env, found = os.environ, []
    if env.get("TORCH_COMPILE_DISABLE") == "1":
        found.append("TORCH_COMPILE_DISABLE=1 (torch.compile returns the model uncompiled)")
    found += [f"{name}=1 (torch.compile's default and reduce-overhead modes autotune as max-autotune does)"
              for name in ("TORCHINDUCTOR_MAX_AUTOTUNE", "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM",
                           "TORCHINDUCTOR_MAX_AUTOTUNE_POINTWISE") if env.get(name) == "1"]
    if env.get("NUMBA_DISABLE_JIT", "0").strip() not in ("", "0"):
        found.append(f"NUMBA_DISABLE_JIT={env['NUMBA_DISABLE_JIT']} (numba runs its kernels in the interpreter)")
    if env.get("NVIDIA_TF32_OVERRIDE") == "0":
        found.append("NVIDIA_TF32_OVERRIDE=0 (cuBLAS and cuDNN run fp32 where TF32 is asked for)")
    return found


def before_timing(busy: float | None, builtin: bool, threads: int | None = None) -> list[str]:
    """The warnings to give before configs are timed: ``busy`` cores kept busy by other work (None: not read)
    beyond those a trial of ``threads`` (None: the count a trial takes, ``cpu_threads()``) leaves idle, and a
    variable of :func:`knob_variables` set where the workload is not a built-in (``builtin``).

    With --threads 1 on 2 cores beside a busy loop, as the advice below has it, a product ran at 59.9 a second
    against 61.3 alone: the loop's core was one the trial left idle."""
    from autotune.devices import cpu_threads

    said = []
    cores = _core_count(_own_cpus())
    threads = threads or cpu_threads()  # under a CPU quota fewer than the cores: the rest are left idle
    spare = _idle_cores(cores, threads)
    if busy is not None and beside_other_work(busy - spare):
        idle = (f", more than the {spare} a trial's {threads} thread{'s' * (threads != 1)} "
                f"leave{'s' * (threads == 1)} idle")
        said.append(f"other processes keep {busy:.1f} of the {cores} core{'s' * (cores != 1)} this process may use "
                    f"busy{idle if spare else ''}; timings taken beside them are wrong. Run alone, or give every job "
                    "--threads that add up to the cores")
    variables = [] if builtin else knob_variables()
    if variables:
        said.append(f"{'; '.join(variables)} {'is' if len(variables) == 1 else 'are'} set: a knob of this workload "
                    "that compiles, runs numba or asks for TF32 may run as another of its values and be measured and "
                    "exported as the value asked for; unset it to tune such a knob (a built-in workload's trial "
                    "fails instead)")
    return said


def thread_pools(threads: int, user_api: str | None = None) -> Any:
    """numpy's BLAS and every OpenMP pool of this process (``user_api="blas"``: BLAS alone) held to ``threads``:
    a context manager, or held until the process ends where it is left open; numba's pool too, for good. Nothing
    where threadpoolctl is not installed (a checkout run without installing it: the GPU machine's PYTHONPATH). Its
    warning of two OpenMP libraries loaded at once is no trial's to print."""
    if user_api is None:
        _numba_threads(threads)
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return contextlib.nullcontext()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        # Those at the count already are left alone: setting OpenBLAS's in a forked process (every trial's) starts
        # its threads afresh, and they spin a tenth of a second or more; the runs timed next on those cores stalled
        # 4 ms every 15 or so (a 0.2 ms run's mean doubled, this CPU; benchmarks/blas_spin.py).
        controller = ThreadpoolController()  # one: threadpool_limits would find every pool again
        off = {pool.filepath: threads for pool in controller.lib_controllers if pool.num_threads != threads
               and user_api in (None, pool.user_api)}
        return controller.limit(limits=off) if off else contextlib.nullcontext()


#: The longest a trial waits for its other threads to sleep before its timed runs (see :func:`settle_threads`).
SETTLE_THREADS_SECONDS = 0.5


def settle_threads(limit: float = SETTLE_THREADS_SECONDS, poll: float = 0.002) -> float:
    """Wait until every other thread of this process sleeps, ``limit`` seconds at most; the seconds waited.

    A pool's threads spin a while after their work in case more follows: OpenBLAS's a tenth of a second (0.10 s
    here), torch's OpenMP's 7-10 ms. A workload's check that called numpy's BLAS (``np.linalg.norm``: its
    dot) between a trial's first run and its timed ones left OpenBLAS's threads spinning on the cores those runs
    needed: a 0.26 ms run's mean twice its median, 12 runs of 200 over 2 ms (``autotune run``, this 2-core CPU;
    benchmarks/blas_spin.py). Nothing to wait for where Linux's /proc does not list the threads."""
    import threading

    tasks, me, start = Path("/proc/self/task"), str(threading.get_native_id()), time.perf_counter()
    while time.perf_counter() - start < limit:
        try:
            stats = [(task / "stat").read_text() for task in tasks.iterdir() if task.name != me]
        except OSError:  # no /proc, or a thread that ended as it was read: read again
            if not tasks.is_dir():
                break
            continue
        if not any(stat.rsplit(")", 1)[-1].split()[:1] == ["R"] for stat in stats):  # its name may hold ") R"
            break
        time.sleep(poll)
    return time.perf_counter() - start


#: glibc's thresholds as a trial holds them (mallopt): a block up to its own ceiling for the mmap threshold (32 MiB on
#: 64-bit) comes from the heap, and up to 1 GiB of free heap is kept for the next run rather than handed back.
MMAP_THRESHOLD, TRIM_THRESHOLD = 32 * 2**20, 2**30


def settle_allocator() -> None:
    """Fix glibc's thresholds, so that a run's buffers are reused from its heap, as a program that has loaded data or
    built a model reuses them, in every trial alike.

    glibc maps a block over its mmap threshold afresh, and gives the free top of its heap back to the kernel past
    its trim threshold; left to itself, it lifts the first to the largest mapped block it has freed (32 MiB at most)
    and the second to twice that. So whether a run's buffers were reused or faulted in anew (a page fault every 4 KiB,
    every run) depended on what the process had freed before, and on where its heap's free space lay: the README's
    distances example ran at 0.18 or 0.95 billion pairs/s by trial, each trial with a tight spread, and a small conv
    net of mine, whose runs free some 50 MiB at the heap's top, at 1,158 to 3,670 images/s with the thresholds lifted
    as far as glibc lifts them, 3,569 to 3,924 with them fixed (`benchmarks/allocator_regimes.py`). Nothing to do on
    another C library, or where MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_ fixes them: the user's choice.
    """
    if platform.libc_ver()[0] != "glibc" or {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"} & os.environ.keys():
        return
    import ctypes

    mallopt = ctypes.CDLL(None).mallopt
    mallopt.restype, mallopt.argtypes = ctypes.c_int, [ctypes.c_int, ctypes.c_int]
    m_trim_threshold, m_mmap_threshold = -1, -3  # malloc.h
    mallopt(m_mmap_threshold, MMAP_THRESHOLD)
    mallopt(m_trim_threshold, TRIM_THRESHOLD)


def _numba_threads(threads: int) -> None:
    """numba's own pool (its workqueue, OpenMP or TBB layer: none of threadpoolctl's) held to ``threads`` for the
    rest of the process: a kernel of ``parallel=True`` ran on both cores under --threads 1 (623,800 items a second,
    626,300 under 2; this CPU). A numba imported later starts with that many threads."""
    os.environ["NUMBA_NUM_THREADS"] = str(threads)
    numba = sys.modules.get("numba")
    if numba is not None:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))


def oom_kills() -> int | None:
    """How many processes the kernel's OOM killer has killed since boot (``/proc/vmstat``: a cgroup's limit, a
    container's ``-m``, counts too); None where it is not said. A trial SIGKILLed while it rose ran out of memory."""
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return None


def beside_other_work(cores: float | None) -> bool:
    """Whether other work keeping ``cores`` busy (None: not measured) is enough to say so (:data:`BUSY_CORES`)."""
    return cores is not None and cores >= BUSY_CORES


def _nvidia_driver() -> str | None:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    for token in text.split():
        if token[:1].isdigit() and token.count(".") >= 1:
            return token
    return None


def fingerprint(torch_device: str = "cpu") -> dict[str, Any]:
    """What a measurement ran on: versions, device name and capability, CPU threads."""
    from autotune._version import __version__
    from autotune.devices import cpu_name, cpu_threads

    info: dict[str, Any] = {
        "autotune": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "cpu_cores": cpu_threads(),
    }
    import numpy
    import torch

    info["numpy"] = numpy.__version__

    info.update(
        torch=str(torch.__version__),  # a TorchVersion: unpickled in the parent, it would import torch there
        cuda=torch.version.cuda,
        cpu_threads=torch.get_num_threads(),
    )
    variables = {name: os.environ[name] for name in SPEED_VARIABLES if name in os.environ}
    if variables:
        info["variables"] = variables
    if torch_device.startswith("cuda") and torch.cuda.is_available():
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        info.update(
            device_name=props.name,
            compute_capability=f"{props.major}.{props.minor}",
            device_memory_bytes=props.total_memory,
            cudnn=torch.backends.cudnn.version(),
            driver=_nvidia_driver(),
        )
    elif torch_device == "mps":
        info.update(device_name="Apple GPU (MPS)")
    else:
        info.update(device_name=info["cpu"])
    return info


def busy_cores(seconds: float = 0.1) -> float | None:
    """How many of the cores this process may use every process together kept busy over ``seconds`` (this one
    sleeps meanwhile).

    Read from ``/proc/stat``; None where it is absent (not Linux). Timing beside other work is wrong:
    on 2 shared cores, an explain run read a config 70x slower than alone (README, "What each fix bought").
    Cores outside its affinity are no trial's: pinned to cpu0 beside a busy loop on cpu1, a run was warned
    of "1.0 of this machine's 2 cores busy" and timed a product as fast as alone (63 and 63.7 a second).
    """
    cpus = _own_cpus()
    try:
        total_before, idle_before = _cpu_jiffies(cpus)
        time.sleep(seconds)
        total_after, idle_after = _cpu_jiffies(cpus)
    except (OSError, ValueError, IndexError):
        return None
    total = total_after - total_before
    if total <= 0:
        return None
    return (1 - (idle_after - idle_before) / total) * _core_count(cpus)


def beyond_threads(cores_used: float | None, threads: int | None) -> bool:
    """A trial's timed runs kept ``OWN_CORES_MARGIN`` or more cores busy beyond its ``threads``: a thread or process
    of the workload's own ran beside them, on cores --threads did not give it, and its figures are not of that many
    (chmm's ``overlap_passes`` under --threads 1: 1.25 cores, 9% faster on this 2-core CPU, no faster held to one)."""
    return cores_used is not None and threads is not None and cores_used >= threads + OWN_CORES_MARGIN


def _idle_cores(cores: int, threads: int | None) -> int:
    """The cores a trial of ``threads`` (None: every core) leaves idle of ``cores``."""
    return max(0, cores - threads) if threads else 0


def _core_count(cpus: set[int] | None) -> int:
    """How many cores ``cpus`` (:func:`_own_cpus`) are: every core of the machine where the OS does not say."""
    return len(cpus) if cpus else os.cpu_count() or 1


def _own_cpus() -> set[int] | None:
    """The cores this process may run on (None where the OS does not say: every core)."""
    return set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_jiffies(cpus: set[int] | None = None) -> tuple[int, int]:
    """(all, idle) CPU time of the cores ``cpus`` (None: every core) since boot, in clock ticks, from ``/proc/stat``."""
    total = idle = 0
    with open("/proc/stat", encoding="ascii") as handle:
        for line in handle:
            name, *fields = line.split()
            if name.startswith("cpu") and name[3:].isdigit() and (cpus is None or int(name[3:]) in cpus):
                values = [int(v) for v in fields[:8]]
                total, idle = total + sum(values), idle + values[3] + values[4]  # user .. steal; idle, iowait
    return total, idle


def _group_jiffies(group: int) -> int:
    """CPU time of the live processes of process group ``group`` and of the children they reaped, in ticks."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it exited meanwhile
        if int(fields[2]) == group:  # pgrp; then utime, stime, cutime, cstime
            total += sum(int(v) for v in fields[11:15])
    return total


class OtherWork:
    """How many of this process's cores processes outside its process group kept busy since it was made (Linux).

    A trial runs in a process group of its own (the fork server's ``setsid``),
    with the DataLoader workers it starts, on the cores its affinity allows (a
    ``--workers`` worker's own). Every other busy tick of those cores, time
    the hypervisor stole for other machines included, is other work: on 2
    shared cores an explain run read numba's kernel 57-74x slower in the one
    round that ran beside a busy loop, the loop kernel 1.3x (README, "Other
    work on the machine"). ``cores()`` is None where ``/proc`` is absent.
    """

    def __init__(self, threads: int | None = None) -> None:
        self.group = os.getpgrp()
        self.cpus = _own_cpus() or set()
        # Cores a trial of fewer threads leaves idle are no trial's: there other work takes nothing from it (see
        # before_timing). Busy beyond them is what counts.
        self.spare = _idle_cores(len(self.cpus), threads)
        self.start = self._sample()

    def _sample(self) -> tuple[int, int, int] | None:
        try:
            return (*_cpu_jiffies(self.cpus), _group_jiffies(self.group))
        except (OSError, ValueError, IndexError):
            return None

    def cores(self) -> float | None:
        end = self._sample()
        if self.start is None or end is None or not self.cpus:
            return None
        # /proc/stat charges each core's time in whole ticks (1/100 s), and a process's time is cut to whole
        # ticks: over a few ticks that rounding alone reads as busy cores. On this idle 2-core CPU a 2 ms window
        # read 0.5 cores or more in 12 of 40 tries (2.0 the most), a 10 ms one in 7 of 40. The rounding is at most
        # a tick a core, so over 2 * cores / BUSY_CORES ticks it is under half of BUSY_CORES (0.25 of a core):
        # a shorter window (runs of microseconds) that reads busy is read on, this process asleep, until it is
        # that long (80 ms on 2 cores, 640 ms on 16; a second at most); the figure is then what others kept busy
        # over the measurement and that wait. One that reads quiet costs nothing more.
        cores = len(self.cpus)
        short = 2 * cores / BUSY_CORES * cores - (end[0] - self.start[0])
        if short > 0 and beside_other_work(self._busy(end)):
            time.sleep(min(short / cores / _TICKS_PER_SECOND, 1.0))
            end = self._sample()
        return self._busy(end)

    def own_cores(self) -> float | None:
        """Cores this process group (the trial: its threads, and the processes it started) kept busy since it was
        made; None over fewer than ``OWN_TICKS`` ticks a core. More than a trial's threads is cores it borrowed
        beyond them: chmm's ``overlap_passes`` runs its backward pass on a thread of its own, which --threads 1 did
        not hold to one core."""
        end = self._sample()
        if self.start is None or end is None or not self.cpus:
            return None
        total, _, mine = (b - a for a, b in zip(self.start, end))
        return mine / total * len(self.cpus) if total >= OWN_TICKS * len(self.cpus) else None

    def _busy(self, end: tuple[int, int, int] | None) -> float | None:
        if self.start is None or end is None or end[0] <= self.start[0]:
            return None
        total, idle, mine = (b - a for a, b in zip(self.start, end))
        return max(0.0, (total - idle - mine) / total * len(self.cpus) - self.spare)
