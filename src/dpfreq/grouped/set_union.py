"""Weighted set-union partition selection: an item spreads one unit of weight over its groups.

The truncated geometric mechanism (:mod:`dpfreq.grouped.selection`) noises each group's item
count as if every item held ``m`` groups: each group gets ``ε/m``. Most items hold fewer. The
**weighted Laplace** set union of Gopi, Gulhane, Kulkarni, Shen, Shokouhi & Yekhanin (2020)
lets an item that kept ``s <= m`` groups give each of them weight ``1/s``, so that one item
moves the vector of group weights by at most 1 in ℓ1 whatever ``s`` is, and noises the whole
vector once at ε. A group whose items hold one group each needs about ``m`` times fewer items.

**The mechanism, on integers.** Let ``L = lcm(1, …, min(m, 12))`` (the public *scale*; 840
for ``m = 8``). After the bounding (each item keeps at most ``m`` of its groups, by the keyed
rank of :mod:`dpfreq.engines.grouping`), an item with ``s`` kept groups gives each of them the
integer weight ``w_s = ⌊L/s⌋`` (``s·w_s <= L``). A group's weight is
``H_g = Σ_{items of g} w_{s(item)}``; only groups with ``H_g >= 1`` (present in the bounded
data) are candidates. Each candidate draws independent exact discrete Laplace noise
``Z_g ~ DLap(e^{−γ})``, ``γ = ε/L`` (an exact fraction, rounded down), and

    release g  ⇔  H_g + Z_g >= τ,

with ``τ`` the smallest integer ``> L`` for which ``max_{1<=s<=m} s·α^{τ−w_s}/(1+α) <= δ``
(``α = e^{−γ}``). The noisy weights are never published, only the names passing ``τ``.

**Why it is (ε, δ)-DP.** Take neighbours ``D`` and ``D' = D + u`` (one item ``u`` with all its
rows). The bounding of every other item depends on its own rows only, so the items' kept sets
and ``s`` are the same on both sides except for ``u``, which adds ``w_{s_u}`` to each of its
``s_u`` kept groups: ``‖H' − H‖₁ = s_u·w_{s_u} <= L``. Split ``u``'s groups into *common* ones
(present in ``D``) and *new* ones (held by ``u`` alone, candidates only in ``D'``).

* On the common candidates the noisy vectors ``H + Z`` and ``H' + Z`` have probability ratio at
  most ``α^{−‖H'−H‖₁} <= e^{γL} <= e^{ε}`` at every point (a product of discrete Laplace
  pmfs), so the set of released common groups is ε-DP (thresholding is post-processing).
* The new groups, at most ``s_u`` of them with weight ``w_{s_u}`` each, are released (in ``D'``)
  with probability at most ``s_u·Pr[Z >= τ − w_{s_u}] = s_u α^{τ−w_{s_u}}/(1+α) <= δ``
  (``τ − w_s >= 1``, where ``Pr[Z >= j] = α^j/(1+α)``), independently of the rest.

Let ``C`` be the common part and ``N`` the event that a new group is released
(``Pr[N] <= δ``). For any set ``O`` of outputs, with ``O₀`` its outputs without new groups:
``Pr[M(D') ∈ O] <= Pr[C(D') ∈ O₀] + Pr[N] <= e^ε Pr[M(D) ∈ O] + δ``; and with
``x = Pr[C(D') ∈ O₀]``, ``Pr[M(D) ∈ O] <= min(1, e^ε x)`` while
``Pr[M(D') ∈ O] >= x (1 − Pr[N])``, and ``min(1, e^ε x) <= e^ε x (1 − Pr[N]) + Pr[N]`` (if
``e^ε x <= 1`` the difference is ``e^ε x Pr[N] <= Pr[N]``, otherwise the right side is at least
``1 − Pr[N] + Pr[N]``). So the selection is ``(ε, δ)``-DP under adding or removing one item.

**Exact arithmetic.** ``γ`` is the exact fraction the sampler uses and ``Lγ <= ε`` on
fractions; ``τ`` is certified on fractions with outward-rounded exponentials
(:func:`dpfreq.accounting.numbers.exp_bound`): the bound ``δ̄ = max_s s·ᾱ_s/(1 + α̲)`` it
checks is above the exact value, and :attr:`SetUnionPlan.bad_probability` states it. The
noise is :func:`dpfreq.noise.sample_discrete_laplace` (exact).

**Against the truncated geometric.** When every item holds ``m`` groups the truncated
geometric needs fewer items (it is optimal per group, and the set union pays for the worst
split of a new item's weight); when items hold fewer groups the set union needs fewer.
:func:`dpfreq.grouped.selection.plan_partition_selection` compares the two at the *break-even*
``s*``: the largest number of groups per item at which a group needs no more items under the
set union than under the truncated geometric to be released half the time.

Policy variants (Gopi et al.'s policy Laplace and Gaussian, which stop giving weight to groups
already far above the threshold) are not implemented: a greedy policy that fills the groups
nearest the cutoff first is not ℓ1-contractive (an earlier item's weight can change a later
item's split by more than it added), and water-filling (lowest groups first), which is, released
fewer groups than the weighted rule on the long-tail site log of
``benchmarks/bench_selection.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._docstrings import fill_doc
from dpfreq._validate import check_epsilon, check_int
from dpfreq.accounting.losses import ApproximateDP
from dpfreq.accounting.numbers import exp_bound, fixed_point
from dpfreq.errors import public_errors
from dpfreq.noise import epsilon_to_fraction, sample_discrete_laplace

__all__ = ["SELECTION_PARAMETERS", "SetUnionPlan", "plan_set_union", "set_union_scale",
           "set_union_weights"]

#: The numpydoc entries of the privacy parameters every selection plan takes (fill_doc).
SELECTION_PARAMETERS = """epsilon : float
    ε spent on the selection.
