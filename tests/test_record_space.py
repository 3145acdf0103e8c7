"""benchmarks/record_space.py: a conditional space enumerated once per config, written as a cache autotune reads back."""

import pytest

from autotune.recorded import load_recorded
from autotune.runner import TrialResult
from autotune.settings import SearchSettings
from autotune.space import SearchSpace
from tests.conftest import load_benchmark


def _module():
    return load_benchmark("record_space")


SPACE = {
    "schema_version": 1,
    "parameters": {
        "kind": {"choices": ["loop", "scan"]},
        "chunk": {"type": "int", "low": 8, "high": 64, "log": True, "condition": "kind == 'scan'"},
        "unroll": {"type": "int", "low": 1, "high": 100, "condition": "kind == 'loop'"},
        "fast": {"choices": [False, True]},
    },
    "constraints": ["kind == 'loop' or not fast or chunk >= 16"],
    "defaults": {"kind": "loop", "chunk": 24, "unroll": 1, "fast": False},
    "baseline": {},
}


def test_every_allowed_config_once_with_unused_knobs_at_their_default():
    record = _module()
    space = SearchSpace.from_dict(SPACE)
    grids, configs = record.configs(space)
    # A log range on powers of two, plus the default; a linear one on at most 8 points.
    assert grids["chunk"] == [8, 16, 24, 32, 64]
    assert len(grids["unroll"]) == 8 and grids["unroll"][0] == 1 and grids["unroll"][-1] == 100
    keys = [c.key for c in configs]
    assert len(keys) == len(set(keys))
    loops = [c for c in configs if c["kind"] == "loop"]
    scans = [c for c in configs if c["kind"] == "scan"]
    assert len(loops) == 8 * 2 and all(c["chunk"] == 24 for c in loops)
    # chunk=8 with fast=True breaks the constraint: 5 chunks x 2 speeds, less one.
    assert len(scans) == 5 * 2 - 1 and all(c["unroll"] == 1 for c in scans)
    assert all(space.violated(c) is None for c in configs)


def test_the_cache_reads_back_as_a_recorded_space_with_failures(tmp_path):
    record = _module()
    space = SearchSpace.from_dict(SPACE)
    grids, configs = record.configs(space)
    cache = {}
    for index, config in enumerate(configs):
        if index == 1:
            result = TrialResult(status="incorrect", config=dict(config), check={"message": "too far"})
        else:
            result = TrialResult(status="ok", config=dict(config), items_per_run=10, throughput=100.0 + index,
                                 times=[0.1, 0.1], wall_seconds=1.5)
        cache[",".join(str(config[name]) for name in grids)] = record.entry(config, result)
    missing = configs[2]  # a config the file lacks breaks a restriction
    del cache[",".join(str(missing[name]) for name in grids)]
    out = tmp_path / "space.json.gz"
    record.write(out, SearchSettings("chmm", "cpu", "tiny"), "cpu", grids, cache, record.space_of(space, grids))
    recorded = load_recorded(out)
    assert len(recorded.entries) == len(configs) - 1
    # Read back as the conditional space it was: every recorded config allowed, the baseline first.
    assert all(recorded.space.violated(c) is None for c in configs if c is not missing)
    assert recorded.space.violated(missing) is not None
    assert recorded.space.baseline == space.baseline
    assert recorded.space.is_active("chunk", {"kind": "scan"}) and not recorded.space.is_active("chunk", {"kind": "loop"})
    assert recorded.result(configs[1]).status == "error"
    assert recorded.objective_of(recorded.result(configs[0])) == pytest.approx(1000 / 100.0)
    assert recorded.optimum == pytest.approx(1000 / (100.0 + len(configs) - 1))
    # An unused knob is no part of a config: moving it names the same recorded config.
    moved = dict(configs[0], chunk=64) if configs[0]["kind"] == "loop" else dict(configs[0], unroll=100)
    assert recorded.space.violated(recorded.space.complete(moved)) is None


def test_a_value_left_out_is_in_no_config():
    record = _module()
    grids, configs = record.configs(SearchSpace.from_dict(SPACE), {"fast": [True]})
    assert grids["fast"] == [False] and all(not c["fast"] for c in configs)
