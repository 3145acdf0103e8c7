"""The architecture holds: settings handed to workers as JSON, modules that import alone, no import cycle."""

import ast
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from autotune.settings import SearchSettings

ROOT = Path(__file__).resolve().parent.parent


def test_settings_round_trip_through_json_without_the_storage(tmp_path):
    settings = SearchSettings("chmm", "cpu", "tiny", storage="postgresql://u:secret@h/db", threads=1, seed=7,
                              memory_budget_bytes=2**30, time_budget=30.0, quiet=True)
    path = settings.write(tmp_path / "settings.json")
    assert "secret" not in path.read_text() and "storage" not in json.loads(path.read_text())
    assert SearchSettings.read(path, storage=settings.storage) == settings


def _tuner_made(monkeypatch, settings, **given):
    """What ``settings.tuner(**given)`` gives the Tuner it makes (its arguments as ``args``), and the runners made."""
    import autotune.runner
    import autotune.tuner

    made, runners = {}, []
    monkeypatch.setattr(autotune.runner, "Runner", lambda *args: runners.append(args) or SimpleNamespace(
        start=lambda: None))
    monkeypatch.setattr(autotune.tuner, "Tuner", lambda *args, **kwargs: made.update(kwargs, args=args))
    settings.tuner(**given)
    return made, runners


@pytest.mark.parametrize("storage, heartbeat", [("postgresql://u@h/db", 60), ("sqlite:///s.db", None),
                                                ("studies/chmm.journal", None), (None, None)])
def test_settings_give_a_tuner_a_heartbeat_on_a_database_server_alone(monkeypatch, storage, heartbeat):
    # A worker's heartbeat marks its trial alive on a server; in a file, the pid and start its trial records do.
    made, _ = _tuner_made(monkeypatch, SearchSettings("chmm", storage=storage, heartbeat=60))
    assert made["heartbeat"] == heartbeat


def test_every_setting_reaches_the_tuner_it_makes(monkeypatch):
    # One the tuner was not given would search at its default without a word (a memory budget ignored, say).
    on_trial, on_stage = print, len  # any two callables, told apart
    made, runners = _tuner_made(monkeypatch, SearchSettings(
        "chmm", "cpu", "tiny", storage="postgresql://u@h/db", study_name="mine", studies="elsewhere",
        isolation="inprocess", trial_timeout=30.0, memory_budget_bytes=2**30, memory_limit_bytes=2**31, min_time=0.5,
        remeasure_top=2, remeasure_rounds=4, time_budget=60.0, seed=7, threads=1, heartbeat=20, grace_period=90,
        sampler="random"), on_trial=on_trial, on_stage=on_stage)
    assert runners == [("inprocess", 30.0)] and made.pop("runner") is not None
    assert made == {"args": ("chmm", "cpu", "tiny"), "storage": "postgresql://u@h/db", "study_name": "mine",
                    "studies": "elsewhere", "memory_budget_bytes": 2**30, "memory_limit_bytes": 2**31,
                    "measurer": {"min_time": 0.5}, "remeasure_top": 2, "remeasure_rounds": 4, "time_budget": 60.0,
                    "seed": 7, "threads": 1, "on_trial": on_trial, "on_stage": on_stage, "heartbeat": 20,
                    "grace_period": 90, "sampler": "random", "trial_timeout": 30.0}


def test_settings_default_to_what_search_does_without_the_option():
    # A script that makes SearchSettings("chmm") runs the search `autotune search -w chmm` runs: the docstring
    # says the CLI's defaults, and nothing but this test holds them together.
    import dataclasses

    from autotune.cli import cli

    options = {p.name: p.default for p in cli.commands["search"].params}
    options["quiet"] = False  # a flag: off unless given
    options.update(memory_budget_bytes=options["memory_budget"], memory_limit_bytes=options["memory_limit"])
    defaults = {f.name: f.default for f in dataclasses.fields(SearchSettings) if f.name != "workload"}
    assert defaults == {name: options[name] for name in defaults}


