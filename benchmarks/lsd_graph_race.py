"""Where does lsd's ``cuda_graph`` knob go wrong? One GPU command that tells the explanations apart.

On an H100 (2026-11-23, ``benchmarks/gpu_runs/2026-11-23-h100/``) a graphed run of lsd at ``tiny`` was off
by 0.29-0.34 in fp32, differently each run. Each replay equalled the eager model on the same input when a
probe ran the eager model after it and read a figure back to the host, which made the whole run correct.
A host sync changes nothing on one stream, so something is not ordered by the stream: host memory, another
stream, or memory the allocator hands out again. Each variant below changes one thing and prints the
run's check error (lsd's tolerance in fp32 is 2e-6):

- ``as-is``: the knob as it is (wrong, if the race is still there);
- ``sync-after``: ``torch.cuda.synchronize()`` after each replay;
- ``stream-sync-after``: only the current stream waited for after each replay; right here and wrong with
  ``sync-after`` would mean work on another stream (the whole device) is what the sync orders;
- ``sync-before``: the same before each replay;
- ``eager-after``: the eager model after each replay, no sync (the probe's extra work without its sync);
- ``keep-alive``: every input and output of a replay kept referenced to the end of the run, so the
  allocator cannot hand their memory out again;
- ``keep-run`` and ``keep-last``: the same, bounded, as a fix in the workload would have to be: released
  when the next run starts, or only the last replay's kept (added after the H100 run of 2026-11-25);
- ``keep-x``, ``keep-t``, ``keep-out``: only one of the last replay's tensors kept; ``wrap-only``: the
  wrapper that keeps them, keeping nothing (added after the H200 run of 2026-11-25, below);
- ``blocking-copies``: every ``.to(..., non_blocking=True)`` made blocking;
- ``cudnn-off``: cuDNN disabled, so the convolutions run PyTorch's own kernels: right here
  would put the race in cuDNN's (its workspace, or a stream of its own);
- ``launch-blocking``: ``as-is`` in a child process with ``CUDA_LAUNCH_BLOCKING=1``.

On an H100 (2026-11-25, ``benchmarks/gpu_runs/2026-11-25-h100/2-lsd/``), two runs a variant: ``as-is``,
``cudnn-off`` and ``launch-blocking`` were wrong (errors 0.328 and 0.306), ``sync-after``,
``stream-sync-after``, ``sync-before``, ``eager-after`` and ``keep-alive`` right (1.82e-07), and
``blocking-copies`` raised a TypeError (a positional ``non_blocking``; fixed since, not re-run). So cuDNN
is not the cause; the host waiting for the current stream alone is enough; and, with no wait at all, so
is keeping every replay's tensors from being freed: memory handed out again while something not ordered
by that stream still uses it. ``CUDA_LAUNCH_BLOCKING=1`` does not make ``graph.replay()`` wait. Not yet
found: which memory, and what reads it.

On an H200 (2026-11-25, ``benchmarks/gpu_runs/2026-11-25-h200/``): ``as-is`` wrong with the H100's errors
(0.328 and 0.306), ``keep-run`` and ``keep-last`` right (1.82e-07), ``blocking-copies`` wrong (0.328 and
0.306): pageable host copies are not the cause. Then lsd's own replay was made to keep its last input,
timestep and output (``5-graph-kept-inside/kept-inside.diff``): ``as-is`` stayed wrong (0.326 and 0.318,
twice) while ``keep-last``, which keeps the same tensors from this script's wrapper, was right in the same
process. The errors repeat to three digits in every process and on both GPUs. So the lifetime of those
tensors is not the whole story; the next run is ``--variants as-is wrap-only keep-x keep-t keep-out``.

On an H200 (2026-11-26, ``benchmarks/gpu_runs/2026-11-26-h200/``): ``as-is`` wrong (0.328 and 0.306),
``wrap-only``, ``keep-x``, ``keep-t``, ``keep-out`` and ``keep-last`` right (1.82e-07). The wrapper alone,
keeping nothing, is enough. What the wrapper does that lsd's replay did not: its closure holds ``eps``, and
so the model. Every variant that was right used the wrapper; every variant that was wrong (``as-is``,
``cudnn-off``, ``blocking-copies``, ``launch-blocking``) did not. A CUDA graph reads the weights by address
and holds no reference to them, and once lsd's build returned nothing held the model (a CPU test shows it,
``tests/test_lsd.py``): the caching allocator handed the weights' memory to the run's own tensors. Not a race:
a use after free, the same in every process. ``_graphed`` now keeps ``eps``; ``model-freed`` drops that
reference again, so the next run, ``--variants as-is model-freed``, should print ``as-is`` right and
``model-freed`` wrong.

Needs a CUDA device; about a minute on the H100 (11 s on 2026-11-25), the wheel install aside::

    python3 benchmarks/lsd_graph_race.py > $OUT/lsd-graph-race.txt
    python3 benchmarks/lsd_graph_race.py --variants as-is keep-alive
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import workloads.lsd as lsd  # noqa: E402
from autotune.devices import resolve_device  # noqa: E402
from autotune.space import load_space  # noqa: E402


@contextlib.contextmanager
def _around_replay(before: Callable[..., Any] | None = None,
                   after: Callable[..., Any] | None = None) -> Iterator[None]:
    """lsd's graphed eps with ``before(eps, x, t)`` and ``after(eps, x, t, out)`` around every replay."""
    original = lsd._graphed

    def graphed(eps: Callable[..., torch.Tensor], *args: Any) -> Callable[..., torch.Tensor]:
        replay = original(eps, *args)

        def call(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            if before is not None:
                before(eps, x, t)
            out = replay(x, t)
            if after is not None:
                after(eps, x, t, out)
            return out
        return call

    lsd._graphed = graphed
    try:
        yield
    finally:
        lsd._graphed = original


@contextlib.contextmanager
def _blocking_copies() -> Iterator[None]:
    original = torch.Tensor.to

    def to(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        # non_blocking may come by position, after a device and a dtype (torch's own .cuda() paths pass it so):
        # the first bool among the arguments is that flag (the H100 run of 2026-11-25 raised a TypeError here).
        flags = [i for i, arg in enumerate(args) if isinstance(arg, bool)]
        if flags:
            args = (*args[:flags[0]], False, *args[flags[0] + 1:])
        else:
            kwargs["non_blocking"] = False
        return original(self, *args, **kwargs)

    torch.Tensor.to = to  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.Tensor.to = original  # type: ignore[method-assign]


@contextlib.contextmanager
def _model_freed() -> Iterator[None]:
    """lsd's graphed replay without its reference to ``eps``: the model freed once the build returns, as before."""
    original = lsd._graphed

    def graphed(*args: Any) -> Callable[..., torch.Tensor]:
        replay = original(*args)
        del replay.captured
        return replay

    lsd._graphed = graphed
    try:
        yield
    finally:
        lsd._graphed = original


KEPT: list[torch.Tensor] = []


def _keep_every_replay() -> contextlib.AbstractContextManager[Any]:
    return _around_replay(after=lambda eps, x, t, out: KEPT.extend((x, t, out)))


def _keep_last(*which: int) -> contextlib.AbstractContextManager[Any]:
    """Keep the last replay's input ``x`` (0), timestep ``t`` (1) and/or output (2) until the next replay."""
    return _around_replay(after=lambda eps, *seen: KEPT.__setitem__(slice(None), [seen[i] for i in which]))


VARIANTS: dict[str, Callable[[], contextlib.AbstractContextManager[Any]]] = {
    "as-is": contextlib.nullcontext,
    "sync-after": lambda: _around_replay(after=lambda *_: torch.cuda.synchronize()),
    "stream-sync-after": lambda: _around_replay(after=lambda *_: torch.cuda.current_stream().synchronize()),
    "sync-before": lambda: _around_replay(before=lambda *_: torch.cuda.synchronize()),
    "eager-after": lambda: _around_replay(after=lambda eps, x, t, out: eps(x, t)),
    "keep-alive": _keep_every_replay,
    # Bounded forms of keep-alive, the fix the workload could take: a run's tensors released when the next run
    # starts (check_errors clears them), or only the last replay's kept until the next replay.
    "keep-run": _keep_every_replay,
    "keep-last": lambda: _keep_last(0, 1, 2),
    # On an H200 (2026-11-25) keep-last was right, and the same three tensors kept inside lsd's own replay
    # were not. These tell which of them matters, and whether the wrapper alone (an extra call a replay,
    # nothing kept) is what changes the run.
    "keep-x": lambda: _keep_last(0),
    "keep-t": lambda: _keep_last(1),
    "keep-out": lambda: _keep_last(2),
    "wrap-only": _around_replay,
    "model-freed": _model_freed,
    "blocking-copies": _blocking_copies,
    "cudnn-off": lambda: torch.backends.cudnn.flags(enabled=False),
}
CHILD_VARIANTS = {"launch-blocking": {"CUDA_LAUNCH_BLOCKING": "1"}}


def check_errors(variant: str, workload: lsd.LsdWorkload, reference: torch.Tensor,
                 runs: int = 2) -> list[tuple[float, bool]]:
    """The check error, and whether it passed, of ``runs`` graphed runs of lsd at tiny (batch 2, fp32)."""
    space = load_space("lsd").for_device(resolve_device("auto").profile)
    config = space.validate({**dict(space.baseline), "batch_size": 2, "cuda_graph": True})
    with VARIANTS[variant]():
        run = workload.build(config)
        checks = []
        for _ in range(runs):
            if variant == "keep-run":
                KEPT.clear()
            checks.append(workload.check(workload.to_reference(run()), reference, config))
    KEPT.clear()
    return [(check.error, check.passed) for check in checks]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    names = [*VARIANTS, *CHILD_VARIANTS]
    parser.add_argument("--variants", nargs="+", default=names, choices=names)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("lsd_graph_race.py: error: needs a CUDA device; cuda_graph exists only there", file=sys.stderr)
        return 2
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)
    workload = lsd.LsdWorkload("tiny", device="cuda")
    space = load_space("lsd").for_device(resolve_device("auto").profile)
    reference = workload.to_reference(workload.build(space.reference)())  # once: no variant touches it
    for variant in args.variants:
        if variant in CHILD_VARIANTS:
            done = subprocess.run([sys.executable, __file__, "--variants", "as-is"], capture_output=True, text=True,
                                  env={**os.environ, **CHILD_VARIANTS[variant]}, timeout=300)
            line = (done.stdout.strip().splitlines() or [done.stderr.strip()[-300:]])[-1]
            print(f"{variant:<16} {line.split(None, 1)[-1]}", flush=True)
            continue
        try:
            checks = check_errors(variant, workload, reference)
            print(f"{variant:<16} " + " ".join(f"{error:.3g}" for error, _ in checks)
                  + ("  right" if all(passed for _, passed in checks) else "  WRONG"), flush=True)
        except Exception as exc:  # one variant's failure must not hide the others'
            print(f"{variant:<16} {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
