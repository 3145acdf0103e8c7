"""What the model strategies share (autotune.surrogate): the space listed with its rules, each config's features,
and searches that measure allowed, unmeasured configs only and find what the model can learn."""

import itertools
import json

import numpy as np
import pytest

from autotune.forest import ForestSampler
from autotune.linear import LinearSampler
from autotune.recorded import load_recorded
from autotune.simulate import score, simulate
from autotune.space import SearchSpace
from autotune.surrogate import Knob, ModelSampler, list_configs

XS, YS, ZS = [1, 2, 4, 8, 16, 32, 64, 128], list(range(8)), ["a", "b", "c", "d"]


def _recorded(tmp_path, name, time_of):
    """An 8x8x4 recorded space with a diagonal restricted (absent from the file), timed by ``time_of(x, y, z)``."""
    cache = {f"{x},{y},{z}": {"x": x, "y": y, "z": z, "time": time_of(x, y, z)}
             for x, y, z in itertools.product(XS, YS, ZS) if XS.index(x) != y}
    data = {"device_name": "test GPU", "kernel_name": name, "objective": "time", "tune_params_keys": ["x", "y", "z"],
            "tune_params": {"x": XS, "y": YS, "z": ZS}, "cache": cache}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return load_recorded(path)


def _cache(tmp_path):
    """Slow but for a corner (a threshold in two knobs) that leads to the optimum; a row failed."""
    def time_of(x, y, z):
        if y == 5 and z == "d":
            return "RuntimeFailedConfig"
        return 10.0 - 4.0 * (x >= 32 and y <= 2) - 2.0 * (x == 128 and y == 0) + 0.5 * ZS.index(z) + 0.01 * y

    return _recorded(tmp_path, "corner", time_of)


def _trend_cache(tmp_path):
    """Faster along two knobs' values and with one pair of values (the linear model's terms): the fastest
    config lies at the end of both trends, with the pair."""
    return _recorded(tmp_path, "trends", lambda x, y, z: 10.0 - 0.6 * XS.index(x) - 0.3 * y
                     - 2.0 * (z == "c" and y >= 6) + 0.1 * ZS.index(z))


# What each model is built to learn: the forest a corner (thresholds in two knobs), the linear model trends and a pair.
# linear-tpe gives TPE every other trial, so in 25 evaluations its model plans fewer than 8 (0.54 over 6 seeds).
@pytest.mark.parametrize(("strategy", "space", "floor"), [("forest", _cache, 0.7), ("linear", _trend_cache, 0.7),
                                                          ("linear-tpe", _trend_cache, 0.4)])
def test_a_model_search_measures_each_allowed_config_once_and_finds_the_best(tmp_path, strategy, space, floor):
    recorded = space(tmp_path)
    scores = {}
    for sampler in (strategy, "random"):
        scores[sampler] = []
        for seed in range(6):
            repeat = simulate(recorded, 25, seed=seed, sampler=sampler)
            assert repeat.evaluations == 25  # restricted configs are never evaluated; repeats are not counted
            scores[sampler].append(score(recorded, repeat.best_so_far, 25))
    again = simulate(recorded, 25, seed=0, sampler=strategy)
    assert again.best_so_far == simulate(recorded, 25, seed=0, sampler=strategy).best_so_far  # deterministic
    # 1 config of 224 is the optimum; in 25 evaluations the model finds it or its neighbours where random does not.
    assert np.mean(scores[strategy]) > floor and np.mean(scores[strategy]) > np.mean(scores["random"]) + 0.3, scores


def test_every_allowed_config_is_listed_once_with_conditions_and_constraints():
    space = SearchSpace.from_dict({
        "schema_version": 1, "workload": "w",
        "parameters": {"kernel": {"choices": ["loop", "scan"]},
                       "chunk": {"choices": [1, 2, 4], "condition": "kernel == 'scan'"},
                       "batch": {"choices": [1, 2, 4]}},
        "constraints": ["batch <= 2 or kernel == 'scan'"],
        "defaults": {"kernel": "loop", "chunk": 1, "batch": 1}, "baseline": {},
    })
    listed = list_configs(space, 100)
    keys = [c.key for c in listed]
    assert len(keys) == len(set(keys)) == 2 + 3 * 3  # loop: batch 1, 2 (chunk inactive); scan: 3 chunks x 3 batches
    assert all(space.violated(c) is None for c in listed)
    assert list_configs(space, 5) is None  # over the limit: the sampler draws a pool instead
    features = ModelSampler(space, seed=0, startup=1).features(listed)
    loop = [i for i, c in enumerate(listed) if c["kernel"] == "loop"]
    assert (features[loop, 1] == -1).all() and features.min() >= -1 and features.max() <= 1


