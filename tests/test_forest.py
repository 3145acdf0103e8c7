"""The forest strategy: its model learns thresholds, and its searches measure allowed, unmeasured configs only."""

import itertools
import json

import numpy as np
import pytest

from autotune.forest import Forest, ForestSampler, _list_configs, expected_improvement
from autotune.recorded import load_recorded
from autotune.simulate import score, simulate
from autotune.space import SearchSpace


def test_the_forest_learns_a_threshold_and_an_interaction():
    rng = np.random.default_rng(0)
    features = rng.random((80, 3))
    # Slow unless x0 > 0.7 and x1 < 0.3; x2 is noise-free but irrelevant.
    targets = np.where((features[:, 0] > 0.7) & (features[:, 1] < 0.3), 0.0, 1.0)
    mean, spread = Forest(features, targets, rng).predict(np.array([[0.9, 0.1, 0.5], [0.9, 0.9, 0.5], [0.1, 0.1, 0.5]]))
    assert mean[0] < 0.2 and mean[1] > 0.8 and mean[2] > 0.8
    assert (spread >= 0).all()


def test_expected_improvement_prefers_low_means_and_wide_spreads():
    gain = expected_improvement(np.array([0.0, 1.0, 1.0, 2.0]), np.array([0.1, 0.1, 1.0, 0.1]), best=1.0)
    assert gain[0] > gain[2] > gain[1] > gain[3] >= 0


def _cache(tmp_path):
    """An 8x8x4 space: slow but for a corner (a threshold in two knobs) that leads to the optimum, a diagonal
    restricted, a row failed."""
    cache = {}
    xs, ys, zs = [1, 2, 4, 8, 16, 32, 64, 128], list(range(8)), ["a", "b", "c", "d"]
    for x, y, z in itertools.product(xs, ys, zs):
        if xs.index(x) == y:
            continue  # restricted: absent from the file
        time = 10.0 - 4.0 * (x >= 32 and y <= 2) - 2.0 * (x == 128 and y == 0) + 0.5 * zs.index(z) + 0.01 * y
        if y == 5 and z == "d":
            time = "RuntimeFailedConfig"
        cache[f"{x},{y},{z}"] = {"x": x, "y": y, "z": z, "time": time}
    data = {"device_name": "test GPU", "kernel_name": "corner", "objective": "time", "tune_params_keys": ["x", "y", "z"],
            "tune_params": {"x": xs, "y": ys, "z": zs}, "cache": cache}
    path = tmp_path / "corner.json"
    path.write_text(json.dumps(data))
    return load_recorded(path)


def test_a_forest_search_measures_each_allowed_config_once_and_finds_the_corner(tmp_path):
    recorded = _cache(tmp_path)
    scores = {}
    for sampler in ("forest", "random"):
        scores[sampler] = []
        for seed in range(6):
            repeat = simulate(recorded, 25, seed=seed, sampler=sampler)
            assert repeat.evaluations == 25  # restricted configs are never evaluated; repeats are not counted
            scores[sampler].append(score(recorded, repeat.best_so_far, 25))
    again = simulate(recorded, 25, seed=0, sampler="forest")
    assert again.best_so_far == simulate(recorded, 25, seed=0, sampler="forest").best_so_far  # deterministic
    # 1 config of 224 is the optimum; in 25 evaluations the forest finds it or its neighbours where random does not.
    assert np.mean(scores["forest"]) > 0.7 and np.mean(scores["forest"]) > np.mean(scores["random"]) + 0.3, scores


def test_every_allowed_config_is_listed_once_with_conditions_and_constraints():
    space = SearchSpace.from_dict({
        "schema_version": 1, "workload": "w",
        "parameters": {"kernel": {"choices": ["loop", "scan"]},
                       "chunk": {"choices": [1, 2, 4], "condition": "kernel == 'scan'"},
                       "batch": {"choices": [1, 2, 4]}},
        "constraints": ["batch <= 2 or kernel == 'scan'"],
        "defaults": {"kernel": "loop", "chunk": 1, "batch": 1}, "baseline": {},
    })
    listed = _list_configs(space, 100)
    keys = [c.key for c in listed]
    assert len(keys) == len(set(keys)) == 2 + 3 * 3  # loop: batch 1, 2 (chunk inactive); scan: 3 chunks x 3 batches
    assert all(space.violated(c) is None for c in listed)
    assert _list_configs(space, 5) is None  # over the limit: the sampler draws a pool instead
    features = ForestSampler(space, seed=0)._features(listed)
    loop = [i for i, c in enumerate(listed) if c["kernel"] == "loop"]
    assert (features[loop, 1] == -1).all() and features.min() >= -1 and features.max() <= 1


def test_the_sampler_answers_optunas_asks_and_never_repeats_a_measured_config():
    import optuna

    space = SearchSpace.from_dict({
        "schema_version": 1, "workload": "w",
        "parameters": {"a": {"choices": [1, 2, 3, 4]}, "b": {"choices": [1, 2, 3, 4]}},
        "defaults": {"a": 1, "b": 1}, "baseline": {"a": 1, "b": 1},
    })
    study = optuna.create_study(direction="maximize", sampler=ForestSampler(space, seed=1))
    seen = []
    for _ in range(12):
        trial = study.ask()
        config = space.suggest(trial)
        seen.append(config.key)
        throughput = float(config["a"] * config["b"])
        for key, value in {"config": config.to_dict(), "status": "ok", "throughput": throughput}.items():
            trial.set_user_attr(key, value)
        study.tell(trial, throughput)
    assert len(set(seen)) == len(seen)
    assert space.complete({"a": 4, "b": 4}).key in seen  # the best of 16, within 12 asks
