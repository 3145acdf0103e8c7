"""The reference output's file: written once per workload, size, version and device, loaded by every trial.

It holds plain tensor data only, and no NaN: a trial loads it with ``weights_only`` (a file is data, a planted
pickle must not run code), and NaN equals nothing, so no output could be checked against it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Iterator

from autotune.exceptions import said

__all__ = ["save"]


def save(workload: Any, reference: Any, path: Path) -> None:
    """Write ``reference`` (``workload.to_reference`` of the reference config's output) to ``path`` atomically.

    Raises TypeError where it is not plain tensor data, ValueError where it holds NaN, and OSError where the
    disk refuses it (full, say), each naming the cause: torch's own words for a full disk were "[enforce fail
    at inline_container.cc:672] . unexpected pos 576 vs 534".
    """
    import torch

    name = type(workload).__name__
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp")
    saved = False
    try:
        torch.save(reference, tmp)  # a generator cannot be saved at all
        saved = True
        torch.load(tmp, weights_only=True)  # as every trial loads it: a numpy array, say, fails each one opaquely
    except Exception as exc:  # noqa: BLE001 - whatever torch says, the cause is named below
        tmp.unlink(missing_ok=True)
        held = _not_plain(reference)
        if not held and not saved:  # plain data the disk did not take
            raise OSError(f"{name}'s reference output ({_mib(_tensor_bytes(reference))} of tensors) could not be "
                          f"written to {path.parent} ({_mib(_free_bytes(path.parent))} free there): "
                          f"{said(exc)}") from None
        raise TypeError(f"{name}'s reference output holds {held or 'a value torch cannot load'}, which a reference "
                        "file cannot: plain tensor data only (tensors, numbers, strings, and lists, tuples and dicts "
                        "of them); return tensors, or convert the output in to_reference()") from None
    nan = _nan_in(reference)
    if nan:  # NaN equals nothing: every output would fail against it, or pass where a check lets NaN through
        tmp.unlink()
        raise ValueError(f"{name}'s reference output holds NaN ({nan}): no output can be checked against it; fix "
                         "the reference config (the space file's reference:) or the workload")
    os.replace(tmp, path)


def _leaves(value: Any, where: str = "output") -> Iterator[tuple[str, Any]]:
    """Each part of a reference output that is no list, tuple or dict, with where it is (``output['counts'][1]``);
    a dict's keys too."""
    items = enumerate(value) if isinstance(value, (list, tuple)) else value.items() if isinstance(value, dict) else None
    if items is None:
        yield where, value
        return
    for key, item in items:
        if isinstance(value, dict):
            yield from _leaves(key, f"{where} key {key!r}")
        yield from _leaves(item, f"{where}[{key!r}]")


def _nan_in(value: Any) -> str:
    """Where ``value`` holds NaN (``output['counts']: 3 of 400 values``), else ''."""
    import torch

    for where, leaf in _leaves(value):
        floating = isinstance(leaf, torch.Tensor) and (leaf.is_floating_point() or leaf.is_complex())
        count = int(torch.isnan(leaf).sum()) if floating else 0
        if count or isinstance(leaf, float) and leaf != leaf:
            return f"{where}: {count} of {leaf.numel()} values" if count else where
    return ""


def _not_plain(value: Any) -> str:
    """What in ``value`` is not plain tensor data: the first such type, by name, and where it is."""
    import torch

    # Python's own numbers and strings, not their subclasses: numpy.float64 is a float, which torch cannot load (a
    # Monte-Carlo pi of mine returned one, and was told "a value torch cannot load").
    return next((f"a {type(leaf).__module__}.{type(leaf).__qualname__} ({where})" for where, leaf in _leaves(value)
                 if not (leaf is None or isinstance(leaf, torch.Tensor) or type(leaf) in (bool, int, float, str))), "")


def _tensor_bytes(value: Any) -> int:
    import torch

    return sum(leaf.numel() * leaf.element_size() for _, leaf in _leaves(value) if isinstance(leaf, torch.Tensor))


def _free_bytes(folder: Path) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _mib(value: int | None) -> str:
    return "? MiB" if value is None else f"{value / 2**20:.2f} MiB"
