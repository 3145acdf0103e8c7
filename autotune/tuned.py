"""The tuned config a user's script loads: ``autotune.load_config("chmm")``.

:class:`TunedConfig` is what :func:`load_config` returns: the winning config
of a search plus the figures it was chosen on, read from the export document
(:mod:`autotune.export`) in the studies directory or the presets shipped with
autotune, its knob values checked against the workload's space. Loading one
imports neither torch nor optuna, so user scripts pay nothing for it.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path
from typing import Any, Collection, Iterator, Mapping

from autotune.config import Config, studies_dir
from autotune.devices import cpu_name, cpu_threads, filed_under
from autotune.exceptions import AutotuneError, ConfigNotFoundError, InvalidConfigError, UnknownNameError
from autotune.export import ExportDocument, read_document
from autotune.limits import check_numbers
from autotune.parameters import canonical_values
from autotune.registry import (FILE_NAME, WorkloadFacts, declared_version, space_path, workload_code,
                               workload_facts)
from autotune.shipped import folder
from autotune.space import SearchSpace

__all__ = ["SIZE_PREFERENCE", "TunedConfig", "load_config"]


#: Which size ``load_config`` takes when none is named: the largest measured,
#: the one nearest a user's real run. A file of the older layout
#: (``<device>.json``, no size) comes last.
SIZE_PREFERENCE = ("full", "small", "tiny")


def _export_names(device: str, size: str | None) -> list[str]:
    """The names an export of one device may have: ``search`` writes ``<device>-<size>.json``; older ones lack the size."""
    return [f"{device}-{size}.json"] if size is not None else [f"{device}-*.json", f"{device}.json"]


def _sized(folder: Path, device: str, sizes: Collection[str]) -> dict[str, Path]:
    """The exports of one device in ``folder`` by size: ``<device>-<size>.json`` for each of the workload's sizes.
    The pattern alone took another device's whose name goes on (``cuda-nvidia-rtx-a6000-ada-small.json`` for the
    ``cuda-nvidia-rtx-a6000``, at size "ada-small")."""
    found = folder.glob(_export_names(device, None)[0]) if folder.is_dir() else []
    return {size: path for path in found if (size := _size_of(path, device)) in sizes and path.is_file()}


def _size_of(path: Path, device: str) -> str | None:
    """The size an export's file names: ``<device>-<size>.json``; None for the older ``<device>.json``."""
    return path.stem.removeprefix(f"{device}-") if path.stem != device else None


def _exports(folder: Path, device: str, size: str | None, sizes: Collection[str]) -> list[Path]:
    """The exported configs of one device in ``folder``, in the order ``load_config`` prefers them."""
    if size is not None:
        return [folder / name for name in _export_names(device, size)]
    rank = {name: i for i, name in enumerate(SIZE_PREFERENCE)}
    found = sorted(_sized(folder, device, sizes).items(), key=lambda item: (rank.get(item[0], len(rank)), item[0]))
    return [path for _, path in found] + [folder / _export_names(device, size)[1]]


