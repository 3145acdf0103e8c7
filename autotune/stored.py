"""A stored study found by workload, device and size, opened read-only, with the export it produced.

What ``autotune report`` draws: the device need not be on this machine, and
nothing is written (a missing storage or study is one line that says what
exists instead).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.config import config_path, default_storage, studies_dir
from autotune.devices import filed_under
from autotune.exceptions import AutotuneError, InvalidConfigError, StorageError, UnknownNameError
from autotune.export import read_document
from autotune.limits import EXPORT_MARK
from autotune.registry import workload_facts
from autotune.space import SearchSpace, load_space
from autotune.storage import (open_storage, redact_storage, storage_failure, storage_kind, study_file,
                              user_storage)
from autotune.storage_names import same_storage

if TYPE_CHECKING:
    import optuna

__all__ = ["StoredStudy", "check_made_for", "check_measured", "open_study", "open_stored_study"]



@dataclass
class StoredStudy:
    study: "optuna.Study"
    document: dict[str, Any] | None  # the export of this study, if its file is there and whole
    root: Path
    workload: str
    device: str
    size: str
    space: SearchSpace | None = None  # the workload's space as it is now: which knobs a config leaves inactive
    export_problem: str | None = None  # why its export, there, could not be read (a hand edit, say)


def open_stored_study(workload: str, device: str = "auto", size: str | None = None, *, storage: str | None = None,
                      study_name: str | None = None, studies: str | Path | None = None) -> StoredStudy:
    """The study of ``workload`` on ``device`` at ``size`` in ``storage``, read-only, with its export."""
    facts = workload_facts(workload)  # a built-in's without importing torch
    # A device or size given is checked against the study's; one left to its default is the study's.
    asked = {"workload": facts.name, "device": filed_under(device) if device != "auto" else None, "size": size}
    size = facts.size_named(size)
    device = filed_under(device)
    root = Path(studies) if studies is not None else studies_dir()
    named = study_name is not None  # by --study: another size is no hint to give
    study_name = study_name or f"{facts.name}-{device}-{size}"
    export, where = config_path(facts.name, device, size, root), storage or default_storage(root)
    try:
        study = open_study(where, study_name)
    except StorageError as exc:  # none there: its export may say where its study is
        elsewhere = None if named else _elsewhere(export, where)
        if elsewhere is None:
            raise
        said = str(exc).partition(";")[0] if str(exc).startswith("no ") else str(exc)  # not "pass --storage" twice
        raise StorageError(f"{said}; {elsewhere}") from None
    except UnknownNameError as exc:  # searched at another size ("tiny"): say which, as load_config does
        exporter = None if named else _exporter(export, exc.valid, where)
        if exporter is not None:  # searched as `--study other`: the study whose winner the export holds
            return open_stored_study(workload, device, size, storage=storage, study_name=exporter, studies=studies)
        elsewhere = None if named else _elsewhere(export, where)
        if elsewhere is not None:
            raise UnknownNameError("study", study_name, exc.valid, hint="T" + elsewhere[1:]) from None
        if named:  # the studies it could open: a study of another workload is refused (check_made_for)
            raise UnknownNameError("study", study_name, _studies_of(where, exc.valid, facts.name),
                                   hint=f"Those are {facts.name}'s in {redact_storage(where)}: run `autotune search` "
                                   "for it first, or pass --storage or --study") from None
        sizes = [name for name in facts.sizes if f"{facts.name}-{device}-{name}" in exc.valid]
        if not sizes:
            raise
        raise UnknownNameError("study", study_name, exc.valid, hint=f"{facts.name} on {device} was searched at size "
                               f"{', '.join(map(repr, sizes))} only: pass -s {sizes[-1]}, or run `autotune search "
                               f"-w {facts.name} -d {device} -s {size}` first") from None
    check_made_for(study, f"study {study.study_name}", "leave out -d and -s, or name another with --study",
                   **{key: value for key, value in asked.items() if value is not None})
    device, size = study.user_attrs.get("device", device), study.user_attrs.get("size", size)
    document, problem = _export_of(config_path(facts.name, device, size, root), study_name,
                                   storage or default_storage(root))
    try:
        space = load_space(workload, facts.name)  # the facts read once (a built-in's source parsed: 7-17 ms)
    except AutotuneError:  # a study outlives its space file: the report then shows every knob of each config
        space = None
    return StoredStudy(study, document, root, facts.name, device, size, space, problem)


def _studies_of(storage: str, names: list[str], workload: str) -> list[str]:
    """Of ``names`` in ``storage``, the studies of ``workload`` and those that do not say whose they are: `report -w
    lse --study nosuch` listed every study there as valid, another workload's too."""
    import optuna

    summaries = optuna.get_all_study_summaries(open_storage(storage, read_only=True), include_best_trial=False)
    theirs = {s.study_name for s in summaries if s.user_attrs.get("workload", workload) == workload}
    return [name for name in names if name in theirs]


