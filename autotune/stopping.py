"""How a search stops: Ctrl-C, SIGTERM and SIGHUP end it cleanly, never in the middle of a step that must be whole."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

__all__ = ["STOP_SIGNALS", "stop_on_sigterm", "whole_step"]

#: SIGHUP where there is one: a terminal closed (an ssh session dropped) killed a search where it stood, its
#: re-measurement lost with the export, where Ctrl-C would have kept its whole rounds and exported.
HANGUP = tuple(s for s in (getattr(signal, "SIGHUP", None),) if s is not None)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, *HANGUP)


def stop_on_sigterm() -> None:
    """SIGTERM (a scheduler's stop, `kill`) and SIGHUP (its terminal gone) end a search like Ctrl-C: the running
    trial is marked, none is lost, and a re-measurement keeps its whole rounds."""

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    for signum in (signal.SIGTERM, *HANGUP):
        if signum in HANGUP and signal.getsignal(signum) is signal.SIG_IGN:
            continue  # `nohup autotune search ...`: the user asked it to outlive its terminal
        signal.signal(signum, stop)


@contextlib.contextmanager
def whole_step() -> Iterator[None]:
    """Hold Ctrl-C, SIGTERM and SIGHUP until the block has finished, then deliver them.

    Used where a stop between two storage writes would leave a trial nobody
    can release (taken but not yet claimed). A thread's signal mask is not
    enough: the kernel hands a process signal to any thread that does not
    block it, and Python then runs the handler in the main thread anyway. So
    the Python handlers themselves are swapped for one that only notes the
    signal. Outside the main thread (where handlers cannot be set) it does
    nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: object) -> None:
        held.append(signum)

    previous = {s: signal.signal(s, hold) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if held:
            # Delivered again now that the step is whole; the restored handler acts on it.
            signal.raise_signal(held[0])
