"""Units of privacy as currencies: which spends convert to a budget's unit, and how.

Over a public domain an item's rows removed are one particular replacement (by no rows), so
``item`` neighbours are ``item_replace`` neighbours: a guarantee at ``item_replace`` holds at
``item`` unchanged. A replacement is a removal followed by an addition, so a guarantee at
``item`` gives the guarantee of a group of two at ``item_replace``
(:meth:`~dpfreq.accounting.losses.PrivacyLoss.doubled`). ``event`` and ``device`` convert to no
other unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from dpfreq._validate import check_delta, check_epsilon, message
from dpfreq.accounting.composition import group_delta
from dpfreq.accounting.losses import PrivacyLoss
from dpfreq.accounting.numbers import exact_fraction
from dpfreq.accounting.serial import stated_loss
from dpfreq.errors import ParameterError

__all__ = ["convert_loss", "convert_spend", "plan_items", "prepare_spend"]

# (unit spent at, unit of the budget) → the multiplier of ε that converts soundly
_CONVERSIONS = {("item", "item_replace"): 2, ("item_replace", "item"): 1}
_APART = {
    "event": "an ε at 'event' protects one row, not one item's rows: event and item are "
             "different currencies (an item with k rows is only protected at kε)",
    "device": "'device' is the longitudinal system's unit and converts to no other",
}


def convert_spend(epsilon: Fraction, delta: Fraction, unit: str | None,
                  budget_unit: str | None) -> tuple[Fraction, Fraction, str | None]:
    """``(ε', δ', note)``: a spend at ``unit`` as charged to a budget stated at ``budget_unit``.

    Parameters
    ----------
    epsilon, delta : Fraction
        The spend, at ``unit``.
    unit : str or None
        The unit the release protects.
    budget_unit : str or None
        The unit the budget is stated at (None: no conversion, the spend is charged as is).

    Returns
    -------
    (Fraction, Fraction, str or None)
        The charge, and a sentence saying how it was converted (None when not converted).

    Raises
    ------
    ParameterError
        When the spend does not convert soundly (``event`` and ``device`` convert to no other
        unit), or has no unit while the budget has one.

    Notes
    -----
    Over a public domain an item's rows removed are one particular replacement (by no rows),
    so ``item`` neighbours are ``item_replace`` neighbours: (ε, δ)-DP at ``item_replace``
    implies the same at ``item`` (factor 1). A replacement is a removal followed by an
    addition, so (ε, δ)-DP at ``item`` implies ``(2ε, (1 + e^ε)δ)`` at ``item_replace``
    (group privacy for 2; ``e^ε`` rounded up).

    Examples
    --------
    >>> convert_spend(Fraction(1, 2), Fraction(0), "item", "item_replace")[:2]
    (Fraction(1, 1), Fraction(0, 1))
    """
    if budget_unit is None or unit == budget_unit:
        return epsilon, delta, None
    if unit is None:
        raise ParameterError(message("unit", f"given (the budget is stated at unit="
                                     f"{budget_unit!r})", unit))
    factor = _CONVERSIONS.get((unit, budget_unit))
    if factor is None:
        reason = _APART.get(unit) or _APART.get(budget_unit) or "not a unit of privacy"
        raise ParameterError(message("unit", f"{budget_unit!r} or convertible to it "
                                     f"({reason})", unit))
    if factor == 1:
        return epsilon, delta, (f"ε at {unit!r} counts as ε at {budget_unit!r} (removing an "
                                "item's rows is one replacement of them)")
    return 2 * epsilon, group_delta(epsilon, delta, 2), (
        f"ε at {unit!r} counts as 2ε at {budget_unit!r} (a replacement is a removal and an "
        "addition)")


def convert_loss(loss: PrivacyLoss, unit: str | None, budget_unit: str | None) -> PrivacyLoss:
    """The loss of a spend at ``unit`` as charged to a budget at ``budget_unit``: the same loss,
    or its group of two (:meth:`~dpfreq.accounting.losses.PrivacyLoss.doubled`) where
    :func:`convert_spend` doubles ε; refused where it refuses.

    Examples
    --------
    >>> from dpfreq.accounting import PureDP
    >>> convert_loss(PureDP(Fraction(1, 4)), "item", "item_replace")
    PureDP(epsilon=Fraction(1, 2))
    """
    epsilon, _, _ = convert_spend(Fraction(1), Fraction(0), unit, budget_unit)
    return loss.doubled() if epsilon == 2 else loss


def prepare_spend(epsilon: Any, delta: Any, unit: str | None, budget_unit: str | None,
                  loss: Any) -> tuple[Fraction, Fraction, PrivacyLoss, str | None]:
    """``(ε, δ, loss, note)`` of a spend as charged at ``budget_unit``: checked, converted, and
    its loss (the one given, or the one its (ε, δ) states) shown to imply the charge.

    Raises
    ------
    ParameterError
        On a bad ε, δ, unit or loss, or a loss that does not imply the stated (ε, δ).

    Examples
    --------
    >>> prepare_spend(0.25, 0.0, "item", "item_replace", None)[:3]
    (Fraction(1, 2), Fraction(0, 1), PureDP(epsilon=Fraction(1, 2)))
    """
    check_epsilon(epsilon, "epsilon")
    check_delta(delta, "delta")
    e0, d0 = exact_fraction(epsilon), exact_fraction(delta)
    if loss is not None and not isinstance(loss, PrivacyLoss):
        raise ParameterError(message("loss", "a dpfreq.accounting PrivacyLoss or None",
                                     type(loss).__name__))
    e, d, note = convert_spend(e0, d0, unit, budget_unit)
    charged = convert_loss(loss if loss is not None else stated_loss(e0, d0), unit,
                           budget_unit)
    if loss is not None and not charged.implies(e, d):
        raise ParameterError(message("loss", f"a loss that implies the stated (epsilon="
                                     f"{float(e):g}, delta={float(d):g})", charged.describe()))
    return e, d, charged, note


def plan_items(losses: Any, delta: Any, unit: str | None,
               budget_unit: str | None) -> tuple[list[PrivacyLoss], Fraction]:
    """The releases of a declared plan as charged at ``budget_unit``, and the plan's δ.

    Raises
    ------
    ParameterError
        If ``losses`` is not a non-empty sequence of losses, ``delta`` not a δ, or the unit
        does not convert.

    Examples
    --------
    >>> from dpfreq.accounting import PureDP
    >>> plan_items([PureDP(Fraction(1, 4))], 1e-6, "item", "item_replace")
    ([PureDP(epsilon=Fraction(1, 2))], Fraction(1, 1000000))
    """
    dlt = exact_fraction(check_delta(delta, "delta"))
    if not isinstance(losses, Sequence) or not losses or \
            not all(isinstance(x, PrivacyLoss) for x in losses):
        raise ParameterError(message("losses", "a non-empty sequence of PrivacyLoss",
                                     type(losses).__name__))
    return [convert_loss(x, unit, budget_unit) for x in losses], dlt
