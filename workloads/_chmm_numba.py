"""numba kernels of the CHMM forward and backward messages (CPU, float32/float64).

The per-step recurrence of :mod:`workloads.chmm` compiled to machine code:
one small matrix-vector product per step, written as loops over NumPy arrays
so that no block is copied and no interpreter runs between steps. Imported
only when a config asks for ``messages: numba``; compiled code is cached on
disk (``NUMBA_CACHE_DIR`` or next to this file).
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Let LLVM reorder the sums of each matrix-vector product so that it can use SIMD
# lanes; no other fast-math licence (NaN and infinity checks must still work).
_REASSOCIATE = {"reassoc", "contract"}


@njit(cache=True, nogil=True, fastmath=_REASSOCIATE)
def forward(T_tr, starts, stops, actions, mstarts, n_states, fwd, norms, debug):  # pragma: no cover - compiled
    """Forward messages into ``fwd`` (flat) and normalisers into ``norms``; T_tr[a, j, i]."""
    zero = fwd.dtype.type(0)
    steps = starts.shape[0]
    j0, j1 = starts[0], stops[0]
    o0 = mstarts[0]
    for k in range(j1 - j0):
        fwd[o0 + k] = 1.0 / n_states
    total = zero
    for k in range(j1 - j0):
        total += fwd[o0 + k]
    norms[0] = total
    for k in range(j1 - j0):
        fwd[o0 + k] /= total
    for t in range(1, steps):
        i0 = starts[t - 1]
        n_i = stops[t - 1] - i0
        j0 = starts[t]
        n_j = stops[t] - j0
        a = actions[t - 1]
        m0 = mstarts[t - 1]
        o0 = mstarts[t]
        previous = fwd[m0 : m0 + n_i]
        total = zero
        for j in range(n_j):
            row = T_tr[a, j0 + j, i0 : i0 + n_i]  # contiguous: a dot product LLVM can vectorise
            acc = zero
            for i in range(n_i):
                acc += row[i] * previous[i]
            fwd[o0 + j] = acc
            total += acc
        if debug:
            if not total > 0:
                raise AssertionError("an observation has zero probability")
        norms[t] = total
        for j in range(n_j):
            fwd[o0 + j] /= total


@njit(cache=True, nogil=True, fastmath=_REASSOCIATE)
def backward(T, starts, stops, actions, mstarts, bwd, debug):  # pragma: no cover - compiled
    """Backward messages into ``bwd`` (flat), each normalised to sum to one."""
    zero = bwd.dtype.type(0)
    steps = starts.shape[0]
    i0, i1 = starts[steps - 1], stops[steps - 1]
    o0 = mstarts[steps - 1]
    for k in range(i1 - i0):
        bwd[o0 + k] = 1.0 / (i1 - i0)
    for t in range(steps - 2, -1, -1):
        i0 = starts[t]
        n_i = stops[t] - i0
        j0 = starts[t + 1]
        n_j = stops[t + 1] - j0
        a = actions[t]
        m0 = mstarts[t + 1]
        o0 = mstarts[t]
        following = bwd[m0 : m0 + n_j]
        total = zero
        for i in range(n_i):
            row = T[a, i0 + i, j0 : j0 + n_j]
            acc = zero
            for j in range(n_j):
                acc += row[j] * following[j]
            bwd[o0 + i] = acc
            total += acc
        if debug:
            if not total > 0:
                raise AssertionError("a backward message sums to zero")
        for i in range(n_i):
            bwd[o0 + i] /= total


def arrays(layout) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The index arrays the kernels read, as int64 NumPy arrays."""
    return (
        np.asarray(layout.starts, dtype=np.int64),
        np.asarray(layout.stops, dtype=np.int64),
        np.asarray(layout.actions, dtype=np.int64),
        np.asarray(layout.mstarts, dtype=np.int64),
    )
