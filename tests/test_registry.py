"""The registry (autotune.registry) in small pieces: how a trial's process finds a registered class, a workload's
version read without importing it, the cache folder and code a file's digest names, what a trial is measured with.
Workloads found by name, file and plug-in end to end are test_config's and test_tuner's."""

from __future__ import annotations

import hashlib
import sys
import types
from pathlib import Path

import pytest

from autotune import registry
from autotune._version import __version__
from autotune.exceptions import AutotuneError
from autotune.workload import REGISTERED, Workload
from tests.conftest import BROKEN


def _registered(monkeypatch, module: types.ModuleType, qualname: str = "Mine", name: str = "mine") -> type:
    """A workload class of ``module`` registered under ``name`` for this test."""
    cls = type(qualname.rpartition(".")[2], (Workload,), {"name": name, "unit": "items", "sizes": {"tiny": {}},
                                                          "default_size": "tiny", "__module__": module.__name__,
                                                          "__qualname__": qualname, "build": lambda self, c: None})
    setattr(module, cls.__name__, cls)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(REGISTERED, name, cls)
    return cls


def test_a_trial_s_process_finds_a_registered_class_by_its_package_module_or_its_script_s_file(tmp_path, monkeypatch):
    _registered(monkeypatch, types.ModuleType("mypkg.workloads"))
    assert registry.trial_spec("mine") == "mypkg.workloads:Mine"  # its relative imports need the package
    assert registry.get_workload_class("mine") is REGISTERED["mine"]
    script = types.ModuleType("myscript")  # run as __main__, or a module beside it: no package
    script.__file__ = str(tmp_path / "run.py")
    _registered(monkeypatch, script)
    assert registry.trial_spec("mine") == f"{(tmp_path / 'run.py').resolve()}:Mine"  # from any working folder
    # Names that are not registered classes are found as they are.
    assert registry.trial_spec("chmm") == "chmm" and registry.trial_spec(BROKEN) == BROKEN


@pytest.mark.parametrize("where, qualname", [(None, "Mine"), ("run.py", "Outer.Mine")])
def test_a_registered_class_no_trial_s_process_can_import_is_refused(tmp_path, monkeypatch, where, qualname):
    interactive = types.ModuleType("myshell")  # a notebook's, or `python -c`'s: no file
    if where is not None:
        interactive.__file__ = str(tmp_path / where)
    _registered(monkeypatch, interactive, qualname)
    with pytest.raises(AutotuneError, match=rf"^workload 'mine' \({qualname}\) cannot be found by a trial's own "
                                            "process, as it is defined in an interactive session or inside another"):
        registry.trial_spec("mine")


def test_a_class_registered_under_a_built_in_name_runs_as_the_built_in_only_when_it_is_the_built_in(
        tmp_path, monkeypatch):
    builtin = registry.get_workload_class("chmm")
    monkeypatch.setitem(REGISTERED, "chmm", builtin)
    assert registry.trial_spec("chmm") == "chmm"
    # The built-in's own file named by its path is the built-in, not a copy claiming its name.
    own = registry.get_workload_class(f"{sys.modules[builtin.__module__].__file__}:ChmmWorkload")
    assert own.name == "chmm" and own.__name__ == "ChmmWorkload"
    # A copy of its class, of the same name, in a file of its own; then one whose module is gone from sys.modules.
    copy = types.ModuleType("mypkg.copy")
    copy.__file__ = str(tmp_path / "copy.py")
    _registered(monkeypatch, copy, qualname="ChmmWorkload", name="chmm")
    with pytest.raises(AutotuneError, match="is named 'chmm', as the built-in workload is"):
        registry.trial_spec("chmm")
    monkeypatch.delitem(sys.modules, "mypkg.copy")
    with pytest.raises(AutotuneError, match="is named 'chmm', as the built-in workload is"):
        registry.trial_spec("chmm")


def test_a_version_is_the_class_s_where_it_is_imported_or_a_file_and_the_source_s_otherwise(tmp_path, monkeypatch):
    mine = _registered(monkeypatch, types.ModuleType("mypkg.versions"))
    mine.version = 3
    assert registry.declared_version("mine") == 3
    (tmp_path / "versioned.py").write_text("from autotune import Workload\n"
                                           "class V(Workload):\n    name, unit, sizes = 'v', 'items', {'tiny': {}}\n"
                                           "    default_size = 'tiny'\n    version = 4\n")
    assert registry.declared_version(f"{tmp_path / 'versioned.py'}:V") == 4
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.BUILTINS, "v", "versioned:V")
    monkeypatch.delitem(sys.modules, "versioned", raising=False)
    assert registry.declared_version("v") == 4 and "versioned" not in sys.modules  # read from its source
    monkeypatch.setitem(sys.modules, "versioned", types.SimpleNamespace(V=types.SimpleNamespace(version=5)))
    assert registry.declared_version("v") == 5  # imported: the class is asked (it may have been changed since)


