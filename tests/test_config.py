import dataclasses
import inspect
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from autotune.config import SCHEMA_VERSION, Config, config_path, write_tuned_config
from autotune.registry import space_path
from autotune.space import SearchSpace
from autotune.tuned import TunedConfig, load_config
from autotune.exceptions import ConfigNotFoundError, InvalidConfigError, UnknownNameError
from tests.conftest import fresh_process_json, run_cli


def test_config_is_frozen_hashable_and_round_trips_json():
    config = Config({"dtype": "float32", "chunk": 64, "graphs": False, "lr": 0.5, "mode": None})
    assert config == Config(json.loads(json.dumps(config.to_dict())))
    assert hash(config) == hash(Config(dict(reversed(list(config.items())))))
    assert {config: 1}[Config(config.to_dict())] == 1
    with pytest.raises(TypeError):
        config["dtype"] = "float64"  # type: ignore[index]
    assert config.replace(dtype="float64")["dtype"] == "float64" and config["dtype"] == "float32"
    with pytest.raises(InvalidConfigError, match=r"^config value x=\[1, 2\] must be a string, number, boolean or "
                                                 r"null$"):
        Config({"x": [1, 2]})
    with pytest.raises(InvalidConfigError, match="^config keys must be strings, got 3$"):
        Config({3: "float32"})  # a key that is a number, as YAML reads `3:`


def _document(**extra):
    return {"schema_version": SCHEMA_VERSION, "workload": "chmm", "device": "cpu", "size": "small",
            "config": {"dtype": "float64"}, "measured": {"throughput": 10.0}, "speedup": 3.5, **extra}


def test_load_config_reads_the_exported_file(tmp_path):
    write_tuned_config(_document(), config_path("chmm", "cpu", "small", tmp_path))
    # A key a line, as a preset is read, hand-edited and diffed in a pull request.
    assert config_path("chmm", "cpu", "small", tmp_path).read_text().startswith('{\n  "schema_version": 1,\n')
    cfg = load_config("chmm", device="cpu", studies=tmp_path)
    assert isinstance(cfg, TunedConfig)
    assert cfg["dtype"] == "float64" and cfg.speedup == 3.5 and cfg.measured == {"throughput": 10.0}
    # A knob the file lacks (an export older than the knob) is the space's default, not a KeyError in a script.
    assert dict(cfg) == {**SearchSpace.from_file(space_path("chmm")).defaults.to_dict(), "dtype": "float64"}
    assert len(cfg) == len(cfg.config) == len(dict(cfg)) and dict(cfg.config) == dict(cfg)  # a mutant's None passed
    assert repr(cfg).startswith("TunedConfig({") and "speedup=3.5, source=" in repr(cfg)
    with pytest.raises(TypeError):
        cfg["dtype"] = "float32"  # type: ignore[index]
    assert cfg.unused == ("chunk_size", "overlap_passes")  # the loop kernel (the default) has neither
    write_tuned_config(_document(config={"messages": "numba"}), config_path("chmm", "cpu", "small", tmp_path))
    assert load_config("chmm", device="cpu", studies=tmp_path).unused == ("chunk_size", "indices", "workspace")


def test_load_config_gives_a_hand_written_value_as_the_space_spells_it(tmp_path):
    # A whole float for an int knob (as a JSON tool may write 64) reached the user's script as 64.0, for
    # range() and tensor shapes to fail on; an inactive knob's stated value too.
    write_tuned_config(_document(config={"messages": "scan", "chunk_size": 64.0}),
                       config_path("chmm", "cpu", "small", tmp_path))
    assert type(load_config("chmm", device="cpu", studies=tmp_path)["chunk_size"]) is int
    write_tuned_config(_document(config={"messages": "loop", "chunk_size": 128.0}),
                       config_path("chmm", "cpu", "small", tmp_path))
    cfg = load_config("chmm", device="cpu", studies=tmp_path)
    assert cfg["chunk_size"] == 128 and type(cfg["chunk_size"]) is int


def test_a_link_or_a_pipe_written_to_stays_what_it_was(tmp_path):
    # `report -o /dev/full`, as root, replaced the device with a regular file: a write is atomic by a rename over
    # the path, which replaced whatever was there. A pipe here (a device's stand-in), and a symbolic link.
    import os
    import stat

    from autotune.export import write_atomically

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader waits, so the write neither blocks nor fails
    try:
        assert write_atomically("<html>report</html>", fifo) == fifo
        assert stat.S_ISFIFO(os.stat(fifo).st_mode) and os.read(reader, 100) == b"<html>report</html>"
    finally:
        os.close(reader)
    (tmp_path / "real.json").write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to("real.json")
    assert write_atomically("new", link) == link
    assert link.is_symlink() and (tmp_path / "real.json").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "pipe", "real.json"]


@pytest.mark.parametrize("value", [" ", "-"])
def test_an_autotune_studies_that_names_no_folder_is_refused_as_the_option_is(tmp_path, monkeypatch, value):
    # --studies refuses " " and "-"; $AUTOTUNE_STUDIES took them: a search made a folder named " " or "-", and
    # load_config looked in " /chmm/cpu-tiny.json". ("" is unset, the default, as a shell's empty variable is.)
    from autotune.exceptions import AutotuneError

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AUTOTUNE_STUDIES", value)
    with pytest.raises(AutotuneError, match=re.escape(f"$AUTOTUNE_STUDIES={value!r} names no folder")):
        load_config("chmm", device="cpu")
    done = run_cli("search", "-w", "chmm", "-d", "cpu", "-s", "tiny", "-n", "1", cwd=tmp_path,
                   env={"AUTOTUNE_STUDIES": value}, timeout=120)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"autotune: error: $AUTOTUNE_STUDIES={value!r} names no folder; set it to one (. for this one), or unset it"]
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("AUTOTUNE_STUDIES", "")
    assert load_config("chmm", device="cpu").source == "defaults"  # no export in ./studies here
    with pytest.raises(AutotuneError, match=re.escape(f"studies {value!r} is refused: it names no folder")):
        load_config("chmm", device="cpu", studies=value)  # as the argument, too


def test_an_open_stream_s_name_is_written_through_and_a_file_under_dev_shm_is_a_file():
    # `-o /dev/stdout > page.html` replaced page.html by rename (a user's run: "--output's folder /dev cannot be
    # written"; `>>` lost the log's lines). A stream's name is written through whatever it points to; a report in
    # /dev/shm (a tmpfs of files) is replaced atomically as any file is.
    from autotune.export import written_through

    for stream in ("/dev/stdout", "/dev/stderr", "/dev/fd/1", "/proc/self/fd/1", "/proc/4242/fd/3", "/dev/null"):
        assert written_through(Path(stream)), stream
    for file in ("/dev/shm/report.html", "/tmp/report.html", "dev/stdout", "/proc/self/status.html"):
        assert not written_through(Path(file)), file


def test_a_write_leaves_another_writers_temporary_file_alone(tmp_path):
    # Every writer of one export used <name>.tmp: two searches exporting at once (two SQLite searches of one study)
    # wrote into one temporary file, and the first rename could publish the other's half-written text.
    from autotune.export import write_atomically

    (tmp_path / "cpu-small.json.tmp").write_text("another writer's, half")
    assert write_atomically("mine", tmp_path / "cpu-small.json").read_text() == "mine"
    assert (tmp_path / "cpu-small.json.tmp").read_text() == "another writer's, half"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cpu-small.json", "cpu-small.json.tmp"]


