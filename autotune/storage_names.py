"""How a study's storage is named: its kind, its name with any password masked, and whether two names may be one.

Apart from :mod:`autotune.storage`, which opens storages: an export says its study's storage by name, and
reading it needs none of that (``autotune.export`` imports this module alone).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

__all__ = ["redact_storage", "same_storage", "sqlite_path", "sqlite_url", "storage_kind", "storage_problem"]

#: Schemes of SQLAlchemy URLs: a name that starts with one and a colon but lacks "://" is a URL mistyped.
URL_SCHEMES = ("sqlite", "postgresql", "postgres", "mysql", "mariadb")


def storage_kind(storage: str) -> str:
    """``sqlite``, ``journal`` (a file path) or ``server`` (any other SQLAlchemy URL)."""
    if "://" not in storage:
        return "journal"
    return "sqlite" if storage.startswith("sqlite:") else "server"


def storage_problem(storage: str) -> str | None:
    """Why ``storage`` names no study storage, as a phrase that follows it ("sqlite:// names no database file"), or
    None; said before a lock file is written beside it. ``sqlite:/x.db`` was a journal file x.db in a folder named
    ``sqlite:``, ``sqlite:///:memory:`` left ``:memory:.search.lock`` behind when refused, and a folder
    (``sqlite:////tmp/st/``) left ``/tmp/st.search.lock`` before "unable to open database file"."""
    kind = storage_kind(storage)
    scheme, colon, _ = storage.partition(":")
    if kind == "journal" and colon and scheme.lower() in URL_SCHEMES:
        return (f"lacks the '//' of a URL (as a journal file's path it is a file in a folder named '{scheme}:'); "
                "write sqlite:///studies/autotune.db, or postgresql://USER@HOST/DATABASE")
    if kind == "journal" and (storage.endswith("/") or Path(storage).is_dir()):
        return "is a folder: a journal is a file in one, e.g. studies/chmm.journal"
    if kind != "sqlite":
        return None
    path = sqlite_path(storage)
    if storage.partition("?")[0] in ("sqlite:", "sqlite://") or path.name in ("", ":memory:"):
        # A study in memory dies with this process: nothing resumes or reports it.
        return "names no database file; give one, e.g. sqlite:///studies/autotune.db"
    if not storage.startswith("sqlite:///"):  # sqlite://x.db: SQLAlchemy's "Invalid SQLite URL"
        return "is not an SQLite URL: sqlite:/// and the file's path, e.g. sqlite:///studies/autotune.db"
    if storage.partition("?")[0].endswith("/") or path.is_dir():
        return "is a folder: name a database file in it, e.g. sqlite:///studies/autotune.db"
    return None


def sqlite_url(path: Path | str) -> str:
    """``sqlite:///<path>``, spelled so that SQLAlchemy reads it back as ``path``: it takes a ``?`` for the start of
    the URL's options and decodes a ``%`` sequence, so that ``--studies 'a?b'`` kept its study in a file ``a`` in
    the working directory (its locks and cache in ``a?b``), and a folder named ``50%25`` in ``50%``."""
    return "sqlite:///" + str(path).replace("%", "%25").replace("?", "%3F")


def sqlite_path(storage: str) -> Path:
    """The database file of a ``sqlite:///`` URL, as SQLAlchemy reads it (its options cut, ``%`` sequences
    decoded): the file its locks must sit beside."""
    return Path(unquote(storage[len("sqlite:///"):].partition("?")[0]))


def redact_storage(storage: str) -> str:
    """The storage with any password masked, for logs, reports and exported files."""
    if storage_kind(storage) == "journal":
        return storage
    head, sep, tail = storage.partition("://")
    login, at, _ = tail.split("/", 1)[0].rpartition("@")  # user:password, up to the authority's last "@"
    masked = sep and at and ":" in login
    by_hand = f"{head}://{login.split(':', 1)[0]}:***@{tail[len(login) + 1:]}" if masked else storage
    if "@" in login:  # a password's "@" not written %40: SQLAlchemy's mask ends at it ("u:***@ss@host")
        return by_hand
    try:
        from sqlalchemy.engine import make_url

        return make_url(storage).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy knows: mask what looks like user:password@
        return by_hand


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
    return (sqlite_path(exported) if kind == "sqlite" else Path(exported)).name == (
        sqlite_path(storage) if kind == "sqlite" else Path(storage)).name
