"""Online randomizers, one interface ``init(L, k, ε)`` / ``step(j, x_j)`` (futurerand.md §4–5).

Every randomizer maps an input ``x ∈ {−1, 0, 1}^L`` with at most ``k`` non-zeros, revealed one
coordinate at a time, to outputs ``y_j ∈ {−1, +1}`` produced immediately (§4.1). Each instance
exposes

* ``c_gap``: the exact common gap ``Pr[y_i = x_i] − Pr[y_i = −x_i]`` (Property II), the only
  number the server needs (it divides by it);
* ``certificate``: an exact upper bound on ``ln(p_max/p_min)`` over every admissible input and
  every output (Property I), computed at construction in log space in O(k);

and construction refuses parameters whose certificate exceeds ε (:class:`ParameterError`).

Classes
-------
:class:`IndependentRR` (§4.3), :class:`FutureRand` with ``variant`` ``"paper"`` (§5.2–5.4, the
reference mode), ``"calibrated"`` or ``"threshold"`` (§5.7, beyond the paper),
:class:`ErlingssonRR` (§4.4, with the spec's corrections) and :func:`make_randomizer`, which also
resolves ``"auto"`` (§5.7.3).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpfreq import _validate
from dpfreq.errors import DataError, ParameterError
from dpfreq.noise import epsilon_to_fraction, randomized_response
from dpfreq.rng import RNGLike, resolve_rng

from .laws import CERTIFICATE_TOLERANCE, DistanceLaw, distance_law

__all__ = [
    "ErlingssonRR",
    "FutureRand",
    "IndependentRR",
    "Randomizer",
    "make_randomizer",
    "restore_randomizer",
]

_VARIANTS = {"paper": "futurerand", "calibrated": "calibrated", "threshold": "threshold"}


class Randomizer:
    """Base class: the online interface of §4.1.

    Parameters
    ----------
    length : int
        ``L``, the number of coordinates (reports) this randomizer will produce.
    changes : int
        ``k``, the largest number of non-zero inputs.
    epsilon : float
        The local privacy parameter ε; no default.
    rng : None, int or numpy.random.Generator, keyword-only
        Randomness (``None``: the secure default of :mod:`dpfreq.rng`).

    Attributes
    ----------
    name : str
        Randomizer id as written into the protocol parameters.
    c_gap : float
        Exact gap of Property II.
    certificate : float
        Exact bound on ``ln(p_max/p_min)`` (Property I); always ``≤ ε``.

    Notes
    -----
    ``step`` must be called with ``j = 1, 2, ..., L`` in order, each ``x_j`` in ``{−1, 0, 1}``;
    more than ``k`` non-zero inputs are refused (the client freezes changes beyond ``k`` before
    they reach the randomizer, pitfall 4). Zero inputs always give a fair coin (Property III).

    Privacy
    -------
    Unit: one input vector ``x`` of length ``L`` (one user's partial sums of one order);
    neighbouring: any two such vectors with at most ``k`` non-zeros each. Every output vector has
    probability within a factor ``e^{certificate} ≤ e^ε`` across all of them (Property I), so the
    whole output sequence is ε-DP.
    """

    name: str = "randomizer"
    c_gap: float
    certificate: float

    def __init__(self, length: int, changes: int, epsilon: float, *, rng: RNGLike = None) -> None:
        func = type(self).__name__
        self.length = _validate.check_int(length, "length", func, minimum=1)
        self.changes = _validate.check_int(changes, "changes", func, minimum=1)
        self.epsilon = _validate.check_epsilon(epsilon, "epsilon", func)
        self._gen = resolve_rng(rng, func).generator
        self.j = 0  # last coordinate produced
        self.used = 0  # non-zero inputs seen

    def _refuse_if_uncertified(self) -> None:
        if not self.certificate <= self.epsilon * (1 + CERTIFICATE_TOLERANCE):
            raise ParameterError(
                f"{type(self).__name__}: the exact privacy loss ln(p_max/p_min) = "
                f"{self.certificate!r} exceeds epsilon {self.epsilon!r}; refusing these parameters."
            )

    def _coin(self) -> int:
        return 1 if int(self._gen.integers(0, 2)) else -1

    def step(self, j: int, x: int) -> int:
        """Output ``y_j ∈ {−1, +1}`` for input ``x_j ∈ {−1, 0, 1}`` (online; ``j`` = 1, 2, ...)."""
        func = f"{type(self).__name__}.step"
        if not isinstance(j, int | np.integer) or int(j) != self.j + 1 or int(j) > self.length:
            raise DataError(
                _validate.message("j", func, f"the next coordinate {self.j + 1} (of {self.length})",
                                  j)
            )
        if isinstance(x, bool) or x not in (-1, 0, 1):
            raise DataError(_validate.message("x", func, "one of -1, 0, 1", x))
        self.j += 1
        if x == 0:
            return self._coin()
        if self.used >= self.changes:
            raise DataError(
                f"{func}: more than k = {self.changes} non-zero inputs; changes beyond k must be "
                "frozen before they reach the randomizer (futurerand.md pitfall 4)."
            )
        self.used += 1
        return self._nonzero(int(x))

    def _nonzero(self, x: int) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def state(self) -> dict[str, Any]:
        """JSON-ready state (without the random generator)."""
        return {"j": self.j, "used": self.used}

    def _restore(self, state: dict[str, Any]) -> None:
        self.j = int(state["j"])
        self.used = int(state["used"])


class _DistanceRandomizer(Randomizer):
    """Pre-computed ``v = CR(1^k)`` drawn once from a distance law; ``y = v[c]·x`` (§5.3)."""

    law: DistanceLaw

    def _setup(self, law: DistanceLaw) -> None:
        self.law = law
        self.name = law.name
        self.c_gap = law.c_gap
        # support s < k uses v[1..s] only; the marginal sums 2^{k−s} vectors of the law, so
        # max q / min q bounds every ratio (§5.3); it is attained at support k ≤ L.
        self.certificate = law.certificate
        self._refuse_if_uncertified()
        self.v = [int(b) for b in law.sample(1, rng=self._gen)[0]]

    def _nonzero(self, x: int) -> int:
        return self.v[self.used - 1] * x

    def state(self) -> dict[str, Any]:
        """JSON-ready state: counters and the pre-computed vector ``v``."""
        return {**super().state(), "v": list(self.v)}

    def _restore(self, state: dict[str, Any]) -> None:
        super()._restore(state)
        self.v = [int(b) for b in state["v"]]


class IndependentRR(_DistanceRandomizer):
    """Independent randomized response with ``ε/k`` per non-zero coordinate (§4.3).

    ``c_gap = tanh(ε/(2k))``; the certificate is exactly ε. Implemented through its distance law
    (``v`` has i.i.d. coordinates), so it shares the pre-computation and sampler of FutureRand.
    """

    def __init__(self, length: int, changes: int, epsilon: float, *, rng: RNGLike = None) -> None:
        super().__init__(length, changes, epsilon, rng=rng)
        self._setup(distance_law("rr", self.changes, self.epsilon))


class FutureRand(_DistanceRandomizer):
    """FutureRand (§5): correlated randomness ``v = CR(1^k)`` pre-computed once.

    Parameters
    ----------
    length, changes, epsilon, rng
        As :class:`Randomizer`.
    variant : {"paper", "calibrated", "threshold"}, keyword-only
        ``"paper"`` (the reference mode): ``ε' = ε/(5√k)``, annulus ``[μ − 2√k, UB]``, a
        vector outside it resampled uniformly from the **complement** (§5.2).
        ``"calibrated"``: the same shape with the smallest constant ``c`` in ``ε/(c√k)`` whose
        exact loss is ≤ ε (§5.7.1). ``"threshold"``: the best distance-based randomizer
        (§5.7.2). The latter two are not in the paper.

    Notes
    -----
    Why it is ε-DP: the output is ``v[1..s]·x`` on the support (``s ≤ k``) and fair coins
    elsewhere; every vector ``v`` has probability ``q(ℓ)`` depending only on its number ℓ of
    ``−1`` entries, so ``Pr[y] = 2^{−(L−s)}·Σ_a C(k−s, a) q(ℓ_s + a)``, which lies in
    ``2^{k−L}·[min q, max q]`` (§5.3). The certificate ``ln(max q/min q)`` is computed exactly
    from the law and checked ≤ ε at construction.
    """

    def __init__(
        self,
        length: int,
        changes: int,
        epsilon: float,
        *,
        variant: str,
        rng: RNGLike = None,
    ) -> None:
        super().__init__(length, changes, epsilon, rng=rng)
        variant = _validate.check_choice(variant, "variant", "FutureRand", tuple(_VARIANTS))
        self._setup(distance_law(_VARIANTS[variant], self.changes, self.epsilon))


class ErlingssonRR(Randomizer):
    """Erlingsson et al. (2020) as recast in §4.4, with the spec's corrections (pitfall 13).

    The client keeps only the ``r``-th change, ``r ~ U{1..k}`` drawn from ``[k]`` (not from the
    user's actual number of changes), so the input of this randomizer has **at most one**
    non-zero; that coordinate goes through exact randomized response with the **full** ε
    (:func:`dpfreq.noise.randomized_response`), zeros through fair coins.

    ``c_gap`` is the *effective* gap ``tanh(ε/2)/k`` the server divides by (the factor ``k``
    undoes the sampling of ``r``; with the ``log d + 1`` of §3.2 the scale is
    ``(log d + 1)·k/tanh(ε/2)``). ``rr_gap = tanh(ε/2)`` is the gap on the kept change.

    Notes
    -----
    Given ``(h, r)`` every output has probability in
    ``[2^{−(L−1)}/(1+e^γ), 2^{−(L−1)}e^γ/(1+e^γ)]``, and the all-zero input gives ``2^{−L}``,
    inside that range; ``γ ≤ ε`` is ε rounded down to an exact fraction. The certificate is γ.
    """

    name = "erlingsson"

    def __init__(self, length: int, changes: int, epsilon: float, *, rng: RNGLike = None) -> None:
        super().__init__(length, changes, epsilon, rng=rng)
        self.gamma: Fraction = epsilon_to_fraction(self.epsilon)
        self.rr_gap = math.tanh(float(self.gamma) / 2.0)
        self.c_gap = self.rr_gap / self.changes
        self.certificate = float(self.gamma)
        self._refuse_if_uncertified()

    def step(self, j: int, x: int) -> int:
        """As :meth:`Randomizer.step`; at most one non-zero input in all."""
        if x in (-1, 1) and not isinstance(x, bool) and self.used >= 1:
            raise DataError(
                "ErlingssonRR.step: more than one non-zero input; the client keeps only the "
                "r-th change (futurerand.md §4.4)."
            )
        return super().step(j, x)

    def _nonzero(self, x: int) -> int:
        keep = int(randomized_response(np.array([1], np.int8), self.gamma, rng=self._gen)[0])
        return x if keep else -x


def make_randomizer(
    name: str, length: int, changes: int, epsilon: float, *, rng: RNGLike = None
) -> Randomizer:
    """``init(L, k, ε)`` of the randomizer ``name``.

    ``name`` is one of ``"rr"``, ``"erlingsson"``, ``"futurerand"`` (paper constants),
    ``"calibrated"``, ``"threshold"`` or ``"auto"`` (the largest exact ``c_gap`` among rr,
    futurerand, calibrated and threshold, §5.7.3; the resolved name is ``.name``).
    """
    name = _validate.check_choice(
        name,
        "name",
        "make_randomizer",
        ("auto", "calibrated", "erlingsson", "futurerand", "rr", "threshold"),
    )
    if name == "auto":
        k = _validate.check_int(changes, "changes", "make_randomizer", minimum=1)
        eps = _validate.check_epsilon(epsilon, "epsilon", "make_randomizer")
        name = distance_law("auto", k, eps).name
    if name == "erlingsson":
        return ErlingssonRR(length, changes, epsilon, rng=rng)
    if name == "rr":
        return IndependentRR(length, changes, epsilon, rng=rng)
    variant = {"futurerand": "paper", "calibrated": "calibrated", "threshold": "threshold"}[name]
    return FutureRand(length, changes, epsilon, variant=variant, rng=rng)


def restore_randomizer(
    name: str, length: int, changes: int, epsilon: float, state: dict[str, Any], *,
    rng: RNGLike = None,
) -> Randomizer:
    """Rebuild a randomizer from :meth:`Randomizer.state` without redrawing ``v`` (pitfall 4)."""
    cls: type[Randomizer] = {
        "erlingsson": ErlingssonRR,
        "rr": IndependentRR,
    }.get(name, FutureRand)
    obj = cls.__new__(cls)
    Randomizer.__init__(obj, length, changes, epsilon, rng=rng)
    if isinstance(obj, ErlingssonRR):
        obj.gamma = epsilon_to_fraction(obj.epsilon)
        obj.rr_gap = math.tanh(float(obj.gamma) / 2.0)
        obj.c_gap = obj.rr_gap / obj.changes
        obj.certificate = float(obj.gamma)
    else:
        assert isinstance(obj, _DistanceRandomizer)
        law = distance_law(name, obj.changes, obj.epsilon)
        obj.law, obj.name, obj.c_gap, obj.certificate = law, law.name, law.c_gap, law.certificate
    obj._refuse_if_uncertified()
    obj._restore(state)
    return obj
