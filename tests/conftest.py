from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

TESTS = Path(__file__).resolve().parent
BROKEN = f"{TESTS / 'workloads' / 'broken.py'}:BrokenWorkload"
#: The recorded GPU space kept out of choosing a strategy (benchmarks/held_out/README.md).
HELD_OUT = TESTS.parent / "benchmarks" / "held_out" / "convolution_RTX_2080_Ti.json.gz"
FAST_MEASURER = {"min_time": 0.05, "min_runs": 3, "max_warmup_runs": 2}


@pytest.fixture(scope="session", autouse=True)
def numba_compiles_once(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One numba cache for the whole run. A trial's process compiles chmm's numba kernels into its studies'
    cache (autotune.runner sets NUMBA_CACHE_DIR where it is unset), and every test has studies of its own: each
    numba trial compiled afresh, 3 s a signature on 2 cores. Nothing a test checks is a first run's time."""
    if "NUMBA_CACHE_DIR" not in os.environ:
        os.environ["NUMBA_CACHE_DIR"] = str(tmp_path_factory.mktemp("numba"))


@pytest.fixture(scope="session", autouse=True)
def threads_as_the_machine_has() -> Iterator[None]:
    """No $OMP_NUM_THREADS from the shell: a trial's threads default to it (as torch's do), and the tests count on the
    cores this process may use (a cluster's OMP_NUM_THREADS=1 failed them); a test that needs it sets it."""
    asked = os.environ.pop("OMP_NUM_THREADS", None)
    yield
    if asked is not None:
        os.environ["OMP_NUM_THREADS"] = asked


@pytest.fixture(scope="session", autouse=True)
def buffered_as_ci() -> Iterator[None]:
    """No $PYTHONUNBUFFERED from the shell (this machine's sets it; CI's does not): unbuffered, every process this
    run starts writes each line at once, so no test could fail where autotune forgets a flush (a fork-server
    child's before os._exit, stdout's drop to /dev/null after a failed write): three such mutants passed every test."""
    asked = os.environ.pop("PYTHONUNBUFFERED", None)
    yield
    if asked is not None:
        os.environ["PYTHONUNBUFFERED"] = asked


def load_benchmark(name: str):
    """A script of benchmarks/ imported as a module (they are scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, TESTS.parent / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def readme_example(tmp_path: Path) -> Path:
    """The README's `distances.py` and `distances.yaml` ("Adding a workload"), written as a user would save them."""
    import re

    readme = (TESTS.parent / "README.md").read_text()
    start = readme.index("A whole workload, the distances between two sets of points")
    code, space = re.findall(r"```(?:python|yaml)\n(.*?)```", readme[start:], re.S)[:2]
    assert "class DistancesWorkload(Workload):" in code and space.startswith("schema_version: 1\n")
    (tmp_path / "distances.py").write_text(code)
    (tmp_path / "distances.yaml").write_text(space)
    return tmp_path


@pytest.fixture
def studies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh studies directory, also the working directory, so nothing lands in the checkout."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "studies"
    monkeypatch.setenv("AUTOTUNE_STUDIES", str(path))
    return path


@pytest.fixture(scope="module")
def runner():
    from autotune.runner import Runner

    runner = Runner(timeout=60)
    yield runner
    runner.close()


@pytest.fixture(scope="session")
def benches(tmp_path_factory):
    """``benches(name)``: one in-process bench per workload for the whole run (its reference made once)."""
    from tests.mutants.harness import Bench

    made: dict = {}

    def bench(name: str):
        if name not in made:
            made[name] = Bench.open(name, cache_dir=tmp_path_factory.mktemp(f"bench-{name}"))
        return made[name]

    return bench


def cpu_with_bf16():
    """The CPU profile with bfloat16, which this CPU only emulates: checks must hold wherever bf16 runs."""
    from dataclasses import replace

    from autotune.devices import PROFILES

    return replace(PROFILES["cpu"], capabilities=PROFILES["cpu"].capabilities | {"bf16"})


def run_cli(*args: str, cwd: Path, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m autotune ARGS` in `cwd`, as a user would run it."""
    environment = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args], cwd=cwd, env=environment,
        capture_output=True, text=True, timeout=timeout,
    )


def fresh_process_json(script: str, *, cwd: Path | None = None, env: dict | None = None, timeout: float = 120):
    """What ``script``, run in a fresh interpreter, prints as JSON on its last line (it must exit 0): for what
    this test process, with torch and the workloads already imported, cannot show."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def _as_from_a_terminal() -> None:
    import signal

    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def stop_when_said(args: list[str], said: str, *, cwd: Path, env: dict | None = None,
                   timeout: float = 120, signum: int | None = None) -> tuple[int, str, str]:
    """`python -m autotune ARGS`, sent SIGTERM (or ``signum``) once its stderr says ``said`` (as a scheduler or a
    deadline stops it); its exit status, stdout and stderr. Its stderr goes to a file, which nobody has to read while
    it runs, so a full pipe cannot block it."""
    import signal
    import time

    errors = cwd / f"stderr-{os.getpid()}-{time.monotonic_ns()}.txt"
    with open(errors, "w") as err:
        # As a terminal starts it: run from `nohup` (a mutation run), it would inherit SIGHUP ignored, and
        # rightly ignore it (`nohup autotune search`), and SIGINT too, as a background job does.
        child = subprocess.Popen([sys.executable, "-m", "autotune", *args], cwd=cwd, env={**os.environ, **(env or {})},
                                 stdout=subprocess.PIPE, stderr=err, text=True, preexec_fn=_as_from_a_terminal)
    try:
        deadline = time.time() + timeout
        while time.time() < deadline and child.poll() is None and said not in errors.read_text():
            time.sleep(0.05)
        child.send_signal(signal.SIGTERM if signum is None else signum)
        stdout, _ = child.communicate(timeout=60)
    finally:
        child.kill()
    return child.returncode, stdout, errors.read_text()


def until(condition, seconds: float = 10.0) -> bool:
    """Wait for ``condition`` (a thread's or a process's work, on a machine that may be busy); whether it came."""
    deadline = time.time() + seconds
    while not condition() and time.time() < deadline:
        time.sleep(0.01)
    return condition()


def wait_or_kill(process: subprocess.Popen, timeout: float, tag: str | None = None) -> int:
    """Wait for a process; past the timeout, kill it (and the processes tagged ``tag``) and fail the test.

    A hung search must fail its one test, not hold CI until its limit.
    """
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)
        for child in tagged_processes(tag) if tag else []:
            child.kill()
        pytest.fail(f"{process.args!r} did not finish within {timeout} s; killed")


def tagged_processes(tag: str) -> list:
    """Processes whose environment carries AUTOTUNE_TEST_TAG=tag: what a test started and must not leave running."""
    import psutil

    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("AUTOTUNE_TEST_TAG") == tag:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _postgres_bin() -> Path | None:
    """The directory of PostgreSQL's server programs: on PATH, else Debian's /usr/lib/postgresql/<version>/bin."""
    import shutil

    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return versions[-1].parent if versions else None


@contextlib.contextmanager
def _postgres_server():
    """A real PostgreSQL server on loopback, initialised into a temporary directory: yields (url, stop).

    Its URL carries a password, so tests can check that it never leaks. As
    root (CI containers), the server runs as the `postgres` user that Debian's
    package creates, since PostgreSQL refuses to run as root.
    """
    import pwd
    import shutil
    import socket
    import tempfile

    bin_dir = _postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (.ci/run installs Debian's postgresql package)")
    # Not under pytest's own temporary directory: that one is private to root, and the server may run as postgres.
    root = Path(tempfile.mkdtemp(prefix="autotune-postgres-"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    prefix: list[str] = []
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        for path in (root, sockets):
            os.chown(path, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    def run(*command: str) -> None:
        subprocess.run([*prefix, *command], check=True, capture_output=True, timeout=120)

    def stop() -> None:
        subprocess.run([*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)

    run(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "autotune", "--no-sync")
    run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w", "-o",
        f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", "start")
    try:
        run(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "autotune", "autotune")
        # The README's form, with no driver named: autotune picks the installed one.
        yield f"postgresql://autotune:s3cret-pw@127.0.0.1:{port}/autotune", stop
    finally:
        stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url():
    """One PostgreSQL server for the test session (see :func:`_postgres_server`)."""
    with _postgres_server() as (url, _):
        yield url
