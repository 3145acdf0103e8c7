"""The built-in workloads, one module each; :mod:`autotune.registry` finds them by name (nothing is imported here)."""
