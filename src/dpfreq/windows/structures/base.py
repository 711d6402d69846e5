"""Noise structures for each query family, their registry, and the closed-form variance used to
choose among them.

After Ghazi, Kumar, Manurangsi and Nelson (2023). Every structure answers a query as
``exact answer + Σ_{nodes in the cover} ± η(node)`` with exact discrete-Laplace node noise that
is a deterministic function of the release's secret key and the node id (drawn once, never
redrawn). Its variance is ``(#cover nodes) · Var[DLap(γ)]`` exactly, known from public
parameters only, which is what ``method="auto"`` compares (the mean variance over the family's
queries; for time compression the bias bound is added).

Each method's structure, sensitivity and node noise are stated with its class
(:mod:`dpfreq.windows.structures.counters`: the cumulative counters;
:mod:`dpfreq.windows.structures.windows`: rolling and arbitrary windows, per-query noise).
``unit="item_replace"`` (replace one item's rows) is calibrated at twice the ``item``
sensitivity outside the cumulative families (a replacement is a removal and an addition); the
cumulative structures state their exact sensitivity.

With δ > 0 at item level, the per-block / per-start budget uses the better of basic and advanced
composition (each piece is pure ε_0-DP; ``ε_0√(2m ln(1/δ_s)) + mε_0(e^{ε_0}−1) <= ε_s``).

Every method is one subclass of :class:`Structure` (the calibration, the exact laws and the band
are shared here; the layout, the covers and the noise are the subclass's) registered by name with
:func:`register`: the plan considers every registered method that serves a family
(:data:`METHODS`), so adding a method is one class in one module.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any, ClassVar, TypeVar

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import message
from dpfreq.accounting.composition import pieces_epsilon
from dpfreq.accounting.numbers import float_at_most
from dpfreq.accounting.zcdp import gaussian_sigma2_at_least, pure_epsilon_for_rho
from dpfreq.errors import ParameterError, public_errors
from dpfreq.noise import discrete_laplace_gamma, gaussian_sigma2, sample_discrete_laplace
from dpfreq.windows.laws.answers import consistent_halfwidth, cover_halfwidth
from dpfreq.windows.laws.node import DiscreteGaussian, DiscreteLaplace, NodeLaw
from dpfreq.windows.layouts.weights import Layout, layout_weights, row_squares
from dpfreq.windows.noise.keyed import (
    eager_generator,
    structure_name,
)
from dpfreq.windows.structures.bands import (
    band_multiplier,
    band_scale,
    cover_multiplier,
    plan_multiplier,
    weights_multiplier,
)
from dpfreq.windows.structures.protocol import Calibration, NodeSampler, Shape

__all__ = [
    "BRANCHINGS",
    "CONSISTENCY_MAX_DOMAIN",
    "CONSISTENCY_MAX_WEIGHTS",
    "METHODS",
    "Structure",
    "build_structure",
    "composed_epsilon",
    "eager_noise",
    "register",
    "registry",
]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

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

_REGISTRY: dict[str, type[Structure]] = {}

S = TypeVar("S", bound="type[Structure]")


@public_errors("register")
def register(cls: S) -> S:
    """Class decorator: make the method ``cls.name`` available to the plan and the release
    (for the families in ``cls.families``); ``auto`` tries the methods in the order they were
    registered (the built-in ones first: :mod:`dpfreq.windows.structures` imports them)."""
    if _REGISTRY.get(cls.name, cls) is not cls:
        raise ParameterError(message("name", "a method name not yet registered",
                                     cls.name))
    _REGISTRY[cls.name] = cls
    return cls


def registry() -> dict[str, type[Structure]]:
    """Every registered method by name (the built-in ones first, in the order tried)."""
    return _REGISTRY


class _Families(Mapping[str, tuple[str, ...]]):
    """``family → names of the registered methods serving it`` (a live view)."""

    def _table(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {}
        for name, cls in registry().items():
            for family in cls.families:
                out.setdefault(family, []).append(name)
        return {family: tuple(names) for family, names in out.items()}

    def __getitem__(self, family: str) -> tuple[str, ...]:
        return self._table()[family]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


#: family → the methods that can answer it (``auto`` compares them all)
METHODS: Mapping[str, tuple[str, ...]] = _Families()


def composed_epsilon(eps: Fraction, pieces: int, delta: float) -> Fraction:
    """Per-piece budget for ``pieces`` pure-DP runs composed to (ε, δ): basic or advanced,
    certified (:func:`dpfreq.accounting.pieces_epsilon`)."""
    return pieces_epsilon(eps, pieces, delta)


def eager_noise(gamma: Fraction, size: int, key: bytes, structure: Any) -> IntArray:
    """``size`` node noises ``DLap(γ)`` drawn at once from the structure's keyed stream."""
    return sample_discrete_laplace(gamma, size, rng=eager_generator(key, structure))


