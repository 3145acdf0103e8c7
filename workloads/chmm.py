"""CHMM: one EM iteration of an action-conditioned clone-structured HMM.

A miniature of the project in seed 000: the cloned HMM of George et al.
("clone-structured cognitive graphs"), ported from NumPy + numba to PyTorch,
learning the map of a room from a long random walk. Every observation symbol
owns a block of hidden "clones"; ``T[a, i, j] = P(next clone j | clone i,
action a)``. One EM iteration is

* a forward pass (messages normalised at every step, their normalisers give
  the log2 likelihood),
* a backward pass,
* ``update_counts`` (the published ``updateC``: expected transition counts),
* ``update_transitions`` (``update_T``: counts plus a pseudocount, row-normalised).

The seed's "before" (its PyTorch port) checks assertions at every step,
computes block indices per step from tensors, allocates per step and updates
counts one step at a time; each fix it proposed is a knob here. The unit is
timesteps of the sequence.

Users of the model can call :func:`log2_likelihood` and :func:`em_step`
directly.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import torch

from autotune.check import Check, relative_error, worst_error
from autotune.config import Config
from autotune.workload import Workload, register_workload
from workloads._torch import cached

__all__ = [
    "ChmmWorkload",
    "TOLERANCES",
    "em_step",
    "log2_likelihood",
    "random_walk",
    "update_counts",
    "update_transitions",
]

N_ACTIONS = 4  # left, right, up, down
PSEUDOCOUNT = 2e-3  # as in the published CSCG examples

_DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}

#: How an output's error is measured where not by :func:`~autotune.check.relative_error`, the norm of the whole:
#: a step's normaliser by the worst step, as the norm of all steps dilutes one lost step by the square root of
#: their number (:func:`~autotune.check.worst_error`).
ERRORS: Mapping[str, Callable[[Any, Any], float]] = {"step_log2_likelihoods": worst_error}

#: Relative tolerances per dtype and output (the M step's transitions too),
#: each a stated multiple of the honest worst error over every knob value and
#: 3 data seeds at `tiny` (`python benchmarks/check_power.py --workloads chmm`):
#: float64 worst 2.8e-16 at tiny and 2.2e-13 at `small` (a 4096-step scan),
#: bound 3e-12 (about 10x the `small` worst: error grows with the sequence);
#: float32 1.1e-7, bound 1e-6 (9x); bfloat16 2.3e-3 (likelihood) and 4.6e-3
#: (counts), bounds 2.2x; float16 1.6e-4 and 5.5e-4, bounds 3-4x. The 16-bit
#: bounds are tight because a dropped transition moves the counts by 2e-2.
#: Each step's log2 normaliser is checked too, by its worst step (honest worst
#: 1.8e-12, 3.1e-7, 0.022 and 4.1e-3 over `tiny` and `small`; bounds 5x, 5x,
#: 2.3x, 2.4x): the 16-bit total of a long sequence cannot show one lost step.
TOLERANCES: Mapping[str, Mapping[str, float]] = {
    "float64": {"log2_likelihood": 3e-12, "step_log2_likelihoods": 1e-11, "counts": 3e-12, "transitions": 3e-12},
    "float32": {"log2_likelihood": 1e-6, "step_log2_likelihoods": 1.5e-6, "counts": 1e-6, "transitions": 1e-6},
    "bfloat16": {"log2_likelihood": 5e-3, "step_log2_likelihoods": 5e-2, "counts": 1e-2, "transitions": 1e-2},
    "float16": {"log2_likelihood": 5e-4, "step_log2_likelihoods": 1e-2, "counts": 2e-3, "transitions": 2e-3},
}


# -- data ---------------------------------------------------------------------


def random_walk(rows: int, cols: int, n_obs: int, steps: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random walk in a ``rows x cols`` room whose cells show one of ``n_obs`` symbols.

    Returns ``(room, x, a)``: ``x[t]`` is the symbol seen at step ``t`` and
    ``a[t]`` the action taken there, which leads to ``x[t + 1]``. Moving into
    a wall leaves the agent where it is, as in the published room generator.
    """
    rng = np.random.default_rng(seed)
    room = rng.integers(0, n_obs, size=(rows, cols))
    a = rng.integers(0, N_ACTIONS, size=steps)
    moves = np.array([(0, -1), (0, 1), (-1, 0), (1, 0)])
    x = np.empty(steps, dtype=np.int64)
    r, c = int(rng.integers(rows)), int(rng.integers(cols))
    for t in range(steps):
        x[t] = room[r, c]
        dr, dc = moves[a[t]]
        if 0 <= r + dr < rows and 0 <= c + dc < cols:
            r, c = r + dr, c + dc
    return room, x, a.astype(np.int64)


