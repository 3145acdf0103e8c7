"""The fork server every trial forks from (:mod:`autotune._forkserver`), driven here without a workload: its
frames, a call's value, exit code and timeout, what a trial leaves behind, a server that dies or is left.

`tests/test_runner.py` runs trials through it (a preload that fails or is slow, a server killed mid-trial, what a
trial prints); here each piece is called alone, with no torch preloaded (a server starts in a fraction of a second).
"""

import contextlib
import gc
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from autotune import _forkserver
from autotune._forkserver import (ForkServer, ServerDied, _from_signal, _read_frame, _write_frame, kill_group,
                                  signal_name)
from tests.conftest import until


@pytest.fixture
def server():
    started = ForkServer()
    yield started
    started.close()


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pid: int) -> bool:
    return until(lambda: _gone(pid))


def test_a_frame_larger_than_a_pipe_holds_arrives_whole_and_a_cut_one_is_the_end_of_the_pipe():
    # A pipe holds 64 KiB: a larger frame is written and read in pieces, each piece taken where the last one ended.
    frame = {"bytes": bytes(range(256)) * 4096, "text": "é" * 70_000, "numbers": list(range(20_000))}
    read_fd, write_fd = os.pipe()
    try:
        writer = threading.Thread(target=lambda: [_write_frame(write_fd, frame), _write_frame(write_fd, ("next", 1))])
        writer.start()
        assert _read_frame(read_fd) == frame and _read_frame(read_fd) == ("next", 1)
        writer.join(timeout=30)
        whole = _forkserver.pickle.dumps(("cut", 2))
        os.write(write_fd, _forkserver._HEADER.pack(len(whole)) + whole[:-3])  # a writer killed mid-frame
        os.close(write_fd)
        write_fd = -1
        with pytest.raises(EOFError, match="fork server closed its pipe"):
            _read_frame(read_fd)
        with pytest.raises(EOFError):  # nothing at all: the pipe's end
            _read_frame(read_fd)
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)


def test_a_call_runs_in_a_fresh_child_of_its_own_group_and_returns_its_value(server):
    first, exitcode, timed_out = server.call(os.getpid, (), timeout=30)
    second = server.call(os.getpid, (), timeout=30)[0]
    assert (exitcode, timed_out) == (0, False)
    assert len({first, second, os.getpid(), server._process.pid}) == 4  # a child each, neither this nor the server
    assert server.call(os.getpgrp, (), timeout=30)[0] != os.getpgrp()  # a timeout kills its own group, not ours
    assert server.call(divmod, (17, 5), timeout=None) == ((3, 2), 0, False)
    assert server.call(signal.getsignal, (signal.SIGINT,), timeout=30)[0] == signal.SIG_IGN  # Ctrl-C is the tuner's
    assert os.listdir(server._tmpdir.name) == []  # each result file read and removed


def test_a_trial_s_environment_quietens_inductor_where_the_user_has_not_and_names_its_client(monkeypatch):
    # Inductor's max-autotune printed its kernel timings amid the progress lines (vlm_mc's compile knob).
    monkeypatch.setenv("TORCHINDUCTOR_AUTOTUNE_NUM_CHOICES_DISPLAYED", "3")  # the user's own setting wins
    for name in ("TORCHINDUCTOR_MAX_AUTOTUNE_REPORT_CHOICES_STATS", "PYTHONWARNINGS", "_AUTOTUNE_CLIENT_PID"):
        monkeypatch.delenv(name, raising=False)
    names = ("TORCHINDUCTOR_AUTOTUNE_NUM_CHOICES_DISPLAYED", "TORCHINDUCTOR_MAX_AUTOTUNE_REPORT_CHOICES_STATS",
             "PYTHONWARNINGS", "_AUTOTUNE_CLIENT_PID")
    with contextlib.closing(ForkServer()) as server:
        seen = {name: server.call(os.getenv, (name,), timeout=30)[0] for name in names}
    assert seen == {"TORCHINDUCTOR_AUTOTUNE_NUM_CHOICES_DISPLAYED": "3",
                    "TORCHINDUCTOR_MAX_AUTOTUNE_REPORT_CHOICES_STATS": "0",
                    "PYTHONWARNINGS": "ignore:TypedStorage is deprecated", "_AUTOTUNE_CLIENT_PID": str(os.getpid())}


