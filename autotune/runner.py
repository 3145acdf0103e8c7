"""Running one configuration of a workload, isolated, and classifying what happened.

By default every trial runs in a fresh process, so that threads, TF32 flags, ``cudnn.benchmark`` and compile
caches never leak from one trial into the next. Importing torch costs seconds, so children are forked from a
server process that has imported torch (and the built-in workloads) but never touched CUDA: Python's
``forkserver`` start method with a preload list.

Each child starts its own process group; a trial that runs past its timeout is killed with its whole group
(DataLoader workers included). The outcome of every trial is one of :data:`STATUSES`:

==========  ==============================================================
ok          measured, and the output matches the reference
incorrect   measured, but the output is off by more than its tolerance
oom         the device or host ran out of memory (by exception type)
timeout     ran past the trial timeout; killed
crash       the process died from a signal or exited without a result
error       an exception in build, run or check (its type and message kept)
==========  ==============================================================
"""

from __future__ import annotations

import contextlib
import errno
import gc
import hashlib
import json
import math
import numbers
import os
import random
import resource
import signal
import sys
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from autotune._forkserver import ForkServer, ServerDied, signal_name
from autotune.check import Check, differs, share_of_tolerance
from autotune.control import control
from autotune.environment import OtherWork, beside_other_work, oom_kills, settle_threads, thread_pools
from autotune.exceptions import DiskFullError, said
from autotune.measure import Measurement, Measurer
from autotune.peak_memory import PeakMemory, peak_memory
from autotune.randomness import GlobalGenerators
from autotune.reference import save as save_reference
from autotune.twins import knobs_that_loosen
from autotune.workload import not_a_run, synchronizer

__all__ = ["STATUSES", "TRIAL_TIMEOUT", "Runner", "TrialRequest", "TrialResult"]

STATUSES = ("ok", "incorrect", "oom", "timeout", "crash", "error")

#: Seconds a trial runs before it is killed, where none is given.
TRIAL_TIMEOUT = 600.0

_PRELOAD = ["autotune._child_preload"]  # what the fork server imports once: each trial's child starts warm


@dataclass(frozen=True)
class TrialRequest:
    """Everything a child needs to build, measure and check one config."""

    workload: str  # a registered name or path/to/file.py:ClassName
    size: str
    device: str  # the profile name (cpu, h100...)
    torch_device: str  # cpu, cuda or mps
    config: dict[str, Any]
    cache_dir: str  # workload data and the reference output live here
    measurer: dict[str, Any] = field(default_factory=dict)  # Measurer fields
    threads: int | None = None
    memory_limit_bytes: int | None = None  # RLIMIT_AS of the child (CPU devices only)
    # "trial" measures and checks; "reference" writes the reference output; "cached reference" checks that the file
    # written loads as plain tensor data (here, where torch is loaded: the tuner's process never imports it)
    purpose: str = "trial"
    #: The reference config, which names the reference's file: one edited in the space file (float64 for a
    #: reference found too coarse, another kernel for one found wrong) is computed anew, not read from the cache.
    reference: dict[str, Any] | None = None

    @property
    def reference_path(self) -> Path:
        named = "" if self.reference is None else "-" + hashlib.sha256(
            json.dumps(self.reference, sort_keys=True, default=str).encode()).hexdigest()[:12]
        return Path(self.cache_dir) / f"reference-{self.device}{named}.pt"


