"""Imported once by the fork server so every trial's child starts with torch loaded, and with the C allocator
settled as a running program's is (every trial's child is forked from this state).

Nothing here may touch CUDA: a CUDA context does not survive fork.
"""

import gc

import numpy  # noqa: F401
import torch  # noqa: F401

import autotune.runner  # noqa: F401
import workloads.chmm, workloads.latentwire, workloads.lsd, workloads.ten, workloads.vlm_mc  # noqa: F401, E401  (the built-ins)
from autotune.environment import settle_allocator

settle_allocator()
# What the server holds, frozen out of the collector's view: a trial's collections walk what the trial made alone.
# The full one each trial runs before its warm-up (autotune.runner) walked the server's 170,000 objects too: 88-159 ms
# a trial of chmm or ten at tiny, 0.4-67 ms frozen (this CPU).
gc.collect()
gc.freeze()
