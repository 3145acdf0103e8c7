"""benchmarks/record_space.py: a conditional space enumerated once per config, written as a cache autotune reads back."""

import pytest

from autotune.recorded import cache_entry, load_recorded, space_document
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
        cache[",".join(str(config[name]) for name in grids)] = cache_entry(config, result)
    missing = configs[2]  # a config the file lacks breaks a restriction
    del cache[",".join(str(missing[name]) for name in grids)]
    out = tmp_path / "space.json.gz"
    record.write(out, SearchSettings("chmm", "cpu", "tiny"), "cpu", grids, cache, space_document(space, grids))
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


def test_a_cache_entry_holds_ms_per_item_what_measuring_cost_and_why_a_config_failed():
    ok = TrialResult(status="ok", config={"x": 1}, items_per_run=10, throughput=100.0, times=[0.1, 0.2],
                     wall_seconds=1.5)
    assert cache_entry({"x": 1}, ok) == {"x": 1, "time": pytest.approx(10.0), "times": pytest.approx([10.0, 20.0]),
                                         "benchmark_time": 1500.0}
    # A wrong answer keeps the throughput it was measured at (runner.py); recorded, it is a failure, never a time
    # a replay could find best.
    wrong = TrialResult(status="incorrect", config={"x": 1}, items_per_run=10, throughput=500.0, times=[0.02],
                        check={"message": "max error 3e-2, tolerance 1e-3"})
    assert cache_entry({"x": 1}, wrong) == {"x": 1, "time": "IncorrectConfig", "error": "max error 3e-2, tolerance 1e-3",
                                            "benchmark_time": 0.0}
    crash = TrialResult(status="error", config={"x": 1}, error="ValueError: bad", check={"message": "not this"},
                        wall_seconds=0.25)
    assert cache_entry({"x": 1}, crash) == {"x": 1, "time": "RuntimeFailedConfig", "error": "ValueError: bad",
                                            "benchmark_time": 250.0}


def test_a_space_document_keeps_the_baseline_and_the_probes():
    spec = {**FIXED_HERE, "parameters": {**FIXED_HERE["parameters"], "impl": {"choices": ["a", "b"], "probe": True}},
            "defaults": {**FIXED_HERE["defaults"], "impl": "a"}}
    space = SearchSpace.from_dict(spec)
    back = SearchSpace.from_dict(space_document(space, {name: list(p.choices) for name, p in space.parameters.items()}))
    assert back.baseline == space.baseline and back.baseline["batch"] == 4  # what a replay measures first
    assert back.parameters["impl"].probe and not back.parameters["batch"].probe


def test_a_value_left_out_is_in_no_config():
    record = _module()
    grids, configs = record.configs(SearchSpace.from_dict(SPACE), {"fast": [True]})
    assert grids["fast"] == [False] and all(not c["fast"] for c in configs)


def _space_file(folder):
    """SPACE written as a workload's space file, which a study names."""
    import yaml

    path = folder / "toy.yaml"
    path.write_text(yaml.safe_dump(SPACE, sort_keys=False))
    return path


def _study_of(space_file, configs, fate, storage):
    """A study as `search` leaves it: the workload's space file named, each config's figures in its trial."""
    import optuna

    from autotune.config import Config
    from autotune.trials import to_attrs

    study = optuna.create_study(study_name="toy-cpu-tiny", storage=storage, directions=["maximize"])
    for key, value in {"workload": "toy", "device": "cpu", "size": "tiny", "space": str(space_file)}.items():
        study.set_user_attr(key, value)
    for index, config in enumerate(configs):
        trial = study.ask()
        result = fate(index, config)
        for key, value in to_attrs(result, Config(config), "search", None).items():
            trial.set_user_attr(key, value)
        study.tell(trial, [result.throughput] if result.status == "ok" else None,
                   state=None if result.status == "ok" else optuna.trial.TrialState.FAIL)
    return study


def _fate(index, config):
    if index == 1:
        return TrialResult(status="incorrect", config=dict(config), check={"message": "too far"})
    return TrialResult(status="ok", config=dict(config), items_per_run=10, throughput=100.0 + (index * 37) % 23,
                       times=[0.1, 0.1], wall_seconds=1.5)


