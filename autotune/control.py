"""The negative control: a check that passed an output must fail that output made plainly wrong.

A tuner is an optimiser pointed at its check: a check that cannot fail under a config passes that config's every
output, and the fastest wrong one wins. ``control`` holds each passing check to a wrong copy of the output
(``wrong_copy``), and to each of its parts made wrong alone (``wrong_parts``).
"""

from __future__ import annotations

import warnings
from dataclasses import fields, is_dataclass, replace
from typing import Any, Mapping

from autotune.check import Check

__all__ = ["MAX_PARTS", "control", "wrong_copy", "wrong_parts"]


def wrong_copy(output: Any) -> Any:
    """``output`` made plainly wrong: each floating tensor or array doubled plus one and reversed along its last
    axis (an argmax or a ranking moves too), each float doubled plus one; dicts, lists, tuples, dataclasses and
    objects of the workload's own keep their type and shape, and every other value (integers, which a check may index
    with, bools, strings) stays. None where nothing changed (an output of -1s alone, which doubling plus one leaves
    as it was: a check rightly passes it). An output with no floating part has its integers made wrong so (token ids,
    an argmax, counts), one with neither its bools negated (a mask), one with only text its strings reversed and
    marked: it had no control, and a check that compared nothing passed it.
    """
    return _whole(output)[0]


#: The kinds of part a wrong copy makes wrong: the first kind the output holds. A check may index with integers
#: and select with bools, so the whole copy makes them wrong only where the output has no floating part; beside
#: floats, each tensor or array of them, or list of integers, is made wrong alone (:func:`wrong_parts`).
KINDS = ("float", "integer", "bool", "text")
_NUMPY_KINDS = {"float": "fc", "integer": "iu", "bool": "b", "text": "U"}  # NumPy's dtype.kind of each
_PYTHON_KINDS: dict[str, tuple] = {"float": (float, complex), "integer": (int,), "bool": (), "text": (str, bytes)}


def _whole(output: Any) -> "tuple[Any, list[str], str | None, list[str]]":
    """:func:`wrong_copy`, where its parts lie, their kind (None: the output holds no part of any kind), and the
    values no copy can reach (``a cupy.ndarray``: neither data nor a container of it)."""
    for kind in KINDS:
        copy, parts, opaque = _wrong(output, kind=kind)
        if parts:
            return copy, parts, kind, opaque
    return None, [], None, opaque