def test_a_tuner_made_in_python_searches_as_the_command_line_does():
    # Tuner("chmm").search() in a notebook: the trials, the candidates and the rounds of `autotune search -w chmm`.
    import inspect

    from autotune.cli import cli
    from autotune.tuner import Tuner

    options = {p.name: p.default for p in cli.commands["search"].params}
    made = inspect.signature(Tuner).parameters
    assert {name: made[name].default for name in ("remeasure_top", "remeasure_rounds")} == {
        "remeasure_top": options["remeasure_top"], "remeasure_rounds": options["remeasure_rounds"]}
    assert inspect.signature(Tuner.search).parameters["n_trials"].default == options["trials"]


@pytest.mark.parametrize("seed, worker, expected", [(7, 2, 9), (2**32 - 1, 1, 0)])  # a sampler takes 32 bits
def test_a_worker_seed_is_offset_by_its_index(seed, worker, expected):
    # --seed 4294967295 --workers 2: worker 1 died on a seed numpy refuses, said as "cannot open storage".
    tuner = SearchSettings("chmm", "cpu", "tiny", seed=seed, studies="/nonexistent").tuner(worker_index=worker)
    try:
        assert tuner.seed == expected and tuner.threads is None
        tuner._sampler()  # numpy refuses a seed past 32 bits here
    finally:
        tuner.close()


MODULES = [
    "autotune", "autotune.cli", "autotune.config", "autotune.console", "autotune.export", "autotune.loop",
    "autotune.report", "autotune.runner", "autotune.selection", "autotune.settings", "autotune.shared_study",
    "autotune.space", "autotune.trials", "autotune.tuner", "autotune.workload", "autotune.workers",
    "autotune._worker", "autotune.cli_options", "autotune.stored", "autotune.registry", "autotune.tuned", "autotune.parameters", "workloads.chmm",
    "workloads.lsd", "workloads._torch", "autotune.simulate", "autotune.recorded", "autotune.samplers",
    "autotune.forest", "autotune.linear", "autotune.surrogate", "autotune.portfolio", "autotune.limits",
    "autotune.progress", "autotune.twins",
]


def test_each_module_imports_alone_in_a_fresh_interpreter():
    # Two interpreters at a time (this CI has 2 cores): one at a time took 20 s of the default run.
    from concurrent.futures import ThreadPoolExecutor

    def imported(module):
        return module, subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True,
                                      text=True, timeout=120)

    with ThreadPoolExecutor(2) as pool:
        failed = {module: done.stderr[-2000:] for module, done in pool.map(imported, MODULES) if done.returncode}
    assert not failed, failed


def test_autotune_s_names_are_imported_when_first_read_and_another_is_python_s_attribute_error():
    # `import autotune` imports no torch (load_config's scripts): each name of the API imports its module when read.
    import autotune

    assert autotune.Tuner.__module__ == "autotune.tuner"
    with pytest.raises(AttributeError, match="^module 'autotune' has no attribute 'Tunner'$"):
        autotune.Tunner  # noqa: B018 - the read is the test
    assert not hasattr(autotune, "Tunner")


def test_no_module_of_the_package_is_over_about_400_lines():
    # The workloads are long by nature; the package's modules each hold one stage.
    sizes = {p.name: len(p.read_text().splitlines()) for p in (ROOT / "autotune").glob("*.py")}
    assert max(sizes.values()) <= 450, sizes


def _import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere (inside functions too; typing-only imports aside)."""
    modules = {}
    for path in [*(ROOT / "autotune").glob("*.py"), *(ROOT / "workloads").glob("*.py")]:
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and getattr(node.test, "id", None) == "TYPE_CHECKING" for n in ast.walk(node)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def test_the_import_graph_has_no_cycle():
    graph = _import_graph()
    assert "workloads" not in graph["autotune.workload"] and graph["workloads"] == set()
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            assert state.get(target) != 1, " -> ".join([*path, module, target])
            if target not in state:
                visit(target, [*path, module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
