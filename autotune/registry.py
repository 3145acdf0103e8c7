"""The registry: a workload's name -> its class and its search-space file.

Three kinds of workload are found here, and nowhere else:

* the built-ins, listed in :data:`BUILTINS` by module and class; their space
  files ship in ``search_spaces/``, so a space is found without importing
  the workload (``load_config`` imports no torch);
* installed plug-ins, in the entry-point group ``autotune.workloads``;
* a class in a file, ``path/to/file.py:ClassName``, with its space beside it
  (``file.yaml``) unless the class says otherwise.

A class decorated with :func:`~autotune.workload.register_workload` in
code that is already imported is found by its name too.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib
import importlib.util
import inspect
import os
import re
import sys
from dataclasses import MISSING, dataclass, fields
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from autotune._version import __version__
from autotune.exceptions import AutotuneError, UnknownNameError, said
from autotune.shipped import PACKAGES, builtin_module, folder, module_file
from autotune.workload import REGISTERED, Workload
from autotune.workload_files import is_file_module, module_name as file_module

if TYPE_CHECKING:
    from autotune.config import Config

__all__ = ["BUILTINS", "ENTRY_POINT_GROUP", "WorkloadFacts", "cache_folder", "check_unchanged", "declared_version",
           "earlier_versions", "get_workload_class", "literals", "measured_with", "numba_folder", "space_path",
           "trial_spec", "workload_code", "workload_facts", "workload_names"]

ENTRY_POINT_GROUP = "autotune.workloads"

#: Built-in workload name -> "module:Class" (imported only when the class is needed).
BUILTINS: dict[str, str] = {
    "chmm": "workloads.chmm:ChmmWorkload",
    "latentwire": "workloads.latentwire:LatentWireWorkload",
    "lsd": "workloads.lsd:LsdWorkload",
    "ten": "workloads.ten:TenWorkload",
    "vlm_mc": "workloads.vlm_mc:VlmMcWorkload",
}


def _is_file_spec(spec: str) -> bool:
    return spec.rpartition(":")[0].endswith(".py")


def _file_of(spec: str) -> Path:
    """The file a ``path/to/file.py:Class`` names ("--workload=~/x.py:Cls": no shell expands a ~ after =)."""
    return Path(spec.rpartition(":")[0]).expanduser()


def _text(spec: Any) -> str:
    """A workload as given from Python: a string, or a TypeError that says what to give (the class itself was
    "'type' object has no attribute 'rpartition'", or "unhashable type", from inside)."""
    if not isinstance(spec, str):
        hint = (f" (the class's name, {spec.name!r}, once @register_workload has registered it, or "
                f"'path/to/file.py:{spec.__name__}')" if isinstance(spec, type) and issubclass(spec, Workload) else "")
        raise TypeError(f"workload must be a string: a workload's name or 'path/to/file.py:ClassName'{hint}, "
                        f"not {spec!r}")
    return spec


def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def workload_names() -> list[str]:
    """Every workload that can be named: built-ins, plug-ins and classes registered in imported code."""
    return sorted(set(BUILTINS) | set(_entry_points()) | set(REGISTERED))


def get_workload_class(spec: str) -> type[Workload]:
    """A workload class from a name (built-in, plug-in, registered) or ``path/to/file.py:ClassName``.

    What its module prints as it is imported goes to stderr: stdout is where ``--json`` writes (a file of mine
    that said "module loaded" as it loaded came before the object, which no script could parse).
    """
    with contextlib.redirect_stdout(sys.stderr):
        return _workload_class(_text(spec))


def _workload_class(spec: str) -> type[Workload]:
    if _is_file_spec(spec):
        return _own_name(spec, _load_from_file(spec))
    if spec in BUILTINS:
        module, _, name = BUILTINS[spec].partition(":")
        return getattr(builtin_module(module), name)
    if spec in REGISTERED:
        return REGISTERED[spec]
    eps = _entry_points()
    if spec in eps:
        cls = eps[spec].load()
        if not (isinstance(cls, type) and issubclass(cls, Workload)):
            raise AutotuneError(f"entry point {spec!r} in {ENTRY_POINT_GROUP} is not a Workload subclass")
        return _own_name(spec, cls)
    module_name = spec.rpartition(":")[0]
    if module_name and importlib.util.find_spec(module_name.partition(".")[0]) is not None:
        # module:Class, as an entry point names one (a registered class, for a trial's process)
        return _own_name(spec, _load_from_module(spec))
    # A file named without its class ("my_workload.py") is the likeliest slip: say what to add.
    hint = (f"To load a workload from the file {spec}, name its class: {spec}:ClassName" if spec.endswith(".py")
            else "A workload may also be given as path/to/file.py:ClassName")
    raise UnknownNameError("workload", spec, workload_names(), hint=hint)


def trial_spec(spec: str) -> str:
    """How a trial's own process finds the workload ``spec`` names. A class registered in this process only (with
    :func:`~autotune.workload.register_workload`, in a script) is unknown there, and every trial failed with
    "unknown workload": it is named by its module, or by the script's file, which that process imports (a
    script's search then belongs under ``if __name__ == "__main__":``)."""
    spec = _text(spec)
    if _is_file_spec(spec) or spec not in REGISTERED:
        return spec
    cls = REGISTERED[spec]
    if spec in BUILTINS:  # the built-in, or another class registered under its name, which was never run
        _own_name(f"{cls.__module__}:{cls.__qualname__}", cls)
        return spec
    # A package's module by its name (its relative imports need the package); a script, or a module beside it,
    # by its file (a trial's process starts in the working directory, not in the script's).
    file = "." not in cls.__module__ or is_file_module(cls.__module__)  # a script, or a workload file
    where = getattr(sys.modules.get(cls.__module__), "__file__", None) if file else cls.__module__
    if where is None or "." in cls.__qualname__:
        raise AutotuneError(f"workload {spec!r} ({cls.__qualname__}) cannot be found by a trial's own process, as "
                            "it is defined in an interactive session or inside another class: define it at the top "
                            "of a file and give path/to/file.py:ClassName, or run trials here (isolation='inprocess')")
    return f"{Path(where).resolve() if where.endswith('.py') else where}:{cls.__qualname__}"


