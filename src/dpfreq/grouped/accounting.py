"""How a grouped release of pure-DP mechanisms spends its (ε, δ): per-group ε/m or zCDP.

An item touches at most ``m`` groups (``m = 1`` at ``unit="event"``: one row lies in one
group); every group's release is a pure ``ε_g``-DP mechanism (the direct profile, PrivHist,
Hay). The groups' releases together must be ``(ε_r, δ_r)``-DP, where ``(ε_r, δ_r)`` is the
call's budget less what the private partition selection spends (:mod:`dpfreq.grouped.selection`).
Two arguments are valid:

* **pure**: ``ε_g = ε_r/m``. Basic composition over the ``m`` groups an item touches (parallel
  composition over the others) gives ``ε_r``-DP; with ``m = 1`` this is parallel composition
  alone, and it needs no δ.
* **zCDP across groups** (``δ_r > 0``, ``m >= 2``): a pure ``ε_g``-DP mechanism is
  ``ε_g²/2``-zCDP (Bun and Steinke 2016, Proposition 1.4); an item's at most ``m`` groups
  compose to ``ρ = m·ε_g²/2``-zCDP, which is ``(ε_r, δ_r)``-DP whenever
  ``ρ + 2√(ρ ln(1/δ_r)) <= ε_r`` (their Proposition 1.3). So ``ε_g = √(2ρ/m)`` with ``ρ`` the
  largest such value (:func:`dpfreq.accounting.zcdp_rho`).

Each group's error falls as its ``ε_g`` grows, so the accounting with the larger ``ε_g`` is the
one with the smaller predicted error in every group; it is picked from public parameters only
(ties go to pure, whose guarantee needs no δ). ``ε_g`` grows like ``1/m`` under pure accounting
and like ``1/√m`` under zCDP, so zCDP wins once ``m > ε_r²/(2ρ)``: at ε = 1 and δ = 1e-6 (a
public list) from ``m = 29`` on (``ε²/(2ρ) ≈ 28.6``).

**Exact rounding.** Each group's mechanism calibrates its noise to
``ε_g' = epsilon_to_fraction(ε_g) <= ε_g`` (:func:`dpfreq.noise.epsilon_to_fraction`: a fraction
rounded down), and ``ε_g`` is chosen so that ``ε_g'`` satisfies the stated bound exactly, on
fractions: ``m·ε_g' <= ε_r`` (pure) or ``m·ε_g'² <= 2ρ`` (zCDP) — the nearest float when it
does (``ε_g = 0.2`` for ``ε_r = 1``, ``m = 5``), else the float rounded down. ``ρ`` itself is
the certified conversion of :func:`dpfreq.accounting.zcdp_rho_at_most` (``4ρL <= (ε_r − ρ)²``
exactly for an upper bound ``L >= ln(1/δ_r)``), the one every release path uses. So the claimed
total is never exceeded.

**The δ split with selection** (as the grouped window releases): the selection takes
``selection_epsilon`` of ε (by default half, :data:`~dpfreq.grouped.selection.SELECTION_SHARE`)
and, under pure accounting, all of δ (the
groups are released at δ = 0); under zCDP accounting it takes the share
:data:`~dpfreq.grouped.selection.ZCDP_DELTA_SHARE` of δ and the release the rest, ``δ_r``. The
selection's ``(ε_s, δ_s)`` and the release's ``(ε_r, δ_r)`` compose to ``(ε, δ)``. With a public
list there is no selection: ``(ε_r, δ_r) = (ε, δ)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpfreq._validate import EPSILON_MIN, check_epsilon, message
from dpfreq.accounting.numbers import float_at_most
from dpfreq.accounting.zcdp import zcdp_rho_at_most
from dpfreq.errors import ParameterError
from dpfreq.grouped.selection import (
    SELECTION_SHARE,
    ZCDP_DELTA_SHARE,
    AnySelection,
    plan_partition_selection,
)
from dpfreq.noise import epsilon_to_fraction

__all__ = ["GroupedAccounting", "check_selection_share", "choose_group_accounting",
           "epsilon_at_most", "release_share"]

def epsilon_at_most(x: Fraction) -> float:
    """The nearest float to ``x > 0`` when the mechanism's ε at it (:func:`epsilon_to_fraction`)
    is at most ``x``; otherwise the largest float at most ``x``."""
    f = float(x)
    if epsilon_to_fraction(f) <= x:
        return f
    return float_at_most(x)


def _sqrt_at_most(x: Fraction) -> float:
    """As :func:`epsilon_at_most` for ``√x``: ``ε_g`` with ``ε_g'² <= x`` for the mechanism's
    ``ε_g' = epsilon_to_fraction(ε_g)``."""
    f = math.sqrt(float(x))
    if epsilon_to_fraction(f) ** 2 <= x:
        return f
    while Fraction(f) ** 2 > x:
        f = math.nextafter(f, 0.0)
    return f


