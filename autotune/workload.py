"""The Workload plug-in point and the registry that finds workloads by name.

A workload is a miniature of a real project: it makes its data, builds a
runnable under a config, says how many items one run processes, and judges an
output against the reference. Built-in workloads live in the ``workloads``
package and register themselves; others come from the entry-point group
``autotune.workloads`` or from ``path/to/file.py:ClassName``.
"""

from __future__ import annotations

import abc
import importlib.util
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping

from autotune.check import Check
from autotune.config import Config
from autotune.exceptions import AutotuneError, UnknownNameError

__all__ = ["Workload", "get_workload_class", "register_workload", "workload_names"]

ENTRY_POINT_GROUP = "autotune.workloads"


class Workload(abc.ABC):
    """A runnable miniature of a project, built under a config.

    Contract for implementers:

    * Class attributes: ``name``, ``unit`` (what ``items_per_run`` counts),
      ``sizes`` (at least ``tiny``, for tests in well under a second a run,
      ``small``, the default, and ``full``, the scale its users run),
      ``reference_config`` (knob values that override the space's defaults
      to give the simplest, most precise run: the reference output), and
      ``version`` (bump it when data or outputs change; cached data and
      references are keyed by it).
    * ``build(config)`` does every one-off cost (allocation, compilation set-up,
      moving data to the device) and returns a callable; one call is one run,
      and its return value is the output to check. Calls must be repeatable:
      the runner calls it several times and checks the first and last output.
    * ``check(output, reference, config)`` returns a :class:`~autotune.check.Check`;
      tolerances depend on the config's precision.
    * Instances are used from one thread, in the process that measures them
      (a fresh child per trial by default), so global torch state set in
      ``build`` does not leak into other trials.
    * Expected failures (out of memory, an unsupported combination) may
      simply raise: the runner records them on the trial.
    """

    name: ClassVar[str]
    unit: ClassVar[str]
    sizes: ClassVar[Mapping[str, Mapping[str, Any]]]
    default_size: ClassVar[str] = "small"
    reference_config: ClassVar[Mapping[str, Any]] = {}
    version: ClassVar[int] = 1

    def __init__(self, size: str | None = None, device: str = "cpu", cache_dir: str | Path | None = None) -> None:
        size = size or self.default_size
        if size not in self.sizes:
            raise UnknownNameError(f"size of workload {self.name!r}", size, self.sizes)
        self.size = size
        self.params: Mapping[str, Any] = self.sizes[size]
        self.device = device
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None

    @classmethod
    def space_path(cls) -> Path:
        """The search-space file: ``search_spaces/<name>.yaml``, else ``<module file>.yaml``."""
        from autotune.space import space_file

        shipped = space_file(cls.name)
        if shipped is not None:
            return shipped
        module = sys.modules.get(cls.__module__)
        if module is not None and getattr(module, "__file__", None):
            return Path(module.__file__).with_suffix(".yaml")  # type: ignore[arg-type]
        raise AutotuneError(f"workload {cls.name!r} has no search-space file; define space_path()")

    def prepare(self) -> None:
        """Make the data once (into ``self.cache_dir`` when it is set). Optional hook."""

    @abc.abstractmethod
    def build(self, config: Config) -> Callable[[], Any]:
        """Everything a run needs, done once; returns the run."""

    @abc.abstractmethod
    def items_per_run(self, config: Config) -> int:
        """How many ``unit`` one run processes under ``config``."""

    @abc.abstractmethod
    def check(self, output: Any, reference: Any, config: Config) -> Check:
        """Compare a run's output with the reference output."""

    def to_reference(self, output: Any) -> Any:
        """The form of an output that is stored as the reference (picklable, on the CPU)."""
        return output

    def synchronize(self) -> None:
        """Wait for queued device work; the measurer calls it around every timed run."""
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()
        elif self.device == "mps":
            import torch

            torch.mps.synchronize()


_REGISTRY: dict[str, type[Workload]] = {}


def register_workload(cls: type[Workload]) -> type[Workload]:
    """Class decorator of the built-in workloads."""
    _REGISTRY[cls.name] = cls
    return cls


def _load_builtins() -> None:
    import workloads  # noqa: F401  (importing registers every built-in)


def _entry_point_classes() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def workload_names() -> list[str]:
    _load_builtins()
    return sorted(set(_REGISTRY) | set(_entry_point_classes()))


def _load_from_file(spec: str) -> type[Workload]:
    path_text, _, class_name = spec.rpartition(":")
    path = Path(path_text)
    if not path.is_file():
        raise AutotuneError(f"workload file {path} does not exist (from --workload {spec!r})")
    module_name = f"autotune_user_workload_{abs(hash(str(path.resolve())))}"
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
        raise UnknownNameError(f"Workload class in {path}", class_name, found)
    return cls


def get_workload_class(spec: str) -> type[Workload]:
    """A workload class from a name (built-in or entry point) or ``path/to/file.py:ClassName``."""
    if ":" in spec and spec.rpartition(":")[0].endswith(".py"):
        return _load_from_file(spec)
    _load_builtins()
    if spec in _REGISTRY:
        return _REGISTRY[spec]
    eps = _entry_point_classes()
    if spec in eps:
        cls = eps[spec].load()
        if not (isinstance(cls, type) and issubclass(cls, Workload)):
            raise AutotuneError(f"entry point {spec!r} in {ENTRY_POINT_GROUP} is not a Workload subclass")
        return cls
    raise UnknownNameError(
        "workload", spec, set(_REGISTRY) | set(eps), hint="A workload may also be given as path/to/file.py:ClassName"
    )
