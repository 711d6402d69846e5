"""Online randomizers of the longitudinal protocol: ``init(L, k, ε)``, then ``step(j, x_j)``.

Every randomizer maps an input ``x ∈ {−1, 0, 1}^L`` with at most ``k`` non-zeros, revealed one
coordinate at a time, to outputs ``y_j ∈ {−1, +1}`` produced immediately (Ohrimenko, Wirth and
Wu 2022, "Randomize the future: asymptotically optimal locally private frequency estimation
protocol for longitudinal data"). Each instance exposes

* ``c_gap``: the exact common gap ``Pr[y_i = x_i] − Pr[y_i = −x_i]`` of a non-zero input (the
  only number the server needs: it divides by it); a zero input gives a fair coin;
* ``certificate``: ``ln(p_max/p_min)`` over every admissible input and every output, computed
  exactly on the law that is sampled, always ``≤ ε``;

and construction refuses parameters whose certificate would exceed ε (:class:`ParameterError`).

Classes
-------
:class:`IndependentRR` (randomized response with ε/k per non-zero), :class:`FutureRand` with
``variant`` ``"paper"`` (the paper's constants, the reference mode), ``"calibrated"`` or
``"threshold"`` (beyond the paper), :class:`ErlingssonRR` (Erlingsson et al. 2020, keeping one
change) and :func:`make_randomizer`, which also resolves ``"auto"``.

Every mode is a subclass of :class:`Randomizer` (the protocol: ``c_gap``, ``certificate``,
``step``, ``state``; a subclass sets itself up for a mode in ``_setup_mode`` and answers a
non-zero input in ``_nonzero``) registered under its mode names with :func:`register_randomizer`
(:data:`RANDOMIZERS`); :func:`make_randomizer` and :func:`restore_randomizer` look modes up
there, so a new mode is one class here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np

from dpfreq import _validate
from dpfreq._docstrings import fill_doc
from dpfreq.errors import DataError, ParameterError, public_call, public_errors
from dpfreq.noise import epsilon_to_fraction
from dpfreq.rng import RNGLike

from .keyed import DeviceKey
from .laws import DistanceLaw, distance_law

__all__ = [
    "RANDOMIZERS",
    "ErlingssonRR",
    "FutureRand",
    "IndependentRR",
    "Randomizer",
    "make_randomizer",
    "register_randomizer",
    "restore_randomizer",
]

_VARIANTS = {"paper": "futurerand", "calibrated": "calibrated", "threshold": "threshold"}

#: mode name → the class of its randomizer (``"auto"`` is resolved to one of them)
RANDOMIZERS: dict[str, type[Randomizer]] = {}

R = TypeVar("R", bound="type[Randomizer]")


def register_randomizer(*modes: str) -> Callable[[R], R]:
    """Class decorator: the randomizer class answers the mode names ``modes``."""
    @public_errors("register_randomizer")
    def add(cls: R) -> R:
        for mode in modes:
            if RANDOMIZERS.get(mode, cls) is not cls or mode == "auto":
                raise ParameterError(_validate.message(
                    "mode", "a mode name not yet registered", mode))
            RANDOMIZERS[mode] = cls
        return cls
    return add


# The parameters every randomizer takes, documented once (see dpfreq._docstrings).
_PARAMETERS = """length : int, keyword-only
    ``L``, the number of coordinates (reports) the randomizer will produce.
max_changes : int, keyword-only
    ``k``, the largest number of non-zero inputs.
epsilon : float, keyword-only
    The local privacy parameter ε; no default.
key : DeviceKey or None, keyword-only
    The device secret every draw is a keyed function of (:mod:`dpfreq.longitudinal.keyed`);
    a device passes its own. ``None``: a new secret from ``rng``.
