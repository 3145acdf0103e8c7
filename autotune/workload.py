"""The Workload plug-in point.

A workload is a miniature of a real project: it makes its data, builds a
runnable under a config, says how many items one run processes, and judges an
output against the reference. :mod:`autotune.registry` finds workloads by
name: the built-ins, plug-ins of the entry-point group ``autotune.workloads``,
and ``path/to/file.py:ClassName``.
"""

from __future__ import annotations

import abc
import sys
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping

from autotune.check import Check
from autotune.config import Config
from autotune.exceptions import AutotuneError, UnknownNameError
from autotune.shipped import folder

__all__ = ["REGISTERED", "Workload", "not_a_run", "register_workload", "synchronizer"]


def not_a_run(run: Any) -> str:
    """What ``build`` returned, where it is no run (a function called with no arguments): ``a Tensor``, ``a function
    that takes (y)``; '' for a run. A run of arguments failed with "<lambda>() missing 1 required positional
    argument: 'y'", with no word of build."""
    import inspect

    if not callable(run):
        return "None" if run is None else f"a {type(run).__name__}"
    try:
        inspect.signature(run).bind()
    except TypeError:
        return f"a function that takes {inspect.signature(run)}"
    except ValueError:  # no signature to read (a builtin): called as it is
        pass
    return ""


class Workload(abc.ABC):
    """A runnable miniature of a project, built under a config.

    Contract for implementers:

    * Class attributes: ``name`` (a folder's name: letters, digits, ``_-.``), ``unit`` (what ``items_per_run`` counts),
      ``sizes`` (at least ``tiny``, for tests in well under a second a run,
      ``small``, the default, and ``full``, the scale its users run), and
      ``version`` (bump it when data or outputs change; cached data and
      references are keyed by it, a study of another version is not resumed,
      and an export of another version loads with a warning; declare it as
      ``version = N`` in the class body, where ``load_config`` reads it
      without importing the workload).
    * The search-space file (``space_path()``) holds the knobs, the
      ``baseline``, the ``defaults`` and the ``reference`` (knob values that
      give the simplest, most precise run: the reference output).
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
    version: ClassVar[int] = 1

    def __init__(self, size: str | None = None, device: str = "cpu", cache_dir: str | Path | None = None) -> None:
        self.size = size = self.size_named(size)
        self.params: Mapping[str, Any] = self.sizes[size]
        self.device = device
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None

    @classmethod
    def size_named(cls, size: str | None) -> str:
        """``size``, checked against the workload's sizes (None: its default)."""
        size = cls.default_size if size is None else size  # "" (an unset variable) is no size, not the default
        if not isinstance(size, str) or size not in cls.sizes:  # [] from Python: "unhashable type" before
            raise UnknownNameError("size", size, cls.sizes, hint=f"Those are the sizes of workload {cls.name!r}")
        return size

    @classmethod
    def space_path(cls) -> Path:
        """The search-space file: ``search_spaces/<name>.yaml`` shipped with autotune, else ``<module file>.yaml``
        (or ``.yml``, where only that is there: "search-space file not found" beside it said nothing of it)."""
        shipped = folder("search_spaces") / f"{cls.name}.yaml"
        if shipped.is_file():
            return shipped
        module = sys.modules.get(cls.__module__)
        if module is not None and getattr(module, "__file__", None):
            path = Path(module.__file__).with_suffix(".yaml")  # type: ignore[arg-type]
            return path if path.is_file() or not path.with_suffix(".yml").is_file() else path.with_suffix(".yml")
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


def synchronizer(workload: Workload) -> Callable[[], None]:
    """What the measurer calls around each timed run: the workload's ``synchronize``, and its device's own after it
    where the workload has one of its own. One that waits for its own stream alone (or for nothing) timed the launch
    of each run while the work ran on: a fast config by the clock, not by the work."""
    if type(workload).synchronize is Workload.synchronize:
        return workload.synchronize

    def both() -> None:
        workload.synchronize()
        Workload.synchronize(workload)

    return both


#: Workload classes registered by name in code that is imported (see autotune.registry).
REGISTERED: dict[str, type[Workload]] = {}


def register_workload(cls: type[Workload]) -> type[Workload]:
    """Class decorator: find ``cls`` by its ``name`` once its module is imported."""
    REGISTERED[cls.name] = cls
    return cls