@pytest.mark.parametrize("sampler", [ForestSampler, LinearSampler])
def test_the_sampler_answers_optunas_asks_and_never_repeats_a_measured_config(sampler):
    space = SearchSpace.from_dict({
        "schema_version": 1, "workload": "w",
        "parameters": {"a": {"choices": [1, 2, 3, 4]}, "b": {"choices": [1, 2, 3, 4]}},
        "defaults": {"a": 1, "b": 1}, "baseline": {"a": 1, "b": 1},
    })
    asked = _asked(sampler(space, seed=1, startup=5), space, 12, lambda i, config: ("ok", config["a"] * config["b"]))
    seen = [config.key for config in asked]
    assert len(set(seen)) == len(seen)
    assert space.complete({"a": 4, "b": 4}).key in seen  # the best of 16, within 12 asks


def test_each_knob_is_read_as_what_it_is_and_placed_in_zero_to_one():
    space = SearchSpace.from_dict({
        "schema_version": 1, "workload": "w",
        "parameters": {"tile": {"choices": [16, 1, 4, 64]}, "method": {"choices": ["c", "a", "b"]},
                       "pinned": {"choices": [True, False]}, "fixed": {"choices": [2]},
                       "rate": {"type": "float", "low": 0.001, "high": 0.1, "log": True},
                       "width": {"type": "int", "low": 2, "high": 10}, "one": {"type": "int", "low": 4, "high": 4}},
        "defaults": {"tile": 16, "method": "c", "pinned": True, "fixed": 2, "rate": 0.01, "width": 2, "one": 4},
        "baseline": {},
    })
    sampler = ModelSampler(space, seed=0)
    # Numbers have trends; names and flags do not; a range has no list of values; a single choice is no knob.
    assert sampler.knobs == [Knob(4, True), Knob(3, False), Knob(2, False)] + [Knob(None, True)] * 3
    config = space.complete({"tile": 4, "method": "a", "pinned": False, "rate": 0.01, "width": 6})
    top = space.complete({"tile": 64, "method": "b", "pinned": True, "rate": 0.1, "width": 10})
    # Sorted numbers, declared names; a log range's middle on the log scale (0.01 of 0.001 .. 0.1), an int range's;
    # a range of one value at its start (not 0/0).
    assert np.allclose(sampler.features([config, top]),
                       [[1 / 3, 0.5, 1.0, 0.5, 0.5, 0.0], [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]])


def test_a_space_is_listed_up_to_its_limit_exactly_and_not_at_all_with_a_range():
    space = SearchSpace.from_dict({
        "schema_version": 1, "workload": "w",
        "parameters": {"a": {"choices": [1, 2, 3]}, "b": {"choices": [1, 2, 3, 4]}},
        "defaults": {"a": 1, "b": 1}, "baseline": {},
    })
    assert len(list_configs(space, 12)) == 12 and list_configs(space, 11) is None
    ranged = SearchSpace.from_dict({
        "schema_version": 1, "workload": "w",
        "parameters": {"a": {"choices": [1, 2]}, "b": {"type": "int", "low": 1, "high": 2}},
        "defaults": {"a": 1, "b": 1}, "baseline": {},
    })
    assert list_configs(ranged, 100) is None


