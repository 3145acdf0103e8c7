"""The journal file (Optuna's storage for several workers on one machine, no server), mended where a writer died."""

from __future__ import annotations

import errno
import json
import os
import warnings
from pathlib import Path
from typing import Any

from autotune.exceptions import StorageError

__all__ = ["mend_torn_tail", "mending_journal"]


def mending_journal(path: Path) -> Any:
    """Optuna's journal file, which first mends a record that a writer dying mid-write left torn.

    A writer killed while it writes a record longer than a page (Linux ends a write between pages for SIGKILL:
    the OOM killer) or a full disk leaves a last line without its newline. Optuna's readers skip it, but
    the next record written is glued to it: a line no reader can parse, and from then on every read of the
    study fails. Under the writers' lock, before each append, that tail is dropped (or, where it is a whole
    record that only lacks its newline, ended), with a warning. Mended as the lock is taken for the append, in one
    hold: taken, mended, let go and taken again, a writer that died between would leave its torn line to the append.
    """
    from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock

    class MendingLock(JournalFileSymlinkLock):  # Optuna's default lock, which only its appends take
        def acquire(self) -> bool:
            try:
                taken = super().acquire()
            except OSError as exc:  # not EEXIST (held: Optuna waits); a file system that makes no symbolic link:
                if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS):
                    raise
                raise StorageError(f"cannot lock the journal {path}: {exc.strerror or exc} (its lock is a symbolic "
                                   "link beside it, which this file system cannot make: a FAT or SMB mount?); keep "
                                   "it on a local disk, or the study on a database server (--storage "
                                   "postgresql://...)") from None
            try:
                mend_torn_tail(path)
            except BaseException:
                self.release()
                raise
            return taken

    return JournalFileBackend(str(path), lock_obj=MendingLock(str(path)))


def mend_torn_tail(path: Path) -> None:
    """A journal's last line, where it lacks its newline: dropped when it is not a whole record, else ended."""
    with open(path, "rb+") as handle:
        start = handle.seek(0, os.SEEK_END)
        if start == 0:
            return  # a new journal
        handle.seek(start - 1)
        if handle.read(1) == b"\n":
            return  # every record whole
        while start > 0:  # back to the last newline: the torn line starts after it
            step = min(start, 1 << 16)
            handle.seek(start - step)
            chunk = handle.read(step)
            found = chunk.rfind(b"\n")
            if found >= 0:
                start = start - step + found + 1
                break
            start -= step
        handle.seek(start)
        tail = handle.read()
        try:
            json.loads(tail)
        except ValueError:
            handle.truncate(start)
            warnings.warn(f"{path}: its last record was torn (a writer died mid-write): its {len(tail)} bytes "
                          "dropped, as every reader skipped them")
        else:
            handle.write(b"\n")
