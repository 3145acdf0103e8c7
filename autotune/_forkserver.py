"""A fork server: one process that has imported torch forks one clean child per trial.

Importing torch costs seconds; forking a process that already has it costs
milliseconds. The server imports torch and the built-in workloads but never
touches CUDA (a CUDA context does not survive fork) and never runs a torch
operation (OpenMP pools do not survive fork either).

Unlike ``multiprocessing``'s forkserver it never re-imports the caller's
``__main__``, so it works from any script, notebook or test runner.

Protocol (length-prefixed pickles): the client writes ``(function, args,
result_path)`` to the server's stdin; the server forks, answers
``("started", pid)`` on the response pipe, waits for the child and answers
``("exited", pid, exitcode)`` (negative: killed by that signal). The child
starts its own process group and writes ``function(*args)`` to
``result_path``.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from autotune.exceptions import AutotuneError, said
from autotune.shipped import take_builtin_names

_HEADER = struct.Struct("!Q")
#: Seconds between the words a caller's ``on_wait`` is given while a trial runs: a cold compile ran 615 s unsaid.
WAIT_SAID = 60.0
#: Seconds of a server starting (importing torch: 0.3-0.5 s on the 2-core CPU, 3.2-4.9 s in benchmarks/gpu_runs)
#: before it is said to, then every WAIT_SAID: a first import from a cold disk or a network file system can take a
#: minute, and was silence.
STARTING_SAID = 10.0
#: Seconds a server may take to start before it is stopped and said to have failed: an import stuck on a network
#: file system hung the search without a word. No trial timeout: a --trial-timeout of 5 s is no bound on an import.
START_TIMEOUT = 600.0


def _write_frame(fd: int, obj: Any) -> None:
    data = pickle.dumps(obj)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, size: int) -> bytes:
    chunks = []
    while size:
        chunk = os.read(fd, size)
        if not chunk:
            raise EOFError("fork server closed its pipe")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _read_frame(fd: int) -> Any:
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    return pickle.loads(_read_exact(fd, size))


# -- the server ---------------------------------------------------------------------


def _serve(request_fd: int, response_fd: int) -> None:
    while True:
        try:
            function, args, result_path = _read_frame(request_fd)
        except EOFError:
            return  # the client went away: so do we
        pid = os.fork()
        if pid == 0:
            _child(function, args, result_path, request_fd, response_fd)
        _write_frame(response_fd, ("started", pid))
        _, status = os.waitpid(pid, 0)
        _write_frame(response_fd, ("exited", pid, os.waitstatus_to_exitcode(status)))


def die_with_parent(parent: int, signum: int = signal.SIGKILL) -> None:
    """Ask Linux to send ``signum`` to this process when its parent dies (a SIGKILLed worker leaves no trial running)."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum)
        except (OSError, AttributeError):
            return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _child(function: Callable[..., Any], args: tuple, result_path: str, *server_fds: int) -> None:
    code = 0
    try:
        die_with_parent(int(os.environ.get("_AUTOTUNE_FORKSERVER_PID", "0")) or os.getppid())
        os.setsid()  # own process group: a timeout kills this child and all it started
        for fd in server_fds:
            os.close(fd)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the tuner's to handle
        outcome = function(*args)
        tmp = f"{result_path}.tmp"
        with open(tmp, "wb") as handle:
            pickle.dump(outcome, handle)
        os.replace(tmp, result_path)
    except BaseException:  # noqa: BLE001 - report and leave; never return into the server loop
        import traceback

        traceback.print_exc()
        code = 70
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    # The server's and every trial's stdout is the tuner's stderr: a workload that prints (Python or C) must not
    # mix its lines into the tuner's stdout, where `--json` writes its one object for a script to parse.
    os.dup2(2, 1)
    die_with_parent(int(os.environ.get("_AUTOTUNE_CLIENT_PID", "0")) or os.getppid())
    os.environ["_AUTOTUNE_FORKSERVER_PID"] = str(os.getpid())
    response_fd = int(sys.argv[1])
    take_builtin_names()  # started as `python -m`: a `workloads` package in the working directory came first
    for module in sys.argv[2:]:
        try:
            __import__(module)
        except BaseException as exc:  # noqa: BLE001 - said by the client in one line (a broken torch install)
            _write_frame(response_fd, ("failed", f"importing {module}: {said(exc)}"))
            sys.exit(1)
    _write_frame(response_fd, ("ready", os.getpid()))
    _serve(sys.stdin.fileno(), response_fd)


# -- the client ---------------------------------------------------------------------


