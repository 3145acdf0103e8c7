"""Planted bugs: the mistakes that optimisations really make, to prove each workload's check catches them.

A tuner is an optimiser pointed at its check: any wrong output that passes
will sooner or later be measured as fastest. Each :class:`Mutant` plants one
bug through a small seam (a patched torch function, a wrapped method) while a
config is built and run; the workloads carry no bug switches. A check is
strong enough when every mutant fails it in every precision the space offers.

``MUTANTS[workload]`` lists them; the modules beside this one define them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Mapping
from unittest import mock

import torch

__all__ = ["KINDS", "WORKLOADS", "Mutant", "mutants_of", "through_8_bits", "patched", "poisoned", "scaled"]

#: The kinds of bug every workload is planted with (a workload that has no
#: such code path, e.g. no random sampling, says so in its module).
KINDS = ("skipped step", "missing term", "wrong scale", "sampling", "optimizer", "data path", "precision leak",
         "nan")


@dataclass(frozen=True)
class Mutant:
    """One planted bug: ``plant()`` is a context manager active while the config is built and run.

    ``config`` holds the knob values that put the bug's code path in use (an
    SDPA bug needs SDPA attention); they are applied on top of the config
    under test, which keeps its precision.
    """

    name: str
    kind: str
    plant: Callable[[], ContextManager[Any]]
    config: Mapping[str, Any] = field(default_factory=dict)
    #: Precisions (``"bf16"``, checked at ``tiny`` by the tests), or a precision at another size (``"bfloat16 at
    #: small"``, by ``benchmarks/check_power.py --size``), where the check is measured not to catch it, with why:
    #: reported, never hidden.
    missed_in: Mapping[str, str] = field(default_factory=dict)


def patched(target: Any, attribute: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]
            ) -> Callable[[], ContextManager[Any]]:
    """A plant that replaces ``target.attribute`` by ``make(original)`` while it is active."""

    def plant() -> ContextManager[Any]:
        original = getattr(target, attribute)
        return mock.patch.object(target, attribute, functools.wraps(original)(make(original)))

    return plant


def scaled(target: Any, attribute: str, factor: float) -> Callable[[], ContextManager[Any]]:
    """The function's tensor result multiplied by ``factor``: a wrong scale."""
    return patched(target, attribute, lambda f: lambda *a, **k: f(*a, **k) * factor)


def _poison(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
        value = value.clone()
        value.view(-1)[0] = float("nan")
        return value
    if isinstance(value, tuple):
        return (_poison(value[0]), *value[1:])
    return value


def poisoned(target: Any, attribute: str) -> Callable[[], ContextManager[Any]]:
    """The function's (first) tensor result gets a NaN: an overflow, an uninitialised buffer."""
    return patched(target, attribute, lambda f: lambda *a, **k: _poison(f(*a, **k)))


def through_8_bits(value: Any) -> Any:
    """``value`` stored as an 8-bit float (e5m2) and read back: below every precision a config can name."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(torch.float8_e5m2).to(value.dtype)
    if isinstance(value, tuple):
        return tuple(through_8_bits(v) for v in value)
    return value


def leaking(target: Any, attribute: str) -> Callable[[], ContextManager[Any]]:
    """The function's result kept in 8 bits: a precision leak below whatever the config names.

    (A leak to the next precision down, bfloat16 under float32 say, is a leak
    only for some configs; 8 bits is one for every config.)
    """
    return patched(target, attribute, lambda f: lambda *a, **k: through_8_bits(f(*a, **k)))


def every_nth_skipped(target: Any, attribute: str, n: int) -> Callable[[], ContextManager[Any]]:
    """A plant under which every ``n``-th call of ``target.attribute`` does nothing (returns None)."""

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        calls = [0]

        def skipping(*args: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            return None if calls[0] % n == 0 else original(*args, **kwargs)

        return skipping

    return patched(target, attribute, make)


def adamw(**changed: Any) -> Callable[[], ContextManager[Any]]:
    """AdamW built with some arguments changed (a learning rate halved, weight decay dropped)."""

    def plant() -> ContextManager[Any]:
        original = torch.optim.AdamW

        class Changed(original):  # type: ignore[misc, valid-type]
            def __init__(self, params: Any, *args: Any, **kwargs: Any) -> None:
                kwargs.setdefault("lr", 1e-3)
                for key, value in changed.items():
                    kwargs[key] = value(kwargs.get(key)) if callable(value) else value
                super().__init__(params, *args, **kwargs)

        return mock.patch.object(torch.optim, "AdamW", Changed)

    return plant


def no_clipping() -> ContextManager[Any]:
    """clip_grad_norm_ returns the norm as usual but leaves the gradients unclipped."""
    original = torch.nn.utils.clip_grad_norm_

    def measure_only(parameters: Any, max_norm: float, *args: Any, **kwargs: Any) -> torch.Tensor:
        return original(parameters, float("inf"), *args, **kwargs)

    return mock.patch.object(torch.nn.utils, "clip_grad_norm_", measure_only)


def step_skipped() -> ContextManager[Any]:
    """The optimizer's step does nothing (a skipped update, as a wrong GradScaler check would)."""
    return mock.patch.object(torch.optim.AdamW, "step", lambda self, closure=None: None)


def attention(**changed: Any) -> Callable[[], ContextManager[Any]]:
    """scaled_dot_product_attention called with some arguments changed (scale, dropout, causality)."""

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            for key, value in changed.items():
                kwargs[key] = value(q, kwargs.get(key)) if callable(value) else value
            return original(q, k, v, *args, **kwargs)

        return sdpa

    return patched(torch.nn.functional, "scaled_dot_product_attention", make)


def mutants_of(workload: str) -> list[Mutant]:
    """The planted bugs of one built-in workload."""
    import importlib

    return list(importlib.import_module(f"tests.mutants.{workload}").MUTANTS)


WORKLOADS = ("chmm", "latentwire", "lsd", "ten", "vlm_mc")


def together(*plants: Callable[[], ContextManager[Any]]) -> Callable[[], ContextManager[Any]]:
    """One plant made of several (dropout off in F.dropout and in SDPA alike)."""
    import contextlib

    def plant() -> ContextManager[Any]:
        stack = contextlib.ExitStack()
        for p in plants:
            stack.enter_context(p())
        return stack

    return plant
