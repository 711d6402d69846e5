"""Matplotlib helpers shared by the releases' ``plot`` methods (Agg backend, error bands).

matplotlib is imported lazily inside the functions so that ``import dpfreq`` stays light.
Releases import this leaf module lazily from their ``plot`` methods; it imports nothing from
the systems, so it sits with the primitives in the layers (every release can draw itself).

Every figure states what was released: its title names ε (and δ), the unit of privacy and the
confidence of the intervals drawn (:func:`privacy_title`); a legend is drawn only when something
carries a label (:func:`legend`); a figure of many groups draws every group or says which it
left out (:func:`group_figure`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["figure_legend", "format_date_axis", "group_figure", "group_note", "interval_bars",
           "legend", "new_axes", "plain_log_ticks", "plot_band", "privacy_title", "pyplot",
           "save_figure"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (imported on first use)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def new_axes(ax: Any = None, *, figsize: tuple[float, float] = (7.0, 4.0)) -> Any:
    """Return ``ax`` or a fresh axes on a new Agg figure."""
    if ax is not None:
        return ax
    _fig, new = pyplot().subplots(figsize=figsize)
    return new


def privacy_title(what: str, *, epsilon: float, unit: str, confidence: float | None,
                  delta: float = 0.0, interval: str = "intervals") -> str:
    """``"<what>: ε=…[, δ=…], unit=…, 95% <interval>"``: the title every figure carries.

    Examples
    --------
    >>> privacy_title("Reach", epsilon=0.5, unit="item", confidence=0.95)
    'Reach: ε=0.5, unit=item, 95% intervals'
    """
    parts = [f"ε={epsilon:.4g}"] + ([f"δ={delta:.3g}"] if delta else []) + [f"unit={unit}"]
    if confidence is not None:
        parts.append(f"{confidence * 100:.6g}% {interval}")
    return f"{what}: " + ", ".join(parts)


def legend(ax: Any, **kwargs: Any) -> Any:
    """Draw the legend of ``ax`` when some artist carries a label (never matplotlib's
    warning about an empty legend)."""
    handles, _labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(**kwargs)
    return ax


def plot_band(ax: Any, x: Any, y: Any, lower: Any, upper: Any, *, label: str,
              band_label: str | None = None, step: str | None = None, **kwargs: Any) -> Any:
    """A line with a shaded band [lower, upper] (e.g. an error bound or confidence interval);
    ``step`` ("mid", "pre", "post") draws the band as steps, to go with a stepped line."""
    (line,) = ax.plot(x, y, label=label, **kwargs)
    ax.fill_between(x, lower, upper, alpha=0.25, color=line.get_color(), label=band_label,
                    step=step)
    if _is_datetime(x):
        format_date_axis(ax, x)
    return ax


def interval_bars(ax: Any, names: Sequence[str], series: Sequence[tuple[str, Any, Any, Any]],
                  *, xlabel: str) -> Any:
    """Horizontal bars with error bars, one row per name (the first at the top), one bar per
    series ``(label, estimate, lower, upper)`` in each row; labels the y ticks with ``names``.
    """
    import numpy as np

    n, m = len(names), max(1, len(series))
    height = 0.8 / m
    pos = np.arange(n)[::-1].astype(np.float64)
    for i, (label, est, lo, hi) in enumerate(series):
        e = np.asarray(est, dtype=np.float64)
        err = np.vstack([np.maximum(e - np.asarray(lo, dtype=np.float64), 0.0),
                         np.maximum(np.asarray(hi, dtype=np.float64) - e, 0.0)])
        y = pos + (m - 1 - 2 * i) * height / 2
        ax.barh(y, e, height=height, xerr=err, capsize=2, label=label,
                error_kw={"elinewidth": 0.8})
    ax.set_yticks(pos, [str(x) for x in names])
    ax.axvline(0.0, color="black", linewidth=0.6)
    ax.set_xlabel(xlabel)
    if len(series) > 1:
        legend(ax, fontsize="small")
    return ax


def group_figure(names: Sequence[str], shown: int | None, *, what: str,
                 order: str, panel_size: tuple[float, float] = (4.5, 3.2),
                 cols: int = 3) -> tuple[Any, list[Any], list[str], str]:
    """A figure of small multiples for the first ``shown`` of ``names`` (all when ``shown`` is
    None or not smaller), one panel each and no empty panel, and the note that says which groups
    are drawn (``order`` says how ``names`` are sorted, e.g. "largest released reach").

    Returns ``(figure, axes, drawn names, note)``; the caller draws each panel and puts the note
    in the figure's title.
    """
    plt = pyplot()
    drawn = list(names) if shown is None or shown >= len(names) else list(names)[:shown]
    k = max(1, len(drawn))
    c = min(cols, k)
    r = -(-k // c)
    fig, axes = plt.subplots(r, c, figsize=(panel_size[0] * c, panel_size[1] * r),
                             squeeze=False)
    flat = list(axes.flat)
    for ax in flat[len(drawn):] if drawn else []:
        fig.delaxes(ax)
    return fig, flat[:max(1, len(drawn))], drawn, group_note(
        len(drawn), len(names), what=what, order=order, option="max_panels")


def group_note(shown: int, total: int, *, what: str, order: str, option: str) -> str:
    """``"all 20 groups, largest … first"`` or ``"the 12 of 20 groups with the largest …
    (plot(max_panels=20) draws all)"``: which groups a figure draws.

    Examples
    --------
    >>> group_note(12, 20, what="groups", order="largest released reach", option="max_panels")
    'the 12 of 20 groups with the largest released reach (plot(max_panels=20) draws all)'
    """
    if shown < total:
        return (f"the {shown} of {total} {what} with the {order} (plot({option}={total}) "
                "draws all)")
    return f"all {total} {what}" + (f", {order} first" if total > 1 else "")


def figure_legend(fig: Any, axes: Sequence[Any]) -> None:
    """One legend for a figure of panels that draw the same series: the panels' own legends
    are removed and the first panel's entries are drawn once, below the panels."""
    handles: list[Any] = []
    labels: list[str] = []
    for ax in axes:
        if ax.get_legend() is not None:
            ax.get_legend().remove()
        if not handles:
            handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(handles)),
                   fontsize="small", frameon=False)
        rows = -(-len(handles) // 4)
        fig.tight_layout(rect=(0.0, 0.03 + 0.035 * rows, 1.0, 1.0))
    else:
        fig.tight_layout()


def plain_log_ticks(axis: Any) -> Any:
    """Tick labels of a logarithmic ``axis`` written as plain numbers (1, 2, 5, 10, …): every
    tick labelled within one decade, the decades alone beyond."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    axis.set_major_formatter(plain)
    ax = axis.axes
    low, high = sorted(ax.get_xlim() if axis is ax.xaxis else ax.get_ylim())
    axis.set_minor_formatter(plain if low > 0 and high / low < 10 else NullFormatter())
    return axis


def _is_datetime(x: Any) -> bool:
    import numpy as np

    try:
        return np.asarray(x).dtype.kind == "M"
    except (TypeError, ValueError):
        return False


def format_date_axis(ax: Any, x: Any = None) -> Any:
    """Concise date ticks on the x axis (no overlapping labels, whatever the time span); with
    at most 8 points ``x``, a tick on each (periods, not hours between them)."""
    import matplotlib.dates as mdates
    import matplotlib.ticker as mticker
    import numpy as np

    points = None if x is None else np.unique(np.asarray(x))
    locator: Any = (mticker.FixedLocator(mdates.date2num(points)) if points is not None
                    and points.size <= 8 else mdates.AutoDateLocator(minticks=3, maxticks=8))
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    return ax


def save_figure(ax: Any, path: str | Path) -> Path:
    """Save the figure that holds ``ax`` (an axes or a figure) and close it."""
    plt = pyplot()
    fig = ax if hasattr(ax, "savefig") else ax.figure
    if not fig.legends:  # a figure-level legend was laid out with its panels
        fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
