"""plotly, imported only when a report is drawn, with an install hint if it is missing."""

from __future__ import annotations

from functools import lru_cache

from autotune.exceptions import AutotuneError

try:
    import plotly.graph_objects as go
except ImportError as exc:  # pragma: no cover - plotly is a dependency; this guards broken installs
    raise AutotuneError(f"autotune report needs plotly ({exc}); install it with `pip install plotly`") from None

__all__ = ["go", "plotly_js"]


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """plotly.js itself, to inline in a report so that it opens with no network."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()
