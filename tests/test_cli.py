"""The command line as a user meets it: help, errors, and the JSON shapes scripts rely on."""

import dataclasses
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BROKEN, run_cli

COMMANDS = ["search", "best", "report", "run", "explain", "list", "devices"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(tmp_path, command):
    done = run_cli(command, "--help", cwd=tmp_path)
    assert done.returncode == 0
    assert "autotune " + command in done.stdout or command in ("list", "devices")
    assert "Example" in done.stdout


def test_autotune_alone_prints_its_help_and_exits_2(tmp_path):
    done = run_cli(cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert done.stdout.startswith("Usage: autotune") and "autotune search --workload chmm" in done.stdout
    assert "error" not in done.stdout + done.stderr


def _parsed(command, *args):
    """What a command is given for ``args``, parsed as click parses a command line, nothing run."""
    from autotune.cli import cli

    return cli.commands[command].make_context(command, list(args)).params


def test_each_command_s_options_their_defaults_bounds_and_help(monkeypatch):
    # Parsed as click parses a command line, nothing run: the values a command is given where the user gives none,
    # the edges its whole numbers take, its flags taking no value, and the defaults its --help says.
    import click

    from autotune.cli import cli

    monkeypatch.delenv("AUTOTUNE_STORAGE", raising=False)
    parsed = _parsed

    def refused(command, *args):
        with pytest.raises(click.UsageError):
            parsed(command, *args)

    shared = {"workload": "chmm", "device": "auto", "size": None, "studies": None}
    measured = {"min_time": 1.0, "trial_timeout": None, "isolation": "subprocess", "threads": None}
    assert parsed("search", "-w", "chmm") == {
        **shared, **measured, "trials": 20, "storage": None, "study_name": None, "workers": None, "gpus": None,
        "heartbeat": 10, "grace_period": 60, "memory_budget": None, "memory_limit": None, "remeasure_top": 3,
        "remeasure_rounds": 3, "time_budget": None, "seed": None, "sampler": None, "quiet": False, "as_json": False}
    assert parsed("simulate") == {"recorded_path": None, "study_name": None, "storage": None, "trials": 100,
                                  "repeats": 20, "seed": 0, "samplers": (), "as_json": False}
    assert parsed("explain", "-w", "chmm") == {**shared, **measured, "config_file": None, "from_export": False,
                                               "rounds": 3, "as_json": False}
    assert parsed("report", "-w", "chmm") == {**shared, "storage": None, "study_name": None, "output": None}
    assert parsed("run", "-w", "chmm") == {**shared, **measured, "assignments": (), "from_baseline": False,
                                           "config_file": None, "as_json": False}
    # Flags take no value: the word after one is the next option's.
    flags = parsed("search", "-w", "chmm", "-q", "--json", "-n", "0", "--workers", "1", "--remeasure-top", "1",
                   "--remeasure-rounds", "1", "--seed", "0")
    assert (flags["quiet"], flags["as_json"], flags["trials"], flags["remeasure_top"]) == (True, True, 0, 1)
    assert parsed("simulate", "--json", "-n", "1", "--repeats", "1")["as_json"] is True
    assert parsed("explain", "-w", "chmm", "--from-export", "--json", "--rounds", "1")["from_export"] is True
    assert parsed("run", "-w", "chmm", "--baseline", "--json")["from_baseline"] is True
    assert parsed("best", "-w", "chmm", "--json")["as_json"] is True and parsed("devices", "--json")["as_json"]
    for command, option in [("search", "--trials=-1"), ("search", "--workers=0"), ("search", "--remeasure-top=0"),
                            ("search", "--remeasure-rounds=0"), ("search", "--heartbeat=0"),
                            ("search", "--grace-period=0"), ("search", "--seed=-1"), ("explain", "--rounds=0")]:
        refused(command, "-w", "chmm", option)
    for option in ("--trials=0", "--repeats=0", "--seed=-1"):
        refused("simulate", option)

    def helped(command):
        return " ".join(cli.commands[command].get_help(click.Context(cli.commands[command])).split())

    search, simulate, explain = helped("search"), helped("simulate"), helped("explain")
    assert "it need not be on this machine. [default: auto]" in helped("report")
    for said in ("resumes it. [default: 20; x>=0]", "heartbeats on a database server. [default: 10; 1<=x<=",
                 "re-run once. [default: 60; 2<=x<=", "beside other work. [default: 3; x>=1]",
                 "the winner of the whole ones). [default: 3; x>=1]"):
        assert said in search, said
    for said in ("simulated search. [default: 100; x>=1]", "S+1, ... [default: 20; x>=1]",
                 "first repeat. [default: 0; 0<=x<="):
        assert said in simulate, said
    assert "keeps the whole ones). [default: 3; x>=1]" in explain


def test_each_option_of_each_command_refuses_a_value_of_the_wrong_kind_and_reads_the_storage_s_variable(
        monkeypatch, tmp_path):
    # Parsed as click parses a command line, nothing run: each option of a type of its own refuses a value of the
    # wrong kind as a usage error. Left a plain string, the value went on unchecked ("--study ''", an unset variable,
    # to the default study), and "report -o -" meant no standard output without its dash.
    import click

    monkeypatch.delenv("AUTOTUNE_STORAGE", raising=False)
    parsed = _parsed
    wrong = {"--storage": "", "--study": "", "--memory-budget": "lots", "--memory-limit": "lots",
             "--timeout": "soon", "--recorded": str(tmp_path), "--output": str(tmp_path), "--config": str(tmp_path)}
    for command, options in {"search": ["--storage", "--study", "--memory-budget", "--memory-limit", "--timeout"],
                             "simulate": ["--recorded", "--study", "--storage"],
                             "report": ["--storage", "--study", "--output"], "run": ["--config"],
                             "explain": ["--config"]}.items():
        for option in options:
            with pytest.raises(click.BadParameter, match=re.escape(repr(wrong[option])) + "|is a directory"):
                parsed(command, "-w", "chmm", option, wrong[option]) if command != "simulate" else \
                    parsed(command, option, wrong[option])
    search = parsed("search", "-w", "chmm", "--memory-budget", "1GiB", "--memory-limit", "2GiB", "--timeout", "60")
    assert (search["memory_budget"], search["memory_limit"], search["time_budget"]) == (2**30, 2**31, 60.0)
    assert parsed("report", "-w", "chmm", "-o", "-")["output"] == Path("/dev/stdout")  # the page on standard output
    assert parsed("run", "-w", "chmm", "--config", "c.json")["config_file"] == Path("c.json")
    assert parsed("explain", "-w", "chmm", "--config", "c.json")["config_file"] == Path("c.json")
    monkeypatch.setenv("AUTOTUNE_STORAGE", f"sqlite:///{tmp_path}/s.db")  # where --storage is not given
    assert parsed("search", "-w", "chmm")["storage"] == parsed("report", "-w", "chmm")["storage"] == \
        f"sqlite:///{tmp_path}/s.db"
    # -h as --help, and lines of up to 100 columns on a terminal as wide (click's own stop at 80); in a process of
    # its own, as click keeps the first help option it makes for a command, and the contexts above (made without the
    # group's settings) gave theirs "--help" alone.
    helped = run_cli("run", "-h", cwd=tmp_path, env={"COLUMNS": "200"}, timeout=120)
    assert helped.returncode == 0 and "--set NAME=VALUE" in helped.stdout, helped.stderr
    assert 80 < max(map(len, helped.stdout.splitlines())) <= 100


def test_each_option_of_search_run_and_explain_reaches_the_settings_their_tuner_is_made_from(monkeypatch, tmp_path):
    # Parsed, then dropped on the way to SearchSettings, an option searched at its default without a word (a memory
    # budget, a seed, a study's storage): each is given a value other than its default and read back from the
    # settings the command makes its Tuner from, the Tuner itself not made.
    from click.testing import CliRunner

    import autotune.progress
    from autotune import settings as settings_module
    from autotune.cli import cli
    from autotune.console import warnings_only
    from autotune.progress import Progress

    made = []

    class Made(Exception):
        pass

    def tuner(self, **callbacks):
        made.append((self, callbacks))
        raise Made

    monkeypatch.setattr(settings_module.SearchSettings, "tuner", tuner)
    monkeypatch.delenv("AUTOTUNE_STORAGE", raising=False)
    measured = {"studies": str(tmp_path), "isolation": "inprocess", "trial_timeout": 7.0, "min_time": 0.3,
                "threads": 1}
    # inprocess with a trial timeout, a pair the Tuner would refuse: it is not made here.
    common = ["-w", "chmm", "-d", "cpu", "-s", "tiny", "--studies", str(tmp_path), "--isolation", "inprocess",
              "--trial-timeout", "7", "--min-time", "0.3", "--threads", "1"]
    given = {"storage": f"sqlite:///{tmp_path}/s.db", "study_name": "mine", "sampler": "random", "quiet": True,
             "memory_budget_bytes": 2**30, "memory_limit_bytes": 2**31, "seed": 5, "remeasure_top": 2,
             "remeasure_rounds": 4, "time_budget": 60.0, "heartbeat": 11, "grace_period": 70}
    done = CliRunner().invoke(cli, ["search", *common, "--storage", given["storage"], "--study", "mine", "--sampler",
                                    "random", "-q", "--memory-budget", "1GiB", "--memory-limit", "2GiB", "--seed", "5",
                                    "--remeasure-top", "2", "--remeasure-rounds", "4", "--timeout", "60",
                                    "--heartbeat", "11", "--grace-period", "70"])
    assert isinstance(done.exception, Made), done.output
    settings, kwargs = made.pop()
    wanted = settings_module.SearchSettings("chmm", "cpu", "tiny", **measured, **given)
    assert settings == wanted
    defaults = settings_module.SearchSettings("chmm")  # every setting given a value of its own: none passes unread
    assert [f.name for f in dataclasses.fields(wanted) if getattr(wanted, f.name) == getattr(defaults, f.name)] == \
        ["workload"]
    assert set(kwargs) == {"on_trial", "on_stage"}
    assert (kwargs["on_trial"].__func__, kwargs["on_stage"].__func__) == (Progress.trial, Progress.stage)
    assert kwargs["on_trial"].__self__.memory_budget_bytes == 2**30  # its lines mark a trial over the budget
    monkeypatch.setattr(autotune.progress, "terminal_width", lambda: 100)  # as on a terminal: explain's bar
    for command, extra, on_stage in (("run", [], warnings_only), ("explain", ["--rounds", "1"], Progress.stage)):
        done = CliRunner().invoke(cli, [command, *common, *extra])
        assert isinstance(done.exception, Made), done.output
        settings, kwargs = made.pop()
        assert settings == settings_module.SearchSettings("chmm", "cpu", "tiny", **measured), command
        assert set(kwargs) == {"on_stage"} and getattr(kwargs["on_stage"], "__func__", kwargs["on_stage"]) is on_stage
    progress = kwargs["on_stage"].__self__
    assert progress.bar.unit == "config"  # explain counts configs, each measured once a round: no trials
    progress.close()


def test_report_draws_the_study_its_options_name_from_the_folder_of_studies_given(monkeypatch, tmp_path):
    # `--studies` dropped on the way drew the study of ./studies (every other test of report runs there), and wrote
    # the page beside the wrong export. The report itself not drawn: what it is given is read back.
    from click.testing import CliRunner

    import autotune.report
    from autotune.cli import cli

    given = []
    monkeypatch.setattr(autotune.report, "report", lambda *args, **kwargs: given.append((args, kwargs)) or
                        tmp_path / "r.html")
    monkeypatch.delenv("AUTOTUNE_STORAGE", raising=False)
    storage = f"sqlite:///{tmp_path}/s.db"
    done = CliRunner().invoke(cli, ["report", "-w", "chmm", "-d", "cpu", "-s", "tiny", "--storage", storage,
                                    "--study", "mine", "--studies", str(tmp_path / "elsewhere"), "-o",
                                    str(tmp_path / "r.html")])
    assert done.exit_code == 0, done.output
    assert given == [(("chmm", "cpu", "tiny"), {"storage": storage, "study_name": "mine",
                                                "studies": tmp_path / "elsewhere", "output": tmp_path / "r.html"})]
    assert done.output == f"Report written to {tmp_path / 'r.html'}\n"


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["search", "--workload", "nope"], "unknown workload 'nope'; valid: chmm"),
        (["search", "--workload", "chmm", "--device", "v100"], "device 'v100'"),
        (["search", "--workload", "chmm", "--device", "tpu"], "unknown device 'tpu'; valid:"),
        (["search", "--workload", "chmm", "--device", "cuda"], "--device cuda names a CUDA GPU and this machine has none"),
        (["best", "--workload", "chmm", "--device", "cuda"], "--device cuda names a CUDA GPU and this machine has none"),
        (["report", "--workload", "chmm", "--device", "cuda"], "--device cuda names a CUDA GPU and this machine has none"),
        (["search", "--workload", "chmm", "--size", "huge"], "unknown size 'huge'; valid: full, small, tiny. Those are"),
        (["best", "--workload", "chmm", "--size", "huge"], "unknown size 'huge'; valid: full, small, tiny. Those are"),
        # An empty size (an unset variable in a script) was the default size, in load_config no size at all.
        (["search", "--workload", "chmm", "--size", ""], "unknown size ''; valid: full, small, tiny. Those are"),
        (["best", "--workload", "chmm", "--device", "h100", "--size", ""], "unknown size ''; valid: full, small, tiny"),
        (["best", "--workload", "chmm", "--size", "full"], "at size 'full' (looked in"),
        (["best", "--workload", "chmm", "--device", "cpu", "-s", "tiny"], "--device cpu --size tiny`"),
        (["search", "--workload", "chmm", "--trials", "-1"], "--trials"),
        # 0 re-measures and exports what a study measured: a new one has nothing to, and is not made.
        (["search", "--workload", "chmm", "--trials", "0"], "--trials 0 re-measures and exports the configs study "
                                                             "chmm-cpu-small measured, and it has measured none in"),
        (["search", "--workload", "chmm", "--trials", "0", "--storage", "s.journal"],
         "--trials 0 re-measures and exports a study searched by one process in its SQLite file"),
        # "" (an unset variable): the default storage, and for --studies this folder, silently.
        (["search", "--workload", "chmm", "--storage", ""], "Invalid value for '--storage': '' names no storage"),
        (["report", "--workload", "chmm", "--storage", " "], "Invalid value for '--storage': ' ' names no storage"),
        (["simulate", "--study", "x", "--storage", ""], "Invalid value for '--storage': '' names no storage"),
        (["search", "--workload", "chmm", "--studies", ""], "Invalid value for '--studies': '' names no folder"),
        (["best", "--workload", "chmm", "--studies", ""], "Invalid value for '--studies': '' names no folder"),
        # "-" made a journal file, or a studies folder, named "-".
        (["search", "--workload", "chmm", "--storage", "-"], "Invalid value for '--storage': '-' names no storage"),
        (["search", "--workload", "chmm", "--studies", "-"], "Invalid value for '--studies': '-' names no folder"),
        # A URL mistyped was a journal in a folder named "sqlite:"; one that names no file, or a folder, left a lock
        # file behind (":memory:.search.lock", "..search.lock") before it was refused.
        (["search", "--workload", "chmm", "--storage", "sqlite:/x.db"], "'sqlite:/x.db' lacks the '//' of a URL"),
        (["search", "--workload", "chmm", "--storage", "sqlite:///:memory:"], ":memory:' names no database file"),
        (["search", "--workload", "chmm", "--storage", "sqlite:///"], "'sqlite:///' names no database file"),
        (["report", "--workload", "chmm", "--storage", "studies/"], "'studies/' is a folder: a journal is a file"),
        (["search", "--workload", "chmm", "--memory-budget", "lots"], "is not a size"),
        (["search", "--bogus"], "No such option"),
        (["run", "--workload", "chmm", "--set", "dtype=float8"], "dtype='float8' is not allowed; choose one of: float64"),
        (["run", "--workload", "chmm", "--set", "colour=red"], "unknown parameter in --set 'colour'; valid: chunk_size, debug_asserts"),
        (["run", "--workload", "chmm", "--set", "dtype"], "must look like name=value"),
        (["run", "--workload", "chmm", "--set", "dtype=float32", "--set", "dtype=float64"],
         "--set dtype is given twice; give each knob once"),
        (["run", "--workload", "tests/nothing.py:Nope"], "does not exist"),
        (["best", "--workload", "chmm", "--device", "cpu"], "no tuned config for workload 'chmm'"),
        (["report", "--workload", "chmm", "--device", "cpu"], "no study storage at sqlite:///studies/autotune.db"),
        (["report", "--workload", "chmm", "--device", "tpu"], "unknown device 'tpu'"),
        # A GPU without a profile files its studies under its derived name: named from any machine.
        (["best", "--workload", "chmm", "--device", "cuda-nvidia-l4"], "no tuned config for workload 'chmm' on device 'cuda-nvidia-l4'"),
        (["report", "--workload", "chmm", "--device", "cuda-nvidia-l4"], "no study storage at"),
        (["run", "--workload", "chmm", "--set", "messages=loop", "--set", "chunk_size=128"],
         "chunk_size=128 has no effect here: chunk_size applies only when messages in ['scan', 'chained'], and here "
         "messages=loop; leave chunk_size out, or set messages so that it applies"),
        (["run", "--workload", "chmm", "--set", "messages=numba", "--set", "dtype=float16"],
         "--set messages=numba dtype=float16: the config breaks the space's constraint \"messages != 'numba' or dtype"),
        (["run", "--workload", "chmm", "--set", "messages=chained"],
         "messages='chained' needs cuda, which this device lacks; choose one of: loop,"),
        (["search", "--workload", "chmm", "--memory-budget", "1e400"], "is not a size between"),
        (["search", "--workload", "chmm", "--memory-limit", "0"], "is not a size between"),
        (["simulate", "--recorded", str(Path(__file__).parent.parent / "benchmarks/recorded/chmm_cpu_tiny.json.gz"),
          "--seed", "4294967295", "--repeats", "3"], "--seed 4294967295 with --repeats 3 needs seeds up to 4294967297, past the largest, 4294967295"),
        # Refused before the server is asked (port 1 refuses): a live worker would be taken for dead between beats.
        (["search", "--workload", "chmm", "--storage", "postgresql://u@localhost:1/db", "--heartbeat", "5",
          "--grace-period", "9"], "--grace-period 9 is under twice --heartbeat 5: a live worker beats every 5 s"),
        (["search", "--workload", "chmm", "--trial-timeout", "-5"], "not a positive, finite number of seconds"),
        (["search", "--workload", "chmm", "--trial-timeout", "nan"], "not a positive, finite number of seconds"),
        (["search", "--workload", "chmm", "--trial-timeout", "0"], "not a positive, finite number of seconds"),
        (["search", "--workload", "chmm", "--min-time", "-1"], "not a positive, finite number of seconds"),
        (["run", "--workload", "chmm", "--min-time", "nan"], "not a positive, finite number of seconds"),
        # Longer than a thread's wait, select() or a timedelta can take: an OverflowError traceback, and with a
        # grace period every worker died of one.
        (["run", "--workload", "chmm", "--trial-timeout", "1e300"], "'1e300' is over the longest wait autotune takes"),
        (["search", "--workload", "chmm", "--grace-period", "99999999999999"], "not in the range 2<=x<=1000000000"),
        (["search", "--workload", "chmm", "--seed", "1.5"], "'--seed': '1.5' is not a valid whole number."),
        (["best", "--workload", "nope", "--device", "cpu"], "unknown workload 'nope'; valid: chmm"),
        (["search", "--workload", "my_workload.py"], "To load a workload from the file my_workload.py, name its class: "
                                                     "my_workload.py:ClassName"),
        (["search", "--workload", BROKEN.replace(":BrokenWorkload", ":Check")],
         "broken.py defines 'Check', but not as a subclass of autotune.Workload"),  # not "unknown" alone
        (["search", "--workload", "chmm", "--study", ""], "'' is not a study name"),
        (["report", "--workload", "chmm", "--study", "  "], "'  ' is not a study name"),
        # report and simulate never list a study so named: a search into it made results no one could read.
        # A name longer than the system takes was an OSError traceback from every command.
        (["best", "--workload", "chmm", "--studies", "x" * 300], "/chmm: File name too long"),
        (["report", "--workload", "chmm", "-o", "x" * 300 + ".html"], ".html: File name too long"),
        (["search", "--workload", "x" * 300 + ".py:W"], ".py: File name too long"),
        (["run", "--workload", "chmm", "--isolation", "inprocess", "--trial-timeout", "5"],
         "--trial-timeout kills a trial's own process, and --isolation inprocess runs every trial in this one"),
        (["search", "--workload", "chmm", "--study", "a@export-b"], "'a@export-b' is not a study name: '@export-' "
                                                                     "marks autotune's own studies"),
        (["explain", "--workload", "chmm", "--config", ""], "'--config': '' names no file"),  # was "Is a directory"
        (["run", "--workload", "chmm", "--config", ""], "'--config': '' names no file"),
        # Another machine's preset, measured here: what this device cannot run is said, not replaced.
        (["run", "--workload", "ten", "--device", "cpu", "--config",
          str(Path(__file__).parent.parent / "studies/presets/ten/h100-small.json")],
         "h100-small.json: compile=reduce-overhead is not allowed on device 'cpu'; allowed: none, default"),
        (["search", "--workload", "chmm", "--threads", "100000"], "100000 is not in the range 1<=x<="),
        (["search", "--workload", "chmm", "--memory-budget", "0"], "'--memory-budget': '0' is not a size between"),
        (["search", "--workload", "chmm", "--memory-limit", "5XB"], "'--memory-limit': '5XB' is not a size; use"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, fragment):
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autotune: error: "), done.stderr
    assert fragment in lines[0]
    assert list(tmp_path.iterdir()) == []  # no studies directory, no database


def test_a_storage_from_the_environment_that_names_none_says_so(tmp_path):
    done = run_cli("search", "-w", "chmm", cwd=tmp_path, env={"AUTOTUNE_STORAGE": "sqlite:/x.db"})
    assert done.returncode == 2 and list(tmp_path.iterdir()) == []
    assert ("Invalid value for '--storage': 'sqlite:/x.db' (the value of $AUTOTUNE_STORAGE) lacks the '//' of a URL"
            in done.stderr)


def test_run_measures_a_config_file_with_set_over_it(tmp_path):
    # The H200's ten preset against the H100's took nine --set each on the GPU (2026-11-27), and a preset's
    # knobs that its recurrence leaves inactive were refused there; a file is taken as it is.
    (tmp_path / "scan.json").write_text(json.dumps({"messages": "scan", "chunk_size": 128}))
    done = run_cli("run", "-w", "chmm", "-d", "cpu", "-s", "tiny", "--config", "scan.json", "--set", "dtype=float64",
                   "--min-time", "0.05", "--json", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "ok"
    assert {k: result["config"][k] for k in ("messages", "chunk_size", "dtype", "update_c")} == {
        "messages": "scan", "chunk_size": 128, "dtype": "float64", "update_c": "batched"}  # the rest: the defaults
    (tmp_path / "loop.json").write_text(json.dumps({"messages": "loop", "chunk_size": 128}))
    done = run_cli("run", "-w", "chmm", "-d", "cpu", "-s", "tiny", "--config", "loop.json", cwd=tmp_path, timeout=300)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "autotune: error: --config loop.json: chunk_size=128 has no effect here: chunk_size applies only when messages "
        "in ['scan', 'chained'], and here messages=loop; leave chunk_size out, or set messages so that it applies"]


def test_malformed_space_file_is_named(tmp_path):
    shutil.copy(BROKEN.split(":")[0], tmp_path / "bad.py")
    (tmp_path / "bad.yaml").write_text("schema_version: 1\nparameters:\n  behaviour: {choices: []}\n")
    done = run_cli("search", "--workload", "bad.py:BrokenWorkload", cwd=tmp_path)
    assert done.returncode == 2
    assert "bad.yaml: parameters.behaviour.choices: must be a non-empty list" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.py", "bad.yaml"]


def test_a_workload_whose_name_cannot_name_a_folder_is_refused_and_nothing_is_written(tmp_path):
    # The name is a folder of the studies: "../escaped" wrote its cached reference, and would write its export,
    # outside them. (The other names and sizes refused: tests/test_config.py.)
    steady = Path(BROKEN.split(":")[0]).parent / "steady"
    (tmp_path / "odd.yaml").write_text(steady.with_suffix(".yaml").read_text())
    (tmp_path / "odd.py").write_text(steady.with_suffix(".py").read_text().replace('name = "steady"',
                                                                                    'name = "../escaped"'))
    done = run_cli("run", "--workload", "odd.py:SteadyWorkload", "-d", "cpu", "--studies", "studies", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "workload name '../escaped' cannot name a folder: use letters, digits, '_', '-' and '.'" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["odd.py", "odd.yaml"]


@pytest.mark.parametrize("source", ["copy", "subclass"])
def test_a_workload_named_as_a_built_in_is_refused_and_nothing_is_written(tmp_path, source):
    # A file's copy named "chmm", or a subclass of ChmmWorkload that inherits its name, took chmm's shipped space
    # and study: the built-in's trials were read as its own and its configs failed there (KeyError: 'work').
    steady = Path(BROKEN.split(":")[0]).parent / "steady"
    (tmp_path / "mine.yaml").write_text(steady.with_suffix(".yaml").read_text().replace("workload: steady\n", ""))
    (tmp_path / "mine.py").write_text(
        steady.with_suffix(".py").read_text().replace('name = "steady"', 'name = "chmm"') if source == "copy"
        else "from workloads.chmm import ChmmWorkload\n\n\nclass SteadyWorkload(ChmmWorkload):\n    pass\n")
    done = run_cli("search", "--workload", "mine.py:SteadyWorkload", "-d", "cpu", "--studies", "studies",
                   cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "autotune: error: workload mine.py:SteadyWorkload is named 'chmm', as the built-in workload is: it would share "
        "the built-in's search space, studies, exports and cached reference; give SteadyWorkload a name of its own "
        '(name = "my_chmm")')
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.py", "mine.yaml"]


def test_a_workload_whose_init_takes_other_arguments_is_refused_by_name_before_anything_runs(tmp_path):
    # Every trial makes its workload with (size, device, cache_dir): the reference failed with "TypeError:
    # InitWorkload.__init__() takes 2 positional arguments but 4 were given", after the fork server started.
    steady = Path(BROKEN.split(":")[0]).parent / "steady"
    (tmp_path / "mine.yaml").write_text(steady.with_suffix(".yaml").read_text())
    (tmp_path / "mine.py").write_text(steady.with_suffix(".py").read_text().replace(
        "    def build(self, config):", "    def __init__(self, data_path):\n        super().__init__()\n\n"
                                         "    def build(self, config):"))
    done = run_cli("search", "--workload", "mine.py:SteadyWorkload", "-d", "cpu", "--studies", "studies",
                   cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip() == (
        "autotune: error: workload 'steady': SteadyWorkload must be made as autotune.Workload is, with (size, device, "
        "cache_dir), which its __init__ passes on (too many positional arguments); read other settings in prepare() "
        "or build()")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.py", "mine.yaml"]


def test_a_built_in_named_by_its_own_file_is_that_workload():
    from autotune.registry import get_workload_class

    assert get_workload_class(f"{Path(__file__).parents[1] / 'workloads' / 'chmm.py'}:ChmmWorkload").name == "chmm"


def test_a_workload_file_edited_is_checked_against_its_own_reference(tmp_path):
    # The cached reference was kept per version only: once the file's output changed (a bug fixed), every
    # config of it failed against the old file's reference ("FAILED: value 1 > 1e-12").
    steady = Path(BROKEN.split(":")[0]).parent / "steady"
    (tmp_path / "mine.yaml").write_text(steady.with_suffix(".yaml").read_text())
    source = steady.with_suffix(".py").read_text()
    for output in ("torch.arange(4, dtype=torch.float64)", "torch.arange(4, dtype=torch.float64) * 2"):
        (tmp_path / "mine.py").write_text(source.replace("torch.arange(4, dtype=torch.float64)", output))
        done = run_cli("run", "--workload", "mine.py:SteadyWorkload", "-d", "cpu", "--min-time", "0.01",
                       "--studies", "studies", cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "check        passed" in done.stdout
    assert len(list((tmp_path / "studies" / "cache" / "steady").iterdir())) == 2  # one folder per source


def test_run_json_shape(tmp_path):
    done = run_cli("run", "-w", "chmm", "-s", "tiny", "-d", "cpu", "--min-time", "0.05", "--set", "dtype=float64", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["status"] == "ok" and data["unit"] == "timesteps" and data["config"]["dtype"] == "float64"
    assert data["throughput"] > 0 and data["peak_memory_bytes"] > 0 and data["warmup_seconds"] > 0
    assert set(data["check"]) >= {"error", "tolerance", "passed"} and data["check"]["passed"] is True
    assert data["unused"] == ["chunk_size", "overlap_passes"]  # the scan's and numba's: the loop kernel runs


def test_run_names_the_knobs_that_have_no_effect_under_its_config(tmp_path):
    done = run_cli("run", "-w", "chmm", "-s", "tiny", "-d", "cpu", "--min-time", "0.05", "--set", "messages=scan",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("  config"))
    assert "messages=scan" in line and "chunk_size=" in line  # the scan's chunk size acts
    # The loop kernel's and numba's knobs hold their defaults and do nothing: named, without a value.
    assert line.endswith("(no effect under these: indices, overlap_passes, workspace)"), line
    assert "indices=" not in line and "workspace=" not in line and "overlap_passes=" not in line


# With -m slow, to keep the default run under 10 minutes on a slow day: each workload's check and export keep
# their rules in tests/test_contract.py and tests/test_tuner.py (vlm_mc's crash, a bound of 0 divided by, in
# test_a_zero_tolerance_met_exactly_binds_nothing_and_exports), and chmm's search runs end to end in
# test_search_then_best.
@pytest.mark.slow
@pytest.mark.parametrize("workload", ["vlm_mc", "lsd", "ten", "latentwire"])
def test_a_search_of_each_seed_workload_exports_its_winner(tmp_path, workload):
    # The whole path, export included: vlm_mc's search once crashed after its last trial (a check bound of 0,
    # met exactly by its baseline, divided by), with every trial stored and nothing exported. 5-14 s each.
    done = run_cli("search", "-w", workload, "-d", "cpu", "-s", "tiny", "-n", "2", "--min-time", "0.05",
                   "--remeasure-rounds", "1", "--seed", "0", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    exported = json.loads((tmp_path / "studies" / workload / "cpu-tiny.json").read_text())
    assert exported["check"]["passed"] is True and exported["speedup"] > 0
    # "What each choice did": the verdicts line up under the longest value (vlm_mc's max-autotune-no-cudagraphs).
    rows = done.stdout.split("how its trials ended):\n")[1].split("\n\n")[0].splitlines()
    columns = {re.search(r" (winner|slower|incorrect|failed|not tried|ruled out|over budget|lost re-measure)\b", row).start() for row in rows
               if not row.startswith("  other candidates")}
    assert len(columns) == 1, done.stdout


@pytest.mark.parametrize(
    "workload, unit, knobs",
    # One workload in the default run; the other three (30 s) with -m slow. test_contract runs every knob of each.
    [pytest.param("ten", "tokens", ["recurrence=scan", "chunk_size=8"], marks=pytest.mark.slow),
     pytest.param("vlm_mc", "images", ["precompute=device", "batch_size=16"], marks=pytest.mark.slow),
     pytest.param("latentwire", "tokens", ["batch_size=4", "scaffold=cached"], marks=pytest.mark.slow),
     ("lsd", "frames", ["attention=flash", "batch_size=2"])],
)
def test_run_any_config_of_the_seed_workloads(tmp_path, workload, unit, knobs):
    sets = [arg for knob in knobs for arg in ("--set", knob)]
    done = run_cli("run", "-w", workload, "-s", "tiny", "-d", "cpu", "--min-time", "0.05", *sets, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["status"] == "ok" and data["unit"] == unit and data["check"]["passed"] is True
    assert data["throughput"] > 0


def test_run_of_an_incorrect_config_exits_1(tmp_path):
    done = run_cli("run", "-w", BROKEN, "--min-time", "0.05", "--set", "behaviour=wrong", cwd=tmp_path)
    assert done.returncode == 1
    assert "incorrect" in done.stdout and "FAILED" in done.stdout


def test_search_then_best(tmp_path):
    done = run_cli("search", "-w", "chmm", "-d", "cpu", "-s", "tiny", "-n", "3", "--min-time", "0.05",
                   "--remeasure-rounds", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "[1/3] trial #0   baseline" in done.stderr and "[3/3]" in done.stderr
    for word in ("Best config", "throughput", "peak memory", "baseline", "speedup", "check", "passed"):
        assert word in done.stdout, word
    assert (tmp_path / "studies" / "autotune.db").is_file()
    best = run_cli("best", "-w", "chmm", "-d", "cpu", "--json", cwd=tmp_path)
    assert best.returncode == 0, best.stderr
    document = json.loads(best.stdout)
    for key in ("schema_version", "workload", "device", "size", "config", "measured", "baseline", "speedup",
                "check", "environment", "study", "trial"):
        assert key in document
    assert set(document["measured"]) >= {"throughput", "unit", "peak_memory_bytes", "iqr_seconds"}
    # As in the search's table, the knobs with no effect under the winner are named, not shown with a value.
    best_line = next(line for line in run_cli("best", "-w", "chmm", "-d", "cpu", "-s", "tiny", cwd=tmp_path)
                     .stdout.splitlines() if line.startswith("Best config"))
    assert best_line in done.stdout and "(no effect under these: chunk_size" in best_line, best_line
    for outcome in ("winner", "slower"):
        assert outcome in done.stdout  # what each choice did
    report = run_cli("report", "-w", "chmm", "-d", "cpu", "-s", "tiny", "-o", "out/report.html", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "out" / "report.html").read_text()
    assert page.count('class="plotly-graph-div"') == 5 and "chmm-cpu-tiny" in page
    # To stdout, the page alone (a pipe is written through, not replaced; the message goes to stderr).
    piped = run_cli("report", "-w", "chmm", "-d", "cpu", "-s", "tiny", "-o", "/dev/stdout", cwd=tmp_path)
    assert piped.returncode == 0 and piped.stdout.startswith("<!DOCTYPE html>"), piped.stderr
    assert piped.stdout.rstrip().endswith("</html>") and "Report written to /dev/stdout" in piped.stderr
    # Optuna's own INFO lines kept out (the page's copy of the study in memory was "A new study created in memory").
    assert "[I " not in report.stderr + piped.stderr, report.stderr
    dash = run_cli("report", "-w", "chmm", "-d", "cpu", "-s", "tiny", "-o", "-", cwd=tmp_path)  # wrote a file "-"
    assert dash.returncode == 0 and dash.stdout.startswith("<!DOCTYPE html>"), dash.stderr
    assert dash.stdout.rstrip().endswith("</html>")
    assert not (tmp_path / "-").exists()
    # Into a file the shell opened (`-o - >> log`): written through fd 1, so the log keeps its lines, and no folder
    # but the log's need be writable (a user's `-o /dev/stdout > page.html` was "--output's folder /dev cannot be
    # written"; as root the page replaced the file, and `>>` lost what it held).
    log = tmp_path / "log.txt"
    log.write_text("earlier\n")
    with open(log, "a") as handle:
        appended = subprocess.run([sys.executable, "-m", "autotune", "report", "-w", "chmm", "-d", "cpu", "-s", "tiny",
                                   "-o", "-"], cwd=tmp_path, stdout=handle, stderr=subprocess.PIPE, text=True,
                                  timeout=120)
    assert appended.returncode == 0 and "Report written to /dev/stdout" in appended.stderr, appended.stderr
    assert log.read_text().startswith("earlier\n<!DOCTYPE html>") and log.read_text().rstrip().endswith("</html>")
    stdin = run_cli("explain", "-w", "chmm", "-d", "cpu", "-s", "tiny", "--config", "-", cwd=tmp_path)
    assert stdin.returncode == 2 and "'-' names no file here (standard input is not read)" in stdin.stderr
    # The report names the winner as `best` does: the knobs with no effect without a value that does nothing.
    assert f"exported as: {best_line.split('): ', 1)[1]}; check passed" in page
    missing = run_cli("report", "-w", "chmm", "-d", "cpu", "-s", "tiny", "--study", "nope", cwd=tmp_path)
    assert missing.returncode == 2 and "unknown study 'nope'; valid: chmm-cpu-tiny. Those are chmm's in sqlite:///" \
        in missing.stderr
    # `best` took the size searched; `report` takes the workload's (small) and says which size to pass.
    other_size = run_cli("report", "-w", "chmm", "-d", "cpu", cwd=tmp_path)
    assert other_size.returncode == 2 and "chmm on cpu was searched at size 'tiny' only: pass -s tiny, or run " \
        "`autotune search -w chmm -d cpu -s small` first" in other_size.stderr, other_size.stderr


def test_list_warns_of_a_size_whose_defaults_break_a_constraint():
    # Only a search at tiny said so (exit 2); the listing showed the constraint and nothing amiss.
    from autotune.console import workload_text
    from autotune.space import SearchSpace

    class MicroBatch:
        name, unit, default_size = "mb", "items", "tiny"
        sizes = {"tiny": {"total": 4}, "small": {"total": 16}, "full": {"total": 32}}

    space = SearchSpace.from_dict({"schema_version": 1, "parameters": {"batch": {"choices": [1, 2, 4, 8, 16]}},
                                   "size_parameters": ["total"], "constraints": ["total % batch == 0"],
                                   "defaults": {"batch": 8}, "baseline": {"batch": 1}}, source="mb.yaml")
    lines = workload_text(MicroBatch, space).splitlines()
    assert lines[-2:] == ["  never run unless: total % batch == 0  (total: tiny 4, small 16, full 32)",
                          "  warning: defaults breaks the constraint 'total % batch == 0' at size 'tiny'"]
    # One workload's listing says what each size runs: "small" was a name, with nothing of the job it stands for.
    assert "  size" not in workload_text(MicroBatch, space)
    assert workload_text(MicroBatch, space, sizes=True).splitlines()[1:4] == [
        "  size tiny   total=4", "  size small  total=16", "  size full   total=32"]


def test_list_refuses_a_space_file_copied_from_another_workload_as_search_does(tmp_path):
    # list read the file as it was: a space whose `workload:` named another workload was listed, and search refused it.
    steady = Path(BROKEN.split(":")[0]).parent / "steady"
    (tmp_path / "steady.py").write_text(steady.with_suffix(".py").read_text())
    (tmp_path / "steady.yaml").write_text(steady.with_suffix(".yaml").read_text().replace("workload: steady",
                                                                                          "workload: chmm"))
    done = run_cli("list", "-w", "steady.py:SteadyWorkload", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert "steady.yaml: workload: 'chmm' is not this space's workload, 'steady'" in done.stderr


def test_list_and_devices(tmp_path):
    listing = run_cli("list", cwd=tmp_path)
    assert listing.returncode == 0 and "chmm" in listing.stdout and "update_c" in listing.stdout
    # Each workload's first lines: its unit and sizes, then what it runs, from its space file.
    assert ("chmm  (unit: timesteps; sizes: tiny, small, full; default small)\n  One EM iteration of an "
            "action-conditioned cloned HMM on a random walk.\n") in listing.stdout
    # What each value needs of a device, so that a user sees why a search here does not offer it.
    assert "(needs numba: cpu, numba; chained: cuda; each choice measured on the defaults in a new study)" in listing.stdout
    # The combinations a search never measures, with what each size gives the size parameters they read.
    assert "\n  never run unless: messages != 'numba' or dtype in ['float32', 'float64']\n" in listing.stdout
    assert ("\n  never run unless: global_batch % batch_size == 0  (global_batch: tiny 8, small 32, full 32)\n"
            in listing.stdout)
    assert ("\n  never run unless: cpu or precision != 'fp32' or attention not in ['flash', 'cudnn']  (cpu: true on a "
            "device that has it)\n" in listing.stdout)
    for line in ("ten  (unit: tokens", "vlm_mc  (unit: images", "latentwire  (unit: tokens", "lsd  (unit: frames"):
        assert line in listing.stdout, line
    one = run_cli("list", "-w", "chmm", cwd=tmp_path)  # one workload: what each of its sizes runs, too
    assert one.returncode == 0 and "\n  size tiny   rows=6 cols=6 n_obs=16 clones=4 steps=400 seed=7\n" in one.stdout
    assert "size tiny" not in listing.stdout  # the whole list keeps to the knobs
    # Each workload's columns line up, however long a value (lsd's compile modes, its grad_mode default).
    for block in listing.stdout.strip().split("\n\n"):
        knobs = [line for line in block.splitlines()[2:] if not line.startswith("  never run unless: ")]
        assert len({line.index(" default ") for line in knobs}) == 1, block
        assert len({line.index(" baseline ") for line in knobs}) == 1, block
    found = run_cli("devices", "--json", cwd=tmp_path)
    data = json.loads(found.stdout)
    assert data["detected"][-1]["profile"] == "cpu" and "v100" in data["profiles"]
    # What a search here may use: the profile's capabilities and what detection found (numba, installed by
    # default; bf16 where the processor has it), which the profile table alone does not show.
    from autotune.devices import detect

    here = sorted(detect()[-1].profile.capabilities)
    assert data["detected"][-1]["capabilities"] == here and "numba" in here
    assert "numba" not in data["profiles"]["cpu"]["capabilities"]
    assert f"capabilities here: {', '.join(here)}" in run_cli("devices", cwd=tmp_path).stdout
    # What software a capability lacks here for, where a search leaves its choices out (a C++ compiler).
    lacking = run_cli("devices", cwd=tmp_path, env={"CXX": str(tmp_path / "no-such-compiler")}).stdout
    assert ("\n               lacks compile: torch.compile needs a C++ compiler (g++, or the one $CXX names), and none "
            "is found\n") in lacking
    lacking = json.loads(run_cli("devices", "--json", cwd=tmp_path, env={"CXX": str(tmp_path / "none")}).stdout)
    assert lacking["detected"][-1]["lacks"] == {
        "compile": "torch.compile needs a C++ compiler (g++, or the one $CXX names), and none is found"}


def test_console_script_is_installed():
    script = shutil.which("autotune")
    assert script is not None, "pip install -e . puts `autotune` on PATH"


def test_the_terminal_width_is_stderr_s_where_it_is_a_terminal_and_0_elsewhere(monkeypatch):
    import os
    from types import SimpleNamespace

    from autotune.progress import terminal_width

    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((132, 40)))
    monkeypatch.setattr(sys, "stderr", SimpleNamespace(isatty=lambda: True, fileno=lambda: 2))
    assert terminal_width() == 132
    monkeypatch.setattr(sys, "stderr", SimpleNamespace(isatty=lambda: False, fileno=lambda: 2))  # a pipe, a file
    assert terminal_width() == 0

    def no_size(fd):  # the size cannot be read: os.get_terminal_size raises, as its ioctl failed
        raise OSError(25, "Inappropriate ioctl for device")

    monkeypatch.setattr(os, "get_terminal_size", no_size)
    monkeypatch.setattr(sys, "stderr", SimpleNamespace(isatty=lambda: True, fileno=lambda: 2))
    assert terminal_width() == 0


def test_progress_bar_on_a_terminal_and_plain_lines_otherwise(capsys):
    from autotune.progress import Progress
    from autotune.config import Config
    from autotune.runner import TrialResult
    from autotune.tuner import TrialRecord

    records = [
        TrialRecord(0, Config(x=1), TrialResult("ok", {"x": 1}, unit="items", throughput=500.0, peak_memory_bytes=2**20), "baseline"),
        TrialRecord(1, Config(x=2), TrialResult("crash", {"x": 2}, error="process died from SIGSEGV")),
        TrialRecord(2, Config(x=1), TrialResult("ok", {"x": 1}, unit="items", throughput=500.0), duplicate_of=0),
    ]
    bar = Progress(quiet=False, total=2, bar=True)
    for index, record in enumerate(records, 1):
        bar.trial(record, min(index, 2), 2)
    assert bar.bar.n == 2 and (bar.bar.total, bar.bar.unit) == (2, "trial")  # the repeat does not advance the bar
    assert "crash 1" in bar.bar.postfix and "ok 1" in bar.bar.postfix and "best 500 items/s" in bar.bar.postfix
    bar.stage("re-measuring")  # above the bar, as each trial's line
    bar.close()
    assert bar.bar.disable  # closed: the terminal's line is left to what comes next
    # On a terminal each trial has its line above the bar too: a failed trial's error was said only when piped.
    err = capsys.readouterr().err
    assert "[1/2] trial #0   baseline ok" in err and "process died from SIGSEGV" in err and "not counted" in err
    assert "\rautotune: re-measuring\n" in err  # the bar cleared from its line, then the line
    plain = Progress(quiet=False, total=2, bar=False)
    for index, record in enumerate(records, 1):
        plain.trial(record, min(index, 2), 2)
    err = capsys.readouterr().err
    assert "[1/2] trial #0   baseline ok" in err and "process died from SIGSEGV" in err and "not counted" in err
    plain.stage("re-measuring")
    assert capsys.readouterr().err == "autotune: re-measuring\n"
    quiet = Progress(quiet=True, total=2)
    quiet.trial(records[0], 1, 2)
    quiet.stage("re-measuring")
    assert capsys.readouterr().err == ""
    # A knob the others leave inactive is named, not shown with the default it holds.
    Progress(quiet=False, total=2, bar=False).trial(
        TrialRecord(3, Config(x=3, y=5), TrialResult("ok", {"x": 3, "y": 5}, unit="items", throughput=1.0),
                    unused=("y",)), 2, 2)
    err = capsys.readouterr().err
    assert "x=3 (no effect under these: y)" in err and "y=5" not in err
    # Over --memory-budget, a config cannot win: it is not "best", and its line says so.
    budget = Progress(quiet=False, total=2, bar=False, memory_budget_bytes=2**19)
    budget.trial(dataclasses.replace(records[0], fits_memory=False), 1, 2)  # as loop.tell finds it
    err = capsys.readouterr().err
    assert budget.best is None and "best -" in err and "(over --memory-budget 512.0 KiB: it cannot win)" in err
    # A resumed search (or a worker beside others) shows the study's best, not only its own trials'.
    resumed = Progress(quiet=False, total=2, bar=False)
    records[1].study_best = 900.0
    resumed.trial(records[1], 1, 2)
    assert "best 900 items/s" in capsys.readouterr().err


def test_each_trial_line_says_why_it_was_cut_short_and_a_repeat_s_line_says_only_that(capsys, monkeypatch):
    from autotune import progress as progress_module
    from autotune.config import Config
    from autotune.progress import Progress
    from autotune.runner import TrialResult
    from autotune.tuner import TrialRecord

    def line(record, index=1, total=10):
        Progress(quiet=False, total=total, bar=False).trial(record, index, total)
        return capsys.readouterr().err.rstrip("\n")

    wrong = TrialResult("incorrect", {"x": 1}, unit="items", throughput=5.0, error="max abs error 3 > 1e-4",
                        cut_short=True)
    assert line(TrialRecord(0, Config(x=1), wrong)).endswith(
        "(cut short: its first output is wrong)  max abs error 3 > 1e-4")
    slow = TrialResult("ok", {"x": 1}, unit="items", throughput=5.0, cut_short=True)
    assert line(TrialRecord(0, Config(x=1), slow)).endswith("(cut short once warm: over 3x slower than the best)")
    whole = TrialResult("ok", {"x": 1}, unit="items", throughput=5.0, busy_elsewhere=1.5)
    assert "cut short" not in line(TrialRecord(0, Config(x=1), whole))
    # A failed trial with no error of its own shows none ("None" was a mutant's); an ok one shows no error text.
    assert line(TrialRecord(0, Config(x=1), TrialResult("timeout", {"x": 1}))).endswith("x=1")
    noted = TrialResult("ok", {"x": 1}, unit="items", throughput=5.0, error="text of an ok trial")
    assert "text of" not in line(TrialRecord(0, Config(x=1), noted))
    # A repeat was not re-run: its line says so, and nothing of the run it did not have (other work, the cores).
    repeat = line(TrialRecord(7, Config(x=1), whole, duplicate_of=3))
    assert repeat.endswith("x=1  (same config as #3: not re-run, not counted)") and "beside" not in repeat, repeat
    counted = line(TrialRecord(8, Config(x=1), whole), index=9)
    assert "same config" not in counted and "(timed beside other work: 1.5 of" in counted
    # "[ =/10]" under "[ 9/10]": the repeat's "=" stands where a counted trial's last digit does.
    assert repeat.index("trial #") == counted.index("trial #") and repeat.startswith("[ =/10] ")
    # Below 1 item/s (a slow config at a large size) the best is the throughput, not 1.
    assert "best 0.25 items/s" in line(TrialRecord(0, Config(x=1), dataclasses.replace(whole, throughput=0.25)))
    study_best = TrialRecord(0, Config(x=1), TrialResult("crash", {"x": 1}), study_best=0.5)
    assert "best 0.5 items/s" in line(study_best)

    # stderr that says it is a terminal but gives no size (get_terminal_size's OSError) shows plain lines, no bar.
    def no_size(fd):
        raise OSError("Inappropriate ioctl for device")

    monkeypatch.setattr(progress_module.sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(progress_module.os, "get_terminal_size", no_size)
    assert progress_module.terminal_width() == 0 and Progress(quiet=False, total=2).bar is None


def test_figures_timed_beside_other_work_say_so_in_every_view(capsys):
    # A 15 s busy loop during a chmm search at tiny (this CPU, 2026-11-26) slowed the trials and the
    # re-measurement rounds it met; nothing said so.
    from types import SimpleNamespace

    from autotune.config import Config
    from autotune.console import result_table, run_text
    from autotune.progress import Progress
    from autotune.devices import cpu_threads
    from autotune.runner import TrialResult
    from autotune.selection import Candidate
    from autotune.tuner import TrialRecord

    def result(busy):
        return TrialResult("ok", {"x": 1}, unit="items", items_per_run=1, throughput=10.0, times=[0.1] * 3,
                           median_seconds=0.1, warmup_seconds=0.1, busy_elsewhere=busy)

    progress = Progress(quiet=False, total=2, bar=False)
    progress.trial(TrialRecord(0, Config(x=1), result(1.3)), 1, 2)
    progress.trial(TrialRecord(1, Config(x=1), result(0.2)), 2, 2)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].endswith(f"(timed beside other work: 1.3 of {cpu_threads()} cores busy)")
    assert "beside" not in lines[1]
    assert "other processes kept 1.3" in run_text(result(1.3), Config(x=1), "w", "cpu", "tiny")
    assert "other processes" not in run_text(result(None), Config(x=1), "w", "cpu", "tiny")
    # "over 1 runs", "1 threads": a run cut short, or measured with --threads 1
    one = dataclasses.replace(result(None), times=[0.1], threads=1)
    assert "over 1 run, spread" in run_text(one, Config(x=1), "w", "cpu", "tiny")
    assert ", 1 thread\n" in run_text(one, Config(x=1), "w", "cpu", "tiny")
    assert ", 2 threads\n" in run_text(dataclasses.replace(one, threads=2), Config(x=1), "w", "cpu", "tiny")
    # A workload that sets its own count in build (a knob of mine, 1, 2 or 4) read "2 threads", autotune's, each time.
    own = dataclasses.replace(one, threads=2, environment={"cpu_threads": 4})
    assert ", 4 threads (the workload's own; autotune gave it 2)\n" in run_text(own, Config(x=1), "w", "cpu", "tiny")
    # A pass under a looser bound than the reference's precision gives (tanh's GELU in bfloat16, wrong beyond float32's
    # 1e-5) read "check passed" and no more.
    loose = dataclasses.replace(one, tolerance_knobs=["dtype"], check={"error": 0.0025, "tolerance": 0.03, "passed": True})
    assert run_text(loose, Config(x=1), "w", "cpu", "tiny").endswith(
        " (its bound is looser than with dtype at the reference's: a mistake below it passes)")
    assert "looser" not in run_text(dataclasses.replace(loose, status="incorrect"), Config(x=1), "w", "cpu", "tiny")

    baseline = Candidate(Config(x=0), 0, "baseline", [result(0.1), result(1.1), result(0.1)])
    best = Candidate(Config(x=1), 1, "candidate", [result(0.1), result(0.1), result(1.9)])
    table = SimpleNamespace(workload="w", size="tiny", device="cpu", study_name="s", trials=[], seconds=1.0,
                            counts={"ok": 2}, winner=best, baseline=baseline, speedup=1.0, choices=[],
                            candidates=[baseline, best], export_path="x.json", unused=(), restricted=0,
                            only_baseline=False)
    assert (f"note: other processes kept up to 1.9 of {cpu_threads()} cores busy in re-measurement round 2, 3; each "
            "config's figures come from its quiet rounds" in result_table(table))
    best.results = [result(0.7)] * 3
    assert (f"warning: other processes kept up to 1.1 of {cpu_threads()} cores busy in re-measurement round 1, 2, 3, "
            "and some config had no quiet round: the figures above may be off" in result_table(table))
    for candidate in (baseline, best):
        candidate.results = [result(0.1)] * 3
    assert "other processes" not in result_table(table)


def test_figures_of_more_cores_than_a_trial_s_threads_say_so_in_every_view(capsys):
    # chmm's overlap_passes under --threads 1 kept 1.25 cores busy (its backward pass on a thread of its own) and
    # read 9% faster than without on this 2-core CPU, no faster held to one core: nothing said so.
    from types import SimpleNamespace

    from autotune.config import Config
    from autotune.console import best_text, result_table, run_text
    from autotune.export import ExportDocument
    from autotune.progress import Progress
    from autotune.runner import TrialResult
    from autotune.selection import Candidate
    from autotune.tuner import TrialRecord

    def result(cores, threads=1):
        return TrialResult("ok", {"x": 1}, unit="items", items_per_run=1, throughput=10.0, times=[0.1] * 3,
                           median_seconds=0.1, warmup_seconds=0.1, threads=threads, cores_used=cores)

    progress = Progress(quiet=False, total=3, bar=False)
    for index, figures in enumerate([(1.25, 1), (1.004, 1), (2.0, 2)]):
        progress.trial(TrialRecord(index, Config(x=1), result(*figures)), index + 1, 3)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].endswith("(its timed runs kept 1.2 cores busy, more than its 1 thread)"), lines[0]
    assert not any("more than its" in line for line in lines[1:]), lines
    assert ("warning      its timed runs kept 1.2 cores busy, more than its 1 thread: a thread or process of its own "
            "ran on cores --threads left idle") in run_text(result(1.25), Config(x=1), "w", "cpu", "small")
    assert "more than its" not in run_text(result(None), Config(x=1), "w", "cpu", "small")

    baseline = Candidate(Config(x=0), 0, "baseline", [result(1.0)] * 3)
    best = Candidate(Config(x=1), 1, "candidate", [result(1.0), result(1.3), result(1.25)])
    table = SimpleNamespace(workload="w", size="small", device="cpu", study_name="s", trials=[], seconds=1.0,
                            counts={"ok": 2}, winner=best, baseline=baseline, speedup=1.0, choices=[],
                            candidates=[baseline, best], export_path="x.json", unused=(), restricted=0,
                            only_baseline=False)
    assert ("warning: the winner's timed runs kept 1.3 cores busy, more than its 1 thread: a thread or process of "
            "its own ran on cores --threads left idle") in result_table(table)
    # The export says it too, for `autotune best` and a script's cfg.measured.
    assert best.figures()["cores_used"] == 1.3 and baseline.figures()["cores_used"] == 1.0
    document = ExportDocument(best.config.to_dict(), "w", "cpu", size="small", measured=best.figures())
    assert ("warning: its timed runs kept 1.3 cores busy, more than its 1 thread: a thread or process of its own ran "
            "on cores --threads left idle") in best_text(ExportDocument.from_json(document.to_json(), "x.json"), "x")
    best.results = [result(1.0)] * 3
    assert "more than its" not in result_table(table)
    assert "more than its" not in best_text(ExportDocument(best.config.to_dict(), "w", "cpu", measured=best.figures()),
                                            "x")


def test_a_baseline_that_wins_a_tie_says_a_candidate_was_faster_within_noise():
    from types import SimpleNamespace

    from autotune.config import Config
    from autotune.console import result_table
    from autotune.runner import TrialResult
    from autotune.selection import Candidate

    def rounds(times):
        return [TrialResult("ok", {"x": 1}, unit="items", items_per_run=1, times=times) for _ in range(3)]

    baseline = Candidate(Config(x=0), 0, "baseline", rounds([1.01, 1.00, 1.02]))
    tied = Candidate(Config(x=1), 1, "candidate", rounds([1.00, 0.99, 1.01]))
    table = SimpleNamespace(workload="w", size="tiny", device="cpu", study_name="s", trials=[], seconds=1.0,
                            counts={"ok": 2}, winner=baseline, baseline=baseline, speedup=1.0, choices=[],
                            candidates=[baseline, tied], export_path="x.json", unused=(), restricted=0,
                            only_baseline=False)
    assert ("\n  a candidate's median was 1% faster: within the runs' noise, so no config measurably beats the "
            "baseline\n" in result_table(table))
    table.winner = tied
    assert "measurably" not in result_table(table)
    # `search -n 1` on a new study: the baseline, the slow "before", was exported as tuned without a word, and a
    # script's load_config gave it in place of the space's defaults (6x faster for chmm at tiny).
    only = SimpleNamespace(**{**vars(table), "counts": {"ok": 1}, "winner": baseline, "candidates": [baseline],
                              "only_baseline": True})
    assert ("\n  warning: the study measured only the baseline, so its config is exported, and load_config now gives "
            "it in place of the space's defaults, which were never measured; search with --trials 2 or more\n"
            in result_table(only))
    assert "measured only the baseline" not in result_table(SimpleNamespace(**{**vars(only), "only_baseline": False}))
    # The other candidates, fastest re-measured first, a failed one last.
    slower, failed = Candidate(Config(x=2), 5, "candidate", rounds([1.5] * 3)), Candidate(Config(x=3), 4, "candidate",
                                                                                          [TrialResult("crash", {})])
    table.candidates = [baseline, failed, slower, tied]
    assert "  other candidates: #5 0.667 items/s; #4 crash\n" in result_table(table)  # was "#4 crash; #5 ..."
    table.candidates = [baseline, tied]
    # A lone search that found every config measured read "measured by its workers", as the workers' driver does.
    assert "w (tiny) on cpu: study s, 0 configs measured this run; in the study: ok 2; 1 s" in result_table(table)
    assert "w (tiny) on cpu: study s, measured by its workers; in the study" in result_table(table, workers=True)
    # A candidate whose median run is faster, but whose runs in a row are slower (a cost every 4th run), is said to
    # be so: "a candidate's median was 180% faster: within the runs' noise" was its only word.
    table.candidates = [Candidate(Config(x=0), 0, "baseline", [TrialResult("ok", {}, unit="items", items_per_run=1,
                                                                           times=[0.003] * 40)]),
                        Candidate(Config(x=2), 2, "candidate", [TrialResult("ok", {}, unit="items", items_per_run=1,
                                                                            times=[0.001, 0.001, 0.001, 0.02] * 10)])]
    table.winner = table.baseline = table.candidates[0]
    said = result_table(table)
    assert ("other candidates: #2 1,000 items/s (over runs in a row 0.52x the baseline: a cost paid every few runs, "
            "left out of a median)") in said and "measurably" not in said, said
    # One that wins in a row too, but by less than by its median run: the speedup (the medians' ratio) read 8x
    # alone, where a job gets 1.39x.
    table.candidates[0].results[0].times = [0.008] * 40
    table.winner, table.speedup = table.candidates[1], 8.0
    assert ("  speedup                             8.00x   (re-measured side by side, 1 interleaved round)\n"
            "                                      1.39x   over runs in a row: a cost paid every few runs is in it, left "
            "out of a median run\n  check") in result_table(table), result_table(table)
    table.candidates[1].results[0].times = [0.001] * 40  # runs in a row agree with the median run: no such line
    assert "over runs in a row" not in result_table(table)
    # The baseline lost by its runs in a row alone (a cost every 4th run), its median faster: the winner read
    # "0.33x" with no word of why it won (a dropout block of mine, bfloat16 at "0.94x", 2026-12-07).
    table.candidates[0].results[0].times = [0.001, 0.001, 0.001, 0.02] * 10
    table.candidates[1].results[0].times = [0.003] * 40
    table.speedup = 1 / 3
    assert ("  speedup                             0.33x   (re-measured side by side, 1 interleaved round)\n"
            "                                      1.92x   over runs in a row: a cost paid every few runs is in it, left "
            "out of a median run\n  check") in result_table(table), result_table(table)
    # Values as the space file and --set write them: "None" and "True" read as Python's, and --set refuses "None".
    from autotune.choices import ChoiceOutcome
    table.winner = Candidate(Config(x=None, fast=True), 1, "candidate", rounds([0.5, 0.5, 0.5]))
    table.choices, table.unit = [ChoiceOutcome("x", None, 1, 2.0, {"ok": 1}, True)], "items"
    assert "Best config (trial #1): fast=true x=null\n" in result_table(table)
    assert "\n  x                null         winner  " in result_table(table)


def test_best_says_why_the_baseline_has_no_figures_or_no_speedup():
    # A baseline that ran out of memory: the search said "(oom when re-measured)", `best` showed dashes alone.
    from types import SimpleNamespace

    from autotune.console import best_text

    def doc(baseline, statuses, error=None):
        remeasure = {"candidates": [{"role": "baseline", "statuses": statuses, "error": error},
                                    {"role": "candidate", "statuses": ["ok"]}]} if statuses is not None else None
        return SimpleNamespace(workload="bf", size="tiny", device="cpu", device_name=None, trial=7,
                               config={"kernel": "fast"}, measured={"throughput": 2.0, "unit": "items"},
                               baseline={"config": {"kernel": "slow"}, **baseline}, speedup=None, check=None,
                               environment=None, exported_at=None, remeasure=remeasure)

    def row(document):
        return next(line for line in best_text(document, "x.json").splitlines() if line.startswith("  baseline"))

    assert row(doc({}, ["oom"])).endswith("  (oom when re-measured)")
    # With what it said, where its export kept it (since 2026-12-07): the row said "oom", not of what.
    assert row(doc({}, ["ok", "oom"], "CUDA out of memory")).endswith("  (oom when re-measured: CUDA out of memory)")
    assert row(doc({"throughput": 1.0, "unit": "items"}, ["incorrect", "ok"])).endswith("  (incorrect when re-measured)")
    assert row(doc({}, [])).endswith("  (not re-measured: it failed in the search)")
    assert "(" not in row(doc({"throughput": 1.0, "unit": "items"}, ["ok"]))
    assert "(" not in row(doc({}, None))  # a hand-written export says nothing of its re-measurement


def test_best_says_the_speedup_s_interval_where_the_export_holds_one():
    from types import SimpleNamespace

    from autotune.console import best_text

    def doc(interval):
        return SimpleNamespace(workload="w", size="tiny", device="cpu", device_name=None, trial=1, config={"k": 1},
                               measured={"throughput": 2.0, "unit": "items"}, speedup=2.0, check=None,
                               baseline={"config": {"k": 0}, "throughput": 1.0, "unit": "items"}, environment=None,
                               exported_at=None, remeasure={"speedup_interval": interval})

    assert "2.00x   (95% interval [1.9, 2.1])" in best_text(doc([1.9, 2.1]), "x.json")
    assert "(95% interval [272, 1,457])" in best_text(doc([271.7105, 1457.48]), "x.json")  # not 1.46e+03
    # Whose export it is: one file per workload, device and size holds the winner of the study that searched last.
    assert best_text(doc(None), "x.json").splitlines()[0] == "w (tiny) on cpu, from x.json"
    said = SimpleNamespace(**{**vars(doc(None)), "study": {"name": "w-cpu-tiny", "storage": "studies/w.journal"}})
    assert best_text(said, "x.json").splitlines()[0] == ("w (tiny) on cpu, from x.json, study w-cpu-tiny in "
                                                         "studies/w.journal")
    for hand_written in ("1.9-2.1", [1.9], ["1.9", 2.1], None, [True, 2]):  # said as nothing, never a traceback
        assert "interval" not in best_text(doc(hand_written), "x.json")


def test_a_trial_without_figures_shows_the_best_in_the_workload_s_unit(capsys):
    # On an H200 (2026-11-25) a vlm_mc trial that timed out printed "best 69,225 items/s" among lines in
    # images/s: a trial the runner killed reports no unit of its own.
    from autotune.config import Config
    from autotune.progress import Progress
    from autotune.runner import TrialResult
    from autotune.tuner import TrialRecord

    records = [TrialRecord(0, Config(x=1), TrialResult("ok", {"x": 1}, unit="images", throughput=500.0), "baseline"),
               TrialRecord(1, Config(x=2), TrialResult("timeout", {"x": 2}, error="ran past the 45 s trial timeout"))]
    plain = Progress(quiet=False, total=2, bar=False)
    for index, record in enumerate(records, 1):
        plain.trial(record, index, 2)
    timeout_line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "timeout" in timeout_line and "best 500 images/s" in timeout_line, timeout_line
    bar = Progress(quiet=False, total=2, bar=True)
    for index, record in enumerate(records, 1):
        bar.trial(record, index, 2)
    assert "best 500 images/s" in bar.bar.postfix
    bar.close()


@pytest.mark.parametrize("args", [
    ["search", "-w", "chmm", "-s", "tiny", "--studies", "afile/studies"],
    ["search", "-w", "chmm", "-s", "tiny", "--studies", "afile/studies", "--storage", "x.journal"],
    ["run", "-w", "chmm", "-s", "tiny", "--studies", "afile/studies"],
    ["report", "-w", "chmm", "-d", "cpu", "-o", "afile/r.html"],
])
def test_a_path_under_a_regular_file_is_one_line_and_nothing_is_written(tmp_path, args):
    (tmp_path / "afile").write_text("a regular file")
    done = run_cli(*args, cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "afile is a file" in lines[0] and "Traceback" not in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def _read_only_to_the_user(monkeypatch, folder: Path, locked: Path) -> None:
    """``locked`` read-only to this user, as os.access reads it (tests may run as root, which writes anywhere), and
    ``main()`` run in ``folder`` with the default studies folder."""
    import os
    import warnings

    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path).resolve() != locked.resolve()
                        and real_access(path, mode))
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)  # main() sets autotune's own
    monkeypatch.chdir(folder)
    monkeypatch.delenv("AUTOTUNE_STUDIES", raising=False)


_DEFAULT_FOLDER = ("the studies folder studies", "pass --studies DIR, or set $AUTOTUNE_STUDIES")


@pytest.mark.parametrize("args, said, advice", [
    (["search", "-w", "chmm", "-s", "tiny"], *_DEFAULT_FOLDER),
    (["run", "-w", "chmm", "-s", "tiny"], *_DEFAULT_FOLDER),
    (["explain", "-w", "chmm", "-s", "tiny"], *_DEFAULT_FOLDER),
    (["report", "-w", "chmm", "-d", "cpu"], "the studies folder studies", "write the report elsewhere with -o FILE"),
    (["run", "-w", "chmm", "-s", "tiny", "--studies", "deeper/studies"], "--studies deeper/studies",
     "choose another path"),
    (["report", "-w", "chmm", "-d", "cpu", "-o", "r.html"], "--output's folder .", "choose another path"),
], ids=["search", "run", "explain", "report", "run-studies", "report-output"])
def test_a_folder_read_only_to_the_user_is_one_line_before_anything_runs(tmp_path, monkeypatch, capsys, args, said,
                                                                          advice):
    from autotune.cli import main

    _read_only_to_the_user(monkeypatch, tmp_path, tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(args)
    lines = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code == 2 and lines == [f"autotune: error: {said} cannot be written: {tmp_path} is read-only "
                                                f"to this user; {advice}"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, folder, holds, refused", [
    (["search", "-w", "chmm", "-d", "cpu", "-s", "tiny"], "studies/chmm", "the export", "studies/chmm"),
    (["explain", "-w", "chmm", "-d", "cpu", "-s", "tiny", "--config", "numba.json"], "studies/chmm",
     "the explanation", "studies/chmm/explain"),
    (["run", "-w", "chmm", "-d", "cpu", "-s", "tiny", "--set", "messages=numba"], "studies/cache/numba/workloads_x",
     "numba's compiled kernels", "studies/cache/numba/workloads_x"),
], ids=["search", "explain", "run-numba"])
def test_a_folder_of_the_studies_read_only_to_the_user_is_refused_before_anything_is_measured(
        tmp_path, monkeypatch, capsys, args, folder, holds, refused):
    # A studies folder another user made (a container run as root; this user could write only its top): a search
    # measured its trials and re-measured its winner, then "cannot write the export"; every numba trial failed
    # ("cannot cache function 'forward': no locator available"), so a 13.4x scan won where numba ran 264.9x.
    from autotune.cli import main

    (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "numba.json").write_text('{"messages": "numba"}')
    locked = (tmp_path / folder).resolve()
    _read_only_to_the_user(monkeypatch, tmp_path, locked)
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(SystemExit) as exited:
        main(args)
    lines = [line for line in capsys.readouterr().err.strip().splitlines() if "error" in line]
    assert exited.value.code == 2 and lines == [f"autotune: error: cannot write {holds} in {refused}: {locked} is "
                                                "read-only to this user (made by another user? give it to this one, "
                                                "or choose another --studies)"], lines
    assert sorted(tmp_path.rglob("*")) == before  # no study, no reference, nothing measured


@pytest.mark.parametrize("args, target, holds", [
    (["search", "-w", "chmm", "-d", "cpu", "-s", "tiny"], "studies/chmm/cpu-tiny.json", "the export"),
    (["explain", "-w", "chmm", "-d", "cpu", "-s", "tiny", "--config", "numba.json"],
     "studies/chmm/explain/cpu-tiny.json", "the explanation"),
], ids=["search", "explain"])
def test_a_folder_where_a_command_writes_its_file_is_refused_before_anything_is_measured(
        tmp_path, monkeypatch, capsys, args, target, holds):
    # A folder at studies/chmm/cpu-tiny.json: a search measured its trials and re-measured its winner, then
    # "cannot write the export studies/chmm/cpu-tiny.json: Is a directory"; load_config then said it had looked in
    # that file and that chmm was "exported only at size 'tiny'".
    from autotune.cli import main
    from autotune.tuned import load_config

    monkeypatch.chdir(tmp_path)
    (tmp_path / target).mkdir(parents=True)
    (tmp_path / "numba.json").write_text('{"messages": "numba"}')
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(SystemExit) as exited:
        main(args)
    lines = [line for line in capsys.readouterr().err.strip().splitlines() if "error" in line]
    assert exited.value.code == 2 and lines == [f"autotune: error: cannot write {holds} {target}: a folder stands "
                                                "there; move it away, or choose another --studies"], lines
    assert sorted(tmp_path.rglob("*")) == before  # no study, no reference, nothing measured
    if holds == "the export":
        with pytest.warns(UserWarning) as said:
            load_config("chmm", "cpu", "small", studies=tmp_path / "studies")
        assert "exported only" not in str(said[0].message), said[0].message


def test_a_report_s_folder_read_only_to_the_user_is_refused_before_the_page_is_built(tmp_path, monkeypatch, capsys):
    # Without -o the page goes in <studies>/<workload>/: one another user made let it be built (seconds, for a
    # study of thousands of trials), then "cannot write the report ...: Permission denied".
    from autotune.cli import main

    (tmp_path / "studies" / "chmm").mkdir(parents=True)
    locked = (tmp_path / "studies" / "chmm").resolve()
    _read_only_to_the_user(monkeypatch, tmp_path, locked)
    with pytest.raises(SystemExit) as exited:
        main(["report", "-w", "chmm", "-d", "cpu"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code == 2 and lines == [f"autotune: error: the report's folder studies/chmm cannot be written: "
                                                f"{locked} is read-only to this user; write the report elsewhere "
                                                "with -o FILE"], lines


@pytest.mark.parametrize("storage, locked", [
    (None, "studies/autotune.db"), (None, "studies/autotune.db.search.lock"), ("s.journal", "s.journal"),
])
def test_a_study_file_read_only_to_the_user_is_refused_before_anything_is_measured(tmp_path, monkeypatch, capsys,
                                                                                    storage, locked):
    # As another user of a studies folder root made: "StorageInternalError: An exception is raised during the
    # commit. This typically happens due to invalid data in the commit, e.g. exceeding max length." for a
    # database read-only to it, and "studies/autotune.db.search.lock: Permission denied" for a lock file.
    from autotune.cli import main

    (tmp_path / locked).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / locked).write_bytes(b"")
    _read_only_to_the_user(monkeypatch, tmp_path, tmp_path / locked)
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(SystemExit) as exited:
        main(["search", "-w", "chmm", "-d", "cpu", "-s", "tiny", *(["--storage", storage] if storage else [])])
    lines = [line for line in capsys.readouterr().err.strip().splitlines() if "error" in line]
    study = storage or "studies/autotune.db"
    assert exited.value.code == 2 and lines == [f"autotune: error: cannot write the study in {study}: "
                                                f"{(tmp_path / locked).resolve()} is read-only to this user (made by "
                                                "another user? give it to this one, or choose another --storage or "
                                                "--studies)"], lines
    assert sorted(tmp_path.rglob("*")) == before


def test_report_on_a_malformed_database_file_says_so_not_that_it_holds_no_studies(tmp_path):
    # A study file cut short (3,000 bytes of one, this machine) read "holds no studies; run `autotune search`
    # first": a search there would have said it is malformed.
    from autotune.exceptions import StorageError
    from autotune.stored import open_study

    (tmp_path / "cut.db").write_bytes(b"SQLite format 3\x00" + b"\x10\x00\x01\x01" + b"\xff" * 3000)
    with pytest.raises(StorageError, match=r"cannot open storage sqlite:///.*cut\.db: DatabaseError: "):
        open_study(f"sqlite:///{tmp_path / 'cut.db'}")


def test_report_on_an_empty_database_file_writes_nothing(tmp_path):
    (tmp_path / "empty.db").write_bytes(b"")
    done = run_cli("report", "-w", "chmm", "-d", "cpu", "--storage", "sqlite:///empty.db", cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and "holds no studies" in done.stderr, done.stderr
    assert (tmp_path / "empty.db").stat().st_size == 0  # no Optuna schema written into it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


# With -m slow (15 s): tests/test_faults.py's test of a new database opened while another process creates its
# tables keeps the rule in the default run, two of ours meeting in half its rounds.
@pytest.mark.slow
def test_two_searches_creating_one_new_database_at_once_both_succeed(tmp_path):
    import subprocess
    import sys

    env = {**__import__("os").environ, "AUTOTUNE_STUDIES": str(tmp_path / "studies")}
    commands = [[sys.executable, "-m", "autotune", "search", "-w", BROKEN, "-d", "cpu", "-n", "1", "--min-time",
                 "0.05", "--remeasure-rounds", "1", "--study", f"s{i}"] for i in range(2)]
    running = [subprocess.Popen(c, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for c in commands]
    outputs = [p.communicate(timeout=180) for p in running]
    assert [p.returncode for p in running] == [0, 0], [o[1][-1500:] for o in outputs]


# The JSON one with -m slow (7 s): the same search, only its printing differs (its winner null).
@pytest.mark.parametrize("as_json", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_a_search_that_exports_nothing_says_so_and_exits_1(tmp_path, as_json):
    # No config fits 1 KiB: the table once crashed on the missing winner (AttributeError), exit 1 and a traceback.
    done = run_cli("search", "-w", "chmm", "-d", "cpu", "-s", "tiny", "-n", "2", "--min-time", "0.05",
                   "--remeasure-rounds", "1", "--seed", "0", "--memory-budget", "1KiB",
                   *(["--json"] if as_json else []), cwd=tmp_path, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    if as_json:
        assert json.loads(done.stdout)["winner"] is None
    else:
        assert "but none may win: each is over the memory budget" in done.stdout and "nothing exported." in done.stdout
        assert "Best config" not in done.stdout
    assert not list((tmp_path / "studies").glob("*/*.json"))


# With -m slow (17 s and 18 s), to keep the default run under 10 minutes on a slow day: a display rule (the
# unit of the best shown), set in one line each by `search` and by a worker.
@pytest.mark.slow
@pytest.mark.parametrize("storage", [[], ["--storage", "s.journal"]], ids=["sqlite", "journal-worker"])
def test_a_resumed_search_whose_first_trial_times_out_shows_the_best_in_the_workload_s_unit(tmp_path, storage):
    # The unit was learnt from the first trial that reported one, so a resumed study's first trial, killed at
    # --trial-timeout, printed the study's best in items/s (a journal study runs its trials in a worker process).
    source = Path(BROKEN.split(":")[0]).read_text().replace('unit = "items"', 'unit = "widgets"')
    (tmp_path / "widgets.py").write_text(source)
    (tmp_path / "widgets.yaml").write_text(
        "schema_version: 1\nworkload: broken\nparameters:\n  behaviour:\n    choices: [ok, hang]\n"
        "defaults:\n  behaviour: ok\nbaseline:\n  behaviour: ok\nreference:\n  behaviour: ok\n")
    search = ["search", "-w", f"{tmp_path / 'widgets.py'}:BrokenWorkload", "-d", "cpu", "--min-time", "0.05",
              "--remeasure-rounds", "1", "--trial-timeout", "5", "--seed", "0", *storage]
    first = run_cli(*search, "-n", "1", cwd=tmp_path, timeout=180)
    assert first.returncode == 0, first.stderr[-2000:]
    resumed = run_cli(*search, "-n", "2", cwd=tmp_path, timeout=180)  # the one config left: hang
    lines = [line for line in resumed.stderr.splitlines() if "timeout" in line and "best" in line]
    assert lines and all("widgets/s" in line and "items/s" not in line for line in lines), resumed.stderr[-2000:]


def test_a_search_whose_standard_error_cannot_be_written_goes_on_and_exports(tmp_path):
    # Its log on a full disk (`2> log`): the first progress line was an OSError traceback that stopped the search,
    # exit 1, with nothing exported and no word anywhere. Progress is dropped; the search and its result stand.
    import subprocess
    import sys

    steady = Path(BROKEN.split(":")[0]).parent / "steady.py"
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "autotune", "search", "-w", f"{steady}:SteadyWorkload", "-d",
                               "cpu", "-n", "2", "--min-time", "0.02", "--remeasure-rounds", "1", "--studies", "st"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=full, text=True, timeout=300)
    assert done.returncode == 0, done.stdout
    assert (tmp_path / "st" / "steady" / "cpu-tiny.json").is_file() and "Exported to" in done.stdout


def test_output_that_cannot_be_written_is_one_line_or_none_and_exit_1(tmp_path):
    # A full disk under `> file` was an OSError traceback; a reader that stopped reading (`| head -1`) asked for no
    # more, so it is told nothing.
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "autotune", "devices"], cwd=tmp_path, stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 1 and done.stderr == ("autotune: error: cannot write to standard output: No space "
                                                    "left on device\n"), done.stderr
    listing = subprocess.Popen([sys.executable, "-m", "autotune", "list"], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    listing.stdout.close()  # gone before the first line
    assert listing.wait(timeout=120) == 1 and listing.stderr.read() == ""


def test_run_says_before_timing_a_variable_that_may_turn_a_knob_of_the_user_s_workload_into_another(tmp_path):
    # TORCH_COMPILE_DISABLE=1: a compile knob of the user's measured eager, said nowhere (`run` showed no stage
    # warning at all: other work busy before it timed was not said either).
    steady = Path(BROKEN.split(":")[0]).parent / "steady.py"
    done = run_cli("run", "-w", f"{steady}:SteadyWorkload", "-d", "cpu", "--set", "work=1", "--min-time", "0.02",
                   "--studies", "st", cwd=tmp_path, env={"TORCH_COMPILE_DISABLE": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert any(line.startswith("autotune: warning: TORCH_COMPILE_DISABLE=1 (torch.compile returns the model "
                               "uncompiled) is set: a knob of this workload") for line in done.stderr.splitlines())


def test_workers_on_sqlite_are_refused_with_a_journal_in_the_studies_folder_named_for_the_workload(tmp_path):
    # It said "--storage studies/steadyworkload.journal": the class's name lowered, and ./studies whatever
    # --studies said, so the study and its exports parted.
    steady = Path(BROKEN.split(":")[0]).parent / "steady.py"
    done = run_cli("search", "-w", f"{steady}:SteadyWorkload", "-d", "cpu", "--workers", "2", "--studies", "mine",
                   cwd=tmp_path, timeout=120)
    assert done.returncode == 2
    assert "use a journal file, e.g. --storage mine/steady.journal (one machine)" in done.stderr
    assert not (tmp_path / "mine").exists()


def _file_workload(folder, stem, build, head="", items=1, knobs="x: {choices: [a, b]}", defaults="{x: a}"):
    """A workload file ``<stem>.py`` (class ``Workload``, named ``stem``) and its space, in ``folder``: ``build`` is the
    body of its build method, ``head`` what comes before the class; each output is checked against the reference."""
    (folder / f"{stem}.py").write_text(
        f"{head}from autotune.check import Check, relative_error\n"
        "from autotune.workload import Workload\n\n\n"
        f"class {stem.title()}Workload(Workload):\n"
        f"    name, unit, sizes = {stem!r}, 'items', {{'tiny': {{}}, 'small': {{}}, 'full': {{}}}}\n\n"
        f"    def build(self, config):\n{build}\n"
        f"    def items_per_run(self, config):\n        return {items}\n\n"
        "    def check(self, output, reference, config):\n"
        "        return Check.from_metrics({'value': (relative_error(output, reference), 1e-9)})\n")
    (folder / f"{stem}.yaml").write_text(f"schema_version: 1\nparameters:\n  {knobs}\ndefaults: {defaults}\n"
                                         "baseline: {}\n")
    return f"{stem}.py:{stem.title()}Workload"


def test_threads_holds_the_trial_s_numpy_blas_as_it_holds_torch(tmp_path):
    # --threads 1 set torch's count alone: a workload's numpy products ran on every core's BLAS thread (123
    # products/s of an 800x800 product at "1 thread", 116 at 2: this CPU), so two searches given a core each
    # shared both.
    pytest.importorskip("threadpoolctl")
    workload = _file_workload(tmp_path, "blas", head="import sys\n", build=(
        "        import threadpoolctl, torch\n"
        "        counts = [i['num_threads'] for i in threadpoolctl.threadpool_info() if i['user_api'] == 'blas']\n"
        "        print('BLAS THREADS', counts, file=sys.stderr)\n"
        "        return lambda: torch.zeros(1)\n"))
    done = run_cli("run", "-w", workload, "-d", "cpu", "--threads", "1", "--min-time", "0.01",
                   "--studies", "st", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    counts = [line for line in done.stderr.splitlines() if line.startswith("BLAS THREADS")]
    assert counts and all(line == "BLAS THREADS [1]" for line in counts), done.stderr


def test_a_check_line_reads_as_its_figures_compare():
    # At two significant digits a failed check of 1.04e-6 against 1e-6 read "counts 1e-06 > 1e-06".
    from autotune.console import check_line, error_against

    check = {"passed": False, "metrics": {"counts": [1.04e-6, 1e-6], "loss": [2e-5, 1e-4], "nan": [None, 1e-3]}}
    assert check_line(check) == "FAILED: counts 1.04e-06 > 1e-06, loss 2e-05 <= 0.0001, nan inf > 0.001"
    assert error_against(1.0000001e-6, 1e-6) == ("1.0000001e-06", "1e-06")
    assert error_against(0.99e-6, 1e-6) == ("9.9e-07", "1e-06") and error_against(1e-6, 1e-6) == ("1e-06", "1e-06")
    assert error_against(1.7e-6, 1.5e-6) == ("1.7e-06", "1.5e-06")


def test_what_a_workload_file_prints_as_it_is_imported_leaves_json_whole(tmp_path):
    # A file of mine that said "module loaded" as it was imported put that line before run's and best's JSON on
    # stdout: no script could parse them. Its module is imported in autotune's own process too, not only in a trial's.
    workload = _file_workload(tmp_path, "loud", head="print('loud: module loaded')\n",
                              build="        import torch\n        return lambda: torch.arange(3.0)\n")
    quick = ("--min-time", "0.01")  # its runs of microseconds, timed in blocks: 0.01 s, not the default second
    for args in (("run", *quick), ("search", "-n", "1", "--remeasure-top", "1", *quick), ("best",)):
        done = run_cli(*args, "-w", workload, "-d", "cpu", "--json", cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) and "loud: module loaded" in done.stderr, done.stdout[:200]


@pytest.mark.slow
def test_a_workload_file_s_dataloader_workers_started_afresh_find_its_dataset(tmp_path):
    # Workers under "spawn" (macOS's default; "forkserver", Python 3.14's on Linux, alike) unpickle the file's
    # Dataset by its module's name: "No module named 'autotune_user_workload_...'", and the trial failed.
    head = ("import torch\nfrom torch.utils.data import DataLoader, Dataset\n\n\n"
            "class Squares(Dataset):\n"
            "    def __len__(self):\n        return 8\n\n"
            "    def __getitem__(self, i):\n        return torch.tensor(float(i * i))\n\n\n")
    workload = _file_workload(tmp_path, "loader", head=head, items=8, knobs="workers: {choices: [0, 1]}",
                              defaults="{workers: 0}", build=(
        "        loader = DataLoader(Squares(), batch_size=4, num_workers=config['workers'],\n"
        "                            multiprocessing_context='spawn' if config['workers'] else None)\n"
        "        return lambda: torch.cat(list(loader))\n"))
    done = run_cli("run", "-w", workload, "-d", "cpu", "--set", "workers=1", "--min-time", "0.01", "--json",
                   cwd=tmp_path, timeout=300)
    assert done.returncode == 0 and json.loads(done.stdout)["status"] == "ok", done.stderr[-2000:]
