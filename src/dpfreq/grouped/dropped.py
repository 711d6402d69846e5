"""The private estimate of the fraction of (item, group) pairs a grouped release's cap dropped.

A grouped release keeps for each item at most ``m`` of its groups
(:mod:`dpfreq.grouped.capping`), so its per-group values are biased low where items hold more
than ``m`` groups. With ``capping_epsilon=ε_c`` it also measures how much the cap dropped:
with ``g_i`` the number of distinct groups of item ``i`` (of the listed groups, or under
private selection of the selected groups: the set the cap was applied over) and the public
bound ``M = 4m`` (:func:`capping_bound`), the engine computes the two sums

* ``T = Σ_i min(g_i, M)`` (the pairs, each item's counted up to ``M``) and
* ``D = Σ_i min(max(g_i − m, 0), M − m)`` (the pairs the cap dropped, counted alike),

and each gets independent exact discrete Laplace noise ``DLap(e^{−γ})`` with
``γ <= ε_c / (2M − m)`` (:func:`dpfreq.noise.discrete_laplace_gamma`). The released fraction
is ``D̃ / T̃`` clipped to ``[0, (M − m)/M]`` (post-processing of the two noisy integers).

**Privacy.** Unit ``"item"``: a neighbour adds or removes one item with all its rows. Every
other item's ``g_j`` depends on its own rows only, so ``T`` moves by ``min(g_i, M) <= M`` and
``D`` by ``min(max(g_i − m, 0), M − m) <= M − m``: the pair ``(T, D)`` has ℓ1 sensitivity
``2M − m`` (attained by an item holding ``M`` groups or more; checked by enumeration in the
tests), and discrete Laplace noise at ``γ <= ε_c/(2M − m)`` on each coordinate is pure
``ε_c``-DP. The rest of the call runs at ``ε − ε_c`` (rounded down), so by basic sequential
composition the call is ``(ε, δ)``-DP. At ``unit="event"`` nothing is capped (one row lies in
one group, ``m`` is refused), so there is nothing to measure and ``capping_epsilon`` is refused
(one event would change its item's ``g_i`` by at most 1, each sum by at most 1, but the
dropped fraction is 0 by construction).

**Why M.** ``M`` bounds one item's contribution, hence the noise (scale ``(2M − m)/ε_c``);
``M = 4m`` measures every item holding up to ``4m`` groups exactly and an item holding more
as if it held ``4m`` (its dropped share counted as ``3/4``, below its true ``1 − m/g_i``):
the estimate can only understate the dropped fraction, never overstate it, and the bound is
public (a function of ``m`` alone, never of the data).

**Interval.** With ``q`` the exact ``1 − β/2`` quantile of ``|Z|`` (β = 1 − confidence;
:func:`dpfreq._noise_laws.discrete_laplace_tail_bound`), both ``|T̃ − T| <= q`` and
``|D̃ − D| <= q`` hold with probability at least ``1 − β`` (union bound), and then the true
fraction ``D/T`` lies in ``[max(D̃ − q, 0)/(T̃ + q), min((D̃ + q)/(T̃ − q), (M − m)/M)]``
(the upper end ``(M − m)/M`` when ``T̃ <= q``): a conservative interval.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields
from fractions import Fraction
from typing import Any

import numpy as np

from dpfreq._noise_laws import discrete_laplace_tail_bound
from dpfreq._validate import check_epsilon, message
from dpfreq.errors import DPFreqWarning, ParameterError, user_stacklevel
from dpfreq.grouped.accounting import epsilon_at_most
from dpfreq.noise import discrete_laplace_gamma, sample_discrete_laplace

__all__ = ["WARN_ABOVE", "CappingSums", "DroppedFraction", "capping_bound", "capping_sums",
           "check_capping_epsilon", "dropped_from_histogram", "dropped_interval",
           "measure_dropped", "release_epsilon"]

#: the lower end of the interval above which the release warns (:class:`DPFreqWarning`)
WARN_ABOVE = 0.10


def capping_bound(m: int) -> int:
    """``M = 4m``: the public bound on one item's groups counted by the estimate (module
    docstring).

    Examples
    --------
    >>> capping_bound(3)
    12
    """
    return 4 * int(m)


def check_capping_epsilon(value: Any, epsilon: float, m: int | None
                          ) -> float | None:
    """``capping_epsilon`` checked: None (not measured) or a number in (0, ε); refused when
    nothing is capped (``m`` None: ``unit="event"``)."""
    if value is None:
        return None
    if m is None:
        raise ParameterError(message("capping_epsilon", "None when nothing is capped "
                                     "(unit='event': each row lies in one group)", value))
    rule = f"None or a number in (0, epsilon = {epsilon:g}) (the release spends the rest)"
    real = isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool)
    if not real or not 0.0 < float(value) < epsilon:
        raise ParameterError(message("capping_epsilon", rule, value))
    return check_epsilon(value, "capping_epsilon")


def release_epsilon(epsilon: float, capping_epsilon: float | None) -> float:
    """What the release itself spends: ``ε − ε_c`` rounded down (``ε`` when not measured)."""
    if capping_epsilon is None:
        return epsilon
    return epsilon_at_most(Fraction(epsilon) - Fraction(capping_epsilon))


@dataclass(frozen=True)
class CappingSums:
    """The exact sums ``T`` and ``D`` of the module docstring (private, never shown)."""

    total: int
    dropped: int


def capping_sums(gp: Any, m: int, bound: int) -> CappingSums:
    """``T`` and ``D`` from a grouped count-of-counts asked with
    ``per_item="distinct_groups"`` (entry: ``p`` items of a group hold ``v`` groups each): the
    items holding ``v`` groups number ``Σ_groups p / v`` (each is in ``v`` groups), exactly.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> gp = SimpleNamespace(counts=np.array([1, 3, 3, 3]), prevalences=np.array([2, 1, 1, 1]))
    >>> capping_sums(gp, 1, 4)  # two items with one group, one with three
    CappingSums(total=5, dropped=2)
    """
    v = np.asarray(gp.counts, dtype=np.int64)
    p = np.asarray(gp.prevalences, dtype=np.int64)
    values, where = np.unique(v, return_inverse=True)
    pairs = np.bincount(where.reshape(-1), weights=p, minlength=values.size).astype(np.int64)
    items = pairs // np.maximum(values, 1)
    total = int(np.sum(items * np.minimum(values, bound)))
    dropped = int(np.sum(items * np.minimum(np.maximum(values - m, 0), bound - m)))
    return CappingSums(total, dropped)


def dropped_interval(noisy_total: int, noisy_dropped: int, q: int, m: int, bound: int
                     ) -> tuple[float, float, float]:
    """``(estimate, lower, upper)`` of the dropped fraction from the two noisy sums and the
    noise quantile ``q`` (post-processing only; module docstring).

    Examples
    --------
    >>> dropped_interval(1000, 200, 10, 1, 4)
    (0.2, 0.18811881188118812, 0.21212121212121213)
    """
    top = (bound - m) / bound
    est = min(max(noisy_dropped / noisy_total, 0.0), top) if noisy_total > 0 else 0.0
    lower = min(max(noisy_dropped - q, 0) / (noisy_total + q), top) if noisy_total + q > 0 \
        else 0.0
    upper = min((noisy_dropped + q) / (noisy_total - q), top) if noisy_total > q else top
    return est, lower, max(upper, 0.0)


@dataclass(frozen=True)
class DroppedFraction:
    """The released dropped fraction of a grouped call (``rel.dropped_fraction``).

    Attributes
    ----------
    value : float
        The estimated fraction of (item, group) pairs the cap dropped (items counted up to
        ``bound`` groups).
    lower, upper : float
        The interval holding the true fraction with probability at least ``confidence``.
    confidence : float
        Its confidence.
    epsilon : float
        ``ε_c``, the share of the call's ε that measured it (basic composition with the rest).
    max_groups_per_item, bound : int
        ``m`` and the public bound ``M = 4m``.
    sensitivity : int
        ℓ1 sensitivity ``2M − m`` of the two sums at ``unit="item"``.
    gamma : float
        The discrete Laplace parameter ``γ <= ε_c/(2M − m)`` of each sum's noise.
    noisy_total, noisy_dropped : int
        The two noisy sums (the measurement; everything else is computed from them).
    noise_quantile : int
        ``q``: each sum's noise exceeds ``q`` in magnitude with probability at most
        ``(1 − confidence)/2`` (measured from the histogram: both sums' noises are within
        ``q`` together with probability at least ``confidence``).
    measurement : {"sums", "histogram", "stream"}
        What was noised: the two sums (a fixed ``m``), the histogram of groups per item
        of ``max_groups_per_item="auto"`` (:mod:`dpfreq.grouped.bound_choice`; ``M`` its
        largest candidate, the sums post-processing of it), or the increments of the two sums
        counted online by a reach stream (:mod:`dpfreq.stream.capping`; ``gamma`` of its
        counters' first epoch, ``noise_quantile`` each counter's half-width at
        ``(1 − confidence)/2``).
    """

    value: float
    lower: float
    upper: float
    confidence: float
    epsilon: float
    max_groups_per_item: int
    bound: int
    sensitivity: int
    gamma: float
    noisy_total: int
    noisy_dropped: int
    noise_quantile: int
    measurement: str = "sums"

    @property
    def _noised(self) -> str:
        if self.measurement == "histogram":
            return (f"the histogram of the items' number of groups (M = {self.bound} bins, ℓ1 "
                    "sensitivity 1; the two sums and the choice of m are post-processing)")
        if self.measurement == "stream":
            return ("two online counters of the per-period increments of the two sums (one "
                    f"item adds at most 2M − m = {2 * self.bound - self.max_groups_per_item} "
                    "over the whole stream; each counter's noise is calibrated to that mass)")
        return f"two sums of ℓ1 sensitivity 2M − m = {self.sensitivity}"

    @property
    def description(self) -> str:
        """One sentence: what was measured, the interval and what it means."""
        m, big = self.max_groups_per_item, self.bound
        return (f"The cap at m = {m} dropped an estimated {self.value:.3%} of the (item, group) "
                f"pairs (interval [{self.lower:.3%}, {self.upper:.3%}] with probability at "
                f"least {self.confidence:g}; each item counted up to M = {big} groups), "
                f"measured with ε_c = {self.epsilon:g} (pure, exact discrete Laplace noise on "
                f"{self._noised}; basic composition with the rest of the call).")

    @property
    def split(self) -> str:
        """How the call's ε is shared with this measurement (``mechanism_params["capping"]``)."""
        return (f"ε_c = {self.epsilon:g} of ε measures the fraction of (item, group) pairs the "
                f"cap dropped (pure ε_c-DP: exact discrete Laplace on {self._noised}, "
                f"M = {self.bound}); the rest of ε is accounted as stated (basic composition)")

    @classmethod
    def from_dict(cls, d: Any) -> DroppedFraction:
        """The estimate from :meth:`to_dict` (a saved release); ValueError when malformed."""
        if not isinstance(d, dict):
            raise ValueError("dropped_fraction must be a mapping")
        names = [f.name for f in fields(cls)]
        kinds = {f.name: f.type for f in fields(cls)}
        out: dict[str, Any] = {}
        for name in names:
            x = d.get(name)
            if name == "measurement":
                if x not in (None, "sums", "histogram", "stream"):
                    raise ValueError("dropped_fraction['measurement'] is malformed")
                out[name] = x or "sums"
                continue
            want = int if kinds[name] in ("int", int) else float
            if isinstance(x, bool) or not isinstance(x, int | float) or (
                    want is int and not isinstance(x, int)):
                raise ValueError(f"dropped_fraction[{name!r}] is malformed")
            out[name] = want(x)
        return cls(**out)

    def to_dict(self) -> dict[str, Any]:
        """The public fields, JSON-ready."""
        return {"value": self.value, "lower": self.lower, "upper": self.upper,
                "confidence": self.confidence, "epsilon": self.epsilon,
                "max_groups_per_item": self.max_groups_per_item, "bound": self.bound,
                "sensitivity": self.sensitivity, "gamma": self.gamma,
                "noisy_total": self.noisy_total, "noisy_dropped": self.noisy_dropped,
                "noise_quantile": self.noise_quantile, "measurement": self.measurement,
                "description": self.description}