def test_a_study_that_measured_every_config_replays_as_the_recorded_file_of_the_same_space(tmp_path):
    # Issue 16: "a study with every config measured is a recorded space too". Both routes give one space.
    from autotune.recorded import recorded_study
    from autotune.simulate import simulate

    record, space = _module(), SearchSpace.from_dict(SPACE)
    space_file = _space_file(tmp_path)
    grids, configs = record.configs(space)
    cache = {",".join(str(c[name]) for name in grids): cache_entry(c, _fate(i, c)) for i, c in enumerate(configs)}
    out = tmp_path / "space.json.gz"
    record.write(out, SearchSettings("chmm", "cpu", "tiny"), "cpu", grids, cache, space_document(space, grids))
    from_file = load_recorded(out)
    from_study = recorded_study(_study_of(space_file, [dict(c) for c in configs], _fate, None), "study")
    assert from_study.entries.keys() == from_file.entries.keys() and from_study.optimum == from_file.optimum
    assert [from_study.entries[k]["time"] for k in cache] == [from_file.entries[k]["time"] for k in cache]
    assert from_study.space.baseline == from_file.space.baseline
    assert not from_study.space.is_active("chunk", {"kind": "loop"})  # the conditions of the space file
    for seed in (0, 1):
        assert simulate(from_study, 12, seed=seed).best_so_far == simulate(from_file, 12, seed=seed).best_so_far


def test_a_space_whose_constraints_read_the_size_reads_back_from_its_file_and_from_a_study(tmp_path):
    # Constraints may read the size (ten's "global_batch % batch_size == 0"): `autotune simulate --study` on a
    # study of ten failed with "names global_batch, which is not a parameter...", and so would a recorded file.
    # Both now read back, the constraint judged at the size the configs were measured at, as the search judged it.
    import copy

    import yaml

    from autotune.conditions import size_read
    from autotune.recorded import recorded_study
    from autotune.simulate import simulate

    spec = copy.deepcopy(SPACE)
    spec["parameters"]["batch"] = {"choices": [1, 2, 4, 8]}
    spec["defaults"]["batch"] = 1
    spec["size_parameters"] = ["global_batch"]
    spec["constraints"].append("global_batch % batch == 0")
    space = SearchSpace.from_dict(spec).for_size({"global_batch": 4}, "tiny")
    space_file = tmp_path / "toy.yaml"
    space_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    record = _module()
    grids, configs = record.configs(space)
    assert {c["batch"] for c in configs} == {1, 2, 4}
    cache = {",".join(str(c[name]) for name in grids): cache_entry(c, _fate(i, c)) for i, c in enumerate(configs)}
    out = tmp_path / "space.json.gz"
    record.write(out, SearchSettings("chmm", "cpu", "tiny"), "cpu", grids, cache, space_document(space, grids),
                 space.facts)
    from_file = load_recorded(out)
    study = _study_of(space_file, [dict(c) for c in configs], _fate, None)
    study.set_user_attr("facts", space.facts)  # as `search` stores it
    from_study = recorded_study(study, "study")
    eight = space.complete({**configs[0], "batch": 8})
    times = {e["time"] for e in cache.values()}
    for recorded in (from_file, from_study):
        assert recorded.space.violated(eight) == "global_batch % batch == 0"  # not only "absent from the file"
        # What a config that breaks it is said to have read, as the search said it.
        assert size_read(["global_batch", "batch"], recorded.space.size_parameters, recorded.space.facts) == (
            " (global_batch is 4 at this size)")
        # (The study knows only the batches it measured, the file every choice: their replays differ from there.)
        assert set(simulate(recorded, 12, seed=0).best_so_far) - {None} <= times


#: Knobs a CPU fixes, as latentwire's and lsd's: pinned memory (default on, moved off on a CPU), a non-blocking
#: copy used only from pinned memory, a CUDA graph (none on a CPU) and compile, used only without a graph.
FIXED_HERE = {
    "schema_version": 1,
    "parameters": {
        "pin": {"choices": [False, True], "requires": {"true": ["pinned_memory"]}},
        "nb": {"choices": [False, True], "requires": {"true": ["cuda"]}, "condition": "pin == true"},
        "graph": {"choices": [False, True], "requires": ["cuda_graphs"]},
        "compile": {"choices": ["none", "default"], "condition": "graph == false"},
        "batch": {"choices": [1, 2, 4]},
    },
    "defaults": {"pin": True, "nb": True, "graph": False, "compile": "none", "batch": 1},
    "baseline": {"pin": False, "batch": 4},
}