class Structure:
    """One released structure for (family, k): the shared part of every method.

    A subclass sets :attr:`name` and :attr:`families`, computes its sensitivity
    (:meth:`_shape`), its covers (:meth:`nodes`), draws its noise (:meth:`_draw`) and sums it
    (:meth:`noise`); the calibration, the exact laws, the intervals and the bands are here.
    It implements :class:`~dpfreq.windows.structures.protocol.WindowStructure`.
    """

    #: the registered name (``method=`` of the release)
    name: ClassVar[str]
    #: the query families it answers
    families: ClassVar[tuple[str, ...]]
    #: answers with independent noises (the band is Šidák's, not a simulation)
    independent_answers: ClassVar[bool] = False
    #: what a call must give for the method to be usable, when not every call can use it
    #: (the refusal of a caller who asks for it names this)
    requires: ClassVar[str | None] = None
    #: a method this one refines: ``auto`` compares it only where it predicts less error than
    #: that one (a caller may still force it)
    refines: ClassVar[str | None] = None

    def __init__(self, family: str, k: int, horizon: int, level: str, eps: Fraction,
                 delta: float, width: int | None = None, group_size: int = 1, *,
                 rho: float | None = None, noise_kind: str = "laplace", branching: int = 2,
                 top: bool = False) -> None:
        self.family, self.method, self.k = family, self.name, k
        # ``item_replace`` is laid out as ``item`` at twice the sensitivity (_calibrate_exact)
        self.unit = level
        self.level = "item" if level == "item_replace" else level
        self.horizon, self.width = horizon, width
        self.group_size = group_size
        self.branching, self.top = self._layout_parameters(branching, top)
        self.eps, self.delta, self.rho = eps, delta, rho
        if noise_kind == "gaussian" and rho is None:
            raise ValueError("Gaussian noise needs a zCDP budget rho")
        self.noise_kind = noise_kind
        self.shape: Shape = self._shape()
        self.gamma, self.sigma2, self.calibration = self._calibrate()
        #: the node law the calibration chose (owns variance, keyed source, quantiles)
        self.law: NodeLaw = (DiscreteGaussian(self.sigma2) if noise_kind == "gaussian"
                             else DiscreteLaplace(self.gamma))
        self.consistent = self._consistent()
        self.layout: Layout = self._layout()
        self._key: bytes | None = None
        self._name: tuple[str | int, ...] = ()
        self._band_c: dict[float, float | None] = {}
        # public half-widths asked before (shared by a grouped release's copies of the plan)
        self._half_c: dict[tuple[Any, ...], FloatArray] = {}

    # ------------------------------------------------------------------ what a method defines
    @classmethod
    def admissible(cls, unit: str, singleton: bool) -> bool:
        """Whether ``auto`` may consider the method for this unit and log kind."""
        return True

    @classmethod
    def best_for(cls, family: str, k: int, horizon: int, unit: str, eps: Fraction,
                 delta: float, width: int | None, *, rho: float | None, noise_kind: str,
                 layouts: dict[str, float] | None = None) -> Structure | None:
        """The calibrated structure the plan compares (the best of the method's public
        tuning parameters, if any), or None when no calibration is usable; ``layouts``
        receives the predicted RMSE of every layout tried, when the method has several."""
        s = cls(family, k, horizon, unit, eps, delta, width, rho=rho, noise_kind=noise_kind)
        return s if s.usable else None

    def _layout_parameters(self, branching: int, top: bool) -> tuple[int, bool]:
        """``(B, top)`` of a layered counter (recorded in the band's plan key)."""
        return 2, True

    def _shape(self) -> Shape:
        """Pieces composed sequentially, ℓ1 and ℓ2 sensitivity per piece, layout."""
        raise NotImplementedError

    def _consistent(self) -> bool:
        """Answers are least-squares estimates (:meth:`weights`) rather than cover sums."""
        return False

    def _layout(self) -> Layout:
        return ("heap", self.domain)

    def nodes(self, t1: Any, t2: Any) -> IntArray:
        """Number of noise terms in each answer (public: depends on the query only)."""
        raise NotImplementedError

    def _draw(self, key: bytes, name: tuple[str | int, ...]) -> None:
        """Bind the node noise of the structure named ``name`` (see :meth:`attach`)."""
        raise NotImplementedError

    def noise(self, t1: Any, t2: Any) -> IntArray:
        """Σ ± node noise of each answer (deterministic given the key)."""
        raise NotImplementedError

    @property
    def measured(self) -> bool:
        """Answers come from the noisy measurements the structure holds (:meth:`measure`,
        :meth:`estimates`) — required wherever they are not integer sums of node noises
        (least squares, a factorization): never ``exact + f(noise)`` in floats. Otherwise an
        answer is ``exact + Σ ± node noise`` in integers, which equals the same signed sum of
        the noisy node counts ``exact node count + node noise`` exactly."""
        return False

    def measure(self, exact: Any) -> None:
        """Take the noisy measurements from ``exact(t1, t2)``, the exact counts of the windows
        of the family (called once the key is attached; lazy structures keep ``exact`` and
        measure the trees a query needs when it asks)."""
        raise NotImplementedError

    def estimates(self, t1: Any, t2: Any) -> NDArray[Any]:
        """The published answers, computed from the noisy measurements alone."""
        raise NotImplementedError

    #: the noisy measurement of an eagerly measured structure (integers)
    _noisy: IntArray

    @property
    def measurement(self) -> IntArray | None:
        """The noisy measurement (a copy) of an eagerly measured structure — every answer it
        publishes is a function of this vector and public parameters alone — or None (not
        measured, or measured lazily: per-start trees measure the trees a query needs)."""
        noisy = getattr(self, "_noisy", None)
        return None if noisy is None else noisy.copy()

    @property
    def measurement_size(self) -> int | None:
        """The length of the eager measurement (None: measured lazily, or not measured)."""
        return None

    def load_measurement(self, noisy: Any) -> None:
        """Answer from a stored measurement (no key, no exact data needed)."""
        self._noisy = np.array(noisy, dtype=np.int64)
        self._measured()

    def _measured(self) -> None:
        """Derive what the answers need from :attr:`_noisy` (post-processing only)."""
        raise NotImplementedError

    def allowance(self, t1: Any, t2: Any) -> FloatArray:
        """A bound on the floating-point error of :meth:`estimates` beyond the noise law
        (computed from the measurements: post-processing), added to the intervals."""
        return np.zeros(np.broadcast(np.asarray(t1), np.asarray(t2)).shape)

    def query_map(self, t1: IntArray, t2: IntArray) -> tuple[IntArray, IntArray]:
        """The window actually asked of the mechanism (time compression widens it)."""
        return t1, t2

    def exact_window(self, t1: IntArray, t2: IntArray) -> tuple[IntArray, IntArray]:
        """The window whose exact count the answer adds its noise to."""
        return t1, t2

    def _prefix_index(self, t1: Any, t2: Any) -> IntArray:
        """Prefix value ``x`` asked of the (per-start) tree for each query."""
        g1, g2 = self.query_map(np.asarray(t1, dtype=np.int64), np.asarray(t2, dtype=np.int64))
        return g2 - g1

    def bias_bound(self) -> int:
        """Bound on |E[answer] − truth| (0 unless the method approximates the window)."""
        return 0

    def node_cover(self, t1: IntArray, t2: IntArray
                   ) -> tuple[IntArray, IntArray, IntArray] | None:
        """Every node noise in the answers, with its sign, as :meth:`noise` sums them: answer
        ``i``'s noise is ``Σ signs[j]·Z[ids[j]]`` over the ``j`` with ``rows[j] = i`` (``ids``
        number the nodes of the whole structure); None where answers are not such sums."""
        return None

    def _tree_limits(self) -> IntArray | None:
        """Prefix values each tree of a consistent structure answers (None: not a linear map
        of its nodes by :meth:`weights`)."""
        return None

    def simulate_band(self, beta: float, draws: int, sample: NodeSampler) -> float | None:
        """The band multiplier from simulated noise vectors
        (:mod:`dpfreq.windows.structures.bands`)."""
        limits = self._tree_limits()
        if limits is None:
            return cover_multiplier(self, beta, draws, sample)
        return weights_multiplier(self, limits, self._prefix_step(), beta, draws, sample)

    def _prefix_step(self) -> int:
        """Periods per prefix value of a consistent tree: the window ``[1, x·step + 1]`` has
        prefix value ``x``."""
        return 1

    def worst_windows(self) -> tuple[IntArray, IntArray]:
        """Windows containing one whose noise is largest (every window alike by default)."""
        return np.ones(1, dtype=np.int64), np.ones(1, dtype=np.int64)

    def describe(self, name: str) -> str:
        """``name`` with the public layout the plan's reason states."""
        return name

    # ---------------------------------------------------------------- calibration (public only)
    @property
    def domain(self) -> int:
        """Leaves of each tree (0 for per-query noise or an unusable calibration)."""
        return self.shape.domain if self.calibration is not None else 0

    @property
    def detail(self) -> dict[str, Any]:
        """Layout and calibration as the release records them (``mechanism_params``)."""
        if self.calibration is None:
            return {"domain": 0, "unusable": "budget too small to calibrate",
                    "consistency": self.consistent}
        return {**self.shape.record(), **self.calibration.record(),
                "consistency": self.consistent}

    @property
    def usable(self) -> bool:
        """Calibration gave usable noise: γ > 0 (Laplace) or a representable σ² (Gaussian)."""
        return self.law.usable

    def _piece_epsilon(self, pieces: int) -> Fraction:
        """The pure budget of each piece."""
        return self.eps if pieces == 1 else composed_epsilon(self.eps, pieces, self.delta)

    def _calibrate(self) -> tuple[Fraction, int, Calibration | None]:
        """(γ, σ², calibration); γ = 0 (or σ² = 0 for Gaussian noise) and no calibration when
        the budget is too small to calibrate exactly: such a structure is never chosen."""
        try:
            return self._calibrate_exact()
        except ParameterError:
            return Fraction(0), 0, None

    def _calibrate_exact(self) -> tuple[Fraction, int, Calibration]:
        pieces, l1, l2 = self.shape.pieces, self.shape.l1, self.shape.l2
        if self.unit == "item_replace" and self.family not in ("cumulative", "total"):
            # a replacement is a removal and an addition (cumulative: exact in _shape)
            l1, l2 = 2 * l1, 2 * l2
        if self.rho is None:
            e_piece = self._piece_epsilon(pieces)
            return (discrete_laplace_gamma(e_piece, l1), 0,
                    Calibration(l1, "pure epsilon-DP", epsilon_piece=e_piece))
        rho_exact = Fraction(self.rho) / pieces  # certified conversions (dpfreq.accounting)
        rho_piece = float_at_most(rho_exact)
        if self.noise_kind == "laplace":
            e_piece = pure_epsilon_for_rho(rho_exact)  # ε-DP ⇒ ε²/2-zCDP
            return (discrete_laplace_gamma(e_piece, l1), 0,
                    Calibration(l1, "zCDP", epsilon_piece=e_piece, rho_piece=rho_piece))
        # a float √ is correctly rounded, so the next float is at least the exact ℓ2
        target = gaussian_sigma2_at_least(math.nextafter(l2, math.inf), rho_exact)
        sigma2 = gaussian_sigma2(target)[0] if target < 2**60 else 0
        return Fraction(0), sigma2, Calibration(l1, "zCDP", rho_piece=rho_piece,
                                                l2_sensitivity=l2, sigma2=sigma2)

    @property
    def node_variance(self) -> float:
        return self.law.variance

    def weights(self) -> FloatArray:
        """Least-squares prefix weights of the consistent tree (``T × nodes``)."""
        return layout_weights(self.layout)

    # ---------------------------------------------------------------- exact laws (public only)
    def variance(self, t1: Any, t2: Any) -> FloatArray:
        """Exact noise variance of each answer (public: depends on the query only)."""
        if self.consistent:
            rowsq = row_squares(self.layout)
            x = self._prefix_index(t1, t2)
            var: FloatArray = rowsq[x] * self.node_variance
            return var
        plain: FloatArray = self.nodes(t1, t2).astype(np.float64) * self.node_variance
        return plain

    def halfwidth(self, t1: Any, t2: Any, beta: float, *, exact: bool = True) -> FloatArray:
        """``x`` with ``Pr[|noise of the answer| > x] <= β`` for each query, from the exact law
        of its noise (:mod:`dpfreq.windows.laws.answers`); ``exact=False``: the tail bounds alone
        (never smaller; cheap). Remembered (64 query sets of at most 2^14 queries)."""
        q1, q2 = np.asarray(t1, dtype=np.int64), np.asarray(t2, dtype=np.int64)
        memo = (beta, exact, q1.shape, q2.shape, q1.tobytes(), q2.tobytes())
        hit = self._half_c.get(memo)
        if hit is None:
            hit = (consistent_halfwidth(self.law, self.layout, self._prefix_index(q1, q2), beta,
                                        exact)
                   if self.consistent else cover_halfwidth(self.law, self.nodes(q1, q2), beta,
                                                           exact))
            if len(self._half_c) < 64 and max(q1.size, q2.size) <= 1 << 14:
                self._half_c[memo] = hit
        return hit.copy()

    @property
    def n_family(self) -> int:
        """Number of windows in the structure's family (``T`` for a curve, all ``T(T+1)/2``)."""
        t = self.horizon
        if self.family == "total":
            return 1
        return t * (t + 1) // 2 if self.family == "all" else t

    def band_halfwidth(self, t1: Any, t2: Any, beta: float, *,
                       exact: bool = True) -> FloatArray:
        """Half-widths of a band holding for all :attr:`n_family` windows of the family at once
        with probability ``>= 1 − β`` (noise only; the caller adds the bias bound). Trees:
        ``max(c, 1)·h`` with ``h`` the half-width at ``β`` floored at one item and ``c``
        calibrated on the exact joint noise law (:mod:`dpfreq.windows.structures.bands`; keyed
        by the release's secret once attached, by a public key in a plan). Independent answers
        (``per_query``): the half-width at Šidák's ``1 − (1 − β)^{1/n}``; trees beyond the
        simulation's limits: at ``β/n``.
        ``exact=False``: the tail bounds at the union bound (cheap, never smaller).
        """
        if exact and beta not in self._band_c:
            self._band_c[beta] = (
                band_multiplier(self, beta, self._key, self._name) if self._key is not None
                else plan_multiplier(self, beta, (self.family, self.method, self.horizon,
                                                  self.unit, str(self.eps),
                                                  int(self.width or 0), self.group_size,
                                                  self.branching, int(self.top))))
        c = self._band_c.get(beta) if exact else None
        if c is not None:
            return max(c, 1.0) * band_scale(self.halfwidth(t1, t2, beta))
        n = self.n_family
        level = -math.expm1(math.log1p(-beta) / n) if self.independent_answers else beta / n
        return self.halfwidth(t1, t2, level, exact=exact)

    def family_queries(self) -> tuple[IntArray, IntArray]:
        """``(t1, t2)`` of every window of the family (:attr:`n_family` of them)."""
        t = self.horizon
        ts = np.arange(1, t + 1, dtype=np.int64)
        if self.family == "all":
            a, b = np.triu_indices(t)
            return a.astype(np.int64) + 1, b.astype(np.int64) + 1
        if self.family == "rolling":
            return np.maximum(1, ts - int(self.width or 1) + 1), ts
        if self.family == "total":
            return ts[-1:] * 0 + 1, ts[-1:]
        return np.ones_like(ts), ts

    def mean_mse(self) -> float:
        """Mean predicted mean squared error over the family's queries (all-windows
        methods give it in closed form)."""
        t1, t2 = self.family_queries()
        return float(np.mean(self.variance(t1, t2)))

    # ---------------------------------------------------------------- noise (needs the key)
    #: ``node_noise(structure, name)``: a grouped release's shared node noise replacing the
    #: tree's own keyed source, eager or lazy (:mod:`dpfreq.windows.grouped.noise`)
    node_noise: Any = None

    @property
    def keyed_eager(self) -> bool:
        """Eager trees draw from :meth:`noise_source` (Gaussian noise, or a grouped release's
        shared noise) rather than from the stream of :func:`eager_noise`."""
        return not self.law.streamed or self.node_noise is not None

    def noise_source(self, key: bytes, name: Any) -> Any:
        """The keyed lazy node noise of the tree named ``name`` (the structure's law)."""
        if self.node_noise is not None:
            return self.node_noise(self, name)
        return self.law.keyed(key, name)

    @public_errors("Structure.attach")
    def attach(self, key: bytes, name: Any) -> None:
        """Bind the secret key; node noise becomes available (lazily or eagerly). ``name``
        names the structure in its release (``(family label, k)``); its tree ``i`` draws under
        ``(*name, i)``: every tree gets its own sub-key (:mod:`dpfreq.windows.noise.keyed`)."""
        base = structure_name(name)
        self._key, self._name = key, base
        self._band_c = {}
        self._draw(key, base)


@public_errors("build_structure")
def build_structure(family: str, method: str, k: int, horizon: int, level: str,
                    eps: Fraction, delta: float, width: int | None = None,
                    group_size: int = 1, *, rho: float | None = None,
                    noise_kind: str = "laplace", branching: int = 2,
                    top: bool = False) -> Structure:
    """Construct (calibrate) a registered structure from public parameters only.

    ``rho=None``: pure ε-DP accounting with budget ``eps`` (δ only for advanced composition
    across pieces). ``rho`` given: the structure is ρ-zCDP, with discrete Laplace (each pure
    piece at ``ε₀ = √(2ρ_piece)``) or discrete Gaussian noise (``σ² = ℓ2²/(2ρ_piece)``).
    ``level`` is the unit (``"event"``, ``"item"``, ``"item_replace"``); ``branching`` the
    ``B`` of a cumulative ``tree`` and ``top`` whether it keeps a root block over all periods.
    """
    cls = registry().get(method)
    if cls is None or family not in cls.families:
        raise ParameterError(message("method",
                                     f"one of {list(METHODS.get(family, ()))}", method))
    return cls(family, k, horizon, level, eps, delta, width, group_size, rho=rho,
               noise_kind=noise_kind, branching=branching, top=top)
