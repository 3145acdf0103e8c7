"""benchmarks/genetic_replay.py: Kernel Tuner's genetic algorithm replayed on a recorded space."""

from __future__ import annotations

import itertools
import json

import numpy as np

from autotune.recorded import load_recorded
from tests.conftest import load_benchmark


def _space(tmp_path):
    # Two knobs of 6 values; the combinations with x + y > 8 are restricted (absent), one config failed.
    cache = {}
    for x, y in itertools.product(range(6), range(6)):
        if x + y <= 8:
            time = "RuntimeFailedConfig" if (x, y) == (1, 1) else 1 + (x - 4) ** 2 + (y - 3) ** 2
            cache[f"{x},{y}"] = {"x": x, "y": y, "time": time}
    path = tmp_path / "bowl.json"
    path.write_text(json.dumps({"tune_params_keys": ["x", "y"], "tune_params": {"x": list(range(6)), "y": list(range(6))},
                                "objective": "time", "cache": cache}))
    return load_recorded(path)


def test_the_search_evaluates_distinct_recorded_configs_first_config_first_and_repeats_for_a_seed(tmp_path):
    genetic = load_benchmark("genetic_replay")
    codes, losses = genetic.coded(_space(tmp_path))
    assert len(codes) == 33 and np.isnan(losses).sum() == 1
    rows = genetic.search(codes, losses, np.random.default_rng(3), trials=20, population=6)
    assert rows[0] == 0 and len(rows) == len(set(rows)) == 20
    assert all(0 <= row < len(codes) for row in rows)  # a restricted combination has no row: never evaluated
    assert rows == genetic.search(codes, losses, np.random.default_rng(3), trials=20, population=6)


def test_the_search_finds_the_optimum_of_a_smooth_space_and_stops_once_converged(tmp_path):
    genetic = load_benchmark("genetic_replay")
    codes, losses = genetic.coded(_space(tmp_path))
    optimum = int(np.nanargmin(losses))
    # 20 configs of 33: random draws hold the optimum 30 times in 50 on average; the search did in 46 of these 50.
    found = [optimum in genetic.search(codes, losses, np.random.default_rng(seed), trials=20, population=6)
             for seed in range(50)]
    assert sum(found) >= 42
    # Asked for more configs than the space holds, it ends when generations stop bringing new ones.
    assert len(genetic.search(codes, losses, np.random.default_rng(0), trials=1000, population=6)) <= 33


def test_disruptive_crossover_swaps_half_the_knobs_that_differ():
    genetic = load_benchmark("genetic_replay")
    a, b = np.array([0, 1, 2, 3, 4]), np.array([0, 5, 6, 7, 4])
    first, second = genetic._cross(a, b, np.random.default_rng(0), "disruptive")
    assert (first != a).sum() == 2 and (second != b).sum() == 2  # 3 knobs differ: (3 + 1) // 2 swapped
    assert sorted(np.concatenate([first, second])) == sorted(np.concatenate([a, b]))
