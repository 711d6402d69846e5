"""The text `dpfreq reach` prints: the header and the per-period table, grouped or not.

One formatter for both: a grouped release prints the same header (with the grouping lines) and
the same table per group, each row led by its group. By default the table shows the release's
curves made consistent by post-processing (:meth:`~dpfreq.windows.WindowCountsRelease.
consistent_curves`: non-increasing in k and clamped at 0)
beside the release's interval clamped at 0; ``raw=True`` shows the released values with their
interval half-widths, as in the JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dpfreq.cli.reach_query import period_label

__all__ = ["curve_order", "family_label", "format_table", "header_lines", "period_lines",
           "row_indices"]

_DAY_US = 86_400_000_000


def family_label(w: Any) -> str:
    """The family's name in the release's value, JSON and plan: ``rolling(W=…)`` for a width."""
    return w if isinstance(w, str) else f"rolling(W={w})"


def curve_order(windows: tuple[Any, ...]) -> list[Any]:
    """The families with values to print: cumulative, the widths (ascending), total."""
    widths = sorted(w for w in windows if not isinstance(w, str))
    return ([w for w in ("cumulative",) if w in windows] + widths
            + [w for w in ("total",) if w in windows])


def row_indices(horizon: int, rows: int | None) -> list[int]:
    """Periods ``t`` (1-based) shown: every one, or the first ``rows − 1`` and the last."""
    if rows is None or horizon <= rows:
        return list(range(1, horizon + 1))
    return [*range(1, rows), horizon]


def _cells(rel: Any, label: str, k: int, fit: Any, shown: list[int]) -> list[str]:
    """The cells of one curve at the indices ``shown``: ``fit`` (the consistent curves) with
    the interval clamped at 0, or (``fit`` None) the released value ± its half-width."""
    est = np.asarray(rel.value[label][k], dtype=np.float64)
    lo = np.asarray(rel.error.lower[label][k], dtype=np.float64)
    up = np.asarray(rel.error.upper[label][k], dtype=np.float64)
    if fit is None:
        return [f"{np.rint(est[i]) + 0:.0f} ±{up[i] - est[i]:.0f}" for i in shown]
    return [f"{fit[label][k][i]} [{max(lo[i], 0.0):.0f}, {max(up[i], 0.0):.0f}]"
            for i in shown]


def format_table(rel: Any, rows: int | None = None, *, raw: bool = False) -> str:
    """The released values, one row per period ``t`` and one column per (family, k); the
    total (only ``[1, T]``) fills the last row (the only row of a release of totals alone).
    ``rows`` limits the periods shown; ``raw`` prints the released values with their
    half-widths instead of the consistent view."""
    totals_only = curve_order(rel.windows) == ["total"]  # one row: [1, T]
    shown = [rel.horizon] if totals_only else row_indices(rel.horizon, rows)
    fit = None if raw else rel.consistent_curves()
    cols: list[tuple[str, list[str]]] = [
        ("t", [str(t) for t in shown]),
        ("period", [period_label(rel.time_axis, t) for t in shown])]
    for w in curve_order(rel.windows):
        label = family_label(w)
        for k in rel.k_values:
            if w == "total":
                cells = [""] * (len(shown) - 1) + _cells(rel, label, k, fit, [0])
            else:
                cells = _cells(rel, label, k, fit, [t - 1 for t in shown])
            cols.append((f"{label}, k={k}", cells))
    size = [max(len(name), *(len(v) for v in vals)) for name, vals in cols]
    lines = ["  ".join(name.rjust(s) for (name, _), s in zip(cols, size, strict=True))]
    for i, t in enumerate(shown):
        if i and t != shown[i - 1] + 1:
            lines.append("...".rjust(size[0]))
        lines.append("  ".join(vals[i].rjust(s) for (_, vals), s in zip(cols, size, strict=True))
                     .rstrip())
    return "\n".join(lines)


def period_lines(axis: Mapping[str, Any], horizon: int) -> list[str]:
    """What a row's ``period`` means: the day (wall-clock, in the release's zone) or the first
    instant of a shorter period, or the period number."""
    if axis.get("kind") != "timestamp":
        return [f"# periods 1..{horizon}; row t: the windows ending with period t (included)"]
    zone = axis["timezone"]
    first, last = period_label(axis, 1), period_label(axis, horizon)
    if int(axis["period_us"]) % _DAY_US == 0:
        days = int(axis["period_us"]) // _DAY_US
        what = "day" if days == 1 else f"{days}-day period (its first day shown)"
        return [f"# periods: wall-clock time in {zone}, days {first} to {last}"
                + ("" if days == 1 else f" (each {days} days)")
                + f"; row t: the windows ending with period t, the {what} in the period "
                  "column, included"]
    return [f"# periods: wall-clock time in {zone}, from {first}; the period column is each "
            "period's first instant; row t: the windows ending with period t (included)"]


def header_lines(rel: Any, *, save_path: str | None, raw: bool,
                 methods_prefix: str = "") -> list[str]:
    """The comment lines above the table: periods, families and k, the structure of each
    (family, k) and what the cells mean (``rel``: one window release, e.g. a group's)."""
    fams = ", ".join(family_label(w) for w in curve_order(rel.windows)
                     + [w for w in rel.windows if w == "all"])
    lines = period_lines(rel.time_axis, rel.horizon)
    lines.append(f"# families: {fams}; k: {', '.join(map(str, rel.k_values))} (ε split equally "
                 f"over the {len(rel.windows) * len(rel.k_values)} (family, k) structures)")
    for name, rec in rel.mechanism_params["methods"].items():
        rmse = float(min(rec["predicted_rmse"].values()))
        lines.append(f"# {methods_prefix}{name}: method {rec['method']}, {rec['noise']} noise "
                     f"(predicted RMSE {rmse:.1f})")
    if "all" in rel.windows:
        lines.append(f"# all: every window [t1, t2] released, no curve; ask with `dpfreq reach "
                     f"query {save_path} --window START:END --k K` (post-processing, no budget)")
    if any(w != "all" for w in rel.windows):
        conf = rel.error.confidence or 0.95
        lines.append(
            f"# cells: estimate ±{conf:.0%} per-answer interval half-width, as released (the "
            "JSON's value and error)" if raw else
            f"# cells: estimate [{conf:.0%} per-answer interval]; the estimate is post-processed"
            " (no privacy cost): made non-increasing in k and clamped at 0; the interval is the "
            "release's, clamped at 0 (an interval "
            "starting at 0: the count is smaller than its noise); --raw prints the released "
            "values")
    return lines