def _wrong(output: Any, only: int | None = None, kind: str = "float",
           arrays: bool = False) -> "tuple[Any, list[str], list[str]]":
    """:func:`wrong_copy`, made wrong in its ``only``-th part alone where given (from 0), where each part of
    ``kind`` (see ``KINDS``; tensors, arrays and lists of numbers alone where ``arrays``) lies in ``output``
    (``['grads']``, ``[1]``, ``.loss``), in the order they are counted, and the values it could not reach (an object
    that will not copy, an array of another library)."""
    import copy as copying
    import types

    import numpy as np
    import torch

    changed = False
    parts: list[str] = []
    opaque: list[str] = []
    within: set[int] = set()  # the objects being copied: one that holds itself is not walked again

    def numbers(value: Any) -> bool:  # a list or tuple of plain numbers: one array, as relative_error reads it
        return isinstance(value, (list, tuple)) and not hasattr(value, "_fields") and bool(value) and all(
            isinstance(item, (int, float, complex)) and not isinstance(item, bool) for item in value)

    def is_part(value: Any) -> bool:
        if numbers(value):
            floating = any(isinstance(item, (float, complex)) for item in value)
            return kind == ("float" if floating else "integer")
        if arrays and not isinstance(value, (torch.Tensor, np.ndarray)):
            return False
        if isinstance(value, torch.Tensor):
            dtype = value.dtype
            found = ("float" if dtype.is_floating_point or dtype.is_complex else "bool" if dtype == torch.bool
                     else "integer")
            return bool(value.numel()) and found == kind
        if isinstance(value, (np.ndarray, np.generic)):
            return bool(value.size) and value.dtype.kind in _NUMPY_KINDS[kind]
        if isinstance(value, bool):
            return kind == "bool"
        return isinstance(value, _PYTHON_KINDS[kind])

    def doubled(x: Any) -> Any:
        if kind == "bool":
            return ~x if isinstance(x, (torch.Tensor, np.ndarray, np.generic)) else not x
        if kind == "text":
            if isinstance(x, np.ndarray):
                return np.char.add(x[..., ::-1] if x.ndim else x, "?")
            return x[::-1] + (b"?" if isinstance(x, bytes) else "?")
        if numbers(x):
            return type(x)(item * 2 + 1 for item in reversed(x))
        made = x * 2 + 1
        flip = isinstance(x, (torch.Tensor, np.ndarray)) and x.ndim
        return (made.flip(-1) if isinstance(x, torch.Tensor) else np.flip(made, -1)) if flip else made

    def same(a: Any, b: Any) -> bool:  # a NumPy or Python part's (a tensor's is compared where it is made)
        return bool(np.array_equal(a, b)) if isinstance(a, (np.ndarray, np.generic)) else a == b

    def wrong(value: Any, path: str) -> Any:
        nonlocal changed
        part = is_part(value)
        if part:
            parts.append(path or "the output")
            if only is not None and len(parts) - 1 != only:
                return value
        if isinstance(value, torch.Tensor) and part:
            try:
                made = doubled(value.detach())
                moved = not torch.equal(made, value)  # every value -1 (and in mirror order) stays itself
            except RuntimeError:  # float8, complex32, uint16: no arithmetic of their own, so in a wider type
                wide = (torch.complex128 if value.is_complex() else
                        torch.float64 if value.is_floating_point() else torch.int64)
                try:
                    if value.layout != torch.strided:  # sparse: no scalar to add, so dense, then its layout again
                        dense = value.detach().to_dense()
                        made = doubled(dense).to_sparse(layout=value.layout)
                        moved = not torch.equal(made.to_dense(), dense)
                    else:
                        made = doubled(value.detach().to(wide)).to(value.dtype)
                        moved = not torch.equal(made.to(wide), value.detach().to(wide))
                except RuntimeError:  # a layout with no such arithmetic: it stays, the rest made wrong
                    return value
            changed = changed or moved
            return made
        if part:  # a NumPy array or scalar, a Python number or string
            made = doubled(value)
            changed = changed or not same(made, value)
            return made
        if value is None or isinstance(value, (torch.Tensor, np.ndarray, np.generic, bool, int, float, complex, str,
                                                bytes, torch.dtype, torch.device)):
            return value  # data of another kind, or none
        if id(value) in within:
            return value
        within.add(id(value))
        try:
            return walked(value, path)
        finally:
            within.discard(id(value))

    def walked(value: Any, path: str) -> Any:
        if isinstance(value, Mapping):
            items = {key: wrong(item, f"{path}[{key!r}]") for key, item in value.items()}
            if type(value) is not dict and isinstance(value, dict):  # an attribute dict (EasyDict, ModelOutput)
                made = copying.copy(value)
                if made is not value:  # a copy that is the output itself, made wrong, would be the output's harm
                    made.update(items)
                    return made
            return items
        if is_dataclass(value) and not isinstance(value, type):  # an output class of the workload's own
            return replace(value, **{f.name: wrong(getattr(value, f.name), f"{path}.{f.name}")
                                     for f in fields(value) if f.init})
        if isinstance(value, (list, tuple)):
            listed = [wrong(item, f"{path}[{i}]") for i, item in enumerate(value)]
            return type(value)(*listed) if hasattr(value, "_fields") else type(value)(listed)
        if hasattr(value, "__dict__") and not isinstance(value, (type, types.ModuleType, types.FunctionType,
                                                                 types.MethodType)):
            # An object of the workload's own (a result class, a namespace): a check read its attributes, and
            # no copy was made, so a check that compared none of them passed every output without a control.
            made = copying.copy(value)
            if made is not value:
                vars(made).update({name: wrong(item, f"{path}.{name}") for name, item in vars(value).items()})
                return made
        opaque.append(f"a {type(value).__module__}.{type(value).__qualname__}")
        return value

    copy = wrong(output, "")
    return (copy if changed else None), parts, opaque


#: Parts made wrong alone, at most: evenly spread, the first and the last among them. Each is a check of the whole
#: output, so all of them cost the square of their number: a list of 1,000 per-sample tensors took 15.6 s a trial.
MAX_PARTS = 32


def wrong_parts(output: Any, made: "tuple[list[str], str | None] | None" = None) -> "list[tuple[str, Any]]":
    """Each part of ``output`` made wrong alone as :func:`wrong_copy` makes them (``MAX_PARTS`` of them at most),
    with where it lies (``['grads']``); none that no change moves. The parts of the kind a wrong copy makes wrong
    (``made``: their places and kind, where known), where there are several, and each tensor or array of integers
    or bools, or list of integers, beside them, which the copy keeps as a check may index with them: a top-k split
    over the corpus that lost each block's offset had every index wrong beside right scores, and a check of the
    scores alone passed it."""
    parts, kind = made if made is not None else _whole(output)[1:3]
    if kind is None:
        return []
    alone = [(kind, i, part) for i, part in enumerate(parts)] if len(parts) > 1 else []
    for kept in KINDS[KINDS.index(kind) + 1:KINDS.index("text")]:  # integers and bools; text may be a label
        alone += [(kept, i, part) for i, part in enumerate(_wrong(output, kind=kept, arrays=True)[1])]
    picked = sorted({round(k * (len(alone) - 1) / (MAX_PARTS - 1)) for k in range(MAX_PARTS)}) \
        if len(alone) > MAX_PARTS else range(len(alone))
    copies = [(alone[j][2], _wrong(output, only=alone[j][1], kind=alone[j][0], arrays=alone[j][0] != kind)[0])
              for j in picked]
    return [(part, copy) for part, copy in copies if copy is not None]


