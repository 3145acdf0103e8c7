"""Imported once by the fork server so every trial's child starts with torch loaded.

Nothing here may touch CUDA: a CUDA context does not survive fork.
"""

import numpy  # noqa: F401
import torch  # noqa: F401

import autotune.runner  # noqa: F401
import workloads  # noqa: F401  (the built-in workloads)