def initial_transitions(n_clones: np.ndarray, seed: int = 0, pseudocount: float = PSEUDOCOUNT) -> np.ndarray:
    """Random counts turned into transitions, as the published model initialises (float64)."""
    n_states = int(n_clones.sum())
    counts = np.random.default_rng(seed + 1).random((N_ACTIONS, n_states, n_states))
    return update_transitions(counts, pseudocount)


# -- the algorithm --------------------------------------------------------------


class _Layout:
    """Index arithmetic of one sequence: where each observation's clones and each step's message live."""

    def __init__(self, n_clones: np.ndarray, x: np.ndarray, a: np.ndarray) -> None:
        n_clones = np.asarray(n_clones, dtype=np.int64)
        self.n_clones = n_clones
        self.steps = len(x)
        self.state_loc = np.concatenate([[0], np.cumsum(n_clones)])
        self.mess_loc = np.concatenate([[0], np.cumsum(n_clones[x])])
        self.x, self.a = np.asarray(x, dtype=np.int64), np.asarray(a, dtype=np.int64)
        self.uniform = bool(np.all(n_clones == n_clones[0]))
        # Precomputed per-step indices (the seed's fix #2), as Python ints for the loops.
        self.starts = self.state_loc[self.x].tolist()
        self.stops = self.state_loc[self.x + 1].tolist()
        self.mstarts = self.mess_loc[:-1].tolist()
        self.mstops = self.mess_loc[1:].tolist()
        self.actions = self.a.tolist()


def _debug_step(message: torch.Tensor, norm: torch.Tensor, size: int, action: int, n_actions: int) -> None:
    # The seed's per-step assertions. Each `.item()`-like check synchronises a GPU.
    if not 0 <= action < n_actions:
        raise AssertionError(f"action {action} out of range")
    if message.shape[0] != size:
        raise AssertionError(f"message has {message.shape[0]} entries, expected {size}")
    if not bool(torch.isfinite(message).all()):
        raise AssertionError("message is not finite")
    if not bool((message >= 0).all()):
        raise AssertionError("message has a negative entry")
    if not bool(norm > 0):
        raise AssertionError("an observation has zero probability")


