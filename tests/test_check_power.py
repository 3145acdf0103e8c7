"""benchmarks/check_power.py on a workload of one's own: the README's `distances`, as a user saves it."""

from __future__ import annotations

from tests.conftest import load_benchmark


def test_a_workload_of_one_s_own_is_swept_and_held_to_the_control(readme_example):
    # It took built-ins alone ("invalid choice"), though the README asks a user to show their check's power.
    check_power = load_benchmark("check_power")
    rows = check_power.measure(f"{readme_example / 'distances.py'}:DistancesWorkload", seeds=3)
    assert [row["precision"] for row in rows] == ["float64", "float32"]
    for row in rows:
        # One data seed (its size has no seed), every method of the sweep honest, each wrong copy far past its bound.
        assert row["honest_runs"] == 3 and row["honest_binding_ratio"] < 1 and row["wrong_copy_ratio"] > 100
        assert (row["caught"], row["planted"]) == (0, 0)  # none planted here: plant them as tests/mutants does
    assert "| none planted | 0 / 0 |" in check_power.markdown(rows)