@dataclass
class TrialResult:
    """What one run of one config produced; every field is JSON-able."""

    status: str
    config: dict[str, Any]
    unit: str | None = None
    items_per_run: int | None = None
    throughput: float | None = None  # items per second at the median run time
    median_seconds: float | None = None
    iqr_seconds: float | None = None
    relative_spread: float | None = None
    noisy: bool | None = None
    noisy_threshold: float = Measurement.noisy_threshold  # the Measurer's: its rounds pooled are judged by it too
    cut_short: bool | None = None  # stopped early: far slower than the best once warm, or a wrong first output
    # Every run's time, a traceback, the environment: in the study, not a repr (60,000 characters for 3 trials).
    times: list[float] = field(default_factory=list, repr=False)
    timed_runs: int | None = None  # more than len(times) where short runs were timed in blocks (Measurer.block_seconds)
    warmup_seconds: float | None = None  # the first run, compilation included
    build_seconds: float | None = None  # build(config), before the first run
    warmup_times: list[float] = field(default_factory=list, repr=False)
    peak_memory_bytes: int | None = None  # from the first run's end: its one-off compile or search left out
    first_run_peak_memory_bytes: int | None = None  # the first run's (a cold compile's, cuDNN's search), apart
    tolerance_knobs: list[str] | None = None  # those of its knobs whose reference value tightens its check's bound
    processes: int | None = None  # processes of its own (a DataLoader's workers) whose memory is in its peak (CPU)
    threads: int | None = None
    check: dict[str, Any] | None = None
    error: str | None = None  # one line: exception type and message, or what killed it
    traceback: str | None = field(default=None, repr=False)
    wall_seconds: float | None = None  # the whole trial, process start to result
    busy_elsewhere: float | None = None  # cores other processes kept busy while it was timed (Linux)
    cores_used: float | None = None  # cores its own threads and processes kept busy while it was timed (Linux)
    lost: bool | None = None  # failed by the machine (a full disk), not by its config: re-run when resumed
    environment: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def beside_other_work(self) -> bool:
        """Timed while other processes kept at least ``BUSY_CORES`` of its cores busy: its figures may be off."""
        return beside_other_work(self.busy_elsewhere)

    def measurement(self) -> Measurement | None:
        return None if not self.times or self.items_per_run is None else Measurement(
            self.times, self.items_per_run, self.warmup_seconds or 0.0, self.warmup_times, self.noisy_threshold,
            timed_runs=self.timed_runs)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if data["throughput"] is not None and not math.isfinite(data["throughput"]):  # JSON has no infinity
            data["throughput"] = None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrialResult":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


# -- inside the child ---------------------------------------------------------------

#: What CUDA libraries say when an allocation fails outside the caching allocator.
_CUDA_OOM_SIGNS = ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED",
                   "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY")


def _address_space_capped() -> bool:
    return resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY


def _is_out_of_memory(exc: BaseException, torch_device: str) -> bool:
    """Out of memory, decided by exception type (and, on CPU, the allocator that raised)."""
    if isinstance(exc, MemoryError):  # Python and NumPy
        return True
    if isinstance(exc, ImportError) and "failed to map segment" in str(exc) and _address_space_capped():
        return True  # the loader could not map a library under --memory-limit (RLIMIT_AS)
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    oom_type = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    if oom_type is not None and isinstance(exc, oom_type):  # CUDA caching allocator
        return True
    if torch_device.startswith("cuda") and isinstance(exc, RuntimeError):
        # Some CUDA paths (cuBLAS and cuDNN workspaces, NCCL) surface exhaustion as a plain RuntimeError that says
        # so. Device-wide free memory is no sign: it counts the caching allocator's reserve and other processes,
        # and after a sticky CUDA error asking for it raises again.
        return any(sign in str(exc) for sign in _CUDA_OOM_SIGNS)
    # torch's CPU allocator raises a plain RuntimeError (no OOM type for it): its origin is the only sign it gives.
    return isinstance(exc, RuntimeError) and "DefaultCPUAllocator" in str(exc)


