"""The release type of an anonymized histogram (PrivHist, Hay et al.).

The histogram is kept in **prevalence form** ``{count r: number of items with count r}`` so that
a release of billions of items stays a few thousand numbers; :meth:`to_counts` expands it on
request (``O(number of items)`` time and memory).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfreq._docstrings import PLOT_SECTIONS, fill_doc
from dpfreq.release import Release

__all__ = ["AnonymizedHistogramRelease"]


@dataclass(frozen=True, kw_only=True, repr=False)
class AnonymizedHistogramRelease(Release):
    """A differentially private anonymized histogram ``H`` with a private total ``N``.

    ``value`` is the dict ``{"counts": counts, "prevalences": prevalences, "n_estimate": N}``;
    :attr:`counts`, :attr:`prevalences` and :attr:`n_estimate` read it. ``unit`` is always
    ``"event"`` (one occurrence of one item). ``error`` is a sorted-ℓ1 bound with its
    confidence (see :func:`~dpfreq.anonymized.release_anonymized_histogram`).

    Attributes
    ----------
    total_interval : tuple of int
        ``(lower, upper)``: holds the true total ``n`` with probability at least
        ``error.confidence``, exactly (from the discrete Laplace law of ``N − n``).
    items_at_least_band : float
        Half-width of a simultaneous band: for every ``r`` at once, the true number of items
        with count ``>= r`` is within this of the released one, with probability about
        :attr:`items_at_least_confidence` (simulated like ``error``; exact for an empty
        release).
    items_at_least_confidence : float
        The confidence the band holds at: the share of simulated runs within it, never below
        ``error.confidence``. The band is a whole number of items, so where its deviations are
        a few items it holds in more runs than requested, and this says how many.
    split : tuple of float
        The budget split ``(ε1, ε2, ε3)`` actually used: ε1 for ``N``, ε2 for the split and the
        noisy counts, ε3 for the smoothed high-privacy histogram (0 when unused). For Hay et al.
        ``(ε1, ε', 0)`` with ε' on the sorted counts.
    regime : str
        ``"low-privacy"`` or ``"high-privacy"`` (PrivHist's branch), ``"sorted-counts"`` (Hay et
        al.) or ``"empty"`` (``N = 0``: nothing but ``N`` released).
    method : str
        The method that produced the release: ``"privhist"``, ``"privhist-tuned"`` or ``"hay"``
        (``method="auto"`` records its choice here and ``"auto"`` in
        ``mechanism_params["requested_method"]``).

    Examples
    --------
    >>> from dpfreq.anonymized import release_anonymized_histogram
    >>> rel = release_anonymized_histogram({1: 40, 2: 12, 30: 1}, epsilon=1000.0, unit="event",
    ...                                    rng=0)
    >>> rel.to_mapping(), rel.total_interval, rel.unit
    ({1: 40, 2: 12, 30: 1}, (94, 94), 'event')
    """

    total_interval: tuple[int, int]
    items_at_least_band: float
    items_at_least_confidence: float
    split: tuple[float, float, float]
    regime: str
    method: str

    _count_columns = ("lower", "upper")
    _public_fields = (*Release._public_fields, "split", "items_at_least_confidence")

    def _value_text(self) -> str:
        pairs = [f"{c}: {p}" for c, p in zip(self.counts[:4].tolist(),
                                             self.prevalences[:4].tolist(), strict=True)]
        more = ", …" if self.counts.size > 4 else ""
        return f"{{count: items}} {{{', '.join(pairs)}{more}}}, n_estimate={self.n_estimate}"

    def _summary(self) -> list[tuple[str, str]]:
        low, high = self.total_interval
        return [("histogram", f"{self.n_items:,} items at {self.counts.size:,} distinct counts, "
                              f"N={self.n_estimate:,} (total in [{low:,}, {high:,}])"),
                ("method", f"{self.method}, regime {self.regime}")]

    @property
    def counts(self) -> np.ndarray:
        """The distinct released counts, strictly increasing, every entry ``>= 1`` (int64)."""
        return np.asarray(self.value["counts"], dtype=np.int64)

    @property
    def prevalences(self) -> np.ndarray:
        """``prevalences[i] >= 1`` items have released count ``counts[i]`` (int64)."""
        return np.asarray(self.value["prevalences"], dtype=np.int64)

    @property
    def n_estimate(self) -> int:
        """``N = max(n + Z, 0)``, the ε1-DP estimate of the total ``n``; use it, not
        ``Σ r·φ_r(H)``, as the sample size of plug-in property estimators."""
        return int(self.value["n_estimate"])

    def table(self) -> dict[str, Any]:
        """One row per distinct released count, largest first.

        Columns: ``count``; ``items`` (how many items have that released count);
        ``rank_first``/``rank_last`` (their ranks, 1 = most frequent); ``items_at_least``
        (items with released count ``>= count``) with ``lower``/``upper``, the simultaneous
        band :attr:`items_at_least_band` (clipped at 0), and ``confidence``, the level that
        band holds at (:attr:`items_at_least_confidence`); ``share`` (``count / N``, the
        estimated prevalence of each such item).
        """
        counts = self.counts[::-1]
        items = self.prevalences[::-1]
        last = np.cumsum(items)
        n = max(self.n_estimate, 1)
        band = float(self.items_at_least_band)
        return {"count": counts, "items": items, "rank_first": last - items + 1,
                "rank_last": last, "items_at_least": last,
                "lower": np.maximum(last - band, 0.0), "upper": last + band,
                "confidence": np.full(last.shape, float(self.items_at_least_confidence)),
                "share": counts.astype(np.float64) / n}

    @property
    def n_items(self) -> int:
        """Number of items in the released histogram (``Σ_r φ_r(H)``)."""
        return int(np.asarray(self.prevalences, dtype=np.int64).sum())

    @property
    def total(self) -> int:
        """``Σ_r r·φ_r(H)``: the total of the released counts (noisier than :attr:`n_estimate`)."""
        c = np.asarray(self.counts, dtype=np.int64).astype(object)
        p = np.asarray(self.prevalences, dtype=np.int64).astype(object)
        return int(np.dot(c, p)) if c.size else 0

    def to_mapping(self) -> dict[int, int]:
        """The release as a plain mapping ``{count r: prevalence φ_r}`` (ascending ``r``)."""
        return {int(c): int(p) for c, p in zip(self.counts, self.prevalences, strict=True)}

    def to_counts(self) -> np.ndarray:
        """The released counts expanded to one entry per item, sorted descending (int64).

        This is ``O(n_items)`` time and memory — billions of entries for a password list; the
        release itself (and every dpfreq consumer of it) works on the prevalence form instead.
        """
        c = np.asarray(self.counts, dtype=np.int64)[::-1]
        p = np.asarray(self.prevalences, dtype=np.int64)[::-1]
        return np.repeat(c, p)

    @fill_doc(plot=PLOT_SECTIONS)
    def plot(self, ax: Any = None) -> Any:
        """Items with released count ``>= r`` against ``r`` (log–log), with the band.

        The complementary cumulative form of the rank–frequency plot, drawn from the prevalence
        form (never expanded), so it is instant for billions of items; the shaded band is
        :attr:`items_at_least_band` at confidence :attr:`items_at_least_confidence`.

        [[plot]]
        """
        from dpfreq.plotting import legend, new_axes, plain_log_ticks, plot_band, privacy_title

        ax = new_axes(ax)
        table = self.table()
        if table["count"].size:
            # φ_{r+} is constant on (c_{j−1}, c_j]: draw it as steps ending at each count
            x = table["count"][::-1].astype(np.float64)
            xs = np.concatenate(([x[0]], np.column_stack([x[:-1], x[1:]]).ravel()))

            def steps(values: np.ndarray) -> np.ndarray:
                v = np.asarray(values, dtype=np.float64)[::-1]
                return np.concatenate(([v[0]], np.repeat(v[1:], 2)))

            lower = np.maximum(steps(table["lower"]), 0.5)  # log scale: keep the band visible
            plot_band(ax, xs, steps(table["items_at_least"]), lower, steps(table["upper"]),
                      label=f"release ({self.method}, {self.regime})",
                      band_label=("simultaneous band, confidence "
                                  f"{self.items_at_least_confidence:.3g}"))
            ax.set_xscale("log")
            ax.set_yscale("log")
            plain_log_ticks(ax.xaxis)
            plain_log_ticks(ax.yaxis)
            legend(ax, loc="best", fontsize="small")
        else:
            ax.text(0.5, 0.5, "empty release", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel("count r")
        ax.set_ylabel("items with count >= r")
        ax.set_title(privacy_title(f"Anonymized histogram (N={self.n_estimate})",
                                   epsilon=self.epsilon, delta=self.delta, unit=self.unit,
                                   confidence=self.items_at_least_confidence, interval="band"))
        return ax