def control(workload: Any, check: Check, output: Any, reference: Any, config: Any, is_reference: bool = False) -> None:
    """Hold a ``check`` that passed ``output`` to a negative control: it must fail :func:`wrong_copy` of it (or raise),
    and each of its parts made wrong alone (see :func:`wrong_parts`).

    A tuner is an optimiser pointed at its check: a check that cannot fail under a config (an output compared
    with itself, a tolerance past any error, one for bfloat16 that a typo made 1e3) passes that config's every
    output, and the fastest wrong one won. So does a part the check never compares (an output's gradients added
    after its check was written): a config wrong there alone passed. Raises ValueError, which fails the trial,
    where it passes a copy, and where the reference config's own output (``is_reference``) fails against its own
    ``to_reference``, which then loses what the check compares (see :func:`_stored_loses`).
    """
    if not check.passed:
        if is_reference:
            _stored_loses(workload, output, config)
        return
    name = f"{type(workload).__name__}.check"
    reach = ("return its data as tensors, NumPy arrays, numbers or strings (in dicts, lists, tuples, dataclasses or "
             "objects of the workload's own), which a wrong copy can be made of")
    try:
        wrong, floats, kind, opaque = _whole(output)
        parts = wrong_parts(output, (floats, kind))
    except Exception as exc:  # noqa: BLE001 - a class that will not copy, say: named below
        raise ValueError(f"{name} passed this config's output, and no plainly wrong copy of it could be made to "
                         f"hold the check to a control ({type(exc).__name__}: {exc}), so its pass says nothing: "
                         f"{reach}") from None
    if kind is None and (opaque or output is None):  # a check that compared nothing passed every config unseen
        held = opaque[0] if opaque else "None"
        raise ValueError(f"{name} passed this config's output, which holds no part a wrong copy can be made of "
                         f"({held}), so the check cannot be held to a control and its pass says nothing: {reach}")
    if wrong is None:
        return
    passed = _passes(workload, wrong, reference, config)
    if passed is not None:
        how = {"float": "each float doubled plus one and reversed", "integer": "each integer doubled plus one and "
               "reversed", "bool": "each bool negated", "text": "each string reversed and marked"}[kind or "float"]
        raise ValueError(f"{name} passed a plainly wrong output under this config (the first run's, {how}; "
                         f"{passed.metric or 'error'} {passed.error:.3g} <= tolerance {passed.tolerance:.3g}), so its "
                         f"pass says nothing of this config's output: compare every output with the reference, within "
                         f"tolerances that a wrong output exceeds")
    for part, wrong in parts:
        if _passes(workload, wrong, reference, config) is not None:
            raise ValueError(f"{name} passed this config's first output with its {part} alone made plainly wrong "
                             "(a number doubled plus one and reversed, a bool negated): it never compares that part, "
                             "or one norm over every part weighs it too little (give it a metric of its own, or use "
                             "worst_error), and a config wrong there alone passes: compare it with the reference, or "
                             "leave it out")


def _stored_loses(workload: Any, output: Any, config: Any) -> None:
    """Raise where ``to_reference`` changes the reference config's ``output`` past the check's tolerance: a workload
    of mine that stored its float64 reference as float32 ("to save space") failed every float64 config, the
    reference config too, and that failure was said to be an output "not the same from one process to the next"."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            own = workload.check(output, workload.to_reference(output), config)
    except Exception:  # noqa: BLE001 - a check that cannot read its output as a reference says nothing of it
        return
    if isinstance(own, Check) and not own.passed:
        raise ValueError(f"{type(workload).__name__}.to_reference changes the output it stores: the reference "
                         f"config's own output fails against it ({own.metric or 'error'} {own.error:.3g} > tolerance "
                         f"{own.tolerance:.3g}), so no config is checked against the output the reference config "
                         "gives; store the output as it is (no cast to a narrower type, no rounding)")


def _passes(workload: Any, wrong: Any, reference: Any, config: Any) -> "Check | None":
    """The check of a ``wrong`` output where it passed; None where it failed or raised (a refusal, as a failure)."""
    try:
        with warnings.catch_warnings():  # a wrong output's overflow, say: the control's, not the user's to read
            warnings.simplefilter("ignore")
            check = workload.check(wrong, reference, config)
    except Exception:  # noqa: BLE001 - a check that refuses a wrong output by raising has failed it
        return None
    return check if isinstance(check, Check) and check.passed else None
