"""Losses to and from text: how a ledger stores them (canonical JSON, hashed with the row)."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from dpfreq.accounting.losses import (
    ApproximateDP,
    Composed,
    PrivacyLoss,
    PureDP,
    ZeroConcentratedDP,
)
from dpfreq.accounting.mechanisms import DiscreteGaussian, DiscreteLaplace, PartitionSelection

__all__ = ["loss_from_dict", "loss_from_text", "loss_text", "stated_loss"]


def _fraction(value: Any) -> Fraction:
    if not isinstance(value, str):
        raise ValueError("a fraction is stored as 'p/q' text")
    out = Fraction(value)
    if out < 0:
        raise ValueError("a negative parameter")
    return out


def _count(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError("a count is an integer >= 1")
    return value


def loss_from_dict(data: Any) -> PrivacyLoss:
    """The loss a :meth:`~dpfreq.accounting.losses.PrivacyLoss.to_dict` mapping describes.

    Raises
    ------
    ValueError
        If the mapping is not one (unknown kind, missing or malformed parameter).

    Examples
    --------
    >>> loss_from_dict({"kind": "pure", "epsilon": "1/2"})
    PureDP(epsilon=Fraction(1, 2))
    """
    if not isinstance(data, dict):
        raise ValueError("a loss is a mapping")
    kind = data.get("kind")
    try:
        if kind == "pure":
            return PureDP(_fraction(data["epsilon"]))
        if kind == "approximate":
            return ApproximateDP(_fraction(data["epsilon"]), _fraction(data["delta"]))
        if kind == "zcdp":
            return ZeroConcentratedDP(_fraction(data["rho"]))
        if kind == "discrete_laplace":
            return DiscreteLaplace(_fraction(data["gamma"]), _count(data["sensitivity"]))
        if kind == "discrete_gaussian":
            return DiscreteGaussian(_fraction(data["sigma2"]), _fraction(data["sensitivity"]),
                                    bool(data["one_coordinate"]))
        if kind == "partition_selection":
            return PartitionSelection(_fraction(data["gamma"]),
                                      _fraction(data["single_probability"]),
                                      _count(data["max_groups"]))
        if kind == "composed":
            return Composed(tuple(loss_from_dict(p) for p in data["parts"]))
    except (KeyError, TypeError, ZeroDivisionError) as exc:
        raise ValueError(f"a malformed {kind} loss") from exc
    raise ValueError(f"unknown loss kind {kind!r}")


def loss_text(loss: PrivacyLoss) -> str:
    """The canonical JSON text of a loss (sorted keys, no spaces): stored and hashed."""
    return json.dumps(loss.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def loss_from_text(text: str) -> PrivacyLoss:
    """The loss of :func:`loss_text` (a ValueError for anything else)."""
    try:
        return loss_from_dict(json.loads(text))
    except json.JSONDecodeError as exc:
        raise ValueError("not JSON") from exc


def stated_loss(epsilon: Fraction, delta: Fraction) -> PrivacyLoss:
    """The loss of a release known only by its ``(ε, δ)``: any such mechanism is dominated by
    it (:class:`~dpfreq.accounting.losses.PureDP` or
    :class:`~dpfreq.accounting.losses.ApproximateDP`).

    Examples
    --------
    >>> stated_loss(Fraction(1, 2), Fraction(0))
    PureDP(epsilon=Fraction(1, 2))
    """
    return PureDP(epsilon) if delta == 0 else ApproximateDP(epsilon, delta)
