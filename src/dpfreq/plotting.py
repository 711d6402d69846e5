"""Matplotlib helpers shared by the releases' ``plot`` methods (Agg backend, error bands).

matplotlib is imported lazily inside the functions so that ``import dpfreq`` stays light.
Releases import this leaf module lazily from their ``plot`` methods; it imports nothing from
the systems, so it sits with the primitives in the layers (every release can draw itself).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["format_date_axis", "new_axes", "plot_band", "save_figure"]


def new_axes(ax: Any = None, *, figsize: tuple[float, float] = (7.0, 4.0)) -> Any:
    """Return ``ax`` or a fresh axes on a new Agg figure."""
    if ax is not None:
        return ax
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    _fig, new = plt.subplots(figsize=figsize)
    return new


def plot_band(ax: Any, x: Any, y: Any, lower: Any, upper: Any, *, label: str,
              band_label: str | None = None, **kwargs: Any) -> Any:
    """A line with a shaded band [lower, upper] (e.g. an error bound or confidence interval)."""
    (line,) = ax.plot(x, y, label=label, **kwargs)
    ax.fill_between(x, lower, upper, alpha=0.25, color=line.get_color(), label=band_label)
    if _is_datetime(x):
        format_date_axis(ax)
    return ax


def _is_datetime(x: Any) -> bool:
    import numpy as np

    try:
        return np.asarray(x).dtype.kind == "M"
    except (TypeError, ValueError):
        return False


def format_date_axis(ax: Any) -> Any:
    """Concise date ticks on the x axis (no overlapping labels, whatever the time span)."""
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator(minticks=3, maxticks=8)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    return ax


def save_figure(ax: Any, path: str | Path) -> Path:
    """Save the figure that holds ``ax`` as PNG and close it."""
    import matplotlib.pyplot as plt

    fig = ax.figure
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
