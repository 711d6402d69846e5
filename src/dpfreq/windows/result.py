"""The release of :func:`dpfreq.windows.release_window_counts` and its query methods.

The release is built complete from its private state (:class:`~dpfreq.windows.state.
WindowState`): the released curves and their intervals are computed before the frozen release
is constructed. Further windows are answered from the same fixed node noise, so asking any
number of them is post-processing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_confidence, check_int, message
from dpfreq.artifacts import read_artifact, write_artifact
from dpfreq.errors import ParameterError, public_errors
from dpfreq.release import RELATIONS, ErrorStatement, Release
from dpfreq.windows.consistency import consistent_curves, isotonic_columns
from dpfreq.windows.params import WindowBuild
from dpfreq.windows.persist import (
    ARTIFACT_KIND,
    ARTIFACT_VERSION,
    checked_load,
    measurement_name,
)
from dpfreq.windows.result_axis import curve_families, period_bounds
from dpfreq.windows.state import WindowAnswer, WindowState, build_state
from dpfreq.windows.structures.chooser import Plan

__all__ = ["WindowCountsRelease"]

_MECHANISM = "ghazi-kumar-manurangsi-nelson-windows"


@dataclass(frozen=True)
class WindowMechanism:
    """What a window release states about its mechanism: its plan (the structure of every
    (family, k) and the accounting) and its build parameters. Written to the release's
    ``mechanism_params`` by :meth:`to_dict`."""

    plan: Plan
    build: WindowBuild

    def to_dict(self) -> dict[str, Any]:
        """The public ``mechanism_params`` (the JSON and the docs read these keys)."""
        plan, b = self.plan, self.build
        params: dict[str, Any] = {
            "methods": plan.record, "epsilon_per_structure": str(plan.epsilon_per_structure),
            "delta_per_structure": plan.delta_per_structure,
            "n_structures": len(b.windows) * len(b.k_values),
            "budget_split": "equal split of the budget over every (window family, k) "
                            "structure",
            "accounting": plan.accounting,
            "relation": RELATIONS[b.unit],
            "noise": "exact discrete Laplace (or discrete Gaussian under zCDP) per tree node, a "
                     "deterministic function of a secret key and the node id (lazy noise, "
                     "never redrawn)",
            "singleton_declared": b.singleton, "source": b.source_kind,
        }
        if b.axis.get("kind") == "timestamp":  # periods are wall-clock times in this zone
            params["timezone"] = b.axis["timezone"]
            if "time_unit" in b.axis:
                params["time_unit"] = b.axis["time_unit"]
        return params


@dataclass(frozen=True, kw_only=True, repr=False)
class WindowCountsRelease(Release):
    """Private reach / k+ reach counts over time windows.

    ``value`` holds the released curves, ``value[family][k]`` for t = 1..T, with ``family``
    ``"cumulative"`` or ``"rolling(W=…)"``; ``error`` their per-answer intervals (``lower``,
    ``upper``, same nesting) and simultaneous bands. Arbitrary windows are answered by
    :meth:`window` and :meth:`exactly` (arrays of windows at once), or :meth:`answer_windows`
    for arrays of ``(t1, t2, k)``. ``mechanism_params["methods"]`` records the structure
    chosen for each (family, k) with the predicted RMSE of every candidate.

    The private state (secret noise key and exact summaries of the event log — per (family, k)
    histograms and weighted point sets, never the log itself) lives in ``_state``; it is not
    part of :meth:`to_dict` / :meth:`to_json`. :meth:`save` writes it to a file that must be
    protected like the raw data.

    Examples
    --------
    >>> from dpfreq.windows import release_window_counts
    >>> rel = release_window_counts(([1, 2], [1, 2]), horizon=2, epsilon=1.0, unit="event",
    ...                             k_values=[1], rng=0, windows=["cumulative"])
    >>> rel.unit, sorted(rel.table())
    ('event', ['end', 'estimate', 'k', 'lower', 'start', 'upper', 'window'])
    """

    horizon: int
    k_values: tuple[int, ...]
    windows: tuple[Any, ...]
    time_axis: Mapping[str, Any] = field(default_factory=dict)
    _state: Any = field(default=None, repr=False, compare=False)

    _count_columns = ("estimate", "lower", "upper")

    def _value_text(self) -> str:
        curves = "; ".join(f"{family} at k={', '.join(str(k) for k in by_k)}"
                           for family, by_k in self.value.items())
        return f"curves over t=1..{self.horizon}: {curves}"

    def _summary(self) -> list[tuple[str, str]]:
        return [("answers", "any window: .window(t1, t2, k), .exactly(...), "
                            ".answer_windows(...)")]

    @classmethod
    def from_state(cls, state: WindowState) -> WindowCountsRelease:
        """The complete release of a state: every curve and interval computed first."""
        b = state.build
        conf = b.confidence
        ks = b.k_values
        fams = b.windows
        value: dict[str, dict[int, Any]] = {}
        parts: dict[str, dict[str, dict[int, Any]]] = {
            n: {} for n in ("half", "lower", "upper", "band_lower", "band_upper")}
        ts = np.arange(1, state.horizon + 1)
        for w, label in curve_families(fams):
            value[label] = {}
            for p in parts.values():
                p[label] = {}
            for k in ks:
                structs = state.structures_for(k)
                if w == "cumulative":
                    a = state.answer(np.ones_like(ts), ts, k, conf, structs)
                elif w == "total":
                    a = state.answer(ts[-1:] * 0 + 1, ts[-1:], k, conf, structs)
                else:
                    chosen = [s for s in structs if s.family != "rolling" or s.width == w]
                    a = state.answer(np.maximum(1, ts - int(w) + 1), ts, k, conf, chosen)
                value[label][k] = np.asarray(a.estimate)
                parts["half"][label][k] = np.asarray(a.upper) - np.asarray(a.estimate)
                for n in ("lower", "upper", "band_lower", "band_upper"):
                    parts[n][label][k] = np.asarray(getattr(a, n))
        lows = [np.asarray(v) for by_k in parts["lower"].values() for v in by_k.values()]
        vacuous = bool(lows) and all(bool(np.all(v <= 0)) for v in lows)
        error = ErrorStatement(
            kind="interval", confidence=conf, value=parts["half"], lower=parts["lower"],
            upper=parts["upper"], band_lower=parts["band_lower"], band_upper=parts["band_upper"],
            description=_error_description(conf) + (_VACUOUS_TEXT if vacuous else ""),
            vacuous=vacuous)
        params = WindowMechanism(state.plan, b).to_dict()
        return cls(value=value, epsilon=b.epsilon, delta=b.delta, unit=b.unit,
                   mechanism=_MECHANISM, mechanism_params=params, seeded=b.seeded, error=error,
                   horizon=state.horizon, k_values=ks, windows=fams, time_axis=dict(b.axis),
                   _state=state)

    @property
    def n_dropped(self) -> int:
        """Events dropped as out of range (curator-side fact, not differentially private)."""
        return int(self._state.build.n_dropped)

    @property
    def observed_singleton(self) -> bool:
        """Whether the log had at most one event per period (curator-side, not private; for
        a group of a grouped release, the group's rows before the bounding)."""
        return bool(self._state.summaries.singleton)

    @property
    def below_noise(self) -> dict[str, dict[int, NDArray[np.bool_]]]:
        """``below_noise[family][k]``: where a released value is smaller than its noise — its
        interval reaches 0 (``error.lower <= 0``), so the data cannot tell it from an empty
        log. Post-processing of the release. ``error.vacuous`` is True when every released
        value is (the release then says only that each count is at most its upper end)."""
        return {label: {k: np.asarray(lo) <= 0 for k, lo in by_k.items()}
                for label, by_k in self.error.lower.items()}

    def consistent_curves(self) -> dict[str, dict[int, NDArray[np.int64]]]:
        """The released curves made consistent across k, in whole items: at every t each
        family non-increasing in k (``f≥k >= f≥k'`` for ``k < k'``, as true counts are) and
        every value at least 0.

        Post-processing of :attr:`value` (no privacy cost): isotonic regression across the
        released k at every t (:func:`isotonic_columns`), clamping at 0 and rounding; the
        command line prints this view by default. Each value stays an estimate of its own
        window (use :meth:`cumulative_curve` for a cumulative curve also non-decreasing in t).
        The intervals of :attr:`error` belong to the raw :attr:`value`; clamped at 0,
        ``[max(lower, 0), max(upper, 0)]``, they hold as often, since a count is never
        negative.

        Examples
        --------
        >>> from dpfreq.windows import release_window_counts
        >>> rel = release_window_counts(([1, 2, 2], [1, 1, 2]), horizon=2, epsilon=1.0,
        ...                             unit="event", k_values=[1, 2], rng=0,
        ...                             windows=["cumulative"])
        >>> c = rel.consistent_curves()["cumulative"]
        >>> bool((c[1] >= c[2]).all() and (c[2] >= 0).all())
        True
        """
        return consistent_curves(self.value)

    # ------------------------------------------------------------------ queries
    @public_errors("window")
    def window(self, t1: Any, t2: Any, k: int, *, confidence: float = 0.95) -> WindowAnswer:
        """``f≥k`` of the windows ``[t1, t2]`` (any released family that covers them)."""
        st = self._state
        return st.answer(t1, t2, k, confidence, st.structures_for(k))

    @public_errors("answer_windows")
    def answer_windows(self, t1: Any, t2: Any, k: Any, *,
                       confidence: float = 0.95) -> WindowAnswer:
        """Batch API: ``f≥k`` of many windows ``[t1[i], t2[i]]`` with their own ``k[i]``.

        ``t1``, ``t2`` and ``k`` are broadcast together. Every answer, its sd and its
        per-answer interval equal those of :meth:`window` asked one window at a time (same
        structure choice, same fixed node noise); the band holds for all the windows asked at
        once, over every k (its miss probability is split over the k values and the
        structures answering). Asking any number of windows
        is post-processing of the one release (no further privacy cost).
        """
        conf = check_confidence(confidence, "confidence")
        try:
            q1, q2, kk = np.broadcast_arrays(np.atleast_1d(np.asarray(t1)),
                                             np.atleast_1d(np.asarray(t2)),
                                             np.atleast_1d(np.asarray(k)))
        except ValueError as exc:
            raise ParameterError(message("(t1, t2, k)", "arrays of one common shape",
                                         (np.shape(t1), np.shape(t2), np.shape(k)))) from exc
        if kk.dtype.kind not in "iu":
            raise ParameterError(message("k", "integers", kk if kk.size < 9 else kk.dtype))
        shape = q1.shape
        q1, q2, kk = q1.ravel(), q2.ravel(), kk.ravel().astype(np.int64)
        n = q1.size
        names = ("estimate", "sd", "lower", "upper", "band_lower", "band_upper")
        cols = {name: np.zeros(n) for name in names}
        bias = np.zeros(n, dtype=np.int64)
        by = np.empty(n, dtype=object)
        integer = True
        desc = ""
        st = self._state
        ks = np.unique(kk).tolist()
        for kv in ks:
            sel = np.flatnonzero(kk == kv)
            a = st.answer(q1[sel], q2[sel], int(kv), conf, st.structures_for(int(kv)),
                          band_beta=(1.0 - conf) / len(ks))
            for name, arr in cols.items():
                arr[sel] = getattr(a, name)
            integer &= np.asarray(a.estimate).dtype.kind in "iu"
            bias[sel], by[sel], desc = a.bias_bound, a.answered_by, a.description
        est = cols.pop("estimate")
        est_out: Any = est.astype(np.int64) if integer else est
        out = {name: v.reshape(shape) for name, v in cols.items()}
        return WindowAnswer(t1=q1.reshape(shape), t2=q2.reshape(shape), k=kk.reshape(shape),
                            estimate=est_out.reshape(shape), confidence=conf,
                            answered_by=by.reshape(shape), bias_bound=bias.reshape(shape),
                            description=desc, **out)

    @public_errors("cumulative")
    def cumulative(self, t: Any, k: int, *, confidence: float = 0.95) -> WindowAnswer:
        """``f≥k(X[1, t])``: cumulative (k+) reach up to period ``t``."""
        st = self._state
        return st.answer(np.ones_like(np.asarray(t)), t, k, confidence,
                         st.structures_for(k))

    @public_errors("rolling")
    def rolling(self, t: Any, k: int, *, width: int | None = None,
              confidence: float = 0.95) -> WindowAnswer:
        """``f≥k`` of the rolling window ``[max(1, t−W+1), t]`` for the released width W."""
        widths = [w for w in self.windows if not isinstance(w, str)]
        if width is None:
            if len(widths) != 1:
                raise ParameterError(message("width", f"one of {widths} (this release "
                                             "has no single rolling window)", width))
            width = widths[0]
        if width not in widths:
            raise ParameterError(message("width", f"a released width {widths}", width))
        tt = np.asarray(t)
        if tt.dtype.kind not in "iu":
            raise ParameterError(message("t", "integers", t))
        fams = [s for s in self._state.structures_for(k)
                if s.family != "rolling" or s.width == width]
        return self._state.answer(np.maximum(1, tt - width + 1), t, k, confidence, fams)

    @public_errors("exactly")
    def exactly(self, t1: Any, t2: Any, k: int, *, confidence: float = 0.95) -> WindowAnswer:
        """``f=k = f≥k − f≥k+1`` of ``[t1, t2]``; needs ``k`` and ``k+1`` released.

        The interval is the sum of the two half-widths at confidence ``1 − β/2`` each.
        """
        k = check_int(k, "k", minimum=1)
        if k + 1 not in self.k_values:
            raise ParameterError(message("k", "a k with k and k+1 both in the released "
                                         f"k_values {list(self.k_values)}", k))
        conf = check_confidence(confidence, "confidence")
        c2 = 1 - (1 - conf) / 2
        a = self.window(t1, t2, k, confidence=c2)
        b = self.window(t1, t2, k + 1, confidence=c2)
        est = np.asarray(a.estimate) - np.asarray(b.estimate)

        def width(x: WindowAnswer, lo: str, hi: str) -> Any:
            return np.asarray(getattr(x, hi)) - np.asarray(getattr(x, lo))

        half = (width(a, "estimate", "upper") + width(b, "estimate", "upper"))
        shalf = (width(a, "estimate", "band_upper") + width(b, "estimate", "band_upper"))
        sd = np.sqrt(np.asarray(a.sd) ** 2 + np.asarray(b.sd) ** 2)

        def pick(v: Any) -> Any:
            return v.item() if isinstance(v, np.ndarray) and v.ndim == 0 else v

        return WindowAnswer(
            t1=a.t1, t2=a.t2, k=k, estimate=pick(est), sd=pick(sd), lower=pick(est - half),
            upper=pick(est + half), band_lower=pick(est - shalf), band_upper=pick(est + shalf),
            confidence=conf, answered_by=a.answered_by,
            bias_bound=pick(np.asarray(a.bias_bound) + b.bias_bound),
            description="f=k = f>=k - f>=k+1; intervals are sums of the two intervals, each at "
                        f"{c2:.4f} ({conf:.0%} jointly, union bound)")

    # ------------------------------------------------------------------ curves
    def cumulative_curve(self, k: int, *, clamp: bool = True, monotone: bool = True,
                         confidence: float = 0.95) -> WindowAnswer:
        """Cumulative reach for t = 1..T, clamped at 0 and made non-decreasing (the defaults;
        ``clamp=False, monotone=False`` gives the raw answers).

        Clamping and isotonic regression (``scipy.optimize.isotonic_regression``) are
        post-processing: free of privacy cost; the intervals refer to the raw estimates.
        """
        ts = np.arange(1, self.horizon + 1)
        ans = self.cumulative(ts, k, confidence=confidence)
        est = np.asarray(ans.estimate, dtype=np.float64)
        if monotone:
            from scipy.optimize import isotonic_regression

            est = isotonic_regression(est, increasing=True).x
        if clamp:
            est = np.maximum(est, 0.0)
        if monotone or clamp:
            ans = dataclasses.replace(ans, estimate=np.rint(est).astype(np.int64))
        return ans

    def rolling_curve(self, k: int, *, width: int | None = None, clamp: bool = False,
                    confidence: float = 0.95) -> WindowAnswer:
        """Rolling-window k+ reach for every window end t = 1..T."""
        ts = np.arange(1, self.horizon + 1)
        ans = self.rolling(ts, k, width=width, confidence=confidence)
        if clamp:
            ans = dataclasses.replace(ans, estimate=np.maximum(np.asarray(ans.estimate), 0))
        return ans

    def k_table(self, family: str = "cumulative", *, width: int | None = None,
                clamp: bool = True, monotone_in_k: bool = True) -> NDArray[np.int64]:
        """Curves for every released k as rows (``f≥k`` for k in ``k_values``), post-processed.

        Cumulative rows are made non-decreasing in t (:meth:`cumulative_curve`);
        ``monotone_in_k`` enforces ``f≥k >= f≥k'`` for ``k < k'`` at every t by isotonic
        regression across k (:func:`isotonic_columns`); ``clamp`` clamps at 0. Free
        post-processing.
        """
        rows = []
        for k in self.k_values:
            a = (self.cumulative_curve(k, clamp=False) if family == "cumulative"
                 else self.rolling_curve(k, width=width))
            rows.append(np.asarray(a.estimate, dtype=np.float64))
        tab = np.vstack(rows)
        if monotone_in_k:
            tab = isotonic_columns(tab, increasing=False)
        if clamp:
            tab = np.maximum(tab, 0.0)
        return np.rint(tab).astype(np.int64)

    def table(self) -> dict[str, Any]:
        """Tidy columns, one row per released curve value: ``window``, ``k``, ``start``,
        ``end`` (period numbers, or the first and last instant of the window — dates for
        whole-day periods — when the input had timestamps), ``estimate``, ``lower``,
        ``upper`` (the per-answer interval at ``error.confidence``)."""
        cols: dict[str, list[Any]] = {n: [] for n in ("window", "k", "start", "end",
                                                       "estimate", "lower", "upper")}
        ts = np.arange(1, self.horizon + 1, dtype=np.int64)
        for w, label in curve_families(self.windows):
            t2 = ts[-1:] if w == "total" else ts
            t1 = t2 * 0 + 1 if w in ("cumulative", "total") else np.maximum(1, ts - int(w) + 1)
            start, end = period_bounds(self.time_axis, t1, t2)
            for k in self.k_values:
                cols["window"].append(np.full(t2.size, label, dtype=object))
                cols["k"].append(np.full(t2.size, k, dtype=np.int64))
                cols["start"].append(start)
                cols["end"].append(end)
                cols["estimate"].append(np.asarray(self.value[label][k]))
                cols["lower"].append(np.asarray(self.error.lower[label][k]))
                cols["upper"].append(np.asarray(self.error.upper[label][k]))
        return {n: (np.concatenate(v) if v else np.zeros(0)) for n, v in cols.items()}

    def to_pandas(self) -> Any:
        """:meth:`table` as a DataFrame (:meth:`Release.to_pandas`); ``attrs`` also says what
        ``start`` and ``end`` are (the first and last period of each window, both included:
        for whole days the dates, wall-clock in ``attrs["timezone"]``) and
        :attr:`n_dropped`."""
        frame = super().to_pandas()
        frame.attrs.update(n_dropped=self.n_dropped,
                           start_end="start and end: the first and last period of each "
                                     "window, both included")
        if self.time_axis.get("kind") == "timestamp":
            frame.attrs["timezone"] = self.time_axis["timezone"]
        return frame

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write the release **with its private state** (secret key, exact summaries) to ``path``.

        A versioned, checksummed dpfreq artefact (:mod:`dpfreq.artifacts`) holding the build
        arguments, the key and the summaries (not the event log); :meth:`load` answers new
        windows with identical noise. Whoever holds it can remove the noise: protect it like
        the raw data, never publish it.
        """
        st = self._state
        meta = {"build": st.build.to_dict(), "key": st.key.hex(),
                "summaries": st.summaries.meta()}
        arrays = dict(st.summaries.to_arrays())
        for (label, k), s in st.structures.items():
            stored = s.measurement
            if stored is not None:  # what a loaded release answers from
                arrays[measurement_name(label, k)] = stored
        return write_artifact(path, kind=ARTIFACT_KIND, version=ARTIFACT_VERSION, meta=meta,
                              arrays=arrays)

    @classmethod
    @public_errors("WindowCountsRelease.load")
    def load(cls, path: str | Path) -> WindowCountsRelease:
        """Read a release written by :meth:`save`; every answer is identical (same node noise).

        Raises
        ------
        DataError
            Naming the file, for a missing, truncated, corrupted or edited file, another
            format version, or any field out of its range (ε, δ, unit, k_values, windows,
            horizon, summaries inconsistent with them, ...).
        """
        _, meta, arrays = read_artifact(path, kind=ARTIFACT_KIND, versions=(ARTIFACT_VERSION,))
        summaries, key, build, measured = checked_load(str(path), meta, arrays)
        return cls.from_state(build_state(summaries, key=key, build=build,
                                          measurements=measured))

    # ------------------------------------------------------------------ plot
    def plot(self, ax: Any = None) -> Any:
        """Cumulative and rolling-window k+ reach with their per-answer bands; the total
        ``[1, T]`` as a point with its interval at the last period (a release of totals alone:
        one bar per k with its interval).

        A release of the all-windows family alone draws the cumulative curves answered from it
        (:meth:`cumulative`, post-processing). The title states ε, the unit and the
        confidence; the axes are labelled and dated when the input had timestamps.
        """
        from dpfreq.windows.figure import draw_release

        return draw_release(self, ax)


_VACUOUS_TEXT = (" This statement is vacuous: every released value's interval reaches 0 (each "
                 "estimate is smaller than its noise, so the release cannot tell these counts "
                 "from 0); a larger epsilon, fewer families or fewer k values would narrow "
                 "the intervals (plan_window_counts(...).epsilon_for).")


def _error_description(conf: float) -> str:
    """The error statement's text for a release at confidence ``conf``."""
    return (f"{conf:.0%} interval of every released curve value (lower, upper), "
            "and a band holding for all T values of a curve at once (Šidák over "
            "independent per-query noise; trees within the "
            "simulation's size limit: calibrated on 1,000 draws of their exact "
            "joint noise law, an exact finite-sample level; otherwise the union "
            "bound; β split over the structures answering the curve); certified "
            "quantiles of the exact node-noise law of each answer (sums of node noises: "
            "their exact law; consistent tree estimates: grid convolution with the "
            "rounding error bounded; the square-root factorization: the sub-Gaussian tail "
            "of the discrete Gaussian). Arbitrary windows: WindowCountsRelease.window(...).")
