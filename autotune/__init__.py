"""autotune: find the fastest correct way to run a PyTorch workload on a device.

Reading a tuned config is light (no torch, no optuna)::

    import autotune
    cfg = autotune.load_config("chmm")      # device="auto"
    cfg["dtype"], cfg.speedup, cfg.measured

The tuner and the plug-in classes are imported on first use.
"""

from __future__ import annotations

from typing import Any

from autotune._version import __version__
from autotune.config import Config
from autotune.tuned import TunedConfig, load_config
from autotune.exceptions import (
    AutotuneError,
    ConfigNotFoundError,
    DeviceUnavailableError,
    DiskFullError,
    InvalidConfigError,
    SearchSpaceError,
    StorageError,
    UnknownNameError,
)

__all__ = [
    "AutotuneError",
    "Check",
    "Config",
    "ConfigNotFoundError",
    "DeviceProfile",
    "DeviceUnavailableError",
    "DiskFullError",
    "InvalidConfigError",
    "Measurement",
    "Measurer",
    "Runner",
    "SearchSpace",
    "SearchSpaceError",
    "StorageError",
    "TrialResult",
    "TunedConfig",
    "Tuner",
    "UnknownNameError",
    "Workload",
    "__version__",
    "get_workload_class",
    "load_config",
    "load_space",
    "register_workload",
]

# Heavy parts load on first use so that `import autotune` and `load_config` stay fast.
_LAZY = {
    "Check": "autotune.check",
    "DeviceProfile": "autotune.devices",
    "Measurement": "autotune.measure",
    "Measurer": "autotune.measure",
    "Runner": "autotune.runner",
    "TrialResult": "autotune.runner",
    "SearchSpace": "autotune.space",
    "load_space": "autotune.space",
    "Tuner": "autotune.tuner",
    "Workload": "autotune.workload",
    "get_workload_class": "autotune.registry",
    "register_workload": "autotune.workload",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'autotune' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