def _own_name(spec: str, cls: type[Workload]) -> type[Workload]:
    """``cls``, once its name is its own: a built-in's name (a file's copy of chmm, or a subclass that inherits
    ``name``) took the built-in's shipped space and shared its study, exports and cached reference: the built-in's
    trials were read as the new workload's, and its configs failed there with KeyErrors."""
    target = BUILTINS.get(getattr(cls, "name", None), "") if isinstance(getattr(cls, "name", None), str) else ""
    module_name, _, class_name = target.partition(":")
    if not module_name:
        return cls
    try:
        builtin_file = module_file(module_name)
        own_file = Path(sys.modules[cls.__module__].__file__)  # type: ignore[arg-type]
        same = cls.__name__ == class_name and own_file.resolve() == Path(builtin_file).resolve()
    except (ImportError, AttributeError, KeyError, TypeError, ValueError):
        same = False
    if same:  # the built-in's own file named by its path: the same workload
        return cls
    raise AutotuneError(f"workload {spec} is named {cls.name!r}, as the built-in workload is: it would share the "
                        f"built-in's search space, studies, exports and cached reference; give {cls.__name__} a name "
                        f"of its own (name = \"my_{cls.name}\")")


def shipped_space(name: str) -> Path | None:
    """The space file shipped for a built-in workload (``search_spaces/<name>.yaml``), or ``None``."""
    path = folder("search_spaces") / f"{name}.yaml"
    return path if path.is_file() else None


def space_path(spec: str) -> Path:
    """The search-space file of a workload; a built-in's is found without importing the workload."""
    spec = _text(spec)
    if spec in BUILTINS:
        shipped = shipped_space(spec)
        if shipped is not None:
            return shipped
    return get_workload_class(spec).space_path()


def declared_version(spec: str) -> int | None:
    """A workload's ``version`` (bumped when its data or outputs change), read without importing a built-in or
    plug-in workload, which would import torch (``load_config`` must not): the ``version = N`` its class body
    declares in the module's source. A class already imported, or in a file, is asked. ``None`` where the source
    declares none (the class inherits its version) or cannot be read."""
    spec = _text(spec)
    if _is_file_spec(spec) or spec in REGISTERED:
        return get_workload_class(spec).version
    entry = _entry_points().get(spec) if spec not in BUILTINS else None
    target = BUILTINS.get(spec) or (entry.value if entry is not None else "")
    module_name, _, class_name = target.partition(":")
    if module_name in sys.modules:
        return getattr(getattr(sys.modules[module_name], class_name, None), "version", None)
    stated = _class_source(module_name, class_name)
    version = stated[1].get("version") if stated is not None else None
    return version if type(version) is int else None