def test_a_call_that_raises_exits_70_with_its_traceback_and_no_value(server, capfd):
    assert server.call(int, ("not a number",), timeout=30) == (None, 70, False)
    assert "ValueError: invalid literal for int() with base 10: 'not a number'" in capfd.readouterr().err
    assert server.call(os.getpid, (), timeout=30)[1] == 0  # the server serves on


def test_a_call_past_its_timeout_is_killed_with_all_it_started(server, tmp_path):
    pid_file = tmp_path / "sleeper"
    started = time.monotonic()
    value, exitcode, timed_out = server.call(os.system, (f"sleep 60 & echo $! > {pid_file}; wait",), timeout=1.0)
    assert (value, exitcode, timed_out) == (None, -signal.SIGKILL, True)
    assert 1.0 <= time.monotonic() - started < 10
    assert _wait_gone(int(pid_file.read_text()))  # the trial's own child went with it
    assert server.call(os.getpid, (), timeout=30)[1:] == (0, False)


def test_what_a_trial_left_running_goes_when_it_returns(server, tmp_path):
    pid_file = tmp_path / "left"
    assert server.call(os.system, (f"sleep 60 > /dev/null & echo $! > {pid_file}",), timeout=30) == (0, 0, False)
    assert _wait_gone(int(pid_file.read_text()))


def test_a_call_tells_its_waiter_while_it_runs_and_a_waiter_that_raises_ends_nothing(server, monkeypatch):
    monkeypatch.setattr(_forkserver, "WAIT_SAID", 0.2)
    said = []
    assert server.call(time.sleep, (1.1,), timeout=None, on_wait=said.append) == (None, 0, False)
    assert 3 <= len(said) <= 6 and said == sorted(said) and 0.2 <= said[0] and said[-1] < 10, said
    said.clear()  # the same pace under a timeout, which it waits towards no faster
    assert server.call(time.sleep, (1.1,), timeout=30, on_wait=said.append) == (None, 0, False)
    assert 3 <= len(said) <= 6 and said == sorted(said) and 0.2 <= said[0] and said[-1] < 10, said

    def broken(seconds):
        raise RuntimeError("a waiter's own error")

    assert server.call(time.sleep, (0.5,), timeout=30, on_wait=broken) == (None, 0, False)
    started = time.monotonic()
    assert server.call(time.sleep, (30,), timeout=0.5, on_wait=said.append)[2] is True  # its timeout still bounds it
    assert time.monotonic() - started < 10


def test_a_call_stopped_by_ctrl_c_kills_all_its_trial_started_and_the_server_it_ran_on(server, monkeypatch, tmp_path):
    monkeypatch.setattr(_forkserver, "WAIT_SAID", 0.2)
    pid_file = tmp_path / "sleeper"

    def ctrl_c(seconds):
        if pid_file.exists() and pid_file.read_text().strip():
            raise KeyboardInterrupt

    server.start()
    stopped = server._process
    with pytest.raises(KeyboardInterrupt):  # the user's stop, not taken for a server that died
        server.call(os.system, (f"sleep 60 & echo $! > {pid_file}; wait",), timeout=30, on_wait=ctrl_c)
    assert _wait_gone(int(pid_file.read_text()))  # the trial's own child, which no parent's death takes
    assert server._process is None and stopped.returncode == -signal.SIGKILL
    assert server.call(os.getpid, (), timeout=30)[1] == 0  # a new server runs the next


def test_a_server_imports_its_preload_before_it_forks(server):
    imported = "'colorsys' in __import__('sys').modules"
    assert server.call(eval, (imported,), timeout=30)[0] is False
    with contextlib.closing(ForkServer(["colorsys"])) as preloaded:
        assert preloaded.call(eval, (imported,), timeout=30)[0] is True


def test_a_server_killed_mid_call_is_said_with_its_signal_and_the_next_call_starts_another(server):
    server.start()
    killed = server._process.pid
    with pytest.raises(ServerDied, match=r"^its fork server died from SIGKILL while it ran; a new one runs the next$"
                       ) as died:
        server.call(os.kill, (killed, signal.SIGKILL), timeout=30)
    assert died.value.signum == signal.SIGKILL and server._process is None
    assert server.call(os.getpid, (), timeout=30)[1] == 0 and server._process.pid != killed


