"""How a study's storage is named: its kind, its name with any password masked, and whether two names may be one.

Apart from :mod:`autotune.storage`, which opens storages: an export says its study's storage by name, and
reading it needs none of that (``autotune.export`` imports this module alone).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["redact_storage", "same_storage", "storage_kind"]


def storage_kind(storage: str) -> str:
    """``sqlite``, ``journal`` (a file path) or ``server`` (any other SQLAlchemy URL)."""
    if "://" not in storage:
        return "journal"
    return "sqlite" if storage.startswith("sqlite:") else "server"


def redact_storage(storage: str) -> str:
    """The storage with any password masked, for logs, reports and exported files."""
    if storage_kind(storage) == "journal":
        return storage
    try:
        from sqlalchemy.engine import make_url

        return make_url(storage).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy knows: mask what looks like user:password@
        head, sep, tail = storage.partition("://")
        if sep and "@" in tail and ":" in tail.split("@", 1)[0]:
            user = tail.split("@", 1)[0].split(":", 1)[0]
            return f"{head}://{user}:***@{tail.split('@', 1)[1]}"
        return storage


def same_storage(exported: str | None, storage: str) -> bool:
    """Whether an export's storage (as its search wrote it, redacted) may be ``storage``: not where their kinds
    or their files' names differ, or two servers' URLs do. A study of the same name in SQLite was reported with
    the winner of one in a journal file, which the search with `--storage studies/chmm.journal` had exported
    after it (a trial #2 "won" that never ran). Spellings of one file (relative, absolute) are taken as one."""
    if not exported:  # an export made before it said its storage
        return True
    kind = storage_kind(exported)
    if kind != storage_kind(storage):
        return False
    if kind == "server":
        return exported == redact_storage(storage)
    return Path(exported.removeprefix("sqlite:///")).name == Path(storage.removeprefix("sqlite:///")).name