def _file_digest(spec: str) -> str:
    """The digest of a workload file as its cache folder, its trials and its exports name it ("63feeb532f56")."""
    return hashlib.sha256(_file_of(spec).read_bytes()).hexdigest()[:12]


def cache_folder(spec: str, facts: "WorkloadFacts", size: str) -> str:
    """The folder of a workload's cached data and reference output at ``size``: ``<size>-v<version>``, and for a
    workload in a file the digest of that file too. An edited file (a bug in its output fixed) was checked against
    the old file's cached reference, and every config failed; a module it imports is not read (bump ``version``)."""
    folder = f"{size}-v{facts.version}"
    if not _is_file_spec(spec):
        return folder
    return f"{folder}-{_file_digest(spec)}"  # it was imported from there: it is readable


def check_unchanged(spec: str, cache_dir: str | Path) -> None:
    """Raise where a workload file is no longer the one its cache folder was named for (``cache_folder``): edited
    while a search of it ran, a trial ran the new file, was checked against the old file's reference and was
    recorded as the old file's, without a word."""
    named = Path(cache_dir).name.rsplit("-", 1)[-1]  # a file's digest; "v1" where none (a class registered in code)
    if not _is_file_spec(spec) or not re.fullmatch(r"[0-9a-f]{12}", named):
        return  # a folder cache_folder did not name for a file (a request made by hand names any)
    if _file_digest(spec) != named:
        raise AutotuneError(f"{_file_of(spec).name} has changed since this command started: its reference and its "
                            "trials are of the file as it was then; run the command again to tune the file as it is now")


#: Earlier versions' cached data and references are named once they take this much: each edit of a file adds its
#: own (a workload of mine with a 160 MB reference kept 0.45 GiB of them after three edits, without a word).
EARLIER_VERSIONS_BYTES = 100 * 2**20


def earlier_versions(spec: str, cache_dir: str | Path) -> list[str]:
    """A line naming the cached data and references of earlier versions of a workload file at this size
    (``cache_folder``: one folder per digest), where they take at least ``EARLIER_VERSIONS_BYTES``: nothing reads
    them once the file has changed, and nothing removes them, as a search of an earlier version may still run."""
    here = Path(cache_dir)
    if not _is_file_spec(spec) or not here.parent.is_dir():
        return []
    prefix = here.name.rsplit("-", 1)[0] + "-"  # "<size>-v<version>-": the same size and version, another digest
    earlier = sorted(p for p in here.parent.iterdir() if p.is_dir() and p.name.startswith(prefix) and p != here)
    size = sum(f.stat().st_size for folder in earlier for f in folder.rglob("*") if f.is_file())
    if size < EARLIER_VERSIONS_BYTES:
        return []
    return [f"{here.parent} keeps the cached data and references of {len(earlier)} earlier version"
            f"{'s' * (len(earlier) != 1)} of {_file_of(spec).name} ({size / 2**20:,.0f} MiB), which no search of this "
            f"file reads: remove the {prefix}* folders there but {here.name} once no search of an earlier version runs"]


def workload_code(spec: str) -> str:
    """Which code of a workload runs: a file's name and digest ("mine.py 63feeb532f56"), or for a built-in or a
    plug-in autotune's version ("autotune 0.1.0")."""
    return f"{_file_of(spec).name} {_file_digest(spec)}" if _is_file_spec(spec) else f"autotune {__version__}"


