"""The private state of a window release and how it answers windows.

Every answer is a deterministic function of noisy measurements: the noisy node counts
``exact node count + η(node)`` of the chosen structure, with the node noise fixed by the
release's secret key (drawn once per node, never redrawn), so any number of queries is
post-processing of one private release. Structures whose answers are integer signed sums of
node counts compute them as ``exact count + Σ ± η(node)`` (the same integer); the others
(least squares, the factorization) take their measurements once and answer from them alone
(:attr:`~dpfreq.windows.structures.base.Structure.measured`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._display import brief, cut, html_table, text_block
from dpfreq._validate import check_confidence, check_int, message
from dpfreq.errors import ParameterError, public_caller
from dpfreq.windows.data.summaries import SummarySpec, WindowSummaries
from dpfreq.windows.noise.overlap import side_by_side
from dpfreq.windows.params import WindowBuild
from dpfreq.windows.structures.chooser import Plan, family_label, make_plan
from dpfreq.windows.structures.protocol import WindowStructure

__all__ = ["WindowAnswer", "WindowState", "band_share", "build_plan", "build_state", "route"]

#: batches of at least this many windows of one structure compute their exact counts and
#: intervals in a helper thread while the node noise is computed (:meth:`WindowState.parts`)
OVERLAP_MIN = 1 << 12

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


@dataclass(frozen=True, kw_only=True, repr=False)
class WindowAnswer:
    """Noisy answers with their intervals (arrays, or scalars for scalar queries).

    Attributes
    ----------
    t1, t2 : int or numpy.ndarray
        The windows ``[t1, t2]`` asked (periods ``1..T``).
    k : int or numpy.ndarray
        The k of ``f≥k`` (an array for :meth:`WindowCountsRelease.answer_windows`).
    estimate : int, float or numpy.ndarray
        The noisy count ``f≥k`` (or ``f=k``) of each window.
    sd : float or numpy.ndarray
        Exact standard deviation of the noise of each answer.
    lower, upper :
        Per-answer interval: each one contains the truth with probability >= ``confidence``.
    band_lower, band_upper :
        Simultaneous band: all the windows of the answer contain the truth at once with
        probability >= ``confidence``, whichever structures answer them (each answering
        structure's band covers its whole family at its share of ``1 − confidence``; trees:
        calibrated on the exact joint noise law, :mod:`dpfreq.windows.structures.bands`; independent
        per-query noise: Šidák; trees too large for the simulation: the union bound).
    confidence : float
        The confidence level of both.
    answered_by : str or numpy.ndarray
        The structure that answered each query (``"family/method"``).
    bias_bound : int or numpy.ndarray
        Bias bound already included in the intervals (time compression only; else 0).
    description : str
        How the intervals were computed.

    Examples
    --------
    >>> from dpfreq.windows import release_window_counts
    >>> rel = release_window_counts(([1, 2], [1, 2]), horizon=2, epsilon=1.0, unit="event",
    ...                             k_values=[1], rng=0, windows=["cumulative"])
    >>> a = rel.cumulative(2, 1)
    >>> a.lower <= a.estimate <= a.upper
    True
    """

    t1: Any
    t2: Any
    k: Any
    estimate: Any
    sd: Any
    lower: Any
    upper: Any
    band_lower: Any
    band_upper: Any
    confidence: float
    answered_by: Any
    bias_bound: Any
    description: str

    def _display_rows(self) -> list[tuple[str, str]]:
        if np.ndim(self.estimate) == 0:
            rows = [("window", f"[{self.t1}, {self.t2}], k={self.k}"),
                    ("estimate", f"{brief(self.estimate)} in [{brief(self.lower)}, "
                                 f"{brief(self.upper)}] (band [{brief(self.band_lower)}, "
                                 f"{brief(self.band_upper)}])"),
                    ("answered by", str(self.answered_by))]
        else:
            rows = [("windows", f"{np.size(self.estimate):,} answers; t1 {brief(self.t1)}, "
                                f"t2 {brief(self.t2)}"),
                    ("estimate", brief(self.estimate)),
                    ("lower, upper", f"{brief(self.lower)}; {brief(self.upper)}")]
        return [*rows, ("confidence", f"{self.confidence:.6g}"),
                ("how", cut(self.description, 60) + " (full text: .description)")]

    def __repr__(self) -> str:
        """A few lines: the window(s), estimates, intervals and confidence (not the arrays)."""
        return text_block("WindowAnswer", self._display_rows())

    def _repr_html_(self) -> str:
        """The same summary as a small HTML table (shown by notebooks)."""
        return html_table("WindowAnswer", self._display_rows())


def _windows(t1: Any, t2: Any, horizon: int) -> tuple[IntArray, IntArray]:
    try:
        q1, q2 = np.broadcast_arrays(np.atleast_1d(np.asarray(t1)),
                                     np.atleast_1d(np.asarray(t2)))
    except ValueError as exc:
        raise ParameterError(message("(t1, t2)", "arrays of one common shape",
                                     (np.shape(t1), np.shape(t2)))) from exc
    for name, q in (("t1", q1), ("t2", q2)):
        if q.dtype.kind not in "iu":
            raise ParameterError(message(name, "integers", q if q.size < 9 else q.dtype))
    bad = (q1 < 1) | (q2 > horizon) | (q1 > q2)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ParameterError(message("(t1, t2)", f"a window with 1 <= t1 <= t2 <= "
                                     f"{horizon}", (int(q1.flat[i]), int(q2.flat[i]))))
    return q1.astype(np.int64).ravel(), q2.astype(np.int64).ravel()


def route(families: list[WindowStructure], q1: IntArray, q2: IntArray) -> IntArray:
    """Index of the structure answering each window ``[q1, q2]``: the smallest
    ``variance + bias²`` among those that can answer it (−1 where none can)."""
    best = np.full(q1.size, -1, dtype=np.int64)
    best_var = np.full(q1.size, np.inf)
    for idx, s in enumerate(families):
        ok = WindowState.can_answer(s, q1, q2)
        var = s.variance(q1, q2) + s.bias_bound() ** 2
        take = ok & (var < best_var)
        best[take] = idx
        best_var[take] = var[take]
    return best


def band_share(beta: float, best: IntArray) -> float:
    """Each answering structure's share of the band's ``β``: every structure's band holds for
    its whole family with probability ``>= 1 − β/J`` when ``J`` structures answer, so all of
    them hold at once with probability ``>= 1 − β`` (union bound over the ``J``)."""
    return beta / max(1, np.unique(best[best >= 0]).size)


@dataclass
class WindowState:
    """Private state of a release: secret key, exact summaries of the log (never the log
    itself), exact oracles built from them, the calibrated structures, the build parameters,
    and (a group of a grouped release) the coverage sentence every answer's description ends
    with (:func:`dpfreq.grouped.capping.capping_statement`: what the intervals cover)."""

    key: bytes
    summaries: WindowSummaries
    horizon: int
    build: WindowBuild
    plan: Plan
    structures: dict[tuple[str, int], WindowStructure] = field(default_factory=dict)
    oracles: dict[tuple[str, int], Any] = field(default_factory=dict)
    coverage: str | None = None

    @staticmethod
    def can_answer(s: WindowStructure, t1: IntArray, t2: IntArray) -> NDArray[np.bool_]:
        if s.family == "cumulative":
            return t1 == 1
        if s.family == "total":
            return (t1 == 1) & (t2 == s.horizon)
        if s.family == "rolling":
            return t1 == np.maximum(1, t2 - int(s.width or 1) + 1)
        return np.ones(t1.shape, dtype=np.bool_)

    def exact(self, s: WindowStructure, t1: IntArray, t2: IntArray) -> IntArray:
        if s.family in ("cumulative", "total"):
            counts = self.oracles[("cumulative", s.k)]  # items with k-th occurrence <= t
            return np.asarray(counts[t2], dtype=np.int64)
        if s.family == "rolling":
            out: IntArray = self.oracles[(f"rolling{s.width}", s.k)].exact(t2)
            return out
        dom = self.oracles[("all", s.k)]
        t1, t2 = s.exact_window(t1, t2)  # time compression counts whole groups
        res: IntArray = dom.count(t1 - 1, t2)
        return res

    def parts(self, s: WindowStructure, t1: IntArray, t2: IntArray, beta: float,
              beta_band: float) -> tuple[NDArray[Any], FloatArray, FloatArray, FloatArray]:
        """Estimates, sds, half-widths and band half-widths (bias bound and floating-point
        allowance included) of windows of one structure.

        A measured structure answers from its noisy measurements alone
        (:meth:`~dpfreq.windows.structures.base.Structure.estimates`). Any other answers
        ``exact + Σ ± node noise`` in integers — the same integer as the signed sum of its
        noisy node counts. In a batch of at least :data:`OVERLAP_MIN` such windows everything
        but the node noise runs in a helper thread while the noise is computed
        (:func:`~dpfreq.windows.noise.overlap.side_by_side`): the exact counts and most of the noise
        run without the GIL, so on a machine with a free core the two overlap (the helper only
        reads the oracle and fills the structure's interval caches; the node noise stays in
        this thread)."""
        def public() -> tuple[FloatArray, FloatArray, FloatArray]:
            bias = s.bias_bound()
            return (np.sqrt(s.variance(t1, t2)), s.halfwidth(t1, t2, beta) + bias,
                    s.band_halfwidth(t1, t2, beta_band) + bias)

        if s.measured:
            sd, half, shalf = public()
            allow = s.allowance(t1, t2)
            return s.estimates(t1, t2), sd, half + allow, shalf + allow
        if t1.size < OVERLAP_MIN:
            sd, half, shalf = public()
            return self.exact(s, t1, t2) + s.noise(t1, t2), sd, half, shalf

        def exact_and_public() -> tuple[IntArray, tuple[FloatArray, FloatArray, FloatArray]]:
            return self.exact(s, t1, t2), public()

        (exact, (sd, half, shalf)), noise = side_by_side(exact_and_public,
                                                         lambda: s.noise(t1, t2))
        return exact + noise, sd, half, shalf

    def structures_for(self, k: int) -> list[WindowStructure]:
        k = check_int(k, "k", minimum=1)
        if k not in self.build.k_values:
            raise ParameterError(message("k", "one of the released k_values "
                                         f"{list(self.build.k_values)}", k))
        return [s for (_, kk), s in self.structures.items() if kk == k]

    def _route(self, q1: IntArray, q2: IntArray, k: int,
               families: list[WindowStructure]) -> IntArray:
        """Index of the answering structure per query (smallest error among those that can)."""
        func = public_caller()
        best = route(families, q1, q2)
        if (best < 0).any():
            i = int(np.flatnonzero(best < 0)[0])
            built = sorted({family_label(s.family, s.width) for s in families})
            raise ParameterError(
                f"window ({int(q1[i])}, {int(q2[i])}) of {func} was not released for k={k}: "
                f"this release was built for {built}; release again with windows=... that "
                "include it (e.g. 'all' for arbitrary windows).")
        return best

    def answer(self, t1: Any, t2: Any, k: int, confidence: float,
               families: list[WindowStructure], *, band_beta: float | None = None
               ) -> WindowAnswer:
        """Answers of the windows ``[t1, t2]`` for one k from the given structures.

        The per-answer interval of each window holds with probability ``>= confidence``. The
        band holds for every window asked at once, whichever structures answer them: each
        answering structure's band covers its whole family at ``β/J`` (:func:`band_share`, the
        ``J`` structures answering the batch), so a batch answered by one structure gets that
        structure's family band, and a curve answered by two (a cumulative curve whose last
        period the ``total`` family answers) splits ``β`` between them. ``band_beta`` (default
        ``1 − confidence``) is the band's total miss probability, for callers that split it
        further (several k at once).
        """
        conf = check_confidence(confidence, "confidence")
        scalar = np.ndim(t1) == 0 and np.ndim(t2) == 0
        shape = np.broadcast_shapes(np.shape(t1), np.shape(t2)) if not scalar else ()
        q1, q2 = _windows(t1, t2, self.horizon)
        best = self._route(q1, q2, k, families)
        n = q1.size
        est = np.zeros(n, dtype=np.float64)
        sd, half, shalf = np.zeros(n), np.zeros(n), np.zeros(n)
        bias = np.zeros(n, dtype=np.int64)
        answered_by = np.empty(n, dtype=object)
        beta = 1.0 - conf
        beta_band = band_share(beta if band_beta is None else band_beta, best)
        for idx, s in enumerate(families):
            sel = np.flatnonzero(best == idx)
            if not sel.size:
                continue
            a, b = q1[sel], q2[sel]
            est[sel], sd[sel], half[sel], shalf[sel] = self.parts(s, a, b, beta, beta_band)
            bias[sel] = s.bias_bound()
            answered_by[sel] = f"{family_label(s.family, s.width)}/{s.method}"
        out: dict[str, Any] = {"estimate": est.astype(np.int64) if np.all(est == np.rint(est))
                               else est}
        out.update(sd=sd, lower=est - half, upper=est + half, band_lower=est - shalf,
                   band_upper=est + shalf, answered_by=answered_by, bias_bound=bias)
        if scalar:
            out = {name: (v[0].item() if isinstance(v[0], np.generic) else v[0])
                   for name, v in out.items()}
            q1o: Any = int(q1[0])
            q2o: Any = int(q2[0])
        else:
            out = {name: v.reshape(shape) for name, v in out.items()}
            q1o, q2o = q1.reshape(shape), q2.reshape(shape)
        desc = (f"per-answer {conf:.0%} interval from the exact noise law (certified quantile "
                "of the sum of the answer's node noises; consistent tree estimates: grid "
                "convolution with its rounding error bounded; a tail bound only where the law "
                f"is too long to compute); band: {conf:.0%} for all the windows asked at once "
                "(each answering structure's band covers its whole family at its share of "
                "the miss probability; Šidák over independent per-query noise; "
                "trees within the simulation's size limit: calibrated on 1,000 "
                "draws of their exact joint noise law, an exact finite-sample level; "
                "otherwise the union bound); "
                "intervals include the bias bound of time compression, if any")
        if self.coverage is not None:
            desc += f". Coverage: {self.coverage}"
        return WindowAnswer(t1=q1o, t2=q2o, k=k, confidence=conf, description=desc, **out)


def build_plan(build: WindowBuild, rho: float | None = None) -> Plan:
    """The plan of a build (public parameters only; refuses what cannot be calibrated;
    ``rho``: the zCDP share of a group whose call composes its groups in zCDP)."""
    return make_plan(build.plan_request(rho))


def build_state(summaries: WindowSummaries, *, key: bytes, build: WindowBuild,
                measurements: Mapping[tuple[str, int], IntArray] | None = None) -> WindowState:
    """Plan (public parameters only), attach the key and build the exact oracles.

    Deterministic given the key and the build parameters: the release and
    :meth:`~dpfreq.windows.WindowCountsRelease.load` both build their state here. Structure
    ``(label, k)`` draws its noise under the name ``(label, k, tree index)``
    (:mod:`dpfreq.windows.noise.keyed`): distinct names, independent sub-keys.
    """
    return attach_state(summaries, key=key, build=build, plan=build_plan(build),
                        measurements=measurements)


def attach_state(summaries: WindowSummaries, *, key: bytes, build: WindowBuild,
                 plan: Plan, measurements: Mapping[tuple[str, int], IntArray] | None = None
                 ) -> WindowState:
    """The state for an already computed plan (see :func:`build_state`). ``measurements``:
    the stored noisy measurements of a saved release, which its eagerly measured structures
    answer from (instead of measuring again)."""
    state = WindowState(key=key, summaries=summaries, horizon=build.horizon, build=build,
                        plan=plan)
    for (label, k), s in plan.structures.items():
        s.attach(key, (label, k))
        state.structures[(label, k)] = s
        if s.family in ("cumulative", "total"):
            state.oracles[("cumulative", k)] = summaries.oracle(SummarySpec("cumulative", k))
        elif s.family == "rolling":
            state.oracles[(f"rolling{s.width}", k)] = summaries.oracle(
                SummarySpec("rolling", k, int(s.width or 1)))
        else:
            state.oracles[("all", k)] = summaries.oracle(SummarySpec("all", k))
    stored = measurements or {}
    for name, s in state.structures.items():
        if name in stored:  # a saved release: post-processing of its stored measurement
            s.load_measurement(stored[name])
        elif s.measured:  # the noisy measurements, from the exact counts (functools.partial)
            s.measure(functools.partial(state.exact, s))
    return state
