"""benchmarks/landscape.py: how many configs reach a score, and the chance that random draws include one."""

from __future__ import annotations

import json

import pytest

from autotune.recorded import load_recorded
from tests.conftest import load_benchmark


def test_configs_reaching_a_score_and_the_chance_random_draws_include_one(tmp_path):
    # Four configs of 10/x ms: 10, 5, 2.5 and the optimum 1.25. Of the 6 pairs drawn at random, 3 hold the optimum
    # and 2 more hold 2.5, so b(2) = (3 * 1.25 + 2 * 2.5 + 5) / 6 = 2.2917.
    cache = {str(x): {"x": x, "time": 10 / x} for x in (1, 2, 4, 8)}
    path = tmp_path / "four.json"
    path.write_text(json.dumps({"tune_params_keys": ["x"], "tune_params": {"x": [1, 2, 4, 8]}, "objective": "time",
                                "cache": cache}))
    reaching = load_benchmark("landscape").reaching(load_recorded(path), m=2, scores=(0.5, -0.3))
    # 0.5: at most 2.2917 - 0.5 * 1.0417 = 1.77 ms, the optimum alone; 2 draws of 4 include it with chance 1 - 3/6.
    assert reaching[0.5]["configs"] == 1 and reaching[0.5]["chance"] == pytest.approx(0.5)
    # -0.3 (worse than random on average): at most 2.2917 + 0.3 * 1.0417 = 2.60 ms, two configs; a pair misses both
    # once in 6.
    assert reaching[-0.3]["configs"] == 2 and reaching[-0.3]["chance"] == pytest.approx(5 / 6)