def test_a_server_starts_once_and_its_close_leaves_nothing(server):
    server.start()
    process = server._process
    server.start()  # running: nothing happens
    assert server._process is process
    server.call(os.getpid, (), timeout=30)
    assert server._process is process
    assert os.getsid(process.pid) != os.getsid(0)  # Ctrl-C in the terminal reaches the tuner alone
    folder = server._tmpdir.name
    server.close()
    assert process.returncode == -signal.SIGKILL and not os.path.exists(folder) and server._process is None
    assert process.stdin.closed and server._response_fd is None
    server.close()  # twice: nothing more


def test_a_server_with_no_start_timeout_and_no_waiter_waits_as_long_as_it_takes():
    # Nothing to wake for: a wait without a limit (a mutant asked for the least of no limits, a ValueError).
    with contextlib.closing(ForkServer(start_timeout=None)) as started:
        assert started.call(os.getpid, (), timeout=30)[1] == 0


def test_a_server_whose_client_goes_away_leaves_with_it():
    read_fd, write_fd = os.pipe()
    process = subprocess.Popen([sys.executable, "-m", "autotune._forkserver", str(write_fd)], stdin=subprocess.PIPE,
                               pass_fds=(write_fd,))
    os.close(write_fd)
    try:
        assert _read_frame(read_fd) == ("ready", process.pid)
        process.stdin.close()  # no more requests
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
        process.wait(timeout=30)
        os.close(read_fd)


def test_a_process_whose_parent_is_not_the_one_named_leaves_at_once():
    script = "from autotune._forkserver import die_with_parent\nimport os\ndie_with_parent({})\nprint('stayed')\n"
    stayed = subprocess.run([sys.executable, "-c", script.format("os.getppid()")], capture_output=True, text=True,
                            timeout=60)
    assert (stayed.returncode, stayed.stdout) == (0, "stayed\n")
    left = subprocess.run([sys.executable, "-c", script.format("os.getppid() + 1")], capture_output=True, text=True,
                          timeout=60)
    assert (left.returncode, left.stdout) == (1, "")


def test_a_process_asked_to_die_with_its_parent_does(tmp_path):
    # A SIGKILLed worker's fork server, and the trial it ran, must not run on, holding a GPU or a core.
    child = ("from autotune._forkserver import die_with_parent\nimport os, time\ndie_with_parent(os.getppid())\n"
             "open({ready!r}, 'w').close()\ntime.sleep(60)\n").format(ready=str(tmp_path / "ready"))
    parent = ("import subprocess, sys, time, os\n"
              f"child = subprocess.Popen([sys.executable, '-c', {child!r}], stdout=subprocess.DEVNULL,\n"
              "                         stderr=subprocess.DEVNULL)\n"
              f"while not os.path.exists({str(tmp_path / 'ready')!r}):\n    time.sleep(0.01)\n"
              "print(child.pid, flush=True)\nos._exit(0)\n")
    done = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    child_pid = int(done.stdout)
    try:
        assert _wait_gone(child_pid), "the child outlived its parent"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child_pid, signal.SIGKILL)


def test_a_server_closed_restarted_failed_or_dropped_leaves_no_descriptor_open():
    # A process may start many (explain, the workers' driver, a script's Tuners): each pipe left open is a
    # descriptor lost for good, and a server dropped unclosed would run on, waiting for calls.
    from autotune._forkserver import ServerFailed

    gc.collect()  # another test's file left to the collector is not closed midway through this one
    before = set(os.listdir("/proc/self/fd"))
    server = ForkServer()
    server.start()
    server.wait_ready()
    server._process.kill()  # died between calls: started afresh, its old pipe closed
    server._process.wait(timeout=30)
    server.start()
    server.wait_ready()
    server.close()
    failed = ForkServer(["autotune_has_no_such_module"])
    failed.start()
    with pytest.raises(ServerFailed, match="importing autotune_has_no_such_module"):
        failed.wait_ready()
    dropped = ForkServer()
    dropped.start()
    dropped.wait_ready()
    process = dropped._process
    del dropped  # its __del__ closes it
    assert process.wait(timeout=10) == -signal.SIGKILL
    assert set(os.listdir("/proc/self/fd")) - before == set()
    failed.close()


def _workloads_file() -> str:
    import workloads

    return workloads.__file__


def test_a_server_started_in_a_folder_holding_a_workloads_package_serves_autotune_s_own(server, tmp_path,
                                                                                        monkeypatch):
    # `python -m` puts the working directory first: a project's own `workloads` package would be what every trial
    # imports for chmm, ten and the rest.
    root = Path(__file__).resolve().parent.parent
    (tmp_path / "workloads").mkdir()
    (tmp_path / "workloads" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(root))  # the tests' own package, whose function the call runs
    found = server.call(_workloads_file, (), timeout=60)[0]  # the server starts here, in this folder
    assert Path(found) == root / "workloads" / "__init__.py"


