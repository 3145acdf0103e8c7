"""Simulation on recorded spaces: Kernel Tuner caches read as spaces, searches replayed and scored."""

import itertools
import json
import random
import re
import subprocess
from types import SimpleNamespace
import sys
import warnings

import pytest

from autotune.exceptions import AutotuneError, UnknownNameError
from autotune.recorded import direction_of, load_recorded
from autotune.samplers import DEFAULT, SAMPLERS
from autotune.simulate import Repeat, budgets_for, expected_random_best, run_repeats, score, simulate, time_score
from tests.conftest import fresh_process_json


def _cache(tmp_path, name="tiny.json", **header):
    """A 4x3 space with two combinations restricted (absent) and one failed config; each config's GFLOP/s too."""
    cache = {}
    for x, y in itertools.product([1, 2, 4, 8], [10, 20, 30]):
        if (x, y) in ((8, 30), (4, 30)):
            continue  # breaks a restriction: not a config at all
        time = "RuntimeFailedConfig" if (x, y) == (2, 20) else 100.0 / x + y / 10
        cache[f"{x},{y}"] = {"x": x, "y": y, "time": time, "times": [time] * 3 if time != "RuntimeFailedConfig" else [],
                             "GFLOP/s": time if isinstance(time, str) else 1000 / time,
                             "compile_time": 5.0, "benchmark_time": 20.0}
    data = {"device_name": "test GPU", "kernel_name": "tiny", "objective": "time", "tune_params_keys": ["x", "y"],
            "tune_params": {"x": [1, 2, 4, 8], "y": [10, 20, 30]}, "cache": cache, **header}
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _broken_cache(tmp_path, break_it):
    """The tiny cache as ``break_it`` changes its mapping."""
    path = _cache(tmp_path)
    data = json.loads(path.read_text())
    break_it(data)
    path.write_text(json.dumps(data))
    return path


def test_a_kernel_tuner_cache_is_a_space_with_its_restrictions(tmp_path):
    recorded = load_recorded(_cache(tmp_path))
    space = recorded.space
    assert space.violated(space.defaults) is None
    assert space.violated(space.defaults.replace(x=8, y=30)) is not None
    assert recorded.result({"x": 2, "y": 20}).status == "error"
    ok = recorded.result({"x": 8, "y": 10})
    assert ok.status == "ok" and recorded.objective_of(ok) == pytest.approx(100 / 8 + 1)
    assert recorded.optimum == pytest.approx(100 / 8 + 1)


def test_kernel_tuners_old_error_value_is_a_failed_config_not_a_time(tmp_path):
    # Older Kernel Tuner versions record 1e20 where newer ones write "RuntimeFailedConfig".
    path = _cache(tmp_path)
    data = json.loads(path.read_text())
    data["cache"]["2,20"]["time"] = 1e20
    path.write_text(json.dumps(data))
    recorded = load_recorded(path)
    assert recorded.result({"x": 2, "y": 20}).status == "error"
    assert len(recorded.times) == 9 and recorded.worst == pytest.approx(100 + 3)


def test_a_cache_is_read_by_its_entries_values_and_an_entry_without_them_by_its_key(tmp_path):
    path = _cache(tmp_path)
    data = json.loads(path.read_text())
    data["cache"]["8,10"] = {"time": data["cache"].pop("8,10")["time"]}  # the values only in the key
    data["cache"]["1, 10"] = data["cache"].pop("1,10")  # a key spelt otherwise; the entry has its values
    path.write_text(json.dumps(data))
    recorded = load_recorded(path)
    assert recorded.result({"x": 8, "y": 10}).status == "ok" and recorded.optimum == pytest.approx(100 / 8 + 1)
    assert recorded.result({"x": 1, "y": 10}).throughput == pytest.approx(1000 / 101)
    assert len(recorded.entries) == 10 and simulate(recorded, 10, seed=0).best_so_far[-1] == recorded.optimum