def measured_with(spec: str, reference: Config | None = None, threads: int | None = None) -> dict[str, str]:
    """What a trial's outcome rests on besides its config, as a study records it: the workload's code (a file's
    name and digest; a built-in's or plug-in's, autotune's version), the versions of torch and numba, read
    without importing them, the ``reference`` config its outputs were checked against (the space file's) and the
    CPU ``threads`` it ran on. A config measured with others is measured again when asked: a kernel fixed in the
    file, or a compile mode that crashed under the old torch, was a repeat of its old failure, a config failed
    against a wrong reference stayed "incorrect" once the space file named a right one, and a study resumed with
    --threads 2 took the baseline's figure at --threads 1 as its own."""
    found = {"workload": workload_code(spec)}
    if reference is not None:
        found["reference"] = reference.describe()
    if threads is not None:
        found["threads"] = str(threads)
    for package in ("torch", "numba"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def numba_folder(cache_dir: str | Path) -> Path:
    """Where numba caches the kernels it compiles, for every workload and size: ``$NUMBA_CACHE_DIR`` where it is
    set, else ``<studies>/cache/numba`` (``cache_dir`` is ``<studies>/cache/<workload>/<size>``)."""
    return Path(os.environ.get("NUMBA_CACHE_DIR") or Path(cache_dir).parent.parent / "numba")


#: What a workload's name and sizes may be: they name its folder of the studies and its exports' files.
FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class WorkloadFacts:
    """What autotune's own process needs of a workload class: the runner's children run the workload itself."""

    name: str
    unit: str
    sizes: Mapping[str, Mapping[str, Any]]
    default_size: str = Workload.default_size
    version: int = Workload.version

    def __post_init__(self) -> None:
        # The name is a folder of the studies (the exports, the cached reference) and starts the study's name:
        # "../x" wrote outside them, "" into the studies folder itself.
        if not isinstance(self.name, str) or not FILE_NAME.fullmatch(self.name):
            raise AutotuneError(f"workload name {self.name!r} cannot name a folder: use letters, digits, '_', '-' "
                                "and '.', starting with a letter or digit")
        # What every command reads of them: a unit to show, each size's parameters, a version that names a folder of
        # the cache ("1/../../x" wrote outside it).
        if not isinstance(self.unit, str) or not self.unit.strip():
            raise AutotuneError(f"workload {self.name!r}: unit must name what a run's items are, e.g. 'images', "
                                f"not {self.unit!r}")
        if not isinstance(self.sizes, Mapping) or not all(isinstance(v, Mapping) for v in self.sizes.values()):
            raise AutotuneError(f"workload {self.name!r}: sizes must map each size's name to its parameters, e.g. "
                                f"{{'tiny': {{'n': 64}}, 'small': {{'n': 1024}}}}, not {self.sizes!r}")
        if type(self.version) is not int:
            raise AutotuneError(f"workload {self.name!r}: version must be a whole number, not {self.version!r}")
        # A size names the export's file (<device>-<size>.json): the same rule.
        odd = [s for s in self.sizes if not isinstance(s, str) or not FILE_NAME.fullmatch(s)]  # a size None too
        if odd or not isinstance(self.default_size, str) or self.default_size not in self.sizes:
            raise AutotuneError(f"workload {self.name!r}: size {odd[0] if odd else self.default_size!r} "
                                + ("cannot name a file: use letters, digits, '_', '-' and '.'" if odd
                                   else f"is its default_size, but not one of its sizes ({', '.join(self.sizes)})"))

    def size_named(self, size: str | None) -> str:
        return Workload.size_named.__func__(self, size)  # type: ignore[attr-defined] # the class's own rule and error

    @classmethod
    def of(cls, workload: type[Workload], spec: str | None = None) -> "WorkloadFacts":
        # The base class, or a base of the user's own, named as a workload: "type object 'Workload' has no
        # attribute 'name'" was a traceback.
        def listed(names: list[str]) -> str:
            return ", ".join(names[:-1]) + " and " * (len(names) > 1) + names[-1]

        missing = [fact for fact in STATED if not hasattr(workload, fact)]
        if missing:
            raise AutotuneError(f"workload {spec or workload.__name__}: {workload.__name__} sets no {listed(missing)}: "
                                f"a workload class states its {listed(list(STATED))} as class attributes "
                                "(autotune.Workload)")
        try:  # each trial makes its workload so: one whose __init__ takes other arguments failed every trial
            inspect.signature(workload).bind("tiny", "cpu", None)  # with "takes 2 positional arguments but 4 ..."
        except TypeError as exc:
            raise AutotuneError(f"workload {getattr(workload, 'name', workload.__name__)!r}: {workload.__name__} must "
                                "be made as autotune.Workload is, with (size, device, cache_dir), which its __init__ "
                                f"passes on ({exc}); read other settings in prepare() or build()") from None
        return cls(**{name: getattr(workload, name) for name in FACTS})


#: The class attributes a :class:`WorkloadFacts` holds, and those a class must state (Workload has no default).
FACTS = tuple(field.name for field in fields(WorkloadFacts))
STATED = tuple(field.name for field in fields(WorkloadFacts) if field.default is MISSING)

#: What :func:`_class_source` states for a name its class body assigns something other than a literal.
NOT_A_LITERAL = object()


def workload_facts(spec: str) -> WorkloadFacts:
    """A workload's name, unit, sizes, default size and version. A built-in's are read from its class body where
    they are literals, without importing its module, which imports torch (3.5 s on a 2-core CPU); every other
    workload, and a built-in already imported, is asked. A test checks the two ways agree for every built-in."""
    spec = _text(spec)
    module_name, _, class_name = BUILTINS.get(spec, "").partition(":")
    stated = _class_source(module_name, class_name) if module_name and module_name not in sys.modules else None
    # Only a direct subclass of Workload: an attribute its body leaves out is then Workload's.
    if (stated is None or stated[0] != ["Workload"] or not set(STATED) <= stated[1].keys()
            or any(stated[1].get(key) is NOT_A_LITERAL for key in FACTS)):
        return WorkloadFacts.of(get_workload_class(spec), spec)
    return WorkloadFacts(**{key: value for key, value in stated[1].items() if key in FACTS})


def _class_source(module_name: str, class_name: str) -> tuple[list[str], dict[str, Any]] | None:
    """The bases and the literal attributes (``name = "chmm"``, ``version: ClassVar[int] = 2``) of a class as its
    module's source states them, read without running the module; ``None`` where the source cannot be read."""
    if not module_name or "." in class_name:
        return None
    try:  # a built-in's file beside autotune: its name may be another package's here (autotune.shipped)
        origin = module_file(module_name) or importlib.util.find_spec(module_name).origin  # type: ignore[union-attr]
        tree = _parsed(Path(origin).read_text(encoding="utf-8"))  # type: ignore[arg-type]
    except (ImportError, AttributeError, TypeError, ValueError, OSError, SyntaxError):
        return None
    node = next((node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == class_name), None)
    if node is None:
        return None
    return [ast.unparse(base) for base in node.bases] + [ast.unparse(k) for k in node.keywords], literals(node.body)


@functools.lru_cache(maxsize=16)
def _parsed(source: str) -> ast.Module:
    # Once per text, and only read (literals() evaluates anew): `load_config` reads its workload's facts and
    # version from the source on every call, two parses of chmm's module, 13 ms of its 35 (this CPU).
    return ast.parse(source)


def literals(statements: list[ast.stmt]) -> dict[str, Any]:
    """What ``statements`` assign to plain names (``name = "chmm"``, ``version: ClassVar[int] = 2``), read without
    running them: the literal, or :data:`NOT_A_LITERAL` for anything else (unknown, never a default)."""
    stated: dict[str, Any] = {}
    for statement in statements:
        targets = statement.targets if isinstance(statement, ast.Assign) else [getattr(statement, "target", None)]
        value = getattr(statement, "value", None)
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and value is not None:
            try:
                stated[targets[0].id] = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                stated[targets[0].id] = NOT_A_LITERAL
    return stated


def _load_from_module(spec: str) -> type[Workload]:
    module_name, _, class_name = spec.rpartition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - a name that is no module, or one that fails: its words, in one line
        top = module_name.partition(".")[0]
        ours = (f" ({top} is the name of autotune's own package, which autotune's processes import: give yours "
                "another name, or name its file, path/to/file.py:ClassName)") if top in PACKAGES else ""
        raise AutotuneError(f"workload {spec}: cannot import {module_name}: {said(exc)}{ours}") from None
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Workload)):
        raise AutotuneError(f"workload {spec}: {module_name} has no Workload subclass {class_name!r}")
    return cls


def _load_from_file(spec: str) -> type[Workload]:
    path, class_name = _file_of(spec), spec.rpartition(":")[2]
    if not path.is_file():
        raise AutotuneError(f"workload file {path} does not exist (from --workload {spec!r})")
    module_name = file_module(path)  # a name any process imports the file by: a DataLoader's spawned workers too
    module = sys.modules.get(module_name)
    if module is None:
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[module_name]
            raise AutotuneError(f"workload file {path} failed to import: {type(exc).__name__}: {exc}") from exc
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Workload)):
        found = [n for n, v in vars(module).items() if isinstance(v, type) and issubclass(v, Workload) and v is not Workload]
        # A name the file has that is no Workload says so, rather than "unknown" beside a list without it.
        why = f"{path} defines {class_name!r}, but not as a subclass of autotune.Workload" if cls is not None else ""
        raise UnknownNameError(f"Workload class in {path}", class_name, found, hint=why)
    return cls