def _is_disk_full(exc: BaseException | None) -> bool:
    """A write the disk refused (full, or over quota), raised here or the cause of another error (a compiler's):
    as the config's error, numba's cache on a full disk failed a chmm trial, never measured again when resumed."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def unless_lost(result: TrialResult) -> TrialResult:
    """``result``, or :class:`DiskFullError` where the machine failed it (a full disk), not its config: a
    re-measurement read it as the winner's failure (and exported another), an explanation as its fix's."""
    if result.lost:
        raise DiskFullError(f"{result.error}: no config is judged from it; free space, then run the command again")
    return result


def execute(request: TrialRequest) -> dict[str, Any]:
    """Build, measure and check one config in this process; returns a :class:`TrialResult` dict.

    Expected failures of the configuration come back as a status; this
    function itself never raises for them.
    """
    started = time.perf_counter()
    result = TrialResult(status="error", config=dict(request.config))
    try:
        import numpy as np
        import torch

        from autotune.config import Config
        from autotune.devices import cpu_threads
        from autotune.environment import fingerprint
        from autotune.registry import check_unchanged, get_workload_class, numba_folder

        if request.purpose == "cached reference":
            # weights_only: a reference file is data; a planted pickle must not run code. Raises if it is not.
            torch.load(request.reference_path, weights_only=True, map_location="cpu")  # no GPU touched to check it
            result.status = "ok"
            return result.to_dict()
        # numba (when a workload uses it) caches compiled kernels here, shared by all trials.
        os.environ.setdefault("NUMBA_CACHE_DIR", str(numba_folder(request.cache_dir)))

        # The count is part of what was measured; set only where torch's differs: set again to 2 on 2 cores, numba's
        # 0.12 ms runs (chmm, tiny) stalled 4 ms every 30 or so once a check had run (in a plain script too).
        if torch.get_num_threads() != (request.threads or cpu_threads()):
            torch.set_num_threads(request.threads or cpu_threads())
        result.threads = torch.get_num_threads()
        # numpy's BLAS and any other OpenMP pool too: torch's count alone left a workload's numpy products on
        # every core (--threads 1 ran an 800x800 product at 123 a second, 116 at 2). Held until the process ends.
        thread_pools(result.threads)
        # Every global generator as the reference's process had it (Python's too: a fork seeds it from the OS).
        torch.manual_seed(0)
        np.random.seed(0)
        random.seed(0)
        workload = get_workload_class(request.workload)(request.size, request.torch_device, request.cache_dir)
        check_unchanged(request.workload, request.cache_dir)  # a file edited during the search: not its config's
        result.unit = workload.unit
        config = Config(request.config)
        Path(request.cache_dir).mkdir(parents=True, exist_ok=True)
        workload.prepare()
        built = time.perf_counter()
        run = workload.build(config)
        result.build_seconds = time.perf_counter() - built  # once a job, as the first run: a precompute, a model
        if got := not_a_run(run):  # else "'NoneType' object is not callable", with no word of build
            raise TypeError(f"{type(workload).__name__}.build returned {got}; it must return the run: a function of "
                            "no arguments that does the work once")
        result.items_per_run = workload.items_per_run(config)

        if request.purpose == "reference":
            _write_reference(workload, run, request.reference_path, result)
        else:
            _measure_and_check(workload, run, config, request, result)
        if result.peak_memory_bytes is None:  # else its timed runs' peak, read before their check
            result.peak_memory_bytes = peak_memory(request.torch_device)
        result.environment = fingerprint(request.torch_device)
    except BaseException as exc:  # noqa: BLE001 - every failure of a config is data
        # Ctrl-C here (--isolation inprocess); a trial's own process ignores SIGINT: one raised there is the workload's
        if isinstance(exc, KeyboardInterrupt) and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            raise
        result.status = "oom" if _is_out_of_memory(exc, request.torch_device) else "error"
        result.lost = _is_disk_full(exc) or None
        result.error = said(exc)[:500]
        result.traceback = "".join(traceback.format_exception(exc))[-4000:]
    result.wall_seconds = time.perf_counter() - started
    return result.to_dict()


def _died(config: dict[str, Any], error: str, signum: int, kills: int | None, started: float) -> TrialResult:
    """``crash``, or ``oom`` where SIGKILL came as the kernel's OOM killer killed (its count was ``kills``): over a
    container's memory limit a trial read "crash", no word of memory nor a constraint the sampler learns from."""
    wall = time.perf_counter() - started
    if signum == signal.SIGKILL and kills is not None and (oom_kills() or 0) > kills:
        return TrialResult("oom", config, error="process killed by the kernel's OOM killer (out of memory: the "
                           "machine's, or its cgroup's limit)", wall_seconds=wall)
    return TrialResult("crash", config, error=error, wall_seconds=wall)


def _write_reference(workload: Any, run: Any, path: Path, result: TrialResult) -> None:
    """One run of the reference config, its output saved as the reference file (:func:`autotune.reference.save`)."""
    # Synchronised as a timed run is: a workload's own wait alone could leave the device's work going.
    seconds, output = Measurer().timed(run, synchronizer(workload))
    result.times, result.status = [seconds], "ok"
    save_reference(workload, workload.to_reference(output), path)