@pytest.mark.parametrize("break_it, says", [
    (lambda data: data["cache"].update({"9,10": {"time": 1.0}}), "has no value for 'x'"),
    (lambda data: data["tune_params"].pop("y"), "tune_params has no values for 'y'"),
])
def test_a_cache_that_does_not_name_its_values_is_a_one_line_error(tmp_path, break_it, says):
    path = _broken_cache(tmp_path, break_it)
    with pytest.raises(AutotuneError, match=says):
        load_recorded(path)
    done = subprocess.run([sys.executable, "-m", "autotune", "simulate", "--recorded", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and says in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("break_it, says", [
    (lambda data: data.update(cache=list(data["cache"].values())), "cache a mapping of keys to entries"),
    (lambda data: data.update(tune_params_keys="xy"), "tune_params_keys must be a list of names"),
    (lambda data: data["tune_params"].update(x=8), "tune_params has no values for 'x'"),
    (lambda data: data["tune_params"].update(x=[]), "tune_params has no values for 'x'"),
    (lambda data: data["tune_params"]["x"].remove(8), "the cache entry '8,10' has x=8, which tune_params does not"),
    (lambda data: data["cache"]["1,10"].update(compile_time="n/a"), "entry '1,10' has a cost or run time that is"),
    (lambda data: data["cache"]["1,10"].update(times=["1.0"]), "entry '1,10' has a cost or run time that is not"),
    (lambda data: data["cache"]["1,10"].update(times=3.0), "entry '1,10' has a cost or run time that is not"),
    (lambda data: data.update(objective_higher_is_better="yes"), "objective_higher_is_better must be true or false"),
    (lambda data: data.update(cache={}), "the cache holds no configurations"),
    (lambda data: data.update(objective=["time"]),
     r"the objective must be the name of a recorded figure, not \['time'\]"),
    (lambda data: data.update(objective="energy"), "no configuration has a recorded 'energy'"),
])
def test_a_cache_of_the_wrong_shapes_is_a_one_line_error_not_a_traceback(tmp_path, break_it, says):
    # Each was Python's words (AttributeError, TypeError, ValueError), a string read letter by letter as the names,
    # or a direction silently taken as the default; the CLI's exit 2 for these errors is shown above.
    with pytest.raises(AutotuneError, match=says):
        load_recorded(_broken_cache(tmp_path, break_it))


def test_a_cache_whose_values_make_no_space_names_its_file(tmp_path):
    path = _broken_cache(tmp_path, lambda data: data["tune_params"]["x"].append(8))
    with pytest.raises(AutotuneError, match=f"^{re.escape(str(path))}: parameters.x.choices: must not repeat a choice: "
                                            "8 is there twice$"):
        load_recorded(path)


def test_a_time_of_zero_is_a_failed_config_and_a_run_of_zero_is_read(tmp_path):
    # A recorded time of 0 is no time: its throughput would be 1000 / 0, a ZeroDivisionError mid-replay. A run of
    # 0 ms among others is a timer's rounding, and is read.
    path = _broken_cache(tmp_path, lambda data: (data["cache"]["2,10"].update(time=0.0),
                                                 data["cache"]["1,10"].update(times=[0.0, 101.0, 101.0])))
    recorded = load_recorded(path)
    assert recorded.result({"x": 2, "y": 10}).status == "error" and 0.0 not in recorded.times
    assert recorded.result({"x": 1, "y": 10}).times == [0.0, 0.101, 0.101]
    assert simulate(recorded, 10, seed=0).best_so_far[-1] == recorded.optimum


def test_a_result_that_is_not_ok_has_no_recorded_objective_whatever_its_throughput(tmp_path):
    from autotune.runner import TrialResult

    recorded = load_recorded(_cache(tmp_path))
    wrong = TrialResult(status="incorrect", config={"x": 8, "y": 10}, throughput=1000 / 13.5)
    assert recorded.objective_of(wrong) is None
    assert recorded.objective_of(recorded.result({"x": 8, "y": 10})) == pytest.approx(13.5)


def test_a_failed_configs_runs_are_not_read(tmp_path):
    path = _broken_cache(tmp_path, lambda data: data["cache"]["2,20"].update(times=["RuntimeFailedConfig"]))
    assert load_recorded(path).result({"x": 2, "y": 20}).status == "error"


def test_the_expected_random_best_matches_enumeration(tmp_path):
    recorded = load_recorded(_cache(tmp_path))
    keys = list(recorded.entries)
    for m in (1, 2, 3, 5):
        bests = []
        for draw in itertools.combinations(keys, m):
            times = [recorded.entries[k]["time"] for k in draw if not isinstance(recorded.entries[k]["time"], str)]
            if times:
                bests.append(min(times))
        assert expected_random_best(recorded, m) == pytest.approx(sum(bests) / len(bests), rel=1e-9)


def test_a_simulated_search_evaluates_recorded_configs_only_and_is_deterministic(tmp_path):
    recorded = load_recorded(_cache(tmp_path))
    first, again = simulate(recorded, 6, seed=3), simulate(recorded, 6, seed=3)
    assert first.best_so_far == again.best_so_far and first.evaluations == 6
    times = set(recorded.times)
    assert all(value is None or value in times for value in first.best_so_far)
    # Ten configs exist: a search of all of them finds the optimum and scores 1.
    whole = simulate(recorded, 10, seed=0)
    assert whole.best_so_far[-1] == recorded.optimum and score(recorded, whole.best_so_far, 10) == pytest.approx(1.0)


def test_a_simulated_search_measures_the_spaces_first_configs_first_as_search_does(tmp_path):
    # Its score is a search's: one that drew its first configs from the sampler would be judged on another start.
    recorded = load_recorded(_cache(tmp_path))
    firsts = [dict(config) for config, _ in recorded.space.firsts()]
    for seed in range(5):
        seen = []
        simulate(recorded, 4, seed=seed, on_trial=lambda record, done, total: seen.append(dict(record.config)))
        assert seen[:len(firsts)] == firsts == [{"x": 1, "y": 10}], seed


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_each_strategy_asks_the_same_configs_for_a_seed_and_others_for_another(tmp_path, sampler):
    # Each strategy's sampler is given the seed: one left unseeded drew afresh each run (the default's alone was
    # tested), and its scores in the benchmark could not be had again.
    recorded = load_recorded(_cache(tmp_path))

    def asked(seed):
        configs = []
        simulate(recorded, 8, seed=seed, sampler=sampler, on_trial=lambda record, *_: configs.append(record.config.key))
        return configs

    first = asked(3)
    assert asked(3) == first and len(first) >= 8  # a repeat of a measured config is told too
    assert any(asked(seed) != first for seed in (4, 5, 6))


def test_a_simulated_search_is_the_same_in_another_process(tmp_path):
    # A seed names one search, wherever it runs: a search's fresh draws seeded with its pid (which only workers
    # sharing a study need, to draw apart) passed the test above, run twice in one process.
    recorded = load_recorded(_cache(tmp_path))
    mine = [simulate(recorded, 10, seed=seed).best_so_far for seed in range(3)]
    theirs = fresh_process_json(
        "import json; from autotune.recorded import load_recorded; from autotune.simulate import simulate; "
        f"recorded = load_recorded({str(_cache(tmp_path))!r}); "
        "print(json.dumps([simulate(recorded, 10, seed=seed).best_so_far for seed in range(3)]))")
    assert theirs == mine


def test_a_sparse_space_is_searched_to_its_last_config(tmp_path):
    # A study's few configs in a wide product of knob values (lsd's 8 configs of 19,200 on the H100): random
    # draws almost never hit one, the loop found nothing new to measure, and the replay stopped after 6 of 8
    # evaluations without its optimum. Where the space can list its configs, the last unmeasured ones are drawn
    # from that list.
    rng = random.Random(0)
    grid = {name: list(range(6)) for name in "abcde"}  # 7,776 combinations
    chosen = {tuple(rng.randrange(6) for _ in grid) for _ in range(8)}
    cache = {",".join(map(str, values)): {**dict(zip(grid, values)), "time": 10.0 - index}  # the first, the worst
             for index, values in enumerate(sorted(chosen))}
    path = tmp_path / "sparse.json"
    path.write_text(json.dumps({"tune_params_keys": list(grid), "tune_params": grid, "cache": cache}))
    recorded = load_recorded(path)
    for seed in range(3):
        replay = simulate(recorded, len(cache), seed=seed)
        assert replay.evaluations == len(cache) and replay.best_so_far[-1] == recorded.optimum == 10.0 - 7


def test_a_replay_lists_its_configs_only_when_random_draws_miss(tmp_path):
    # Listed up front (as a search of a space small enough to list does, to end once all are measured), the
    # 300,000 configs of benchmarks/large_space.py cost a replay 5 s and 130 MiB more on this CPU.
    recorded = load_recorded(_cache(tmp_path))
    simulate(recorded, 3, seed=0)
    assert "configs" not in vars(recorded)  # a cached_property, built on first use


def test_a_repeat_reads_one_trial_not_a_deep_copy_of_the_study(tmp_path, monkeypatch):
    # `Study.trials` deep-copies every trial: reading a repeat's figures through it made 1,000 simulated trials on
    # pnpoly take 280 s instead of 24 on this CPU. A search of the whole space asks many repeats; none may copy.
    import optuna

    def copied(self):
        raise AssertionError("Study.trials deep-copies the study; read with get_trials(deepcopy=False)")

    monkeypatch.setattr(optuna.Study, "trials", property(copied))
    whole = simulate(load_recorded(_cache(tmp_path)), 10, seed=0)
    assert whole.evaluations == 10


def test_random_search_scores_about_zero(tmp_path):
    recorded = load_recorded(_cache(tmp_path))
    rng = random.Random(0)
    keys = list(recorded.entries)
    scores = []
    for _ in range(2000):
        best, best_so_far = None, []
        for key in rng.sample(keys, 3):
            value = recorded.entries[key]["time"]
            if not isinstance(value, str):
                best = value if best is None else min(best, value)
            best_so_far.append(best)
        if best is not None:
            scores.append(score(recorded, best_so_far, 3))
    assert abs(sum(scores) / len(scores)) < 0.05


def test_simulate_command_prints_recorded_times_as_json(tmp_path):
    path = _cache(tmp_path)
    done = subprocess.run([sys.executable, "-m", "autotune", "simulate", "--recorded", str(path), "--trials", "5",
                           "--repeats", "2", "--seed", "4", "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["objective"] == "time" and data["direction"] == "minimize"
    assert data["optimum"] == pytest.approx(100 / 8 + 1)
    assert [r["seed"] for r in data["repeats"]] == [4, 5]
    assert all(r["evaluations"] == 5 and len(r["best_so_far"]) == 5 for r in data["repeats"])
    # Every config of this file cost 25 ms to evaluate (compile + benchmark).
    assert all(r["seconds_so_far"] == pytest.approx([0.025 * i for i in range(1, 6)]) for r in data["repeats"])
    assert "repeat" not in done.stderr  # a script reads the JSON: no progress beside it (the table has it)


def test_the_table_scores_at_the_budgets_a_search_reaches_and_at_its_own():
    assert budgets_for(5) == (5,) and budgets_for(30) == (20, 30) and budgets_for(100) == (20, 50, 100)
    assert budgets_for(200) == (20, 50, 100, 200)


def test_a_table_of_one_evaluation_says_it_in_the_singular():
    from autotune.simulate import simulation_table

    figures = {"mean": 1.0, "std": 0.0}
    summary = {"1": figures, "time 1": figures, "seconds_per_evaluation": 0.002}  # was "1 evaluations take"
    recorded = SimpleNamespace(source="x.json", optimum=1.0, objective="time", direction="minimize")
    table = simulation_table(recorded, {"tpe": summary}, 1)
    assert "at the time that 1 evaluation takes on average" in table and "mean ± sd over 1 repeat\n" in table
    assert "x.json: optimum 1 (time in ms, minimized)" in table  # "(time, minimized)": of what, it did not say
    named = SimpleNamespace(source="x.json", optimum=2.0, objective="GFLOP/s", direction="maximize")
    assert "x.json: optimum 2 (GFLOP/s, maximized)" in simulation_table(named, {"tpe": summary}, 1)


def test_simulate_command_prints_a_table_at_the_trials_it_was_given(tmp_path):
    done = subprocess.run([sys.executable, "-m", "autotune", "simulate", "--recorded", str(_cache(tmp_path)),
                           "--trials", "5", "--repeats", "2", "--sampler", "tpe", "--sampler", "random"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    header, *rows = [line for line in done.stdout.splitlines() if line.startswith("  ") and "(by time" not in line]
    assert header.split() == ["strategy", "at", "5", "ms/evaluation"]
    assert [row.split()[0] for row in rows] == ["tpe", "by", "random", "by"]
    assert not any(" - " in row + " " for row in rows), done.stdout  # every cell scored: no budget past --trials
    assert "the time that 5 evaluations take" in done.stdout
    assert "autotune: tpe: repeat 2/2 done\nautotune: random: repeat 1/2 done" in done.stderr, done.stderr


def test_more_trials_than_the_space_has_configs_are_said_and_taken_as_all_of_them(tmp_path):
    # 10 configs: a search of 50 would spend 250 asks on configs it has, for nothing.
    done = subprocess.run([sys.executable, "-m", "autotune", "simulate", "--recorded", str(_cache(tmp_path)),
                           "--trials", "50", "--repeats", "2", "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "--trials 50 is more than the 10 configs of" in done.stderr and "evaluates 10 at most" in done.stderr
    assert all(r["evaluations"] <= 10 for r in json.loads(done.stdout)["repeats"])
    table = subprocess.run([sys.executable, "-m", "autotune", "simulate", "--recorded", str(_cache(tmp_path)),
                            "--trials", "50", "--repeats", "1"], capture_output=True, text=True, timeout=120)
    assert table.returncode == 0 and "at 10" in table.stdout and "at 50" not in table.stdout, table.stdout
    every = subprocess.run([sys.executable, "-m", "autotune", "simulate", "--recorded", str(_cache(tmp_path)),
                            "--trials", "10", "--repeats", "1"], capture_output=True, text=True, timeout=120)
    assert every.returncode == 0 and "is more than" not in every.stderr  # all 10, as asked


def test_a_long_repeat_says_how_far_it_has_got(tmp_path):
    lines = []
    run_repeats(load_recorded(_cache(tmp_path)), "tpe", 5, 2, seed=0, progress=lines.append, every_seconds=0)
    assert lines[:6] == [f"tpe: repeat 1/2: {i}/5 evaluations" for i in range(1, 6)] + ["tpe: repeat 1/2 done"]
    second = [int(line.split(": ")[2].split("/")[0]) for line in lines[6:-1]]  # a repeat says its count again
    assert lines[-1] == "tpe: repeat 2/2 done" and second == sorted(second) and second[-1] == 5, lines
    quiet = []
    run_repeats(load_recorded(_cache(tmp_path)), "tpe", 5, 2, seed=0, progress=quiet.append)  # every 10 s
    assert quiet == ["tpe: repeat 1/2 done", "tpe: repeat 2/2 done"]


@pytest.mark.parametrize("content, fragment", [
    (b"{not json", "cannot read a recorded space"),
    (b'{"cache": {}}', "not a Kernel Tuner cache file"),
])
def test_a_bad_recorded_file_is_one_error(tmp_path, content, fragment):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(AutotuneError, match=fragment):
        load_recorded(path)
    done = subprocess.run([sys.executable, "-m", "autotune", "simulate", "--recorded", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and fragment in done.stderr


@pytest.mark.parametrize("name", ["missing.json", "."])
def test_a_recorded_file_that_cannot_be_opened_is_one_error(tmp_path, name):
    # Opened first to tell a study's storage from a cache: a file that is not there, or a folder, is said once.
    with pytest.raises(AutotuneError, match=r"cannot read a recorded space \((FileNotFoundError|IsADirectoryError)"):
        load_recorded(tmp_path / name)


def test_a_study_file_given_as_a_recorded_space_names_the_storage_that_replays_it(tmp_path):
    import sqlite3

    database = tmp_path / "autotune.db"
    sqlite3.connect(database).execute("create table t (x)").connection.commit()
    with pytest.raises(AutotuneError, match=f"a study's storage.*--storage sqlite:///{database}"):
        load_recorded(database)
    journal = tmp_path / "studies.journal"
    journal.write_text('{"op_code": 0, "study_name": "s", "directions": [2]}\n')
    with pytest.raises(AutotuneError, match=f"a study's storage.*--storage {journal} "):
        load_recorded(journal)
    lines = tmp_path / "lines.json"  # JSON lines of something else are still "cannot read"
    lines.write_text('{"a": 1}\n{"b": 2}\n')
    with pytest.raises(AutotuneError, match="cannot read a recorded space"):
        load_recorded(lines)


def test_an_unknown_sampler_is_refused(tmp_path):
    done = subprocess.run([sys.executable, "-m", "autotune", "simulate", "--recorded", str(_cache(tmp_path)),
                           "--sampler", "annealing"], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (2, "autotune: error: --sampler 'annealing' is not a search strategy; "
                                                 f"use one of: {', '.join(SAMPLERS)}\n")


def test_the_time_score_charges_a_search_for_what_its_configs_cost(tmp_path):
    recorded = load_recorded(_cache(tmp_path))
    assert recorded.mean_cost_seconds == pytest.approx(0.025)
    found = [30.0, 30.0, recorded.optimum]
    # At the mean cost, a time budget of 3 evaluations holds 3 of them: the same score as at 3 evaluations.
    even = Repeat(0, 3, found, seconds_so_far=[0.025, 0.05, 0.075])
    assert time_score(recorded, even, 3) == pytest.approx(score(recorded, found, 3)) and score(recorded, found, 3) == 1.0
    # Configs 4x as costly: the optimum, third, comes after the time of 3 average evaluations.
    costly = Repeat(0, 3, found, seconds_so_far=[0.1, 0.2, 0.3])
    assert time_score(recorded, costly, 3) == pytest.approx(score(recorded, [], 3)) and score(recorded, [], 3) < 0
    # Cheap configs: more of them in the same time, and the optimum found at the 4th counts at 3.
    cheap = Repeat(0, 4, [30.0, 30.0, 30.0, recorded.optimum], seconds_so_far=[0.01, 0.02, 0.03, 0.04])
    assert time_score(recorded, cheap, 3) == pytest.approx(1.0) and score(recorded, cheap.best_so_far, 3) < 1.0


# -- the figures of a table ----------------------------------------------------------------

def test_a_summary_is_the_mean_and_sample_spread_of_the_scores_and_the_strategys_own_cost(tmp_path):
    # `summary` makes every figure of benchmarks/search_quality.py's tables and of `simulate`'s.
    import statistics

    from autotune.simulate import summary

    recorded = load_recorded(_cache(tmp_path))
    worst, mid, best = recorded.worst, 100 / 4 + 1, recorded.optimum
    every = [0.02, 0.04, 0.06]  # each config under this file's mean cost of 25 ms
    repeats = [Repeat(0, 2, [worst, worst], 0.1, every[:2]), Repeat(1, 3, [worst, mid, mid], 0.2, [0.1, 0.2, 0.3]),
               Repeat(2, 3, [worst, best, best], 0.3, every)]
    figures = summary(recorded, repeats, budgets=(2, 3, 4))
    at_2 = [score(recorded, r.best_so_far, 2) for r in repeats]
    assert len(set(at_2)) == 3
    assert figures["2"] == {"mean": pytest.approx(statistics.mean(at_2)), "std": pytest.approx(statistics.stdev(at_2))}
    at_3 = [score(recorded, [mid], 3), 1.0]  # the first repeat did not reach 3 evaluations; none reached 4
    assert figures["3"] == {"mean": pytest.approx(statistics.mean(at_3)), "std": pytest.approx(statistics.stdev(at_3))}
    assert figures["4"] == {"mean": None, "std": None}
    # By time, the second repeat's configs cost 4x the mean: within the time of 2 it had evaluated none.
    by_time = [score(recorded, [worst], 2), score(recorded, [], 2), score(recorded, [best], 2)]
    assert figures["time 2"]["mean"] == pytest.approx(statistics.mean(by_time))
    assert figures["time 2"]["std"] == pytest.approx(statistics.stdev(by_time))
    assert figures["seconds_per_evaluation"] == pytest.approx(0.6 / 8)


def test_a_budget_that_covers_the_space_scores_the_optimum_1_and_anything_else_0(tmp_path):
    recorded = load_recorded(_cache(tmp_path))  # 10 configs: random search of 10 or more finds the optimum
    for m in (10, 12):
        assert score(recorded, [recorded.optimum] * m, m) == 1.0 and score(recorded, [recorded.worst] * m, m) == 0.0


def test_a_repeat_times_itself_and_counts_no_cost_where_the_file_records_none(tmp_path):
    import time

    path = _broken_cache(tmp_path, lambda data: [entry.pop(part) for entry in data["cache"].values()
                                                for part in ("compile_time", "benchmark_time")])
    started = time.perf_counter()
    repeat = simulate(load_recorded(path), 4, seed=0)
    assert 0 < repeat.wall_seconds <= time.perf_counter() - started
    assert repeat.seconds_so_far == [0.0] * 4


def test_the_two_objective_study_autotune_made_before_is_still_simulated(tmp_path, monkeypatch):
    # benchmarks/search_quality.py scores it beside today's (the "current two-objective TPE" of issue 16).
    import optuna

    made = []
    create = optuna.create_study
    monkeypatch.setattr(optuna, "create_study", lambda **kw: made.append(kw["directions"]) or create(**kw))
    recorded = load_recorded(_cache(tmp_path))
    two, one = simulate(recorded, 10, seed=0, sampler="tpe", objectives=2), simulate(recorded, 10, seed=0)
    assert made == [["maximize", "minimize"], ["maximize"]]
    assert two.best_so_far[-1] == one.best_so_far[-1] == recorded.optimum


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_every_strategy_takes_the_largest_seed_and_one_past_it_is_refused(tmp_path, sampler):
    recorded = load_recorded(_cache(tmp_path))
    assert [r.seed for r in run_repeats(recorded, sampler, 2, 2, seed=2**32 - 2)] == [2**32 - 2, 2**32 - 1]
    with pytest.raises(AutotuneError) as refused:
        run_repeats(recorded, sampler, 2, 2, seed=2**32 - 1)
    assert str(refused.value) == ("--seed 4294967295 with --repeats 2 needs seeds up to 4294967296, past the "
                                  "largest, 4294967295; give --seed 4294967294 or less")


def test_each_strategy_name_makes_the_sampler_it_names(tmp_path):
    # A factory that made nothing left Optuna's default in its place: `--sampler random` would search with TPE and
    # its scores stand in the benchmark's table as random search's.
    import optuna

    from autotune.forest import ForestSampler
    from autotune.linear import LinearSampler
    from autotune.portfolio import HandingOver, TakingTurns
    from autotune.samplers import HAND_OVER, make_sampler

    space = load_recorded(_cache(tmp_path)).space
    made = {name: make_sampler(name, 0, space) for name in SAMPLERS}
    tpe = optuna.samplers.TPESampler
    assert {name: type(sampler) for name, sampler in made.items()} == {
        "tpe": tpe, "tpe-multivariate": tpe, "linear": LinearSampler, "linear-tpe": TakingTurns,
        "tpe-linear": HandingOver, "forest": ForestSampler, "genetic": optuna.samplers.NSGAIISampler,
        "random": optuna.samplers.RandomSampler}
    assert made["tpe-multivariate"]._multivariate and made["tpe-multivariate"]._group  # Optuna 5's attributes
    assert not made["tpe"]._multivariate
    # Optuna calls TPE's `group` argument (tpe-multivariate's) experimental and warns as a sampler is made with it: a
    # warning about Optuna's interface, nothing the user chose or can act on. None is said.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in SAMPLERS:
            make_sampler(name, 0, space)
    assert [type(s) for s in made["linear-tpe"].samplers] == [LinearSampler, tpe]
    assert [type(s) for s in made["tpe-linear"].samplers] == [tpe, LinearSampler]
    assert made["tpe-linear"].after == HAND_OVER == 30  # the README's "TPE for the first 30 configs measured"
    # Workers on one study: the constant liar steers those asking at once apart; one process needs none.
    for name in ("tpe", "tpe-multivariate"):
        assert make_sampler(name, 0, space, parallel=True)._constant_liar and not made[name]._constant_liar
    assert made["genetic"]._population_size == 20  # as the README's table of strategies says and measured it
    with pytest.raises(UnknownNameError, match=f"^unknown sampler 'annealing'; valid: {', '.join(sorted(SAMPLERS))}$"):
        make_sampler("annealing", 0, space)  # from Python, not through a command or a Tuner, which refuse it first


def test_json_takes_one_strategy_and_a_strategy_named_twice_is_one():
    from autotune.simulate import strategies_asked

    assert strategies_asked(("tpe", "tpe"), True, True, False) == ["tpe"]
    assert strategies_asked((), False, False, True) == [DEFAULT]
    with pytest.raises(AutotuneError, match="--json prints one strategy's repeats: give at most one --sampler"):
        strategies_asked(("tpe", "random"), True, True, False)


def test_a_table_names_every_budget_and_gives_the_cost_on_the_strategys_row_alone():
    from autotune.simulate import simulation_table

    figures = {"mean": 0.5, "std": 0.25}
    summary = {**{m: figures for m in ("20", "50", "100", "time 20", "time 50", "time 100")},
               "seconds_per_evaluation": 0.0123}
    recorded = SimpleNamespace(source="x.json", optimum=1.0, objective="time", direction="minimize")
    table = simulation_table(recorded, {"tpe": summary}, 3)
    strategy, by_time = [line for line in table.splitlines() if line.split()[0] in ("tpe", "by")]
    assert strategy.split()[-1] == "12.3" and by_time.split()[-1] == "0.25"
    assert "at the time that 20, 50 and 100 evaluations take on average" in table


# -- a maximised objective ----------------------------------------------------------------

@pytest.mark.parametrize("objective, higher_is_better, direction", [
    ("time", None, "minimize"), ("energy", None, "minimize"), ("GFLOP/s", None, "maximize"),
    ("GB/s", None, "maximize"), ("TFLOPS", None, "maximize"), ("GFLOP/s", False, "minimize"), ("score", True, "maximize"),
])
def test_the_direction_is_the_files_or_kernel_tuners_default(objective, higher_is_better, direction):
    assert direction_of(objective, higher_is_better) == direction


def test_a_maximised_objective_is_searched_and_scored_the_right_way_up(tmp_path):
    recorded = load_recorded(_cache(tmp_path, objective="GFLOP/s"))
    assert recorded.direction == "maximize"
    best = 1000 / (100 / 8 + 1)
    assert recorded.optimum == pytest.approx(best) and recorded.worst == pytest.approx(1000 / (100 + 3))
    ok = recorded.result({"x": 8, "y": 10})
    assert ok.throughput == pytest.approx(best) and recorded.objective_of(ok) == pytest.approx(best)
    assert recorded.loss_of(recorded.entries["8,10"]) == pytest.approx(1 / best)  # what the benchmarks minimise
    assert recorded.result({"x": 2, "y": 20}).status == "error"
    # b(M) is the expected best (the highest) of a random draw.
    keys = list(recorded.entries)
    for m in (1, 3, 5):
        bests = [max(v) for draw in itertools.combinations(keys, m)
                 if (v := [recorded.entries[k]["GFLOP/s"] for k in draw if not isinstance(recorded.entries[k]["GFLOP/s"], str)])]
        assert expected_random_best(recorded, m) == pytest.approx(sum(bests) / len(bests), rel=1e-9)
    # A search of the whole space climbs to the optimum and scores 1; a search that found the worst scores below 0.
    whole = simulate(recorded, 10, seed=0)
    found = [v for v in whole.best_so_far if v is not None]
    assert found == sorted(found) and found[-1] == pytest.approx(best)
    assert score(recorded, whole.best_so_far, 10) == pytest.approx(1.0)
    assert score(recorded, [recorded.worst] * 3, 3) < 0 < score(recorded, [best] * 3, 3) == pytest.approx(1.0)
    # Random search still scores about 0.
    rng = random.Random(0)
    scores = []
    for _ in range(2000):
        values = [recorded.entries[k]["GFLOP/s"] for k in rng.sample(keys, 3)]
        runs = [v for v in values if not isinstance(v, str)]
        if runs:
            scores.append(score(recorded, [max(runs)] * 3, 3))
    assert abs(sum(scores) / len(scores)) < 0.05


def test_the_simulate_command_says_the_direction_it_took(tmp_path):
    path = _cache(tmp_path, objective="GFLOP/s")
    done = subprocess.run([sys.executable, "-m", "autotune", "simulate", "--recorded", str(path), "--trials", "10",
                           "--repeats", "1", "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["objective"] == "GFLOP/s" and data["direction"] == "maximize"
    assert data["repeats"][0]["best_so_far"][-1] == pytest.approx(data["optimum"]) == pytest.approx(1000 / 13.5)


# -- the held-out space --------------------------------------------------------------------

def test_the_held_out_space_reads_as_its_readme_says_and_a_search_replays_on_it():
    """benchmarks/held_out/README.md gives its size and optimum; a tiny search evaluates only its recorded configs."""
    from tests.conftest import HELD_OUT

    recorded = load_recorded(HELD_OUT)
    assert len(recorded.entries) == 6768
    assert len(recorded.times) == 5256
    assert recorded.optimum == pytest.approx(0.9003, abs=1e-4) and recorded.direction == "minimize"
    run = simulate(recorded, 5, seed=0)
    times = set(recorded.times)
    assert run.evaluations == 5 and all(v is None or v in times for v in run.best_so_far)


def test_simulate_takes_a_recorded_file_or_a_study_not_both(tmp_path):
    from tests.conftest import run_cli

    for both in (["--study", "steady-cpu-tiny", "--recorded", "x.json"], ["--recorded", "x.json", "--storage",
                 "sqlite:///y.db"], []):  # a storage is a study's: with a file it is refused, not left unread
        done = run_cli("simulate", *both, cwd=tmp_path, timeout=60)
        assert done.returncode == 2 and "give one of --recorded FILE" in done.stderr, both


# With -m slow (11 s): tests/test_record_space.py replays studies a search wrote (every config, a partial one)
# in the default run; this one goes through the command line.
@pytest.mark.slow
def test_a_search_study_replays_through_the_simulate_command(tmp_path):
    # A study that `search` wrote is a recorded space of the configs it measured: a replay evaluates only those,
    # and reports their recorded times (ms per item, 1000 / throughput). The millisecond workload: any would do.
    import optuna

    from tests.conftest import BROKEN, run_cli

    steady = BROKEN.replace("broken.py:BrokenWorkload", "steady.py:SteadyWorkload")
    done = run_cli("search", "-w", steady, "-d", "cpu", "-n", "4", "--min-time", "0.05", "--remeasure-rounds", "1",
                   "--remeasure-top", "1", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    storage = f"sqlite:///{tmp_path / 'studies' / 'autotune.db'}"
    trials = optuna.load_study(study_name="steady-cpu-tiny", storage=storage).trials
    times = {1000 / t.user_attrs["throughput"] for t in trials if t.user_attrs.get("status") == "ok"}
    replay = run_cli("simulate", "--study", "steady-cpu-tiny", "--trials", "3", "--repeats", "2", "--json",
                     cwd=tmp_path, timeout=120)
    assert replay.returncode == 0, replay.stderr
    data = json.loads(replay.stdout)
    assert data["recorded"] == "sqlite:///studies/autotune.db study steady-cpu-tiny" and data["optimum"] == min(times)
    assert all(v is None or any(v == pytest.approx(t) for t in times) for r in data["repeats"] for v in r["best_so_far"])
    # The database given as --recorded is one line naming the option that replays it, and that option does.
    wrong = run_cli("simulate", "--recorded", "studies/autotune.db", cwd=tmp_path, timeout=60)
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1, wrong.stderr
    assert wrong.stderr.split("--storage ")[1].split()[0] == storage  # the storage the replay above read
