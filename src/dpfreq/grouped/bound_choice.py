"""``max_groups_per_item="auto"``: the bound ``m`` chosen privately from a noisy histogram of
groups per item, to minimise the predicted total error (bias + noise).

A grouped release keeps for each item at most ``m`` of its groups. A small ``m`` drops the
(item, group) pairs past ``m`` (the per-group values are biased low); a large ``m`` spreads
each group's share of ε over more groups (each group's noise grows, like ``m²`` in variance
under pure accounting, like ``m`` under zCDP). With ``max_groups_per_item="auto"`` and
``capping_epsilon=ε_c`` the release measures, after the spend and before anything else is
drawn,

* the histogram ``h_v`` (``v = 1..M``) of the number of items holding ``min(g_i, M) = v``
  distinct groups (of the listed groups; under private selection of every group of the data,
  the set the cap applies over), ``M =`` :data:`AUTO_MAX_GROUPS` a public cap (the number of
  listed groups when fewer: :func:`candidate_bound`), each bin with independent exact discrete
  Laplace noise ``DLap(e^{−γ})``, ``γ <= ε_c``;

and chooses ``m`` among the public candidates ``1..M`` by post-processing of those ``M`` noisy
integers alone (:func:`choose_bound`): for every candidate the predicted total squared error
over the groups is

    ``E(m) = (max(D̂(m), 0) + sd D̂(m))² / G + G · V(m)``

with ``D̂(m) = Σ_v h̃_v (v − m)⁺`` the (unbiased) estimate of the pairs the cap drops, taken
one standard deviation high (``sd D̂(m) = √(Σ_v ((v − m)⁺)² Var Z)`` is public: choosing
``m`` too small costs a bias that grows quickly as ``m`` falls, too large only noise growing
about linearly in ``m``, so a noisy histogram leans the choice to the larger ``m``), spread
evenly over ``G`` groups (the bias per group ``D/G``), and ``V(m)`` one group's predicted
noise variance of its reach at ``m`` from the release's own plan (public). ``G`` is the
number of listed groups; under private selection (unknown before it) a lower estimate, the
most groups one item holds (:func:`groups_at_least`). The smallest ``m`` minimising ``E`` is
chosen. The dropped fraction at the chosen ``m`` is post-processing of the same histogram
(:func:`dpfreq.grouped.dropped.dropped_from_histogram`): no second charge.

**Privacy.** Unit ``"item"``: a neighbour adds or removes one item with all its rows. Every
other item's ``g_j`` depends on its own rows only, so the histogram changes in one bin by one:
ℓ1 sensitivity 1, and discrete Laplace noise at ``γ <= ε_c`` on each bin is pure ``ε_c``-DP
(checked by exact enumeration in the tests). The choice of ``m`` is post-processing. For every
fixed ``m`` the rest of the call is ``(ε − ε_c, δ)``-DP (the fixed-``m`` argument of
:mod:`dpfreq.grouped.driver`, planned before the spend at every candidate so that whether a
call is refused never depends on noise), so by adaptive sequential composition the call is
``(ε, δ)``-DP.

**Trade-off.** ``ε_c`` buys the histogram: each bin's noise has standard deviation about
``√2/ε_c`` items, small against the thousands of items where capping matters, but ``ε_c`` is
taken from the release (its noise grows by ``ε/(ε − ε_c)``). A few percent of ε is usually
enough (``docs/guide/grouped.md`` has the benchmark). The model assumes the dropped pairs spread
evenly over the groups: where a few groups hold most of the items it understates their bias
and leans to a smaller ``m``. Items holding more than ``M`` groups are counted as holding
``M`` (their dropped pairs understated).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._noise_laws import discrete_laplace_tail_bound, discrete_laplace_variance
from dpfreq._validate import message
from dpfreq.errors import ParameterError
from dpfreq.noise import discrete_laplace_gamma, sample_discrete_laplace

__all__ = ["AUTO_MAX_GROUPS", "BoundChoice", "candidate_bound", "choose_bound", "groups_at_least",
           "groups_histogram", "is_auto", "measure_histogram", "predicted_errors", "resolve_auto"]

#: ``M``: the largest candidate bound of ``max_groups_per_item="auto"`` (public)
AUTO_MAX_GROUPS = 16


def candidate_bound(groups: tuple[str, ...] | None) -> int:
    """``M``: :data:`AUTO_MAX_GROUPS`, or fewer with a public list of fewer groups (an item
    holds at most every listed group, so a larger ``m`` would only add noise).

    Examples
    --------
    >>> candidate_bound(None), candidate_bound(("a", "b", "c"))
    (16, 3)
    """
    return AUTO_MAX_GROUPS if groups is None else max(1, min(AUTO_MAX_GROUPS, len(groups)))


def is_auto(value: Any) -> bool:
    """Whether ``max_groups_per_item`` asks for the private choice (``"auto"``)."""
    return isinstance(value, str) and value == "auto"


def resolve_auto(max_groups_per_item: Any, capping_epsilon: Any, unit: str
                 ) -> tuple[Any, bool]:
    """``(m to check, auto)``: ``"auto"`` at ``unit="item"`` is checked as the largest
    candidate :data:`AUTO_MAX_GROUPS` and needs its share ``capping_epsilon`` given (no privacy
    parameter is defaulted); anything else is returned as given (its checks refuse it)."""
    if not is_auto(max_groups_per_item) or unit != "item":
        return max_groups_per_item, False
    if capping_epsilon is None:
        raise ParameterError(message(
            "capping_epsilon", "a number in (0, epsilon) with max_groups_per_item='auto' "
            "(the share of epsilon that measures the groups per item m is chosen from)",
            capping_epsilon))
    return AUTO_MAX_GROUPS, True


def groups_histogram(gp: Any, bound: int) -> NDArray[np.int64]:
    """``h_v``, ``v = 1..bound``: the items holding ``min(g_i, bound) = v`` distinct groups,
    from a grouped count-of-counts asked with ``per_item="distinct_groups"`` (an entry: ``p``
    items of a group hold ``v`` groups each, so ``Σ_groups p / v`` items hold ``v``; exact).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> gp = SimpleNamespace(counts=np.array([1, 3, 3, 3]), prevalences=np.array([2, 1, 1, 1]))
    >>> groups_histogram(gp, 2).tolist()  # two items with one group, one with three (→ 2)
    [2, 1]
    """
    v = np.asarray(gp.counts, dtype=np.int64).reshape(-1)
    p = np.asarray(gp.prevalences, dtype=np.int64).reshape(-1)
    values, where = np.unique(v, return_inverse=True)
    pairs = np.bincount(where.reshape(-1), weights=p, minlength=values.size).astype(np.int64)
    items = pairs // np.maximum(values, 1)
    out = np.zeros(bound, dtype=np.int64)
    keep = values >= 1
    np.add.at(out, np.minimum(values[keep], bound) - 1, items[keep])
    return out


def measure_histogram(hist: NDArray[np.int64], epsilon: float,
                      generator: np.random.Generator) -> tuple[NDArray[np.int64], Fraction]:
    """``(h + Z, γ)``: each bin plus independent ``DLap(e^{−γ})`` with ``γ <= ε_c`` (ℓ1
    sensitivity 1; the only random step of the choice, after the spend)."""
    gamma = discrete_laplace_gamma(epsilon, sensitivity=1)
    z = sample_discrete_laplace(gamma, hist.size, rng=generator)
    return np.asarray(hist, dtype=np.int64) + np.asarray(z, dtype=np.int64), gamma


def predicted_errors(noisy: NDArray[np.int64], gamma: Fraction | float,
                     variances: Mapping[int, float], n_groups: int | None) -> dict[int, float]:
    """``E(m)`` of the module docstring for every candidate in ``variances`` (post-processing
    of the noisy histogram and public numbers only).

    Parameters
    ----------
    noisy : numpy.ndarray of int64
        ``h̃_v``, ``v = 1..M``.
    gamma : Fraction or float
        The bins' noise parameter (public).
    variances : mapping of int to float
        ``V(m)``: one group's predicted noise variance of its reach at each candidate ``m``.
    n_groups : int or None
        ``G``, the number of listed groups; None under private selection (then
        :func:`groups_at_least` of the noisy histogram).

    Examples
    --------
    >>> e = predicted_errors(np.array([100, 0, 0, 100]), 1.0, {1: 2.0, 4: 32.0}, 10)
    >>> sorted(e), e[1] > e[4]  # 300 pairs dropped at m = 1 (~9,000 / G); 10 × 32 at m = 4
    ([1, 4], True)
    """
    h = np.asarray(noisy, dtype=np.float64)
    v = np.arange(1, h.size + 1, dtype=np.float64)
    var_z = discrete_laplace_variance(gamma)
    g = float(n_groups if n_groups is not None else groups_at_least(noisy, gamma))
    out: dict[int, float] = {}
    for m, var_m in sorted(variances.items()):
        w = np.maximum(v - m, 0.0)
        d_hat = float(h @ w)
        d_up = max(d_hat, 0.0) + float(np.sqrt(var_z * float(w @ w)))
        out[m] = d_up * d_up / g + g * float(var_m)
    return out


def groups_at_least(noisy: NDArray[np.int64], gamma: Fraction | float) -> int:
    """Under private selection, ``G`` is unknown before it: the most groups one item holds
    (every group of such an item is a group of the data), read from the noisy histogram as the
    largest ``v`` whose bin exceeds the noise's exact ``1 − 10⁻³/M`` quantile (1 when none
    does). A lower estimate: it overstates each group's share of the dropped pairs and
    understates the groups' total noise, so it leans to the larger ``m``, as the sd-high
    estimate does.

    Examples
    --------
    >>> groups_at_least(np.array([500, 300, 2, 40, 0]), 1.0)
    4
    """
    h = np.asarray(noisy, dtype=np.int64)
    q = discrete_laplace_tail_bound(1e-3 / max(1, h.size), gamma)
    above = np.flatnonzero(h > q)
    return int(above[-1]) + 1 if above.size else 1


def choose_bound(errors: Mapping[int, float]) -> int:
    """The smallest candidate ``m`` with the least predicted error.

    Examples
    --------
    >>> choose_bound({1: 5.0, 2: 3.0, 3: 3.0})
    2
    """
    best = min(errors.values())
    return min(m for m, e in errors.items() if e == best)


@dataclass(frozen=True)
class BoundChoice:
    """How ``max_groups_per_item="auto"`` chose ``m`` (``mechanism_params["bound_choice"]``).

    Attributes
    ----------
    chosen : int
        The bound used.
    epsilon : float
        ``ε_c``, the share of the call's ε that measured the histogram (basic composition).
    gamma : float
        The bins' discrete Laplace parameter ``γ <= ε_c`` (ℓ1 sensitivity 1).
    noisy_histogram : tuple of int
        ``h̃_v``, ``v = 1..M``: the measurement (everything else is computed from it).
    predicted : dict of int to float
        ``E(m)`` of every candidate that could be planned (module docstring).
    n_groups : int or None
        ``G`` with a public list (None: estimated per candidate under selection).
    """

    chosen: int
    epsilon: float
    gamma: float
    noisy_histogram: tuple[int, ...]
    predicted: dict[int, float]
    n_groups: int | None

    @property
    def bound(self) -> int:
        """``M``, the largest candidate."""
        return len(self.noisy_histogram)

    @property
    def why(self) -> str:
        """One sentence: what was measured and why this ``m``."""
        top = sorted(self.predicted, key=lambda m: (self.predicted[m], m))[:3]
        shown = ", ".join(f"m = {m}: {self.predicted[m]:.4g}" for m in top)
        g = (f"{self.n_groups} listed groups" if self.n_groups is not None else
             "the groups of the data, at least the most one item holds (estimated)")
        return (f"m = {self.chosen} chosen from 1..{self.bound} with ε_c = {self.epsilon:g} "
                "(a histogram of the items' number of groups, capped at "
                f"M = {self.bound}, exact discrete Laplace on each bin, ℓ1 sensitivity 1; the "
                "choice is post-processing): it minimises the predicted total squared error "
                "over the groups, the dropped pairs' squared bias spread evenly over "
                f"{g} plus each group's noise variance from the release's plan (lowest: "
                f"{shown})")

    def to_dict(self) -> dict[str, Any]:
        """The public fields, JSON-ready (the predicted errors keyed by ``str(m)``)."""
        return {"chosen": self.chosen, "epsilon": self.epsilon, "gamma": self.gamma,
                "bound": self.bound, "noisy_histogram": list(self.noisy_histogram),
                "predicted": {str(m): e for m, e in self.predicted.items()},
                "n_groups": self.n_groups, "why": self.why}

    @classmethod
    def from_dict(cls, d: Any) -> BoundChoice:
        """The choice from :meth:`to_dict` (a saved release); ValueError when malformed."""
        try:
            hist = tuple(int(x) for x in d["noisy_histogram"]
                         if isinstance(x, int) and not isinstance(x, bool))
            pred = {int(m): float(e) for m, e in d["predicted"].items()}
            g = d["n_groups"]
            out = cls(int(d["chosen"]), float(d["epsilon"]), float(d["gamma"]), hist, pred,
                      None if g is None else int(g))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ValueError("bound_choice is malformed") from None
        if len(hist) != len(d["noisy_histogram"]) or not 1 <= out.chosen <= len(hist):
            raise ValueError("bound_choice is malformed")
        return out