def test_a_failed_write_raises_its_own_error_and_leaves_nothing(tmp_path, monkeypatch):
    # The temporary file is removed after a failed write; where none was made (its folder could not be, a full
    # disk here), that removal must not put "No such file" in place of why the write failed.
    import errno

    from autotune.export import write_atomically

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "mkdir", full)
    with pytest.raises(OSError) as failed:
        write_atomically("text", tmp_path / "new" / "cpu-small.json")
    assert failed.value.errno == errno.ENOSPC and list(tmp_path.iterdir()) == []
    monkeypatch.undo()

    def refused(source, target):  # the temporary file written whole, its rename refused
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr("autotune.export.os.replace", refused)
    with pytest.raises(OSError) as failed:
        write_atomically("text", tmp_path / "cpu-small.json")
    assert failed.value.errno == errno.EACCES and list(tmp_path.iterdir()) == []  # its temporary file removed


def test_a_valid_export_s_metrics_may_have_no_error_and_figures_may_be_missing():
    from autotune.export import ExportDocument

    data = {"schema_version": 1, "config": {}, "check": {"passed": True, "metrics": {"x": [0.1, 0.5], "y": [None, 1]}}}
    assert ExportDocument.from_json(data).check["metrics"]["y"] == [None, 1]


def test_a_json_file_that_cannot_be_read_is_one_line_with_its_advice_where_there_is_one(tmp_path):
    from autotune.export import read_json

    path = tmp_path / "x.json"
    path.write_text("{")
    with pytest.raises(InvalidConfigError, match=r"^x: not valid JSON \(Expecting property name enclosed in double "
                                                 r"quotes at line 1\)$"):
        read_json(path, "x")
    with pytest.raises(InvalidConfigError, match=r"^x: .*No such file or directory; write one$"):
        read_json(tmp_path / "none.json", "x", "write one")


