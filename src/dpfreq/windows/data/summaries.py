"""Mergeable per-(family, k) summaries of an event log: all a window release needs of the data.

Every exact answer of a window release is a count over the union, over items, of per-item
point sets of the reductions (:mod:`dpfreq.windows.data.reductions`). A release therefore never
needs the raw event log, only these sums over items, which an engine computes per chunk of
whole items and adds up:

* ``cumulative``: the histogram over periods ``0..T`` of the items' k-th occurrence
  times (items with fewer than ``k`` events make no point);
* ``rolling`` width ``W``: per block ``b``, the histograms of the P1 and P2 values
  (:class:`~dpfreq.windows.data.reductions.BlockCounts`) and the number of items present;
* ``all``: the distinct 2d points ``(x, y)`` of P1 ∪ P2 with summed weights
  (``+1`` per P1 point, ``−1`` per P2 point; points with weight 0 are left out);
* the number of events per period (for the singleton check of time compression; of a
  group's rows before the bounding).

The summaries are the canonical sparse form ``(slot, key) -> weight`` of one group of
:class:`dpfreq.engines.Summaries`: slot 0 the events per period (key = period), slot
``i >= 1`` the ``i``-th :class:`~dpfreq.engines.SummarySpec` (whose docstring states the keys;
the engines compute them where the data lives, in SQL on DuckDB and Spark). The exact oracles
built from them answer exactly as the oracles built from the points.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.engines import SummarySpec
from dpfreq.windows.data.dominance_count import DominanceCounter
from dpfreq.windows.data.reductions import BlockCounts

__all__ = ["SummarySpec", "WindowSummaries", "summary_specs"]

IntArray = NDArray[np.int64]


def summary_specs(windows: Any, k_values: Any) -> tuple[SummarySpec, ...]:
    """The summaries a release of ``windows`` × ``k_values`` needs (one per family and k)."""
    out: list[SummarySpec] = []
    for w in windows:
        for k in k_values:
            if isinstance(w, str):  # the whole period [1, T] reads the cumulative summary
                spec = SummarySpec("cumulative" if w == "total" else w, int(k))
            else:
                spec = SummarySpec("rolling", int(k), int(w))
            if spec not in out:
                out.append(spec)
    return tuple(out)


def _rolling_layout(width: int, horizon: int) -> tuple[int, int]:
    """(number of blocks, values per block) of a rolling-window summary."""
    return horizon // width + 1, width + 2


@dataclass(frozen=True)
class WindowSummaries:
    """Summed per-item summaries of an event log (see the module docstring).

    ``slots``, ``keys``, ``weights``: the sparse entries, sorted by (slot, key), non-zero.
    Exact, not private: kept in a release's private state only.
    """

    horizon: int
    specs: tuple[SummarySpec, ...]
    slots: IntArray
    keys: IntArray
    weights: IntArray

    def _entries(self, slot: int) -> tuple[IntArray, IntArray]:
        lo, hi = np.searchsorted(self.slots, [slot, slot + 1])
        return self.keys[lo:hi], self.weights[lo:hi]

    def _dense(self, slot: int, size: int) -> IntArray:
        keys, w = self._entries(slot)
        out = np.zeros(size, dtype=np.int64)
        out[keys] = w
        return out

    def period_counts(self) -> IntArray:
        """Events per period ``0..T`` (entry 0 is always 0)."""
        return self._dense(0, self.horizon + 1)

    @property
    def n_events(self) -> int:
        return int(self._entries(0)[1].sum())

    @property
    def singleton(self) -> bool:
        """Whether every period holds at most one event."""
        w = self._entries(0)[1]
        return w.size == 0 or int(w.max()) <= 1

    def _slot(self, spec: SummarySpec) -> int:
        try:
            return self.specs.index(spec) + 1
        except ValueError:
            raise KeyError(f"no summary {spec} in this release") from None

    def cumulative_histogram(self, k: int) -> IntArray:
        """Number of items whose k-th occurrence is in period ``t``, ``t = 0..T``."""
        return self._dense(self._slot(SummarySpec("cumulative", k)), self.horizon + 1)

    def block_counts(self, k: int, width: int) -> BlockCounts:
        nb, span = _rolling_layout(width, self.horizon)
        dense = self._dense(self._slot(SummarySpec("rolling", k, width)), 2 * nb * span + nb)
        return BlockCounts(hist_a=dense[:nb * span].reshape(nb, span),
                           hist_c=dense[nb * span:2 * nb * span].reshape(nb, span),
                           n_present=dense[2 * nb * span:], width=int(width))

    def window_points(self, k: int) -> tuple[IntArray, IntArray, IntArray]:
        """``(x, y, weight)``: the distinct points of P1 ∪ P2 with summed ±1 weights."""
        keys, w = self._entries(self._slot(SummarySpec("all", k)))
        return keys // (self.horizon + 2), keys % (self.horizon + 2), w

    def oracle(self, spec: SummarySpec) -> Any:
        """The exact oracle of one summary: the cumulative counts ``#{p <= t}`` for
        ``t = 0..T``, a :class:`BlockCounts`, or a weighted ``DominanceCounter``."""
        if spec.family == "cumulative":
            return np.cumsum(self.cumulative_histogram(spec.k))
        if spec.family == "rolling":
            return self.block_counts(spec.k, spec.width)
        x, y, w = self.window_points(spec.k)
        return DominanceCounter(x, y, w, self.horizon + 1, self.horizon)

    def _key_limit(self, slot: int) -> int:
        """One more than the largest key slot ``slot`` can hold (see
        :class:`~dpfreq.engines.SummarySpec`)."""
        t = self.horizon
        if slot == 0:
            return t + 1
        spec = self.specs[slot - 1]
        if spec.family == "cumulative":
            return t + 1
        if spec.family == "rolling":
            nb, span = _rolling_layout(spec.width, t)
            return 2 * nb * span + nb
        return (t + 2) * (t + 2)

    def entries_valid(self) -> bool:
        """Whether the entries are well formed: slots known, keys in range, sorted by
        (slot, key) without repeats, weights non-zero (a loaded file is checked with this)."""
        s, k, w = self.slots, self.keys, self.weights
        if s.size == 0:
            return True
        if int(s.min()) < 0 or int(s.max()) > len(self.specs) or np.any(w == 0):
            return False
        if np.any(np.diff(s) < 0):
            return False
        same = s[1:] == s[:-1]
        if np.any(same & (k[1:] <= k[:-1])):
            return False
        limits = np.array([self._key_limit(i) for i in range(len(self.specs) + 1)],
                          dtype=np.int64)
        # counts (events per period, histograms, block counts) are positive; only the merged
        # ±1 weights of the 2d points can be negative
        signed = np.array([False] + [sp.family == "all" for sp in self.specs], dtype=np.bool_)
        return bool(np.all((k >= 0) & (k < limits[s]) & (signed[s] | (w > 0))))

    # -- persistence (private state of a saved release) ------------------------------------
    def to_arrays(self) -> dict[str, IntArray]:
        return {"summary_slots": self.slots, "summary_keys": self.keys,
                "summary_weights": self.weights}

    def meta(self) -> dict[str, Any]:
        return {"horizon": self.horizon, "specs": [s.to_json() for s in self.specs]}

    @classmethod
    def from_saved(cls, meta: dict[str, Any], arrays: Any) -> WindowSummaries:
        return cls(int(meta["horizon"]), tuple(SummarySpec.from_json(v) for v in meta["specs"]),
                   np.asarray(arrays["summary_slots"], dtype=np.int64),
                   np.asarray(arrays["summary_keys"], dtype=np.int64),
                   np.asarray(arrays["summary_weights"], dtype=np.int64))
