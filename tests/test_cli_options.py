"""The command line's option types and checks (:mod:`autotune.cli_options`), called in this process: each value
at its edges, each refusal's words and exit status.

`tests/test_cli.py` runs these through whole commands in fresh processes; here each is one call.
"""

import json
import os
import subprocess
import sys

import click
import pytest

from autotune import cli_options
from autotune.cli_options import (Count, FilePath, Seconds, Size, Storage, StudyName, library_call, parse_gpus, say,
                                  worker_plan, writable_folder, writable_studies)
from autotune.exceptions import AutotuneError
from autotune.limits import MAX_SECONDS


def _refusal(kind, value):
    with pytest.raises(click.BadParameter) as refused:
        kind.convert(value, None, None)
    return refused.value.message


@pytest.mark.parametrize("value, size", [
    ("1", 1), ("4GiB", 4 * 2**30), ("512MB", 512 * 10**6), (" 1.5 kib ", 1536), ("1e9", 10**9), ("2T", 2 * 10**12),
    ("1tib", 2**40), (7, 7), (str(2**62), 2**62), ("100b", 100), ("3K", 3000), ("2M", 2 * 10**6), ("1g", 10**9),
    ("1kb", 1000), ("1mib", 2**20), ("1gb", 10**9), ("1tb", 10**12), ("1KiB", 1024), ("2gib", 2**31),
])
def test_a_size_reads_units_of_1000_and_1024(value, size):
    assert Size().convert(value, None, None) == size


@pytest.mark.parametrize("value, said", [
    ("4 parsecs", "'4 parsecs' is not a size; use e.g. 4GiB, 512MB or a number of bytes"),
    ("GiB", "'GiB' is not a size"), ("1.2.3", "'1.2.3' is not a size between 1 byte and 4 EiB"),
    ("0.5", "'0.5' is not a size between 1 byte and 4 EiB"), ("0", "is not a size between"),
    (str(2**62 + 2**20), "is not a size between"), ("1e400", "is not a size between"),
])
def test_a_size_out_of_range_or_unreadable_is_refused(value, said):
    assert said in _refusal(Size(), value)


@pytest.mark.parametrize("value, seconds", [("0.5", 0.5), ("60", 60.0), (str(MAX_SECONDS), float(MAX_SECONDS))])
def test_seconds_are_positive_finite_and_no_longer_than_autotune_waits(value, seconds):
    assert Seconds().convert(value, None, None) == seconds


@pytest.mark.parametrize("value, said", [
    ("soon", "'soon' is not a number of seconds"), (None, "None is not a number of seconds"),
    ("0", "'0' is not a positive, finite number of seconds"), ("-1", "'-1' is not a positive"),
    ("nan", "'nan' is not a positive"), ("inf", "'inf' is not a positive"),
    (str(MAX_SECONDS + 1), f"'{MAX_SECONDS + 1}' is over the longest wait autotune takes, 1,000,000,000 seconds"),
])
def test_seconds_refused_say_why(value, said):
    assert _refusal(Seconds(), value).startswith(said)


def test_names_storages_and_paths_that_name_nothing_are_refused(tmp_path, monkeypatch):
    assert StudyName().convert("chmm-cpu-tiny", None, None) == "chmm-cpu-tiny"
    assert _refusal(StudyName(), "").startswith("'' is not a study name: ")
    assert Storage().convert("studies/chmm.journal", None, None) == "studies/chmm.journal"
    assert _refusal(Storage(), "") == ("'' names no storage; give an SQLAlchemy URL or a journal file's path, or leave "
                                       "the option out for the default")
    assert _refusal(Storage(), "sqlite:/x.db").startswith("'sqlite:/x.db' lacks the '//' of a URL")
    monkeypatch.setenv("AUTOTUNE_STORAGE", "sqlite:/x.db")  # the variable's value, named as such
    assert _refusal(Storage(), "sqlite:/x.db").startswith("'sqlite:/x.db' (the value of $AUTOTUNE_STORAGE) lacks")
    assert "(the value of" not in _refusal(Storage(), "sqlite:/y.db")
    assert FilePath().convert("~/r.json", None, None) == cli_options.Path.home() / "r.json"
    assert FilePath(dash="/dev/stdout").convert("-", None, None) == cli_options.Path("/dev/stdout")
    assert _refusal(FilePath(), "-") == ("'-' names no file here (standard input is not read); give a file's path")
    assert _refusal(FilePath(), " ") == "' ' names no file; give a file's path"
    assert _refusal(FilePath(), str(tmp_path)) == f"File '{tmp_path}' is a directory."
    assert Count(min=1).name == "whole number"


