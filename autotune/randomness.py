"""Whether a run draws new numbers from a global random generator each time it runs.

A run that does (dropout in training mode, ``torch.randn`` with no generator of its own) gives a new output each
run. Each trial's process seeds torch, numpy and Python's before its build as the reference's did, so its first run
gives the reference's output and passes, and a later run's fails: a dropout block of mine read "does a run change
what the next one reads?", no word of the dropout (2026-12-07, this CPU). The state of each generator after the
first run, beside its state after a later one, says which of them each run draws from; a run that seeds its
generator where it starts leaves the same state after every run, and is not named.
"""

from __future__ import annotations

import random
from typing import Any

__all__ = ["GlobalGenerators"]


class GlobalGenerators:
    """The states of this process's global random generators now; :meth:`moved` names those whose state differs
    later.

    Example::

        after_first = GlobalGenerators("cpu")
        run()
        after_first.moved()  # ["torch's"] where the run drew from torch's global generator
    """

    def __init__(self, torch_device: str) -> None:
        self.torch_device = torch_device
        self.states = self._now()

    def _now(self) -> dict[str, Any]:
        import numpy as np
        import torch

        states = {"torch's": torch.random.get_rng_state(), "numpy's": np.random.get_state(legacy=False),
                  "Python's": random.getstate()}
        # A GPU's generator is its own (dropout on CUDA draws there); read where the run has started CUDA, never
        # starting it: that would take memory and seconds from a run that does not use it.
        if self.torch_device.startswith("cuda") and torch.cuda.is_initialized():
            states["torch's CUDA"] = torch.cuda.get_rng_state(self.torch_device)
        return states

    def moved(self) -> list[str]:
        """The generators whose state is not what it was when this was made (in the order above)."""
        import numpy as np
        import torch

        def same(a: Any, b: Any) -> bool:
            if isinstance(a, torch.Tensor):
                return torch.equal(a, b)
            if isinstance(a, dict):  # numpy's: {"bit_generator": ..., "state": {"key": array, "pos": n}, ...}
                return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
            if isinstance(a, np.ndarray):
                return np.array_equal(a, b)
            return a == b

        now = self._now()
        return [name for name, state in self.states.items() if name not in now or not same(state, now[name])]