delta : float
    δ in (0, 1e-3].
max_groups_per_item : int
    ``m >= 1``.
why : str
    How the mechanism was chosen, kept in the plan."""

#: ``m`` above which the scale stops growing (``lcm(1..12) = 27,720``): beyond it an item's
#: weight ``⌊L/s⌋`` loses less than ``m/L`` of its share to the floor.
_SCALE_CAP = 12


def set_union_scale(max_groups_per_item: int) -> int:
    """``L = lcm(1, …, min(m, 12))``: the integer weight one item spreads over its groups.

    Examples
    --------
    >>> set_union_scale(1), set_union_scale(8), set_union_scale(50)
    (1, 840, 27720)
    """
    out = 1
    for s in range(2, min(max_groups_per_item, _SCALE_CAP) + 1):
        out = out * s // math.gcd(out, s)
    return out


def _weights(scale: int, m: int) -> list[int]:
    """``[w_1, …, w_m]``, ``w_s = ⌊L/s⌋``."""
    return [scale // s for s in range(1, m + 1)]


def _bad_bound(tau: int, gamma: Fraction, weights: list[int]) -> Fraction:
    """An upper bound, on fractions, of ``max_s s·α^{τ−w_s}/(1+α)``."""
    alpha_low = exp_bound(-gamma, up=False)
    top = max(s * exp_bound(-(tau - w) * gamma, up=True) for s, w in enumerate(weights, 1))
    return fixed_point(top / (1 + alpha_low), up=True)


@dataclass(frozen=True)
class SetUnionPlan:
    """The calibrated weighted set-union selection of one grouped call (module docstring).

    Attributes
    ----------
    epsilon, delta : float
        What the selection spends.
    max_groups_per_item : int
        ``m``.
    scale : int
        ``L``: the weight one item spreads (``⌊L/s⌋`` to each of its ``s`` groups).
    gamma : Fraction
        The noise parameter ``γ = ε/L`` (an exact fraction, rounded down).
    threshold : int
        ``τ``: a group is released when its noisy weight is at least ``τ``.
    bad_probability : Fraction
        The certified bound on the chance that an item's own groups are released (``<= δ``).
    why : str
        How the mechanism was chosen (:func:`dpfreq.grouped.selection.plan_partition_selection`).
    """

    epsilon: float
    delta: float
    max_groups_per_item: int
    scale: int
    gamma: Fraction
    threshold: int
    bad_probability: Fraction
    why: str = ""

    mechanism = "weighted_set_union"
    #: what the engine counts per item for this selection (its number of kept groups)
    per_item = "groups"

    def weight(self, groups_per_item: int) -> int:
        """``w_s = ⌊L/s⌋``: the weight an item with ``s`` kept groups gives each."""
        return self.scale // int(groups_per_item)

    def release_probability(self, weight: int) -> float:
        """``Pr[weight + Z >= τ]`` (0 for a group absent from the data, ``weight <= 0``)."""
        if weight <= 0:
            return 0.0
        j = self.threshold - int(weight)
        alpha = math.exp(-float(self.gamma))
        if j >= 1:
            return float(math.exp(-j * float(self.gamma)) / (1 + alpha))
        return 1.0 - float(math.exp(-(1 - j) * float(self.gamma)) / (1 + alpha))

    def count_for(self, probability: float, groups_per_item: int = 1) -> int:
        """The smallest number of items, each holding ``groups_per_item`` groups, that makes a
        group released with at least ``probability``."""
        w = self.weight(groups_per_item)
        lo, hi = 1, 2 * self.threshold // w + 2
        while self.release_probability(hi * w) < probability:
            hi *= 2
        while lo < hi:
            mid = (lo + hi) // 2
            if self.release_probability(mid * w) >= probability:
                hi = mid
            else:
                lo = mid + 1
        return lo

    @property
    def single_item_probability(self) -> float:
        """The certified bound on the chance that the groups only one item holds are released
        (``<= δ``)."""
        return float(self.bad_probability)

    @property
    def loss(self) -> ApproximateDP:
        """The selection's privacy loss: ``(Lγ, δ̄)``-DP (module docstring)."""
        return ApproximateDP(self.scale * self.gamma, self.bad_probability)

    def to_dict(self) -> dict[str, Any]:
        """The plan in words and numbers (for ``mechanism_params``)."""
        m = self.max_groups_per_item
        return {"mechanism": "weighted set union (Gopi et al. 2020, weighted Laplace): an "
                             "item with s kept groups gives each the weight floor(L/s); exact "
                             "discrete Laplace noise on each group's weight",
                "epsilon": self.epsilon, "delta": self.delta, "max_groups_per_item": m,
                "scale": self.scale, "gamma": str(self.gamma), "threshold": self.threshold,
                # keyed by groups per item, as strings (a JSON object's keys)
                "items_for_half_chance": {str(s): self.count_for(0.5, s) for s in (1, m)},
                "items_for_95_percent": {str(s): self.count_for(0.95, s) for s in (1, m)},
                "single_item_release_probability": self.single_item_probability,
                "why": self.why,
                "guarantee": f"(ε={self.epsilon:g}, δ={self.delta:g}): one item moves the "
                             f"weights by at most L = {self.scale} in ℓ1; the groups it alone "
                             f"holds are released with probability at most "
                             f"{self.single_item_probability:.3g} <= δ"}

    def select(self, names: list[str], weights: NDArray[np.int64],
               generator: np.random.Generator) -> tuple[str, ...]:
        """The names whose noisy weight reaches ``τ`` (``weights >= 1``), sorted by name."""
        w = np.asarray(weights, dtype=np.int64)
        if w.size == 0:
            return ()
        noisy = w + sample_discrete_laplace(self.gamma, w.size, rng=generator)
        return tuple(sorted(str(names[int(i)]) for i in np.flatnonzero(noisy >= self.threshold)))


