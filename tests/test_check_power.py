"""benchmarks/check_power.py on a workload of one's own: the README's `distances`, as a user saves it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.test_adding_a_workload import example  # noqa: F401 - the README's distances.py and .yaml, saved

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def check_power():
    spec = importlib.util.spec_from_file_location("check_power", ROOT / "benchmarks" / "check_power.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_workload_of_one_s_own_is_swept_and_held_to_the_control(check_power, example):  # noqa: F811
    # It took built-ins alone ("invalid choice"), though the README asks a user to show their check's power.
    rows = check_power.measure(f"{example / 'distances.py'}:DistancesWorkload", seeds=3)
    assert [row["precision"] for row in rows] == ["float64", "float32"]
    for row in rows:
        # One data seed (its size has no seed), every method of the sweep honest, each wrong copy far past its bound.
        assert row["honest_runs"] == 3 and row["honest_binding_ratio"] < 1 and row["wrong_copy_ratio"] > 100
        assert (row["caught"], row["planted"]) == (0, 0)  # none planted here: plant them as tests/mutants does
    assert "| none planted | 0 / 0 |" in check_power.markdown(rows)
