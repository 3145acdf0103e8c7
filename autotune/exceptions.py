"""The errors autotune raises on purpose.

Every error a user can cause (a bad name, a malformed file, an impossible
device) derives from :class:`AutotuneError`; the CLI turns it into a one-line
message and exit status 2. Anything else escaping the library is a bug in
autotune and is allowed to crash loudly.
"""

from __future__ import annotations

from typing import Iterable

__all__ = [
    "AutotuneError",
    "ConfigNotFoundError",
    "DeviceUnavailableError",
    "DiskFullError",
    "InvalidConfigError",
    "SearchSpaceError",
    "StorageError",
    "UnknownNameError",
    "said",
]


class AutotuneError(Exception):
    """Root of the errors a user can act on; the message states the rule, the value and a fix."""


class UnknownNameError(AutotuneError, KeyError):
    """A workload, device, parameter or size name that does not exist."""

    def __init__(self, kind: str, name: str, valid: Iterable[str], hint: str = "") -> None:
        valid = sorted(valid)
        message = f"unknown {kind} {name!r}; valid: {', '.join(valid) if valid else '(none)'}"
        if hint:
            message += f". {hint}"
        super().__init__(message)
        self.kind, self.name, self.valid = kind, name, valid

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class SearchSpaceError(AutotuneError):
    """A search-space file that does not follow the schema; names the file and the key."""


class InvalidConfigError(AutotuneError):
    """A configuration value that the search space does not allow."""


class DeviceUnavailableError(AutotuneError):
    """A device profile was asked for that this machine does not have."""


class ConfigNotFoundError(AutotuneError, FileNotFoundError):
    """No tuned configuration exists where it was looked for (``strict=True``)."""


class DiskFullError(AutotuneError):
    """A trial could not write to a disk (full, or over quota): no config can be measured until there is room."""


class StorageError(AutotuneError):
    """The study storage cannot be opened or used."""


def said(exc: BaseException) -> str:
    """``Type: first line of its message``: how a one-line error names another error it stems from."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