def _measure_and_check(workload: Any, run: Any, config: Any, request: TrialRequest, result: TrialResult) -> None:
    """Time the runs (see :class:`Measurer`) and check the first and last output against the reference."""
    import torch

    items = result.items_per_run  # every throughput divides it (judged here: a reference's run is not timed)
    if isinstance(items, bool) or not isinstance(items, numbers.Real) or not 0 < items < math.inf:
        raise ValueError(f"{type(workload).__name__}.items_per_run returned {items!r}; it must be a positive number "
                         f"of {workload.unit} a run")
    # A numpy scalar (numpy.int64) would carry into every figure, and neither the study nor --json stores one.
    result.items_per_run = items = int(items) if isinstance(items, numbers.Integral) else float(items)
    checks, peaks, memory = [], [], PeakMemory(request.torch_device)
    generators, drew = None, []  # the global random generators after the first run; those a later run moved

    def on_output(which: str, output: Any) -> bool:
        nonlocal generators
        # Each peak before its check allocates: the first run's, then (reset after each check) the other runs'.
        peak = memory.read()
        # Read before the check, which may draw; a later output's generators beside the first's (see randomness).
        moved = generators.moved() if generators is not None else []
        if which == "first":
            generators = GlobalGenerators(request.torch_device)
            result.first_run_peak_memory_bytes = result.peak_memory_bytes = peak
        else:
            peaks.append(peak)
            result.peak_memory_bytes = max(peaks)
        # Checked at once: a workload may reuse its output buffers on the next run. The reference is loaded for the
        # check alone (held from the start, it was in every CPU run's peak); weights_only: it is data, not code.
        reference = torch.load(request.reference_path, weights_only=True, mmap=True)
        check = workload.check(output, reference, config)
        if not isinstance(check, Check):
            raise TypeError(f"{type(workload).__name__}.check returned a {type(check).__name__}; it must return an "
                            "autotune.check.Check, e.g. Check.from_metrics({'output': (error, tolerance)})")
        checks.append(check)
        if not check.passed and moved:
            drew[:] = moved  # each run drew new numbers: said in the error (see randomness)
        if which == "first":
            control(workload, check, output, reference, config, request.reference == request.config)  # see control
            if check.passed:  # the knobs its twin holds at the reference's (see twins)
                result.tolerance_knobs = knobs_that_loosen(workload.check, check.metrics, output, reference, config,
                                                           request.reference)
        del reference  # a check's own memory is no run's
        memory.reset()
        if which == "first" and check.passed:  # before the runs timed next: the check's pools asleep (see there),
            settle_threads()
            gc.collect()  # and the collector's generations emptied of what the build and checks made (see README)
        return check.passed

    measurer = Measurer(**request.measurer, other_work=lambda: OtherWork(result.threads))  # beyond its idle cores
    try:
        measurement = measurer.measure(run, items, synchronizer(workload), on_output)
    finally:
        memory.close()
    result.processes = memory.processes or None
    worst = max(checks, key=lambda c: (not c.passed, share_of_tolerance(c.error, c.tolerance)))
    result.check = worst.to_dict()
    result.times, result.warmup_times, result.timed_runs = measurement.times, measurement.warmup_times, measurement.runs
    result.warmup_seconds, result.throughput = measurement.first_run_seconds, measurement.throughput
    result.median_seconds, result.iqr_seconds = measurement.median, measurement.iqr
    result.relative_spread, result.cut_short = measurement.relative_spread, measurement.cut_short
    result.noisy, result.noisy_threshold = measurement.noisy, measurement.noisy_threshold
    result.busy_elsewhere, result.cores_used = measurement.busy_elsewhere, measurement.cores_used
    result.status = "ok" if worst.passed else "incorrect"
    if not worst.passed:
        result.error = differs(checks[0], worst, is_reference=request.reference == request.config, drew=drew)