def _interrupted() -> str:
    os.kill(os.getpid(), signal.SIGINT)
    return "ran on"


def test_a_call_s_process_ignores_ctrl_c_which_is_the_tuner_s_to_handle(server):
    # The tuner stops a trial itself (its whole group killed, the trial recorded as lost); an interrupt that
    # reached the trial would end it as a KeyboardInterrupt's traceback, an error of its config.
    assert server.call(_interrupted, (), timeout=60)[0] == "ran on"


def _unended_lines() -> str:
    print("to stdout, no newline", end="")
    print("to stderr, no newline", end="", file=sys.stderr)
    return "done"


def test_what_a_call_printed_without_a_newline_is_written_before_its_process_leaves(server, capfd):
    # A trial's process leaves by os._exit, which skips Python's buffers: a workload's last words (a progress line
    # ended by "\r", an error printed before it returned) would be lost. Buffered as a terminal-less run buffers them
    # (conftest's buffered_as_ci).
    assert server.call(_unended_lines, (), timeout=60)[0] == "done"  # started here: it writes to captured fds
    err = capfd.readouterr().err
    assert "to stdout, no newline" in err and "to stderr, no newline" in err


def test_a_server_and_the_trial_it_runs_die_with_the_client_that_started_them():
    # Else a search SIGKILLed mid-trial (the OOM killer, a stop of its worker) would leave its fork server waiting on
    # the trial, and the trial, in a session of its own, running on: a core or a GPU held for a result nobody reads.
    client = ("import os, threading, time\nimport psutil\nfrom autotune._forkserver import ForkServer\n"
              "server = ForkServer()\nserver.start()\nserver.wait_ready()\n"
              "threading.Thread(target=server.call, args=(time.sleep, (60,), 120), daemon=True).start()\n"
              "process = psutil.Process(server._process.pid)\n"
              "while not process.children():\n    time.sleep(0.01)\n"
              "print(process.pid, process.children()[0].pid, flush=True)\nos._exit(0)\n")
    done = subprocess.run([sys.executable, "-c", client], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    server, trial = (int(pid) for pid in done.stdout.split())
    try:
        assert _wait_gone(server), "the server outlived its client"
        assert _wait_gone(trial), "the trial outlived its server"
    finally:
        for pid in (server, trial):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_signals_are_named_and_an_exit_status_said_as_one():
    assert (signal_name(9), signal_name(15), signal_name(99)) == ("SIGKILL", "SIGTERM", "signal 99")
    assert (_from_signal(-9), _from_signal(1), _from_signal(0)) == (" from SIGKILL", " (exit status 1)",
                                                                     " (exit status 0)")
    gone = subprocess.Popen(["true"], start_new_session=True)
    gone.wait(timeout=30)
    kill_group(gone.pid)  # already gone: quiet


def test_a_results_folder_of_a_process_long_gone_is_removed_and_no_other(tmp_path, monkeypatch):
    # A killed search (SIGKILL, the OOM killer) never ran the finaliser that removes its own: 43 empty folders were
    # left in /tmp in a day of this project's tests. Each is named by its process now; a process gone for an hour
    # (past ORPHAN_SECONDS: one of another PID namespace may only look gone) has its folder removed by the next.
    import subprocess
    import tempfile

    from autotune._forkserver import ORPHAN_SECONDS, results_folder

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait(timeout=30)
    old = time.time() - ORPHAN_SECONDS - 60
    folders = {name: tmp_path / name for name in (f"autotune-{gone.pid}-abc", f"autotune-{gone.pid}-new",
                                                  f"autotune-{os.getpid()}-live", "autotune-workers-x", "other-1-x")}
    for name, folder in folders.items():
        folder.mkdir()
        (folder / "result.pickle").write_bytes(b"")
        if not name.endswith("-new"):
            os.utime(folder, (old, old))
    made = results_folder()
    try:
        assert Path(made.name).name.startswith(f"autotune-{os.getpid()}-")
        assert {name for name, folder in folders.items() if folder.exists()} == set(folders) - {
            f"autotune-{gone.pid}-abc"}
    finally:
        made.cleanup()