def test_an_export_replacing_one_without_a_study_or_a_speedup_says_what_it_can(tmp_path):
    # A hand-written export (its config alone) names no study: nothing to say. One that holds no speedup: the
    # warning names its study without figures.
    from autotune.export import ExportDocument

    path = config_path("chmm", "cpu", "small", tmp_path)
    ExportDocument({"dtype": "float64"}).write(path)
    new = ExportDocument({"dtype": "float32"}, "chmm", "cpu", "small", speedup=1.2, trial=2, study={"name": "new"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new.write(path)
    with pytest.warns(UserWarning, match=re.escape(f"{path} held the export of study 'new' (trial #2, 1.20x)")):
        ExportDocument({"dtype": "float64"}, trial=0, study={"name": "no-speedup"}).write(path)
    with pytest.warns(UserWarning, match=re.escape(f"{path} held the export of study 'no-speedup'; it now holds")):
        new.write(path)


def test_load_config_honours_the_environment_variable(tmp_path, monkeypatch):
    write_tuned_config(_document(), config_path("chmm", "cpu", "small", tmp_path / "elsewhere"))
    monkeypatch.setenv("AUTOTUNE_STUDIES", str(tmp_path / "elsewhere"))
    assert load_config("chmm", device="cpu").speedup == 3.5


def test_without_a_file_defaults_with_a_warning_or_strict_error(tmp_path):
    with pytest.warns(UserWarning, match="using the search space's defaults"):
        cfg = load_config("chmm", device="cpu", studies=tmp_path)
    assert cfg.source == "defaults" and cfg["update_c"] == "batched" and cfg.speedup is None
    with pytest.raises(ConfigNotFoundError, match="autotune search --workload chmm --device cpu"):
        load_config("chmm", device="cpu", studies=tmp_path, strict=True)
    # The message names where `search` writes (`<device>-<size>.json`), not only the old layout's file.
    with pytest.raises(ConfigNotFoundError, match=r"chmm/cpu-\*\.json, .*chmm/cpu\.json"):
        load_config("chmm", device="cpu", studies=tmp_path, strict=True)
    with pytest.raises(ConfigNotFoundError, match=r"chmm/cpu-tiny\.json"):
        load_config("chmm", device="cpu", size="tiny", studies=tmp_path, strict=True)
    # The command it says searches the size asked for, and none where none was (a mutant swapped the two).
    with pytest.raises(ConfigNotFoundError, match=r"; run `autotune search --workload chmm --device cpu --size tiny`$"):
        load_config("chmm", device="cpu", size="tiny", studies=tmp_path, strict=True)
    with pytest.raises(ConfigNotFoundError, match=r"; run `autotune search --workload chmm --device cpu`$"):
        load_config("chmm", device="cpu", studies=tmp_path, strict=True)


def test_an_unknown_workload_is_that_error_strict_or_not(tmp_path):
    # Not "no tuned config ... run `autotune search --workload chmn`", a command that fails in turn.
    for strict in (False, True):
        with pytest.raises(UnknownNameError, match="unknown workload 'chmn'; valid: chmm"):
            load_config("chmn", device="cpu", studies=tmp_path, strict=strict)


def test_a_file_workloads_name_alone_says_how_its_search_named_it(tmp_path):
    # `load_config("mine")` after `search -w mine.py:MineWorkload` said only "unknown workload 'mine'", though its
    # export lay in studies/mine/: the README's "Adding a workload" example met it.
    plain = "A workload may also be given as path/to/file.py:ClassName"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.json").write_text("[]")  # not an export: passed over
    with pytest.raises(UnknownNameError, match=f"unknown workload 'mine'; valid: chmm, .*{re.escape(plain)}$"):
        load_config("mine", device="cpu", studies=tmp_path)
    write_tuned_config(_document(workload="mine", environment={"workload_code": "mine.py 0123456789ab"}),
                       tmp_path / "mine" / "cpu-small.json")
    said = (f"unknown workload 'mine'; valid: chmm, latentwire, lsd, ten, vlm_mc. {tmp_path / 'mine' / 'cpu-small.json'} "
            "was tuned on the workload in the file mine.py: name it as its search did: path/to/mine.py:ClassName")
    for strict in (False, True):
        with pytest.raises(UnknownNameError) as raised:
            load_config("mine", device="cpu", studies=tmp_path, strict=strict)
        assert str(raised.value) == said
    from autotune.tuner import Tuner

    with pytest.raises(UnknownNameError) as raised:  # so does a Tuner made in Python: it said "unknown workload" alone
        Tuner("mine", device="cpu", studies=tmp_path)
    assert str(raised.value) == said
    # A name that is a path is looked up nowhere (here "deeper/.." is that folder), and a built-in's export names
    # no file (autotune's version).
    (tmp_path / "mine" / "deeper").mkdir()
    with pytest.raises(UnknownNameError, match=f"unknown workload '..'; .*{re.escape(plain)}$"):
        load_config("..", device="cpu", studies=tmp_path / "mine" / "deeper")
    write_tuned_config(_document(workload="mine", environment={"workload_code": "autotune 0.1.0"}),
                       tmp_path / "mine" / "cpu-small.json")
    with pytest.raises(UnknownNameError, match=f"{re.escape(plain)}$"):
        load_config("mine", device="cpu", studies=tmp_path)


def test_every_command_given_a_file_workloads_name_alone_says_how_its_search_named_it(tmp_path):
    # `autotune report -w mine` (and search, run, explain, best, list) said only "unknown workload 'mine'" too.
    write_tuned_config(_document(workload="mine", environment={"workload_code": "mine.py 0123456789ab"}),
                       tmp_path / "studies" / "mine" / "cpu-small.json")
    hint = "was tuned on the workload in the file mine.py: name it as its search did: path/to/mine.py:ClassName"
    done = run_cli("search", "-w", "mine", "-d", "cpu", "-n", "1", cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and done.stderr.splitlines()[-1] == (
        f"autotune: error: unknown workload 'mine'; valid: chmm, latentwire, lsd, ten, vlm_mc. "
        f"studies/mine/cpu-small.json {hint}"), done.stderr
    assert sorted(p.name for p in (tmp_path / "studies").rglob("*")) == ["cpu-small.json", "mine"]  # nothing written
    elsewhere = tmp_path / "elsewhere"
    (tmp_path / "studies").rename(elsewhere)
    done = run_cli("report", "-w", "mine", "-d", "cpu", "--studies", str(elsewhere), cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and done.stderr.splitlines()[-1].endswith(
        f"{elsewhere / 'mine' / 'cpu-small.json'} {hint}"), done.stderr
    # A command that reads no studies folder says what it meets, not that $AUTOTUNE_STUDIES names none.
    done = run_cli("list", "-w", "mine", cwd=tmp_path, env={"AUTOTUNE_STUDIES": " "}, timeout=120)
    assert done.returncode == 2 and done.stderr.splitlines()[-1] == (
        "autotune: error: unknown workload 'mine'; valid: chmm, latentwire, lsd, ten, vlm_mc. A workload may also be "
        "given as path/to/file.py:ClassName"), done.stderr


def test_old_schema_is_refused(tmp_path):
    write_tuned_config(_document(schema_version=0), config_path("chmm", "cpu", "small", tmp_path))
    with pytest.raises(InvalidConfigError, match="schema_version must be 1"):
        load_config("chmm", device="cpu", studies=tmp_path)


def test_load_config_imports_neither_torch_nor_optuna(tmp_path):
    # Tuned on another version: reading the workload's version is no reason to import it.
    write_tuned_config(_document(workload_version=0), config_path("chmm", "cpu", "small", tmp_path))
    code = (
        "import sys, warnings, autotune, autotune.devices\n"
        "autotune.devices._torch_sees_only_the_cpu = lambda: False  # as with a CUDA build: GPUs from the driver\n"
        "with warnings.catch_warnings(record=True) as said:\n"
        "    warnings.simplefilter('always')\n"
        f"    cfg = autotune.load_config('chmm', device='auto', studies={str(tmp_path)!r})\n"
        "assert 'tuned on version 0 of chmm' in str(said[0].message), said\n"
        "warnings.simplefilter('ignore')\n"
        f"autotune.load_config('chmm', device='cpu', studies={str(tmp_path / 'none')!r})\n"
        "assert cfg['dtype'] == 'float64', cfg\n"
        "heavy = [m for m in ('torch', 'optuna', 'plotly', 'sqlalchemy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)


def test_an_export_saved_with_a_byte_order_mark_loads(tmp_path):
    # A hand edit saved by a Windows editor starts with a BOM: "not valid JSON (Unexpected UTF-8 BOM ...)".
    path = config_path("chmm", "cpu", "small", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(_document()), encoding="utf-8-sig")
    assert load_config("chmm", device="cpu", studies=tmp_path)["dtype"] == "float64"


def test_an_export_of_a_search_that_measured_only_the_baseline_loads_with_a_warning(tmp_path):
    # `search -n 1` on a new study exported the baseline, the slow "before", and a script's load_config gave it in
    # place of the space's defaults (6x faster for chmm at tiny) without a word.
    path = config_path("chmm", "cpu", "small", tmp_path)
    write_tuned_config(_document(study={"name": "chmm-cpu-small", "trials": 1}), path)
    with pytest.warns(UserWarning, match=r"cpu-small.json was exported by a search that measured only the baseline: "
                                         r"its config is the slow 'before', not a tuned one"):
        load_config("chmm", device="cpu", studies=tmp_path)
    write_tuned_config(_document(study={"name": "chmm-cpu-small", "trials": 2}), path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_config("chmm", device="cpu", studies=tmp_path)


def test_load_config_parses_its_space_and_its_workload_s_source_once_per_text(tmp_path, monkeypatch):
    # A script asking for its config in a loop paid 21 ms a call (this CPU): PyYAML's parse of the space and two
    # parses of the workload's module. They are parsed once per text now, and what a call gets is its own.
    import ast

    import yaml

    write_tuned_config(_document(), config_path("chmm", "cpu", "small", tmp_path))
    first = load_config("chmm", device="cpu", studies=tmp_path)
    parses = []
    monkeypatch.setattr(yaml, "load", lambda *args, **kwargs: parses.append("yaml"))
    monkeypatch.setattr(ast, "parse", lambda *args, **kwargs: parses.append("ast"))
    try:
        again = load_config("chmm", device="cpu", studies=tmp_path)
    finally:
        monkeypatch.undo()  # before pytest formats a failure with ast.parse
    assert parses == [] and dict(again) == dict(first)
    from autotune.strict import load_yaml

    text = "parameters:\n  x: {choices: [1, 2]}\n"
    mine = load_yaml(text)
    mine["parameters"]["x"]["choices"].append(3)
    assert load_yaml(text) == {"parameters": {"x": {"choices": [1, 2]}}}


def test_an_export_tuned_on_another_version_of_its_workload_loads_with_a_warning(tmp_path):
    # A workload's version is bumped when its data or outputs change (vlm_mc's 2 checks the dropout-off
    # features): an export of version 1 passed a check that a wrong attention scale passed too.
    path = config_path("vlm_mc", "cpu", "small", tmp_path)
    write_tuned_config(_document(workload="vlm_mc", workload_version=1, config={"batch_size": 32}, measured=None), path)
    with pytest.warns(UserWarning, match=rf"^{path} was tuned on version 1 of vlm_mc, and its data or outputs differ "
                                         r"at version 2 \(this autotune's\): re-run `autotune search --workload vlm_mc "
                                         r"--device cpu --size small` to tune and check it anew$"):
        cfg = load_config("vlm_mc", device="cpu", studies=tmp_path)
    assert cfg["batch_size"] == 32  # still the config it exported: nothing is replaced unsaid
    done = run_cli("best", "-w", "vlm_mc", "-d", "cpu", "--studies", str(tmp_path), cwd=tmp_path, timeout=60)
    assert done.returncode == 0 and done.stderr.startswith(f"autotune: warning: {path} was tuned on version 1 of vlm_mc")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # one line, as an error is, not Python's two
    for same_or_unknown in ({"workload_version": 2}, {}):
        write_tuned_config(_document(workload="vlm_mc", config={"batch_size": 32}, **same_or_unknown), path)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert load_config("vlm_mc", device="cpu", studies=tmp_path)["batch_size"] == 32


def test_a_cpu_export_of_another_machine_loads_with_a_warning(tmp_path, monkeypatch):
    # The cpu profile covers every CPU: a study copied from a 2-core laptop loaded on a 64-core server as its own,
    # its winner and its figures the laptop's, without a word (a GPU's export is filed under its model).
    from autotune import tuned

    monkeypatch.setattr(tuned, "cpu_name", lambda: "AMD EPYC")
    monkeypatch.setattr(tuned, "cpu_threads", lambda: 2)
    path = config_path("chmm", "cpu", "small", tmp_path)
    for environment, said in [({"cpu": "Intel(R) Xeon(R) Gold 6448Y", "cpu_cores": 64}, "Intel(R) Xeon(R) Gold 6448Y "
                                                                                         "(64 cores)"),
                              ({"cpu": "AMD EPYC", "cpu_cores": 1}, "AMD EPYC (1 core)")]:
        write_tuned_config(_document(environment=environment), path)
        with pytest.warns(UserWarning, match=re.escape(
                f"{path} was tuned on {said}, and this process runs on AMD EPYC (2 cores): its winner may not be the "
                "fastest here, nor its figures this process's; run `autotune search --workload chmm --device cpu "
                "--size small` here to tune for it")):
            assert load_config("chmm", device="cpu", studies=tmp_path)["dtype"] == "float64"
    # The same machine, one that does not say, or a GPU's export (filed under its model): nothing to say.
    for environment, device in [({"cpu": "AMD EPYC", "cpu_cores": 2}, "cpu"), ({"cpu": "AMD EPYC"}, "cpu"), ({}, "cpu"),
                                ({"cpu": "Intel(R) Xeon(R) Processor", "cpu_cores": 16}, "h100")]:
        write_tuned_config(_document(environment=environment, device=device), config_path("chmm", device, "small",
                                                                                            tmp_path))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            load_config("chmm", device=device, studies=tmp_path)


def test_each_warning_of_load_config_names_the_line_that_called_it(tmp_path, monkeypatch):
    # "script.py:12: UserWarning: ...", as Python shows a warning, names the user's load_config line (and a
    # -W filter by module matches the user's), not a line of autotune's own.
    from autotune import tuned

    monkeypatch.setattr(tuned, "cpu_name", lambda: "AMD EPYC")
    monkeypatch.setattr(tuned, "cpu_threads", lambda: 2)
    write_tuned_config(_document(size="tiny", workload_version=0, study={"name": "chmm-cpu-tiny", "trials": 1},
                                 environment={"cpu": "Intel(R) Xeon(R)", "cpu_cores": 64, "isolation": "inprocess"}),
                       config_path("chmm", "cpu", "tiny", tmp_path))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        load_config("chmm", device="cpu", studies=tmp_path)
        load_config("chmm", device="cpu", studies=tmp_path / "none")
    told = {next(words for words in ("version 0", "Intel", "inprocess", "only the baseline", "at size 'tiny'",
                                     "no tuned config") if words in str(w.message)): (w.filename, w.lineno)
            for w in said}
    here = __file__, line
    assert told == {"version 0": here, "Intel": here, "inprocess": here, "only the baseline": here,
                    "at size 'tiny'": here, "no tuned config": (__file__, line + 1)}


def test_a_workloads_version_and_facts_are_read_without_importing_it_as_its_class_says():
    # In a fresh process: in this one the workloads may be imported already, and then the class is asked.
    from autotune.registry import BUILTINS, WorkloadFacts, declared_version, get_workload_class

    script = ("import json, sys\n"
              "from autotune.cli import main\n"
              "from autotune.registry import BUILTINS, declared_version, workload_facts\n"
              "try:\n    main(['list'])\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
              "read = {name: [declared_version(name), vars(workload_facts(name))] for name in BUILTINS}\n"
              "print(json.dumps({'torch': 'torch' in sys.modules, 'workloads': sorted(m for m in sys.modules\n"
              "                  if m.startswith('workloads.')), 'read': read}))\n")
    found = fresh_process_json(script)
    assert found["torch"] is False and found["workloads"] == []  # `autotune list` included
    for name in BUILTINS:
        cls = get_workload_class(name)
        version, facts = found["read"][name]
        as_json = json.loads(json.dumps(vars(WorkloadFacts.of(cls))))  # a tuple in the sizes printed as a list
        assert version == cls.version and facts == as_json, name
    assert declared_version("no-such-workload") is None


def test_facts_a_class_body_does_not_state_as_literals_are_asked_of_the_class(tmp_path, monkeypatch):
    from autotune import registry

    (tmp_path / "facts_module.py").write_text(
        "from autotune import Workload\n"
        "class Literal(Workload):\n    name, unit = 'literal', 'items'\n    sizes = {'tiny': {'n': 2}}\n"
        "    default_size = 'tiny'\n"
        "class Computed(Workload):\n    name = 'computed'\n    unit = 'items'\n    sizes = {'tiny': dict(n=2)}\n"
        "    default_size = 'tiny'\n"
        "class Later(Workload):\n    name = 'later'\n    unit = 'items'\n    sizes = {'tiny': {'n': 2}}\n"
        "    default_size = 'tiny'\n    version = 1\n    version = 1 + 1\n"
        "class Middle(Workload):\n    default_size = 'tiny'\n"
        "class Inherits(Middle):\n    name = 'inherits'\n    unit = 'items'\n    sizes = {'tiny': {'n': 2}}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("Literal", "Computed", "Later", "Inherits"):
        monkeypatch.setitem(registry.BUILTINS, name.lower(), f"facts_module:{name}")
    monkeypatch.delitem(sys.modules, "facts_module", raising=False)
    # `name, unit = ...` is no single name's literal, so even Literal's facts come from its class.
    literal = registry.workload_facts("literal")
    assert "facts_module" in sys.modules and literal.default_size == "tiny"
    monkeypatch.delitem(sys.modules, "facts_module")
    (tmp_path / "facts_module.py").write_text((tmp_path / "facts_module.py").read_text().replace(
        "    name, unit = 'literal', 'items'\n", "    name = 'literal'\n    unit = 'items'\n"))
    assert registry.workload_facts("literal") == registry.WorkloadFacts("literal", "items", {"tiny": {"n": 2}}, "tiny")
    assert "facts_module" not in sys.modules  # read from the source alone
    # Sizes built by a call, and a default size inherited from a class between it and Workload: the class is asked.
    assert registry.workload_facts("computed") == registry.WorkloadFacts("computed", "items", {"tiny": {"n": 2}}, "tiny")
    monkeypatch.delitem(sys.modules, "facts_module")  # imported for Computed: its source is read again
    assert registry.workload_facts("later").version == 2  # a version assigned again, not as a literal: not Workload's 1
    monkeypatch.delitem(sys.modules, "facts_module")
    assert registry.declared_version("later") is None  # unknown from the source, neither 1 nor Workload's
    assert "facts_module" not in sys.modules
    assert registry.workload_facts("inherits").default_size == "tiny"  # its source would say Workload's "small"
    with pytest.raises(UnknownNameError, match="unknown workload 'nope'"):
        registry.workload_facts("nope")


def test_each_size_has_its_own_export_and_the_largest_is_the_default(tmp_path):
    write_tuned_config(_document(size="tiny", speedup=1.1), config_path("chmm", "cpu", "tiny", tmp_path))
    write_tuned_config(_document(size="full", speedup=9.0), config_path("chmm", "cpu", "full", tmp_path))
    write_tuned_config(_document(size="small", speedup=3.5), config_path("chmm", "cpu", "small", tmp_path))
    assert load_config("chmm", device="cpu", studies=tmp_path).speedup == 9.0
    assert load_config("chmm", "cpu", "tiny", studies=tmp_path).speedup == 1.1
    assert load_config("chmm", "cpu", "small", studies=tmp_path).size == "small"
    # Sizes of a workload's own after the three every workload has (which of them is larger, its name cannot say).
    from autotune.tuned import _exports

    folder = tmp_path / "mine"
    for size in ("medium", "tiny", "huge", "full", "small"):
        write_tuned_config(_document(size=size), config_path("mine", "cpu", size, tmp_path))
    order = [path.name for path in _exports(folder, "cpu", None, ("tiny", "small", "full", "medium", "huge"))]
    assert order == ["cpu-full.json", "cpu-small.json", "cpu-tiny.json", "cpu-huge.json", "cpu-medium.json", "cpu.json"]


@pytest.mark.parametrize(
    "content, fragment",
    [
        (b"", "not valid JSON"),
        (b'{"schema_version": 1, "config": {"dtype": "float', "not valid JSON"),
        (b"\xff\xfe\x00binary", "not UTF-8 JSON"),
        (b"[1, 2]", "not an exported config"),
        (b'{"schema_version": 1, "workload": "chmm"}', "not an exported config"),
        (b'{"schema_version": 1, "config": {"dtype": "float8"}}', "dtype=float8 is not allowed"),
        (b'{"schema_version": 1, "config": {"colour": "red"}}', "colour"),
        (b'{"schema_version": 1, "config": {"messages": "numba", "dtype": "float16"}}',
         "config breaks the space's constraint \"messages != 'numba'"),
        # A figure of another type would be a traceback in `autotune best` (console.figures_row).
        (b'{"schema_version": 1, "config": {}, "measured": {"throughput": "fast"}}',
         "measured.throughput must be a number, got 'fast'"),
        (b'{"schema_version": 1, "config": {}, "baseline": [1]}', "baseline must be a JSON object"),
        (b'{"schema_version": 1, "config": {}, "check": {"error": 0.1}}', "check.passed must be true or false"),
        (b'{"schema_version": 1, "config": {}, "check": {"passed": true, "metrics": {"x": 0.1}}}',
         "check.metrics must map"),
        (b'{"schema_version": 1, "config": {}, "check": {"passed": true, "metrics": {"x": [0.1, 0.5, 1]}}}',
         "check.metrics must map"),
        (b'{"schema_version": 1, "config": {}, "check": {"passed": true, "metrics": {"x": ["big", 0.5]}}}',
         "check.metrics must map"),
        (b'{"schema_version": 1, "config": {}, "speedup": "3x"}', "speedup must be a number, got '3x'"),
        (b'{"schema_version": 1, "config": {}, "workload_version": "2"}', "workload_version must be a whole number"),
        # A knob written twice (a hand edit): JSON keeps the last one, silently.
        (b'{"schema_version": 1, "config": {"dtype": "float32", "dtype": "float64"}}',
         "not valid JSON ('dtype' is given twice in one object; give each key once)"),
        # Another place's export copied here (an H100 preset saved as the CPU's): loaded as this device's tuning,
        # with the other's figures, without a word.
        (b'{"schema_version": 1, "config": {}, "workload": "chmm", "device": "h100", "size": "small"}',
         "holds an export of device 'h100', not of device 'cpu' as its place says"),
        (b'{"schema_version": 1, "config": {}, "workload": "ten", "device": "cpu", "size": "tiny"}',
         "holds an export of workload 'ten', size 'tiny', not of workload 'chmm', size 'small' as its place says"),
    ],
    ids=["empty", "truncated", "binary", "list", "no-config", "bad-value", "unknown-knob", "restricted",
         "text-figure", "figures-not-object", "check-without-verdict", "metric-not-pair", "metric-of-three",
         "metric-text", "speedup-text", "version-text", "twice",
         "other-device", "other-workload-and-size"],
)
def test_a_bad_export_is_one_error_that_names_the_file(tmp_path, content, fragment):
    path = config_path("chmm", "cpu", "small", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with pytest.raises(InvalidConfigError) as info:
        load_config("chmm", device="cpu", studies=tmp_path)
    assert str(path) in str(info.value) and fragment in str(info.value)

    done = run_cli("best", "-w", "chmm", "-d", "cpu", "--studies", str(tmp_path), cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert str(path) in done.stderr and "Traceback" not in done.stderr


def test_best_shows_an_export_that_lacks_some_figures(tmp_path):
    # A hand-written export may hold a config and a few figures; the ones it lacks are shown as "-".
    write_tuned_config(_document(check={"passed": True}), config_path("chmm", "cpu", "small", tmp_path))
    done = run_cli("best", "-w", "chmm", "-d", "cpu", "--studies", str(tmp_path), cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"chmm (small) on cpu, from {config_path('chmm', 'cpu', 'small', tmp_path)}\n"
                                  "Best config: "), done.stdout  # no "(None)", no "trial #None"
    best, baseline, speedup, check = done.stdout.splitlines()[-4:]
    assert best.split() == ["best", "10", "items/s", "-", "-"] and baseline.split() == ["baseline", "-"]
    assert speedup.split() == ["speedup", "3.50x"] and check.split() == ["check", "passed"]


def test_best_says_what_the_export_was_tuned_with_and_this_machine_s_torch_where_it_is_another(tmp_path):
    # The presets were tuned on torch 2.11.0+cu130: figures a user on another torch read as their own.
    import importlib.metadata

    environment = {"torch": "2.11.0+cu130", "cuda": "13.0", "python": "3.12.3"}
    write_tuned_config(_document(environment=environment, exported_at="2026-11-26T09:40:20+0000"),
                       config_path("chmm", "cpu", "small", tmp_path))
    done = run_cli("best", "-w", "chmm", "-d", "cpu", "--studies", str(tmp_path), cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == ("  tuned with       torch 2.11.0+cu130, CUDA 13.0, Python 3.12.3, on "
                                            f"2026-11-26 (here: torch {importlib.metadata.version('torch')})")
    # And on how many CPU threads: a search with --threads 1 said nothing of them.
    write_tuned_config(_document(environment={**environment, "cpu_threads": 1}), config_path("chmm", "cpu", "small",
                                                                                             tmp_path))
    done = run_cli("best", "-w", "chmm", "-d", "cpu", "--studies", str(tmp_path), cwd=tmp_path, timeout=60)
    assert "  tuned with       torch 2.11.0+cu130, CUDA 13.0, Python 3.12.3, 1 CPU thread" in done.stdout


def test_a_tilde_in_a_studies_folder_or_a_journal_is_the_home_folder(tmp_path, monkeypatch):
    # A quoted "~/studies" in $AUTOTUNE_STUDIES (or --studies=~/x, which the shell leaves) made a folder named ~.
    from click.testing import CliRunner

    from autotune.cli import cli
    from autotune.config import studies_dir
    from autotune.storage import user_storage
    from autotune.stored import open_study

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AUTOTUNE_STUDIES", "~/studies")
    assert studies_dir() == tmp_path / "studies"
    assert user_storage("~/s.journal") == str(tmp_path / "s.journal")
    # An SQLite file's too: SQLAlchemy reads no ~, and "sqlite:///~/x.db" made ./~/x.db, which no other search found.
    assert user_storage("sqlite:///~/x.db") == f"sqlite:///{tmp_path / 'x.db'}"
    assert user_storage("sqlite:///x~.db") == "sqlite:///x~.db"
    assert user_storage("postgresql://h/~db") == "postgresql://h/~db"
    with pytest.raises(Exception, match=f"no journal file at {tmp_path / 's.journal'}"):
        open_study("~/s.journal")
    write_tuned_config(_document(), config_path("chmm", "cpu", "small", tmp_path / "elsewhere"))
    done = CliRunner().invoke(cli, ["best", "-w", "chmm", "-d", "cpu", "--studies", "~/elsewhere", "--json"])
    assert done.exit_code == 0 and json.loads(done.output)["speedup"] == 3.5, done.output
    # A file option too (--recorded, --config, -o): "-o=~/r.html" wrote into a folder named ~.
    from tests.test_simulate import _cache

    _cache(tmp_path, name="cache.json")
    done = CliRunner().invoke(cli, ["simulate", "--recorded=~/cache.json", "--trials", "3", "--repeats", "1", "--json"])
    assert done.exit_code == 0 and json.loads(done.output)["recorded"] == str(tmp_path / "cache.json"), done.output
    assert not (tmp_path / "~").exists()


def test_an_export_of_a_config_alone_loads_as_what_its_place_says(tmp_path):
    path = config_path("chmm", "cpu", "tiny", tmp_path)
    write_tuned_config({"schema_version": SCHEMA_VERSION, "config": {"dtype": "float64", "chunk_size": 128}}, path)
    cfg = load_config("chmm", device="cpu", studies=tmp_path)
    assert (cfg.workload, cfg.device, cfg.size) == ("chmm", "cpu", "tiny")  # was None, None, None
    assert cfg["chunk_size"] == 128 and cfg["messages"] == "loop"  # stated: kept, though no effect under loop
    with pytest.raises(KeyError, match="not a knob of chmm; its knobs: chunk_size"):
        cfg["dytpe"]


def test_the_export_of_a_device_whose_name_goes_on_is_not_this_ones(tmp_path):
    # "<device>-*.json" of a GPU named by its model (cuda-nvidia-rtx-a6000) took the export of another whose name
    # goes on (cuda-nvidia-rtx-a6000-ada-small.json, read as size "ada-small"), and named "ada-small" as a size.
    from autotune.exceptions import ConfigNotFoundError

    other = "cuda-nvidia-rtx-a6000-ada"
    write_tuned_config(_document(device=other), config_path("chmm", other, "small", tmp_path))
    with pytest.raises(ConfigNotFoundError, match=r"no tuned config for workload 'chmm' on device "
                                                  r"'cuda-nvidia-rtx-a6000' \(looked in .*\); run"):
        load_config("chmm", device="cuda-nvidia-rtx-a6000", studies=tmp_path, strict=True)
    with pytest.raises(ConfigNotFoundError) as info:
        load_config("chmm", device="cuda-nvidia-rtx-a6000", size="tiny", studies=tmp_path, strict=True)
    assert "exported only at size" not in str(info.value)
    assert load_config("chmm", device=other, studies=tmp_path, strict=True).device == other


def test_load_config_of_a_workload_file_looks_under_its_name(tmp_path):
    from tests.conftest import BROKEN

    write_tuned_config(_document(workload="broken", size="tiny", config={"behaviour": "ok"}),
                       config_path("broken", "cpu", "tiny", tmp_path))
    assert load_config(BROKEN, device="cpu", size="tiny", studies=tmp_path, strict=True)["behaviour"] == "ok"


def test_load_config_of_a_plug_in_looks_under_the_name_search_exports_it_by(tmp_path, monkeypatch):
    # A plug-in's entry point may name it otherwise than its class does ("broken-plugin" for name = "broken"):
    # search exported under the class's name and load_config looked under the entry point's, finding nothing.
    import autotune.registry as registry
    from tests.conftest import BROKEN

    class EntryPoint:
        name, value = "broken-plugin", "tests.workloads.broken:BrokenWorkload"

        def load(self):
            return registry.get_workload_class(BROKEN)

    monkeypatch.setattr(registry, "_entry_points", lambda: {"broken-plugin": EntryPoint()})
    write_tuned_config(_document(workload="broken", size="tiny", config={"behaviour": "ok"}),
                       config_path("broken", "cpu", "tiny", tmp_path))
    assert load_config("broken-plugin", device="cpu", size="tiny", studies=tmp_path, strict=True)["behaviour"] == "ok"


def test_a_workload_file_under_the_home_folder_is_found_by_a_tilde(tmp_path, monkeypatch):
    # "--workload=~/x.py:Cls" reaches autotune with its ~: no shell expands one after "=".
    from pathlib import Path

    from autotune.registry import get_workload_class
    from tests.conftest import BROKEN

    path, _, name = BROKEN.rpartition(":")
    (tmp_path / "w").mkdir()
    for suffix in (".py", ".yaml"):
        (tmp_path / "w" / f"broken{suffix}").write_text(Path(path).with_suffix(suffix).read_text())
    monkeypatch.setenv("HOME", str(tmp_path))
    assert get_workload_class(f"~/w/broken.py:{name}").name == "broken"


def test_a_device_that_is_no_device_is_an_error_not_the_defaults(tmp_path):
    # "h10" for "h100" returned the space's defaults with a warning: a typo that looks like a tuned config.
    from autotune.exceptions import UnknownNameError

    with pytest.raises(UnknownNameError, match="unknown device 'h10'; valid: a100, auto, cpu"):
        load_config("chmm", device="h10", studies=tmp_path)
    with pytest.warns(UserWarning, match="no tuned config for 'chmm' on 'cuda-nvidia-l4'"):
        assert load_config("chmm", device="cuda-nvidia-l4", studies=tmp_path).source == "defaults"


def test_a_size_not_exported_names_the_sizes_that_are(tmp_path):
    # After `search --size tiny`, `explain` (size small by default) said only to search at small.
    write_tuned_config(_document(size="tiny"), config_path("chmm", "cpu", "tiny", tmp_path))
    write_tuned_config(_document(size="full"), config_path("chmm", "cpu", "full", tmp_path))
    with pytest.raises(ConfigNotFoundError, match=r"cpu-small\.json; exported only at size 'full', 'tiny'\)"):
        load_config("chmm", device="cpu", size="small", studies=tmp_path, strict=True)
    with pytest.warns(UserWarning, match="exported only at size 'full', 'tiny'"):
        load_config("chmm", device="cpu", size="small", studies=tmp_path)
    with pytest.raises(ConfigNotFoundError) as nothing:  # nothing exported on this device: no hint
        load_config("chmm", device="v100", size="small", studies=tmp_path, strict=True)
    assert "exported only" not in str(nothing.value)


def test_a_knob_it_lacks_is_a_key_error_naming_the_knobs(tmp_path):
    write_tuned_config(_document(), config_path("chmm", "cpu", "small", tmp_path))
    cfg = load_config("chmm", device="cpu", studies=tmp_path)
    with pytest.raises(KeyError, match="'dytpe' is not a knob of chmm; its knobs: .*dtype"):
        cfg["dytpe"]
    assert cfg.get("dytpe") is None and "dytpe" not in cfg and cfg.get("dtype") == "float64"


@pytest.mark.parametrize("size", ["", "TINY"])
def test_a_size_the_workload_lacks_is_an_error_even_where_an_export_exists(tmp_path, size):
    # load_config("chmm", size="") warned of a missing "h100-.json" and gave the defaults, where a preset was
    # there to load at the default size; a size is now checked before any file is looked for.
    write_tuned_config(_document(size="small"), config_path("chmm", "cpu", "small", tmp_path))
    with pytest.raises(UnknownNameError, match=f"unknown size {size!r}; valid: full, small, tiny"):
        load_config("chmm", device="cpu", size=size, studies=tmp_path)


@pytest.mark.parametrize("facts, message", [
    (dict(name="two words"), "workload name 'two words' cannot name a folder"),
    (dict(name=""), "workload name '' cannot name a folder"),
    (dict(name="a/b"), "workload name 'a/b' cannot name a folder"),
    (dict(name=".hidden"), "workload name '.hidden' cannot name a folder"),
    (dict(sizes={"../tiny": {}, "small": {}}), "workload 'w': size '../tiny' cannot name a file"),
    (dict(default_size="huge"), "workload 'w': size 'huge' is its default_size, but not one of its sizes (tiny, small)"),
    # Found by fuzzing: a size named None or 5, or a default size that is a list, were TypeErrors.
    (dict(sizes={None: {}}), "workload 'w': size None cannot name a file"),
    (dict(sizes={5: {}}), "workload 'w': size 5 cannot name a file"),
    (dict(default_size=["tiny"]), "workload 'w': size ['tiny'] is its default_size, but not one of its sizes"),
    # A version names a folder of the cache too ("1/../../x" wrote its reference outside it); a unit and each
    # size's parameters are read by every command (None showed as "None/s"; a size of 5 was a TypeError).
    (dict(version="1/../../x"), "workload 'w': version must be a whole number, not '1/../../x'"),
    (dict(version=True), "workload 'w': version must be a whole number, not True"),
    (dict(unit=""), "workload 'w': unit must name what a run's items are"),
    (dict(unit=None), "workload 'w': unit must name what a run's items are"),
    (dict(sizes={"tiny": 5}), "workload 'w': sizes must map each size's name to its parameters"),
    (dict(sizes=["tiny"]), "workload 'w': sizes must map each size's name to its parameters"),
])
def test_a_workload_whose_name_or_sizes_cannot_name_a_file_is_refused(facts, message):
    # The name is a folder of the studies and a size the export's file: "../x" wrote outside them (one end to end:
    # tests/test_cli.py).
    from autotune.exceptions import AutotuneError
    from autotune.registry import WorkloadFacts

    with pytest.raises(AutotuneError, match=re.escape(message)):
        WorkloadFacts(**{"name": "w", "unit": "items", "sizes": {"tiny": {}, "small": {}}, "default_size": "tiny",
                         **facts})
    assert WorkloadFacts("chmm-2.v1_x", "items", {"tiny": {}}, "tiny").name == "chmm-2.v1_x"


def test_a_workload_or_device_of_another_type_from_python_says_what_to_give():
    # The class itself, or None, was "'type' object has no attribute 'rpartition'" or "'NoneType' object has no
    # attribute 'lower'" from inside autotune; a list as the size, "unhashable type: 'list'".
    from autotune.exceptions import UnknownNameError
    from autotune.registry import get_workload_class
    from tests.conftest import BROKEN

    cls = get_workload_class(BROKEN)
    with pytest.raises(TypeError, match=r"^workload must be a string: a workload's name or 'path/to/file.py:"
                                        r"ClassName' \(the class's name, 'broken', once @register_workload has "
                                        r"registered it, or 'path/to/file.py:BrokenWorkload'\), not <class "):
        load_config(cls)
    with pytest.raises(TypeError, match=r"^device must be a device's name, e.g. 'cpu', 'h100' or 'auto', not None$"):
        load_config("chmm", None)
    with pytest.raises(UnknownNameError, match=r"^unknown size \[\]; valid: full, small, tiny"):
        load_config("chmm", "cpu", [])


def test_the_cached_data_of_earlier_versions_of_a_workload_file_is_named_once_it_is_large(tmp_path, monkeypatch):
    # Each edit of a workload file caches its data and reference anew (one folder per digest), and nothing removed
    # the earlier ones: a 160 MB reference took 0.45 GiB after three edits, without a word.
    import autotune.registry as registry

    (tmp_path / "big.py").write_text("x = 1\n")
    cache = tmp_path / "studies" / "cache" / "big"
    for name, size in (("tiny-v1-aaaaaaaaaaaa", 600), ("tiny-v1-bbbbbbbbbbbb", 500), ("tiny-v2-cccccccccccc", 900),
                       ("small-v1-dddddddddddd", 900), ("tiny-v1-eeeeeeeeeeee", 10)):
        (cache / name).mkdir(parents=True)
        (cache / name / "reference-cpu.pt").write_bytes(b"0" * size)
    spec, here = f"{tmp_path / 'big.py'}:Big", cache / "tiny-v1-eeeeeeeeeeee"
    monkeypatch.setattr(registry, "EARLIER_VERSIONS_BYTES", 1000)
    # The same size and version only: another version's or size's folders are not this file's earlier versions.
    assert registry.earlier_versions(spec, here) == [
        f"{cache} keeps the cached data and references of 2 earlier versions of big.py (0 MiB), which no search "
        "of this file reads: remove the tiny-v1-* folders there but tiny-v1-eeeeeeeeeeee once no search of an earlier "
        "version runs"]
    assert registry.earlier_versions("chmm", here) == []  # a built-in's folder has no digest
    monkeypatch.setattr(registry, "EARLIER_VERSIONS_BYTES", 1100)
    assert len(registry.earlier_versions(spec, here)) == 1  # 600 + 500 bytes: at the threshold, named
    monkeypatch.setattr(registry, "EARLIER_VERSIONS_BYTES", 1101)
    assert registry.earlier_versions(spec, here) == []  # under the line's threshold: not worth a line
    with open(cache / "tiny-v1-aaaaaaaaaaaa" / "reference-cpu.pt", "r+b") as big:
        big.truncate(3 * 2**20)  # a sparse file: its size as stat says it
    assert "(3 MiB)" in registry.earlier_versions(spec, here)[0]


def test_an_export_that_replaces_another_studys_winner_says_so(tmp_path):
    # One export per workload, device and size: a three-trial experiment (--study other) replaced a long search's
    # winner there without a word, and load_config took the experiment's.
    from autotune.export import ExportDocument

    path = config_path("chmm", "cpu", "small", tmp_path)
    main = ExportDocument({"dtype": "float64"}, "chmm", "cpu", "small", speedup=3.5, trial=41,
                          study={"name": "chmm-cpu-small"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        main.write(path)  # nothing there before
        main.write(path)  # the same study again: its own winner, updated
    other = ExportDocument({"dtype": "float32"}, "chmm", "cpu", "small", speedup=1.2, trial=2, study={"name": "other"})
    with pytest.warns(UserWarning, match=re.escape(f"{path} held the export of study 'chmm-cpu-small' (trial #41, "
                                                   "3.50x); it now holds the export of study 'other' (a search of "
                                                   "'chmm-cpu-small' exports its winner again)")):
        other.write(path)
    assert json.loads(path.read_text())["study"]["name"] == "other"
    # The study of the same name in another storage: a search with --storage studies/chmm.journal replaced the
    # SQLite study's winner without a word. Spellings of one file (relative, absolute) are one storage.
    sqlite = dataclasses.replace(main, study={"name": "chmm-cpu-small", "storage": "sqlite:///studies/autotune.db"})
    with pytest.warns(UserWarning, match="held the export of study 'other'"):
        sqlite.write(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dataclasses.replace(sqlite, study={"name": "chmm-cpu-small",
                                           "storage": f"sqlite:///{tmp_path}/studies/autotune.db"}).write(path)
    journal = dataclasses.replace(main, study={"name": "chmm-cpu-small", "storage": "studies/chmm.journal"})
    with pytest.warns(UserWarning, match=re.escape(f"{path} held the export of study 'chmm-cpu-small' in sqlite:///")
                      + ".*" + re.escape("it now holds the export of the study of that name in studies/chmm.journal "
                                         "(a search of the other exports its winner again)")):
        journal.write(path)


@pytest.mark.parametrize("folder", ["a?b", "50%25", "c#d", "e f", "g%", "h%3Fi"])
def test_the_default_storage_is_the_studies_folder_s_file_whatever_its_name(tmp_path, folder):
    # SQLAlchemy takes a "?" for the start of a URL's options and decodes a "%" sequence: `--studies 'a?b'` kept
    # its study in a file "a" in the working directory (its locks and cache in a?b), a folder "50%25" in "50%".
    from sqlalchemy.engine import make_url

    from autotune.config import default_storage
    from autotune.storage_names import same_storage, sqlite_path

    url = default_storage(tmp_path / folder)
    assert make_url(url).database == str(tmp_path / folder / "autotune.db") == str(sqlite_path(url))
    assert same_storage(make_url(url).render_as_string(), url)  # as an export says it, and as a search names it


def test_a_search_keeps_its_study_in_a_studies_folder_named_with_a_question_mark(tmp_path):
    done = run_cli("search", "-w", "chmm", "-d", "cpu", "-s", "tiny", "-n", "1", "--min-time", "0.02",
                   "--studies", "a?b", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "a?b" / "autotune.db").is_file() and not (tmp_path / "a").exists()
    assert "study chmm-cpu-tiny in sqlite:///a%3Fb/autotune.db" in done.stderr


def test_a_file_in_the_way_of_a_folder_is_told_to_move_not_to_change_hands(tmp_path):
    # A file at studies/cache: "studies/cache is a file (made by another user? give it to this one, ...)".
    from autotune.config import writable
    from autotune.exceptions import AutotuneError

    (tmp_path / "cache").write_text("")
    with pytest.raises(AutotuneError, match=r"cannot write numba's compiled kernels in .*cache/numba: .*cache is a "
                                            r"file \(move it away, or choose another --studies\)$"):
        writable(tmp_path / "cache" / "numba", "numba's compiled kernels")


def test_a_workload_file_s_space_may_be_named_yml(tmp_path):
    # mine.yml beside mine.py: every command said "mine.yaml: search-space file not found", and nothing of the .yml.
    (tmp_path / "mine.py").write_text(
        "from autotune.workload import Workload\n\n\n"
        "class Mine(Workload):\n"
        "    name, unit, sizes = 'mine_yml', 'items', {'tiny': {}}\n\n"
        "    def build(self, config):\n        return lambda: 1.0\n\n"
        "    def items_per_run(self, config):\n        return 1\n\n"
        "    def check(self, output, reference, config):\n        return None\n")
    spec = f"{tmp_path / 'mine.py'}:Mine"
    assert space_path(spec) == tmp_path / "mine.yaml"  # neither there: the name a message gives
    (tmp_path / "mine.yml").write_text("schema_version: 1\nparameters:\n  x: {choices: [a, b]}\ndefaults: {x: a}\n"
                                       "baseline: {}\n")
    assert space_path(spec) == tmp_path / "mine.yml"
    assert SearchSpace.from_file(space_path(spec)).defaults.to_dict() == {"x": "a"}
    (tmp_path / "mine.yaml").write_text((tmp_path / "mine.yml").read_text())
    assert space_path(spec) == tmp_path / "mine.yaml"  # both: .yaml, as before


def test_a_workload_named_as_a_shipped_one_reads_its_file_and_one_of_no_module_file_says_to_define_it(monkeypatch):
    import sys
    import types

    from autotune.exceptions import AutotuneError
    from autotune.shipped import folder
    from autotune.workload import Workload

    def workload(name, module):
        return type("Mine", (Workload,), {"name": name, "unit": "items", "sizes": {"tiny": {}}, "__module__": module,
                                          "build": lambda self, config: (lambda: 1.0),
                                          "items_per_run": lambda self, config: 1, "check": lambda *args: None})

    assert workload("chmm", __name__).space_path() == folder("search_spaces") / "chmm.yaml"
    # A class made where no file holds it (python -c, a notebook): a message, not Path(None)'s TypeError.
    monkeypatch.setitem(sys.modules, "made_here", types.ModuleType("made_here"))
    said = r"^workload 'made_here_w' has no search-space file; define space_path\(\)$"
    with pytest.raises(AutotuneError, match=said):
        workload("made_here_w", "made_here").space_path()


def test_the_cache_is_marked_as_one_for_git_and_backups(tmp_path):
    # A search in a project's repository left its reference outputs and numba's kernels for `git add .` to take.
    import subprocess

    from autotune.config import make_cache

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    folder = tmp_path / "studies" / "cache" / "chmm" / "tiny-v1"
    make_cache(folder)
    (folder / "reference-cpu.pt").write_bytes(b"0" * 100)
    (tmp_path / "studies" / "chmm").mkdir()
    (tmp_path / "studies" / "chmm" / "cpu-tiny.json").write_text("{}")  # an export is the user's to keep
    untracked = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path,
                               capture_output=True, text=True, check=True).stdout.split()
    assert untracked == ["??", "studies/chmm/cpu-tiny.json"]
    assert (tmp_path / "studies" / "cache" / "CACHEDIR.TAG").read_text().startswith(
        "Signature: 8a477f597d28d172789f06886806bc55")
    (tmp_path / "studies" / "cache" / ".gitignore").write_text("mine\n")
    make_cache(folder)  # a mark the user edited is left as it is
    assert (tmp_path / "studies" / "cache" / ".gitignore").read_text() == "mine\n"


def test_a_cache_whose_marks_cannot_be_written_is_made_without_them(tmp_path, monkeypatch):
    # The marks are a courtesy to git and backups: a disk that refuses them (full, read-only for them) keeps the cache.
    from pathlib import Path

    from autotune.config import make_cache

    def refused(path, text):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", refused)
    folder = tmp_path / "studies" / "cache" / "chmm" / "tiny-v1"
    make_cache(folder)
    assert folder.is_dir() and not (tmp_path / "studies" / "cache" / "CACHEDIR.TAG").exists()


def test_a_workload_file_s_classes_unpickle_in_a_process_started_afresh(tmp_path):
    # A DataLoader's workers under "spawn" (macOS's default) or "forkserver" (Python 3.14's on Linux) unpickle the
    # file's Dataset by its module's name: "No module named 'autotune_user_workload_...'", every such config an error.
    import os
    import pickle

    from autotune.registry import get_workload_class

    source = ("from autotune.workload import Workload\n\n\n"
              "class Item:\n    def __init__(self, x):\n        self.x = x\n\n\n"
              "class Mine(Workload):\n"
              "    name, unit, sizes = 'mine_{0}', 'items', {{'tiny': {{}}}}\n\n"
              "    def build(self, config):\n        return lambda: 1.0\n\n"
              "    def items_per_run(self, config):\n        return 1\n\n"
              "    def check(self, output, reference, config):\n        return None\n")
    classes = []
    for n, folder in enumerate(("a", "b:c")):  # two files named alike: two modules (a path may hold a ':')
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "mine.py").write_text(source.format(n))
        classes.append(get_workload_class(f"{tmp_path / folder / 'mine.py'}:Mine"))
    first, second = (sys.modules[cls.__module__] for cls in classes)
    assert first is not second and first.__name__ != second.__name__
    data = pickle.dumps([first.Item(3), second.Item(4)])
    done = subprocess.run([sys.executable, "-c", "import pickle, sys\nitems = pickle.loads(sys.stdin.buffer.read())\n"
                           "print([(type(i).__module__ == m, i.x) for i, m in zip(items, sys.argv[1:])])",
                           first.__name__, second.__name__], input=data, capture_output=True, env=dict(os.environ),
                          timeout=120)
    assert done.stdout.decode().strip() == "[(True, 3), (True, 4)]", done.stderr.decode()[-500:]


def test_a_config_equals_its_mapping_and_says_itself_as_a_progress_line_does():
    from autotune.config import Config

    config = Config({"kernel": "loop", "fast": True, "chunk": 256})
    assert config == {"chunk": 256, "fast": True, "kernel": "loop"} == Config(kernel="loop", fast=True, chunk=256)
    assert config != {"chunk": 256, "fast": False, "kernel": "loop"} and config != Config(kernel="loop")
    assert config != 5 and config != "loop" and repr(config) == "Config({'chunk': 256, 'fast': True, 'kernel': 'loop'})"
    assert config.describe() == "chunk=256 fast=true kernel=loop"
    assert config.describe({"chunk"}) == "fast=true kernel=loop (no effect under these: chunk)"


def test_one_sqlite_file_however_its_url_is_spelt_is_one_storage_and_another_kind_is_not():
    # An export says the storage its search was given, options and all; a report given it otherwise must still
    # find the export its own.
    from autotune.storage_names import same_storage

    with_options, plain = "sqlite:///studies/autotune.db?timeout=30", "sqlite:////home/u/studies/autotune.db"
    assert same_storage(with_options, plain) and same_storage(plain, with_options)
    assert not same_storage(plain, "sqlite:///studies/other.db")
    assert not same_storage("studies/autotune.db", plain)  # a journal file of that name is another storage