class TunedConfig(Mapping[str, Any]):
    """A read-only mapping of the tuned knobs, with the figures behind them.

    ``cfg["dtype"]`` is a knob's value; ``cfg.speedup``, ``cfg.measured``,
    ``cfg.baseline``, ``cfg.check`` and ``cfg.environment`` come from the run
    that chose it. ``cfg.source`` says which file it came from, or
    ``"defaults"`` when nothing was tuned yet. ``cfg.unused`` names the knobs
    that have no effect under the others (a kernel's knobs when another
    kernel won): they hold their defaults.
    """

    def __init__(self, document: ExportDocument | Mapping[str, Any], source: str,
                 unused: tuple[str, ...] = ()) -> None:
        if not isinstance(document, ExportDocument):
            document = ExportDocument.from_json(document, source)
        self.export = document
        self._config = Config(document.config)
        self.source = source
        self.unused = unused

    def __getitem__(self, name: str) -> Any:
        try:
            return self._config[name]
        except KeyError:  # a typo in a user's script ("dytpe"): name the knobs there are
            raise KeyError(f"{name!r} is not a knob of {self.workload}; its knobs: {', '.join(self._config)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._config)

    def __len__(self) -> int:
        return len(self._config)

    def __repr__(self) -> str:
        return f"TunedConfig({self._config.to_dict()!r}, speedup={self.speedup}, source={self.source!r})"

    @property
    def config(self) -> Config:
        return self._config

    @property
    def document(self) -> dict[str, Any]:
        """The whole exported document, as JSON."""
        return self.export.to_json()

    workload = property(lambda self: self.export.workload)
    device = property(lambda self: self.export.device)
    size = property(lambda self: self.export.size)
    measured = property(lambda self: self.export.measured)
    baseline = property(lambda self: self.export.baseline)
    speedup = property(lambda self: self.export.speedup)
    check = property(lambda self: self.export.check)
    environment = property(lambda self: self.export.environment)


def _presets_root() -> Path | None:
    """The presets shipped with autotune (``studies/presets``, package data), found beside autotune's package."""
    try:
        return folder("studies/presets")
    except (ImportError, ModuleNotFoundError, TypeError):
        return None


def _validated(document: ExportDocument, space: SearchSpace, path: Path) -> Config:
    """The document's config, completed, once its knob values are checked against the workload's space (no value
    comes back unchecked)."""
    try:
        return space.allowed(document.config, what=f"{path}: config")
    except AutotuneError as exc:
        raise InvalidConfigError(f"{exc}; re-run `autotune search` to write it anew") from None


def _filled_in(document: ExportDocument, config: Config, space: SearchSpace, workload: str, device: str,
               path: Path) -> ExportDocument:
    """The document with what its file leaves out filled in: the knobs it lacks (an export older than a knob, or
    one written by hand) at the defaults ``config``, the space's completion of it that was checked, gives them,
    and the workload, device and size its place says. A value the file states is kept, as the space spells it
    (a hand-written 64.0 of an int knob is 64)."""
    size = _size_of(path, device)
    stated = canonical_values(space.parameters, document.config)
    return dataclasses.replace(document, config={**config.to_dict(), **stated},
                               workload=document.workload or workload, device=document.device or device,
                               size=document.size or size)


def _check_place(document: ExportDocument, workload: str, device: str, path: Path) -> None:
    """Refuse an export that says it was tuned for another workload, device or size than its file's place (one
    copied by hand, an H100 preset saved as ``a100-small.json``): it was loaded as this device's, with the other's
    figures and without a word."""
    size = _size_of(path, device)
    place = {"workload": workload, "device": device, "size": size}
    stated = {"workload": document.workload, "device": document.device, "size": document.size}
    other = [key for key, value in stated.items() if value is not None and place[key] is not None
             and value != place[key]]
    if other:
        said = ", ".join(f"{key} {stated[key]!r}" for key in other)
        raise InvalidConfigError(f"{path} holds an export of {said}, not of "
                                 f"{', '.join(f'{k} {place[k]!r}' for k in other)} as its place says: its config and "
                                 f"figures are the other's; load that one, or run `autotune search` for this one")


def _warn_if_tuned_on_another_version(document: ExportDocument, workload: str, path: Path) -> None:
    """Say so when the export was tuned on another version of its workload: its config passed a check of other
    outputs (a version is bumped when they change, as vlm_mc's 2 added the dropout-off features); or, for a
    workload in a file, on that file before an edit: its config was measured and checked on the old file."""
    size = f" --size {document.size}" if document.size else ""
    again = f"re-run `autotune search --workload {workload} --device {document.device}{size}` to tune and check it anew"
    now = declared_version(workload)
    if document.workload_version is not None and now is not None and document.workload_version != now:
        warnings.warn(f"{path} was tuned on version {document.workload_version} of {document.workload or workload}, "
                      f"and its data or outputs differ at version {now} (this autotune's): {again}", stacklevel=3)
    tuned_on, here = (document.environment or {}).get("workload_code"), workload_code(workload)
    if isinstance(tuned_on, str) and tuned_on.split()[0] == here.split()[0] != "autotune" and tuned_on != here:
        warnings.warn(f"{path} was tuned on {here.split()[0]} as it was before an edit: its config was measured and "
                      f"checked on that file; {again}", stacklevel=3)


def _machine(name: str, cores: Any) -> str:
    return f"{name} ({cores} core{'' if cores == 1 else 's'})" if isinstance(cores, int) else name


def _warn_if_tuned_on_another_cpu(document: ExportDocument, workload: str, device: str, path: Path) -> None:
    """Say so when a CPU export was tuned on another CPU, or with other cores than this process may use: the
    ``cpu`` profile covers every CPU (a GPU's export is filed under its model), and its winner and figures are that
    machine's (a study copied from a 2-core laptop loaded on a 64-core server without a word)."""
    environment = document.environment or {}
    tuned_on, cores = environment.get("cpu"), environment.get("cpu_cores")
    if device != "cpu" or not isinstance(tuned_on, str):
        return
    here, here_cores = cpu_name(), cpu_threads()
    if tuned_on == here and (not isinstance(cores, int) or cores == here_cores):
        return
    size = f" --size {document.size}" if document.size else ""
    warnings.warn(f"{path} was tuned on {_machine(tuned_on, cores)}, and this process runs on "
                  f"{_machine(here, here_cores)}: its winner may not be the fastest here, nor its figures this "
                  f"process's; run `autotune search --workload {workload} --device cpu{size}` here to tune for it",
                  stacklevel=3)


def named_by_its_file(error: UnknownNameError, studies: str | os.PathLike | None = None) -> UnknownNameError:
    """``error``, an unknown workload's, saying how its search named it where the workload's folder of ``studies``
    (else the default folder) holds an export of a workload in a file: ``load_config("mine")`` or ``autotune report
    -w mine`` after ``search -w mine.py:MineWorkload`` said only "unknown workload 'mine'", though the export lay in
    studies/mine/. Any other error is returned as it is."""
    workload = error.name
    if error.kind != "workload" or not isinstance(workload, str) or not FILE_NAME.fullmatch(workload):
        return error  # a workload's name alone: never ".." nor a path
    try:
        folder = (Path(studies) if studies is not None else studies_dir()) / workload
    except AutotuneError:  # $AUTOTUNE_STUDIES names no folder: the command that reads it says so, not this hint
        return error
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:  # "mine.py 63feeb532f56" (registry.workload_code): the file's name, then its digest
            file = str(read_document(path).environment.get("workload_code") or "").partition(" ")[0]
        except (AutotuneError, AttributeError):  # not an export, or one without an environment
            continue
        if file.endswith(".py"):
            return UnknownNameError("workload", workload, error.valid, hint=(
                f"{path} was tuned on the workload in the file {file}: name it as its search did: "
                f"path/to/{file}:ClassName"))
    return error


def known_workload(workload: str, studies: str | os.PathLike | None = None) -> WorkloadFacts:
    """:func:`autotune.registry.workload_facts`, whose unknown name says how a file workload's search named it
    (:func:`named_by_its_file`): ``Tuner("mine")`` said only "unknown workload 'mine'" where `load_config` and every
    command said how."""
    try:
        return workload_facts(workload)
    except UnknownNameError as error:
        raise named_by_its_file(error, studies) from None


def _space_named(workload: str, studies: str | os.PathLike | None) -> SearchSpace:
    """The space of ``workload``; an unknown name's error says how a file workload's search named it."""
    try:
        return SearchSpace.from_file(space_path(workload))
    except UnknownNameError as error:
        raise named_by_its_file(error, studies) from None


def load_config(
    workload: str,
    device: str = "auto",
    size: str | None = None,
    *,
    strict: bool = False,
    studies: str | os.PathLike | None = None,
) -> TunedConfig:
    """The tuned configuration of ``workload`` for ``device`` (at ``size``, else the largest one exported).

    ``device`` is a profile name (``cpu``, ``h100``, a GPU's derived name) or
    this machine's: ``auto`` (the first accelerator, else the CPU) or ``cuda``;
    any other name raises :class:`~autotune.exceptions.UnknownNameError`.

    Looks in the studies directory (``studies``, else ``$AUTOTUNE_STUDIES``,
    else ``./studies``), then in the presets shipped with autotune; without
    either, returns the search space's defaults with a warning, or raises
    :class:`~autotune.exceptions.ConfigNotFoundError` when ``strict``.

    Example::

        import autotune
        cfg = autotune.load_config("chmm")          # device="auto"
        dtype = cfg["dtype"]
        print(cfg.speedup, cfg.measured)
    """
    # A name that is no device ("h10") is an error, not the space's defaults with a warning.
    device = filed_under(device, use_torch=False)
    # Its space first: an unknown name ("chmn") is that error, not "no tuned config" and a search to run.
    space = _space_named(workload, studies)
    facts = workload_facts(workload)
    if size is not None:  # a size it lacks ("huge", "") is that error, not "no tuned config" nor another file
        facts.size_named(size)
    check_numbers(studies=studies)  # "" was this folder, " " or "-" a folder of that name, as from the Tuner
    root = Path(studies) if studies is not None else studies_dir()
    folders = [root / facts.name]  # as search exports it: a plug-in's entry point may name it otherwise
    presets = _presets_root()
    if presets is not None:
        folders.append(presets / facts.name)
    candidates = [path for folder in folders for path in _exports(folder, device, size, facts.sizes)]
    for path in candidates:
        if path.is_file():
            document = read_document(path)
            _check_place(document, facts.name, device, path)
            config = _validated(document, space, path)
            _warn_if_tuned_on_another_version(document, workload, path)
            _warn_if_tuned_on_another_cpu(document, workload, device, path)
            if (document.environment or {}).get("isolation") == "inprocess":
                warnings.warn(f"{path} was tuned with --isolation inprocess, every trial in the tuning process (for "
                              "debugging): its peak memory is that process's, and its trials found what earlier ones "
                              "compiled or cached; search without it to tune", stacklevel=2)
            # `search -n 1`: the baseline, the slow "before" (where the space's defaults are another config)
            if (document.study or {}).get("trials") == 1 and config.key != space.defaults.key:
                warnings.warn(f"{path} was exported by a search that measured only the baseline: its config is the "
                              "slow 'before', not a tuned one, and the space's defaults were never measured; search "
                              "with --trials 2 or more", stacklevel=2)
            if size is None and document.size == "tiny":  # the largest exported, and the size for tests
                warnings.warn(f"{path} was tuned at size 'tiny', the size for tests: its winner may not be the fastest "
                              "at the size you run; search at 'small' or 'full', or name the size (size='tiny', "
                              "-s tiny) to take it knowingly", stacklevel=2)
            document = _filled_in(document, config, space, facts.name, device, path)
            return TunedConfig(document, str(path), space.unused(config))
    # Name the pattern searched, not only the files that happened to be tried.
    looked = ", ".join(str(folder / name) for folder in folders for name in _export_names(device, size))
    if size is not None:  # a search at another size ("tiny") is likely what the user meant to load
        others = sorted({size for folder in folders for size in _sized(folder, device, facts.sizes)})
        looked += f"; exported only at size {', '.join(map(repr, others))}" if others else ""
    if strict:
        raise ConfigNotFoundError(
            f"no tuned config for workload {workload!r} on device {device!r}{f' at size {size!r}' if size else ''} "
            f"(looked in {looked}); run `autotune search --workload {workload} --device {device}"
            f"{f' --size {size}' if size else ''}`"
        )
    warnings.warn(
        f"no tuned config for {workload!r} on {device!r} (looked in {looked}); using the search "
        "space's defaults",
        stacklevel=2,
    )
    return TunedConfig(ExportDocument(space.defaults.to_dict(), workload, device), "defaults",
                       space.unused(space.defaults))