@pytest.mark.parametrize("facts", [True, False])
def test_a_space_with_knobs_the_device_fixes_reads_back_from_its_file_and_from_a_study(tmp_path, facts):
    # `record_space.py --workload lsd` on a CPU wrote a file that did not read back ("parameters.compile.condition:
    # names cuda_graph, which is not a parameter declared above it"), and `simulate --study` of latentwire died
    # with a KeyError: the study stored nb=False, the device's default, where the file's default is True.
    import yaml

    from autotune.devices import PROFILES
    from autotune.recorded import recorded_study
    from autotune.simulate import simulate

    record = _module()
    space = SearchSpace.from_dict(FIXED_HERE).for_device(PROFILES["cpu"])
    grids, configs = record.configs(space)
    assert grids["pin"] == grids["nb"] == grids["graph"] == [False] and len(configs) == 2 * 3
    cache = {",".join(str(c[name]) for name in grids): cache_entry(c, _fate(i, c)) for i, c in enumerate(configs)}
    out = tmp_path / "space.json.gz"
    record.write(out, SearchSettings("chmm", "cpu", "tiny"), "cpu", grids, cache, space_document(space, grids),
                 space.facts)
    from_file = load_recorded(out)
    assert from_file.space.is_active("compile", {"pin": False, "nb": False, "graph": False})
    space_file = tmp_path / "toy.yaml"
    space_file.write_text(yaml.safe_dump(FIXED_HERE, sort_keys=False))
    study = _study_of(space_file, [dict(c) for c in configs], _fate, None)
    if facts:  # as `search` stores them since they are kept; an older study has none
        study.set_user_attr("facts", space.facts)
    from_study = recorded_study(study, "study")
    assert from_study.space.defaults["pin"] is (not facts)  # the search's default, or else the file's
    times = {e["time"] for e in cache.values()}
    for seed in (0, 1):
        replayed = simulate(from_study, 6, seed=seed).best_so_far
        assert set(replayed) - {None} <= times
        if facts:  # the space the search had: the same replay as the file's
            assert replayed == simulate(from_file, 6, seed=seed).best_so_far


def test_a_partial_study_replays_over_the_configs_it_measured_and_names_what_is_wrong(tmp_path):
    from autotune.exceptions import AutotuneError
    from autotune.recorded import load_recorded_study, recorded_study
    from autotune.simulate import simulate

    import yaml

    space = SearchSpace.from_dict(SPACE)
    space_file = _space_file(tmp_path)
    configs = [dict(c) for c in _module().configs(space)[1][:7]]
    storage = f"sqlite:///{tmp_path / 'autotune.db'}"
    _study_of(space_file, configs, _fate, storage)
    recorded = load_recorded_study(storage)  # the one study the storage holds
    assert recorded.source == f"{storage} study toy-cpu-tiny" and len(recorded.entries) == 7
    measured = {",".join(str(c[n]) for n in recorded.order) for c in configs}
    assert set(recorded.entries) == measured
    assert recorded.optimum == min(e["time"] for e in recorded.entries.values() if isinstance(e["time"], float))
    replay = simulate(recorded, 20, seed=0)
    assert replay.evaluations == 7  # every measured config once, then the space is spent; nothing else is a config
    # The space file changed (a knob added) or gone: the configs' knobs, flat, as a Kernel Tuner cache without its
    # conditions.
    space_file.write_text(yaml.safe_dump({**SPACE, "parameters": {**SPACE["parameters"], "new": {"choices": [1, 2]}},
                                          "defaults": {**SPACE["defaults"], "new": 1}}, sort_keys=False))
    changed = load_recorded_study(storage, "toy-cpu-tiny")
    assert len(changed.entries) == 7 and "new" not in changed.order and changed.space.is_active("chunk", {"kind": "loop"})
    space_file.unlink()
    assert len(load_recorded_study(storage, "toy-cpu-tiny").entries) == 7
    one = recorded_study(_study_of(space_file, configs[:1], _fate, None), "study")  # the knobs of its one config
    assert list(one.entries) == [",".join(str(configs[0][n]) for n in one.order)] and simulate(one, 3, 0).evaluations == 1
    with pytest.raises(AutotuneError, match="unknown study 'nope'; valid: toy-cpu-tiny"):
        load_recorded_study(storage, "nope")
    with pytest.raises(AutotuneError, match="no study storage at"):
        load_recorded_study(f"sqlite:///{tmp_path / 'none.db'}")