def measure_dropped(sums: CappingSums, *, epsilon: float, m: int, confidence: float,
                    generator: np.random.Generator) -> DroppedFraction:
    """Noise the two sums (the only random step; after the spend) and build the estimate,
    warning (:class:`DPFreqWarning`) when the interval's lower end exceeds
    :data:`WARN_ABOVE`."""
    bound = capping_bound(m)
    sens = 2 * bound - m
    gamma = discrete_laplace_gamma(epsilon, sensitivity=sens)
    z = sample_discrete_laplace(gamma, 2, rng=generator)
    noisy_total, noisy_dropped = sums.total + int(z[0]), sums.dropped + int(z[1])
    q = discrete_laplace_tail_bound((1.0 - confidence) / 2.0, gamma)
    est, lower, upper = dropped_interval(noisy_total, noisy_dropped, q, m, bound)
    out = DroppedFraction(est, lower, upper, confidence, epsilon, m, bound, sens,
                          float(gamma), noisy_total, noisy_dropped, q)
    warn_if_large(out)
    return out


def dropped_from_histogram(noisy: Any, gamma: Fraction, *, epsilon: float, m: int,
                           confidence: float) -> DroppedFraction:
    """The dropped fraction at ``m`` from the noisy histogram ``h̃_v`` (``v = 1..M``) of
    :mod:`dpfreq.grouped.bound_choice` (post-processing only): ``T̃ = Σ_v h̃_v v`` and
    ``D̃ = Σ_v h̃_v (v − m)⁺``. With ``q`` the exact ``1 − β/M`` quantile of one bin's
    ``|Z|``, every bin's noise is within ``q`` with probability at least ``1 − β`` (union
    bound), and then both sums within ``q Σ_v v``, the quantile the interval uses.

    Examples
    --------
    >>> d = dropped_from_histogram([100, 0, 0, 100], Fraction(1), epsilon=1.0, m=2,
    ...                            confidence=0.95)
    >>> d.noisy_total, d.noisy_dropped, d.value
    (500, 200, 0.4)
    """
    h = np.asarray(noisy, dtype=np.int64)
    bound = int(h.size)
    v = np.arange(1, bound + 1, dtype=np.int64)
    noisy_total = int(h @ v)
    noisy_dropped = int(h @ np.maximum(v - m, 0))
    q = discrete_laplace_tail_bound((1.0 - confidence) / bound, gamma) * int(v.sum())
    est, lower, upper = dropped_interval(noisy_total, noisy_dropped, q, m, bound)
    out = DroppedFraction(est, lower, upper, confidence, epsilon, m, bound, 1, float(gamma),
                          noisy_total, noisy_dropped, q, "histogram")
    warn_if_large(out)
    return out


def warn_if_large(out: DroppedFraction) -> None:
    """Warn (:class:`DPFreqWarning`, at the user's call) when the interval's lower end exceeds
    :data:`WARN_ABOVE`."""
    if out.lower > WARN_ABOVE:
        remedy = ("a new stream with a larger max_groups_per_item would drop fewer (a "
                  "stream's bound is fixed at its creation)" if out.measurement == "stream"
                  else "raise max_groups_per_item")
        warnings.warn(f"the cap max_groups_per_item = {out.max_groups_per_item} dropped at "
                      f"least {out.lower:.1%} of the (item, group) pairs (estimate "
                      f"{out.value:.1%}, confidence {out.confidence:g}): per-group values are "
                      f"biased low; {remedy}.",
                      DPFreqWarning, stacklevel=user_stacklevel())
