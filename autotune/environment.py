"""The environment fingerprint stored with every exported config.

A speedup measured with one torch, driver or device says little about
another; the fingerprint says what a figure was measured on.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any

__all__ = ["busy_cores", "fingerprint"]


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
    from autotune.devices import _cpu_name, cpu_threads

    info: dict[str, Any] = {
        "autotune": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_name(),
        "cpu_cores": cpu_threads(),
    }
    import numpy
    import torch

    info["numpy"] = numpy.__version__

    info.update(
        torch=torch.__version__,
        cuda=torch.version.cuda,
        cpu_threads=torch.get_num_threads(),
    )
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
    """How many cores every process together kept busy over ``seconds`` (this one sleeps meanwhile).

    Read from ``/proc/stat``; None where it is absent (not Linux). Timing beside other work is wrong:
    on 2 shared cores, an explain run read a config 70x slower than alone (README, "What each fix bought").
    """
    def sample() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as handle:
            values = [int(v) for v in handle.readline().split()[1:9]]
        return sum(values), values[3] + values[4]  # all jiffies; idle and iowait

    try:
        total_before, idle_before = sample()
        time.sleep(seconds)
        total_after, idle_after = sample()
    except (OSError, ValueError, IndexError):
        return None
    total = total_after - total_before
    if total <= 0:
        return None
    return (1 - (idle_after - idle_before) / total) * (os.cpu_count() or 1)