def test_simulate_on_a_study_says_how_many_configs_it_replays_beside_its_table(tmp_path):
    # A partial study is a smaller space than its file's, its best found the optimum: the table is read knowing it.
    from tests.conftest import run_cli

    space_file = _space_file(tmp_path)
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    _study_of(space_file, [dict(c) for c in _module().configs(SearchSpace.from_dict(SPACE))[1][:5]], _fate, storage)
    done = run_cli("simulate", "--storage", storage, "--study", "toy-cpu-tiny", "--trials", "3", "--repeats", "2",
                   cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (f"autotune: {storage} study toy-cpu-tiny: 5 configs measured, the space its searches replay\n"
            in done.stderr), done.stderr[-2000:]


def test_simulate_on_a_study_that_measured_nothing_says_so_in_one_line(tmp_path):
    # A study whose search stopped before its baseline had measured (or failed) a config holds no space to replay.
    from tests.conftest import run_cli

    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    _study_of(_space_file(tmp_path), [], _fate, storage)
    done = run_cli("simulate", "--storage", storage, "--study", "toy-cpu-tiny", cwd=tmp_path, timeout=120)
    assert (done.returncode, done.stderr) == (2, f"autotune: error: {storage} study toy-cpu-tiny: the study has "
                                                 "measured no config yet\n")


def test_a_study_whose_space_file_is_gone_replays_each_knob_s_numbers_by_size(tmp_path):
    # A neighbour move steps between adjacent values: by their text, 100 stood between 1 and 15 (a mutant).
    from autotune.recorded import recorded_study

    configs = [{"chunk": 24, "fast": False, "kind": "loop", "unroll": u, "tile": t}
               for u, t in ((15, None), (100, 64), (9, None), (1, 8))]
    recorded = recorded_study(_study_of(tmp_path / "gone.yaml", configs, _fate, None), "study")
    assert recorded.space.parameters["unroll"].choices == (1, 9, 15, 100)
    assert recorded.space.parameters["tile"].choices == (8, 64, None)  # a null beside numbers: no TypeError
    assert recorded.space.parameters["fast"].choices == (False,) and len(recorded.entries) == 4


def test_a_study_of_a_built_in_whose_space_file_is_gone_replays_in_the_workload_s_own(tmp_path):
    # A study kept from another checkout names a space file not here: its workload's file gives the conditions.
    from autotune.recorded import recorded_study
    from autotune.registry import space_path

    chmm = SearchSpace.from_file(space_path("chmm"))
    study = _study_of(tmp_path / "gone.yaml", [config.to_dict() for config, _ in chmm.firsts()], _fate, None)
    study.set_user_attr("workload", "chmm")
    recorded = recorded_study(study, "study")
    assert not recorded.space.is_active("chunk_size", {"messages": "loop"}) and recorded.space.is_active(
        "chunk_size", {"messages": "scan"})  # the condition of chmm.yaml, not read from the values alone


def test_a_config_measured_again_after_its_file_was_edited_replays_as_measured_last(tmp_path):
    # Its failure before the edit was replayed: a study resumed after a kernel was fixed measures it again
    # (tests/test_tuner.py), and the first of its two outcomes stood for it.
    from autotune.recorded import recorded_study

    space = SearchSpace.from_dict(SPACE)
    space_file = _space_file(tmp_path)
    config = dict(_module().configs(space)[1][0])
    recorded = recorded_study(_study_of(space_file, [config, config], _fate_fixed, None), "study")
    assert [entry["time"] for entry in recorded.entries.values()] == [10.0]  # ms per item at 100 a second


def _fate_fixed(index, config):
    return (TrialResult(status="error", config=dict(config), error="ValueError: not built yet") if index == 0 else
            TrialResult(status="ok", config=dict(config), items_per_run=10, throughput=100.0, times=[0.1, 0.1]))


def test_a_study_replays_the_configs_it_measured_with_what_its_device_lacks_now(tmp_path):
    # The facts a study keeps are refreshed when it resumes; what a config measured before needed (here pinned
    # memory, on a machine whose facts now lack it), the device had then: those configs stay configs.
    import yaml

    from autotune.devices import PROFILES
    from autotune.recorded import recorded_study
    from autotune.simulate import simulate

    space_file = tmp_path / "toy.yaml"
    space_file.write_text(yaml.safe_dump(FIXED_HERE, sort_keys=False))
    configs = [{"pin": True, "nb": False, "graph": False, "compile": "none", "batch": b} for b in (1, 2, 4)]
    study = _study_of(space_file, configs, lambda i, c: _fate(0, c), None)
    study.set_user_attr("facts", SearchSpace.from_dict(FIXED_HERE).for_device(PROFILES["cpu"]).facts)
    recorded = recorded_study(study, "study")
    assert all(recorded.space.violated(recorded.space.complete(c)) is None for c in configs)
    assert simulate(recorded, 5, seed=0).evaluations == 3