def _exit(call, capsys):
    with pytest.raises(SystemExit) as ended:
        call()
    return ended.value.code, capsys.readouterr().err


@pytest.mark.parametrize("gpus, found", [(None, None), ("0", [0]), ("0,1,2,3", [0, 1, 2, 3]), ("3, 1,", [3, 1])])
def test_gpus_are_distinct_indices(gpus, found):
    assert parse_gpus(gpus) == found


@pytest.mark.parametrize("gpus", ["", ",", "a", "0,0", "-1", "0,-1", "1.5"])
def test_gpus_that_are_no_list_of_distinct_indices_are_one_line_and_exit_2(gpus, capsys):
    assert _exit(lambda: parse_gpus(gpus), capsys) == (
        2, f"autotune: error: --gpus {gpus!r} is not a list of distinct GPU indices; use e.g. --gpus 0,1,2,3\n")


def test_a_plan_of_workers_on_the_storage_given(tmp_path, capsys):
    journal = str(tmp_path / "chmm.journal")
    assert worker_plan(None, None, None, "chmm", tmp_path) == (None, 1, False)  # one process, its SQLite study
    assert worker_plan(1, None, "sqlite:///x.db", "chmm", tmp_path) == (None, 1, False)
    assert worker_plan(None, None, journal, "chmm", tmp_path) == (None, 1, True)  # a shared study, one worker
    assert worker_plan(3, None, journal, "chmm", tmp_path) == (None, 3, True)
    assert worker_plan(None, "0,1", journal, "chmm", tmp_path) == ([0, 1], 2, True)
    assert worker_plan(2, "0,1", journal, "chmm", tmp_path) == ([0, 1], 2, True)
    assert worker_plan(None, "0", None, "chmm", tmp_path) == ([0], 1, True)  # --gpus runs workers even on SQLite
    code, said = _exit(lambda: worker_plan(3, "0,1", journal, "chmm", tmp_path), capsys)
    assert (code, said) == (2, "autotune: error: --workers 3 and --gpus 0,1 disagree: --gpus starts one worker per "
                               "GPU (2)\n")
    code, said = _exit(lambda: worker_plan(2, None, None, "chmm", tmp_path), capsys)
    assert code == 2 and said.startswith("autotune: error: 2 workers cannot share an SQLite study (it locks under "
                                         f"concurrent writers); use a journal file, e.g. --storage {journal} (one")
    code, said = _exit(lambda: worker_plan(None, "0,1", None, "chmm", tmp_path), capsys)
    assert code == 2 and "2 workers cannot share an SQLite study" in said
    assert worker_plan(None, None, None, "chmm", tmp_path, trials=0) == (None, 1, False)
    code, said = _exit(lambda: worker_plan(None, None, journal, "chmm", tmp_path, trials=0), capsys)
    assert code == 2 and said.startswith("autotune: error: --trials 0 re-measures and exports a study searched by one")


def test_a_folder_that_cannot_be_written_is_one_line_naming_the_option(tmp_path, capsys, monkeypatch):
    (tmp_path / "file").write_text("")
    writable_folder(tmp_path / "new" / "deeper", "--studies")  # made later: nothing in its way
    writable_folder(None, "--studies")
    assert _exit(lambda: writable_folder(tmp_path / "file" / "x", "--studies"), capsys) == (
        2, f"autotune: error: --studies {tmp_path / 'file' / 'x'} cannot be a folder: {tmp_path / 'file'} is a file; "
           "choose another path\n")
    monkeypatch.setattr("autotune.config.os.access", lambda path, mode: False)  # as root, nothing is read-only
    assert _exit(lambda: writable_folder(tmp_path, "-o", "write elsewhere"), capsys) == (
        2, f"autotune: error: -o {tmp_path} cannot be written: {tmp_path} is read-only to this user; write elsewhere\n")
    code, said = _exit(lambda: writable_studies(tmp_path), capsys)
    assert said == f"autotune: error: --studies {tmp_path} cannot be written: {tmp_path} is read-only to this user; " \
                   "choose another path\n"
    monkeypatch.setenv("AUTOTUNE_STUDIES", str(tmp_path))
    code, said = _exit(lambda: writable_studies(None), capsys)
    assert said.startswith(f"autotune: error: $AUTOTUNE_STUDIES {tmp_path} cannot be written") and said.endswith(
        "; choose another path\n")
    monkeypatch.delenv("AUTOTUNE_STUDIES")
    monkeypatch.chdir(tmp_path)
    code, said = _exit(lambda: writable_studies(None), capsys)
    assert said.startswith("autotune: error: the studies folder studies cannot be written") and said.endswith(
        "; pass --studies DIR, or set $AUTOTUNE_STUDIES\n")


