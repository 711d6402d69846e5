"""The release of :func:`dpfreq.windows.release_window_counts` and its query methods.

Every answer is ``exact count + Σ ± η(node)`` over the cover of the chosen structure, where the
node noise is fixed by the release's secret key (drawn once per node, never redrawn), so any
number of queries is post-processing of one private release (spec §2.4, pitfall 8).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_int, check_open_unit, message
from dpfreq.errors import ParameterError
from dpfreq.release import Release
from dpfreq.windows.strategy import Structure

__all__ = ["WindowAnswer", "WindowCountsRelease"]

#: format of :meth:`WindowCountsRelease.save` files (2: summaries; unversioned files: the log)
SAVE_FORMAT = 2


@dataclass(frozen=True, kw_only=True)
class WindowAnswer:
    """Noisy answers with their error statements (arrays, or scalars for scalar queries).

    Attributes
    ----------
    t1, t2 : int or numpy.ndarray
        The windows ``[t1, t2]`` asked.
    k : int or numpy.ndarray
        The k of ``f≥k`` (an array for :meth:`WindowCountsRelease.answer_windows`).
    estimate : int or numpy.ndarray
        The noisy count ``f≥k`` (or ``f=k``) of each window.
    sd : float or numpy.ndarray
        Exact standard deviation of the noise of each answer.
    ci_low, ci_high :
        Per-query interval: each one contains the truth with probability >= ``confidence``.
    simultaneous_low, simultaneous_high :
        Simultaneous interval: all answers of the query family contain the truth at once with
        probability >= ``confidence`` (union bound over ``n_family_queries``).
    confidence : float
        The confidence level of both intervals.
    strategy : str or numpy.ndarray
        The structure that answered each query (``"family/strategy"``).
    bias_bound : int or numpy.ndarray
        Bias bound already included in the intervals (time compression only; else 0).
    """

    t1: Any
    t2: Any
    k: Any
    estimate: Any
    sd: Any
    ci_low: Any
    ci_high: Any
    simultaneous_low: Any
    simultaneous_high: Any
    confidence: float
    strategy: Any
    bias_bound: Any
    description: str


def _family_label(family: str, width: int | None) -> str:
    return f"fixed(W={width})" if family == "fixed" else family


@dataclass(frozen=True, kw_only=True)
class WindowCountsRelease(Release):
    """Private reach / k+ reach counts over time windows (spec ``time_windows.md``).

    ``value`` holds the released curves: ``value["cumulative"]["k=K"]`` (t = 1..T) and
    ``value["fixed(W=W)"]["k=K"]``; arbitrary windows are answered by :meth:`window` and
    :meth:`exactly` (arrays of windows at once), or :meth:`answer_windows` for arrays of
    ``(t1, t2, k)``. Ask many windows per call: answers are vectorized, and node noise once
    drawn is cached, so batches are far faster than one call per window.
    ``mechanism_params["strategies"]`` records the structure chosen for each (family, k) with
    the predicted RMSE of every candidate.

    The private state (secret noise key and exact summaries of the event log — per (family,
    k) histograms and weighted point sets, never the log itself — needed to answer further
    windows) lives in ``_state``; it is not part of :meth:`to_dict` / :meth:`to_json`.
    :meth:`save` writes it to a file that must be protected like the raw data.
    """

    horizon: int
    level: str
    k_values: tuple[int, ...]
    windows: tuple[Any, ...]
    time_axis: Mapping[str, Any] = field(default_factory=dict)
    _state: Any = field(default=None, repr=False, compare=False)

    @property
    def n_dropped(self) -> int:
        """Events dropped as out of range (curator-side fact, not differentially private)."""
        return int(self._state.build_args["n_dropped"])

    @property
    def observed_singleton(self) -> bool:
        """Whether the log had at most one event per period (curator-side, not private)."""
        return bool(self._state.observed_singleton)

    # ------------------------------------------------------------------ routing
    def _structures(self, k: int) -> list[Structure]:
        st = self._state
        if k not in self.k_values:
            raise ParameterError(message("k", "WindowCountsRelease", "one of the released "
                                         f"k_values {list(self.k_values)}", k))
        return [s for (fam, kk), s in st.structures.items() if kk == k]

    def _answer(self, t1: Any, t2: Any, k: int, confidence: float, families: list[Structure],
                func: str) -> WindowAnswer:
        conf = check_open_unit(confidence, "confidence", func)
        k = check_int(k, "k", func, minimum=1)
        scalar = np.ndim(t1) == 0 and np.ndim(t2) == 0
        q1, q2 = np.broadcast_arrays(np.atleast_1d(np.asarray(t1)), np.atleast_1d(np.asarray(t2)))
        for name, q in (("t1", q1), ("t2", q2)):
            if q.dtype.kind not in "iu":
                raise ParameterError(message(name, func, "integers", q if q.size < 9 else
                                             q.dtype))
        q1 = q1.astype(np.int64)
        q2 = q2.astype(np.int64)
        T = self.horizon
        bad = (q1 < 1) | (q2 > T) | (q1 > q2)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ParameterError(message("(t1, t2)", func, f"a window with 1 <= t1 <= t2 <= {T}",
                                         (int(q1[i]), int(q2[i]))))
        n = q1.size
        best = np.full(n, -1, dtype=np.int64)
        best_var = np.full(n, np.inf)
        for idx, s in enumerate(families):
            ok = self._state.can_answer(s, q1, q2)
            var = s.variance(q1, q2) + s.bias_bound() ** 2
            take = ok & (var < best_var)
            best[take] = idx
            best_var[take] = var[take]
        if (best < 0).any():
            i = int(np.flatnonzero(best < 0)[0])
            built = sorted({_family_label(s.family, s.width) for s in families})
            raise ParameterError(
                f"window ({int(q1[i])}, {int(q2[i])}) of {func} was not released for k={k}: "
                f"this release was built for {built}; release again with windows=... that "
                "include it (e.g. 'all' for arbitrary windows).")
        est = np.zeros(n, dtype=np.float64)
        sd = np.zeros(n)
        half = np.zeros(n)
        shalf = np.zeros(n)
        bias = np.zeros(n, dtype=np.int64)
        strat = np.empty(n, dtype=object)
        beta = 1.0 - conf
        for idx, s in enumerate(families):
            sel = np.flatnonzero(best == idx)
            if not sel.size:
                continue
            a, b = q1[sel], q2[sel]
            est[sel] = self._state.exact(s, a, b) + s.noise(a, b)
            sd[sel] = np.sqrt(s.variance(a, b))
            bias[sel] = s.bias_bound()
            half[sel] = s.halfwidth(a, b, beta) + s.bias_bound()
            shalf[sel] = s.halfwidth(a, b, beta / self._state.n_family(s)) + s.bias_bound()
            strat[sel] = f"{_family_label(s.family, s.width)}/{s.strategy}"
        if np.all(est == np.rint(est)):  # integer answers unless consistency post-processing
            est = est.astype(np.int64)
        out = {
            "estimate": est, "sd": sd, "ci_low": est - half, "ci_high": est + half,
            "simultaneous_low": est - shalf, "simultaneous_high": est + shalf,
            "strategy": strat, "bias_bound": bias,
        }
        if scalar:
            out = {key: (v[0].item() if isinstance(v[0], np.generic) else v[0])
                   for key, v in out.items()}
            q1o: Any = int(q1[0])
            q2o: Any = int(q2[0])
        else:
            q1o, q2o = q1, q2
        desc = (f"per-query {conf:.0%} interval from the exact noise law (discrete Laplace: "
                "Chernoff bound; discrete Gaussian: sub-Gaussian bound); simultaneous: "
                f"{conf:.0%} for all queries of the answering family (union bound); "
                "intervals include the bias bound of time compression, if any")
        return WindowAnswer(t1=q1o, t2=q2o, k=k, confidence=conf, description=desc, **out)

    # ------------------------------------------------------------------ queries
    def window(self, t1: Any, t2: Any, k: int, *, confidence: float = 0.95) -> WindowAnswer:
        """``f≥k`` of the windows ``[t1, t2]`` (any released family that covers them)."""
        return self._answer(t1, t2, k, confidence, self._structures(k), "window")

    def answer_windows(self, t1: Any, t2: Any, k: Any, *,
                       confidence: float = 0.95) -> WindowAnswer:
        """Batch API: ``f≥k`` of many windows ``[t1[i], t2[i]]`` with their own ``k[i]``.

        ``t1``, ``t2`` and ``k`` are broadcast together (e.g. an ``(n, 3)`` array ``q`` gives
        ``answer_windows(q[:, 0], q[:, 1], q[:, 2])``). Every answer, its sd and its intervals
        equal those of :meth:`window` asked one window at a time (same structure choice, same
        fixed node noise); the queries are only grouped by ``k`` and answered with vectorized
        covers. The returned :class:`WindowAnswer` holds arrays, ``k`` included. Asking any
        number of windows is post-processing of the one release (no further privacy cost).
        """
        func = "answer_windows"
        conf = check_open_unit(confidence, "confidence", func)
        try:
            q1, q2, kk = np.broadcast_arrays(np.atleast_1d(np.asarray(t1)),
                                             np.atleast_1d(np.asarray(t2)),
                                             np.atleast_1d(np.asarray(k)))
        except ValueError as exc:
            raise ParameterError(message("(t1, t2, k)", func, "arrays of one common shape",
                                         (np.shape(t1), np.shape(t2), np.shape(k)))) from exc
        if kk.dtype.kind not in "iu":
            raise ParameterError(message("k", func, "integers", kk if kk.size < 9 else kk.dtype))
        shape = q1.shape
        q1, q2, kk = q1.ravel(), q2.ravel(), kk.ravel().astype(np.int64)
        n = q1.size
        cols = {name: np.zeros(n) for name in ("estimate", "sd", "ci_low", "ci_high",
                                                "simultaneous_low", "simultaneous_high")}
        bias = np.zeros(n, dtype=np.int64)
        strat = np.empty(n, dtype=object)
        integer = True
        desc = ""
        for kv in np.unique(kk).tolist():
            sel = np.flatnonzero(kk == kv)
            a = self.window(q1[sel], q2[sel], int(kv), confidence=conf)
            for name, arr in cols.items():
                arr[sel] = getattr(a, name)
            integer &= np.asarray(a.estimate).dtype.kind in "iu"
            bias[sel] = a.bias_bound
            strat[sel] = a.strategy
            desc = a.description
        est = cols.pop("estimate")
        est_out: Any = est.astype(np.int64) if integer else est
        out = {name: v.reshape(shape) for name, v in cols.items()}
        return WindowAnswer(t1=q1.reshape(shape), t2=q2.reshape(shape), k=kk.reshape(shape),
                            estimate=est_out.reshape(shape), confidence=conf,
                            strategy=strat.reshape(shape), bias_bound=bias.reshape(shape),
                            description=desc, **out)

    def cumulative(self, t: Any, k: int, *, confidence: float = 0.95) -> WindowAnswer:
        """``f≥k(X[1, t])``: cumulative (k+) reach up to period ``t``."""
        fams = self._structures(k)
        return self._answer(np.ones_like(np.asarray(t)), t, k, confidence, fams, "cumulative")

    def fixed(self, t: Any, k: int, *, width: int | None = None,
              confidence: float = 0.95) -> WindowAnswer:
        """``f≥k`` of the rolling window ``[max(1, t−W+1), t]`` for the released width W."""
        widths = [w for w in self.windows if not isinstance(w, str)]
        if width is None:
            if len(widths) != 1:
                raise ParameterError(message("width", "fixed", f"one of {widths} (this release "
                                             "has no single fixed window)", width))
            width = widths[0]
        if width not in widths:
            raise ParameterError(message("width", "fixed", f"a released width {widths}", width))
        tt = np.asarray(t)
        if tt.dtype.kind not in "iu":
            raise ParameterError(message("t", "fixed", "integers", t))
        t1 = np.maximum(1, tt - width + 1)
        fams = [s for s in self._structures(k) if s.family != "fixed" or s.width == width]
        return self._answer(t1, t, k, confidence, fams, "fixed")

    def exactly(self, t1: Any, t2: Any, k: int, *, confidence: float = 0.95) -> WindowAnswer:
        """``f=k = f≥k − f≥k+1`` of ``[t1, t2]`` (spec §3.7); needs ``k`` and ``k+1`` released.

        The interval is the sum of the two half-widths at confidence ``1 − β/2`` each.
        """
        k = check_int(k, "k", "exactly", minimum=1)
        if k + 1 not in self.k_values:
            raise ParameterError(message("k", "exactly", "a k with k and k+1 both in the released "
                                         f"k_values {list(self.k_values)}", k))
        conf = check_open_unit(confidence, "confidence", "exactly")
        c2 = 1 - (1 - conf) / 2
        a = self.window(t1, t2, k, confidence=c2)
        b = self.window(t1, t2, k + 1, confidence=c2)
        est = np.asarray(a.estimate) - np.asarray(b.estimate)
        half = (np.asarray(a.ci_high) - np.asarray(a.estimate)
                + np.asarray(b.ci_high) - np.asarray(b.estimate))
        shalf = (np.asarray(a.simultaneous_high) - np.asarray(a.estimate)
                 + np.asarray(b.simultaneous_high) - np.asarray(b.estimate))
        sd = np.sqrt(np.asarray(a.sd) ** 2 + np.asarray(b.sd) ** 2)

        def pick(v: Any) -> Any:
            return v.item() if isinstance(v, np.ndarray) and v.ndim == 0 else v

        return WindowAnswer(
            t1=a.t1, t2=a.t2, k=k, estimate=pick(est), sd=pick(sd), ci_low=pick(est - half),
            ci_high=pick(est + half), simultaneous_low=pick(est - shalf),
            simultaneous_high=pick(est + shalf), confidence=conf,
            strategy=a.strategy, bias_bound=pick(np.asarray(a.bias_bound) + b.bias_bound),
            description="f=k = f>=k - f>=k+1; intervals are sums of the two intervals, each at "
                        f"{c2:.4f} ({conf:.0%} jointly, union bound)")

    # ------------------------------------------------------------------ curves
    def cumulative_curve(self, k: int, *, clamp: bool = False, monotone: bool = False,
                         confidence: float = 0.95) -> WindowAnswer:
        """Cumulative reach for t = 1..T, optionally clamped at 0 and made non-decreasing.

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
            est = np.rint(est).astype(np.int64)
            ans = _replace_estimate(ans, est)
        return ans

    def fixed_curve(self, k: int, *, width: int | None = None, clamp: bool = False,
                    confidence: float = 0.95) -> WindowAnswer:
        """Rolling-window k+ reach for every window end t = 1..T."""
        ts = np.arange(1, self.horizon + 1)
        ans = self.fixed(ts, k, width=width, confidence=confidence)
        if clamp:
            ans = _replace_estimate(ans, np.maximum(np.asarray(ans.estimate), 0))
        return ans

    def k_table(self, family: str = "cumulative", *, width: int | None = None,
                clamp: bool = True, monotone_in_k: bool = True) -> NDArray[np.int64]:
        """Curves for every released k as rows (``f≥k`` for k in ``k_values``), post-processed.

        ``monotone_in_k`` enforces ``f≥k >= f≥k'`` for ``k < k'`` at every t by isotonic
        regression across k (free post-processing).
        """
        rows = []
        for k in self.k_values:
            if family == "cumulative":
                rows.append(np.asarray(self.cumulative_curve(k).estimate, dtype=np.float64))
            else:
                rows.append(np.asarray(self.fixed_curve(k, width=width).estimate,
                                       dtype=np.float64))
        tab = np.vstack(rows)
        if monotone_in_k and tab.shape[0] > 1:
            from scipy.optimize import isotonic_regression

            for j in range(tab.shape[1]):
                tab[:, j] = isotonic_regression(tab[:, j], increasing=False).x
        if clamp:
            tab = np.maximum(tab, 0.0)
        return np.rint(tab).astype(np.int64)

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write the release **with its private state** (secret key, exact summaries) to ``path``.

        The file (format 2: the summaries of :mod:`dpfreq.windows.summaries`, not the event log)
        lets :meth:`load` answer new windows with identical noise. Whoever holds it can remove
        the noise: protect it like the raw data, never publish it.
        """
        st = self._state
        meta = {"format": SAVE_FORMAT, "public": self.to_dict(), "build": st.build_args,
                "key": st.key.hex(), "summaries": st.summaries.meta()}
        out = Path(path)
        with out.open("wb") as fh:
            np.savez_compressed(fh, **st.summaries.to_arrays(),
                                meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
        return out

    @classmethod
    def load(cls, path: str | Path) -> WindowCountsRelease:
        """Read a release written by :meth:`save`; every answer is identical (same node noise).

        Files without a ``format`` field (written before format 2) hold the event log itself
        (dense item codes and periods); it is reduced to the same summaries here.
        """
        from dpfreq.engines._common import reduce_events
        from dpfreq.engines.base import TimeBuckets
        from dpfreq.windows.counts import _build_release
        from dpfreq.windows.summaries import WindowReducer, WindowSummaries, summary_specs

        with np.load(Path(path)) as data:
            meta = json.loads(bytes(data["meta"]).decode())
            build = dict(meta["build"])
            fmt = int(meta.get("format", 1))
            if fmt == SAVE_FORMAT:
                summaries = WindowSummaries.from_saved(meta["summaries"], data)
            elif fmt == 1:
                horizon = int(build["horizon"])
                specs = summary_specs(build["windows"], build["k_values"])
                red = reduce_events(data["item"], data["time"], buckets=TimeBuckets(horizon),
                                    reducer=WindowReducer(horizon, specs),
                                    drop_out_of_range=False)
                if red.n_out_of_range:
                    raise ParameterError(message("path", "WindowCountsRelease.load", "a file "
                                                 "written by save (periods 1..horizon)",
                                                 f"{red.n_out_of_range} period(s) outside"))
                summaries = WindowSummaries(horizon, specs, red.slots, red.keys, red.weights)
            else:
                raise ParameterError(message("path", "WindowCountsRelease.load", "a file "
                                             f"written by save (format 1 or {SAVE_FORMAT})",
                                             f"format {fmt}"))
        return _build_release(summaries, key=bytes.fromhex(meta["key"]), **build)

    # ------------------------------------------------------------------ plot
    def plot(self, ax: Any = None) -> Any:
        """Cumulative and rolling-window k+ reach with their 95% per-query bands."""
        from dpfreq.plotting import new_axes, plot_band

        ax = new_axes(ax)
        ts = np.arange(1, self.horizon + 1)
        has_cum = "cumulative" in self.windows
        widths = [w for w in self.windows if not isinstance(w, str)]
        for k in self.k_values:
            if has_cum:
                a = self.cumulative_curve(k)
                plot_band(ax, ts, a.estimate, a.ci_low, a.ci_high,
                          label=f"cumulative {k}+ reach")
            for w in widths:
                a = self.fixed_curve(k, width=w)
                plot_band(ax, ts, a.estimate, a.ci_low, a.ci_high,
                          label=f"rolling {w}-period {k}+ reach", linestyle="--")
        ax.set_xlabel("period t")
        ax.set_ylabel("items (noisy)")
        ax.set_title(f"reach over time ({self.level}-level, ε={self.epsilon:g}); 95% bands")
        ax.legend(fontsize="small")
        return ax


def _replace_estimate(ans: WindowAnswer, est: NDArray[Any]) -> WindowAnswer:
    import dataclasses

    return dataclasses.replace(ans, estimate=est)