class _Kernels:
    """The forward, backward and count kernels of one EM iteration under one config.

    ``indices``: ``per_step`` computes block bounds from tensors at every step
    (the seed's "before"), ``precomputed`` reads them from Python lists made
    once, ``block_views`` also makes every (action, obs, obs) block view once.
    ``workspace``: messages go into buffers allocated once and reused, instead
    of a fresh tensor per step.
    """

    def __init__(
        self,
        layout: _Layout,
        device: torch.device | str,
        dtype: torch.dtype,
        indices: str = "precomputed",
        workspace: bool = False,
        debug: bool = False,
        messages: str = "loop",
        chunk_size: int = 256,
    ) -> None:
        self.layout, self.device, self.dtype = layout, torch.device(device), dtype
        self.indices, self.workspace, self.debug = indices, workspace, debug
        self.messages, self.chunk_size = messages, int(chunk_size)
        if messages in _SCANS and not layout.uniform:
            raise ValueError(f"the {messages} kernel needs the same number of clones for every observation")
        if messages == "numba":
            if self.device.type != "cpu" or dtype not in (torch.float32, torch.float64):
                raise ValueError("numba messages run on the CPU in float32 or float64 only")
            import numba

            if numba.config.DISABLE_JIT:
                # The kernels then run in the interpreter: 32x slower at tiny on this CPU, checked "ok", so the
                # search ranked numba below the torch kernels and a script without the variable lost it.
                raise RuntimeError("messages=numba cannot be measured: NUMBA_DISABLE_JIT=1 is set, and under it "
                                   "numba runs its kernels in the interpreter; unset it to tune numba")
            from workloads import _chmm_numba

            self._numba = _chmm_numba
            self._numba_index = _chmm_numba.arrays(layout)
            total = int(layout.mess_loc[-1])
            numpy_dtype = np.float32 if dtype == torch.float32 else np.float64
            self._np_fwd = np.empty(total, numpy_dtype)
            self._np_bwd = np.empty(total, numpy_dtype)
            self._np_norms = np.empty(layout.steps, numpy_dtype)
        if messages in _SCANS:
            c = int(layout.n_clones[0])
            self._scan_fwd_index = tuple(
                torch.as_tensor(v, device=self.device)
                for v in (np.r_[0, layout.a[:-1]], layout.x, np.r_[0, layout.x[:-1]])
            )
            reversed_t = np.arange(layout.steps - 1, -1, -1)  # recursion step k works on t = n-1-k
            nxt = np.minimum(reversed_t + 1, layout.steps - 1)
            self._scan_bwd_index = tuple(
                torch.as_tensor(v, device=self.device) for v in (layout.a[reversed_t], layout.x[reversed_t], layout.x[nxt])
            )
            self._clones = c
        n = layout.steps
        self.n_states = int(layout.state_loc[-1])
        if indices == "per_step":
            self.x_t = torch.as_tensor(layout.x, device=self.device)
            self.a_t = torch.as_tensor(layout.a, device=self.device)
            self.state_loc_t = torch.as_tensor(layout.state_loc, device=self.device)
            self.mess_loc_t = torch.as_tensor(layout.mess_loc, device=self.device)
        if workspace:
            total = int(layout.mess_loc[-1])
            self.fwd_buf = torch.empty(total, dtype=dtype, device=self.device)
            self.bwd_buf = torch.empty(total, dtype=dtype, device=self.device)
            self.norm_buf = torch.empty(n, dtype=dtype, device=self.device)
        self._views: dict[tuple[int, int, int], torch.Tensor] = {}
        self._views_of: torch.Tensor | None = None

    # Block bounds for step t: clones of x[t] (and, per step, from tensors as the seed did).
    def _bounds(self, t: int) -> tuple[int, int, int, int, int]:
        if self.indices == "per_step":
            obs = self.x_t[t]
            start, stop = (int(v) for v in self.state_loc_t[obs : obs + 2])
            mstart, mstop = (int(v) for v in self.mess_loc_t[t : t + 2])
            return start, stop, mstart, mstop, int(self.a_t[t])
        lay = self.layout
        return lay.starts[t], lay.stops[t], lay.mstarts[t], lay.mstops[t], lay.actions[t]

    def _block(self, matrix: torch.Tensor, action: int, r0: int, r1: int, c0: int, c1: int) -> torch.Tensor:
        if self.indices != "block_views":
            return matrix[action, r0:r1, c0:c1]
        if self._views_of is not matrix:
            self._views, self._views_of = {}, matrix
        key = (action, r0, c0)
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = matrix[action, r0:r1, c0:c1]
        return view

    def forward(self, T_tr: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Forward messages (flat) and the per-step normalisers ``p(x_t | x_<t)``."""
        if self.messages == "numba":
            starts, stops, actions, mstarts = self._numba_index
            self._numba.forward(T_tr.numpy(), starts, stops, actions, mstarts, self.n_states,
                                self._np_fwd, self._np_norms, self.debug)
            return torch.from_numpy(self._np_fwd), torch.from_numpy(self._np_norms)
        if self.messages in _SCANS:
            c = self._clones
            init = torch.full((c,), 1.0 / self.n_states, dtype=self.dtype, device=self.device)
            scan = _SCANS[self.messages]
            messages, log_norms = scan(_blocks(T_tr, c), *self._scan_fwd_index, init, self.chunk_size, self.debug)
            return messages.reshape(-1), torch.exp(log_norms).to(self.dtype)
        n = self.layout.steps
        j0, j1, m0, m1, action = self._bounds(0)
        # Initial distribution: uniform over all clones, restricted to x[0]'s clones.
        first = torch.full((j1 - j0,), 1.0 / self.n_states, dtype=self.dtype, device=self.device)
        if self.workspace:
            fwd, norms = self.fwd_buf, self.norm_buf
            torch.sum(first, 0, keepdim=True, out=norms[0:1])
            torch.div(first, norms[0:1], out=fwd[m0:m1])
            message = fwd[m0:m1]
            for t in range(1, n):
                i0, i1, prev_action = j0, j1, action  # a[t - 1] leads from x[t - 1] to x[t]
                j0, j1, m0, m1, action = self._bounds(t)
                out = fwd[m0:m1]
                torch.mv(self._block(T_tr, prev_action, j0, j1, i0, i1), message, out=out)
                norm = norms[t : t + 1]
                torch.sum(out, 0, keepdim=True, out=norm)
                out.div_(norm)
                if self.debug:
                    _debug_step(out, norm, j1 - j0, prev_action, T_tr.shape[0])
                message = out
            return fwd, norms
        norm = first.sum()
        message = first / norm
        messages, norm_list = [message], [norm]
        for t in range(1, n):
            i0, i1, prev_action = j0, j1, action
            j0, j1, m0, m1, action = self._bounds(t)
            message = torch.mv(self._block(T_tr, prev_action, j0, j1, i0, i1), message)
            norm = message.sum()
            message = message / norm
            if self.debug:
                _debug_step(message, norm, j1 - j0, prev_action, T_tr.shape[0])
            messages.append(message)
            norm_list.append(norm)
        return torch.cat(messages), torch.stack(norm_list)

    def backward(self, T: torch.Tensor) -> torch.Tensor:
        """Backward messages (flat), each normalised to sum to one."""
        if self.messages == "numba":
            starts, stops, actions, mstarts = self._numba_index
            self._numba.backward(T.numpy(), starts, stops, actions, mstarts, self._np_bwd, self.debug)
            return torch.from_numpy(self._np_bwd)
        if self.messages in _SCANS:
            c = self._clones
            init = torch.full((c,), 1.0 / c, dtype=self.dtype, device=self.device)
            messages, _ = _SCANS[self.messages](_blocks(T, c), *self._scan_bwd_index, init, self.chunk_size, self.debug)
            return messages.flip(0).reshape(-1)
        n = self.layout.steps
        i0, i1, m0, m1, _ = self._bounds(n - 1)
        last = torch.full((i1 - i0,), 1.0 / (i1 - i0), dtype=self.dtype, device=self.device)
        if self.workspace:
            bwd = self.bwd_buf
            bwd[m0:m1] = last
            message = bwd[m0:m1]
            for t in range(n - 2, -1, -1):
                j0, j1 = i0, i1
                i0, i1, m0, m1, action = self._bounds(t)
                out = bwd[m0:m1]
                torch.mv(self._block(T, action, i0, i1, j0, j1), message, out=out)
                norm = out.sum()
                out.div_(norm)
                if self.debug:
                    _debug_step(out, norm, i1 - i0, action, T.shape[0])
                message = out
            return bwd
        messages = [last]
        message = last
        for t in range(n - 2, -1, -1):
            j0, j1 = i0, i1
            i0, i1, m0, m1, action = self._bounds(t)
            message = torch.mv(self._block(T, action, i0, i1, j0, j1), message)
            norm = message.sum()
            message = message / norm
            if self.debug:
                _debug_step(message, norm, i1 - i0, action, T.shape[0])
            messages.append(message)
        return torch.cat(messages[::-1])


def _blocks(matrix: torch.Tensor, clones: int) -> torch.Tensor:
    """``matrix[a, i, j]`` as ``[a, obs_i, clone_i, obs_j, clone_j]`` (every observation has ``clones``)."""
    n_actions, n_states, _ = matrix.shape
    n_obs = n_states // clones
    return matrix.contiguous().view(n_actions, n_obs, clones, n_obs, clones)


def _scan(
    blocks: torch.Tensor,
    actions: torch.Tensor,
    rows: torch.Tensor,
    cols: torch.Tensor,
    init: torch.Tensor,
    chunk_size: int,
    debug: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Messages of ``m_k = normalise(B_k m_(k-1))`` by a chunked parallel prefix scan.

    ``B_k = blocks[actions[k], rows[k], :, cols[k], :]`` for ``k >= 1``; ``m_0``
    is ``init`` normalised. Within a chunk, the products ``B_k ... B_start``
    are formed in log2(chunk) rounds of batched matrix products (Hillis-Steele),
    each product renormalised to sum one with its log-scale carried in
    float64, so nothing underflows however long the chunk. Chunks are chained
    one after the other. Returns the messages, shape (steps, clones), and the
    log of each step's normaliser (float64); entry 0 is the log of init's sum.
    """
    steps, clones = actions.shape[0], init.shape[0]
    messages = torch.empty(steps, clones, dtype=init.dtype, device=init.device)
    log_norms = torch.empty(steps, dtype=torch.float64, device=init.device)
    total = init.sum()
    messages[0] = init / total
    log_norms[0] = torch.log(total.double())
    current = messages[0]
    for start in range(1, steps, chunk_size):
        stop = min(start + chunk_size, steps)
        products = blocks[actions[start:stop], rows[start:stop], :, cols[start:stop], :]  # (L, c, c)
        sums = products.sum((1, 2))
        products = products / sums[:, None, None]
        log_scale = torch.log(sums.double())
        shift = 1
        while shift < products.shape[0]:
            # products[k] <- products[k] @ products[k - shift]: each now spans twice the steps.
            longer = products[shift:] @ products[:-shift]
            sums = longer.sum((1, 2))
            products = torch.cat([products[:shift], longer / sums[:, None, None]])
            log_scale = torch.cat([log_scale[:shift], log_scale[shift:] + log_scale[:-shift] + torch.log(sums.double())])
            shift *= 2
        unnormalised = products @ current  # (L, c): B_k ... B_start m_(start-1), up to scale
        mass = unnormalised.sum(1)
        cumulative = log_scale + torch.log(mass.double())  # log p(steps start..k | m_(start-1))
        messages[start:stop] = unnormalised / mass[:, None]
        log_norms[start] = cumulative[0]
        log_norms[start + 1 : stop] = cumulative[1:] - cumulative[:-1]
        current = messages[stop - 1]
        if debug and not bool(torch.isfinite(cumulative).all()):
            raise AssertionError(f"steps {start}..{stop - 1}: an observation has zero probability")
    return messages, log_norms


#: Gathered block entries per batch of chunks in the chained kernel's first pass (256 MiB in float32).
_GATHER = 1 << 26


def _chained(
    blocks: torch.Tensor,
    actions: torch.Tensor,
    rows: torch.Tensor,
    cols: torch.Tensor,
    init: torch.Tensor,
    chunk_size: int,
    debug: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The messages of :func:`_scan` with one matrix product per step instead of log2(chunk_size).

    The steps are cut into chunks. First, each chunk's product
    ``B_last ... B_first`` is formed by a tree of batched matrix products
    (rescaled as it goes: only its direction matters). Second, the message
    before each chunk is chained through those products, one chunk after the
    other. Third, every chunk is stepped at once, one step at a time, from its
    first message: one batched matrix-vector product per step of a chunk, which
    gives each step's normaliser exactly as the per-step loop does. The
    Hillis-Steele scan costs ``log2(chunk_size)`` products of ``clones x
    clones`` matrices per step; this costs one, and ``steps / chunk_size +
    chunk_size`` launches in sequence (a chunk near the square root of the
    steps).
    """
    steps, clones = actions.shape[0], init.shape[0]
    n = steps - 1
    size = max(1, min(chunk_size, n))
    chunks = -(-n // size) if n else 0
    # Padded to whole chunks; the padding repeats the last step and its results are cut off.
    messages = torch.empty(1 + chunks * size, clones, dtype=init.dtype, device=init.device)
    log_norms = torch.empty(1 + chunks * size, dtype=torch.float64, device=init.device)
    total = init.sum()
    messages[0] = init / total
    log_norms[0] = torch.log(total.double())
    if not n:
        return messages[:steps], log_norms[:steps]
    step = torch.arange(1, 1 + chunks * size, device=init.device).clamp_(max=n).view(chunks, size)
    # Every (action, row, column) block laid out as one matrix each: a step's block is one row of an
    # index_select, twice as fast on the CPU as indexing the five-dimensional view.
    n_obs = blocks.shape[1]
    matrices = blocks.permute(0, 1, 3, 2, 4).reshape(-1, clones, clones)
    which = ((actions * n_obs + rows) * n_obs + cols)[step]  # (chunks, size): the matrix of each step

    def gathered(k: torch.Tensor) -> torch.Tensor:
        return matrices.index_select(0, k.reshape(-1)).view(*k.shape, clones, clones)

    products = torch.empty(chunks, clones, clones, dtype=init.dtype, device=init.device)
    eye = torch.eye(clones, dtype=init.dtype, device=init.device)
    batch = max(1, _GATHER // (size * clones * clones))
    for first in range(0, chunks - 1, batch):  # the last chunk's product is never used
        last = min(first + batch, chunks - 1)
        # Every matrix scaled to a mean entry of 1, so that a product's entries are near the clone count:
        # a block's are near 1 / (symbols x clones), and their products fall below float16's normal range.
        tree = gathered(which[first:last])  # (chunks, size, c, c)
        tree /= tree.mean((2, 3), keepdim=True)
        while tree.shape[1] > 1:
            if tree.shape[1] % 2:
                tree = torch.cat([tree, eye.expand(tree.shape[0], 1, clones, clones)], 1)
            tree = tree[:, 1::2] @ tree[:, 0::2]
            tree /= tree.mean((2, 3), keepdim=True)
        products[first:last] = tree[:, 0]
    current = torch.empty(chunks, clones, dtype=init.dtype, device=init.device)
    current[0] = messages[0]
    for j in range(chunks - 1):
        ahead = products[j] @ current[j]
        current[j + 1] = ahead / ahead.sum()
    # On a GPU this loop is bound by launches, not arithmetic: as few operations a step as can be.
    out = messages[1:].view(chunks, size, clones)
    sums = torch.empty(chunks, size, dtype=init.dtype, device=init.device)
    by_step = which.t().contiguous()
    for t in range(size):
        ahead = torch.bmm(gathered(by_step[t]), current.unsqueeze(2)).squeeze(2)
        sums[:, t] = ahead.sum(1)
        current = ahead / sums[:, t, None]
        out[:, t] = current
    log_norms[1:] = torch.log(sums.double()).view(-1)
    if debug and not bool(torch.isfinite(log_norms[:steps]).all()):
        raise AssertionError("an observation has zero probability under the transitions")
    return messages[:steps], log_norms[:steps]


#: The message kernels that need every observation to have the same number of clones, by name.
_SCANS = {"scan": _scan, "chained": _chained}


def update_transitions(counts: Any, pseudocount: float = PSEUDOCOUNT) -> Any:
    """``update_T``: counts plus a pseudocount, each row normalised (NumPy or torch)."""
    T = counts + pseudocount
    norm = T.sum(2, keepdims=True) if isinstance(T, np.ndarray) else T.sum(2, keepdim=True)
    norm[norm == 0] = 1
    return T / norm


#: Padded message entries (steps x clones) gathered per batch by the batched count update: 4 MiB in
#: float32, which stays in this CPU's cache. At chmm's full size 1 << 24 took 369 ms a count update
#: against 224 ms, the grouped update's 234 ms; at small 1 << 20 took 11 ms, grouped 59 ms.
_BATCH = 1 << 20


def _padded_to(length: int, steps: torch.Tensor) -> torch.Tensor:
    """`steps` lengthened to `length` by repeating its first step; the batch's mask drops the repeats."""
    return torch.cat([steps, steps[:1].expand(length - len(steps))])


class _Grouping:
    """Steps grouped by (action, previous observation, observation) for the grouped and batched count updates.

    ``batched`` also lays the groups out in a few batches of equal length
    (the groups sorted by their number of steps, each padded with copies of
    its first step that a zero mask leaves out), so that all of a batch's
    counts are one batched matrix product.
    """

    def __init__(self, layout: _Layout, device: torch.device, batched: bool = False) -> None:
        x, a = layout.x, layout.a
        n_obs = len(layout.n_clones)
        key = (a[:-1] * n_obs + x[:-1]) * n_obs + x[1:]
        order = np.argsort(key, kind="stable")
        sorted_keys = key[order]
        cuts = np.flatnonzero(np.diff(sorted_keys)) + 1
        self.groups = []
        for ts in np.split(order + 1, cuts):  # ts: the steps t (>= 1) of one group
            t0 = int(ts[0])
            i, j = int(x[t0 - 1]), int(x[t0])
            self.groups.append(
                (
                    int(a[t0 - 1]),
                    (int(layout.state_loc[i]), int(layout.state_loc[i + 1])),
                    (int(layout.state_loc[j]), int(layout.state_loc[j + 1])),
                    torch.as_tensor(ts, device=device),
                    torch.as_tensor(ts - 1, device=device),
                )
            )
        self.cmax = int(layout.n_clones.max())
        if not layout.uniform:
            # Where each flat message entry goes in a (steps, cmax) padded matrix.
            lengths = layout.n_clones[x]
            rows = np.repeat(np.arange(layout.steps), lengths)
            cols = np.arange(int(layout.mess_loc[-1])) - np.repeat(layout.mess_loc[:-1], lengths)
            self.scatter = (torch.as_tensor(rows, device=device), torch.as_tensor(cols, device=device))
        self.uniform = layout.uniform
        self.steps = layout.steps
        self.batches = self._batches(layout, device) if batched else []

    def _batches(self, layout: _Layout, device: torch.device) -> list[tuple[torch.Tensor, ...]]:
        if not layout.uniform:
            raise ValueError("the batched count update needs the same number of clones for every observation")
        clones = self.cmax
        ordered = sorted(self.groups, key=lambda group: len(group[3]))
        batches, start = [], 0
        while start < len(ordered):
            stop = start + 1  # the longest group of a batch is its last: the batch is padded to its length
            while stop < len(ordered) and (stop + 1 - start) * len(ordered[stop][3]) * clones <= _BATCH:
                stop += 1
            chunk = ordered[start:stop]
            length = len(chunk[-1][3])
            batches.append((
                torch.tensor([group[0] for group in chunk], device=device),
                torch.tensor([group[1][0] // clones for group in chunk], device=device),  # previous observation
                torch.tensor([group[2][0] // clones for group in chunk], device=device),  # observation
                torch.stack([_padded_to(length, group[3]) for group in chunk]),  # (groups, length): the steps t
                torch.stack([_padded_to(length, group[4]) for group in chunk]),  # and t - 1
                torch.stack([(torch.arange(length, device=device) < len(group[3])) for group in chunk]),
            ))
            start = stop
        return batches

    def padded(self, flat: torch.Tensor) -> torch.Tensor:
        if self.uniform:
            return flat.view(self.steps, self.cmax)
        out = flat.new_zeros(self.steps, self.cmax)
        out[self.scatter] = flat
        return out


def update_counts(
    T: torch.Tensor,
    layout: _Layout,
    fwd: torch.Tensor,
    bwd: torch.Tensor,
    norms: torch.Tensor,
    method: str = "loop",
    grouping: _Grouping | None = None,
    out: torch.Tensor | None = None,
    debug: bool = False,
    bounds: Callable[[int], tuple[int, int, int, int, int]] | None = None,
) -> torch.Tensor:
    """``updateC``: expected transition counts of one sequence.

    ``loop`` and ``loop_outer`` visit one step at a time, as the published
    code does (``loop`` multiplies twice, the seed's "before"; ``loop_outer``
    forms the outer product, its fix #3). ``grouped`` gathers all steps with
    the same (action, previous observation, observation): their counts are one
    matrix product of stacked forward and backward messages, each step
    normalised by ``p_t * <alpha_t, beta_t>`` taken from the forward pass.
    ``batched`` forms the same products for many groups at once (one batched
    matrix product per batch of groups, instead of one product per group).
    """
    C = out if out is not None else torch.empty_like(T)
    C.zero_()
    if method in ("loop", "loop_outer"):
        if bounds is None:
            lay = layout

            def bounds(t: int) -> tuple[int, int, int, int, int]:
                return lay.starts[t], lay.stops[t], lay.mstarts[t], lay.mstops[t], lay.actions[t]

        j0, j1, n0, n1, next_action = bounds(0)
        for t in range(1, layout.steps):
            i0, i1, m0, m1, action = j0, j1, n0, n1, next_action
            j0, j1, n0, n1, next_action = bounds(t)
            alpha = fwd[m0:m1]
            beta = bwd[n0:n1]
            block = T[action, i0:i1, j0:j1]
            if method == "loop":
                q = torch.mul(torch.mul(alpha.reshape(-1, 1), block), beta.reshape(1, -1))
            else:
                q = torch.outer(alpha, beta) * block
            norm = q.sum()
            if debug and not bool(norm > 0):
                raise AssertionError(f"step {t}: expected counts sum to zero")
            q /= norm
            C[action, i0:i1, j0:j1] += q
        return C
    if method not in ("grouped", "batched"):
        raise ValueError(f"unknown count update {method!r}; choose loop, loop_outer, grouped or batched")
    if grouping is None or (method == "batched" and not grouping.batches):
        grouping = _Grouping(layout, T.device, batched=method == "batched")
    A = grouping.padded(fwd)
    B = grouping.padded(bwd)
    # sum_ij alpha_{t-1,i} T_ij beta_{t,j} = p_t * <alpha_t, beta_t>: no per-step recomputation.
    weights = 1.0 / (norms * (A * B).sum(1))
    if method == "batched":
        clones = grouping.cmax
        n_obs = T.shape[1] // clones
        blocks, counts = (m.view(T.shape[0], n_obs, clones, n_obs, clones) for m in (T, C))
        for actions, rows, cols, ts, prev, mask in grouping.batches:
            scale = (weights[ts] * mask).unsqueeze(2)  # a padded step counts nothing
            alphas = A.index_select(0, prev.reshape(-1)).view(*prev.shape, clones) * scale
            betas = B.index_select(0, ts.reshape(-1)).view(*ts.shape, clones)
            # Every group is its own (action, row, column) block: assigned once, never accumulated.
            counts[actions, rows, :, cols, :] = blocks[actions, rows, :, cols, :] * (alphas.transpose(1, 2) @ betas)
    else:
        for action, (i0, i1), (j0, j1), ts, prev in grouping.groups:
            alphas = A.index_select(0, prev)[:, : i1 - i0] * weights.index_select(0, ts).unsqueeze(1)
            betas = B.index_select(0, ts)[:, : j1 - j0]
            C[action, i0:i1, j0:j1] += T[action, i0:i1, j0:j1] * (alphas.transpose(0, 1) @ betas)
    if debug and not bool(torch.isfinite(C).all()):
        raise AssertionError("expected counts are not finite")
    return C


def _as_tensor(array: Any, dtype: torch.dtype | None = None, device: str | torch.device = "cpu") -> torch.Tensor:
    tensor = array if isinstance(array, torch.Tensor) else torch.as_tensor(np.asarray(array))
    return tensor.to(device=device, dtype=dtype) if dtype is not None else tensor.to(device)


def log2_likelihood(T: Any, n_clones: Any, x: Any, a: Any) -> float:
    """Total log2 likelihood of ``x`` given actions ``a`` under transitions ``T``.

    ``T`` has shape (n_actions, n_states, n_states) (NumPy or torch); the
    initial distribution is uniform over all clones, and ``a[t]`` leads from
    ``x[t]`` to ``x[t + 1]``. Computed in T's dtype, summed in float64.
    """
    T = _as_tensor(T)
    layout = _Layout(np.asarray(n_clones), np.asarray(x), np.asarray(a))
    kernels = _Kernels(layout, T.device, T.dtype)
    _, norms = kernels.forward(T.transpose(1, 2))
    return float(torch.log2(norms.double()).sum())


def em_step(
    T: Any,
    n_clones: Any,
    x: Any,
    a: Any,
    pseudocount: float = PSEUDOCOUNT,
    update: str = "grouped",
) -> tuple[float, torch.Tensor, torch.Tensor]:
    """One EM iteration: returns ``(log2 likelihood under T, expected counts, new T)``."""
    T = _as_tensor(T)
    layout = _Layout(np.asarray(n_clones), np.asarray(x), np.asarray(a))
    kernels = _Kernels(layout, T.device, T.dtype)
    fwd, norms = kernels.forward(T.transpose(1, 2).contiguous())
    bwd = kernels.backward(T)
    C = update_counts(T, layout, fwd, bwd, norms, update)
    return float(torch.log2(norms.double()).sum()), C, update_transitions(C, pseudocount)


# -- the workload -----------------------------------------------------------------


@register_workload
class ChmmWorkload(Workload):
    """One EM iteration of a cloned HMM on a random walk in a room (unit: timesteps)."""

    name = "chmm"
    unit = "timesteps"
    version = 1
    sizes = {
        # The seed's validation case is `full`: 16 symbols in a 20x20 room, 150 clones each.
        "tiny": {"rows": 6, "cols": 6, "n_obs": 16, "clones": 4, "steps": 400, "seed": 7},
        "small": {"rows": 20, "cols": 20, "n_obs": 16, "clones": 50, "steps": 10_000, "seed": 0},
        "full": {"rows": 20, "cols": 20, "n_obs": 16, "clones": 150, "steps": 150_000, "seed": 0},
    }

    def _data(self) -> tuple[np.ndarray, np.ndarray]:
        p = self.params
        path = self.cache_dir / "walk.npz" if self.cache_dir is not None else None

        def load(path: Path) -> tuple[np.ndarray, np.ndarray]:
            with np.load(path) as data:
                return data["x"], data["a"]

        return cached(path, lambda: random_walk(p["rows"], p["cols"], p["n_obs"], p["steps"], p["seed"])[1:],
                      lambda walk, tmp: np.savez(tmp, x=walk[0], a=walk[1]), load)

    def prepare(self) -> None:
        self._data()

    def build(self, config: Config) -> Callable[[], dict[str, torch.Tensor]]:
        p = self.params
        x, a = self._data()
        n_clones = np.full(p["n_obs"], p["clones"], dtype=np.int64)
        dtype = _DTYPES[config["dtype"]]
        device = torch.device(self.device)
        layout = _Layout(n_clones, x, a)
        T = torch.as_tensor(initial_transitions(n_clones, p["seed"])).to(device=device, dtype=dtype)
        T_tr = T.transpose(1, 2).contiguous()
        kernels = _Kernels(layout, device, dtype, config["indices"], config["workspace"], config["debug_asserts"],
                           config["messages"], config["chunk_size"])
        grouping = (_Grouping(layout, device, batched=config["update_c"] == "batched")
                    if config["update_c"] in ("grouped", "batched") else None)
        counts = torch.empty_like(T) if config["workspace"] else None

        overlap = config["messages"] == "numba" and config["overlap_passes"]
        pool = ThreadPoolExecutor(1) if overlap else None

        def run() -> dict[str, torch.Tensor]:
            if pool is not None:
                # The numba kernels release the GIL: the backward pass runs on a second core.
                pending = pool.submit(kernels.backward, T)
                fwd, norms = kernels.forward(T_tr)
                bwd = pending.result()
            else:
                fwd, norms = kernels.forward(T_tr)
                bwd = kernels.backward(T)
            C = update_counts(T, layout, fwd, bwd, norms, config["update_c"], grouping, counts,
                              config["debug_asserts"], kernels._bounds)
            T_new = update_transitions(C)
            # As the published code does: per-step log2 likelihoods and their total in the
            # working dtype. A 16-bit total of a long sequence loses digits or overflows,
            # and the check must see that.
            # Each step's normaliser too: the 16-bit total above is too coarse to show one lost step.
            return {"log2_likelihood": torch.log2(norms).sum(), "step_log2_likelihoods": torch.log2(norms.double()),
                    "counts": C, "transitions": T_new}

        return run

    def items_per_run(self, config: Config) -> int:
        return int(self.params["steps"])

    def to_reference(self, output: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {name: output[name].detach().cpu().double() for name in ("log2_likelihood", "step_log2_likelihoods", "counts",
                                                                      "transitions")}

    def check(self, output: Mapping[str, torch.Tensor], reference: Mapping[str, torch.Tensor], config: Config) -> Check:
        return Check.from_metrics({name: (ERRORS.get(name, relative_error)(output[name], reference[name]), tol)
                                   for name, tol in TOLERANCES[config["dtype"]].items()})