@dataclass(frozen=True)
class GroupedAccounting:
    """The per-group ε of a grouped release of pure-DP mechanisms and why.

    Attributes
    ----------
    accounting : {"pure", "zcdp"}
        The argument the release uses (module docstring).
    epsilon_per_group : float
        ``ε_g``: each group's release alone is pure ``ε_g``-DP.
    candidates : dict of str to float
        The per-group ε of every accounting considered (``"pure"``, and ``"zcdp"`` when
        ``δ > 0`` and ``m >= 2``).
    max_groups_per_item : int
        ``m`` (1 when each row lies in one group).
    release_epsilon, release_delta : float
        ``(ε_r, δ_r)``: what all the groups' releases together satisfy (``δ_r = 0`` under pure
        accounting).
    rho : Fraction or None
        The zCDP ρ an item's ``m`` groups compose to (``m·ε_g²/2``; None under pure accounting).
    selection : SelectionPlan or None
        The partition selection of this accounting (None with a public list).
    why : str
        The comparison that chose the accounting, in words.
    """

    accounting: str
    epsilon_per_group: float
    candidates: dict[str, float]
    max_groups_per_item: int
    release_epsilon: float
    release_delta: float
    rho: Fraction | None
    selection: AnySelection | None
    why: str

    @property
    def guarantee(self) -> str:
        """What the groups' releases satisfy together and alone, in words."""
        m, eps_g = self.max_groups_per_item, self.epsilon_per_group
        alone = f"each group's release alone is ε_g = {eps_g:.6g}-DP (pure, δ = 0)"
        if self.rho is None:
            how = (f"{m} groups × ε_g <= ε_r = {self.release_epsilon:.6g}" if m > 1 else
                   "one group per unit: parallel composition")
            return f"{alone}; together ε_r-DP ({how})"
        return (f"{alone}, hence ε_g²/2-zCDP; an item's {m} groups compose to ρ = "
                f"{float(self.rho):.6g}-zCDP, which is (ε_r = {self.release_epsilon:.6g}, "
                f"δ_r = {self.release_delta:.3g})-DP")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the selection is stated separately)."""
        return {"accounting": self.accounting, "epsilon_per_group": self.epsilon_per_group,
                "candidates": dict(self.candidates), "release_epsilon": self.release_epsilon,
                "release_delta": self.release_delta,
                "rho": None if self.rho is None else float(self.rho),
                "guarantee": self.guarantee, "why": self.why}


def release_share(epsilon: float, delta: float, m: int, named: bool, zcdp: bool,
                  selection_epsilon: float | None = None,
                  selection: str = "auto") -> tuple[Fraction, float, AnySelection | None]:
    """``(ε_r, δ_r, selection)`` of one accounting: what the groups' releases together may
    spend once the private partition selection (None with a public list) has taken its share:
    ``selection_epsilon`` of ε (None: :data:`~dpfreq.grouped.selection.SELECTION_SHARE` of it)
    and all of δ under pure accounting, :data:`~dpfreq.grouped.selection.ZCDP_DELTA_SHARE` of
    it under zCDP; ``selection`` names its mechanism (``"auto"``:
    :func:`~dpfreq.grouped.selection.plan_partition_selection`). ``ε_r`` is exact; ``δ_r`` is
    rounded down."""
    sel = None
    if not named:
        sel_delta = delta * float(ZCDP_DELTA_SHARE) if zcdp else delta
        eps_s = (epsilon * float(SELECTION_SHARE) if selection_epsilon is None
                 else selection_epsilon)
        sel = plan_partition_selection(eps_s, sel_delta, m, selection)
    eps_r = Fraction(epsilon) - (Fraction(sel.epsilon) if sel is not None else 0)
    delta_r = float_at_most(Fraction(delta) - (Fraction(sel.delta) if sel is not None else 0))
    return eps_r, delta_r, sel


def check_selection_share(value: Any, epsilon: float, named: bool) -> float | None:
    """``selection_epsilon`` of a grouped profile or histogram: ``"auto"`` (None: half of ε,
    :data:`~dpfreq.grouped.selection.SELECTION_SHARE` — these releases have no error model to
    weigh the share against) or a number in (0, ε); with a public list only ``"auto"``."""
    if isinstance(value, str) and value == "auto":
        return None
    if named:
        raise ParameterError(message("selection_epsilon", "'auto' when groups= is given "
                                     "(a public list needs no selection)", value))
    x = check_epsilon(value, "selection_epsilon")
    if not x < epsilon:
        raise ParameterError(message("selection_epsilon", f"'auto' or a number in (0, "
                                     f"epsilon = {epsilon:g}) (the release needs the rest)",
                                     value))
    return x


def _route(epsilon: float, delta: float, m: int, named: bool, zcdp: bool,
           selection_epsilon: float | None = None, selection: str = "auto"
           ) -> tuple[float, float, Fraction | None, AnySelection | None]:
    """``(ε_g, δ_r, ρ, selection)`` of one accounting (module docstring)."""
    eps_r, delta_r, sel = release_share(epsilon, delta, m, named, zcdp,
                                        selection_epsilon, selection)
    if not zcdp:  # pure per-group mechanisms: the groups use no δ
        if float(eps_r / m) < EPSILON_MIN:  # unusable: the caller refuses it
            return float(eps_r / m), 0.0, None, sel
        return epsilon_at_most(eps_r / m), 0.0, None, sel
    square = 2 * zcdp_rho_at_most(eps_r, delta_r) / m
    if math.sqrt(float(square)) < EPSILON_MIN:
        return math.sqrt(float(square)), delta_r, None, sel
    eps_g = _sqrt_at_most(square)
    return eps_g, delta_r, m * epsilon_to_fraction(eps_g) ** 2 / 2, sel


def choose_group_accounting(*, epsilon: float, delta: float, max_groups_per_item: int,
                            named: bool, selection_epsilon: float | None = None,
                            selection: str = "auto") -> GroupedAccounting:
    """The accounting with the larger per-group ε (public parameters only; module docstring).

    Parameters
    ----------
    epsilon, delta : float
        The call's checked budget (``delta`` 0 when none was given).
    max_groups_per_item : int
        ``m >= 1``.
    named : bool
        True with a public list of groups (no selection); otherwise ``delta`` is the checked δ
        of the private partition selection.
    selection_epsilon : float or None
        ε of the selection (:func:`check_selection_share`; None: half of ε).
    selection : str
        The selection's mechanism (``"auto"``, ``"truncated_geometric"``, ``"set_union"``).

    Returns
    -------
    GroupedAccounting
        The chosen accounting, its per-group ε, both candidates and why.

    Raises
    ------
    ParameterError
        From the selection's calibration (a δ or ε it cannot use), or when no accounting
        gives each group at least ε = 1e-6.

    Examples
    --------
    >>> a = choose_group_accounting(epsilon=1.0, delta=1e-6, max_groups_per_item=50,
    ...                             named=True)
    >>> a.accounting, round(a.candidates["pure"], 4), round(a.epsilon_per_group, 4)
    ('zcdp', 0.02, 0.0264)
    """
    m = max_groups_per_item
    pure = _route(epsilon, delta, m, named, False, selection_epsilon, selection)
    candidates = {"pure": pure[0]}
    if delta <= 0 or m < 2:
        _check_usable(pure[0], epsilon, m)
        why = ("pure: " + ("delta = 0, so only pure composition applies" if delta <= 0 else
                           "one group per unit, parallel composition (zCDP cannot do better)"))
        return _accounting("pure", pure, candidates, m, epsilon, why)
    zc = _route(epsilon, delta, m, named, True, selection_epsilon, selection)
    candidates["zcdp"] = zc[0]
    _check_usable(max(pure[0], zc[0]), epsilon, m)
    pick = "zcdp" if zc[0] > pure[0] else "pure"
    why = (f"{'zCDP across groups' if pick == 'zcdp' else 'pure per-group budgets'}: the "
           f"larger ε per group (pure ε_r/m = {pure[0]:.6g}, zCDP √(2ρ/m) = {zc[0]:.6g}; each "
           "group's error falls as its ε grows), public parameters only")
    if pure[3] is not None and zc[3] is not None:
        why += (f"; the selection's threshold is {pure[3].threshold} items with all of delta "
                f"(pure) and {zc[3].threshold} with {float(ZCDP_DELTA_SHARE):g} of it (zCDP)")
    return _accounting(pick, zc if pick == "zcdp" else pure, candidates, m, epsilon, why)


def _check_usable(eps_g: float, epsilon: float, m: int) -> None:
    """Refuse a per-group ε below the library's smallest ε (nothing is spent yet)."""
    if eps_g < EPSILON_MIN:
        raise ParameterError(message(
            "epsilon", f"large enough to give each group at least ε = {EPSILON_MIN:g} "
            f"(m = {m} groups per item share it, after the selection's half when groups are "
            f"selected; here {eps_g:.3g} per group)", epsilon))


def _accounting(pick: str, route: tuple[float, float, Fraction | None, AnySelection | None],
                candidates: dict[str, float], m: int, epsilon: float,
                why: str) -> GroupedAccounting:
    eps_g, delta_r, rho, sel = route
    eps_r = epsilon - (sel.epsilon if sel is not None else 0.0)
    return GroupedAccounting(pick, eps_g, candidates, m, eps_r, delta_r, rho, sel, why)
