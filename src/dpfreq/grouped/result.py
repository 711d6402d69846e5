"""The container of a grouped release: one ordinary release per public group."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpfreq._display import brief, error_text, html_table, privacy_text, text_block
from dpfreq.grouped.dropped import DroppedFraction
from dpfreq.release import ErrorStatement, Release, public_floats

__all__ = ["GroupedRelease"]


@dataclass(frozen=True, repr=False)
class GroupedRelease:
    """Releases of one system, one per group, spent once together.

    Attributes
    ----------
    releases : Mapping[str, Release]
        ``rel["campaign_7"]`` is an ordinary release of its system (value, error, unit, ...).
    epsilon, delta : float
        What the whole grouped call spent (once, for every group together).
    unit : str
        The unit of privacy of the whole call (at ``"item"`` one item across all its groups).
    mechanism : str
        The per-group mechanism.
    mechanism_params : Mapping
        The bounding, the budget split and the group selection, in words and numbers.
    simultaneous : ErrorStatement
        A statement holding for every group at once with probability ``confidence``.
    seeded : bool
        True when a seed was used (reproducible, not for production).
    dropped_fraction : DroppedFraction or None
        With ``capping_epsilon=``: the private estimate (and interval) of the fraction of
        (item, group) pairs the cap dropped (:mod:`dpfreq.grouped.dropped`); else None.
    """

    releases: Mapping[str, Release]
    epsilon: float
    delta: float
    unit: str
    mechanism: str
    mechanism_params: Mapping[str, Any]
    simultaneous: ErrorStatement
    seeded: bool
    group_column: str = field(default="group")
    dropped_fraction: DroppedFraction | None = field(default=None)

    def __getitem__(self, name: str) -> Release:
        return self.releases[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.releases)

    def __len__(self) -> int:
        return len(self.releases)

    def _display_rows(self) -> list[tuple[str, str]]:
        seeded = ", seeded (reproducible, not for production)" if self.seeded else ""
        first = next(iter(self.releases.values()), None)
        kind = "" if first is None else f" ({type(first).__name__} each)"
        return [("groups", f"{len(self.releases):,} groups{kind}: {brief(list(self.releases))}"),
                ("privacy", privacy_text(self.epsilon, self.delta, self.unit)),
                ("mechanism", f"{self.mechanism}{seeded}"),
                ("all groups", error_text(self.simultaneous))] + (
                    [] if self.dropped_fraction is None else
                    [("dropped by the cap", self.dropped_fraction.description)])

    def __repr__(self) -> str:
        """A few lines: the groups, ε/δ, unit, mechanism and the simultaneous statement."""
        return text_block("GroupedRelease", self._display_rows())

    def _repr_html_(self) -> str:
        """The same summary as a small HTML table (shown by notebooks)."""
        return html_table("GroupedRelease", self._display_rows())

    @property
    def groups(self) -> tuple[str, ...]:
        """The released groups, in order."""
        return tuple(self.releases)

    def to_pandas(self) -> Any:
        """Tidy table: each group's own table (a profile: one row per count t with its
        intervals; an anonymized histogram: one row per released count), group column first;
        ``attrs`` holds ε, δ, the unit, the mechanism, the confidence and the grouping, as a
        release's do."""
        import pandas as pd

        frames = []
        for name, rel in self.releases.items():
            if type(rel).table is not Release.table:  # the release's own tidy table
                frame = rel.to_pandas()
                frame.insert(0, self.group_column, name)
                frames.append(frame)
                continue
            value = np.atleast_1d(np.asarray(rel.value, dtype=np.float64))
            frames.append(pd.DataFrame({self.group_column: name,
                                        "index": np.arange(value.size), "value": value}))
        if not frames:  # no group released (e.g. none passed a private selection)
            frame = pd.DataFrame({self.group_column: [], "index": [], "value": []})
        else:
            frame = pd.concat(frames, ignore_index=True)
        first = next(iter(self.releases.values()), None)
        frame.attrs.update(self._attrs())
        if first is not None:
            frame.attrs["confidence"] = first.error.confidence
        return frame

    def _attrs(self) -> dict[str, Any]:
        """What :meth:`to_pandas` puts in ``DataFrame.attrs``: the whole call's ε, δ, unit,
        relation and mechanism, the grouping and the simultaneous statement."""
        first = next(iter(self.releases.values()), None)
        params = self.mechanism_params
        return {"epsilon": self.epsilon, "delta": self.delta, "unit": self.unit,
                "relation": first.relation if first is not None else self.unit,
                "mechanism": self.mechanism, "group_column": self.group_column,
                "groups": list(self.releases),
                "epsilon_per_group": params.get("epsilon_per_group"),
                "max_groups_per_item": params.get("max_groups_per_item"),
                "simultaneous": self.simultaneous.description,
                "simultaneous_confidence": self.simultaneous.confidence,
                "seeded": self.seeded}

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict: the shared fields and every group's own ``to_dict()``."""
        return {"kind": "grouped", "epsilon": public_floats(self.epsilon),
                "delta": public_floats(self.delta),
                "unit": self.unit, "mechanism": self.mechanism, "seeded": self.seeded,
                "group_column": self.group_column,
                "mechanism_params": public_floats(json.loads(json.dumps(
                    dict(self.mechanism_params), default=str))),
                "simultaneous": {"kind": self.simultaneous.kind,
                                 "confidence": public_floats(self.simultaneous.confidence),
                                 "value": self.simultaneous.value,
                                 "description": self.simultaneous.description},
                "groups": {name: rel.to_dict() for name, rel in self.releases.items()},
                **({} if self.dropped_fraction is None else
                   {"dropped_fraction": public_floats(self.dropped_fraction.to_dict())})}

    def to_json(self, **kwargs: Any) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), default=str, **kwargs)

    def _size(self, name: str) -> float:
        """What :meth:`plot` sorts the groups by (post-processing of each group's release): the
        items a profile places at counts t >= 1, an anonymized histogram's released total, or
        the sum of the released value."""
        rel = self.releases[name]
        if hasattr(rel, "n_estimate"):
            return float(rel.n_estimate)
        value = np.atleast_1d(np.asarray(rel.value, dtype=np.float64))
        if hasattr(rel, "domain_size"):
            return float(np.sum(value[1:]) * rel.domain_size)
        return float(np.sum(value))

    def _panel(self, ax: Any, name: str) -> None:
        """One group's panel: a profile for t >= 1 with its intervals, an anonymized histogram's
        own figure, or the release's own plot."""
        rel = self.releases[name]
        if hasattr(rel, "domain_size"):  # a profile: the counts t >= 1 (t = 0 dwarfs them)
            rel.plot(ax=ax, from_count=1)  # type: ignore[call-arg]
        else:
            rel.plot(ax=ax)
        small = " (smaller than its noise)" if rel.error.vacuous else ""
        ax.set_title(f"{self.group_column} = {name}{small}", fontsize=9)

    def plot(self, *, max_panels: int = 12) -> Any:
        """Small multiples: one panel per group, the largest first, at most ``max_panels``
        (the figure's title says which groups are drawn and how many are not).

        Each panel is its group's release drawn by its own ``plot`` — a profile for the counts
        t >= 1 with its per-class intervals, an anonymized histogram with its band — titled by
        the group (and marked when its error statement is vacuous). The groups are ordered by a
        released size (:meth:`_size`: post-processing). The figure's title states ε, δ, the
        unit and the confidence.

        Returns
        -------
        matplotlib.figure.Figure
        """
        from dpfreq.plotting import figure_legend, group_figure, privacy_title

        names = sorted(self.releases, key=lambda g: -self._size(g))
        first = next(iter(self.releases.values()), None)
        what = "largest released size" if first is None or not hasattr(
            first, "n_estimate") else "largest released total N"
        if first is not None and hasattr(first, "domain_size"):
            what = "most items released at counts t >= 1"
        fig, axes, drawn, note = group_figure(names, max_panels, what="groups", order=what)
        for ax, name in zip(axes, drawn, strict=False):
            self._panel(ax, name)
        if not drawn:
            axes[0].text(0.5, 0.5, "no group was released", ha="center", va="center",
                         transform=axes[0].transAxes)
            axes[0].set_axis_off()
        conf = self.simultaneous.confidence
        per = "" if first is None else f"; ε={first.epsilon:.3g} per group"
        kind = ("Release" if first is None else "Profile" if hasattr(first, "domain_size")
                else "Anonymized histogram" if hasattr(first, "n_estimate")
                else type(first).__name__)
        fig.suptitle(privacy_title(f"{kind} per {self.group_column}", epsilon=self.epsilon,
                                   delta=self.delta, unit=self.unit,
                                   confidence=first.error.confidence if first else conf)
                     + f"{per}\n{note}", fontsize=10)
        figure_legend(fig, axes)
        return fig
