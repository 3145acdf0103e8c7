"""A plain (non-editable) install finds its search spaces, workloads and presets."""

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import fresh_process_json, run_cli

ROOT = Path(__file__).resolve().parent.parent


def _source_copy(target: Path) -> Path:
    """The checkout without what a build or a run left in it: setuptools puts a ``build/`` folder's stale copies
    into the wheel, so a file deleted from the checkout would still ship (and this test would not see it)."""
    def ignore(folder: str, names: list[str]) -> set[str]:
        left = {"build", "dist", ".git", ".whl", ".gl", "test-artifacts", "__pycache__", ".pytest_cache"}
        if Path(folder) == ROOT / "studies":  # the user's own studies; only the presets ship
            left |= set(names) - {"presets"}
        return {name for name in names if name in left or name.endswith(".egg-info")}

    shutil.copytree(ROOT, target, ignore=ignore)
    return target


def test_wheel_ships_spaces_and_workloads_and_they_load_from_it(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"),
         str(_source_copy(tmp_path / "src"))],
        check=True, capture_output=True,
    )
    wheel = next((tmp_path / "dist").glob("autotune-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("search_spaces/chmm.yaml", "workloads/chmm.py", "autotune/cli.py", "autotune/py.typed",
                   "studies/presets/__init__.py", "studies/presets/lsd/h100-full.json"):
        assert needed in names, needed
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    code = (
        "import autotune, workloads.chmm\n"
        "from autotune.registry import space_path\nfrom autotune.space import load_space\n"
        "assert load_space('chmm').baseline['indices'] == 'per_step'\n"
        f"assert str(space_path('chmm')).startswith({str(target)!r}), space_path('chmm')\n"
        f"assert workloads.chmm.__file__.startswith({str(target)!r})\n"
        # a preset measured on an H100 ships in the package: found on any machine, from the installed copy
        f"cfg = autotune.load_config('lsd', device='h100', strict=True, studies={str(tmp_path / 'none')!r})\n"
        f"assert cfg.source.startswith({str(target)!r}) and cfg['precision'] == 'amp_fp16', cfg.source\n"
    )
    # Run outside the checkout, with only the installed copy on the path.
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})


def _project_with_autotunes_package_names(folder: Path) -> Path:
    """A user's project whose own packages are named ``workloads`` and ``search_spaces``, as autotune's are: first
    on the path of a script or of ``python -m`` run there. Its ``workloads/chmm.py`` fails loudly if imported."""
    (folder / "workloads").mkdir(parents=True)
    (folder / "workloads" / "__init__.py").write_text("MINE = True\n")
    (folder / "workloads" / "chmm.py").write_text("raise ImportError(\"the project's own workloads/chmm.py ran\")\n")
    (folder / "search_spaces").mkdir()
    (folder / "search_spaces" / "__init__.py").write_text("")
    return folder


def test_load_config_beside_packages_named_as_autotunes(tmp_path):
    """It read "search_spaces/chmm.yaml: search-space file not found": the project's package was taken for
    autotune's. The project's own `workloads` stays the one its script imports."""
    from autotune.shipped import folder

    project = _project_with_autotunes_package_names(tmp_path / "project")
    found = fresh_process_json(
        "import json, autotune, workloads\n"
        "cfg = autotune.load_config('chmm', 'h100', strict=True, studies='none')\n"
        "print(json.dumps([cfg.source, cfg['messages'], workloads.MINE]))", cwd=project)
    assert found == [str(folder("studies/presets") / "chmm" / "h100-small.json"), "chained", True]