def open_study(storage: str, study_name: str | None = None) -> "optuna.Study":
    """The study ``study_name`` of ``storage``, read-only (without a name, the one study it holds)."""
    import optuna

    storage = user_storage(storage)
    if storage.startswith("sqlite:///") and not study_file(storage).is_file():  # type: ignore[union-attr]
        raise StorageError(f"no study storage at {storage}; run `autotune search` first, or pass --storage")
    if storage_kind(storage) == "journal" and not Path(storage).is_file():
        raise StorageError(f"no journal file at {storage}; run `autotune search --storage {storage}` first")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        opened = open_storage(storage, read_only=True)
        names = [n for n in optuna.get_all_study_names(opened) if EXPORT_MARK not in n]
    except Exception as exc:  # noqa: BLE001 - any driver error means the same to the user
        cause = exc.__cause__ or exc  # Optuna's wrapper blames "invalid data" whatever the driver said
        if storage_kind(storage) == "sqlite" and "no such table" in str(cause):  # a file without Optuna's tables
            raise StorageError(f"{redact_storage(storage)} holds no studies; run `autotune search` first") from None
        raise storage_failure(storage, cause) from None  # a malformed file said "holds no studies" too
    if study_name is None and len(names) != 1:
        held = f"{len(names)} studies ({', '.join(sorted(names))})" if names else "no studies"
        raise StorageError(f"{redact_storage(storage)} holds {held}; name one with --study")
    study_name = study_name or names[0]
    if study_name not in names:
        raise UnknownNameError("study", study_name, names, hint=f"Looked in {redact_storage(storage)}: run "
                               "`autotune search` for it first, or pass --storage or --study")
    return optuna.load_study(study_name=study_name, storage=opened)


def check_made_for(study: "optuna.Study", where: str, hint: str = "name another with --study", **asked: Any) -> None:
    """Refuse a study that another workload, device, size or workload version made: its trials measured something
    else.

    A search that reused another's study name (``--study``) added its trials beside the other's, and its
    sampler, firsts and winner were drawn from a mixture. A study made before these were recorded passes.
    """
    other = {key: study.user_attrs[key] for key, value in asked.items() if study.user_attrs.get(key, value) != value}
    if other:
        said = {key: key.replace("_", " ") for key in other}  # workload_version: "workload version 1"
        why = " (its data or outputs changed since)" if "workload_version" in other else ""
        raise StorageError(f"{where} is a study of {', '.join(f'{said[k]} {v}' for k, v in other.items())}, not "
                           f"{', '.join(f'{said[k]} {asked[k]}' for k in other)}{why}; {hint}")


def check_measured(storage: str, study_name: str, export: Path | None = None) -> None:
    """Refuse ``--trials 0`` (re-measure and export, no new trial) for a study that has measured nothing, or is not
    there: it would have made the study and exported nothing; where ``export`` says its study is in another
    storage, say which. Read-only."""
    from autotune.trials import counted

    try:
        measured = len(counted(open_study(storage, study_name).get_trials(deepcopy=False)))
    except (StorageError, UnknownNameError):
        measured = 0
    if not measured:
        raise AutotuneError(f"--trials 0 re-measures and exports the configs study {study_name} measured, and it has "
                            f"measured none in {redact_storage(storage)}: "
                            f"{export and _elsewhere(export, storage) or 'give --trials 1 or more'}")


def _exported_study(path: Path) -> dict[str, Any]:
    """The study the export in ``path`` names (its name and storage); empty where there is no export, or none that
    reads (a hand edit broke it: the hints it would give are none)."""
    try:
        return (read_document(path).study or {}) if path.is_file() else {}
    except InvalidConfigError:
        return {}


def _exporter(path: Path, studies: list[str], storage: str) -> str | None:
    """The study, one of ``studies`` in ``storage``, whose winner the export in ``path`` holds: a search of `--study
    other` wrote it, and `report` without --study said "unknown study 'chmm-cpu-tiny'" beside the study it could
    have drawn."""
    study = _exported_study(path)
    return study.get("name") if study.get("name") in studies and same_storage(study.get("storage"), storage) else None


def _elsewhere(path: Path, storage: str) -> str | None:
    """Where the export in ``path`` says its study is, as a hint, where that is not ``storage``: `report` after a
    search with `--storage studies/mlp.journal` said only "no study storage at sqlite:///studies/autotune.db"."""
    study = _exported_study(path)
    where = study.get("storage")
    if not where or same_storage(where, storage):
        return None
    password = " (its password for ***)" if ":***@" in where else ""  # an export masks it
    return f"the export {path} is of study {study.get('name')} in {where}: pass --storage {where}{password}"


def _export_of(path: Path, study_name: str, storage: str) -> tuple[dict[str, Any] | None, str | None]:
    """The export of ``study_name`` in ``storage`` in ``path``, or None and why where the file is there but cannot
    be read (the report said "No exported config for this study yet" for an export whose `remeasure` a hand edit
    broke) or is the export of the study of that name in another storage."""
    if not path.is_file():
        return None, None
    try:
        document = read_document(path)
    except InvalidConfigError as exc:
        return None, f"The export could not be read: {exc}"  # load_config's error too; the study has a report
    study = document.study or {}
    if study.get("name") != study_name:
        return None, None
    if not same_storage(study.get("storage"), storage):
        return None, (f"The export in {path} is of the study of this name in {study.get('storage')}, another "
                      "storage: a search of this study writes its own.")
    return document.to_json(), None
