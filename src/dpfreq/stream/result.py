"""The release of a reach stream at one period: reach and k+ reach to date, with intervals and
the stream's band.

A :class:`StreamRelease` for period ``t`` holds the curves of every k (per group when grouped)
over periods ``1 … t`` — its last entry is what period ``t`` added; the earlier ones are the
answers published before, unchanged — with per-answer intervals and the band that holds for
every answer of the stream at once (:mod:`dpfreq.stream.publish`). It is built complete from
public parameters and the noisy measurements, never from exact counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfreq._validate import check_int, message
from dpfreq.errors import ParameterError, public_errors
from dpfreq.grouped.dropped import DroppedFraction
from dpfreq.release import Release, public_floats

__all__ = ["StreamRelease"]


@dataclass(frozen=True, kw_only=True, repr=False)
class StreamRelease(Release):
    """Cumulative reach and k+ reach of a stream through one period.

    ``value[k]`` (or ``value[group][k]`` for a grouped stream) is the curve of periods
    ``1 … period``: answer ``i`` estimates the number of items (per group: kept in the group)
    with at least ``k`` events in periods ``1 … i + 1``. ``error.lower`` / ``error.upper`` have
    the same nesting (per-answer intervals at ``error.confidence``), ``error.band_lower`` /
    ``error.band_upper`` the stream's band: every answer of every period, group and k at once.
    ``mechanism_params`` states the counter, its node law, the accounting and why it was chosen.
    ``dropped_fraction`` (a stream with ``capping_epsilon``) is the private estimate, with its
    interval, of the fraction of (item, group) pairs the cap dropped through ``period``
    (:mod:`dpfreq.stream.capping`); else None.

    Examples
    --------
    >>> import tempfile
    >>> from dpfreq.stream import ReachStream
    >>> s = ReachStream.create(tempfile.mkdtemp() + "/s", item="user", time="day",
    ...                        horizon=4, k_values=[1, 2], unit="item", epsilon=1.0,
    ...                        delta=0.0, method="auto", late="error", rng=0)
    >>> [rel] = s.append({"user": [1, 1, 2], "day": [1, 1, 1]}, through=1)
    >>> rel.period, sorted(rel.value), rel.unit
    (1, [1, 2], 'item')
    """

    period: int
    periods: Any
    k_values: tuple[int, ...]
    groups: tuple[str, ...] | None = None
    dropped_fraction: DroppedFraction | None = None

    _count_columns = ("estimate", "lower", "upper", "band_lower", "band_upper")

    #: every stream release is rebuilt from the stream's saved measurements (free), so a
    #: failing command has nothing to rescue (:func:`dpfreq.cli.output.rescue_drawn_releases`)
    saved_elsewhere = True

    def to_dict(self) -> dict[str, Any]:
        """:meth:`Release.to_dict`, with ``dropped_fraction`` as
        :meth:`~dpfreq.grouped.dropped.DroppedFraction.to_dict` writes it (its sentence
        included; None when not measured)."""
        out = super().to_dict()
        if self.dropped_fraction is not None:
            out["dropped_fraction"] = public_floats(self.dropped_fraction.to_dict())
        return out

    def _value_text(self) -> str:
        ks = ", ".join(str(k) for k in self.k_values)
        where = f" in {len(self.groups)} groups" if self.groups else ""
        return f"reach to date at k={ks}{where}, periods 1..{self.period}"

    def _summary(self) -> list[tuple[str, str]]:
        return [("method", str(self.mechanism_params.get("method", ""))),
                ("why", str(self.mechanism_params.get("why", ""))[:120])] + (
                    [] if self.dropped_fraction is None else
                    [("dropped by the cap", self.dropped_fraction.description)])

    def _curves(self, group: str | None) -> Mapping[int, Any]:
        if self.groups is None:
            if group is not None:
                raise ParameterError(message("group", "None (the stream has "
                                             "no groups)", group))
            return self.value
        if group not in self.value:
            raise ParameterError(message("group", "one of the stream's "
                                         "groups", group))
        out: Mapping[int, Any] = self.value[group]
        return out

    @public_errors("StreamRelease.latest")
    def latest(self, k: int, group: str | None = None) -> Any:
        """The answer period :attr:`period` published for ``k`` (and ``group``)."""
        k = check_int(k, "k", minimum=1)
        curves = self._curves(group)
        if k not in curves:
            raise ParameterError(message("k", "one of the stream's "
                                         f"k_values {list(self.k_values)}", k))
        return curves[k][-1]

    def table(self) -> dict[str, Any]:
        """One row per (group, k, period): estimate, interval and band."""
        cols: dict[str, list[Any]] = {n: [] for n in ("group", "k", "period", "estimate",
                                                      "lower", "upper", "band_lower",
                                                      "band_upper")}
        err = self.error
        for g in [None] if self.groups is None else list(self.groups):
            for k in self.k_values:
                def pick(d: Any, g: str | None = g, k: int = k) -> list[Any]:
                    return list(d[k] if g is None else d[g][k])

                n = len(pick(self.value))
                cols["group"] += [g] * n
                cols["k"] += [k] * n
                cols["period"] += list(np.asarray(self.periods))
                cols["estimate"] += pick(self.value)
                for name in ("lower", "upper", "band_lower", "band_upper"):
                    cols[name] += pick(getattr(err, name))
        if self.groups is None:
            del cols["group"]
        return cols

    @public_errors("StreamRelease.below_noise")
    def below_noise(self, group: str | None = None) -> dict[int, Any]:
        """``{k: mask}`` over periods ``1 … period`` (of ``group``): where an answer is smaller
        than its noise — its interval reaches 0 (``error.lower <= 0``), so it cannot be told
        from 0 (no public count bounds reach from above). Post-processing of the release;
        ``error.vacuous`` is True when every answer of every group and k is."""
        self._curves(group)  # the group is one of the stream's (None: ungrouped only)
        lower = self.error.lower if group is None else self.error.lower[group]
        return {k: np.asarray(lower[k]) <= 0 for k in self.k_values}

    def _group_order(self) -> list[str]:
        """The groups by their largest released reach at the last period (post-processing)."""
        k = min(self.k_values)
        return sorted(self.groups or (), key=lambda g: -float(self.value[g][k][-1]))

    @public_errors("StreamRelease.plot")
    def plot(self, ax: Any = None, *, group: str | None = None, max_panels: int = 12) -> Any:
        """The curves of every k with their intervals, to date.

        Ungrouped, or with ``group``: one axes (``ax`` or a new one), returned. Grouped without
        ``group``: small multiples, one panel per group, the largest released reach first, at
        most ``max_panels`` (the figure's title says which groups are drawn and how many are
        left out; a panel is marked when every answer of its group is smaller than its noise);
        returns the figure. ``ax`` then needs ``group`` (one axes holds one group).
        """
        if self.groups is not None and group is None:
            if ax is not None:
                raise ParameterError(message("group", "one of the stream's groups when ax is "
                                             "given (every group is drawn in a figure of its "
                                             "own: leave ax out)", group))
            return self._plot_groups(check_int(max_panels, "max_panels", minimum=1))
        return self._plot_one(ax, group)

    def _plot_one(self, ax: Any, group: str | None, title: bool = True) -> Any:
        from dpfreq.plotting import new_axes, plot_band

        curves = self._curves(group)
        err = self.error
        ax = new_axes(ax)

        def pick(d: Any, k: int) -> Any:
            return d[k] if group is None else d[group][k]

        x = np.asarray(self.periods)
        if x.dtype.kind == "U":  # ISO dates or timestamps
            x = x.astype("datetime64[us]")
        for k in self.k_values:
            plot_band(ax, x, curves[k], pick(err.lower, k), pick(err.upper, k),
                      label=f"{k}+ reach", marker="o" if x.size == 1 else None)  # 1 period: a dot
        if x.dtype.kind in "iu":  # integer periods: ticks at whole periods only
            from matplotlib.ticker import FixedLocator, MaxNLocator

            ax.xaxis.set_major_locator(FixedLocator(x.tolist()) if x.size <= 8
                                       else MaxNLocator(integer=True, min_n_ticks=1))
        ax.set_xlabel("period")
        ax.set_ylabel("items (noisy)")
        if title:
            where = f", group {group}" if group is not None else ""
            small = " (smaller than its noise)" if all(
                bool(np.all(m)) for m in self.below_noise(group).values()) else ""
            ax.set_title(f"reach to date ({self.unit}-level, ε={self.epsilon:g}{where})"
                         f"{small}; {(err.confidence or 0.95):.0%} intervals")
            ax.legend(fontsize="small")
        return ax

    def _plot_groups(self, max_panels: int) -> Any:
        from dpfreq.plotting import figure_legend, group_figure, privacy_title

        fig, axes, drawn, note = group_figure(self._group_order(), max_panels, what="groups",
                                              order="largest released reach")
        for ax, name in zip(axes, drawn, strict=False):
            self._plot_one(ax, name, title=False)
            ax.legend(fontsize="small")
            small = " (smaller than its noise)" if all(
                bool(np.all(m)) for m in self.below_noise(name).values()) else ""
            ax.set_title(f"{name}{small}", fontsize=9)
        fig.suptitle(privacy_title(f"Reach to date per group, periods 1..{self.period}",
                                   epsilon=self.epsilon, delta=self.delta, unit=self.unit,
                                   confidence=self.error.confidence) + f"\n{note}",
                     fontsize=10)
        figure_legend(fig, axes)
        return fig