def test_a_run_beside_packages_named_as_autotunes(tmp_path):
    """`python -m autotune` and its trials' fork server (itself `python -m`) have the working directory first on
    their path: the project's `workloads` hid autotune's, and every trial of a built-in failed."""
    project = _project_with_autotunes_package_names(tmp_path / "project")
    done = run_cli("run", "-w", "chmm", "-d", "cpu", "-s", "tiny", "--min-time", "0.02", "--json", cwd=project,
                   timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["status"] == "ok", done.stdout[-2000:]


@pytest.mark.parametrize("process", ["cli", "worker"])
def test_autotunes_own_processes_import_a_builtin_whose_facts_are_not_literals_from_autotune(tmp_path, process):
    """A built-in's name and sizes are read from its file while they are literals; one whose are not (a size table
    computed, say) is imported, in the command's process or a worker's, where the project's `workloads` comes
    first on the path. Each takes autotune's names first, as the fork server does."""
    from autotune.settings import SearchSettings

    project = _project_with_autotunes_package_names(tmp_path / "project")
    SearchSettings("chmm", "cpu", "huge", studies=str(tmp_path / "studies")).write(project / "settings.json")
    start = ("from autotune.cli import main\nmain(['list', '-w', 'chmm'])" if process == "cli" else
             "import sys\nfrom autotune._worker import main\nsys.exit(main(['settings.json', '0', '1']))")
    done = subprocess.run(
        [sys.executable, "-c", "import autotune.registry\n"
         "autotune.registry._class_source = lambda module, name: None  # facts no literal gives\n" + start],
        cwd=project, capture_output=True, text=True, timeout=120)
    if process == "cli":
        assert done.returncode == 0 and done.stdout.startswith("chmm  (unit: timesteps"), done.stderr[-2000:]
    else:  # its settings name a size chmm lacks: refused once the workload is known
        assert done.returncode == 2 and "huge" in done.stderr and "hidden" not in done.stderr, done.stderr[-2000:]


def test_a_script_is_told_what_hides_the_builtins(tmp_path):
    """In a user's own process the name stays the project's: a built-in asked for there says what hides it, rather
    than importing the project's module of that name."""
    project = _project_with_autotunes_package_names(tmp_path / "project")
    done = subprocess.run(
        [sys.executable, "-c", "from autotune.registry import get_workload_class\nget_workload_class('chmm')"],
        cwd=project, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert "autotune's built-in workloads.chmm is hidden by another package named 'workloads'" in last, last
    assert str(project / "workloads" / "__init__.py") in last and "the project's own" not in done.stderr


def test_shipped_modules_are_found_beside_autotune():
    from autotune.shipped import module_file

    assert module_file("workloads.chmm") == ROOT / "workloads" / "chmm.py"
    assert module_file("workloads") == ROOT / "workloads" / "__init__.py"
    assert module_file("workloads.nothing") is None and module_file("torch.nn") is None


def test_a_builtin_module_of_autotune_s_own_that_fails_its_import_says_its_own_error(monkeypatch):
    # Not "hidden by another package named 'workloads'": the package is autotune's, its module's import failed.
    from autotune.shipped import builtin_module

    monkeypatch.delitem(sys.modules, "workloads.no_such_workload", raising=False)
    with pytest.raises(ModuleNotFoundError, match="^No module named 'workloads.no_such_workload'$"):
        builtin_module("workloads.no_such_workload")


def test_taking_the_builtin_names_imports_nothing_where_autotunes_are_found_and_keeps_one_imported(tmp_path,
                                                                                                 monkeypatch):
    import types

    from autotune.shipped import take_builtin_names

    # Where the import system finds autotune's own workloads anyway, nothing is imported (nor imported twice).
    code = "import sys\nfrom autotune.shipped import take_builtin_names\ntake_builtin_names()\n" \
           "print('workloads' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr[-2000:]
    # A workloads package the process imported already is the process's: never replaced under it.
    theirs = types.ModuleType("workloads")
    monkeypatch.setitem(sys.modules, "workloads", theirs)
    take_builtin_names()
    assert sys.modules["workloads"] is theirs


def test_a_plugin_named_into_autotunes_package_is_told_to_take_another_name():
    from autotune.exceptions import AutotuneError
    from autotune.registry import get_workload_class

    with pytest.raises(AutotuneError, match=r"workloads is the name of autotune's own package.*path/to/file.py"):
        get_workload_class("workloads.mine:Mine")


#: Floors the test below cannot take as written, and what it takes instead.
_FLOOR_EXCEPTIONS = {
    "torch": None,  # only the installed build lies on the machine's disk: any other is a download of gigabytes
    "pyyaml": "6.0.1",  # 6.0 ships no wheel for Python 3.11 and no longer builds (Cython 3); 6.0.1 has its API
}


def _floors() -> list[str]:
    """Each dependency of setup.cfg's install_requires pinned at its floor (``plotly>=5.5`` -> ``plotly==5.5``)."""
    import configparser
    import re

    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    pins = []
    for line in parser["options"]["install_requires"].splitlines():
        found = re.match(r"\s*([A-Za-z0-9_.-]+)\s*>=\s*([0-9.]+)", line.split("#")[0])
        if found:
            name, floor = found.groups()
            taken = _FLOOR_EXCEPTIONS.get(name.lower(), floor)
            if taken is not None:
                pins.append(f"{name}=={taken}")
    return pins


def _release(version: str) -> tuple[int, ...]:
    """A release's numbers to three places: "5.5" and "5.5.0" are one."""
    parts = [int(part) for part in version.split(".")[:3]]
    return tuple(parts + [0] * (3 - len(parts)))


@pytest.mark.slow
def test_the_lowest_versions_setup_cfg_allows_run_a_search_and_its_report(tmp_path):
    """An environment may hold the oldest release a floor admits: plotly 5.0 and click 8.1 were admitted, and
    `autotune report` failed with a TypeError (plotly's to_html took no div_id until 5.5) that click then turned
    into an AttributeError (click.exceptions.NoArgsIsHelpError came in 8.2). Installs from PyPI."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    pins = _floors()
    assert any(pin.startswith("plotly==") for pin in pins) and any(pin.startswith("click==") for pin in pins)
    done = subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *pins],
                          capture_output=True, text=True, timeout=900)
    if done.returncode and ("Network" in done.stderr or "connection" in done.stderr.lower()):
        pytest.skip(f"PyPI cannot be reached: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr[-3000:]
    # Each floor is what the venv imports, not a newer copy beside it (5.5 and 5.5.0 are one release).
    script = ("import importlib.metadata as m, json, sys\n"
              "print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))")
    held = json.loads(subprocess.run([python, "-c", script, *(pin.split("==")[0] for pin in pins)],
                                     capture_output=True, text=True, check=True, timeout=120).stdout)
    assert {name: _release(held[name]) for name in held} == {
        pin.split("==")[0]: _release(pin.split("==")[1]) for pin in pins}
    project = tmp_path / "project"
    project.mkdir()
    for args in (["search", "-w", "chmm", "-d", "cpu", "-s", "tiny", "-n", "3", "--min-time", "0.02"],
                 ["report", "-w", "chmm", "-d", "cpu", "-s", "tiny"], ["best", "-w", "chmm", "-s", "tiny"]):
        ran = subprocess.run([python, "-m", "autotune", *args], cwd=project, capture_output=True, text=True,
                             timeout=600)
        assert ran.returncode == 0, (args, ran.stderr[-3000:])
    alone = subprocess.run([python, "-m", "autotune"], cwd=project, capture_output=True, text=True, timeout=120)
    assert alone.returncode == 2 and "Usage: autotune" in alone.stdout, alone.stderr[-2000:]
