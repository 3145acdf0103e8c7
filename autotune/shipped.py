"""What autotune ships beside its own package, found there rather than by name.

The built-in workloads (``workloads``), their space files (``search_spaces``) and the presets
(``studies/presets``) are top-level packages, as the project's layout has them, under names a user's project
may use too. A ``workloads/`` or ``search_spaces/`` package of one's own in the working directory comes
first on the path of a script, of ``python -m autotune``, and of every trial's process (each starts as
``python -m``): it hid autotune's, and after a plain ``pip install .`` every search failed ("the fork server
... failed to start: ... No module named 'workloads.chmm'"), and ``load_config`` too ("chmm.yaml:
search-space file not found"). So the files are found beside ``autotune/``, as every install lays them out,
and autotune's own processes import the built-ins from there.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from importlib.resources import files
from pathlib import Path
from types import ModuleType

from autotune.exceptions import AutotuneError

__all__ = ["PACKAGES", "builtin_module", "folder", "module_file", "take_builtin_names"]

#: The top-level packages autotune ships besides ``autotune``.
PACKAGES = ("workloads", "search_spaces", "studies")

_ROOT = Path(__file__).resolve().parent.parent  # site-packages, or the repository of an editable install


def folder(name: str) -> Path:
    """The folder ``name`` (``search_spaces``, ``studies/presets``) as autotune ships it: beside its own package,
    else where the import system finds it (a layout of another kind)."""
    here = _ROOT / name
    return here if here.is_dir() else Path(str(files(name.replace("/", "."))))


def module_file(module_name: str) -> Path | None:
    """The source file of a module autotune ships (``workloads.chmm``), found without importing anything; None
    for any other module."""
    top, _, rest = module_name.partition(".")
    if top not in PACKAGES:
        return None
    path = _ROOT.joinpath(top, *rest.split(".")).with_suffix(".py") if rest else _ROOT / top / "__init__.py"
    return path if path.is_file() else None


def _own(module: ModuleType | None, module_name: str) -> bool:
    """Whether ``module`` is autotune's ``module_name``, not a package of the same name elsewhere."""
    mine, theirs = module_file(module_name), getattr(module, "__file__", None)
    return mine is None or (theirs is not None and Path(theirs).resolve() == mine.resolve())


def take_builtin_names() -> None:
    """Make ``workloads`` autotune's in this process, where another package of that name would be found first.
    Only autotune's own processes call it (the CLI, the fork server, a worker), before any workload is imported:
    in a user's script the name stays the user's, and :func:`builtin_module` says what hides the built-ins."""
    own = module_file("workloads")
    if own is None or "workloads" in sys.modules:
        return
    found = importlib.util.find_spec("workloads")  # imports nothing: a top-level name
    if found is not None and found.origin is not None and Path(found.origin).resolve() == own.resolve():
        return
    spec = importlib.util.spec_from_file_location("workloads", own, submodule_search_locations=[str(own.parent)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["workloads"] = module
    spec.loader.exec_module(module)


def builtin_module(module_name: str) -> ModuleType:
    """autotune's module ``module_name`` (``workloads.chmm``), imported. Where a package of the same name hides
    it, an error that names that package and what to do, never the other package's module."""
    top = module_name.partition(".")[0]
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        if _own(sys.modules.get(top), top):
            raise  # autotune's own package: the module's own import failed
        module = None
    if module is not None and _own(module, module_name):
        return module
    package = sys.modules.get(top)
    where = getattr(package, "__file__", None) or ", ".join(getattr(package, "__path__", [])) or "?"
    raise AutotuneError(f"autotune's built-in {module_name} is hidden by another package named {top!r} ({where}), "
                        f"found first on this process's path: rename that package, or run from a folder without "
                        f"it (autotune's is {_ROOT / top})")
