"""A workload that fails on purpose, one way per value of its `behaviour` knob.

Used to check that the runner classifies every outcome and that a study
survives all of them. `wrong` is the fastest of all and must never win.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import time
from pathlib import Path

import numpy as np

from autotune.check import Check, relative_error
from autotune.workload import Workload


class BrokenWorkload(Workload):
    name = "broken"
    unit = "items"
    sizes = {"tiny": {}, "small": {}, "full": {}}
    default_size = "tiny"

    def _note_pid(self, what: str, pid: int) -> None:
        # Tests read these to make sure nothing is left running.
        if self.cache_dir is not None:
            (Path(self.cache_dir) / f"{what}.pid").write_text(str(pid))

    def build(self, config):
        # torch here, not at the top: a test's own autotune process then never imports it (4 s a command
        # on 2 cores); the runner's children have it from the fork server.
        import torch

        behaviour = config["behaviour"]
        self._note_pid("trial", os.getpid())
        if behaviour == "raise_build":
            raise ValueError("broken on purpose in build")
        value = torch.ones(8, dtype=torch.float64)

        def run():
            if behaviour == "ok":
                time.sleep(0.02)
            elif behaviour == "fast":
                time.sleep(0.005)
            elif behaviour == "wrong":
                return value * 2  # fastest of all, and wrong
            elif behaviour == "nan":
                return value * float("nan")
            elif behaviour == "raise_run":
                raise RuntimeError("broken on purpose in run")
            elif behaviour == "keyboard":
                raise KeyboardInterrupt  # the workload's own: a trial's process ignores Ctrl-C
            elif behaviour == "segfault":
                ctypes.string_at(0)  # reads address 0: SIGSEGV
            elif behaviour == "abort":
                os.abort()  # SIGABRT, as a failed C++ assertion in a kernel
            elif behaviour == "oom_rlimit":
                # Touches up to 8 GiB in 256 MiB blocks: under RLIMIT_AS (--memory-limit) an allocation
                # fails long before; without one, it is still safe on a 24 GiB machine.
                blocks = [np.ones(1 << 28, dtype=np.uint8) for _ in range(32)]
                del blocks
            elif behaviour == "exit":
                os._exit(3)
            elif behaviour == "hang":
                child = subprocess.Popen(["sleep", "600"])
                self._note_pid("grandchild", child.pid)
                time.sleep(600)
            elif behaviour == "oom_torch":
                torch.empty(1 << 44, dtype=torch.uint8)  # 16 TiB: the CPU allocator refuses
            elif behaviour == "oom_numpy":
                np.ones(1 << 44, dtype=np.uint8)
            return value.clone()

        return run

    def items_per_run(self, config):
        return 0 if config["behaviour"] == "no_items" else 8  # no_items: a count no throughput can divide

    def check(self, output, reference, config):
        if config["behaviour"] == "bare_check":
            return relative_error(output, reference)  # a number, not a Check
        return Check.from_metrics({"value": (relative_error(output, reference), 1e-9)})
