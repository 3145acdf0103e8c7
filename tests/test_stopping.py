"""A stop never lands inside a whole step, whichever thread the kernel hands the signal to."""

import os
import signal
import threading
import time

import pytest

from autotune.stopping import whole_step


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stop_sent_during_a_whole_step_lands_after_it(signum):
    def stop(number, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signum, stop)
    steps = []
    try:
        with pytest.raises(KeyboardInterrupt):
            with whole_step():
                # Sent from another thread, as the kernel may deliver it to any thread of the process.
                sender = threading.Thread(target=os.kill, args=(os.getpid(), signum))
                sender.start()
                sender.join()
                time.sleep(0.05)  # the interpreter would run a handler here
                steps.append("first write")
                time.sleep(0.05)
                steps.append("second write")
        assert steps == ["first write", "second write"]
        assert signal.getsignal(signum) is stop  # the handler is back
    finally:
        signal.signal(signum, previous)


def test_a_whole_step_without_a_stop_or_that_fails_changes_nothing():
    before = signal.getsignal(signal.SIGINT)
    with whole_step():
        value = 1
    assert value == 1 and signal.getsignal(signal.SIGINT) is before
    with pytest.raises(ValueError):  # a step that fails gives the stops back too: Ctrl-C must still end the search
        with whole_step():
            raise ValueError("a storage write failed")
    assert signal.getsignal(signal.SIGINT) is before


def test_a_whole_step_outside_the_main_thread_runs_its_block():
    # Python sets signal handlers in the main thread alone: elsewhere swapping them raises ValueError, which took
    # down the step instead of running it.
    steps, errors = [], []

    def step():
        try:
            with whole_step():
                steps.append("written")
        except Exception as error:  # noqa: BLE001 - the test reads it back in the main thread
            errors.append(error)

    thread = threading.Thread(target=step)
    thread.start()
    thread.join(timeout=30)
    assert (steps, errors) == (["written"], [])


def test_sighup_stops_a_search_unless_nohup_ignored_it():
    # A terminal closed killed a search where it stood; `nohup autotune search ...` must still outlive it.
    from autotune.stopping import stop_on_sigterm

    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        stop_on_sigterm()
        handler = signal.getsignal(signal.SIGHUP)
        assert callable(handler) and handler is signal.getsignal(signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt):
            handler(signal.SIGHUP, None)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup leaves it
        stop_on_sigterm()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
