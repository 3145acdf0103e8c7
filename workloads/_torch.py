"""What several workloads do with torch the same way: precision, attention backend, compile, restarts, caches.

Each helper turns a knob value into exactly what it names (never another
value), so every workload's knob of the same name means the same thing.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Mapping, Sequence, TypeVar

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from autotune.exceptions import said

__all__ = ["AUTOCAST", "SDPA_BACKENDS", "attention_backend", "autocast", "cached", "data_loader", "maybe_compile",
           "own_gradients", "restart"]

T = TypeVar("T")

#: precision knob -> autocast dtype (None: fp32, autocast off).
AUTOCAST: Mapping[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}

#: attention knob -> SDPA backend; ``sdpa`` and ``auto`` let SDPA choose.
SDPA_BACKENDS: Mapping[str, SDPBackend | None] = {
    "sdpa": None,
    "auto": None,
    "math": SDPBackend.MATH,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


def data_loader(*args: Any, **kwargs: Any) -> "torch.utils.data.DataLoader":
    """torch's DataLoader, without its warning that ``num_workers`` is above this machine's suggested count.

    Such a value is one the search measures, not a mistake: torch warned twice a trial (at the loader and at its
    iterator), four lines in the progress of each. The filter is the process's, as the iterator warns in the run.
    """
    warnings.filterwarnings("ignore", message="This DataLoader will create .* worker processes in total",
                            category=UserWarning)
    return torch.utils.data.DataLoader(*args, **kwargs)


def autocast(device: torch.device, precision: str) -> ContextManager[Any]:
    """Autocast to the precision knob's dtype on ``device`` (off for fp32)."""
    dtype = AUTOCAST[precision]
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


def attention_backend(name: str) -> ContextManager[Any]:
    """Only the named SDPA backend may run (SDPA raises where it cannot), or SDPA's own choice."""
    backend = SDPA_BACKENDS[name]
    return sdpa_kernel(backend) if backend is not None else contextlib.nullcontext()


def maybe_compile(module: Callable[..., T], mode: str) -> Callable[..., T]:
    """``module`` under ``torch.compile`` in the compile knob's mode, or as it is for ``none``.

    Under ``TORCH_COMPILE_DISABLE=1`` torch.compile returns the module as it is, without a word: each compile
    mode was measured as eager (lsd's ``compile=default`` at tiny on this CPU: a first run of 0.018 s against
    12.5 s compiled, 403 against 617 a second, eager's 425 within noise) and could win and be exported as
    compiled. Such a config fails instead, saying why.
    """
    if mode == "none":
        return module
    if torch._dynamo.config.disable:
        raise RuntimeError(f"compile={mode} cannot be measured: TORCH_COMPILE_DISABLE=1 is set, and under it "
                           "torch.compile returns the model uncompiled; unset it to tune torch.compile")
    import torch._inductor.config as inductor

    # TORCHINDUCTOR_MAX_AUTOTUNE(_GEMM, _POINTWISE)=1 makes the modes that do not autotune do so: "default" would
    # be measured (and exported) as max-autotune's kernels.
    if mode in ("default", "reduce-overhead") and (inductor.max_autotune or inductor.max_autotune_gemm
                                                    or inductor.max_autotune_pointwise):
        raise RuntimeError(f"compile={mode} cannot be measured: TORCHINDUCTOR_MAX_AUTOTUNE is set, and under it "
                           f"{mode} autotunes as max-autotune does; unset it to tune the compile modes")
    return torch.compile(module, mode=mode)


def own_gradients(params: Iterable[torch.Tensor], mode: str) -> None:
    """Under ``reduce-overhead``, each parameter's gradient copied out of the CUDA graph's memory as it arrives.

    A parameter without a ``.grad`` takes the tensor its backward produced as
    its gradient, not a copy (autograd's AccumulateGrad keeps a tensor nothing
    else holds; a test in ``tests/test_latentwire.py`` shows it on the CPU). Under
    ``reduce-overhead`` that tensor is an output of the backward's CUDA graph,
    which its next replay overwrites: accumulating over micro-batches then
    reads overwritten memory. On an H100 (2026-11-23) latentwire's backward
    raised "accessing tensor output of CUDAGraphs that has been overwritten by
    a subsequent run", pointing at the line that adds ``enc_pos``, a
    parameter; PyTorch tracks it as pytorch/pytorch#169545 and reports
    silently wrong accumulated gradients in #96693. A hook that clones each
    gradient gives the parameter a tensor of its own; the copy's time counts
    in the knob's throughput. Other modes run no CUDA graph and get no hook.
    """
    if mode != "reduce-overhead":
        return
    for param in params:
        param.register_hook(torch.clone)


def restart(params: Sequence[torch.Tensor], initial: Iterable[torch.Tensor], optimizer: torch.optim.Optimizer,
            set_to_none: bool = True) -> None:
    """Every run of a training step starts from the same weights and a fresh optimizer: runs are repeatable."""
    with torch.no_grad():
        torch._foreach_copy_(list(params), list(initial))
    optimizer.state.clear()
    optimizer.zero_grad(set_to_none=set_to_none)


def cached(path: Path | None, make: Callable[[], T], save: Callable[[T, Path], None],
           load: Callable[[Path], T]) -> T:
    """``load(path)`` when the cache holds it, else ``make()``, saved atomically (a crash leaves no half file).

    Trials of one study run at once and share the cache: each writes its own
    temporary file and renames it, so a reader sees a whole file or none. A
    file that cannot be read (cut short on a disk that failed, say) is made
    again: a truncated ``walk.npz`` failed chmm's every trial and its reference
    with "BadZipFile: File is not a zip file", naming no file, until deleted.
    A write the disk refuses leaves no temporary file behind to fill it more.
    """
    if path is not None and path.is_file():
        try:
            return load(path)
        except Exception as exc:  # noqa: BLE001 - the data is made from a seed: made again, it is the same
            warnings.warn(f"the cached {path} could not be read ({said(exc)}); made again")
    value = make()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp{path.suffix}")
        try:
            save(value, tmp)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    return value
