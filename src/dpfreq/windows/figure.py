"""The figure of a window release (:meth:`dpfreq.windows.WindowCountsRelease.plot`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpfreq.windows.result_axis import curve_families, period_bounds

__all__ = ["draw_release"]


def draw_release(rel: Any, ax: Any = None) -> Any:
    """Draw ``rel`` (a :class:`~dpfreq.windows.WindowCountsRelease`) on ``ax`` (a new Agg
    axes when None): its curves with their per-answer bands, its totals with their intervals,
    a title with ε, the unit and the confidence; returns the axes."""
    from dpfreq.plotting import interval_bars, legend, new_axes, plot_band, privacy_title

    ax = new_axes(ax)
    ts = np.arange(1, rel.horizon + 1)
    x: Any = period_bounds(rel.time_axis, ts, ts)[0]
    conf = rel.error.confidence or 0.95
    title = privacy_title("Reach", epsilon=rel.epsilon, delta=rel.delta, unit=rel.unit,
                          confidence=conf)
    if list(rel.value) == ["total"]:  # one value per k: bars with their intervals
        first, last = period_bounds(rel.time_axis, ts[:1], ts[-1:])
        tot = [(k, rel.value["total"][k][0], rel.error.lower["total"][k][0],
                rel.error.upper["total"][k][0]) for k in rel.k_values]
        interval_bars(ax, [f"{k}+ reach" for k in rel.k_values],
                      [("total", [e for _, e, _, _ in tot], [lo for *_, lo, _ in tot],
                        [hi for *_, hi in tot])],
                      xlabel=f"items reached in [{first[0]}, {last[0]}] (noisy estimate "
                             "and interval)")
        ax.set_title(title)
        return ax
    for w, label in curve_families(rel.windows):
        for k in rel.k_values:
            est = np.asarray(rel.value[label][k], dtype=np.float64)
            lo = np.asarray(rel.error.lower[label][k], dtype=np.float64)
            hi = np.asarray(rel.error.upper[label][k], dtype=np.float64)
            if w == "total":
                ax.errorbar(x[-1:], est, yerr=[est - lo, hi - est], fmt="D", capsize=4,
                            label=f"total [1, T] {k}+ reach")
                continue
            name = (f"cumulative {k}+ reach" if w == "cumulative"
                    else f"rolling {label} {k}+ reach")
            plot_band(ax, x, est, lo, hi, label=name,
                      linestyle="-" if w == "cumulative" else "--")
    if not rel.value:  # the all-windows family alone: its cumulative answers
        for k in rel.k_values:
            a = rel.cumulative(ts, k, confidence=conf)
            plot_band(ax, x, np.asarray(a.estimate, dtype=np.float64), a.lower, a.upper,
                      label=f"cumulative {k}+ reach (answered from all windows)")
    stamped = rel.time_axis.get("kind") == "timestamp"
    zone = f" ({rel.time_axis.get('timezone')})" if stamped else ""
    ax.set_xlabel(f"period{zone}" if stamped else "period t")
    ax.set_ylabel("items reached (noisy estimate)")
    ax.set_title(title.replace("Reach", "Reach over time", 1))
    ax.axhline(0.0, color="black", linewidth=0.5)
    legend(ax, fontsize="small")
    return ax
