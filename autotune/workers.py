"""Several worker processes on one study: who gets which device, starting them, stopping them.

``autotune search --workers N`` (or ``--gpus 0,1,...``) settles the study's
trial budget, writes its settings to a file and starts N workers
(``python -m autotune._worker SETTINGS INDEX BUDGET``); each takes trials
from the shared study until the budget is done (see
:meth:`autotune.tuner.Tuner.work`). A worker never shares its device with
another: with ``--gpus`` each sees one GPU (``CUDA_VISIBLE_DEVICES``); on the
CPU each gets its own cores where there are enough of them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from autotune.devices import cpu_threads

if TYPE_CHECKING:
    from autotune.devices import DeviceProfile

__all__ = ["WorkerPlan", "apply_cpu_pinning", "check_gpus", "gpu_environment", "plan_workers", "run_workers"]

#: Environment variable that hands a worker its CPU cores.
CPUS_ENV = "AUTOTUNE_WORKER_CPUS"


@dataclass
class WorkerPlan:
    index: int
    env: dict[str, str] = field(default_factory=dict)
    description: str = ""


def _available_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return list(range(os.cpu_count() or 1))


def gpu_environment(index: int) -> dict[str, str]:
    """The environment that shows a process GPU ``index`` alone, numbered as torch numbers this process's GPUs.

    Under ``CUDA_VISIBLE_DEVICES=2,3``, ``--gpus 0`` is physical GPU 2: the index picks from that list (ordinals
    or UUIDs), as torch's ``cuda:0`` would; set to ``0`` it would be another GPU than the one asked for.
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return {"CUDA_VISIBLE_DEVICES": str(index)}
    return {"CUDA_VISIBLE_DEVICES": [entry.strip() for entry in visible.split(",")][index]}


def check_gpus(gpus: list[int], device: str, profile: "DeviceProfile", cuda_count: int) -> str | None:
    """Why ``--gpus`` cannot be honoured (``device`` is no CUDA GPU here, an index past its GPUs), or None."""
    asked = ",".join(map(str, gpus))
    if profile.kind != "cuda":
        # Each worker would run on that device anyway, beside the others, each timing the rest's load.
        named = device if device == profile.name else f"{device} (the {profile.name} here)"
        return f"--gpus {asked} starts one worker per CUDA GPU, but --device {named} is not one; use --workers N"
    missing = [g for g in gpus if g >= cuda_count]
    if missing:
        return (f"--gpus {asked}: no GPU {','.join(map(str, missing))} here; this process sees {cuda_count} CUDA "
                f"GPU(s), numbered from 0 (after CUDA_VISIBLE_DEVICES)")
    return None


def plan_workers(workers: int, gpus: list[int] | None, cpus: list[int] | None = None) -> tuple[list[WorkerPlan], str | None]:
    """One plan per worker, and a warning when workers must share devices (their timings then interfere)."""
    if gpus:
        return [WorkerPlan(i, gpu_environment(g), f"GPU {g}") for i, g in enumerate(gpus)], None
    # As many cores as a cgroup's CPU quota allows (cpu_threads): workers pinned to all the machine's would each
    # take the quota's threads, and the quota would hold them for part of every period.
    cpus = cpus if cpus is not None else _available_cpus()[:cpu_threads()]
    if workers <= 1:
        return [WorkerPlan(0, {}, "every core")], None
    if len(cpus) < workers:
        return ([WorkerPlan(i, {}, "shared cores") for i in range(workers)],
                f"{workers} workers on {len(cpus)} cores share them: their timings disturb each other; "
                f"use --workers {len(cpus)} or fewer for figures you will compare")
    share = len(cpus) // workers
    plans = []
    for i in range(workers):
        mine = cpus[i * share:(i + 1) * share]
        plans.append(WorkerPlan(i, {CPUS_ENV: ",".join(map(str, mine))}, f"cores {mine[0]}-{mine[-1]}"))
    return plans, None


def pinned_threads(plans: list[WorkerPlan]) -> int | None:
    """The cores each worker is pinned to (and so its trials' threads), or None where they are not pinned."""
    cpus = plans[0].env.get(CPUS_ENV) if plans else None
    return len(cpus.split(",")) if cpus else None


def apply_cpu_pinning() -> None:
    """In a worker: keep to the cores the driver gave it (trials forked from it inherit them)."""
    cpus = os.environ.get(CPUS_ENV)
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})


def run_workers(settings: Path, budget: int, plans: list[WorkerPlan], on_stage: Callable[[str], None],
                env: dict[str, str] | None = None) -> list[int]:
    """Start a worker per plan on the ``settings`` file, working to ``budget``; wait for all; forward Ctrl-C and SIGTERM.

    ``env`` is added to every worker's environment (the storage URL, which
    must not appear on a command line). Returns their exit statuses. A stop
    signal to the driver reaches every worker as SIGTERM: each marks its
    current trial and exits; the driver waits for them. A driver killed
    outright (SIGKILL, the OOM killer) takes them along: each gets SIGTERM.
    """
    from autotune._forkserver import die_with_parent

    driver = os.getpid()
    processes = []
    for plan in plans:
        command = [sys.executable, "-m", "autotune._worker", str(settings), str(plan.index), str(budget)]
        # Own process group: a terminal's Ctrl-C reaches the driver only, which stops the workers in order.
        processes.append(subprocess.Popen(command, env={**os.environ, **(env or {}), **plan.env},
                                          start_new_session=True,
                                          preexec_fn=lambda: die_with_parent(driver, signal.SIGTERM)))
        on_stage(f"worker {plan.index} started (pid {processes[-1].pid}, {plan.description})")
    stopping = {"signal": None}

    def forward(signum: int, frame: object) -> None:
        stopping["signal"] = signum
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while any(p.poll() is None for p in processes):
            time.sleep(0.2)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if stopping["signal"] is not None:
        raise KeyboardInterrupt
    return [p.returncode for p in processes]