#: The trials' environment unless the user's sets them: Inductor's max-autotune prints its kernel timings
#: to the terminal, amid the progress lines (vlm_mc's compile knob), and warns that its own code uses a
#: deprecated storage API. Neither changes a choice it makes, nor is anything a user could act on.
QUIET = {"TORCHINDUCTOR_MAX_AUTOTUNE_REPORT_CHOICES_STATS": "0", "TORCHINDUCTOR_AUTOTUNE_NUM_CHOICES_DISPLAYED": "0",
         "PYTHONWARNINGS": "ignore:TypedStorage is deprecated"}


#: How long a gone process's results folder is left before another process removes it: a folder is the process's
#: that its name says, and a process of another PID namespace (a container's) on the same /tmp may look gone here.
#: A trial writes its result there, and its search removes it, at every trial's end: an hour's silence rules it out.
ORPHAN_SECONDS = 3600.0


def results_folder() -> tempfile.TemporaryDirectory:
    """A folder for this process's trials' results, named by its process id, once those of processes since gone
    are removed. A process killed (SIGKILL, the OOM killer) never ran the finaliser that removes its own: 43 were
    left in /tmp in a day of this project's tests (each an empty ``autotune-*``), and a user's killed searches
    left theirs."""
    from autotune.storage import pid_alive  # the journal's test of a worker's process (a zombie is gone)

    base = Path(tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for folder in base.glob("autotune-*-*"):
            pid = folder.name.split("-")[1]
            with contextlib.suppress(OSError):  # another process may remove it first, or it is another user's
                stat = folder.stat()
                if (pid.isdigit() and not pid_alive(int(pid)) and stat.st_uid == os.getuid()
                        and time.time() - stat.st_mtime > ORPHAN_SECONDS):
                    shutil.rmtree(folder)
    return tempfile.TemporaryDirectory(prefix=f"autotune-{os.getpid()}-")


class ForkServer:
    """Client of a fork server process; one call at a time.

    Example::

        server = ForkServer(preload=["torch"])
        value, exitcode, timed_out = server.call(os.getpid, (), timeout=10)
        server.close()
    """

    def __init__(self, preload: list[str] | None = None, start_timeout: float | None = START_TIMEOUT,
                 on_start_wait: Callable[[float], None] | None = None) -> None:
        self.preload = list(preload or [])
        # on_start_wait is told the seconds a start has taken, after STARTING_SAID and then every WAIT_SAID.
        self.start_timeout, self.on_start_wait = start_timeout, on_start_wait
        self._process: subprocess.Popen | None = None
        self._response_fd: int | None = None
        self._ready = False
        self._tmpdir = results_folder()

    def start(self) -> None:
        """Start the server process without waiting for it: it imports its preload (torch: seconds) while the
        caller goes on, and :meth:`call` waits for it to be ready. Nothing happens if it is running."""
        if self._process is not None and self._process.poll() is None:
            return
        self._forget()  # a server that died: its pipe goes with it
        read_fd, write_fd = os.pipe()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "autotune._forkserver", str(write_fd), *self.preload],
            stdin=subprocess.PIPE,
            pass_fds=(write_fd,),
            env={**QUIET, **os.environ, "_AUTOTUNE_CLIENT_PID": str(os.getpid())},
            start_new_session=True,  # Ctrl-C in the terminal reaches the tuner, not the server
        )
        os.close(write_fd)
        self._response_fd = read_fd
        self._ready = False

    def wait_ready(self) -> None:
        """Wait until a server that :meth:`start` started has imported its preload (nothing if none is starting)."""
        if self._ready or self._response_fd is None:
            return
        self._wait_started(self._response_fd, time.monotonic())
        try:
            message = _read_frame(self._response_fd)
        except EOFError:
            message = ("failed", "it exited (see the error above)")
        if message[0] == "failed":  # was a RuntimeError's traceback after the server's own, 49 lines for one cause
            self._forget()
            try:
                os.getcwd()
                check = f"check that `{sys.executable} -c 'import torch'` works"
            except FileNotFoundError:  # torch's own words: "oneMKL FATAL ERROR: Cannot load libtorch_cpu.so"
                check = "the working directory no longer exists: cd into a folder that exists"
            raise ServerFailed(f"the fork server, which every trial forks from, failed to start: {message[1]}; "
                               f"{check}") from None
        self._ready = True

    def _wait_started(self, fd: int, started: float) -> None:
        """Wait until the server has a word for us (ready or failed), telling ``on_start_wait`` meanwhile; a
        server silent past ``start_timeout`` is stopped and said to have failed."""
        said = STARTING_SAID
        while True:
            elapsed = time.monotonic() - started
            waits = [t - elapsed for t in (self.start_timeout, said if self.on_start_wait else None) if t is not None]
            if select.select([fd], [], [], max(0.0, min(waits)) if waits else None)[0]:
                return
            elapsed = time.monotonic() - started
            if self.start_timeout is not None and elapsed >= self.start_timeout:
                self._forget()
                raise ServerFailed(f"the fork server, which every trial forks from, did not start within "
                                   f"{self.start_timeout:g} s (it imports torch and the workloads); check that "
                                   f"`{sys.executable} -c 'import torch'` works")
            if self.on_start_wait is not None and elapsed >= said:
                with contextlib.suppress(Exception):  # words about a start never end it
                    self.on_start_wait(elapsed)
                said += WAIT_SAID

    def call(self, function: Callable[..., Any], args: tuple, timeout: float | None,
             on_wait: Callable[[float], None] | None = None) -> tuple[Any, int | None, bool]:
        """Run ``function(*args)`` in a fresh child: ``(result or None, exit code, timed out)``; ``on_wait`` is told
        the seconds it has run every ``WAIT_SAID`` seconds while it runs."""
        self.start()
        self.wait_ready()
        assert self._process is not None and self._process.stdin is not None and self._response_fd is not None
        result_path = Path(self._tmpdir.name) / f"result-{time.monotonic_ns()}.pickle"
        pid, timed_out = None, False
        try:
            _write_frame(self._process.stdin.fileno(), (function, args, str(result_path)))
            kind, pid = _read_frame(self._response_fd)
            assert kind == "started"
            started = time.monotonic()
            while True:  # until it ends or its timeout, telling on_wait every WAIT_SAID seconds
                left = None if timeout is None else started + timeout - time.monotonic()
                wait = left if on_wait is None else (WAIT_SAID if left is None else min(left, WAIT_SAID))
                ready, _, _ = select.select([self._response_fd], [], [], None if wait is None else max(0.0, wait))
                if ready or (timeout is not None and time.monotonic() >= started + timeout):
                    break
                with contextlib.suppress(Exception):  # words about a trial never end it
                    on_wait(time.monotonic() - started)  # type: ignore[misc]
            if not ready:
                timed_out = True
                kill_group(pid)
            kind, _, exitcode = _read_frame(self._response_fd)
        except BaseException as exc:
            # Interrupted (Ctrl-C) mid-trial, or the server died: kill the trial, drop this server, start afresh
            # next time. A server killed mid-trial (the OOM killer's pick, say) ended the search "aborted", exit 130,
            # its trial left running in the study: it is the trial's crash now, and the study goes on.
            if pid is not None:
                kill_group(pid)
            server = self._process
            self._forget()  # waits for it: its pipe closes a moment before it is gone
            if isinstance(exc, (EOFError, BrokenPipeError)) and server is not None:
                raise ServerDied(f"its fork server died{_from_signal(server.returncode)} while it ran; a new one "
                                 "runs the next", -server.returncode) from None
            raise
        kill_group(pid)  # anything the trial started and left behind goes with it
        outcome = None
        if result_path.exists():
            with open(result_path, "rb") as handle:
                outcome = pickle.load(handle)
            result_path.unlink()
        return outcome, exitcode, timed_out

    def _forget(self) -> None:
        """Stop the server process, if any, and close its pipes. It is killed, not asked to leave: it runs no
        trial between calls and holds nothing to save, and a process with torch loaded takes most of a second
        to exit on its own (0.8 s on the 2-core CPU), at the end of every search."""
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait()
            if self._process.stdin is not None:
                self._process.stdin.close()
            self._process = None
        if self._response_fd is not None:
            os.close(self._response_fd)
            self._response_fd = None
        self._ready = False

    def close(self) -> None:
        self._forget()
        self._tmpdir.cleanup()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class ServerFailed(AutotuneError):
    """The fork server could not start: importing torch or the workloads failed."""


class ServerDied(RuntimeError):
    """The fork server died (killed) while a call ran: its child went with it. ``signum``: the signal that killed it."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal 99`` for a number no signal has."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _from_signal(returncode: int) -> str:
    return f" (exit status {returncode})" if returncode >= 0 else f" from {signal_name(-returncode)}"


def kill_group(pid: int) -> None:
    """SIGKILL a child's whole process group; quiet if it is already gone."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


if __name__ == "__main__":
    main()