def _mapped_bytes() -> int:
    """This process's address space now (Linux; 0 where /proc is missing)."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    except OSError:
        return 0


def _run_in_child(request: TrialRequest) -> dict[str, Any]:
    limit = request.memory_limit_bytes
    if limit:
        mapped = _mapped_bytes()
        if mapped >= limit:
            # Forked from the server, a trial starts with torch mapped: under a cap below that, every
            # allocation and every library a trial loads fails, as errors that do not say why.
            return TrialResult("oom", dict(request.config), error=(
                f"MemoryError: --memory-limit {limit / 2**20:.0f} MiB is below the {mapped / 2**20:.0f} MiB a trial "
                "maps before it starts (torch and its libraries); raise it")).to_dict()
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return execute(request)


# -- in the tuner -----------------------------------------------------------------


class Runner:
    """Runs trial requests, each in a fresh child process (``isolation="subprocess"``).

    ``isolation="inprocess"`` runs them in this process: faster to start, but global state leaks between trials,
    a timeout cannot be enforced, and a crash takes the tuner down. Use it for debugging only.

    Example: ``runner = Runner(timeout=300); result = runner.run(request); runner.close()``.
    """

    def __init__(self, isolation: str = "subprocess", timeout: float | None = None) -> None:
        if isolation not in ("subprocess", "inprocess"):
            raise ValueError(f"isolation must be 'subprocess' or 'inprocess', got {isolation!r}")
        self.isolation, self.timeout = isolation, TRIAL_TIMEOUT if timeout is None else timeout
        self._server: ForkServer | None = None
        self.on_wait: Any = None  # told (request, seconds) every minute a trial runs (None: the server starts)

    @property
    def server(self) -> ForkServer:
        if self._server is None:
            self._server = ForkServer(_PRELOAD, on_start_wait=lambda s: self.on_wait and self.on_wait(None, s))
        return self._server

    def start(self) -> None:
        """Start the fork server without waiting for it (:meth:`warm_up` and :meth:`run` wait): it imports torch
        while this process goes on, as a search's own import of its workload does (2.3 s and 2 s on the 2-core CPU)."""
        if self.isolation != "inprocess":
            self.server.start()

    def wait_ready(self) -> None:
        """Wait for a fork server that :meth:`start` started (nothing if none is starting)."""
        if self._server is not None:
            self._server.wait_ready()

    def warm_up(self) -> float:
        """Start the fork server now, or wait for the one :meth:`start` started (it imports torch); seconds waited."""
        if self.isolation == "inprocess":
            return 0.0
        started = time.perf_counter()
        self.start()
        self.wait_ready()
        return time.perf_counter() - started

    def run(self, request: TrialRequest, timeout: float | None = None) -> TrialResult:
        timeout = self.timeout if timeout is None else timeout
        if self.isolation == "inprocess":
            # As a trial's child does (autotune._forkserver): stdout is where --json writes.
            with contextlib.redirect_stdout(sys.stderr):
                return TrialResult.from_dict(execute(request))
        waiting = None if self.on_wait is None else (lambda seconds: self.on_wait(request, seconds))
        for again in (False, True):
            started, config, kills = time.perf_counter(), dict(request.config), oom_kills()
            try:
                outcome, exitcode, timed_out = self.server.call(_run_in_child, (request,), timeout, waiting)
                break
            except ServerDied as exc:  # its trial went with it: the OOM killer's pick, or (once) killed from outside
                if again or kills is not None and (oom_kills() or 0) > kills:
                    return _died(config, f"process died: {exc}", exc.signum, kills, started)
                warnings.warn(f"the fork server died from {signal_name(exc.signum)} while a trial ran, not by the "
                              "kernel's OOM killer (pkill, a supervisor?): the trial runs again", stacklevel=2)
        wall = time.perf_counter() - started
        if timed_out:
            return TrialResult("timeout", config, error=f"ran past the {timeout:g} s trial timeout; killed", wall_seconds=wall)
        if outcome is not None:
            return replace(TrialResult.from_dict(outcome), wall_seconds=wall)
        if exitcode is not None and exitcode < 0:
            return _died(config, f"process died from {signal_name(-exitcode)}", -exitcode, kills, started)
        return TrialResult("crash", config, error=f"process exited with status {exitcode} without a result", wall_seconds=wall)

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
