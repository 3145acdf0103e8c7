"""Correctness checks: how far an output is from the reference, against a tolerance."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

__all__ = ["Check", "differs", "share_of_tolerance", "relative_error", "worst_error"]


@dataclass(frozen=True)
class Check:
    """The outcome of comparing one output with the reference.

    ``error`` and ``tolerance`` are those of the binding metric (the one
    furthest past, or closest to, its tolerance); every metric is kept in
    ``metrics`` as ``{name: [error, tolerance]}``. A NaN error never passes.
    """

    error: float
    tolerance: float
    passed: bool
    metric: str = ""
    metrics: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Every Check, built by hand or by from_metrics, is held to one rule: a workload's Check(error=1,
        # tolerance=0.1, passed=True) or Check(0.5, inf, True) was trusted, and its output took part as correct.
        name = self.metric or "error"
        error, tolerance = _clean(name, self.error, self.tolerance)
        metrics = {m: _clean(m, err, tol) for m, (err, tol) in self.metrics.items()}
        within = error <= tolerance and all(e <= t for e, t in metrics.values())
        if bool(self.passed) != within:
            raise ValueError(f"a Check with error {error:.3g} and tolerance {tolerance:.3g} says passed="
                             f"{bool(self.passed)}: passed says whether every error is within its tolerance (build "
                             "it with Check.from_metrics)")
        # Plain floats and a bool: the study stores JSON, which has no numpy or torch numbers.
        for field_name, value in (("error", error), ("tolerance", tolerance), ("metrics", metrics),
                                  ("passed", bool(self.passed))):
            object.__setattr__(self, field_name, value)

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, tuple[float, float]]) -> "Check":
        """Example: ``Check.from_metrics({"log_likelihood": (3e-7, 1e-5), "counts": (2e-6, 1e-4)})``."""
        if not metrics:
            raise ValueError("a check needs at least one metric")
        pairs = {name: tuple(pair) if hasattr(pair, "__iter__") else (pair,) for name, pair in metrics.items()}
        bad = next((name for name, pair in pairs.items() if len(pair) != 2), None)
        if bad is not None:
            raise ValueError(f"metric {bad!r} must be an (error, tolerance) pair of numbers, got {metrics[bad]!r}")
        clean = {name: _clean(name, err, tol) for name, (err, tol) in pairs.items()}
        metric = max(clean, key=lambda name: share_of_tolerance(*clean[name]))
        error, tolerance = clean[metric]
        passed = all(err <= tol for err, tol in clean.values())
        return cls(error, tolerance, passed, metric, clean)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        # JSON has no infinity: an unbounded error (NaN output) is written as null.
        data["error"] = None if math.isinf(self.error) else self.error
        data["metrics"] = {k: [None if math.isinf(e) else e, t] for k, (e, t) in self.metrics.items()}
        return data


def share_of_tolerance(error: float | None, tolerance: float) -> float:
    """``error / tolerance``: how far an error has gone toward its tolerance (over 1: past it; None: unbounded).

    A tolerance can be 0: a statistical bound of 5 standard errors is 0 when the output equals the
    reference bit for bit (vlm_mc's baseline, whose config the reference is computed with). An error of
    0 meets it (share 0); any other error is infinitely past it.
    """
    if error is None:
        return math.inf
    if tolerance > 0:
        return error / tolerance
    return 0.0 if error <= 0 else math.inf


def _clean(name: str, error: Any, tolerance: Any) -> tuple[float, float]:
    """A metric's ``(error, tolerance)`` as floats (a NaN error as unbounded), or ValueError where it breaks a rule."""
    try:
        error, tolerance = float(error), float(tolerance)
    except (TypeError, ValueError):
        raise ValueError(f"metric {name!r} must be an (error, tolerance) pair of numbers, got "
                         f"{(error, tolerance)!r}") from None
    if math.isnan(error):
        error = math.inf
    if error < 0:  # a signed difference, say: it would pass any tolerance, the worst output too
        raise ValueError(f"the error of {name!r} is {error:.3g}: an error is a distance, 0 or more (take its "
                         "absolute value)")
    if not 0 <= tolerance < math.inf:  # an infinite tolerance passes the worst output; a negative or NaN one fails
        raise ValueError(f"the tolerance of {name!r} is {tolerance:.3g}: a tolerance is a finite bound, 0 or more")
    return error, tolerance


def _arrays(value: Any, reference: Any) -> "tuple[Any, Any] | None":
    """Both as float64 NumPy arrays; None where the value cannot be compared (another shape, NaN in either, an
    infinity the other does not hold at the same place with the same sign).

    An infinity both hold is exact: it compares as 0 (an impossible step's log-probability is an honest -inf,
    and every output failed against it). Complex values become their real and imaginary parts side by side:
    cast to float64, the imaginary part was dropped, and an output wrong only there passed with an error of 0.
    """
    import numpy as np

    def as_array(x: Any) -> "np.ndarray":
        if hasattr(x, "detach"):
            import torch  # imported already: x is a tensor

            x = x.detach().to("cpu")
            x = x.to_dense() if x.layout != torch.strided else x  # sparse: "can't convert Sparse layout tensor"
            x = (x.cdouble().resolve_conj() if x.is_complex() else x.double()).numpy()
        return np.asarray(x)

    def parted(x: Any) -> bool:  # a dict, or a list or tuple holding more than numbers (a model's grads)
        return isinstance(x, Mapping) or isinstance(x, (list, tuple)) and any(
            not isinstance(item, (int, float, complex)) for item in x)

    def pair(x: Any, y: Any) -> "tuple[np.ndarray, np.ndarray] | None":
        a, b = as_array(x), as_array(y)
        if np.iscomplexobj(a) or np.iscomplexobj(b):
            a, b = (np.stack([v.real, v.imag], axis=-1) for v in (a.astype(np.complex128), b.astype(np.complex128)))
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        return (a, b) if a.shape == b.shape else None

    split = parted(value) or parted(reference)
    parts, theirs = (dict(_parts(x)) if split else {} for x in (value, reference))
    if split and parts.keys() == theirs.keys():
        # Each part against its own, all of them as one array: tensors of several shapes (per-layer gradients)
        # failed in NumPy ("inhomogeneous shape"), and a list of tensors that require grad in torch.
        pairs = [pair(x, theirs[where]) for where, x in parts.items()]
        if any(p is None for p in pairs):
            return None
        a, b = (np.concatenate([p[i].ravel() for p in pairs if p is not None] or [np.zeros(0)]) for i in (0, 1))
    else:  # one array, or parts against them stacked (a list of tensors against one tensor), as NumPy makes them
        try:
            both = pair(value, reference)
        except (TypeError, ValueError, RuntimeError):
            if split:  # parts of two structures (a part missing, a key of another name): another shape
                return None
            raise
        if both is None:
            return None
        a, b = both
    if np.isnan(a).any() or np.isnan(b).any():
        return None
    infinite = np.isinf(a)
    if not np.array_equal(infinite, np.isinf(b)) or not np.array_equal(a[infinite], b[infinite]):
        return None
    return (np.where(infinite, 0.0, a), np.where(infinite, 0.0, b)) if infinite.any() else (a, b)


def _parts(value: Any, where: tuple = ()) -> "list[tuple[tuple, Any]]":
    """Each part of a dict, list or tuple (nested), with where it lies: ``[((0,), grad0), ((1,), grad1)]``."""
    if isinstance(value, Mapping):
        items: Any = value.items()
    elif isinstance(value, (list, tuple)) and not hasattr(value, "detach"):
        items = enumerate(value)
    else:
        return [(where, value)]
    return [part for key, item in items for part in _parts(item, (*where, key))]


def relative_error(value: Any, reference: Any) -> float:
    """``||value - reference|| / ||reference||`` in float64 (Frobenius for arrays); NaN -> inf.

    Works for Python numbers, NumPy arrays and torch tensors alike, and for dicts, lists and tuples of them, each
    part against its own (of any shape: per-layer gradients), all of them as one array.
    """
    arrays = _arrays(value, reference)
    if arrays is None:
        return math.inf
    a, b = arrays
    norm, diff = _norm(b), _norm(a - b)
    return diff / norm if norm > 0 else diff


def _norm(x: Any) -> float:
    """The Frobenius norm by numpy's own pairwise sum, not its BLAS: a BLAS call (``np.linalg.norm``'s dot) leaves
    OpenBLAS's threads spinning for a tenth of a second or more, started afresh in each trial's forked process,
    and the runs timed next on those cores stalled 4 ms every 15 or so (a 0.2 ms run's mean doubled, this CPU)."""
    import numpy as np

    return math.sqrt(float(np.sum(np.square(x))))


def worst_error(value: Any, reference: Any) -> float:
    """``max |value - reference| / max |reference|`` in float64: the worst element's error; NaN -> inf.

    One wrong element among many (a lost step of a long sequence) counts in full here, where
    :func:`relative_error`'s norm of the whole dilutes it by the square root of their number: chmm's lost
    last step is 0.93 of the largest step at 4,000 steps, and 0.05 of the norm at 400 steps, 0.01 at 10,000.
    """
    import numpy as np

    arrays = _arrays(value, reference)
    if arrays is None:
        return math.inf
    a, b = arrays
    if not a.size:
        return 0.0
    scale, diff = float(np.max(np.abs(b))), float(np.max(np.abs(a - b)))
    return diff / scale if scale > 0 else diff


def differs(first: Check, worst: Check, is_reference: bool, drew: Sequence[str] = ()) -> str:
    """Why a config's output failed its check (``worst``, the first run's check ``first``), and what it says where
    the config ``is_reference``: the reference config itself, built anew, did not give the output it gave when the
    reference was computed. An unseeded generator (numpy's default_rng(), drawing from the OS) failed every config
    by 1.5 with a tolerance of 1e-9, this one too, and a tolerance raised to pass them would pass wrong outputs.
    ``drew``: the global random generators (``"torch's"``) that a later run, failing, drew new numbers from."""
    named = " and ".join(drew)
    many = len(drew) > 1
    why = (f"each run draws new numbers from {named} global random generator{'s' if many else ''}: seed "
           f"{'them' if many else 'it'} where the run starts, or draw from a generator the run seeds itself" if drew
           else "does a run change what the next one reads?")
    later = f" at a later run (the first run's passed: {why})"
    text = (f"output differs from the reference{later if first.passed else ''}: {worst.metric} error "
            f"{worst.error:.3g} > tolerance {worst.tolerance:.3g}")
    if is_reference and not first.passed:
        text += ("; this is the reference config itself: its output is not the same from one process to the next "
                 "(an unseeded random number, the time, the order of a set?), so no config can be checked against "
                 "it: make the workload deterministic (seed its generators in build), or, where the difference is "
                 "honest (atomic adds on a GPU), set the tolerance above it")
    return text