rng : None, int or numpy.random.Generator, keyword-only
    Where a new secret comes from when ``key`` is None: ``None`` the OS CSPRNG (production), a
    seed or generator for tests (the key is then marked seeded)."""


@fill_doc(common=_PARAMETERS)
class Randomizer:
    """Base class of the online randomizers.

    Parameters
    ----------
    [[common]]

    Attributes
    ----------
    name : str
        Randomizer id as written into the protocol parameters.
    c_gap : float
        Exact gap of a non-zero input.
    certificate : float
        ``ln(p_max/p_min)`` of the sampled law; always ``≤ ε``.

    Notes
    -----
    ``step`` must be called with ``j = 1, 2, ..., L`` in order, each ``x_j`` in ``{−1, 0, 1}``;
    more than ``k`` non-zero inputs are refused (the client freezes changes beyond ``k`` before
    they reach the randomizer). Zero inputs always give a fair coin.

    Every draw is a keyed function of the device secret (purposes ``"vector"``, ``("coin", j)``,
    ``("keep", j)`` of :mod:`dpfreq.longitudinal.keyed`): the same secret and inputs give the
    same outputs, however often the randomizer is rebuilt from a saved state.

    Privacy
    -------
    Unit: one input vector ``x`` of length ``L`` (one device's partial sums of one order);
    neighbouring: any two such vectors with at most ``k`` non-zeros each. Every output vector has
    probability within a factor ``e^{certificate} ≤ e^ε`` across all of them, so the whole output
    sequence is ε-DP.

    Examples
    --------
    >>> r = make_randomizer("threshold", length=4, max_changes=2, epsilon=1.0, rng=3)
    >>> [r.step(j, x) in (-1, 1) for j, x in enumerate((1, 0, -1, 0), start=1)]
    [True, True, True, True]
    >>> r.certificate <= 1.0
    True
    """

    name: str = "randomizer"
    c_gap: float
    certificate: float

    def __init__(self, *, length: int, max_changes: int, epsilon: float,
                 key: DeviceKey | None = None, rng: RNGLike = None) -> None:
        with public_call(type(self).__name__):
            self.length = _validate.check_int(length, "length", minimum=1)
            self.max_changes = _validate.check_int(max_changes, "max_changes", minimum=1)
            self.epsilon = _validate.check_epsilon(epsilon, "epsilon")
            if key is not None and not isinstance(key, DeviceKey):
                raise ParameterError(_validate.message("key", "a DeviceKey or None",
                                                       type(key).__name__))
            self.key = key if key is not None else DeviceKey.create("randomizer", rng)
        self.j = 0  # last coordinate produced
        self.used = 0  # non-zero inputs seen

    def _refuse_if_uncertified(self) -> None:
        if not self.certificate <= self.epsilon:
            raise ParameterError(
                f"{type(self).__name__}: the privacy loss ln(p_max/p_min) exceeds epsilon "
                f"{self.epsilon!r}; refusing these parameters."
            )

    def _coin(self) -> int:
        return self.key.stream("coin", self.j).coin()

    def step(self, j: int, x: int) -> int:
        """Output ``y_j ∈ {−1, +1}`` for input ``x_j ∈ {−1, 0, 1}`` (online; ``j`` = 1, 2, ...)."""
        func = f"{type(self).__name__}.step"
        if not isinstance(j, int | np.integer) or int(j) != self.j + 1 or int(j) > self.length:
            raise DataError(_validate.message(
                "j", f"the next coordinate {self.j + 1} (of {self.length})", j))
        if isinstance(x, bool) or x not in (-1, 0, 1):
            raise DataError(_validate.message("x", "one of -1, 0, 1", x))
        self.j += 1
        if x == 0:
            return self._coin()
        if self.used >= self.max_changes:
            raise DataError(
                f"{func}: more than max_changes = {self.max_changes} non-zero inputs; changes "
                "beyond max_changes must be frozen before they reach the randomizer."
            )
        self.used += 1
        return self._nonzero(int(x))

    def _nonzero(self, x: int) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def _setup_mode(self, mode: str) -> None:  # pragma: no cover - abstract
        """Set up the law of mode ``mode`` (one of the names the class is registered under)
        and refuse it if uncertified."""
        raise NotImplementedError

    @classmethod
    def for_mode(cls, mode: str, *, length: int, max_changes: int, epsilon: float,
                 key: DeviceKey | None = None, rng: RNGLike = None) -> Randomizer:
        """A fresh randomizer of ``mode``, as its constructor builds it."""
        obj = cls.__new__(cls)
        Randomizer.__init__(obj, length=length, max_changes=max_changes, epsilon=epsilon,
                            key=key, rng=rng)
        obj._setup_mode(mode)
        return obj

    def state(self) -> dict[str, Any]:
        """JSON-ready state (counters; the randomness is a function of the key)."""
        return {"j": self.j, "used": self.used}

    def _restore(self, state: dict[str, Any]) -> None:
        self.j = _state_int(state, "j", 0, self.length)
        self.used = _state_int(state, "used", 0, min(self.max_changes, self.j))


def _state_int(state: dict[str, Any], key: str, low: int, high: int) -> int:
    value = state[key]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise DataError(f"randomizer state {key!r} must be an integer in {low}..{high}.")
    return value


class _DistanceRandomizer(Randomizer):
    """Pre-computed ``v = CR(1^k)``, a keyed function of the device secret (purpose
    ``"vector"``) sampled exactly from a distance law; the c-th non-zero input ``x`` gives
    ``y = v[c]·x``."""

    law: DistanceLaw

    def _setup(self, law: DistanceLaw) -> None:
        self.law = law
        self.name = law.name
        self.c_gap = law.c_gap
        # on a support of s < k non-zeros the output is a marginal of v, a sum of 2^{k−s}
        # vector probabilities: max w / min w of the sampled law bounds every ratio
        self.certificate = law.certificate
        self._refuse_if_uncertified()
        self.v = self.key.stream("vector").distance_vector(law.cumulative, law.k)

    def _nonzero(self, x: int) -> int:
        return self.v[self.used - 1] * x

    def _setup_mode(self, mode: str) -> None:
        self._setup(distance_law(mode, self.max_changes, self.epsilon))


@register_randomizer("rr")
class IndependentRR(_DistanceRandomizer):
    """Independent randomized response with ``ε/k`` per non-zero coordinate.

    ``c_gap ≈ tanh(ε/(2k))``. Implemented through its distance law (``v`` has independent
    coordinates), so it shares the exact sampler of FutureRand.
    """

    def __init__(self, *, length: int, max_changes: int, epsilon: float,
                 key: DeviceKey | None = None, rng: RNGLike = None) -> None:
        super().__init__(length=length, max_changes=max_changes, epsilon=epsilon, key=key,
                         rng=rng)
        self._setup_mode("rr")


@register_randomizer(*_VARIANTS.values())
class FutureRand(_DistanceRandomizer):
    """FutureRand: correlated randomness ``v = CR(1^k)`` pre-computed once.

    Parameters
    ----------
    length, max_changes, epsilon, rng : keyword-only
        As :class:`Randomizer`.
    variant : {"paper", "calibrated", "threshold"}, keyword-only
        ``"paper"`` (the reference mode): ``ε' = ε/(5√k)``, annulus ``[μ − 2√k, UB]``, a
        vector outside it resampled uniformly from the **complement**. ``"calibrated"``: the
        same shape with the smallest constant ``c`` in ``ε/(c√k)`` whose loss is ≤ ε.
        ``"threshold"``: ``q = e^ε·a`` inside a Hamming ball, ``a`` outside, with the radius
        of largest gap. The latter two are not in the paper.

    Notes
    -----
    Why it is ε-DP: the output is ``v[1..s]·x`` on the support (``s ≤ k``) and fair coins
    elsewhere; every vector ``v`` has probability ``w(ℓ)/N`` depending only on its number ℓ of
    ``−1`` entries, so ``Pr[y] = 2^{−(L−s)}·Σ_a C(k−s, a) w(ℓ_s + a)/N``, which lies in
    ``2^{k−L}·[min w, max w]/N``. The ratio ``max w / min w`` is checked ``≤ e^ε`` in integers.
    """

    @public_errors("FutureRand")
    def __init__(self, *, length: int, max_changes: int, epsilon: float, variant: str,
                 key: DeviceKey | None = None, rng: RNGLike = None) -> None:
        super().__init__(length=length, max_changes=max_changes, epsilon=epsilon, key=key,
                         rng=rng)
        variant = _validate.check_choice(variant, "variant", tuple(_VARIANTS))
        self._setup_mode(_VARIANTS[variant])


@register_randomizer("erlingsson")
class ErlingssonRR(Randomizer):
    """Erlingsson et al. (2020), "Amplification by shuffling": keep one change, randomize it.

    The client keeps only the ``r``-th change, ``r ~ U{1..k}`` drawn from ``[k]`` (not from the
    device's actual number of changes), so the input of this randomizer has **at most one**
    non-zero; that coordinate goes through exact randomized response with the **full** ε
    (the law of :func:`dpfreq.noise.randomized_response`), zeros through fair coins.

    ``c_gap`` is the *effective* gap ``tanh(γ/2)/k`` the server divides by (the factor ``k``
    undoes the sampling of ``r``). ``rr_gap = tanh(γ/2)`` is the gap on the kept change.

    Notes
    -----
    Given ``(h, r)`` every output has probability in
    ``[2^{−(L−1)}/(1+e^γ), 2^{−(L−1)}e^γ/(1+e^γ)]``, and the all-zero input gives ``2^{−L}``,
    inside that range; ``γ ≤ ε`` is ε rounded down to an exact fraction and the keep
    probability ``1/(1+e^{−γ})`` is sampled exactly (the parity of an exact geometric draw on
    the keyed stream ``("keep", j)``). The certificate is γ.
    """

    name = "erlingsson"

    def __init__(self, *, length: int, max_changes: int, epsilon: float,
                 key: DeviceKey | None = None, rng: RNGLike = None) -> None:
        super().__init__(length=length, max_changes=max_changes, epsilon=epsilon, key=key,
                         rng=rng)
        self._setup_mode(self.name)

    def _setup_mode(self, mode: str) -> None:
        self.gamma: Fraction = epsilon_to_fraction(self.epsilon)
        self.rr_gap = math.tanh(float(self.gamma) / 2.0)
        self.c_gap = self.rr_gap / self.max_changes
        self.certificate = float(self.gamma)
        self._refuse_if_uncertified()

    def step(self, j: int, x: int) -> int:
        """As :meth:`Randomizer.step`; at most one non-zero input in all."""
        if x in (-1, 1) and not isinstance(x, bool) and self.used >= 1:
            raise DataError(
                "ErlingssonRR.step: more than one non-zero input; the client keeps only the "
                "r-th change."
            )
        return super().step(j, x)

    def _restore(self, state: dict[str, Any]) -> None:
        super()._restore(state)
        if self.used > 1:
            raise DataError("randomizer state 'used' must be 0 or 1 for erlingsson.")

    def _nonzero(self, x: int) -> int:
        return x if self.key.stream("keep", self.j).keep(self.gamma) else -x


@fill_doc(common=_PARAMETERS)
@public_errors("make_randomizer")
def make_randomizer(method: str, *, length: int, max_changes: int, epsilon: float,
                    key: DeviceKey | None = None, rng: RNGLike = None) -> Randomizer:
    """``init(L, k, ε)`` of the randomizer ``method``.

    Parameters
    ----------
    method : {"rr", "erlingsson", "futurerand", "calibrated", "threshold", "auto"}
        ``"futurerand"`` uses the constants of Ohrimenko, Wirth & Wu (2022); ``"auto"`` picks
        the largest exact ``c_gap`` among rr, futurerand, calibrated and threshold (the
        resolved name is ``.name``).
    [[common]]

    Returns
    -------
    Randomizer
        A fresh randomizer, ready for ``step(1, x_1)``.

    Raises
    ------
    ParameterError
        If ``method`` is unknown or a parameter is out of range.

    Examples
    --------
    >>> make_randomizer("auto", length=8, max_changes=3, epsilon=1.0, rng=0).name
    'threshold'
    >>> make_randomizer("erlingsson", length=8, max_changes=3, epsilon=1.0, rng=0).certificate
    1.0
    """
    name = _validate.check_choice(method, "method", _modes(auto=True))
    if name == "auto":
        k = _validate.check_int(max_changes, "max_changes", minimum=1)
        eps = _validate.check_epsilon(epsilon, "epsilon")
        name = distance_law("auto", k, eps).name
    return RANDOMIZERS[name].for_mode(name, length=length, max_changes=max_changes,
                                      epsilon=epsilon, key=key, rng=rng)


def _modes(*, auto: bool) -> tuple[str, ...]:
    """The registered mode names (sorted), after ``"auto"`` when it is accepted."""
    return (("auto",) if auto else ()) + tuple(sorted(RANDOMIZERS))


@public_errors("restore_randomizer")
def restore_randomizer(name: str, *, length: int, max_changes: int, epsilon: float,
                       state: dict[str, Any], key: DeviceKey) -> Randomizer:
    """Rebuild a randomizer from :meth:`Randomizer.state` and the device's key (``v`` and
    every coin are the same keyed values as before the save).

    Raises
    ------
    DataError
        A state field of the wrong type or out of range.
    """
    name = _validate.check_choice(name, "name", _modes(auto=False))
    if not isinstance(state, dict):
        raise DataError("randomizer state must be a JSON object.")
    obj = RANDOMIZERS[name].for_mode(name, length=length, max_changes=max_changes,
                                     epsilon=epsilon, key=key)
    obj._restore(state)
    return obj
