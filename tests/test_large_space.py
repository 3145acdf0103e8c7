"""benchmarks/large_space.py: its synthetic cache is a recorded space autotune reads, and it times a real simulate."""

from __future__ import annotations

import pytest

from autotune.recorded import load_recorded
from tests.conftest import load_benchmark


def test_the_synthetic_cache_holds_the_configs_asked_for_with_failures_and_restrictions(tmp_path):
    large_space = load_benchmark("large_space")
    path = tmp_path / "space.json.gz"
    combinations = large_space.write_cache(path, 500)
    recorded = load_recorded(path)
    assert combinations == 2_211_840
    assert len(recorded.entries) == 500
    failed = sum(1 for entry in recorded.entries.values() if recorded.loss_of(entry) is None)
    assert 0 < failed < 100  # about 5%
    assert recorded.optimum < recorded.worst


def test_it_runs_autotune_simulate_and_prints_its_time_and_memory(capsys):
    large_space = load_benchmark("large_space")
    assert large_space.main(["--configs", "300", "--trials", "10", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "300 recorded" in out
    assert "autotune simulate:" in out and "peak memory" in out


def test_too_many_configs_is_a_usage_error():
    large_space = load_benchmark("large_space")
    with pytest.raises(SystemExit) as stop:
        large_space.main(["--configs", "3000000"])
    assert stop.value.code == 2
