"""The container of a grouped release: one ordinary release per public group."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpfreq._display import brief, error_text, html_table, privacy_text, text_block
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
                ("all groups", error_text(self.simultaneous))]

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
        """Tidy table: one row per (group, index) of each group's value, with a group column."""
        import pandas as pd

        frames = []
        for name, rel in self.releases.items():
            if isinstance(rel.value, Mapping):  # e.g. an anonymized histogram: its own table
                frame = rel.to_pandas()
                frame.insert(0, self.group_column, name)
                frames.append(frame)
                continue
            value = np.atleast_1d(np.asarray(rel.value, dtype=np.float64))
            frames.append(pd.DataFrame({self.group_column: name,
                                        "index": np.arange(value.size), "value": value}))
        if not frames:  # no group released (e.g. none passed a private selection)
            return pd.DataFrame({self.group_column: [], "index": [], "value": []})
        return pd.concat(frames, ignore_index=True)

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
                "groups": {name: rel.to_dict() for name, rel in self.releases.items()}}

    def to_json(self, **kwargs: Any) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), default=str, **kwargs)

    def plot(self, *, max_panels: int = 12) -> Any:
        """Small multiples: at most ``max_panels`` groups (in the listed order), one panel each.

        The groups shown are the first ``max_panels`` of the public list: ordering by a noisy
        size would be post-processing too, but the listed order is what the caller chose.
        """
        import matplotlib.pyplot as plt

        names = list(self.releases)[:max_panels]
        cols = min(4, max(1, len(names)))
        rows = max(1, -(-len(names) // cols))  # one empty panel when no group was released
        fig, axes = plt.subplots(rows, cols, figsize=(3 * cols, 2.4 * rows), squeeze=False)
        for a, name in zip(axes.flat, names, strict=False):
            if isinstance(self.releases[name].value, Mapping):  # the release's own figure
                self.releases[name].plot(ax=a)
                a.set_title(str(name), fontsize=9)
                continue
            value = np.atleast_1d(np.asarray(self.releases[name].value, dtype=np.float64))
            a.bar(np.arange(value.size), value)
            a.set_title(str(name), fontsize=9)
        for a in list(axes.flat)[len(names):]:
            a.set_visible(False)
        fig.tight_layout()
        return fig
