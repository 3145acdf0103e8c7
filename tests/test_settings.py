"""Search settings: made once from the options, handed to workers as JSON without the storage."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.settings import SearchSettings

ROOT = Path(__file__).resolve().parent.parent


def test_settings_round_trip_through_json_without_the_storage(tmp_path):
    settings = SearchSettings("chmm", "cpu", "tiny", storage="postgresql://u:secret@h/db", threads=1, seed=7,
                              memory_budget_bytes=2**30, time_budget=30.0, quiet=True)
    path = settings.write(tmp_path / "settings.json")
    assert "secret" not in path.read_text() and "storage" not in json.loads(path.read_text())
    assert SearchSettings.read(path, storage=settings.storage) == settings


def test_a_worker_seed_is_offset_by_its_index():
    tuner = SearchSettings("chmm", "cpu", "tiny", seed=7, studies="/nonexistent").tuner(worker_index=2)
    try:
        assert tuner.seed == 9 and tuner.threads is None
    finally:
        tuner.close()


@pytest.mark.parametrize("module", [
    "autotune", "autotune.cli", "autotune.config", "autotune.console", "autotune.export", "autotune.loop",
    "autotune.report", "autotune.runner", "autotune.selection", "autotune.settings", "autotune.shared_study",
    "autotune.space", "autotune.trials", "autotune.tuner", "autotune.workload", "autotune.workers",
    "autotune._worker",
])
def test_each_module_imports_alone_in_a_fresh_interpreter(module):
    done = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_no_module_of_the_package_is_over_about_500_lines():
    # The workloads are long by nature; the package's modules each hold one stage.
    sizes = {p.name: len(p.read_text().splitlines()) for p in (ROOT / "autotune").glob("*.py")}
    assert max(sizes.values()) <= 500, sizes
