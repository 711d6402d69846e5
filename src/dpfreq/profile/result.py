"""The release type of a private profile (direct count-of-counts or Wu & Pagh reconstruction)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpfreq.errors import DPFreqError, public_errors
from dpfreq.release import Release

__all__ = ["ProfileRelease"]


@dataclass(frozen=True, kw_only=True, repr=False)
class ProfileRelease(Release):
    """A private profile ``r[0..n]`` with its error statement.

    ``value`` is ``r`` (float64, entries in ``[0, 1]``, summing to 1): ``r[t]`` estimates the
    fraction of the ``domain_size`` items whose count is exactly ``t`` (``t = 0..max_count``;
    ``t = n`` also holds the items with more than ``n``, whose counts were clamped).

    ``error`` is either ``kind="interval"`` (per-class intervals ``lower``/``upper`` and a
    simultaneous band ``band_lower``/``band_upper``, in fractions, each holding with probability
    at least ``error.confidence``) or ``kind="bound"`` (one norm bound on the whole error).

    Attributes
    ----------
    domain_size : int
        ``d``, the public number of items (the normalizer of the profile).
    max_count : int
        ``n``, the public count cap (output length ``n + 1``).
    method : str
        ``"direct"`` (noisy count-of-counts, projected), ``"fft"`` (Wu & Pagh Algorithms 2+3)
        or ``"mle"`` (EM maximum likelihood on the Wu & Pagh sketch).
    l1_bound : float or None
        A high-probability bound on the ℓ1 distance between ``value`` and the true profile,
        holding with probability ``l1_confidence`` (Wu & Pagh's Theorem 1.1 for the sketch
        methods; the band's implication for ``direct``). Never more than 2.
    l1_confidence : float or None
        Probability with which ``l1_bound`` holds.
    B : int
        Window parameter of the sketch's noisy values ``[−B .. n+B]`` (0 for ``direct``).
    norm : str
        ``"1"``, ``"2"`` or ``"inf"``: the norm the sketch reconstruction optimizes.
    noisy_profile : numpy.ndarray or None
        The noisy input of the estimate as fractions of ``d``: the noisy count-of-counts on
        ``t = 0..n`` for ``direct``; the counts of noisy values on ``t = −B..n+B`` for the sketch
        methods. Released (it is what the estimate is computed from).

    Examples
    --------
    A release from the events of a mapping of columns (one row per occurrence of an item):

    >>> import numpy as np
    >>> from dpfreq.profile import release_profile
    >>> events = {"user": np.array(["a", "a", "b", "c", "c", "c"])}
    >>> rel = release_profile(events, item="user", domain_size=50, max_count=3,
    ...                       epsilon=2.0, unit="item", rng=11)
    >>> rel.value.shape, rel.error.kind, rel.error.lower.shape
    ((4,), 'interval', (4,))
    >>> bool(np.all(rel.error.lower <= rel.value)) and bool(np.all(rel.value <= rel.error.upper))
    True
    >>> sorted(rel.table())[:3]
    ['band_lower', 'band_upper', 'estimate']
    """

    domain_size: int
    max_count: int
    method: str
    l1_bound: float | None = None
    l1_confidence: float | None = None
    B: int = 0
    norm: str = "1"
    noisy_profile: Any = None

    _public_fields = (*Release._public_fields, "l1_confidence")
    _count_columns = ("items",)

    def _summary(self) -> list[tuple[str, str]]:
        bound = ("" if self.l1_bound is None else
                 f", ℓ1 bound {self.l1_bound:.4g} (confidence {self.l1_confidence:.6g})")
        return [("profile", f"d={self.domain_size:,} items, counts t=0..{self.max_count}, "
                            f"method {self.method}{bound}")]

    def profile(self) -> np.ndarray:
        """The estimated profile ``r[0..n]`` (alias of ``value``)."""
        return np.asarray(self.value)

    @property
    def counts_axis(self) -> np.ndarray:
        """The counts ``t = 0..n`` the entries of :meth:`profile` refer to."""
        return np.arange(self.max_count + 1)

    def _ends(self, name: str) -> np.ndarray:
        ends = getattr(self.error, name, None)
        if ends is None:
            return np.full(self.max_count + 1, np.nan)
        return np.asarray(ends, dtype=np.float64)

    def sum_interval(self, lo: int, hi: int) -> tuple[float, float]:
        """Interval for ``Σ_{t=lo..hi}`` of the profile, at ``error.confidence``.

        One ``t``: the per-class interval. Several, for ``direct``: exact, from the law of the
        sum of ``hi − lo + 1`` independent discrete Laplace noises on the noisy classes (with
        class 0 derived from ``d`` and ``lo = 0``: of the ``n − hi`` noises of the classes above)
        (:func:`dpfreq.profile.intervals.sum_half_width`), widened to contain the released sum
        as the per-class intervals are. Otherwise (or when that law is too wide to tabulate):
        the simultaneous band summed over the classes, which holds for every sum at once.
        NaN when the release has no intervals.
        """
        from fractions import Fraction

        from dpfreq.profile.intervals import sum_half_width

        if lo == hi:
            return float(self._ends("lower")[lo]), float(self._ends("upper")[lo])
        params = self.mechanism_params
        noisy = params.get("noisy_count_of_counts")
        conf = self.error.confidence
        if self.method == "direct" and noisy is not None and conf is not None:
            draws = hi - lo + 1
            if params.get("layout") == "class 0 derived" and lo == 0:
                draws = self.max_count - hi  # classes 0..hi are d minus the noisy hi+1..n
            q = 0 if draws == 0 else sum_half_width(Fraction(str(params["gamma"])), draws,
                                                     float(conf))
            if q is not None:
                d = self.domain_size
                y = sum(int(v) for v in list(noisy)[lo : hi + 1])
                x = float(np.sum(self.profile()[lo : hi + 1])) * d
                low = max(0.0, min(x, float(y - q)))
                high = min(float(d), max(x, float(y + q)))
                return low / d, high / d
        low = float(np.sum(self._ends("band_lower")[lo : hi + 1]))
        high = float(np.sum(self._ends("band_upper")[lo : hi + 1]))
        return max(0.0, low), min(1.0, high)

    def table(self) -> dict[str, Any]:
        """Tidy columns, one row per count ``t``.

        ``t``, ``estimate`` (fraction of the domain), ``lower``/``upper`` (per-class interval),
        ``band_lower``/``band_upper`` (simultaneous band) — NaN when the error statement is a
        norm bound without intervals — and ``items`` (the estimate times ``d``: whole numbers,
        ``int64`` in :meth:`to_pandas`, when the estimate is a count over ``d``, as for
        ``direct``).
        """
        r = self.profile().astype(np.float64)
        items = r * self.domain_size
        whole = np.rint(items)
        if np.all(np.abs(items - whole) <= 1e-6):  # counts over d (direct): exact integers
            items = whole
        return {
            "t": self.counts_axis,
            "estimate": r,
            "lower": self._ends("lower"),
            "upper": self._ends("upper"),
            "band_lower": self._ends("band_lower"),
            "band_upper": self._ends("band_upper"),
            "items": items,
        }

    # ------------------------------------------------------------------ measurement
    @classmethod
    def from_measurement(cls, measurement: Any, *, method: str, domain_size: int,
                         max_count: int, epsilon: float, unit: str, confidence: float,
                         norm: str, B: int, seeded: bool,
                         mechanism_params: Mapping[str, Any]) -> ProfileRelease:
        """The complete release of a noisy measurement: every published number computed first.

        ``measurement`` is the noisy count-of-counts ``y[0..n]`` (``method="direct"``) or the
        counts of the sketch's noisy values on ``t = −B..n+B`` (``"fft"``, ``"mle"``), int64,
        already checked; ``mechanism_params`` the release's public context (engine, why, ...),
        to which the mechanism's own entries are added. Post-processing only: the same fields
        :func:`~dpfreq.profile.release_profile` publishes (:mod:`dpfreq.profile.saved` loads a
        saved release through here).
        """
        if method == "direct":
            from dpfreq.profile.direct import direct_layout
            from dpfreq.profile.direct_release import direct_fields

            return cls(**direct_fields(
                measurement, direct_layout(unit, epsilon, max_count), d=domain_size,
                n=max_count, eps=epsilon, unit=unit, conf=confidence, norm=norm, seeded=seeded,
                params=mechanism_params))
        from dpfreq.profile.estimate import sketch_fields

        return cls(**sketch_fields(measurement, domain_size=domain_size, max_count=max_count,
                                   epsilon=epsilon, B=B, method=method, norm=norm,
                                   confidence=confidence, seeded=seeded,
                                   mechanism_params=mechanism_params))

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write the release's noisy measurement and public parameters to ``path``.

        Sealed JSON text (:mod:`dpfreq.profile.saved`): a SHA-256 digest, or an HMAC-SHA256
        signature when ``DPFREQ_ARTIFACT_KEY`` is set (:mod:`dpfreq.artifacts`). The file holds
        only what is published (the noisy count-of-counts, or the counts of the sketch's noisy
        values, and the public parameters), nothing secret; :meth:`load` recomputes every
        published number from it.

        Returns
        -------
        pathlib.Path
            The path written.

        Raises
        ------
        ParameterError
            For one group's release of a grouped profile (its coverage statement is not
            part of the saved form), or a malformed ``DPFREQ_ARTIFACT_KEY``.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> from dpfreq.profile import release_profile
        >>> rel = release_profile([3, 1, 0, 2], domain_size=10, max_count=4, epsilon=1.0,
        ...                       unit="item", rng=7)
        >>> path = rel.save(pathlib.Path(tempfile.mkdtemp()) / "profile.json")
        >>> same = ProfileRelease.load(path)
        >>> same.to_json() == rel.to_json()
        True
        """
        from dpfreq.profile.saved import write_saved

        return write_saved(self, path)

    @classmethod
    @public_errors("ProfileRelease.load")
    def load(cls, path: str | Path) -> ProfileRelease:
        """The release saved in ``path`` by :meth:`save`, recomputed from its measurement.

        Every published number (estimate, intervals, band, ℓ1 bound) is recomputed from the
        stored noisy measurement by the release's own post-processing
        (:meth:`from_measurement`), so it equals the saved release's bit for bit; nothing is
        spent.

        Raises
        ------
        DataError
            One line naming the file: missing or unreadable, not a saved profile release (the
            JSON of :meth:`to_json` included: it has no seal), another format version, a
            digest or signature that does not match (an edited file), a signed file without
            its key or an unsigned one while ``DPFREQ_ARTIFACT_KEY`` is set, or a field out of
            its range.
        """
        from dpfreq.profile.saved import read_saved

        return cls._rebuilt(read_saved(path), str(path))

    @classmethod
    @public_errors("ProfileRelease.from_json")
    def from_json(cls, text: str | bytes, *, label: str = "the text") -> ProfileRelease:
        """The release of the text :meth:`save` writes (sealed JSON), recomputed as by
        :meth:`load`; ``label`` names the text in errors.

        The plain JSON of :meth:`to_json` carries no seal and is refused in one line.
        """
        from dpfreq.profile.saved import read_saved_text

        return cls._rebuilt(read_saved_text(text, label=label), label)

    @classmethod
    def _rebuilt(cls, arguments: dict[str, Any], label: str) -> ProfileRelease:
        from dpfreq.profile.saved import invalid

        try:
            return cls.from_measurement(**arguments)
        except (DPFreqError, ValueError, TypeError, OverflowError) as exc:
            raise invalid(label, exc) from None

    def plot(self, ax: Any = None, *, log: bool = False, truth: Any = None,
             from_count: int = 0) -> Any:
        """Draw the estimate with its per-class intervals (and band), optionally beside the truth.

        Parameters
        ----------
        ax : matplotlib axes, optional
            Where to draw; a new Agg figure when omitted.
        log : bool, default False
            Logarithmic y axis (profiles span many orders of magnitude). Zero entries are not
            drawn on a log axis.
        truth : array-like, optional
            The true profile ``f[0..n]`` (for simulations and demos only).
        from_count : int, default 0
            The first count drawn: 1 leaves out ``t = 0`` (the items never seen), which dwarfs
            the others when the domain is much larger than the items present.

        Returns
        -------
        matplotlib axes
        """
        from matplotlib.ticker import MaxNLocator

        from dpfreq.plotting import legend, new_axes, plot_band, privacy_title

        ax = new_axes(ax)
        first = min(max(int(from_count), 0), self.max_count)
        t = self.counts_axis[first:]
        r = self.profile()[first:]
        conf = self.error.confidence
        if self.error.kind == "interval":
            lower, upper = self._ends("lower")[first:], self._ends("upper")[first:]
            band_label = f"per-class intervals ({conf:.3g})"
        else:
            bound = float(np.max(np.asarray(self.error.value, dtype=np.float64)))
            lower, upper = np.clip(r - bound, 0.0, 1.0), np.clip(r + bound, 0.0, 1.0)
            band_label = f"error bound (prob. ≥ {conf:.3g})"
        few = t.size <= 60  # a few counts: each with its interval as an error bar
        if few:
            ax.errorbar(t, r, yerr=[np.maximum(r - lower, 0), np.maximum(upper - r, 0)],
                        fmt="o", markersize=4, capsize=3,
                        label=f"private profile ({self.method}), {band_label}")
        else:
            plot_band(ax, t, r, lower, upper, label=f"private profile ({self.method})",
                      band_label=band_label, drawstyle="steps-mid", step="mid")
        if self.error.band_lower is not None:
            style = {"color": "gray", "linewidth": 0.8}
            style.update({"linestyle": "none", "marker": "_", "markersize": 10} if few
                         else {"linestyle": ":", "drawstyle": "steps-mid"})
            ax.plot(t, self._ends("band_lower")[first:], label=f"simultaneous band ({conf:.3g})",
                    **style)
            ax.plot(t, self._ends("band_upper")[first:], **style)
        if truth is not None:
            f = np.asarray(truth, dtype=np.float64)
            ax.plot(np.arange(f.size)[first:], f[first:], "k.", label="true profile",
                    markersize=4)
        if log:
            ax.set_yscale("log")
            positive = r[r > 0]
            if positive.size:
                ax.set_ylim(bottom=0.5 * float(positive.min()), top=1.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("count t" + (f" (t >= {first})" if first else "")
                      + f"; t = {self.max_count}: {self.max_count} or more")
        ax.set_ylabel(f"fraction of the d={self.domain_size:,} items")
        ax.set_title(privacy_title(f"Private profile (n={self.max_count})",
                                   epsilon=self.epsilon, delta=self.delta, unit=self.unit,
                                   confidence=conf))
        legend(ax, loc="best", fontsize="small")
        return ax