def test_a_plug_in_s_version_is_read_from_the_source_its_entry_point_names_and_a_built_in_s_from_its_own(
        tmp_path, monkeypatch):
    (tmp_path / "plugged.py").write_text("from autotune import Workload\n"
                                         "class P(Workload):\n    version = 6\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "plugged", raising=False)
    entry = types.SimpleNamespace(name="p", value="plugged:P")
    monkeypatch.setattr(registry, "_entry_points", lambda: {"p": entry, "chmm": entry})
    assert registry.declared_version("p") == 6
    assert registry.declared_version("chmm") == registry.get_workload_class("chmm").version  # not the plug-in's


def _file(tmp_path: Path, text: str = "x = 1\n") -> tuple[str, str]:
    """A workload file's spec and the digest its folders and trials name it by."""
    (tmp_path / "mine.py").write_text(text)
    return f"{tmp_path / 'mine.py'}:Mine", hashlib.sha256(text.encode()).hexdigest()[:12]


def test_a_file_s_cache_folder_and_code_are_named_by_its_digest_and_a_built_in_s_by_autotune_s_version(tmp_path):
    spec, digest = _file(tmp_path)
    facts = registry.WorkloadFacts("mine", "items", {"tiny": {}}, "tiny", 2)
    assert registry.cache_folder(spec, facts, "tiny") == f"tiny-v2-{digest}"
    assert registry.cache_folder("chmm", facts, "tiny") == "tiny-v2"
    assert registry.workload_code(spec) == f"mine.py {digest}"
    assert registry.workload_code("chmm") == f"autotune {__version__}"


def test_a_file_edited_since_its_cache_folder_was_named_is_refused_and_other_folders_are_not_checked(tmp_path):
    spec, digest = _file(tmp_path)
    registry.check_unchanged(spec, tmp_path / f"tiny-v1-{digest}")
    registry.check_unchanged(spec, tmp_path / "tiny-v1")  # a folder named by hand: no digest to compare
    registry.check_unchanged("chmm", tmp_path / "tiny-v1-0123456789ab")  # a built-in's: no file
    (tmp_path / "mine.py").write_text("x = 2\n")
    with pytest.raises(AutotuneError, match="^mine.py has changed since this command started"):
        registry.check_unchanged(spec, tmp_path / f"tiny-v1-{digest}")


def test_a_trial_is_measured_with_the_code_the_reference_and_the_threads_it_was_given(tmp_path):
    from autotune.config import Config

    spec, digest = _file(tmp_path)
    plain = registry.measured_with(spec)
    assert plain["workload"] == f"mine.py {digest}" and not {"reference", "threads"} & plain.keys()
    reference = Config({"k": 1})
    given = registry.measured_with(spec, reference, threads=2)
    assert given["reference"] == reference.describe() and given["threads"] == "2"


def test_numba_caches_its_kernels_beside_the_workloads_caches_unless_told_where(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    assert registry.numba_folder(tmp_path / "cache" / "chmm" / "tiny") == tmp_path / "cache" / "numba"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert registry.numba_folder(tmp_path / "cache" / "chmm" / "tiny") == tmp_path / "elsewhere"


def test_a_module_s_or_a_plug_in_s_attribute_that_is_no_workload_class_is_refused(monkeypatch):
    assert registry.get_workload_class("tests.workloads.steady:SteadyWorkload").name == "steady"  # one that is
    for attribute in ("BROKEN", "Path"):  # a string, a class of another kind
        with pytest.raises(AutotuneError, match=f"^workload tests.conftest:{attribute}: tests.conftest has no "
                                                f"Workload subclass '{attribute}'$"):
            registry.get_workload_class(f"tests.conftest:{attribute}")
    entries = {"odd": types.SimpleNamespace(load=lambda: Path), "odder": types.SimpleNamespace(load=lambda: "x")}
    monkeypatch.setattr(registry, "_entry_points", lambda: entries)
    for name in entries:
        with pytest.raises(AutotuneError, match=f"^entry point '{name}' in autotune.workloads is not a Workload "
                                                "subclass$"):
            registry.get_workload_class(name)


def test_a_file_s_name_that_is_no_workload_class_is_refused_with_the_classes_it_has(tmp_path):
    from autotune.exceptions import UnknownNameError

    (tmp_path / "several.py").write_text("from autotune import Workload\nclass A(Workload):\n    pass\n"
                                         "class B(A):\n    pass\nclass Plain:\n    pass\nhelper = len\n")
    for name, hint in (("Plain", "defines 'Plain', but not as a subclass of autotune.Workload"), ("helper", "defines"),
                       ("Nope", None)):
        with pytest.raises(UnknownNameError) as info:
            registry.get_workload_class(f"{tmp_path / 'several.py'}:{name}")
        said = str(info.value)
        assert said.startswith(f"unknown Workload class in {tmp_path / 'several.py'} '{name}'; valid: A, B"), said
        assert (hint in said) if hint else "defines" not in said, said


def test_an_unknown_workload_says_how_to_name_a_file_s_class():
    from autotune.exceptions import UnknownNameError

    with pytest.raises(UnknownNameError, match=r"\. To load a workload from the file mine\.py, name its class: "
                                               r"mine\.py:ClassName$"):
        registry.get_workload_class("mine.py")  # the likeliest slip: the file without its class
    with pytest.raises(UnknownNameError, match=r"^unknown workload 'chmn'; valid: .*\. A workload may also be given "
                                               r"as path/to/file\.py:ClassName$"):
        registry.get_workload_class("chmn")


def test_a_workload_class_given_from_python_is_told_to_give_its_name():
    with pytest.raises(TypeError, match=r"the class's name, 'chmm', once @register_workload has registered it, or "
                                        r"'path/to/file.py:ChmmWorkload'\), not <class"):
        registry.get_workload_class(registry.get_workload_class("chmm"))
    with pytest.raises(TypeError, match=r"^workload must be a string: a workload's name or 'path/to/file.py:"
                                        r"ClassName', not <class 'pathlib.Path'>$"):
        registry.get_workload_class(Path)


def test_a_class_that_sets_no_name_unit_or_sizes_is_refused_in_one_line_not_a_traceback(tmp_path):
    # `--workload autotune.workload:Workload` (the base class), or a base of the user's own: an AttributeError
    # traceback, "type object 'Workload' has no attribute 'name'".
    (tmp_path / "bases.py").write_text("from autotune import Workload\nclass Base(Workload):\n    unit = 'items'\n")
    for spec, cls, missing in (("autotune.workload:Workload", "Workload", "name, unit and sizes"),
                               (f"{tmp_path / 'bases.py'}:Base", "Base", "name and sizes")):
        with pytest.raises(AutotuneError, match=f"^workload {spec}: {cls} sets no {missing}: a workload class states "
                                                "its name, unit and sizes as class attributes"):
            registry.workload_facts(spec)


def test_a_workload_that_cannot_be_found_or_imported_is_one_error_naming_it(tmp_path):
    import re

    missing = tmp_path / "nothing.py"
    with pytest.raises(AutotuneError, match=f"^workload file {re.escape(str(missing))} does not exist "
                                            f"\\(from --workload '{re.escape(str(missing))}:Nope'\\)$"):
        registry.get_workload_class(f"{missing}:Nope")
    (tmp_path / "fails.py").write_text("from autotune import Workload\nraise ZeroDivisionError('at import')\n")
    for _ in range(2):  # and the same again: a failed import leaves no half-made module to be found next time
        with pytest.raises(AutotuneError, match=f"^workload file {re.escape(str(tmp_path / 'fails.py'))} failed to "
                                                "import: ZeroDivisionError: at import$"):
            registry.get_workload_class(f"{tmp_path / 'fails.py'}:W")
    with pytest.raises(AutotuneError, match="^workload tests.no_such_module:W: cannot import tests.no_such_module: "
                                            "ModuleNotFoundError: No module named 'tests.no_such_module'$"):
        registry.get_workload_class("tests.no_such_module:W")  # a package found, its module not
    with pytest.raises(AutotuneError, match=r"^workload workloads.mine:W: cannot import workloads.mine: .* \(workloads "
                                            r"is the name of autotune's own package, which autotune's processes "
                                            r"import: give yours another name"):
        registry.get_workload_class("workloads.mine:W")


def test_a_plug_in_whose_module_is_gone_declares_no_version_and_a_package_not_installed_is_not_recorded(
        tmp_path, monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(registry, "_entry_points", lambda: {"gone": types.SimpleNamespace(value="no_such_xyz:Gone")})
    assert registry.declared_version("gone") is None  # its source cannot be read: nothing is declared
    installed = importlib.metadata.version

    def version(package):
        if package == "numba":
            raise importlib.metadata.PackageNotFoundError(package)
        return installed(package)

    monkeypatch.setattr(importlib.metadata, "version", version)
    spec, _ = _file(tmp_path)
    found = registry.measured_with(spec)
    assert "numba" not in found and found["torch"] == installed("torch")