def test_the_report_s_folder_of_a_workload_is_checked_too(tmp_path, capsys):
    (tmp_path / "chmm").write_text("")  # a file where the report's folder goes
    assert _exit(lambda: writable_studies(tmp_path, workload="chmm"), capsys) == (
        2, f"autotune: error: the report's folder {tmp_path / 'chmm'} cannot be a folder: {tmp_path / 'chmm'} is a "
           "file; choose another path\n")
    writable_studies(tmp_path, workload="no-such-workload")  # the command's own error names it


def test_a_library_error_is_one_line_and_exit_2_and_output_that_cannot_be_written_exit_1(capsys, monkeypatch):
    assert library_call(lambda a, b=0: a + b, 1, b=2) == 3

    def refuses():
        raise AutotuneError("workload 'x' is not known")

    assert _exit(lambda: library_call(refuses), capsys) == (2, "autotune: error: workload 'x' is not known\n")
    say("hello")
    assert capsys.readouterr().out == "hello\n"

    def full_disk(text):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cli_options.click, "echo", full_disk)
    monkeypatch.setattr(cli_options, "to_devnull", lambda stream: None)
    monkeypatch.setattr(cli_options, "tell", lambda line: print(line, file=sys.stderr))
    assert _exit(lambda: say("hello"), capsys) == (
        1, "autotune: error: cannot write to standard output: No space left on device\n")

    def closed_pipe(text):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli_options.click, "echo", closed_pipe)
    assert _exit(lambda: say("hello"), capsys) == (1, "")  # its reader asked for no more


def test_the_studies_option_names_a_folder_or_is_refused(tmp_path, monkeypatch):
    folder = cli_options._studies_folder
    assert folder(None, None, None) is None
    assert folder(None, None, "~/s") == cli_options.Path.home() / "s"
    with pytest.raises(click.BadParameter, match=r"^'' names no folder; give one \(\. for this one\), or leave the "):
        folder(None, None, "")
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(click.ClickException, match="the working directory no longer exists"):
        folder(None, None, None)


def test_autotune_s_own_warnings_are_one_line_and_others_as_python_shows_them(capsys, monkeypatch):
    shown = []
    monkeypatch.setattr(cli_options, "_python_shows_warning", lambda *args: shown.append(args))
    cli_options.show_warning(UserWarning("the winner is noisy"), UserWarning, cli_options.__file__, 1)
    assert capsys.readouterr().err == "autotune: warning: the winner is noisy\n" and shown == []
    cli_options.show_warning(UserWarning("deprecated"), UserWarning, click.__file__, 7)
    assert capsys.readouterr().err == "" and shown == [(shown[0][0], UserWarning, click.__file__, 7, None, None)]


@pytest.mark.parametrize("raised, code, said", [
    (None, 0, ""),
    (click.exceptions.Abort(), 130, "autotune: aborted\n"),
    (click.ClickException("no such study"), 2, "autotune: error: no such study\n"),
    (AutotuneError("torch is broken"), 2, "autotune: error: torch is broken\n"),
    (OSError(36, "File name too long", "x" * 8), 2, "autotune: error: xxxxxxxx: File name too long\n"),
    (OSError("a loop"), 2, "autotune: error: OSError: a loop\n"),
])
def test_what_a_command_raises_is_one_line_and_its_exit_status(raised, code, said, capsys, monkeypatch):
    monkeypatch.setattr(cli_options, "take_builtin_names", lambda: None)
    monkeypatch.setattr(cli_options.warnings, "showwarning", cli_options.warnings.showwarning)  # put back after

    @click.group()
    def group():
        pass

    @group.command()
    @click.option("--count", type=int)
    def go(count):
        if raised is not None:
            raise raised

    assert _exit(lambda: cli_options.run_group(group, ["go"]), capsys) == (code, said)
    code, said = _exit(lambda: cli_options.run_group(group, ["go", "--count", "x"]), capsys)
    assert code == 2 and said.startswith("autotune: error: Invalid value for '--count': 'x' is not a valid integer") \
        and said.endswith(" (see `autotune go --help`)\n")
    assert _exit(lambda: cli_options.run_group(group, []), capsys)[0] == 2  # the help, as nothing ran
    with pytest.raises(SystemExit) as ended:
        cli_options.run_group(group, ["go", "--help"])
    assert ended.value.code == 0 and "--count INTEGER" in capsys.readouterr().out


