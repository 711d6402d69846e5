"""Noise structures for each query family and the closed-form variance used to choose among them.

After Ghazi, Kumar, Manurangsi and Nelson (2023). Every structure answers a query as
``exact answer + Σ_{nodes in the cover} ± η(node)`` with exact discrete-Laplace node noise that
is a deterministic function of the release's secret key and the node id (drawn once, never
redrawn). Its variance is ``(#cover nodes) · Var[DLap(γ)]`` exactly, known from public
parameters only, which is what ``strategy="auto"`` compares (the mean variance over the family's
queries; for time compression the bias bound is added).

Structures and calibration (``ε_s`` = the budget of this (family, k) structure):

=================  =======================================  ==============================
strategy           structure                                node noise γ
=================  =======================================  ==============================
cumulative/simple  one noise per period, running sums       ``ε_s/Δ``
cumulative/tree    one ``B``-ary tree over ``T``            ``ε_s/(Δ·L_{T,B})``
cumulative/per_query  one noise per t                       ``ε_s/(Δ_q·T)``
fixed/blocks       2 trees per block over ``W``             event ``(ε_s/2)/(4k·L_W)``;
                                                            item ``ε_B/(4k·L_W)``, ε_B=ε_s/B
fixed/single       2 trees over ``T+1`` (event only)        ``ε_s/((4k+2)·L_T)``
fixed/per_query    one noise per window                     event ``ε_s/W``; item ``ε_s/T``
all/tree2d         2 product trees (event only)             ``ε_s/(4k·L²)``
all/per_start      one cumulative tree per start            ``ε_T/(2·L_T)``, ε_T = ε_s/T
all/per_query      one noise per window                     ``ε_s/(max windows per event)``
all/compressed     per_start on groups of s steps           as per_start on ``⌈T/s⌉``
=================  =======================================  ==============================

Cumulative structures count one point per item, the period of its k-th occurrence, so ``Δ``
(points changed by one neighbour) is 1 at ``unit="item"`` (add or remove one item: its point
appears or vanishes) and 2 at ``unit="event"`` (adding or removing one event moves the point
from one period to another, or removes it). ``L_{T,B} = ⌈log_B T⌉ + 1`` levels: every point lies
in one node per level. ``per_query``: the answers at ``t >= p`` all change, ``Δ_q = 1``.
``unit="item_replace"`` (replace one item's rows) is calibrated at twice the ``item``
sensitivity in every family (a replacement is a removal and an addition).

Domains hold only the point values a query can count (never-counted points
may be dropped, which can only lower the sensitivity): cumulative values ``t−1 ∈ [0, T−1]``;
block values ``a−W, c−W`` restricted to ``[0, W−1]`` (queries ``x = t_loc − W <= W−1``);
single-instance values ``[0, T]``; 2d points ``(x, y−1) ∈ [0, T−1]²`` (queries ``x <= t1−1``,
``y <= t2``, so points with ``x = T`` or ``y = T+1`` are never counted).

With δ > 0 at item level, the per-block / per-start budget uses the better of basic and advanced
composition (each piece is pure ε_0-DP; ``ε_0√(2m ln(1/δ_s)) + mε_0(e^{ε_0}−1) <= ε_s``).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.errors import ParameterError
from dpfreq.noise import (
    discrete_laplace_gamma,
    discrete_laplace_variance,
    epsilon_to_fraction,
    sample_discrete_laplace,
)
from dpfreq.windows.band import band_multiplier, band_scale, plan_multiplier, prefix_layout
from dpfreq.windows.counters import layer_layout, layer_signed_cover
from dpfreq.windows.lazy_noise import (
    KeyedDiscreteGaussian,
    KeyedDiscreteLaplace,
    discrete_gaussian_variance,
    eager_generator,
    gaussian_sigma2,
    structure_name,
)
from dpfreq.windows.noise_law import (
    TAIL,
    sum_quantile,
    tail_radius,
    weighted_quantile,
    weighted_sum_law,
)
from dpfreq.windows.tree import (
    Tree1D,
    Tree2DNoise,
    domain_size,
    dominance_noise_sum,
    popcount,
    prefix_cover,
)
from dpfreq.windows.weights import (
    Layout,
    consistent_laws,
    layout_weights,
    row_squares,
    weighted_log_mgf,
)

__all__ = [
    "STRATEGIES",
    "Structure",
    "build_structure",
    "composed_epsilon",
    "sum_halfwidth",
]

IntArray = NDArray[np.int64]

#: the cumulative tree is post-processed by the least-squares consistency pass (Hay et al.
#: 2010) when its domain is at most this size (the exact variance needs the dense D × 2D
#: weight matrix)
CONSISTENCY_MAX_DOMAIN = 1024

#: a cumulative tree is post-processed by least squares when its dense prefix-weight matrix
#: (``T × blocks``) has at most this many entries (a binary tree at ``T = 362``; the plan
#: solves one T × T system per candidate layout)
CONSISTENCY_MAX_WEIGHTS = 1 << 18

#: branching factors a cumulative tree may use (``auto`` keeps the best for ``T``)
BRANCHINGS = tuple(range(2, 17))

STRATEGIES = {
    "cumulative": ("simple", "tree", "per_query"),
    "total": ("per_query",),
    "fixed": ("blocks", "single", "per_query"),
    "all": ("tree2d", "per_start", "per_query", "compressed"),
}


def composed_epsilon(eps: Fraction, pieces: int, delta: float) -> Fraction:
    """Per-piece budget for ``pieces`` pure-DP runs composed to (ε, δ): basic or advanced."""
    basic = eps / pieces
    if delta <= 0 or pieces == 1:
        return basic
    e = float(eps)
    log_term = math.log(1.0 / delta)

    def total(e0: float) -> float:
        return e0 * math.sqrt(2 * pieces * log_term) + pieces * e0 * math.expm1(e0)

    lo, hi = 0.0, e
    for _ in range(100):
        mid = (lo + hi) / 2
        if total(mid) <= e:
            lo = mid
        else:
            hi = mid
    adv = epsilon_to_fraction(lo) if lo > 0 else Fraction(0)
    return max(basic, adv)


def sum_halfwidth(nodes: Any, gamma: Fraction, beta: float) -> NDArray[np.float64]:
    """Smallest integer ``x`` with ``Pr[|Σ_{m} Z_i| > x] <= β`` from the exact law of the sum.

    ``Z_i`` i.i.d. ``DLap(γ)``; the law of the sum of ``m`` of them is the ``m``-fold
    convolution of the node pmf (:func:`dpfreq.windows.noise_law.sum_quantile`, which certifies
    the quantile with the truncated mass counted against it, and falls back to a Chernoff bound
    only when the support is too long to compute).
    """
    return sum_quantile(nodes, beta, gamma=gamma)


def _eager_noise(gamma: Fraction, size: int, key: bytes, structure: Any) -> IntArray:
    return sample_discrete_laplace(gamma, size, rng=eager_generator(key, structure))


class Structure:
    """One released structure for (family, k): answers ``noise`` and ``nodes`` per query.

    ``family`` is ``"cumulative"``, ``"fixed"`` (with ``width``) or ``"all"``. Queries are given
    as arrays ``t1, t2`` (cumulative: ``t1 = 1``; fixed: ``t1 = max(1, t2−W+1)``).
    """

    def __init__(self, family: str, strategy: str, k: int, horizon: int, level: str,
                 eps: Fraction, delta: float, width: int | None = None,
                 group_size: int = 1, *, rho: float | None = None,
                 noise_kind: str = "laplace", branching: int = 2, top: bool = False) -> None:
        self.family, self.strategy, self.k = family, strategy, k
        # ``item_replace`` is laid out as ``item`` at twice the sensitivity (_calibrate_exact)
        self.unit = level
        self.level = "item" if level == "item_replace" else level
        self.horizon, self.width = horizon, width
        self.group_size = group_size
        self.branching = branching if strategy == "tree" else 2
        self.top = top if strategy == "tree" else True
        self.eps, self.delta, self.rho = eps, delta, rho
        if noise_kind == "gaussian" and rho is None:
            raise ValueError("Gaussian noise needs a zCDP budget rho")
        self.noise_kind = noise_kind
        self.sigma2 = 0
        self.gamma, self.detail = self._calibrate()
        self.consistent = (strategy in ("tree", "per_start", "compressed")
                           and 0 < self.detail["domain"] <= CONSISTENCY_MAX_DOMAIN)
        if strategy == "tree" and self.detail["domain"]:
            size = self.detail["domain"] * self.detail["tree_nodes"]
            self.consistent = size <= CONSISTENCY_MAX_WEIGHTS
        self.layout: Layout = (("layer", horizon, self.branching, self.top)
                               if strategy == "tree" else ("heap", self.detail.get("domain", 0)))
        self.detail["consistency"] = self.consistent
        self._cons_noise: NDArray[np.float64] | None = None
        self._cons_starts: dict[int, NDArray[np.float64]] = {}
        self._key: bytes | None = None
        self._name: tuple[str | int, ...] = ()
        self._band_c: dict[float, float | None] = {}
        self._impl: Any = None

    # ---------------------------------------------------------------- calibration (public only)
    def _shape(self) -> tuple[int, int, float, dict[str, Any]]:
        """(pieces composed sequentially, ℓ1 and ℓ2 sensitivity per piece, layout details)."""
        t, k = self.horizon, self.k
        fam, strat = self.family, self.strategy
        # cumulative: one point per item (its k-th occurrence); an item adds or removes it,
        # an event or a replacement moves it (or adds or removes it)
        cum_pts = 1 if self.unit == "item" else 2
        if strat in ("simple", "tree"):
            sizes, offsets = ((1,), np.array([0, t])) if strat == "simple" else \
                layer_layout(t, self.branching, self.top)
            lv = len(sizes)
            # a moved point keeps the blocks holding both periods: at least the top one
            # when it spans all T periods
            l1 = lv if cum_pts == 1 else (max(lv, 2 * lv - 2) if sizes[-1] >= t else 2 * lv)
            detail: dict[str, Any] = {"domain": t, "levels": lv, "Delta": cum_pts,
                                      "pieces": 1, "tree_nodes": int(offsets[-1])}
            if strat == "tree":
                detail.update(branching=self.branching, top_level=self.top,
                              block_sizes=list(sizes))
            return 1, l1, math.sqrt(l1), detail
        if strat in ("tree", "blocks", "single", "tree2d", "per_start", "compressed"):
            if strat == "blocks":
                w = int(self.width or 1)
                d, delta_pts = domain_size(w), 4 * k
                pieces = 2 if self.level == "event" else t // w + 1
            elif strat == "single":
                d, delta_pts, pieces = domain_size(t + 1), 4 * k + 2, 1
            elif strat == "tree2d":
                d, delta_pts, pieces = domain_size(t), 4 * k, 1
            else:
                pieces = -(-t // self.group_size)
                d, delta_pts = domain_size(pieces), 2
            lv = d.bit_length()
            per_point = lv * lv if strat == "tree2d" else lv
            detail = {"domain": d, "levels": lv, "Delta": delta_pts, "pieces": pieces}
            if strat == "blocks":
                detail["blocks"] = t // int(self.width or 1) + 1
            if strat in ("per_start", "compressed"):
                detail["group_size"] = self.group_size
            return pieces, delta_pts * per_point, delta_pts * math.sqrt(per_point), detail
        if fam == "total":  # one window: one item, event or replacement changes it by 1
            windows = 1
        elif fam == "cumulative":
            windows = t
        elif fam == "fixed":
            windows = int(self.width or 1) if self.level == "event" else t
        elif self.level == "event":
            half = (t + 1) // 2
            windows = half * (t - half + 1)
        else:
            windows = t * (t + 1) // 2
        return 1, windows, math.sqrt(windows), {"windows_per_unit": windows, "pieces": 1}

    def _calibrate(self) -> tuple[Fraction, dict[str, Any]]:
        """(γ, details); γ = 0 (or σ² = 0 for Gaussian noise) when the budget is too small to
        calibrate exactly: such a structure is never chosen (:mod:`dpfreq.windows.plan`)."""
        try:
            return self._calibrate_exact()
        except ParameterError:
            return Fraction(0), {"domain": 0, "unusable": "budget too small to calibrate"}

    def _calibrate_exact(self) -> tuple[Fraction, dict[str, Any]]:
        pieces, l1, l2, detail = self._shape()
        if self.unit == "item_replace" and self.family not in ("cumulative", "total"):
            # a replacement is a removal and an addition (cumulative: exact in _shape)
            l1, l2 = 2 * l1, 2 * l2
        detail["l1_sensitivity"] = l1
        if self.rho is None:
            if pieces == 1:
                e_piece = self.eps
            elif self.strategy == "blocks" and self.level == "event":
                e_piece = self.eps / 2  # two parity groups, parallel composition inside each
            else:
                e_piece = composed_epsilon(self.eps, pieces, self.delta)
            detail["epsilon_piece"] = str(e_piece)
            detail["accounting"] = "pure epsilon-DP"
            return discrete_laplace_gamma(e_piece, l1), detail
        rho_piece = self.rho / pieces
        detail["rho_piece"] = rho_piece
        detail["accounting"] = "zCDP"
        if self.noise_kind == "laplace":
            e_piece = epsilon_to_fraction(math.sqrt(2 * rho_piece))  # ε-DP ⇒ ε²/2-zCDP
            detail["epsilon_piece"] = str(e_piece)
            return discrete_laplace_gamma(e_piece, l1), detail
        target = l2 * l2 / (2 * rho_piece)
        self.sigma2 = gaussian_sigma2(target)[0] if target < 2.0**60 else 0
        detail["l2_sensitivity"] = l2
        detail["sigma2"] = self.sigma2
        return Fraction(0), detail

    @property
    def node_variance(self) -> float:
        if self.noise_kind == "gaussian":
            return discrete_gaussian_variance(self.sigma2)
        return discrete_laplace_variance(self.gamma)

    def weights(self) -> NDArray[np.float64]:
        """Least-squares prefix weights of the consistent tree (``T × nodes``)."""
        return layout_weights(self.layout)

    def _prefix_index(self, t1: Any, t2: Any) -> IntArray:
        """Prefix value ``x`` asked of the (cumulative or per-start) tree for each query."""
        q1 = np.asarray(t1, dtype=np.int64)
        q2 = np.asarray(t2, dtype=np.int64)
        if self.strategy == "tree":
            return q2 - 1 + 0 * q1
        g1, g2 = self.query_map(q1, q2)
        return g2 - g1

    def variance(self, t1: Any, t2: Any) -> NDArray[np.float64]:
        """Exact noise variance of each answer (public: depends on the query only)."""
        if self.consistent:
            rowsq = row_squares(self.layout)
            x = self._prefix_index(t1, t2)
            var: NDArray[np.float64] = rowsq[x] * self.node_variance
            return var
        plain: NDArray[np.float64] = self.nodes(t1, t2).astype(np.float64) * self.node_variance
        return plain

    def halfwidth(self, t1: Any, t2: Any, beta: float, *, exact: bool = True
                  ) -> NDArray[np.float64]:
        """``x`` with ``Pr[|noise of the answer| > x] <= β`` for each query.

        Without consistency post-processing the answer's noise is a sum of i.i.d. node noises
        and ``x`` is the certified quantile of its exact law (the convolution of the node pmf,
        :func:`dpfreq.windows.noise_law.sum_quantile`). Consistent estimates are a linear
        combination ``Σ a_v Z_v`` with non-integer weights: the certified grid convolution of
        :func:`dpfreq.windows.noise_law.weighted_sum_law` (computed once per prefix and law),
        whose support radius comes from the tail bound — a Chernoff bound for discrete Laplace
        (the moment generating function is the product of ``M(λ a_v)``), the σ-sub-Gaussian
        tail for discrete Gaussian (Canonne–Kamath–Steinke 2020), ``x = √(2 σ² Σa² ln(2/β))``.
        The smaller of the two valid values is returned.

        ``exact=False`` gives the tail bounds alone (never smaller than the exact value; cheap,
        used by :meth:`~dpfreq.windows.WindowCountsPlan.epsilon_for` to bracket its search).
        """
        if not self.consistent:
            sigma2 = int(self.sigma2) if self.noise_kind == "gaussian" else None
            gamma = None if sigma2 is not None else self.gamma
            if not exact:
                nodes = self.nodes(t1, t2)
                out_t = np.zeros(nodes.shape, dtype=np.float64)
                for m in np.unique(nodes).tolist():
                    if m > 0:
                        out_t[nodes == m] = tail_radius(m, beta, gamma=gamma, sigma2=sigma2)
                return out_t
            if sigma2 is not None:
                return sum_quantile(self.nodes(t1, t2), beta, sigma2=sigma2)
            return sum_halfwidth(self.nodes(t1, t2), self.gamma, beta)
        xs, inv = np.unique(self._prefix_index(t1, t2), return_inverse=True)
        int(self.detail["domain"])
        if self.noise_kind == "gaussian":
            proxy = row_squares(self.layout) * self.sigma2
            bound = np.sqrt(2.0 * proxy * math.log(2.0 / beta))
            radius = np.sqrt(2.0 * proxy * math.log(2.0 / TAIL))
        else:
            lam, log_m = weighted_log_mgf(self.layout, self.gamma.numerator,
                                           self.gamma.denominator)
            bound = np.min((log_m + math.log(2.0 / beta)) / lam, axis=1)
            radius = np.min((log_m + math.log(2.0 / TAIL)) / lam, axis=1)
        gamma = None if self.noise_kind == "gaussian" else self.gamma
        sigma2 = int(self.sigma2) if self.noise_kind == "gaussian" else None
        vals = bound[xs]
        if not exact:
            return vals[inv].reshape(np.shape(inv))
        laws = consistent_laws(self.layout, gamma, sigma2)
        for i, x in enumerate(xs.tolist()):
            if x not in laws:
                laws[x] = weighted_sum_law(self.weights()[x], float(radius[x]), gamma=gamma,
                                           sigma2=sigma2)
            law = laws[x]
            q = weighted_quantile(law, beta) if law is not None else None
            if q is not None:
                vals[i] = min(vals[i], q)
        out: NDArray[np.float64] = vals[inv].reshape(np.shape(inv))
        return out

    @property
    def n_family(self) -> int:
        """Number of windows in the structure's family (``T`` for a curve, all ``T(T+1)/2``)."""
        t = self.horizon
        if self.family == "total":
            return 1
        return t * (t + 1) // 2 if self.family == "all" else t

    def band_halfwidth(self, t1: Any, t2: Any, beta: float, *,
                       exact: bool = True) -> NDArray[np.float64]:
        """Half-widths of a band holding for all :attr:`n_family` windows of the family at once
        with probability ``>= 1 − β`` (noise only; the caller adds the bias bound). Trees:
        ``max(c, 1)·h`` with ``h`` the half-width at ``β`` floored at one item and ``c``
        calibrated on the exact joint noise law (:mod:`dpfreq.windows.band`; keyed by the
        release's secret once attached, by a public key in a plan). ``per_query``: the
        half-width at Šidák's ``1 − (1 − β)^{1/n}`` (independent answers); trees beyond the
        simulation's limits: at ``β/n``.
        ``exact=False``: the tail bounds at the union bound (cheap, never smaller).
        """
        if exact and beta not in self._band_c:
            self._band_c[beta] = (
                band_multiplier(self, beta, self._key, self._name) if self._key is not None
                else plan_multiplier(self, beta, (self.family, self.strategy, self.horizon,
                                                  self.unit, str(self.eps),
                                                  int(self.width or 0), self.group_size,
                                                  self.branching, int(self.top))))
        c = self._band_c.get(beta) if exact else None
        if c is not None:
            return max(c, 1.0) * band_scale(self.halfwidth(t1, t2, beta))
        n = self.n_family
        level = -math.expm1(math.log1p(-beta) / n) if self.strategy == "per_query" else beta / n
        return self.halfwidth(t1, t2, level, exact=exact)

    def _noise_source(self, key: bytes, name: Any) -> Any:
        if self.noise_kind == "gaussian":
            return KeyedDiscreteGaussian(key, name, self.sigma2)
        return KeyedDiscreteLaplace(key, name, self.gamma)

    # ---------------------------------------------------------------- public-only predictions
    def query_map(self, t1: IntArray, t2: IntArray) -> tuple[IntArray, IntArray]:
        """The window actually asked of the mechanism (time compression widens it)."""
        if self.strategy != "compressed":
            return t1, t2
        s = self.group_size
        return -(-t1 // s), -(-t2 // s)

    def nodes(self, t1: Any, t2: Any) -> IntArray:
        """Number of noise terms in each answer (public: depends on the query only)."""
        q1 = np.asarray(t1, dtype=np.int64)
        q2 = np.asarray(t2, dtype=np.int64)
        strat = self.strategy
        if strat == "per_query":
            return np.ones(np.broadcast(q1, q2).shape, dtype=np.int64)
        if strat == "simple":  # one leaf noise per period of the prefix
            return q2 + 0 * q1
        if strat == "tree":
            return sum(used.astype(np.int64) for used, _, _ in self.cover(q2 - 1)) + 0 * q1
        if strat == "blocks":
            w = int(self.width or 1)
            b = q2 // w
            x = q2 - (b - 1) * w - w
            return 2 * popcount(x + 1) + 0 * q1
        if strat == "single":
            return 2 * popcount(q2 + 1) + 0 * q1
        if strat == "tree2d":
            return 2 * popcount(q1) * popcount(q2)
        g1, g2 = self.query_map(q1, q2)
        return popcount(g2 - g1 + 1)

    def cover(self, x: Any) -> list[tuple[NDArray[np.bool_], IntArray, IntArray]]:
        """Signed block covers of the prefixes ``{p <= x}`` of a cumulative tree without
        least squares (:func:`~dpfreq.windows.counters.layer_signed_cover`)."""
        return layer_signed_cover(x, self.horizon, self.branching, self.top)

    def bias_bound(self) -> int:
        """Bound on |E[answer] − truth| (time compression only, singleton logs: 2(s−1))."""
        return 2 * (self.group_size - 1) if self.strategy == "compressed" else 0

    def family_queries(self) -> tuple[IntArray, IntArray]:
        """``(t1, t2)`` of every window of the family (:attr:`n_family` of them)."""
        t = self.horizon
        ts = np.arange(1, t + 1, dtype=np.int64)
        if self.family == "all":
            a, b = np.triu_indices(t)
            return a.astype(np.int64) + 1, b.astype(np.int64) + 1
        if self.family == "fixed":
            return np.maximum(1, ts - int(self.width or 1) + 1), ts
        if self.family == "total":
            return ts[-1:] * 0 + 1, ts[-1:]
        return np.ones_like(ts), ts

    def mean_mse(self) -> float:
        """Mean predicted mean squared error over the family's queries (closed form)."""
        v = self.node_variance
        if self.family != "all":
            t1, t2 = self.family_queries()
            return float(np.mean(self.variance(t1, t2)))
        t = self.horizon
        n_q = t * (t + 1) / 2
        ts = np.arange(1, t + 1, dtype=np.int64)
        if self.strategy == "per_query":
            mean_nodes = 1.0
        elif self.strategy == "tree2d":
            pc1 = popcount(ts).astype(np.float64)
            pc2 = popcount(ts).astype(np.float64)
            mean_nodes = float(np.sum(2 * pc2 * np.cumsum(pc1))) / n_q
        else:
            s = self.group_size
            n_g = np.bincount(-(-ts // s))[1:].astype(np.float64)  # periods per group
            size = 2 * n_g.size
            spec = np.fft.rfft(n_g, size)
            # autocorrelation corr[d] = Σ_g n(g) n(g+d) (zero padding: no wrap-around)
            corr = np.rint(np.fft.irfft(spec * np.conj(spec), size)[:n_g.size])
            corr[0] = float(np.sum(n_g * (n_g + 1) / 2))
            diffs = np.arange(n_g.size, dtype=np.int64)
            if self.consistent:
                per = row_squares(self.layout)[diffs]
            else:
                per = popcount(diffs + 1).astype(np.float64)
            mean_nodes = float(np.sum(corr * per)) / n_q
            return (math.sqrt(mean_nodes * v) + self.bias_bound()) ** 2
        return mean_nodes * v

    # ---------------------------------------------------------------- noise (needs the key)
    def attach(self, key: bytes, name: Any) -> None:
        """Bind the secret key; node noise becomes available (lazily or eagerly).

        ``name`` names the structure in its release (``(family label, k)``); tree ``i`` of the
        structure draws under the name ``(*name, i)``, so every tree of every structure gets
        its own sub-key (:mod:`dpfreq.windows.lazy_noise`).
        """
        base = structure_name(name, "Structure.attach")
        tree0 = (*base, 0)
        self._key, self._name = key, base
        self._band_c = {}
        self._cons_noise = None
        self._cons_starts = {}
        d = self.detail
        strat = self.strategy
        gauss = self.noise_kind == "gaussian"
        if strat in ("simple", "tree"):
            # simple: one leaf noise per period, answers its running sums; trees: one noise
            # per flat block id (layer_layout)
            size = int(d["tree_nodes"])
            vec = (self._noise_source(key, tree0).noise(np.arange(size)) if gauss
                   else _eager_noise(self.gamma, size, key, tree0))
            self._impl = np.cumsum(vec) if strat == "simple" else vec
        elif strat in ("blocks", "single"):
            copies = 2 * d.get("blocks", 1) if strat == "blocks" else 2
            src = self._noise_source(key, tree0) if gauss else None
            self._impl = Tree1D(d["domain"], self.gamma, key, tree0, copies=copies,
                                noise_source=src)
        elif strat == "per_query" and self.family != "all":
            if gauss:
                src = self._noise_source(key, tree0)
                self._impl = src.noise(np.arange(self.horizon + 1))
            else:
                self._impl = _eager_noise(self.gamma, self.horizon + 1, key, tree0)
        elif strat == "tree2d":
            self._impl = tuple(
                Tree2DNoise(d["domain"], self.gamma, key, (*base, i),
                            noise_source=self._noise_source(key, (*base, i)))
                for i in (0, 1))
        else:
            self._impl = self._noise_source(key, tree0)

    def noise(self, t1: Any, t2: Any) -> IntArray:
        """Σ ± node noise of each answer (deterministic given the key)."""
        q1, q2 = np.broadcast_arrays(np.asarray(t1, dtype=np.int64),
                                     np.asarray(t2, dtype=np.int64))
        impl, strat = self._impl, self.strategy
        if strat == "simple":
            walk: IntArray = impl[q2 - 1]
            return walk
        if strat == "tree" and self.consistent:
            if self._cons_noise is None:  # once per structure: the same value for every query
                self._cons_noise = self.weights() @ impl.astype(np.float64)
            out: IntArray = self._cons_noise[q2 - 1]
            return out
        if strat == "tree":
            plain: IntArray = np.zeros(q2.shape, dtype=np.int64)
            for used, ids, sign in self.cover(q2 - 1):
                plain = plain + np.where(used, sign * impl[ids], 0)
            return plain
        if strat in ("blocks", "single"):  # the layout the band simulates (cover_map)
            x, copies = prefix_layout(self, q2)
            total: IntArray = sum(sign * impl.prefix_noise(x, tree) for tree, sign in copies)
            return total
        if strat == "per_query" and self.family != "all":
            return impl[q2]
        if strat == "tree2d":
            x, y = q1 - 1, q2 - 1
            return dominance_noise_sum(impl, (1, -1), x, y)
        if strat == "per_query":
            return impl.noise(q1 * (self.horizon + 1) + q2)
        g1, g2 = self.query_map(q1, q2)
        d = self.detail["domain"]
        x = g2 - g1  # prefix value (t − 1) of the tree that starts at g1, in its own time
        if self.consistent:
            out = np.empty(q1.shape, dtype=np.float64)
            starts = np.unique(g1)
            if len(self._cons_starts) + starts.size > 4096:
                self._cons_starts.clear()
            missing = np.array([g for g in starts.tolist() if g not in self._cons_starts],
                               dtype=np.int64)
            if missing.size:  # draw the whole tree of every new start in one batch
                ids = ((missing - 1) * (2 * d))[:, None] + np.arange(2 * d)[None, :]
                vals = impl.noise(ids.ravel()).reshape(missing.size, 2 * d).astype(np.float64)
                vals[:, 0] = 0.0  # heap id 0 is not a node
                for g, row in zip(missing.tolist(), vals, strict=True):
                    self._cons_starts[g] = self.weights() @ row
            for g in starts.tolist():
                sel = g1 == g
                out[sel] = self._cons_starts[g][x[sel]]
            res: IntArray = out
            return res
        cover = prefix_cover(x.ravel(), d)
        used = np.stack([u for u, _ in cover])
        ids = np.stack([(g1.ravel() - 1) * (2 * d) + i for _, i in cover])
        vals = np.zeros(used.shape, dtype=np.int64)
        vals[used] = impl.noise(ids[used])
        return vals.sum(axis=0).reshape(q1.shape)


def build_structure(family: str, strategy: str, k: int, horizon: int, level: str,
                    eps: Fraction, delta: float, width: int | None = None,
                    group_size: int = 1, *, rho: float | None = None,
                    noise_kind: str = "laplace", branching: int = 2,
                    top: bool = False) -> Structure:
    """Construct (calibrate) a structure from public parameters only.

    ``rho=None``: pure ε-DP accounting with budget ``eps`` (δ only for advanced composition
    across pieces). ``rho`` given: the structure is ρ-zCDP, with discrete Laplace (each pure
    piece at ``ε₀ = √(2ρ_piece)``) or discrete Gaussian noise (``σ² = ℓ2²/(2ρ_piece)``).
    ``level`` is the unit (``"event"``, ``"item"``, ``"item_replace"``); ``branching`` the
    ``B`` of a cumulative ``tree`` and ``top`` whether it keeps a root block over all periods.
    """
    return Structure(family, strategy, k, horizon, level, eps, delta, width, group_size,
                     rho=rho, noise_kind=noise_kind, branching=branching, top=top)
