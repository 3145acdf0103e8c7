from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
BROKEN = f"{TESTS / 'workloads' / 'broken.py'}:BrokenWorkload"
FAST_MEASURER = {"min_time": 0.05, "min_runs": 3, "max_warmup_runs": 2}


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


def run_cli(*args: str, cwd: Path, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m autotune ARGS` in `cwd`, as a user would run it."""
    environment = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args], cwd=cwd, env=environment,
        capture_output=True, text=True, timeout=timeout,
    )
