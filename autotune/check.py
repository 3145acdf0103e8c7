"""Correctness checks: how far an output is from the reference, against a tolerance."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

__all__ = ["Check", "relative_error"]


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

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, tuple[float, float]]) -> "Check":
        """Example: ``Check.from_metrics({"log_likelihood": (3e-7, 1e-5), "counts": (2e-6, 1e-4)})``."""
        if not metrics:
            raise ValueError("a check needs at least one metric")
        clean = {name: (_finite_or_inf(err), float(tol)) for name, (err, tol) in metrics.items()}
        metric = max(clean, key=lambda name: clean[name][0] / clean[name][1] if clean[name][1] > 0 else math.inf)
        error, tolerance = clean[metric]
        passed = all(err <= tol for err, tol in clean.values())
        return cls(error, tolerance, passed, metric, clean)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        # JSON has no infinity: an unbounded error (NaN output) is written as null.
        data["error"] = None if math.isinf(self.error) else self.error
        data["metrics"] = {k: [None if math.isinf(e) else e, t] for k, (e, t) in self.metrics.items()}
        return data


def _finite_or_inf(value: float) -> float:
    value = float(value)
    return math.inf if math.isnan(value) else value


def relative_error(value: Any, reference: Any) -> float:
    """``||value - reference|| / ||reference||`` in float64 (Frobenius for arrays); NaN -> inf.

    Works for Python numbers, NumPy arrays and torch tensors alike.
    """
    import numpy as np

    def as_array(x: Any) -> "np.ndarray":
        if hasattr(x, "detach"):
            x = x.detach().to("cpu").double().numpy()
        return np.asarray(x, dtype=np.float64)

    a, b = as_array(value), as_array(reference)
    if a.shape != b.shape:
        return math.inf
    if not np.all(np.isfinite(a)):
        return math.inf
    norm = float(np.linalg.norm(b))
    diff = float(np.linalg.norm(a - b))
    return diff / norm if norm > 0 else diff
