"""The built-in workloads; importing this package registers each of them."""

from workloads import chmm, latentwire, lsd, ten, vlm_mc  # noqa: F401

__all__ = ["chmm", "latentwire", "lsd", "ten", "vlm_mc"]
