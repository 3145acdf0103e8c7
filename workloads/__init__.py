"""The built-in workloads; importing this package registers each of them."""

from workloads import chmm  # noqa: F401

__all__ = ["chmm"]