def test_the_shared_options_their_defaults_and_bounds(tmp_path):
    from click.testing import CliRunner

    from autotune.devices import cpu_threads

    @click.command()
    @cli_options.workload_option
    @cli_options.device_option
    @cli_options.size_option
    @cli_options.studies_option
    @cli_options.measure_options
    def measure(**given):
        click.echo(repr(sorted(given.items())))

    def run(*args):
        return CliRunner().invoke(measure, list(args))

    done = run("-w", "chmm")
    assert done.exit_code == 0 and done.output == repr(sorted({
        "workload": "chmm", "device": "auto", "size": None, "studies": None, "min_time": 1.0, "trial_timeout": None,
        "isolation": "subprocess", "threads": None}.items())) + "\n"
    helped = " ".join(run("--help").output.split())
    assert "--device TEXT Device profile" in helped and "[default: auto]" in helped
    assert "are timed in blocks). [default: 1.0]" in helped and "(debugging only). [default: subprocess]" in helped
    assert run().exit_code == 2 and "Missing option '--workload'" in run().output
    (tmp_path / "file").write_text("")
    assert run("-w", "chmm", "--studies", str(tmp_path / "file")).exit_code == 2  # a file is no folder of studies
    assert run("-w", "chmm", "--studies", str(tmp_path)).exit_code == 0
    assert run("-w", "chmm", "--threads", "1").exit_code == 0 and run("-w", "chmm", "--threads", "0").exit_code == 2
    assert run("-w", "chmm", "--threads", str(cpu_threads() + 1)).exit_code == 2
    for option, value in (("--min-time", "-1"), ("--trial-timeout", "soon"), ("--isolation", "thread")):
        refused = run("-w", "chmm", option, value)
        assert refused.exit_code == 2 and f"Invalid value for '{option}'" in refused.output, (option, refused.output)
    assert all(param.help for param in measure.params if isinstance(param, click.Option))


def test_every_option_of_every_command_says_what_it_does_and_every_command_shows_examples():
    from autotune.cli import cli

    for name, command in cli.commands.items():
        unsaid = [param.opts for param in command.params if isinstance(param, click.Option) and not param.help]
        assert unsaid == [], name
        assert "Examples:" in command.help, name


def test_streams_a_process_started_without_are_opened_on_dev_null_and_kept_by_its_children(tmp_path):
    # Left closed, the next file opened took a stream's number: the study's lock file became the fork server's
    # stderr (tests/test_faults.py runs that search). Here, the three streams alone, in a process started without.
    script = (
        "import fcntl, json, os, sys\n"
        "from autotune.cli_options import _open_standard_streams\n"
        "_open_standard_streams()\n"
        "said = {fd: [os.readlink(f'/proc/self/fd/{fd}'), fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE,\n"
        "             os.get_inheritable(fd)] for fd in (0, 1, 2)}\n"
        "said['streams'] = [sys.stdout.fileno(), sys.stderr.fileno()]\n"
        "with open(sys.argv[1], 'w') as out:\n"
        "    json.dump(said, out)\n")
    written = tmp_path / "said.json"
    done = subprocess.run([sys.executable, "-c", script, str(written)], timeout=120,
                          preexec_fn=lambda: [os.close(fd) for fd in (0, 1, 2)])
    assert done.returncode == 0
    assert json.loads(written.read_text()) == {
        "0": ["/dev/null", os.O_RDONLY, True], "1": ["/dev/null", os.O_WRONLY, True],
        "2": ["/dev/null", os.O_WRONLY, True], "streams": [1, 2]}