def set_union_weights(group_index: NDArray[np.int64], groups_per_item: NDArray[np.int64],
                      items: NDArray[np.int64], n_groups: int, scale: int) -> NDArray[np.int64]:
    """Each group's weight ``Σ_s n_{g,s} ⌊L/s⌋`` from the engine's sparse ``(group, s, number
    of items)`` entries."""
    w = (scale // np.asarray(groups_per_item, dtype=np.int64)) * np.asarray(items, np.int64)
    return np.bincount(np.asarray(group_index, dtype=np.int64), weights=w,
                       minlength=n_groups).astype(np.int64)


@fill_doc(selection_parameters=SELECTION_PARAMETERS)
@public_errors("plan_set_union")
def plan_set_union(epsilon: float, delta: float, max_groups_per_item: int,
                   why: str = "") -> SetUnionPlan:
    """Calibrate the weighted set union: ``L``, ``γ = ε/L`` and the certified threshold ``τ``
    (``delta`` is checked by the caller).

    Parameters
    ----------
    [[selection_parameters]]

    Returns
    -------
    SetUnionPlan
        ``τ`` is the smallest integer ``> L`` whose certified bound
        ``max_s s·α^{τ−⌊L/s⌋}/(1+α)`` (exponentials rounded outward on fractions) is at most δ.

    Examples
    --------
    >>> plan = plan_set_union(0.5, 1e-6, 8)
    >>> plan.scale, plan.threshold, plan.bad_probability <= 1e-6
    (840, 25645, True)
    """
    eps = check_epsilon(epsilon, "epsilon")
    m = check_int(max_groups_per_item, "max_groups_per_item", minimum=1)
    scale = set_union_scale(m)
    gamma = epsilon_to_fraction(epsilon_to_fraction(eps) / scale)
    weights = _weights(scale, m)
    target = Fraction(delta)
    g = float(gamma)
    # float guess: s·e^{−γ(τ−w_s)}/(1+e^{−γ}) = δ, then certified steps on fractions
    guess = max(w + math.ceil((math.log(s / delta) - math.log1p(math.exp(-g))) / g)
                for s, w in enumerate(weights, 1))
    tau = max(scale + 1, guess)
    while _bad_bound(tau, gamma, weights) > target:
        tau += 1
    while tau - 1 > scale and _bad_bound(tau - 1, gamma, weights) <= target:
        tau -= 1
    return SetUnionPlan(epsilon=eps, delta=float(delta), max_groups_per_item=m, scale=scale,
                        gamma=gamma, threshold=tau,
                        bad_probability=_bad_bound(tau, gamma, weights), why=why)