def test_a_space_that_cannot_be_listed_is_a_pool_of_allowed_configs_drawn_anew(monkeypatch):
    import autotune.surrogate

    monkeypatch.setattr(autotune.surrogate, "POOL", 40)
    space = SearchSpace.from_dict({
        "schema_version": 1, "workload": "w",
        "parameters": {"a": {"choices": [1, 2, 3, 4]}, "rate": {"type": "float", "low": 0.0, "high": 1.0}},
        "constraints": ["a * rate <= 1"], "defaults": {"a": 1, "rate": 0.5}, "baseline": {},
    })
    sampler = ModelSampler(space, seed=0)
    configs, features = sampler._candidates()
    assert len(configs) == len(features) == 40 and all(space.violated(c) is None for c in configs)
    assert {c["a"] for c in configs} == {1, 2, 3, 4}
    assert {c.key for c in sampler._candidates()[0]} != {c.key for c in configs}  # a fresh pool at each ask


class _Recording(ModelSampler):
    """Plans the first candidate, and notes how many configs were measured and their log times at each plan."""

    STARTUP = 3

    def __init__(self, space, **kwargs):
        super().__init__(space, **kwargs)
        self.planned: list[tuple[int, list[float]]] = []

    def choose(self, measured, log_seconds, candidates):
        self.planned.append((len(measured), log_seconds.tolist()))
        return 0


def _asked(sampler, space, n, outcome):
    """Asks ``n`` trials and records each as the loop does, with the status and throughput ``outcome(i, config)``
    gives; the configs asked."""
    import optuna

    study = optuna.create_study(direction="maximize", sampler=sampler)
    asked = []
    for i in range(n):
        trial = study.ask()
        config = space.suggest(trial)
        asked.append(config)
        status, throughput = outcome(i, config)
        for key, value in {"config": config.to_dict(), "status": status, "throughput": float(throughput)}.items():
            trial.set_user_attr(key, value)
        study.tell(trial, float(throughput))
    return asked


SMALL = {"schema_version": 1, "workload": "w", "parameters": {"a": {"choices": [1, 2, 3]}, "b": {"choices": [1, 2]}},
         "defaults": {"a": 1, "b": 1}, "baseline": {}}


def test_the_model_plans_once_startup_configs_are_measured_with_a_failure_the_slowest():
    space = SearchSpace.from_dict(SMALL)
    sampler = _Recording(space, seed=0)
    outcomes = [("ok", 2.0), ("error", 8.0), ("ok", 4.0), ("ok", 1.0), ("ok", 1.0)]
    _asked(sampler, space, len(outcomes), lambda i, config: outcomes[i])
    # Random for the first 3 configs; then the model, told log seconds per item, a failure (whatever throughput
    # it carries) as slow as the slowest success so far.
    assert [n for n, _ in sampler.planned] == [3, 4]
    assert sampler.planned[0][1] == pytest.approx([np.log(0.5), np.log(0.5), np.log(0.25)])
    assert sampler.planned[1][1] == pytest.approx([np.log(0.5), 0.0, np.log(0.25), 0.0])


def test_the_model_waits_for_two_successes_and_a_space_measured_whole_is_still_answered():
    space = SearchSpace.from_dict(SMALL)
    sampler = _Recording(space, seed=0)
    outcomes = [("ok", 1.0)] + [("error", 0.0)] * 4 + [("ok", 2.0)] * 3
    asked = _asked(sampler, space, len(outcomes), lambda i, config: outcomes[i])
    assert sampler.planned == []  # 6 configs measured, one success among the first 5: nothing for a model to fit
    assert len({c.key for c in asked[:6]}) == 6 and all(space.validate(c.to_dict()) == c for c in asked[6:])


def test_a_config_the_space_no_longer_allows_teaches_the_model_nothing():
    # A study resumed after its space file dropped a value: its configs of that value are not configs of the space
    # (validating them raises), and the model learns from the others.
    import optuna

    from autotune.surrogate import _outcomes

    study = optuna.create_study(direction="maximize")
    for config, throughput in (({"a": 4, "b": 1}, 8.0), ({"a": 2, "b": 1}, 2.0), ({"a": 3, "b": 2}, 4.0)):
        study.add_trial(optuna.trial.create_trial(value=throughput, user_attrs={
            "config": config, "status": "ok", "throughput": throughput}))
    measured, running = _outcomes(study, SearchSpace.from_dict(SMALL), asking=-1)
    assert [(config.to_dict(), seconds) for config, seconds in measured.values()] == [({"a": 2, "b": 1}, 0.5),
                                                                                     ({"a": 3, "b": 2}, 0.25)]
    assert running == set()
